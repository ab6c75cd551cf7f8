"""attn_ref.linear_as_attention: PyTorch's attention on its q, k, v and mask gives x @ W.T.

References are computed independently: ``x @ W.T`` and the expected weights,
values and masks in float64 NumPy. Tolerances follow the bound derived on the
page, ``C eps cond(k) ||x||_1 max|W| (1 + max|centred log|x||)``; over thousands
of random inputs the measured constant stayed below 3, and the tests use C = 16.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from attn_ref import scaled_dot_product_attention
from attn_ref.examples import LINEAR_WEIGHT, LINEAR_X
from attn_ref.linear_as_attention import linear_as_attention

SETTINGS = settings(max_examples=150, deadline=None)
C = 16


def signed_magnitudes(smallest: int, largest: int) -> st.SearchStrategy[float]:
    """Exact zeros, and +-10**e for e in [smallest, largest] (far from float32 subnormals)."""
    return st.one_of(
        st.just(0.0),
        st.builds(
            lambda sign, exponent: sign * 10.0**exponent,
            st.sampled_from([-1.0, 1.0]),
            st.floats(smallest, largest),
        ),
    )


@st.composite
def linear_problems(draw, dtypes=(torch.float32, torch.float64)):
    """x (B, d_in) with zeros, negatives and all-zero rows; W (d_out, d_in); a dtype; d_k."""
    B, d_in, d_out = draw(st.integers(1, 5)), draw(st.integers(1, 12)), draw(st.integers(1, 6))
    x = draw(arrays(np.float64, (B, d_in), elements=signed_magnitudes(-5, 5)))
    W = draw(arrays(np.float64, (d_out, d_in), elements=signed_magnitudes(-3, 1)))
    dtype = draw(st.sampled_from(dtypes))
    d_k = draw(st.integers(max(1, d_in - 1), d_in + 3))
    seed = draw(st.integers(0, 2**31 - 1))
    if dtype == torch.float32:  # the reference uses the values the function sees
        x, W = x.astype(np.float32).astype(np.float64), W.astype(np.float32).astype(np.float64)
    return x, W, dtype, d_k, seed


def _spread(x: np.ndarray) -> np.ndarray:
    """Per row, the largest centred log|x_i| over the nonzero entries, shape (B, 1)."""
    nonzero = x != 0
    logs = np.where(nonzero, np.log(np.abs(np.where(nonzero, x, 1.0))), 0.0)
    count = np.maximum(nonzero.sum(-1, keepdims=True), 1)
    centred = np.where(nonzero, logs - logs.sum(-1, keepdims=True) / count, 0.0)
    return np.abs(centred).max(-1, keepdims=True)


def _tolerance(x: np.ndarray, W: np.ndarray, dtype: torch.dtype, cond: float = 1.0) -> np.ndarray:
    """Per-row absolute tolerance on y, shape (B, 1)."""
    eps = torch.finfo(dtype).eps
    return C * eps * cond * np.abs(x).sum(-1, keepdims=True) * np.abs(W).max() * (1 + _spread(x))


def _through_sdpa(x, W, dtype, **kwargs):
    parts = linear_as_attention(torch.tensor(x, dtype=dtype), torch.tensor(W, dtype=dtype), **kwargs)
    q, k, v, mask = parts
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)[:, 0]  # (B, d_out)
    return parts, y.double().numpy()


@SETTINGS
@given(linear_problems())
def test_pytorch_attention_reproduces_x_w(problem):
    x, W, dtype, d_k, seed = problem
    _, y = _through_sdpa(x, W, dtype, d_k=d_k, generator=torch.Generator().manual_seed(seed))
    assert (np.abs(y - x @ W.T) <= _tolerance(x, W, dtype)).all()


@SETTINGS
@given(linear_problems())
def test_attn_ref_attention_agrees_and_gives_the_weights_abs_x_over_l1(problem):
    x, W, dtype, d_k, seed = problem
    (q, k, v, mask), _ = _through_sdpa(x, W, dtype, d_k=d_k, generator=torch.Generator().manual_seed(seed))
    output, weights = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert (np.abs(output[:, 0].double().numpy() - x @ W.T) <= _tolerance(x, W, dtype)).all()
    l1 = np.abs(x).sum(-1, keepdims=True)
    expected = np.abs(x) / np.where(l1 > 0, l1, 1.0)  # |x| / ||x||_1; rows of zeros:
    expected[l1[:, 0] == 0] = 1.0 / x.shape[1]  # nothing masked, all scores zero: uniform
    tolerance = C * torch.finfo(dtype).eps * (1 + _spread(x))
    assert (np.abs(weights[:, 0].double().numpy() - expected) <= tolerance).all()


@SETTINGS
@given(linear_problems(dtypes=(torch.float64,)))
def test_mask_values_and_shapes(problem):
    x, W, dtype, d_k, seed = problem
    B, d_in = x.shape
    (q, k, v, mask), _ = _through_sdpa(x, W, dtype, d_k=d_k, generator=torch.Generator().manual_seed(seed))
    assert q.shape == (B, 1, d_k)
    assert k.shape == (B, d_in, d_k)
    assert v.shape == (B, d_in, W.shape[0])
    assert mask.shape == (B, 1, d_in) and mask.dtype == torch.bool
    all_zero = ~(x != 0).any(-1, keepdims=True)
    np.testing.assert_array_equal(mask[:, 0].numpy(), (x != 0) | all_zero)
    expected_v = np.abs(x).sum(-1)[:, None, None] * np.sign(x)[..., None] * W.T[None]
    np.testing.assert_allclose(v.numpy(), expected_v, rtol=1e-15, atol=0)


@SETTINGS
@given(linear_problems(dtypes=(torch.float64,)))
def test_rows_of_zeros_give_exactly_zero(problem):
    x, W, dtype, d_k, seed = problem
    x[0] = 0.0
    _, y = _through_sdpa(x, W, dtype, d_k=d_k, generator=torch.Generator().manual_seed(seed))
    assert (y[0] == 0).all()


@SETTINGS
@given(st.integers(1, 12), st.integers(0, 3), st.integers(0, 2**31 - 1))
def test_drawn_key_is_shared_and_orthonormal(d_in, extra, seed):
    d_k = max(1, d_in - 1 + extra)
    x = np.random.default_rng(seed).standard_normal((3, d_in))
    (_, k, _, _), _ = _through_sdpa(
        x, np.ones((2, d_in)), torch.float64, d_k=d_k, generator=torch.Generator().manual_seed(seed)
    )
    k = k.numpy()
    assert (k == k[0]).all()  # one key for every row
    # d_k >= d_in: orthonormal rows; d_k = d_in - 1: the projector orthogonal to (1, ..., 1).
    expected = np.eye(d_in) - (d_k < d_in) * np.ones((d_in, d_in)) / d_in
    np.testing.assert_allclose(k[0] @ k[0].T, expected, atol=1e-13)


@settings(max_examples=60, deadline=None)
@given(linear_problems(), st.floats(0, 4))
def test_given_key_error_scales_with_its_condition_number(problem, log_cond):
    x, W, dtype, _, seed = problem
    d_in = x.shape[1]
    rng = np.random.default_rng(seed)
    U, _ = np.linalg.qr(rng.standard_normal((d_in, d_in)))
    V, _ = np.linalg.qr(rng.standard_normal((d_in, d_in)))
    key = (U * np.logspace(0, -log_cond, d_in)) @ V.T
    key = torch.tensor(key, dtype=dtype)
    cond = float(np.linalg.cond(key.double().numpy()))
    _, y = _through_sdpa(x, W, dtype, key=key)
    assert (np.abs(y - x @ W.T) <= _tolerance(x, W, dtype, cond)).all()


def test_wide_given_key_gets_the_minimum_norm_query():
    rng = np.random.default_rng(0)
    x, W = rng.standard_normal((4, 5)), rng.standard_normal((3, 5))
    key = torch.tensor(rng.standard_normal((5, 9)))
    (q, k, _, _), y = _through_sdpa(x, W, torch.float64, key=key)
    assert q.shape == (4, 1, 9) and k.shape == (4, 5, 9)
    np.testing.assert_allclose(y, x @ W.T, atol=1e-12)
    # Minimum norm: q lies in the row space of k^T, i.e. q = z k for some z (NumPy's lstsq).
    z = np.linalg.lstsq(key.numpy().T, q[:, 0].numpy().T, rcond=None)[0]
    np.testing.assert_allclose(z.T @ key.numpy(), q[:, 0].numpy(), atol=1e-12)


def test_query_ignores_scale_and_values_scale_with_x():
    rng = np.random.default_rng(1)
    x, W = rng.standard_normal((3, 6)), rng.standard_normal((4, 6))
    (q1, k1, v1, _), _ = _through_sdpa(x, W, torch.float64, generator=torch.Generator().manual_seed(5))
    (q2, k2, v2, _), _ = _through_sdpa(3 * x, W, torch.float64, generator=torch.Generator().manual_seed(5))
    torch.testing.assert_close(q2, q1)
    torch.testing.assert_close(k2, k1)
    torch.testing.assert_close(v2, 3 * v1)


def test_single_feature():
    x, W = np.array([[-2.0], [0.0], [0.5]]), np.array([[3.0], [-1.0]])
    _, y = _through_sdpa(x, W, torch.float64, generator=torch.Generator().manual_seed(0))
    np.testing.assert_array_equal(y, x @ W.T)


def test_doctest_example_by_hand():
    # Row 0: 2*w_1 - 1*w_2 + 0*w_3 + 0.5*w_4, with w_i the columns of W, written out.
    W = np.array(LINEAR_WEIGHT)
    hand = 2.0 * W[:, 0] - 1.0 * W[:, 1] + 0.5 * W[:, 3]
    _, y = _through_sdpa(np.array(LINEAR_X), W, torch.float64, generator=torch.Generator().manual_seed(0))
    np.testing.assert_allclose(y[0], hand, atol=1e-13)
    assert (y[1] == 0).all()


def test_the_posts_inverse_gives_nan_on_zero_entries_and_this_does_not():
    x = np.array([[1.0, 0.0, -2.0, 0.5]])
    W = np.arange(8.0).reshape(2, 4)
    with np.errstate(divide="ignore"):
        logits = np.log(np.abs(x) / np.abs(x).sum())
    k = np.random.default_rng(0).standard_normal((4, 4))
    with np.errstate(invalid="ignore"):
        q = 2.0 * logits @ np.linalg.inv(k.T)
        scores = q @ k.T
    assert np.isnan(scores).any()  # the literal recipe: log, then an inverse
    _, y = _through_sdpa(x, W, torch.float64)
    np.testing.assert_allclose(y, x @ W.T, atol=1e-13)


def test_generator_makes_the_key_reproducible():
    x, W = torch.randn(2, 5, dtype=torch.float64), torch.randn(3, 5, dtype=torch.float64)
    first = linear_as_attention(x, W, generator=torch.Generator().manual_seed(7))
    second = linear_as_attention(x, W, generator=torch.Generator().manual_seed(7))
    for a, b in zip(first, second, strict=True):
        assert torch.equal(a, b)


X = torch.randn(2, 4)
W = torch.randn(3, 4)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"x": [[1.0, 2.0]]}, TypeError, "x must be a torch.Tensor, got list"),
        ({"x": torch.ones(2, 4, dtype=torch.int64)}, TypeError, "x must have a floating dtype"),
        ({"x": torch.randn(4)}, ValueError, r"x has shape \(4,\), expected 2 dimensions: \(B, d_in\)"),
        (
            {"weight": torch.randn(3, 5)},
            ValueError,
            r"weight has shape \(3, 5\), expected \(3, 4\): \(d_out, d_in\)",
        ),
        ({"weight": torch.randn(3, 4, dtype=torch.float64)}, TypeError, "x and weight must share a dtype"),
        ({"d_k": 2}, ValueError, r"d_k must be an int of at least 3, got 2"),
        ({"d_k": 4.0}, ValueError, "d_k must be an int"),
        (
            {"key": torch.randn(4, 3)},
            ValueError,
            r"key has shape \(4, 3\), expected \(d_in=4, d_k\) with d_k >= d_in",
        ),
        ({"key": torch.randn(5, 5)}, ValueError, r"key has shape \(5, 5\)"),
        ({"key": torch.randn(4, 4, dtype=torch.float64)}, TypeError, "x and key must share a dtype"),
        ({"key": torch.randn(4, 6), "d_k": 5}, ValueError, r"d_k=5 does not match key of shape \(4, 6\)"),
        ({"key": torch.ones(4, 4)}, ValueError, r"has rank 1, expected rank d_in=4"),
    ],
)
def test_bad_input_names_the_argument_and_shapes(kwargs, error, message):
    arguments = {"x": X, "weight": W, **kwargs}
    with pytest.raises(error, match=message):
        linear_as_attention(**arguments)
