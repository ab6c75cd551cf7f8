"""Where each merged row comes from, worked out by hand from row-major order; and the two-head
attention recomputed in float64 NumPy from the snippet's random draws."""

import numpy as np
import torch

from tests.printed import block_after, line_after, numbers
from tests.reference import attention

H, T, C = 2, 4, 8


def test_the_merged_rows(printed):
    # A (H, T) array read in row-major order: entry n is head n // T, token n % T. Reshaped to
    # (T, H), row t holds entries H*t and H*t + 1, labelled 10 * head + token.
    buggy = [[10 * ((H * t + c) // T) + (H * t + c) % T for c in range(H)] for t in range(T)]
    fixed = [[10 * h + t for h in range(H)] for t in range(T)]  # token t, every head
    label = "reshaped to (B, T, H * d_k) directly, the bug; row t is token t:"
    np.testing.assert_array_equal(block_after(printed, label, rows=T), buggy)
    np.testing.assert_array_equal(
        block_after(printed, "permuted to (B, T, H, d_k) first, the fix:", rows=T), fixed
    )


def _multi_head(x, W, fixed):
    B, T_x, _ = x.shape
    d_k = C // H
    # Head h reads features h*d_k to (h+1)*d_k of each token: (B, T, C) -> (B, H, T, d_k).
    q, k, v = ((x @ w).reshape(B, T_x, H, d_k).transpose(0, 2, 1, 3) for w in W)
    values, _ = attention(q, k, v)  # (B, H, T, d_k)
    if fixed:
        values = values.transpose(0, 2, 1, 3)
    return values.reshape(B, T_x, C)


def test_the_check_fails_on_the_bug_and_passes_on_the_fix(printed):
    torch.manual_seed(0)
    W = [(torch.randn(C, C) / C**0.5).double().numpy() for _ in range(3)]
    g = torch.Generator().manual_seed(1)
    x = torch.randn(20, 8, C, generator=g).double().numpy()
    perm = torch.randperm(8, generator=g).numpy()
    worst = {}
    for fixed in (False, True):
        moved = _multi_head(x[:, perm], W, fixed) - _multi_head(x, W, fixed)[:, perm]
        worst[fixed] = np.abs(moved).max()
    assert worst[True] < 1e-12
    buggy = line_after(printed, "buggy: largest |f(shuffled x) - shuffled f(x)|")
    assert abs(numbers(buggy)[0] - worst[False]) < 0.05 * worst[False] and buggy.endswith("FAILS")
    fixed = line_after(printed, "fixed: largest |f(shuffled x) - shuffled f(x)|")
    assert numbers(fixed)[0] < 1e-5 and fixed.endswith("passes")
