"""Self-attention with the single-view split and with view + transpose, recomputed in float64 NumPy
(tests/reference.py) from the snippet's random draws."""

import numpy as np
import torch

from tests.printed import line_after, numbers
from tests.reference import attention

B, T, C, H = 2, 5, 8, 2


def _split(x, fixed):
    b, n, _ = x.shape
    if fixed:
        return x.reshape(b, n, H, C // H).transpose(0, 2, 1, 3).reshape(b * H, n, C // H)
    return x.reshape(b * H, n, C // H)  # consecutive chunks of C // H numbers, across tokens


def _self_attention(x, W, fixed):
    b, n, _ = x.shape
    out, _ = attention(*(_split(x @ w, fixed) for w in W))  # (B * H, n, d_k)
    return out.reshape(b, H, n, C // H).transpose(0, 2, 1, 3).reshape(b, n, C)


def test_the_check(printed):
    torch.manual_seed(0)
    W = [(torch.randn(C, C) / C**0.5).double().numpy() for _ in range(3)]
    x = torch.randn(B, T, C).double().numpy()
    perm = torch.randperm(T).numpy()  # the same draws as the snippet's, in the same order
    moved = {
        fixed: _self_attention(x[:, perm], W, fixed) - _self_attention(x, W, fixed)[:, perm]
        for fixed in (False, True)
    }
    assert np.abs(moved[True]).max() < 1e-12
    buggy = numbers(line_after(printed, "split_heads: largest |f(shuffled x) - shuffled f(x)|"))[0]
    assert abs(buggy - np.abs(moved[False]).max()) < 0.05 * np.abs(moved[False]).max() and buggy > 0.1
    assert (
        numbers(line_after(printed, "split_heads_fixed: largest |f(shuffled x) - shuffled f(x)|"))[0] < 1e-5
    )
