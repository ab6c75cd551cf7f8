"""The NumPy reference agrees with PyTorch's attention."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn.attention import SDPBackend, sdpa_kernel

from attn_ref import numpy_ref


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.integers(1, 6), st.integers(0, 2**31 - 1), st.booleans())
def test_matches_pytorch(L, S, d, seed, masked):
    rng = np.random.default_rng(seed)
    q, k, v = rng.normal(size=(2, L, d)), rng.normal(size=(2, S, d)), rng.normal(size=(2, S, d))
    mask = rng.random((L, S)) > 0.3 if masked else None
    output, weights = numpy_ref.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch_mask = None if mask is None else torch.from_numpy(mask)
    expected = F.scaled_dot_product_attention(
        *(torch.from_numpy(a) for a in (q, k, v)), attn_mask=torch_mask
    ).numpy()
    np.testing.assert_allclose(output, expected, atol=1e-12)
    assert np.all(weights >= 0)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31 - 1), st.sampled_from([np.nan, np.inf, -np.inf]), st.booleans())
def test_non_finite_inputs_propagate_as_in_pytorch(seed, special, masked):
    rng = np.random.default_rng(seed)
    q, k, v = rng.normal(size=(3, 4, 2)), rng.normal(size=(3, 5, 2)), rng.normal(size=(3, 5, 2))
    array = (q, k, v)[rng.integers(3)]
    array[tuple(rng.integers(size) for size in array.shape)] = special
    mask = rng.random((4, 5)) > 0.4 if masked else None
    output, _ = numpy_ref.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    with sdpa_kernel(SDPBackend.MATH):
        expected = F.scaled_dot_product_attention(
            *(torch.from_numpy(a) for a in (q, k, v)),
            attn_mask=None if mask is None else torch.from_numpy(mask),
        ).numpy()
    np.testing.assert_array_equal(np.isnan(output), np.isnan(expected))
    np.testing.assert_allclose(output, expected, atol=1e-12)


def test_softmax_is_stable_at_large_logits():
    np.testing.assert_allclose(numpy_ref.softmax([1e4, 1e4 + 1.0]), [1 / (1 + np.e), np.e / (1 + np.e)])


@pytest.mark.parametrize(
    ("key", "value", "mask", "message"),
    [
        (np.zeros((2, 3)), np.zeros((2, 4)), None, r"key has shape \(2, 3\)"),
        (np.zeros((2, 4)), np.zeros((3, 4)), None, r"value has shape \(3, 4\)"),
        (np.zeros((2, 4)), np.zeros((2, 4)), np.ones((2, 5), bool), r"attn_mask has shape \(2, 5\)"),
    ],
)
def test_shape_errors(key, value, mask, message):
    with pytest.raises(ValueError, match=message):
        numpy_ref.scaled_dot_product_attention(np.zeros((2, 4)), key, value, attn_mask=mask)
