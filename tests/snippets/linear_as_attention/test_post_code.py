"""linear_as_attention/post_code.py: the post's construction in float32, its four checks and its
errors, for one seed and for many."""

from __future__ import annotations

import math

import numpy as np
import torch

from attn_ref.examples import LINEAR_SEED
from tests.printed import flag, line_after, number_after, numbers
from tests.reference import attention, softmax
from tests.snippets.linear_as_attention.helpers import D_IN, EPS32, bound, post_data


def _post_steps_float32(seed: int) -> tuple[np.ndarray, ...]:
    """The post's steps 2 to 5 in NumPy float32 on the data of ``seed``:
    (y1, _y, logits, logits_rec, y2, attn_weights, k), k being the key as post_data gives it.

    y2 is the float64 attention of the float32 q, k and v: the float32 inverse of k, where the
    post loses its accuracy, is kept.
    """
    data = post_data(seed)
    x, W, k = (a.astype(np.float32) for a in data)
    shift = -torch.randn(1).item()  # post_construction draws it next, from the same seeded stream
    x_sum = np.abs(x).sum(-1, keepdims=True)  # (B, 1)
    attn_weights = (np.abs(x) / x_sum)[:, None]  # (B, d_in) -> (B, 1, d_in)
    v = W.T[None] * (x_sum[..., None] * np.sign(x)[..., None])  # (B, d_in, d_out)
    _y = (attn_weights @ v)[:, 0]  # (B, 1, d_out) -> (B, d_out)
    logits = np.log(attn_weights) + np.float32(shift)  # (B, 1, d_in)
    k_T = np.swapaxes(k, -1, -2)  # (B, d_k, d_in)
    q = logits * math.sqrt(D_IN) @ np.linalg.inv(k_T)  # (B, 1, d_k); a Python float keeps float32
    logits_rec = q @ k_T / math.sqrt(D_IN)  # (B, 1, d_in)
    y2 = attention(q, k, v)[0][:, 0]  # (B, 1, d_out) -> (B, d_out)
    return x @ W.T, _y, logits, logits_rec, y2, attn_weights, data[2]


def test_post_code_errors_are_rounding_bounded_by_the_condition_of_k(printed):
    x, W, k = post_data(LINEAR_SEED)
    cond = np.linalg.cond(k)
    np.testing.assert_allclose(numbers(line_after(printed, "cond(k), per row:")), cond, rtol=1e-3, atol=0.5)
    # The post's four checks hold for this seed, as its steps redone in NumPy predict ...
    y1, _y, logits, logits_rec, y2, attn_weights, _ = _post_steps_float32(LINEAR_SEED)
    predicted = {
        "allclose(_y, y1):": np.allclose(_y, y1),
        "allclose(softmax(logits), attn_weights):": np.allclose(softmax(logits), attn_weights),
        "allclose(logits_rec, logits, atol=1e-3):": np.allclose(logits_rec, logits, atol=1e-3),
        "allclose(y2, y1, atol=1e-3):": np.allclose(y2, y1, atol=1e-3),
    }
    assert {label: flag(printed, label) for label in predicted} == predicted == dict.fromkeys(predicted, True)
    # ... and every printed error is of float32 size.
    y1_error = number_after(printed, "max |y1 - x W^T| =")
    assert 0 < y1_error <= D_IN * EPS32 * np.abs(x).sum(-1).max() * np.abs(W).max()
    assert number_after(printed, "max |_y - x W^T| =") <= bound(x, W, EPS32).max()
    assert number_after(printed, "max |y2 - x W^T| =") <= bound(x, W, EPS32, cond.max()).max()


def test_post_code_failure_counts_match_an_independent_float32_computation(printed):
    fails_exact, n_seeds = numbers(line_after(printed, "allclose(_y, y1) fails for"))
    # The post's first check, recomputed in NumPy float32 with np.allclose's identical rule; and
    # each seed's condition number of k, kept for below.
    numpy_fails, conds = 0, []
    for seed in range(int(n_seeds)):
        y1, _y, *_, k = _post_steps_float32(seed)
        numpy_fails += not np.allclose(_y, y1)
        conds.append(np.linalg.cond(k).max())
    assert 0.05 * n_seeds < fails_exact < 0.6 * n_seeds
    assert abs(fails_exact - numpy_fails) <= 0.1 * n_seeds
    # The worst seed: its key is ill-conditioned, and its error fits the bound for that key.
    worst_error, worst_seed = numbers(line_after(printed, "largest |y2 - x W^T| ="))
    x, W, k = post_data(int(worst_seed))
    cond = np.linalg.cond(k).max()
    assert worst_error <= bound(x, W, EPS32, cond).max()
    assert cond > 1e3  # the largest error comes with a badly conditioned key
    if worst_error > 2e-3:  # then the post's atol=1e-3 check must have failed at least once
        assert number_after(printed, "allclose(y2, y1, atol=1e-3) fails for") >= 1
    # The condition numbers of the seeds: the median (torch's: the lower of the two
    # middle values), and the smallest one among the failing seeds, which must be one of them
    # and far above the median. Printed as integers, from float32 (accurate to a few eps32 cond).
    conds = np.sort(conds)
    median = conds[(len(conds) - 1) // 2]
    assert abs(number_after(printed, "cond(k), median over seeds:") - median) <= 0.5 + 1e-4 * median
    smallest = number_after(printed, "cond(k), smallest where atol=1e-3 fails:")
    assert np.abs(conds - smallest).min() <= 0.5 + 8 * EPS32 * smallest**2
    assert smallest > 10 * median
