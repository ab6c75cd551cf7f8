"""The eviction tutorial, as the build executed it, checked against references computed here.

The three trained models are read from the execution (never trained again). Every accuracy the
page prints is recomputed in float64 NumPy (tests/support/eviction_reference.py): the prompt's
weights, each policy's keep mask row by row, and the forward pass under the decoding mask. A
float32 model and its float64 copy may order two nearly equal scores differently, or two nearly
equal logits, which moves an accuracy by a few thousandths: the page's numbers are compared at
0.02, and the page's claims are checked on the recomputed values, for every seed, with margins of
0.05 or more where the runs give twice that.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attn_ref.serving import random_keep
from tests.support.eviction_reference import (
    decode_mask_np,
    h2o_np,
    rotary_forward_np,
    rows_np,
    sink_window_np,
    snapkv_np,
    tova_np,
)
from tests.support.positions_reference import rotate
from tests.support.shown import assert_printed, half_unit

P, T = 48, 64
BUDGETS = (4, 8, 12, 16, 24, 32)
NAMES = ("sinks+window", "random", "H2O", "SnapKV", "TOVA")


def accuracy_np(model, tokens: np.ndarray, keeps, positions=None) -> float:
    masks = [decode_mask_np(keep, T) for keep in keeps]
    logits, _ = rotary_forward_np(model, tokens, masks, positions)
    return float((logits[:, P : T - 1].argmax(-1) == tokens[:, P + 1 :]).mean())


def keeps_np(weights, budget: int) -> dict:
    shape = weights[0].shape[:-1]  # (B, H, P)
    draw = torch.Generator().manual_seed(budget)  # the page's draws: chance, not the code under test
    return {
        "sinks+window": [sink_window_np(P, budget, 4)] * 2,
        "random": [random_keep(shape, budget, draw).numpy() for _ in weights],
        "H2O": [h2o_np(w, budget) for w in weights],
        "SnapKV": [snapkv_np(w, budget, min(4, budget)) for w in weights],
        "TOVA": [tova_np(w, budget) for w in weights],
    }


@pytest.fixture(scope="module")
def here(values) -> dict:
    """Per seed, every accuracy of the page recomputed in float64."""
    tokens = values["tokens"].numpy()
    out = {}
    for seed in values["SEEDS"]:
        model = values["models"][seed]
        assert model.attention_scale == 1.0
        _, weights = rotary_forward_np(model, tokens[:, :P])
        m = {"full": accuracy_np(model, tokens, [np.ones((64, 2, P), dtype=bool)] * 2)}
        for budget in BUDGETS:
            for name, keeps in keeps_np(weights, budget).items():
                m[name, budget] = accuracy_np(model, tokens, keeps)
        window = [sink_window_np(P, 16, 4)] * 2
        renumbered = np.concatenate([np.arange(P), np.arange(P, T) - (P - 16)])
        m["renumbered"] = accuracy_np(model, tokens, window, renumbered)
        for kernel in (1, 5, 9):
            m["kernel", kernel] = accuracy_np(model, tokens, [snapkv_np(w, 16, 4, kernel) for w in weights])
        for budget in (8, 16):
            m["per head", budget] = accuracy_np(
                model, tokens, [rows_np(w[..., -1, :], budget) for w in weights]
            )
        out[seed] = m
    return out


def test_the_picture_and_the_toy(tutorial, values):
    w = values["weights_pic"].numpy().astype(np.float64)
    T_pic, B_pic = values["T_pic"], values["B_pic"]
    kept = values["kept_pic"]
    np.testing.assert_array_equal(kept["sinks + window"].numpy(), sink_window_np(T_pic, B_pic, 2))
    np.testing.assert_array_equal(kept["H2O"].numpy(), h2o_np(w, B_pic))
    np.testing.assert_array_equal(kept["SnapKV"].numpy(), snapkv_np(w, B_pic, 2, 3))
    np.testing.assert_array_equal(kept["TOVA"].numpy(), tova_np(w[None], B_pic)[0])
    assert kept["random"].sum() == B_pic
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-6)
    assert_printed(tutorial, w.sum(0), atol=half_unit(2))
    assert_printed(tutorial, h2o_np(w, 6).astype(int))
    assert_printed(tutorial, snapkv_np(w, 6, 2, 3).astype(int))
    assert_printed(tutorial, decode_mask_np(np.array([True, False, True, False]), 6).astype(int))


def test_every_accuracy_and_the_table(tutorial, values, here):
    assert values["SEEDS"] == (0, 1, 2) and values["BUDGETS"] == BUDGETS
    assert (values["periods"].numpy() <= 16).all()  # the copy lies in the prompt (i - p + 1 < P)
    for seed, m in here.items():
        assert abs(values["results"][seed]["full"] - m["full"]) < 0.02
        for budget in BUDGETS:
            for name in NAMES:
                assert abs(values["results"][seed][name, budget] - m[name, budget]) < 0.02, (
                    seed,
                    name,
                    budget,
                )
    rows = []
    for budget in BUDGETS:
        row = [budget]
        for name in NAMES:
            runs = [values["results"][s][name, budget] for s in (0, 1, 2)]
            row += [np.mean(runs), min(runs)]
        rows.append(row)
    assert_printed(tutorial, rows, atol=[0] + [half_unit(3)] * 10)
    assert_printed(tutorial, [values["results"][s]["full"] for s in (0, 1, 2)], atol=half_unit(3))


def test_what_the_page_says_the_policies_achieve(here):
    for m in here.values():
        assert m["full"] > 0.8  # the models copy
        scores = ("random", "H2O", "SnapKV", "TOVA")
        # at 16 of 48: the window close to the full cache, well ahead of every score
        assert m["sinks+window", 16] > m["full"] - 0.06
        assert m["sinks+window", 16] > max(m[name, 16] for name in scores) + 0.05
        assert m["H2O", 32] > m["sinks+window", 32] - 0.05  # H2O catches up with its recent half
        for budget in (8, 12, 16, 24, 32):  # TOVA below random from 8 up
            assert m["TOVA", budget] < m["random", budget] - 0.02
        assert m["SnapKV", 4] > m["sinks+window", 4] + 0.05  # the last 4 beat 4 sinks + 0 recent
        assert m["renumbered"] < m["sinks+window", 16] - 0.15  # the positions pitfall
        assert m["kernel", 9] > m["kernel", 5] + 0.02 > m["kernel", 1] + 0.04  # exercise 1


def test_the_pitfall_and_the_exercises(tutorial, values, here):
    rows = [[s, here[s]["sinks+window", 16], here[s]["renumbered"]] for s in (0, 1, 2)]
    assert_printed(tutorial, rows, atol=[0, 0.02, 0.02])
    for kernel in (1, 5, 9):
        assert abs(values["pooled"][kernel] - here[0]["kernel", kernel]) < 0.02
    assert_printed(tutorial, [[b, here[0]["per head", b]] for b in (8, 16)], atol=[0, 0.02], gaps=True)
    # exercise 2: one more rotation by s - j moves a key from j to s, to float32 rounding
    key = values["key"].numpy().astype(np.float64)
    np.testing.assert_allclose(rotate(rotate(key, [40]), [7 - 40]), rotate(key, [7]), atol=1e-12)
    assert values["gap"] < 1e-5


def test_the_costs_and_quest(tutorial, values):
    n, d, w, page = 32_768, 128, 32, 16
    pairs = n * (n + 1) // 2
    assert_printed(tutorial, [2 * pairs * d, pairs * d, w * n * d, 2 * (n // page) * d], gaps=True)
    q, k = (values[name].numpy().astype(np.float64) for name in ("q_r", "k_r"))
    pages = k.reshape(8, 8, 16)  # (pages, keys, d_k)
    bound = np.maximum(q[:, None] * pages.min(1), q[:, None] * pages.max(1)).sum(-1)  # (queries, pages)
    best = (q @ k.T).reshape(8, 8, 8).max(-1)
    assert (bound >= best - 1e-5).all()
    read = np.repeat(rows_np(bound, 2), 8, axis=-1)  # (queries, 64)
    found = read[np.arange(8), (q @ k.T).argmax(-1)].mean()
    assert_printed(tutorial, [(bound - best).min(), 100 * found], atol=[half_unit(3), 0.5])


def test_training_stays_within_the_build_budget(values):
    """About 6 s of CPU per model on a quiet machine; 40 s for all three leaves room for a busy one."""
    assert 0 < sum(values["train_seconds"].values()) < 40
