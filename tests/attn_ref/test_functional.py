"""attn_ref.functional against PyTorch's own attention, plus its properties and edges."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn.attention import SDPBackend, sdpa_kernel

from attn_ref import scaled_dot_product_attention, softmax
from attn_ref.masks import causal_mask, padding_mask
from tests.support.strategies import attention_inputs, non_finite_inputs

SETTINGS = settings(max_examples=60, deadline=None)


@SETTINGS
@given(attention_inputs())
def test_matches_pytorch_without_mask(inputs):
    q, k, v, _ = inputs
    output, _ = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(output, F.scaled_dot_product_attention(q, k, v))


@SETTINGS
@given(attention_inputs(), st.floats(0.05, 3.0))
def test_matches_pytorch_with_scale(inputs, scale):
    q, k, v, _ = inputs
    output, _ = scaled_dot_product_attention(q, k, v, scale=scale)
    torch.testing.assert_close(output, F.scaled_dot_product_attention(q, k, v, scale=scale))


@SETTINGS
@given(attention_inputs())
def test_matches_pytorch_with_boolean_mask(inputs):
    q, k, v, g = inputs
    mask = torch.rand(q.shape[-2], k.shape[-2], generator=g) > 0.4  # some rows fully masked
    output, weights = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(output, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    assert (weights[..., ~mask] == 0).all()


@SETTINGS
@given(attention_inputs())
def test_matches_pytorch_with_additive_mask(inputs):
    q, k, v, g = inputs
    mask = torch.randn(q.shape[-2], k.shape[-2], generator=g, dtype=q.dtype)
    output, _ = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(output, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


@SETTINGS
@given(attention_inputs())
def test_matches_pytorch_when_causal(inputs):
    q, k, v, _ = inputs
    output, _ = scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(output, F.scaled_dot_product_attention(q, k, v, is_causal=True))


@SETTINGS
@given(non_finite_inputs())
def test_nan_and_inf_propagate_as_in_pytorch(inputs):
    """Only rows whose scores are all -inf become zero; every other nan stays where PyTorch puts it.

    PyTorch's math backend is the reference: its fused CPU kernel returns zeros for a
    query that contains nan (see test_pytorch_cpu_kernels_disagree_on_a_nan_query).
    """
    q, k, v, mask = inputs
    output, _ = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    with sdpa_kernel(SDPBackend.MATH):
        expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(output, expected, equal_nan=True)
    assert torch.equal(output.isnan(), expected.isnan())


def test_one_nan_in_a_query_gives_nan_in_that_row_only():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(3, 2, generator=g) for _ in range(3))
    q[0, 0] = float("nan")
    output, weights = scaled_dot_product_attention(q, k, v)
    assert output[0].isnan().all() and weights[0].isnan().all()
    assert not output[1:].isnan().any()
    from attn_ref import numpy_ref

    numpy_output, _ = numpy_ref.scaled_dot_product_attention(q.numpy(), k.numpy(), v.numpy())
    assert np.isnan(numpy_output[0]).all() and not np.isnan(numpy_output[1:]).any()


def test_pytorch_cpu_kernels_disagree_on_a_nan_query():
    """A fact about torch 2.13 that the pages cite: the fused CPU kernel hides the nan."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, 3, 4, generator=g) for _ in range(3))  # (B, H, T, d_k): fused-eligible
    q[0, 0, 0, 0] = float("nan")
    with sdpa_kernel(SDPBackend.MATH):
        math_backend = F.scaled_dot_product_attention(q, k, v)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        fused = F.scaled_dot_product_attention(q, k, v)
    assert math_backend[0, 0, 0].isnan().all()
    assert torch.equal(fused[0, 0, 0], torch.zeros(4))
    torch.testing.assert_close(fused[0, 0, 1:], math_backend[0, 0, 1:])


def test_a_nan_key_poisons_every_row_even_where_masked_as_in_pytorch():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(3, 2, generator=g) for _ in range(3))
    k[2, 0] = float("nan")
    mask = torch.tensor([[True, True, False]] * 3)  # key 2 is masked for every query
    output, _ = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert output.isnan().all()  # nan * q is nan, and nan + (-inf) is nan
    assert F.scaled_dot_product_attention(q, k, v, attn_mask=mask).isnan().all()


@SETTINGS
@given(attention_inputs())
def test_weights_are_a_distribution_per_query(inputs):
    q, k, v, _ = inputs
    _, weights = scaled_dot_product_attention(q, k, v)
    assert (weights >= 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1], dtype=weights.dtype))


@SETTINGS
@given(attention_inputs(min_len=2), st.data())
def test_causal_outputs_ignore_later_tokens(inputs, data):
    q, k, v, g = inputs
    T = min(q.shape[-2], k.shape[-2])
    q, k, v = q[..., :T, :], k[..., :T, :], v[..., :T, :]
    changed = data.draw(st.integers(1, T - 1))
    k2, v2 = k.clone(), v.clone()
    k2[..., changed:, :] += torch.randn(k2[..., changed:, :].shape, generator=g, dtype=k.dtype)
    v2[..., changed:, :] += torch.randn(v2[..., changed:, :].shape, generator=g, dtype=v.dtype)
    before, _ = scaled_dot_product_attention(q, k, v, is_causal=True)
    after, _ = scaled_dot_product_attention(q, k2, v2, is_causal=True)
    assert torch.equal(before[..., :changed, :], after[..., :changed, :])
    assert not torch.equal(before[..., changed:, :], after[..., changed:, :])


@SETTINGS
@given(attention_inputs(), st.randoms(use_true_random=False))
def test_self_attention_is_permutation_equivariant(inputs, rng):
    x = inputs[0]
    perm = list(range(x.shape[-2]))
    rng.shuffle(perm)
    out, _ = scaled_dot_product_attention(x, x, x)
    out_permuted, _ = scaled_dot_product_attention(x[..., perm, :], x[..., perm, :], x[..., perm, :])
    torch.testing.assert_close(out_permuted, out[..., perm, :])


def test_weights_match_a_hand_computation():
    """softmax(QK^T/sqrt(d)) written out with math.exp for one query."""
    q = torch.tensor([[1.0, 2.0]], dtype=torch.float64)
    k = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=torch.float64)
    scores = [1 / math.sqrt(2), 2 / math.sqrt(2), 3 / math.sqrt(2)]
    expected = [math.exp(s) / sum(math.exp(t) for t in scores) for s in scores]
    _, weights = scaled_dot_product_attention(q, k, k)
    assert weights[0].tolist() == pytest.approx(expected, rel=1e-12)


def test_fully_masked_query_gets_zero_weights_and_output_like_pytorch():
    q = k = v = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))
    mask = torch.tensor([[True, True, False], [False, False, False], [True, True, True]])
    output, weights = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert torch.equal(weights[1], torch.zeros(3))
    assert torch.equal(output[1], torch.zeros(4))
    torch.testing.assert_close(output, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    assert softmax(torch.full((3,), float("-inf"))).isnan().all()  # what a plain softmax gives


def test_fully_masked_query_has_zero_gradients_like_pytorch():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(3, 2, generator=g, dtype=torch.float64) for _ in range(3))
    mask = torch.tensor([[True, False, True], [False, False, False], [True, True, False]])

    def gradients(attention):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        output = attention(*leaves, attn_mask=mask)
        output = output[0] if isinstance(output, tuple) else output
        return torch.autograd.grad(output.sum(), leaves)

    for ours, expected in zip(
        gradients(scaled_dot_product_attention), gradients(F.scaled_dot_product_attention), strict=True
    ):
        torch.testing.assert_close(ours, expected)


@pytest.mark.parametrize("offset", [1e4, -1e4, 1e6])
def test_large_logits_neither_overflow_nor_give_nan(offset):
    logits = torch.tensor([0.0, 1.0, 2.0]) + offset
    expected = np.exp([0.0, 1.0, 2.0]) / np.exp([0.0, 1.0, 2.0]).sum()
    np.testing.assert_allclose(softmax(logits).numpy(), expected, rtol=1e-6)
    assert torch.exp(logits).isinf().any() or offset < 0  # the naive formula would overflow


def test_scores_around_1e4_give_finite_attention():
    q = torch.tensor([[100.0, 0.0]])
    k = torch.tensor([[100.0, 0.0], [99.0, 0.0]])  # scores 1e4/sqrt(2) apart by ~70
    v = torch.tensor([[1.0], [2.0]])
    output, weights = scaled_dot_product_attention(q, k, v)
    assert torch.isfinite(output).all() and torch.isfinite(weights).all()
    torch.testing.assert_close(output, F.scaled_dot_product_attention(q, k, v))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_inputs(dtype):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 5, 8, generator=g) for _ in range(3))
    output, weights = scaled_dot_product_attention(q.to(dtype), k.to(dtype), v.to(dtype), is_causal=True)
    assert output.dtype == weights.dtype == dtype
    reference = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # float32
    tolerance = {torch.float16: 2e-3, torch.bfloat16: 2e-2}[dtype]
    torch.testing.assert_close(output.float(), reference, atol=tolerance, rtol=tolerance)


def test_causal_mask_is_lower_triangular_and_rectangular():
    assert torch.equal(causal_mask(2, 3), torch.tensor([[True, False, False], [True, True, False]]))


def test_padding_mask_marks_real_tokens():
    expected = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]], dtype=torch.bool)[:, None, :]
    assert torch.equal(padding_mask([2, 4, 0], S=4), expected)


def test_padding_mask_matches_pytorch_with_padded_batch():
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 4, 3, generator=g) for _ in range(3))
    mask = padding_mask([4, 2])
    output, _ = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(output, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"key": torch.zeros(2, 5, 3)}, r"key has shape \(2, 5, 3\), expected \(2, 5, 4\)"),
        ({"value": torch.zeros(2, 6, 4)}, r"value has shape \(2, 6, 4\), expected \(2, 5, 4\)"),
        ({"query": torch.zeros(3, 7, 4)}, r"key has shape \(2, 5, 4\), expected \(3, 5, 4\)"),
        ({"attn_mask": torch.ones(5, 7, dtype=torch.bool)}, r"attn_mask has shape \(5, 7\).*\(2, 7, 5\)"),
        ({"query": torch.zeros(4)}, r"query must have at least 2 dimensions, got shape \(4,\)"),
    ],
)
def test_shape_errors_name_the_argument_and_both_shapes(kwargs, message):
    args = {"query": torch.zeros(2, 7, 4), "key": torch.zeros(2, 5, 4), "value": torch.zeros(2, 5, 4)}
    with pytest.raises(ValueError, match=message):
        scaled_dot_product_attention(**{**args, **kwargs})


def test_type_errors():
    x = torch.zeros(2, 3)
    with pytest.raises(TypeError, match=r"key must be a torch\.Tensor, got ndarray"):
        scaled_dot_product_attention(x, np.zeros((2, 3)), x)
    with pytest.raises(TypeError, match=r"query must have a floating dtype, got torch\.int64"):
        scaled_dot_product_attention(torch.zeros(2, 3, dtype=torch.long), x, x)
    with pytest.raises(TypeError, match="share a dtype"):
        scaled_dot_product_attention(x, x.double(), x)


def test_mask_and_is_causal_together_are_refused_as_in_pytorch():
    x = torch.zeros(3, 2)
    with pytest.raises(ValueError, match="either attn_mask or is_causal"):
        scaled_dot_product_attention(x, x, x, attn_mask=causal_mask(3), is_causal=True)
    with pytest.raises(RuntimeError):
        F.scaled_dot_product_attention(x, x, x, attn_mask=causal_mask(3), is_causal=True)


@pytest.mark.parametrize("bad", [0, -1, 2.0])
def test_mask_helpers_reject_bad_sizes(bad):
    with pytest.raises(ValueError, match="must be an int of at least 1"):
        causal_mask(bad)


def test_padding_mask_rejects_lengths_beyond_S():
    with pytest.raises(ValueError, match=r"lengths must lie in \[0, S=3\]"):
        padding_mask([4, 1], S=3)


def test_lower_right_causal_mask_aligns_the_last_query_with_the_last_key():
    # Two new queries after three cached keys: query i sits at position 3 + i (written out by hand).
    expected = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    assert torch.equal(causal_mask(2, 5, lower_right=True), expected)
    assert torch.equal(causal_mask(4, lower_right=True), causal_mask(4))  # square: the two agree
    with pytest.raises(ValueError, match=r"lower_right=True needs L <= S.*got L=3, S=2"):
        causal_mask(3, 2, lower_right=True)
