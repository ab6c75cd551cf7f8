"""bugs/fully_masked.py: a query with no key. The mask and the weights of each fill worked out by
hand; which gradients turn nan, written out in NumPy; the fix against PyTorch's SDPA and float64
references; and the random check recomputed exactly in float64 from the snippet's own inputs, each
float32 result within its rounding bound (tests/support/worst_case_rounding.py)."""

import numpy as np
import torch
import torch.nn.functional as F

from tests.support.printed import assert_shows, rounded, rounded_significant
from tests.support.reference import plain_attention
from tests.support.worst_case_rounding import (
    Rounded,
    assert_largest_difference,
    attention,
    exact,
    gamma,
    matmul,
    plus,
    scaled,
    softmax,
    total,
)


def _by_hand(T: int) -> np.ndarray:
    """Token 0 is real, the others padding; query i sees itself and the token before it: query i may
    see key j when j is i - 1 or i, and j is 0."""
    return np.array([[j in (i - 1, i) and j == 0 for j in range(T)] for i in range(T)])


def _nan_gradients_by_hand(q, k, v, allowed):
    """The backward pass of softmax(q k^T / sqrt(d_k) + mask) v, written out in float64 NumPy, for a
    loss that sums the output of query 0: which tokens of q, k and v get a nan gradient."""
    _, weights = plain_attention(q, k, v, allowed)  # a row with no key: exp(-inf) = 0 everywhere, 0 / 0
    d_k = q.shape[-1]
    d_out = np.zeros_like(q)
    d_out[0] = 1.0  # the loss reads query 0's output only
    d_weights = d_out @ v.T
    d_scores = weights * (d_weights - (d_weights * weights).sum(axis=-1, keepdims=True))  # softmax
    d_q, d_k_ = d_scores @ k / np.sqrt(d_k), d_scores.T @ q / np.sqrt(d_k)  # the added mask passes it on
    d_v = weights.T @ d_out  # nan weights times the zero gradient of the unread rows
    return [np.isnan(d).any(axis=-1).tolist() for d in (d_q, d_k_, d_v)]


def test_the_mask_and_the_weights_of_each_fill(printed, values):
    allowed = values["allowed"].numpy()
    T = allowed.shape[0]
    np.testing.assert_array_equal(allowed, _by_hand(T))
    assert not allowed[2].any()  # query 2 sees no key
    add, d2l = values["query_2"].values()
    assert torch.isnan(add).all()  # every score is -inf: exp gives 0 / 0
    # Every score replaced by the same -1e6: the softmax of equal numbers is uniform.
    assert softmax(exact(np.full(T, -1e6))).holds(d2l)
    np.testing.assert_allclose(softmax(exact(np.full(T, -1e6))).value, 1 / T)
    assert_shows(
        printed, [(a, 0.0) for a in allowed.astype(float).ravel()] + [(np.nan, 0.0)] * T + rounded(d2l, 3)
    )


def test_the_gradients(printed, values):
    q, k, v, allowed = (values[name] for name in ("q", "k", "v", "allowed"))
    # By hand: query 2's scores are all -inf, so its weights are nan. The loss never reads its output,
    # but nan times a zero gradient is nan: in q's row 2, and in every key and value, each of which
    # sums over all queries.
    expected = [[False, False, True], [True, True, True], [True, True, True]]
    arrays = [t.detach().double().numpy()[0] for t in (q, k, v)]
    assert _nan_gradients_by_hand(*arrays, allowed.numpy()) == expected
    assert list(values["nan_grad"].values()) == expected
    # The fix: zero weights for query 2, finite gradients, and PyTorch's output.
    weights, out, theirs, grads = values["weights"], values["out"], values["theirs"], values["grads"]
    assert (weights[0, 2] == 0).all()  # masked_fill(no_key, 0.0)
    assert not any(grad.isnan().any() for grad in grads)
    expected_out, expected_weights = attention(*(exact(a[None]) for a in arrays), allowed=allowed.numpy())
    assert expected_weights.holds(weights.detach()) and expected_out.holds(out.detach())
    assert expected_out.holds(theirs.detach())
    assert values["same"] is True  # the two agree, up to the rounding bounded above
    # The fix's gradients are those of PyTorch's SDPA, taken in float64: finite as well, and equal up
    # to float32 rounding (a few eps for each of the T d_k terms of a gradient's sums).
    leaves = [torch.tensor(a[None], requires_grad=True) for a in arrays]
    F.scaled_dot_product_attention(*leaves, attn_mask=allowed)[:, 0].sum().backward()
    size = max(np.abs(a).max() for a in arrays) + 1
    for grad, leaf in zip(grads, leaves, strict=True):
        assert not leaf.grad.isnan().any()
        np.testing.assert_allclose(
            grad, leaf.grad, rtol=0, atol=8 * gamma(allowed.numel() * q.shape[-1]) * size**3
        )
    assert_shows(printed, [(0.0, 0.0)] * allowed.shape[1])  # the fixed weights of query 2


def test_the_check(printed, values):
    q, k, v, masks, sees = (values[name] for name in ("qs", "ks", "vs", "masks", "sees"))
    masks, tolerance = masks.numpy(), values["tolerance"]
    np.testing.assert_array_equal(sees, masks.any(axis=-1))
    assert not sees.all()  # the random masks do hold queries that see nothing ...
    add, d2l, fixed = values["worst"].values()
    # ... whose plain softmax over scores of -inf is 0 / 0: nan in the output.
    assert np.isnan(plain_attention(q.detach(), k, v, masks)[0][~sees.numpy()]).all()
    assert add == float("inf")
    # d2l: blocked scores replaced by -1e6 (exactly a float32). A query that sees a key gives its
    # blocked keys exp(-1e6 - max) = 0; one that sees none spreads its weight evenly over them all.
    scores = scaled(matmul(exact(q.detach()), exact(k).mT, roundings=4), q.shape[-1] ** -0.5)
    filled = Rounded(np.where(masks, scores.value, -1e6), np.where(masks, scores.error, 0.0))
    ranges = []
    for worst, weights in ((d2l, softmax(filled)), (fixed, softmax(scores, allowed=masks))):
        blocked = weights.map(lambda w: np.where(masks, 0.0, w))  # the weights on blocked keys
        off_sum = plus(total(weights), exact(-sees.double()))  # each row's sum, less 1 if it sees a key
        ranges.append(
            assert_largest_difference(
                worst, (blocked, exact(np.zeros(masks.shape))), (off_sum, exact(np.zeros(sees.shape)))
            )
        )
    # The exact d2l violation is 1 (a row that should sum to 0 sums to 1): fails on every machine.
    assert ranges[0][0] > tolerance and d2l > tolerance
    # The fix, the last one the check ran: no weight on a blocked key (exp(-inf) = 0, and zeros
    # filled in), rows summing to one or zero up to rounding (within the bound checked above); the
    # page promises that rounding stays below the tolerance.
    assert (values["ws"][~masks] == 0).all()
    np.testing.assert_allclose(softmax(scores, allowed=masks).value.sum(-1), sees, rtol=0, atol=1e-12)
    assert fixed < tolerance
    assert_shows(printed, rounded_significant([add, d2l, fixed], 2))
