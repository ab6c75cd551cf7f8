"""A query with no key: the mask by hand, the weights of each fill worked out, the gradients
written out in NumPy and taken through PyTorch's SDPA, and the random check recomputed in
float64 NumPy (tests/reference.py)."""

import numpy as np
import torch
import torch.nn.functional as F

from tests.printed import block_after, flag, line_after, list_after, numbers
from tests.reference import attention, plain_attention, softmax

T, D_K = 3, 4
# Token 0 is real, tokens 1 and 2 are padding; each query sees itself and the one before.
ALLOWED = np.array([[1, 0, 0], [1, 0, 0], [0, 0, 0]], dtype=bool)


def test_the_mask_and_the_weights_of_each_fill(printed):
    np.testing.assert_array_equal(block_after(printed, "True where query i may see key j:", rows=T), ALLOWED)
    # Every score of query 2 is -inf: exp gives 0 / 0.
    assert np.isnan(numbers(line_after(printed, "attention_add, weights of query 2:"))).all()
    # Every score of query 2 is replaced by the same -1e6: the softmax of equal numbers is uniform.
    np.testing.assert_allclose(
        numbers(line_after(printed, "attention_d2l, weights of query 2:")), [1 / 3] * 3, atol=6e-4
    )


def _gradients_by_hand(q, k, v, allowed):
    """The backward pass of softmax(q k^T / sqrt(d_k) + mask) v, written out in float64 NumPy, for a
    loss that sums the output of query 0: which tokens of q, k and v get a nan gradient."""
    _, weights = plain_attention(q, k, v, allowed)  # query 2: exp(-inf) = 0 everywhere, then 0 / 0
    d_out = np.zeros_like(q)
    d_out[0] = 1.0  # the loss reads query 0's output only
    d_weights = d_out @ v.T
    d_scores = weights * (d_weights - (d_weights * weights).sum(axis=-1, keepdims=True))  # softmax
    d_q, d_k = d_scores @ k / np.sqrt(D_K), d_scores.T @ q / np.sqrt(D_K)  # the added mask passes it on
    d_v = weights.T @ d_out  # nan weights times the zero gradient of the unread rows
    return [np.isnan(d).any(axis=-1).tolist() for d in (d_q, d_k, d_v)]


def test_the_gradients(printed):
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, T, D_K, dtype=torch.float64) for _ in range(3))
    # By hand: query 2's scores are all -inf, so its weights are nan. The loss never reads its output,
    # but nan times a zero gradient is nan: in q's row 2, and in every key and value, each of which
    # sums over all queries.
    expected = [[False, False, True], [True, True, True], [True, True, True]]
    assert _gradients_by_hand(*(t[0].numpy() for t in (q, k, v)), ALLOWED) == expected
    for name, row in zip("qkv", expected, strict=True):
        assert list_after(printed, f"  {name}:") == row, name
    # The fix: zero weights for query 2, finite gradients, PyTorch's output (checked against NumPy).
    np.testing.assert_array_equal(numbers(line_after(printed, "fixed, weights of query 2:")), 0.0)
    assert flag(printed, "fixed, nan in a gradient:") is False
    mask = torch.from_numpy(ALLOWED)
    for t in (q, k, v):
        t.requires_grad_(True)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    out[:, 0].sum().backward()
    assert not any(t.grad.isnan().any() for t in (q, k, v))
    expected, weights = attention(*(t.detach().numpy() for t in (q, k, v)), allowed=ALLOWED)
    np.testing.assert_allclose(out.detach().numpy(), expected, atol=1e-12)
    assert np.all(weights[0, 2] == 0)
    assert flag(printed, "fixed, same output as PyTorch's SDPA:") is True


def test_the_check(printed):
    g = torch.Generator().manual_seed(1)
    q, k, _ = (torch.randn(20, 6, D_K, generator=g).double().numpy() for _ in range(3))
    allowed = (torch.rand(20, 6, 6, generator=g) < 0.3).numpy()
    sees = allowed.any(axis=-1)
    assert (~sees).sum() > 0  # the random masks do hold queries that see nothing
    weights = softmax(np.where(allowed, q @ k.transpose(0, 2, 1) / np.sqrt(D_K), -1e6))
    worst_d2l = max(np.abs(weights * ~allowed).max(), np.abs(weights.sum(-1) - sees).max())
    assert line_after(printed, "attention_add: largest violation").strip() == "inf, FAILS"
    d2l = line_after(printed, "attention_d2l: largest violation")
    assert abs(numbers(d2l)[0] - worst_d2l) < 0.01 and d2l.endswith("FAILS")
    fixed = line_after(printed, "attention_fixed: largest violation")
    assert numbers(fixed)[0] < 1e-6 and fixed.endswith("passes")
