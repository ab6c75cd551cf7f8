"""The layer-schedules tutorial, as the build executed it, checked against references computed here.

The cache bill against the published configurations typed in tests/support/modern_reference.py
and the formula by hand; the toy's caches against its uncached full pass and the bytes by hand; the
cap against PyTorch's flex_attention and a float64 softmax written out here; the twenty models of the
two learning rates read from the execution (never trained again), run here in float64 NumPy, and
every claim checked on every seed with margins far from what the runs give (the runs of seeds 0 to 5
under AVX-512 with two threads, and of seeds 0 to 3 under PyTorch's default kernels and AVX2 with
one thread, are in the comments). A diverging run is chaotic: how far its logits grow differs from
one machine to the next, so its tests compare it with what QK-norm allows, a bound derived from the
trained gains, never with a size read off one run.
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


def test_the_bill_beside_what_engines_keep(values, printed):
    """gpt-oss-20b against the numbers quoted from sglang #30091 (192.0 MiB full history, 102.0 MiB
    windowed, at 4,096 tokens) and gguf-parser-go #32 (49,152 B a token charged; llama.cpp's ~3.00
    GiB full and ~0.05 GiB windowed at 131,072): the full parts agree, the windowed ones are larger
    than the formula's, which is a lower bound."""
    entry = 2 * 8 * 64 * 2  # K and V, 8 heads of 64, bf16: one layer, one token
    assert bill_by_hand("gpt-oss-20b", 1, all_full=True) == 24 * entry == 49152
    assert bill_by_hand("gpt-oss-20b", 4096, all_full=True) == 192 * 2**20
    assert bill_by_hand("gpt-oss-20b", 4096) == 12 * entry * (4096 + 128) == 99 * 2**20
    assert (102 * 2**20 - 12 * entry * 4096) / (12 * entry) == values["kept"] == 256
    assert values["windowed"] == 12 * 128 * entry < 0.05 * 2**30
    assert values["full_layers"] == 12 * entry * 131_072 == 3 * 2**30
    assert "4,096 tokens: 99.0 MiB with the schedule, 192.0 MiB all full" in printed
    assert "131,072 tokens: sliding layers 0.0029 GiB, full layers 3.00 GiB" in printed


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


def test_qk_norm_bound(values, printed):
    assert values["peak"] <= math.sqrt(32) * (1 + 1e-5)
    assert values["exercise_3"] == pytest.approx(math.sqrt(32), rel=1e-4)
    assert f"Gemma 3 27B's bound: {128 / math.sqrt(168):.2f} times its gains" in printed


HIGH = ("neither", "cap 50", "QK-norm")  # at 0.04
REFERENCE = ("neither, 0.01", "QK-norm, 0.01")


def gains_bound(model) -> float:
    """QK-norm's bound from its gains, sqrt(d) max|g_q| max|g_k|, over the layers (float64)."""
    return max(
        math.sqrt(layer.head_dim)
        * np.abs(as64(layer.q_norm.weight)).max()
        * np.abs(as64(layer.k_norm.weight)).max()
        for layer in model.layers
    )


@pytest.fixture(scope="module")
def final(values):
    """Each model on its seed's test batch, in float64: its loss, its largest raw |score| and the
    share of its raw causal scores past the cap (50), over its layers."""
    out = {}
    allowed = np.tri(T, dtype=bool)
    for (variant, seed), (model, _) in values["runs"].items():
        tokens = repeated_tokens(256, T, V, (8, 16), torch.Generator().manual_seed(1000 + seed))[0]
        run = decoder_np(model, tokens.numpy())
        raw = [layer["raw_scores"][..., allowed] for layer in run["layers"]]
        out[variant, seed] = {
            "loss": run["losses"].mean(),
            "largest": max(layer["max_logit"] for layer in run["layers"]),
            "past 50": np.mean([(np.abs(r) > 50).mean() for r in raw]),
            "past 150": np.mean([(np.abs(r) > 150).mean() for r in raw]),
        }
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_the_page_measures_what_float64_measures(values, final, seed):
    for variant in HIGH + REFERENCE:
        assert values["losses"][variant, seed] == pytest.approx(
            final[variant, seed]["loss"], rel=1e-3, abs=1e-3
        )
    for at in (50, 150):
        assert values["past"][at][seed] == pytest.approx(final["cap 50", seed][f"past {at}"], abs=2e-3)
    assert values["bounds"][seed] == pytest.approx(gains_bound(values["runs"]["QK-norm", seed][0]), rel=1e-6)


@pytest.mark.parametrize("seed", SEEDS)
def test_neither_diverges(values, final, seed):
    # Orders of magnitude past what QK-norm allows the same model from the same start: its bound
    # from the trained gains (runs: 5.3 to 8.4). The peaks differ wildly from machine to machine
    # (runs: 3.5e4 to 2e8), so only this is checked: more than 100 times the bound.
    bound = gains_bound(values["runs"]["QK-norm", seed][0])
    assert max(values["runs"]["neither", seed][1].max_logit) > 100 * bound
    assert final["neither", seed]["loss"] > LN_64 + 1  # "worse than guessing" (runs: 21 or more)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_cap_stops_the_blow_up_not_the_growth(values, final, seed):
    history = values["runs"]["cap 50", seed][1]
    # "a little above ln 64" (runs: 0.10 to 0.49 above)
    assert LN_64 < final["cap 50", seed]["loss"] < LN_64 + 1
    # The raw logits grow far past the cap (runs: a largest of 700 or more) ...
    assert max(history.max_logit) > 2 * 50
    # ... "a large share" of them past 50, where the cap's slope is under 0.42 (runs: 32% to 76%).
    assert final["cap 50", seed]["past 50"] > 0.15


@pytest.mark.parametrize("seed", SEEDS)
def test_qk_norm_stops_the_growth_and_learns_little(values, final, seed):
    model, history = values["runs"]["QK-norm", seed]
    bound = gains_bound(model)
    # The bound holds on every score (Cauchy-Schwarz; float64, up to its rounding) ...
    assert final["QK-norm", seed]["largest"] <= bound * (1 + 1e-9)
    # ... and the largest logit of training stays a few units, under it (runs: 4.5 to 5.5).
    assert max(history.max_logit) < 10
    assert max(history.max_logit) <= bound
    # "a little below ln 64" (runs: 3.97 to 4.04, ln 64 = 4.16)
    assert LN_64 - 1 < final["QK-norm", seed]["loss"] < LN_64 - 0.05


@pytest.mark.parametrize("seed", SEEDS)
def test_at_a_sane_rate_the_model_learns(final, seed):
    # "far below ln 64" (runs: 2.15 to 2.47), with and without QK-norm
    for variant in REFERENCE:
        assert final[variant, seed]["loss"] < LN_64 - 1.0


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
