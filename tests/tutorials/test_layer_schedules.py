"""The layer-schedules tutorial, as the build executed it, checked against references computed here.

The cache bill against the published configurations typed in tests/support/modern_reference.py
and the formula by hand; the toy's caches against its uncached full pass and the bytes by hand; the
cap against PyTorch's flex_attention and a float64 softmax written out here; the twelve models of the
high learning rate read from the execution (never trained again), run here in float64 NumPy, and
every claim checked on every seed with margins far from what the runs give (the worst seeds of both
arithmetics, seeds 0 to 5, are in the comments).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attn_ref.modern import FULL, SLIDING, generate
from attn_ref.training import repeated_tokens
from tests.support.modern_reference import QUOTED, bill_by_hand, decoder_np
from tests.support.reference import as64, softmax
from tests.support.training_claims import LN_64, SEEDS

V, T = 64, 32


def test_the_schedules(values, printed):
    assert [i for i, kind in enumerate(values["gemma3"]) if kind == FULL] == list(range(5, 62, 6))
    assert "".join("L" if k == FULL else "S" for k in values["nanochat"]) == "SSSL" * 4 + "SSSL"
    assert "Gemma 3 27B, full layers: [5, 11, 17, 23, 29, 35, 41, 47, 53, 59]" in printed


@pytest.mark.parametrize("row", QUOTED, ids=[r[0] for r in QUOTED])
def test_the_bill_by_hand(values, printed, row):
    name, n, kv, d, _, _, context = row
    ours, full = values["bill"][name]
    assert ours == bill_by_hand(name, context)
    assert full == 2 * kv * d * 2 * context * n
    line = next(line for line in printed.splitlines() if line.startswith(name + " "))
    assert f"{2 * kv * d * 2 * n:,}" in line and f"{full / ours:.2f}x" in line


def test_the_savings_the_prose_names(values):
    ratio = {name: full / ours for name, (ours, full) in values["bill"].items()}
    for name in ("Gemma 3 1B", "Gemma 3 4B", "Gemma 3 12B", "Gemma 3 27B"):
        assert 5.5 < ratio[name] < 6.6  # "about six times" (5.77 to 6.51)
    for name in ("Gemma 2 2B", "Gemma 2 9B", "Gemma 2 27B"):
        assert ratio[name] == pytest.approx(4 / 3)  # "saves a quarter of its bill"
    for name in ("gpt-oss-20b", "gpt-oss-120b"):
        assert ratio[name] == pytest.approx(2, rel=2e-3)  # "halves it"
    # measured elsewhere: gguf-parser-go #32 (49,152 B per token), sglang #30091 (192 MiB at 4096)
    assert bill_by_hand("gpt-oss-20b", 1, all_full=True) == 49152
    assert bill_by_hand("gpt-oss-20b", 4096, all_full=True) == 192 * 2**20


def test_the_toy_caches(values, printed):
    toy, prompt = values["toy"], values["prompt"]
    full_pass = generate(toy, prompt, 64)  # no cache: the whole text at every step
    assert torch.equal(values["full_pass"], full_pass)
    assert torch.equal(values["cached"], full_pass)
    assert torch.equal(values["masked_only"], full_pass)
    per_position = 2 * 2 * 8 * 4  # K and V, H_kv = 2, d_k = 8, float32
    read = 16 + 64 - 1
    assert values["cache"].nbytes == 2 * read * per_position + 10 * 8 * per_position == 30464
    assert values["kept_all"].nbytes == 12 * read * per_position == 121344
    assert 0.24 < 30464 / 121344 < 0.26  # "about a quarter", "about four times"
    assert "windowed cache, same tokens: True" in printed
    assert "every key kept, same tokens: True" in printed
    assert "by the formula: 30464" in printed


def test_the_cap_against_pytorch_and_numpy(values):
    g = torch.Generator().manual_seed(1)
    q, k, v = as64(8 * torch.randn(3, 1, 2, 12, 4, generator=g))  # the page's draw
    scores = 50 * np.tanh(q @ k.transpose(0, 1, 3, 2) / 2 / 50)
    expected = softmax(np.where(np.tri(12, dtype=bool), scores, -np.inf)) @ v
    np.testing.assert_allclose(as64(values["ours"]), expected, atol=1e-4)
    assert values["flex_difference"] < 1e-4


def test_qk_norm_bound(values):
    assert values["peak"] <= math.sqrt(32) * (1 + 1e-5)
    assert values["exercise_3"] == pytest.approx(math.sqrt(32), rel=1e-4)


@pytest.fixture(scope="module")
def final(values):
    """Each model's loss on its seed's test batch and its largest raw logit there, in float64."""
    out = {}
    for (variant, seed), (model, _) in values["runs"].items():
        tokens = repeated_tokens(256, T, V, (8, 16), torch.Generator().manual_seed(1000 + seed))[0]
        run = decoder_np(model, tokens.numpy())
        out[variant, seed] = run["losses"].mean()
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_the_page_losses_are_float64s(values, final, seed):
    for variant in ("neither", "cap 50", "QK-norm"):
        assert values["losses"][variant, seed] == pytest.approx(final[variant, seed], rel=1e-3, abs=1e-3)


@pytest.mark.parametrize("seed", SEEDS)
def test_neither_diverges(values, final, seed):
    history = values["runs"]["neither", seed][1]
    assert max(history.max_logit) > 1e5  # worst 9.3e5
    assert final["neither", seed] > LN_64 + 6  # worst 21.5


@pytest.mark.parametrize("seed", SEEDS)
def test_the_cap_stops_the_blow_up_not_the_growth(values, final, seed):
    history = values["runs"]["cap 50", seed][1]
    assert abs(final["cap 50", seed] - LN_64) < 1.0  # worst 0.69
    assert max(history.max_logit) > 100  # worst 702: the raw logits grow under the cap


@pytest.mark.parametrize("seed", SEEDS)
def test_qk_norm_stops_the_growth(values, final, seed):
    history = values["runs"]["QK-norm", seed][1]
    assert max(history.max_logit) < 10  # worst 5.5
    assert final["QK-norm", seed] < LN_64 - 0.05  # worst 4.036, ln 64 = 4.159
    assert final["cap 50", seed] - final["QK-norm", seed] > 0.1  # worst 0.22


def test_the_window_forgotten_at_decode(values, printed):
    toy = values["toy"]
    right = values["full_pass"]  # the uncached pass, recomputed in test_the_toy_caches
    tokens = values["tokens"]
    differ = (tokens != right)[0]
    assert torch.equal(tokens[:, :17], right[:, :17])  # the prompt and its first token were right
    assert differ.sum() > 10
    first = int(differ.nonzero()[0])
    assert f"{int(differ.sum())} of 80 tokens differ, from position {first}" in printed
    assert [layer.window for layer in values["toy"].layers] == [
        8 if k == SLIDING else None for k in toy.layer_types
    ]


def test_the_cap_that_does_not_cap(printed):
    assert f"x * tanh(x / 30) = {124 * math.tanh(124 / 30):.1f}" in printed
    assert f"30 tanh(x / 30) = {30 * math.tanh(124 / 30):.1f}" in printed
    assert 124 * math.tanh(124 / 30) > 120 > 30


def test_exercises(values, printed):
    at = np.arange(1024)
    distance = at[:, None] - at[None, :]
    assert ((distance[-1] >= 0) & (distance[-1] <= 512)).sum() == 513
    assert values["same_mask"] is True
    sizes = list(values["exercise_2"].values())
    assert sizes == [bill_by_hand("Gemma 3 4B", 32768), bill_by_hand("Gemma 3 4B", 32768, all_full=True)]
