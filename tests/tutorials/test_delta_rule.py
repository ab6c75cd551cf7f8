"""The delta-rule tutorial, as the build executed it, checked against references computed here.

The two forms are checked against the papers' recurrence written out in float64 NumPy
(tests/support/delta_rule_reference.py), on inputs drawn here the way the page draws them; the
counts of work, the numbers kept and the bytes by hand; Qwen3-Next's figures from its configuration,
typed here with their source. The trained recall models are read from the execution (never trained
again) and answer contexts drawn here; every claim the page makes about them is checked for each
seed, with margins far from what the runs give, on the page's accuracies and on the ones measured
here. What a loop only printed is read from the numbers its cells printed (tests/support/shown.py).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tests.support.compression_reference import draw_contexts
from tests.support.delta_rule_reference import delta_rule_bound, delta_rule_np
from tests.support.reference import EPS32, EPS64, as64
from tests.support.shown import assert_printed, half_unit, sci_rtol, verdicts

PAIRS = (1, 2, 4, 8, 16, 32, 64)
ONE_LAYER = ("softmax", "linear", "DeltaNet", "Gated DeltaNet")
DELTA = ("DeltaNet", "Gated DeltaNet")
STACKS = ("3 GDN + softmax", "4 GDN")
# huggingface/transformers, src/transformers/models/qwen3_next/configuration_qwen3_next.py:
# num_hidden_layers 48, num_key_value_heads 2, head_dim 256, linear_key_head_dim 128,
# linear_value_head_dim 128, linear_num_value_heads 32, full_attention_interval 4 (the 4th of 4).
QWEN3_NEXT = {
    "layers": 48,
    "kv_heads": 2,
    "head_dim": 256,
    "d_k": 128,
    "d_v": 128,
    "value_heads": 32,
    "every": 4,
}


def draw_np(seed: int, gated: bool) -> list[np.ndarray]:
    """The page's draw, written out here: (B, H, T, d) = (2, 4, 256, 32), unit keys."""
    g = torch.Generator().manual_seed(seed)
    shape = (2, 4, 256, 32)
    q, k, v = torch.randn(3, *shape, generator=g, dtype=torch.float64)
    k = k / k.norm(dim=-1, keepdim=True)
    beta = torch.rand(shape[:3], generator=g, dtype=torch.float64)
    log_alpha = -0.1 * torch.rand(shape[:3], generator=g, dtype=torch.float64)
    return [x.numpy() for x in [q, k, v, beta] + ([log_alpha] if gated else [])]


def smooth(history) -> np.ndarray:
    """10-step means: entry i is the mean of steps i + 1 .. i + 10."""
    return np.convolve(np.asarray(history, dtype=np.float64), np.ones(10) / 10, mode="valid")


def test_the_picture_and_the_first_writes(tutorial, values):
    S = as64(values["S"])
    np.testing.assert_array_equal(S, as64(values["values"]))  # four orthogonal keys, beta = 1: stored exactly
    keys = np.vstack([np.eye(4), np.eye(4)[:1]])
    for b in (1.0, 0.5):
        # by hand: each write moves row 0 a share b of the way from where it is to the value written
        first = [b * 1.0, b * 2.0]  # from zeros toward (1, 2)
        second = [first[0] + b * (10 - first[0]), first[1] + b * (20 - first[1])]  # toward (10, 20)
        _, after_four = delta_rule_np(keys[:4], keys[:4], S, np.full(4, b))
        outputs, state = delta_rule_np(keys, keys, np.vstack([S, [[10.0, 20.0]]]), np.full(5, b))
        assert after_four.T[0].tolist() == first and state.T[0].tolist() == second and outputs.shape == (5, 2)
        assert_printed(tutorial, [b, 0, *first, *second], gaps=True)
    # beta = 0.5 does not end halfway between the picture's values (5.5, 11): the first write went halfway too
    assert second == [5.25, 10.5]
    assert_printed(tutorial, [0, 11.0, 22.0], gaps=True)


def test_unit_keys_keep_the_state_bounded(tutorial, values):
    raw, vals = as64(values["raw"])[0], as64(values["vals"])[0]
    unit = raw / np.linalg.norm(raw, axis=-1, keepdims=True)
    half = np.full(64, 0.5)
    _, S_unit = delta_rule_np(unit, unit, vals, half)
    _, S_raw = delta_rule_np(raw, raw, vals, half)
    norms = {"unit keys": np.linalg.norm(S_unit), "raw keys": np.linalg.norm(S_raw)}
    for name, norm in norms.items():
        assert values["norms"][name] == pytest.approx(norm, rel=1e-9)
    assert norms["unit keys"] <= 64 * np.abs(vals).max()  # each write at most |v|, nothing grows
    assert norms["raw keys"] > 1e6 * norms["unit keys"]
    assert np.mean((raw**2).sum(-1)) == pytest.approx(16, abs=3)  # "16 on average"
    assert_printed(tutorial, [norms["unit keys"], 64, norms["raw keys"]], rtol=sci_rtol(2), gaps=True)


def test_chunked_equals_recurrent_to_the_rounding_of_each_precision(tutorial, values):
    gaps, sizes = values["gaps"], values["sizes"]
    assert list(gaps) == [(d, g) for d in (torch.float64, torch.float32) for g in (False, True)]
    for gated in (False, True):
        q, k, v, beta, *rest = draw_np(0, gated)
        alpha = np.exp(rest[0]) if gated else None
        expected, _ = delta_rule_np(
            q[1, 3], k[1, 3], v[1, 3], beta[1, 3], None if alpha is None else alpha[1, 3]
        )
        assert np.abs(expected).max() <= sizes[torch.float64, gated][0] * (1 + 1e-9)
        for dtype, eps in ((torch.float64, EPS64), (torch.float32, EPS32)):
            bound = delta_rule_bound(eps, 256, 32, 32, 64, float(np.abs(q).max()), float(np.abs(v).max()))
            output, state, gradients = gaps[dtype, gated]
            assert output <= bound and state <= bound and gradients <= 256 * bound
        # float64: below 1e-12; float32: larger by about the ratio of the two roundings, 2^29, within a
        # factor of ten (the page's words); the gradients' gaps the largest in each row
        assert max(gaps[torch.float64, gated]) < 1e-12
        ratios = [
            a / b / 2**29 for a, b in zip(gaps[torch.float32, gated], gaps[torch.float64, gated], strict=True)
        ]
        assert all(0.1 < r < 10 for r in ratios), ratios
        assert_printed(tutorial, ratios, atol=half_unit(2))
        for dtype in (torch.float64, torch.float32):
            output, state, gradients = gaps[dtype, gated]
            assert gradients >= max(output, state)
    assert_printed(tutorial, [2**29], rtol=sci_rtol(1), gaps=True)
    for row in gaps.values():
        assert_printed(tutorial, row, rtol=sci_rtol(1), gaps=True)
    largest = max(s[0] for s in sizes.values())
    assert 5 < largest < 50 and 50 < max(s[1] for s in sizes.values()) < 1000  # "about 20", "a few hundred"


def test_the_chunks_transitions_multiply_into_the_wy_form(tutorial, values):
    """(I - b_5 k_5^T k_5) ... (I - b_1 k_1^T k_1) = I - K^T W, W = (I + A)^-1 diag(b) K, in NumPy."""
    g = torch.Generator().manual_seed(1)
    k = torch.randn(5, 4, generator=g, dtype=torch.float64).numpy()
    k = k / np.linalg.norm(k, axis=-1, keepdims=True)
    b = np.full(5, 0.5)
    np.testing.assert_array_equal(as64(values["k_c"]), k)
    product = np.eye(4)
    for k_i, b_i in zip(k, b, strict=True):
        product = (np.eye(4) - b_i * np.outer(k_i, k_i)) @ product
    A = np.tril(b[:, None] * (k @ k.T), -1)
    W = np.linalg.solve(np.eye(5) + A, b[:, None] * k)
    assert np.abs(product - (np.eye(4) - k.T @ W)).max() < 1e-14  # the identity, here
    assert values["wy_gap"] < 1e-14  # and on the page
    assert_printed(tutorial, [values["wy_gap"]], atol=1e-14)


def test_the_work_counted_by_hand(tutorial, values):
    d, T = 128, 4096
    chunks = T // 64
    chunked = chunks * (2 * 64 * 64 * d + 64 * 64 * d + 3 * 64 * d * d + 2 * d * 64 * 63 // 2)
    by_hand = {
        "linear attention, recurrent": 2 * d * d,
        "delta rule, recurrent": 3 * d * d,
        "delta rule, chunks of 64": chunked / T,
        "causal softmax, mean": d * (T + 1),  # sum over t of 2 d (t + 1), over T
    }
    assert values["per_token"] == pytest.approx(by_hand, rel=1e-12)
    assert_printed(tutorial, list(by_hand.values()), atol=0.5, gaps=True)
    # the table's gates, the ratios' gates, then the FLOP counter
    assert verdicts(tutorial)[:7] == [False, True, False, True, False, True, True]
    assert (
        by_hand["delta rule, recurrent"]
        < by_hand["delta rule, chunks of 64"]
        < 2 * by_hand["delta rule, recurrent"]
    )
    assert values["ratio"] == pytest.approx(chunked / T / (3 * d * d))
    assert_printed(tutorial, [128, 64, values["ratio"]], atol=[0, 0, half_unit(2)], gaps=True)


# --- recall -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def recall_here(values):
    """Each kept model's accuracy on 4,096 queries per count drawn here: {kind: (seeds, pairs)}."""
    g = torch.Generator().manual_seed(2025)
    contexts = [draw_contexts(g, 512, n, 8) for n in PAIRS]
    out = {}
    for kind in (*ONE_LAYER, *STACKS):
        rows = []
        for seed in (0, 1, 2):
            model = values["models"][kind, seed]
            with torch.no_grad():
                rows.append(
                    [(model(k, v, q).argmax(-1) == a).float().mean().item() for k, v, q, a in contexts]
                )
        out[kind] = np.array(rows)
    return out


def test_recall_on_contexts_drawn_here(values, recall_here):
    """Two estimates of one accuracy from 4,096 queries each differ by less than 6 standard errors
    (sqrt(1/4 / 4096) each, at most) but for a chance below 1e-8."""
    assert values["PAIRS"] == PAIRS and values["SEEDS"] == (0, 1, 2) and values["STEPS"] == 300
    margin = 6 * math.sqrt(2 * 0.25 / 4096)
    for kind, table in recall_here.items():
        assert np.abs(table - values["recall"][kind]).max() < margin, kind


@pytest.mark.parametrize("source", ["page", "here"])
def test_the_claims_about_recall_hold_for_every_seed(values, recall_here, source):
    recall = values["recall"] if source == "page" else recall_here
    for seed in (0, 1, 2):
        assert recall["softmax"][seed].min() > 0.98 and recall["3 GDN + softmax"][seed].min() > 0.98
        for kind in ("linear", *DELTA):  # every one-layer model with a state falls, below 1/2 at 64
            assert recall[kind][seed, 0] > 0.95 and recall[kind][seed, -1] < 0.45
    # From 8 pairs on, every delta-rule model recalls more than every linear-attention model.
    lowest = np.minimum(recall["DeltaNet"], recall["Gated DeltaNet"]).min(axis=0)
    assert (lowest[3:] - recall["linear"].max(axis=0)[3:] > 0.02).all()
    # Four Gated DeltaNet layers stay far below the hybrid at 64 pairs.
    assert recall["3 GDN + softmax"][:, -1].min() - recall["4 GDN"][:, -1].max() > 0.3


def test_the_plateau_and_why_300_steps(tutorial, values):
    losses, plateau = values["losses"], values["plateau"]
    first = {}
    for (kind, seed), history in losses.items():
        assert len(history) == 300
        if kind not in ONE_LAYER:
            continue
        s = smooth(history)
        first[kind, seed] = 10 + int(np.argmax(s < 4.0))
        assert plateau[kind, seed] == pytest.approx((first[kind, seed], s[140], s[-1]))
        assert s[0] > math.log(64) - 0.2  # every model starts near ln 64
    for seed in (0, 1, 2):  # softmax within a few dozen steps, linear attention next, the delta rule last
        assert first["softmax", seed] < 40 and first["softmax", seed] < first["linear", seed]
        assert min(first[kind, seed] for kind in DELTA) > first["linear", seed]
    slowest = max(plateau[kind, seed][1] - plateau[kind, seed][2] for kind in DELTA for seed in (0, 1, 2))
    assert slowest > 1.0  # at step 150 the slowest is still far above its final loss
    for kind in ONE_LAYER:
        for seed in (0, 1, 2):
            assert_printed(tutorial, plateau[kind, seed], atol=[0, half_unit(2), half_unit(2)])
    margin = values["margin"]
    lowest = np.minimum(values["recall"]["DeltaNet"], values["recall"]["Gated DeltaNet"]).min(0)
    np.testing.assert_allclose(margin, lowest - values["recall"]["linear"].max(0))
    assert_printed(
        tutorial, [x for n, m in zip(PAIRS, margin, strict=True) for x in (n, m)], atol=half_unit(3)
    )


def by_quarter(model, keys, values) -> np.ndarray:
    """Recall of every pair of the contexts, asked once each, averaged over each quarter of the
    positions, oldest first."""
    with torch.no_grad():
        right = (model(keys, values, keys).argmax(-1) == values).double().mean(0).numpy()
    return right.reshape(4, -1).mean(-1)


@pytest.mark.parametrize("source", ["page", "here"])
def test_the_delta_rule_recalls_the_newest_pairs_best(tutorial, values, source):
    """Each quarter's recall rests on 512 contexts x 8 pairs = 4,096 answers: a standard error below
    sqrt(1/4 / 4096) ~ 0.008, so the margins below are several of them."""
    if source == "page":
        keys, vals = values["keys_a"], values["values_a"]
        assert keys.shape == vals.shape == (512, 32)
    else:
        keys, vals, _, _ = draw_contexts(torch.Generator().manual_seed(2026), 512, 32, 1)
    quarters = {
        (kind, seed): by_quarter(values["models"][kind, seed], keys, vals)
        for kind in ("linear", *DELTA)
        for seed in (0, 1, 2)
    }
    if source == "page":
        assert list(values["by_quarter"]) == list(quarters)
        for key, row in quarters.items():
            np.testing.assert_allclose(values["by_quarter"][key], row, atol=1e-6)
    linear = np.array([quarters["linear", seed] for seed in (0, 1, 2)])  # (seeds, quarters)
    assert (linear.max(axis=1) - linear.min(axis=1) < 0.06).all()  # every quarter alike
    for kind in DELTA:
        for seed in (0, 1, 2):
            q = quarters[kind, seed]
            assert q[-1] - q[0] > 0.1  # the newest quarter far better than the oldest
            assert q[-1] > linear.max() + 0.1  # and far better than linear attention's best quarter
            assert abs(q[0] - linear.mean()) < 0.07  # the oldest about as well as linear attention
    if source == "page":
        for row in values["by_quarter"].values():
            assert_printed(tutorial, row, atol=half_unit(3))


def test_recall_tables_and_numbers_kept(tutorial, values):
    recall, models = values["recall"], values["models"]
    kept = {
        "softmax": 64 * (16 + 32),  # a key of 16 and a value of 32 per pair
        "linear": 16 * 32 + 16,  # the state and its normalizer
        "DeltaNet": 16 * 32,
        "Gated DeltaNet": 16 * 32,
        "3 GDN + softmax": 3 * 16 * 32 + 64 * (16 + 32),
        "4 GDN": 4 * 16 * 32,
    }
    for kind, numbers in kept.items():
        assert models[kind, 0].cache_numbers(64) == numbers
    assert values["four_softmax"].cache_numbers(64) == 4 * 64 * 48
    for kind in ONE_LAYER:
        for seed in (0, 1, 2):
            row = [*recall[kind][seed]] + ([kept[kind]] if seed == 0 else [])
            assert_printed(tutorial, row, atol=[half_unit(3)] * 7 + [0] * (seed == 0))
    for name in (*STACKS, "softmax", "Gated DeltaNet"):
        table = recall[name]
        assert_printed(
            tutorial, [table.min(), table[:, -1].min(), table[:, -1].max(), kept[name]], atol=half_unit(3)
        )
    for kind in (*ONE_LAYER, *STACKS):  # the summary's table
        for seed in (0, 1, 2):
            assert_printed(tutorial, recall[kind][seed], atol=half_unit(3))


def test_bytes_per_token_by_hand(tutorial, values):
    mha = 2 * 128 * 128 * 2  # a key and a value of 128 per head, 128 heads, 2 bytes
    state = 128 * 128 * 128 * 2
    assert values["state"].nbytes == state
    by_hand = {
        "MHA, 128 heads": mha,
        "Gated DeltaNet": state / 32_768,
        "3 GDN : 1 MHA": (3 * state / 32_768 + mha) / 4,
    }
    assert values["per_layer"] == pytest.approx(by_hand)
    assert_printed(tutorial, [*by_hand.values(), state], atol=0.5, gaps=True)


def test_the_pitfalls_computed(tutorial, values):
    q, k, v, beta, log_alpha = draw_np(3, True)
    C = 64
    expected = np.zeros((2, 4, C, 32))
    for b, h in np.ndindex(2, 4):
        expected[b, h], _ = delta_rule_np(
            q[b, h, :C], k[b, h, :C], v[b, h, :C], beta[b, h, :C], np.exp(log_alpha[b, h, :C])
        )
    largest = np.abs(expected).max()
    gaps = values["mask_gaps"]
    assert gaps["Gamma"] < 1e-12 and gaps["M"] > 0.5 * largest  # as large as the outputs themselves
    # the decay after the error, written out here
    late = np.zeros((2, 4, 64, 32))
    for b, h in np.ndindex(2, 4):
        S = np.zeros((32, 32))  # (d_k, d_v), the page's layout
        for t in range(64):
            error = v[b, h, t] - k[b, h, t] @ S
            S = np.exp(log_alpha[b, h, t]) * S + np.outer(k[b, h, t], beta[b, h, t] * error)
            late[b, h, t] = q[b, h, t] @ S
    late_gap = np.abs(late - expected).max()
    assert values["late_gap"] == pytest.approx(late_gap, rel=1e-9) and late_gap > 0.05
    assert_printed(
        tutorial, [gaps["Gamma"], gaps["M"], largest], rtol=[sci_rtol(1), sci_rtol(1), 0.01], gaps=True
    )
    assert_printed(tutorial, [late_gap], atol=half_unit(2))


def test_summary_prints_the_differences(tutorial, values):
    for row in values["gaps"].values():
        assert_printed(tutorial, row, rtol=sci_rtol(1))


def test_exercises(tutorial, values):
    c = QWEN3_NEXT
    full = c["layers"] // c["every"]  # layers 4, 8, ..., 48
    kv = full * 2 * c["kv_heads"] * c["head_dim"] * 2
    states = (c["layers"] - full) * c["value_heads"] * c["d_k"] * c["d_v"] * 2
    all_full = c["layers"] * 2 * c["kv_heads"] * c["head_dim"] * 2
    assert (values["kv_per_token"], values["states"], values["all_full"]) == (kv, states, all_full)
    assert values["break_even"] == states / (all_full - kv) == 512
    assert_printed(tutorial, [kv, states, all_full, 512], gaps=True)
    # states of 4 bytes instead of 2: twice the bytes to pay back, twice the length
    assert values["break_even_32"] == 2 * states / (all_full - kv) == 1024
    assert_printed(tutorial, [32, 1024], gaps=True)
    # 2: prefill in chunks, decode token by token
    assert values["carried_gap"] < 1e-12 and values["prefill"].length == 100
    # 3: a fifth key in the span of keys 0 and 1
    keys = np.vstack([np.eye(4), (np.eye(4)[:1] + np.eye(4)[1:2]) / math.sqrt(2)])
    vals = np.vstack([as64(values["values"]), [[10.0, 20.0]]])
    _, S = delta_rule_np(keys, keys, vals, np.ones(5))
    np.testing.assert_allclose(as64(values["full"].state), S.T, atol=1e-12)
    np.testing.assert_allclose(keys[4] @ S.T, [10.0, 20.0], atol=1e-12)  # the new key is exact
    moved = S.T[:2] - as64(values["values"])[:2]
    np.testing.assert_allclose(moved[0], moved[1], atol=1e-12)  # keys 0 and 1 moved by the same step
    np.testing.assert_array_equal(S.T[2:], as64(values["values"])[2:])
    # 4: multiply-adds per token by chunk size
    for C, count in values["by_chunk"].items():
        per_chunk = 2 * C * C * 128 + C * C * 128 + 3 * C * 128 * 128 + 2 * 128 * C * (C - 1) // 2
        assert count == 4096 // C * per_chunk / 4096
    assert min(values["by_chunk"], key=values["by_chunk"].get) == 16
    assert_printed(tutorial, [x for C, n in values["by_chunk"].items() for x in (C, n)], atol=0.5)


def test_training_stays_within_the_build_budget(values):
    """About 35 s of CPU for the 18 models on a quiet machine; 120 s leaves room for a busy one."""
    assert len(values["models"]) == 18 and 0 < sum(values["seconds"].values()) < 120
