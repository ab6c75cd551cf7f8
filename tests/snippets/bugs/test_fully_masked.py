"""A query with no key: the mask by hand, the weights of each fill worked out, the gradients taken
through PyTorch's SDPA, and the random check recomputed in float64 NumPy (tests/reference.py)."""

import numpy as np
import torch
import torch.nn.functional as F

from tests.printed import block_after, flag, line_after, numbers
from tests.reference import attention, softmax

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


def test_the_gradients(printed):
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, T, D_K, dtype=torch.float64) for _ in range(3))
    mask = torch.from_numpy(ALLOWED)
    q.requires_grad_(True)
    bias = torch.zeros(T, T, dtype=torch.float64).masked_fill(~mask, float("-inf"))
    (torch.softmax(q @ k.transpose(-2, -1) / D_K**0.5 + bias, dim=-1) @ v)[:, 0].sum().backward()
    assert q.grad.isnan().any()  # through the row of query 2, which the loss does not read
    assert flag(printed, "attention_add, nan in the gradient of q:") is True
    # The fix: zero weights for query 2, finite gradients, PyTorch's output (checked against NumPy).
    np.testing.assert_array_equal(numbers(line_after(printed, "fixed, weights of query 2:")), 0.0)
    assert flag(printed, "fixed, nan in the gradient of q:") is False
    q.grad = None
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    out[:, 0].sum().backward()
    assert not q.grad.isnan().any()
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
