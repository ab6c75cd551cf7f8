"""The triu mask read as "may attend" (SDPA's convention) and as "blocked" (nn.MultiheadAttention's),
recomputed in float64 NumPy (tests/reference.py) from the snippet's random draws."""

import numpy as np
import torch
import torch.nn.functional as F

from tests.printed import block_after, flag, line_after, numbers
from tests.reference import attention, causal, multihead_attention

T, D_K, C = 4, 8, 16


def _draws():
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, T, D_K) for _ in range(3))
    W = [torch.randn(C, D_K) / C**0.5 for _ in range(3)]
    mha = torch.nn.MultiheadAttention(C, num_heads=2, batch_first=True)  # initialised from the same state
    return (q, k, v), W, mha


def test_the_mask_and_the_buggy_weights(printed):
    (q, k, v), _, _ = _draws()
    np.testing.assert_array_equal(
        block_after(printed, "mask, True where the key comes after the query:", rows=T), ~causal(T)
    )
    out, weights = attention(q.double().numpy(), k.double().numpy(), v.double().numpy(), allowed=~causal(T))
    np.testing.assert_allclose(
        block_after(printed, "buggy weights, row i = query i:", rows=T), weights[0], atol=6e-4
    )
    assert np.all(weights[0][causal(T)] == 0)  # no weight on the present or the past
    # PyTorch's SDPA computes the same as the reference with "True = may attend".
    sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=torch.from_numpy(~causal(T)))
    np.testing.assert_allclose(sdpa.numpy(), out, atol=1e-6)
    assert flag(printed, "attn_ref's output is SDPA's:") is True
    np.testing.assert_array_equal(numbers(line_after(printed, "buggy output of the last query:")), 0.0)
    assert flag(printed, "fixed, same as is_causal=True:") is True
    fixed, _ = attention(q.double().numpy(), k.double().numpy(), v.double().numpy(), allowed=causal(T))
    np.testing.assert_allclose(
        F.scaled_dot_product_attention(q, k, v, attn_mask=~torch.from_numpy(~causal(T))), fixed, atol=1e-6
    )


def test_the_check(printed):
    _, W, mha = _draws()
    W_Q, W_K, W_V = (w.double().numpy() for w in W)
    n = 6
    g = torch.Generator().manual_seed(1)
    x = torch.randn(20, n, C, generator=g)
    with torch.no_grad():  # nn.MultiheadAttention with the triu mask is causal attention
        theirs = mha(x, x, x, attn_mask=torch.from_numpy(~causal(n)), need_weights=False)[0].numpy()
    np.testing.assert_allclose(
        theirs, multihead_attention(x.double().numpy(), mha.state_dict(), 2, causal(n))["output"], atol=1e-5
    )
    worst = 0.0
    for j in range(1, n):
        y = x.clone()
        y[:, j] = torch.randn(20, C, generator=g)
        a, b = (
            attention(z @ W_Q, z @ W_K, z @ W_V, allowed=~causal(n))[0]
            for z in (x.double().numpy(), y.double().numpy())
        )
        worst = max(worst, np.abs(b[:, :j] - a[:, :j]).max())
    buggy = line_after(printed, "SDPA, the triu mask (buggy): earlier outputs moved by")
    assert abs(numbers(buggy)[0] - worst) < 0.05 * worst and buggy.endswith("FAILS")
    for name in ("SDPA, ~mask (fixed)", "nn.MultiheadAttention, the triu mask"):
        line = line_after(printed, f"{name}: earlier outputs moved by")
        assert numbers(line)[0] < 1e-6 and line.endswith("passes")
