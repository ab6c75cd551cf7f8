"""attn_ref.tiled against PyTorch: online softmax, tiled attention, its gradients, its tiles and its memory."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn.attention import SDPBackend, sdpa_kernel

from attn_ref import online_softmax, scaled_dot_product_attention, tiled_attention
from tests.support import reference
from tests.support.allocations import AllocationRecorder
from tests.support.strategies import attention_inputs, block_sizes, non_finite_inputs, pair, tiles

SETTINGS = settings(max_examples=30, deadline=None)
MAX_LEN = 9  # blocks of up to 10 are drawn, so some are larger than L and S
SIZES = {"max_len": MAX_LEN, "max_width": 6}  # of the drawn inputs


@st.composite
def boolean_masks(draw, q, k, g):
    """A boolean mask broadcastable to (..., L, S), some rows fully masked: (L, S), (1, S), (L, 1) or full."""
    L, S = q.shape[-2], k.shape[-2]
    shape = draw(st.sampled_from([(L, S), (1, S), (L, 1), (*q.shape[:-2], L, S)]))
    return torch.rand(shape, generator=g) > 0.4


# --- online softmax ---------------------------------------------------------------------


@SETTINGS
@given(
    st.lists(st.integers(1, 5), min_size=1, max_size=3),
    st.integers(1, 8),
    st.integers(0, 2**31 - 1),
    st.data(),
)
def test_online_softmax_equals_the_two_pass_softmax(shape, block_size, seed, data):
    x = 5 * torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    weights, state = online_softmax(x, dim=dim, block_size=block_size)
    torch.testing.assert_close(weights, torch.softmax(x, dim=dim))
    expected = np.moveaxis(reference.softmax(np.moveaxis(x.numpy(), dim, -1)), -1, dim)
    np.testing.assert_allclose(weights.numpy(), expected, rtol=1e-12, atol=1e-15)
    assert torch.equal(state.row_max, x.amax(dim=dim))  # a max is exact, whatever the order
    torch.testing.assert_close(state.row_sum, (x - x.amax(dim=dim, keepdim=True)).exp().sum(dim=dim))
    torch.testing.assert_close(state.logsumexp, torch.logsumexp(x, dim=dim))


@SETTINGS
@given(st.lists(st.floats(-50, 50), min_size=1, max_size=12), st.integers(1, 5))
def test_online_softmax_trace_holds_the_state_of_every_prefix(values, block_size):
    x = torch.tensor(values, dtype=torch.float64)
    _, state = online_softmax(x, block_size=block_size, trace=True)
    assert [step.cols for step in state.trace] == [
        range(i, min(i + block_size, len(values))) for i in range(0, len(values), block_size)
    ]
    for step in state.trace:
        prefix = x[: step.cols.stop]
        assert step.row_max.item() == prefix.max().item()
        assert step.row_sum.item() == pytest.approx(
            math.fsum(math.exp(v - prefix.max().item()) for v in prefix)
        )


@pytest.mark.parametrize("offset", [1e4, 1e30, -1e30])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_online_softmax_does_not_overflow_at_large_logits(offset, dtype):
    if offset == 1e4:
        logits = torch.tensor([0.0, 1.0, 2.0], dtype=dtype) + offset  # exact in float32
        expected = reference.softmax([0.0, 1.0, 2.0])
    else:
        logits = torch.tensor([offset, offset, 0.0], dtype=dtype)
        expected = np.array([0.5, 0.5, 0.0]) if offset > 0 else np.array([0.0, 0.0, 1.0])
    assert not torch.isfinite(logits.exp()).all() or offset < 0  # exp itself overflows
    weights, _ = online_softmax(logits)
    np.testing.assert_allclose(weights.double().numpy(), expected, rtol=1e-6, atol=1e-12)


def test_online_softmax_of_all_minus_inf_is_nan_like_torch():
    x = torch.tensor([[float("-inf")] * 3, [0.0, float("-inf"), 1.0]])
    weights, _ = online_softmax(x, block_size=2)
    torch.testing.assert_close(weights, torch.softmax(x, dim=-1), equal_nan=True)
    assert weights[0].isnan().all()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_online_softmax_in_half_precision(dtype):
    x = torch.randn(4, 7, generator=torch.Generator().manual_seed(0))
    weights, state = online_softmax(x.to(dtype), block_size=3)
    assert weights.dtype == dtype and state.row_sum.dtype == torch.float32
    torch.testing.assert_close(
        weights.float(), torch.softmax(x.to(dtype).float(), dim=-1), atol=2e-3, rtol=1e-2
    )


# --- tiled attention against PyTorch --------------------------------------------------------


@SETTINGS
@given(attention_inputs(**SIZES), block_sizes(MAX_LEN + 1), st.none() | st.floats(0.05, 3.0))
def test_matches_pytorch_without_mask(inputs, block_size, scale):
    q, k, v, _ = inputs
    output, state = tiled_attention(q, k, v, scale=scale, block_size=block_size)
    torch.testing.assert_close(output, F.scaled_dot_product_attention(q, k, v, scale=scale))
    block_q, block_k = pair(block_size)
    assert state.tiles_computed == len(tiles(q.shape[-2], k.shape[-2], block_q, block_k))
    assert state.tiles_skipped == 0


@SETTINGS
@given(attention_inputs(**SIZES), block_sizes(MAX_LEN + 1), st.data())
def test_matches_pytorch_with_boolean_mask(inputs, block_size, data):
    q, k, v, g = inputs
    mask = data.draw(boolean_masks(q, k, g))
    output, _ = tiled_attention(q, k, v, attn_mask=mask, block_size=block_size)
    torch.testing.assert_close(output, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    expected, _ = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(output, expected)


@SETTINGS
@given(attention_inputs(**SIZES), block_sizes(MAX_LEN + 1))
def test_matches_pytorch_with_additive_mask(inputs, block_size):
    q, k, v, g = inputs
    mask = torch.randn(q.shape[-2], k.shape[-2], generator=g, dtype=q.dtype)
    mask[torch.rand(mask.shape, generator=g) > 0.6] = float("-inf")  # some rows fully blocked
    output, _ = tiled_attention(q, k, v, attn_mask=mask, block_size=block_size)
    with sdpa_kernel(SDPBackend.MATH):
        expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(output, expected)


@SETTINGS
@given(attention_inputs(**SIZES), block_sizes(MAX_LEN + 1))
def test_matches_pytorch_when_causal_including_L_not_S(inputs, block_size):
    q, k, v, _ = inputs
    output, _ = tiled_attention(q, k, v, is_causal=True, block_size=block_size)
    torch.testing.assert_close(output, F.scaled_dot_product_attention(q, k, v, is_causal=True))


@SETTINGS
@given(attention_inputs(**SIZES), block_sizes(MAX_LEN + 1), st.none() | st.just("bool") | st.just("causal"))
def test_logsumexp_is_that_of_the_masked_scores(inputs, block_size, masking):
    q, k, v, g = inputs
    L, S = q.shape[-2], k.shape[-2]
    mask = {"bool": torch.rand(L, S, generator=g) > 0.4, "causal": torch.ones(L, S, dtype=torch.bool).tril()}
    allowed = mask.get(masking)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    _, state = tiled_attention(
        q,
        k,
        v,
        attn_mask=allowed if masking == "bool" else None,
        is_causal=masking == "causal",
        block_size=block_size,
    )
    torch.testing.assert_close(state.logsumexp, torch.logsumexp(scores, dim=-1))
    torch.testing.assert_close(state.row_max, scores.amax(dim=-1))


# --- causal: which tiles are skipped ---------------------------------------------------------


@SETTINGS
@given(st.integers(1, 20), st.integers(1, 20), block_sizes(MAX_LEN + 1))
def test_causal_skips_exactly_the_tiles_with_no_visible_key(L, S, block_size):
    block_q, block_k = pair(block_size)
    visible = torch.ones(L, S, dtype=torch.bool).tril()  # top-left: query i sees keys 0..i
    empty = sum(not visible[rows, cols].any() for rows, cols in tiles(L, S, block_q, block_k))
    x = torch.zeros(max(L, S), 1)
    _, state = tiled_attention(x[:L], x[:S], x[:S], is_causal=True, block_size=block_size)
    assert state.tiles_skipped == empty
    assert state.tiles_computed + state.tiles_skipped == len(tiles(L, S, block_q, block_k))


@pytest.mark.parametrize("n_blocks", [1, 2, 3, 8])
def test_causal_skips_n_times_n_minus_1_over_2_of_n_squared_tiles(n_blocks):
    x = torch.zeros(4 * n_blocks, 1)
    _, state = tiled_attention(x, x, x, is_causal=True, block_size=4)
    assert state.tiles_skipped == n_blocks * (n_blocks - 1) // 2  # the blocks above the diagonal
    assert state.tiles_computed == n_blocks * (n_blocks + 1) // 2


# --- nan and inf ---------------------------------------------------------------------------


@SETTINGS
@given(non_finite_inputs(**SIZES), block_sizes(MAX_LEN + 1))
def test_nan_and_inf_propagate_as_in_pytorchs_math_backend(inputs, block_size):
    """PyTorch's fused CPU kernel returns zeros for a query containing nan; its math backend nan."""
    q, k, v, mask = inputs
    output, _ = tiled_attention(q, k, v, attn_mask=mask, block_size=block_size)
    with sdpa_kernel(SDPBackend.MATH):
        expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(output, expected, equal_nan=True)
    assert torch.equal(output.isnan(), expected.isnan())


@SETTINGS
@given(non_finite_inputs(**SIZES), block_sizes(MAX_LEN + 1))
def test_causal_reads_only_the_tiles_on_or_below_the_diagonal(inputs, block_size):
    """Each block of queries equals the math backend run on the keys up to the end of its last
    computed tile: what lies beyond, nan included, is never read."""
    q, k, v, _ = inputs
    L, S = q.shape[-2], k.shape[-2]
    block_q, block_k = pair(block_size)
    output, _ = tiled_attention(q, k, v, is_causal=True, block_size=block_size)
    for start in range(0, L, block_q):
        rows = slice(start, min(start + block_q, L))
        last_query = rows.stop - 1
        end = min(S, (last_query // block_k + 1) * block_k)  # the end of the key block holding key last_query
        with sdpa_kernel(SDPBackend.MATH):
            expected = F.scaled_dot_product_attention(q, k[..., :end, :], v[..., :end, :], is_causal=True)
        torch.testing.assert_close(output[..., rows, :], expected[..., rows, :], equal_nan=True)


def test_a_nan_key_above_the_diagonal_is_skipped_where_pytorch_adds_it():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(4, 2, generator=g) for _ in range(3))
    k[3, 0] = float("nan")  # the last key: in the skipped tile of queries 0-1
    output, state = tiled_attention(q, k, v, is_causal=True, block_size=2)
    assert state.tiles_skipped == 1
    assert not output[:2].isnan().any() and output[2:].isnan().all()  # queries 2, 3 compute that tile
    with sdpa_kernel(SDPBackend.MATH):
        assert F.scaled_dot_product_attention(q, k, v, is_causal=True).isnan().all()  # nan + -inf is nan
    torch.testing.assert_close(
        output[:2], F.scaled_dot_product_attention(q[:2], k[:2], v[:2], is_causal=True)
    )


def test_fully_masked_query_gets_zeros():
    q = k = v = torch.randn(5, 3, generator=torch.Generator().manual_seed(0))
    mask = torch.ones(5, 5, dtype=torch.bool)
    mask[2] = False
    output, state = tiled_attention(q, k, v, attn_mask=mask, block_size=2)
    assert torch.equal(output[2], torch.zeros(3))
    assert state.row_max[2] == float("-inf") and state.row_sum[2] == 0
    torch.testing.assert_close(output, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


# --- dtypes ----------------------------------------------------------------------------------


@SETTINGS
@given(attention_inputs(**SIZES, dtype=torch.float32), block_sizes(MAX_LEN + 1), st.booleans())
def test_float32_matches_pytorch(inputs, block_size, causal):
    q, k, v, _ = inputs
    output, _ = tiled_attention(q, k, v, is_causal=causal, block_size=block_size)
    torch.testing.assert_close(output, F.scaled_dot_product_attention(q, k, v, is_causal=causal))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_half_precision_is_computed_in_float32_and_cast_back(dtype, causal):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 11, 8, generator=g).to(dtype) for _ in range(3))
    output, state = tiled_attention(q, k, v, is_causal=causal, block_size=(4, 3))
    assert output.dtype == dtype and state.row_max.dtype == torch.float32
    reference_output = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    tolerance = {torch.float16: 2e-3, torch.bfloat16: 2e-2}[dtype]
    torch.testing.assert_close(output.float(), reference_output, atol=tolerance, rtol=tolerance)
    torch.testing.assert_close(output, reference_output.to(dtype))  # rounding once, at the end


# --- gradients -------------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(
    attention_inputs(**SIZES), block_sizes(MAX_LEN + 1), st.sampled_from(["none", "bool", "float", "causal"])
)
def test_gradients_equal_those_of_pytorch(inputs, block_size, masking):
    q, k, v, g = inputs
    L, S = q.shape[-2], k.shape[-2]
    mask = {
        "bool": torch.rand(L, S, generator=g) > 0.3,
        "float": torch.randn(L, S, generator=g, dtype=q.dtype),
    }.get(masking)
    weights = torch.randn(*q.shape[:-1], v.shape[-1], generator=g, dtype=q.dtype)  # a random linear loss

    def gradients(attention):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        output = attention(*leaves, attn_mask=mask, is_causal=masking == "causal")
        output = output[0] if isinstance(output, tuple) else output
        return torch.autograd.grad((output * weights).sum(), leaves)

    tiled = gradients(lambda *a, **kw: tiled_attention(*a, **kw, block_size=block_size))
    for ours, expected in zip(tiled, gradients(F.scaled_dot_product_attention), strict=True):
        torch.testing.assert_close(ours, expected)
    for ours, expected in zip(tiled, gradients(scaled_dot_product_attention), strict=True):
        torch.testing.assert_close(ours, expected)


# --- the trace ------------------------------------------------------------------------------


@SETTINGS
@given(attention_inputs(**SIZES), block_sizes(MAX_LEN + 1), st.booleans())
def test_trace_output_is_attention_over_the_keys_read_so_far(inputs, block_size, causal):
    q, k, v, _ = inputs
    output, state = tiled_attention(q, k, v, is_causal=causal, block_size=block_size, trace=True)
    assert len(state.trace) == state.tiles_computed
    for step in state.trace:
        rows, keys = slice(step.rows.start, step.rows.stop), slice(0, step.cols.stop)
        expected = F.scaled_dot_product_attention(q[..., rows, :], k[..., keys, :], v[..., keys, :])
        if causal:  # rows `rows` of the top-left mask over keys 0..cols.stop - 1
            allowed = torch.ones(q.shape[-2], step.cols.stop, dtype=torch.bool).tril()[rows]
            expected = F.scaled_dot_product_attention(
                q[..., rows, :], k[..., keys, :], v[..., keys, :], attn_mask=allowed
            )
        torch.testing.assert_close(step.output, expected)
        scores = q[..., rows, :] @ k[..., step.cols.start : step.cols.stop, :].transpose(-2, -1)
        if not causal:
            torch.testing.assert_close(step.scores, scores / math.sqrt(q.shape[-1]))
    last = {step.rows: step for step in state.trace}  # the last step of each block of queries
    for rows, step in last.items():
        torch.testing.assert_close(output[..., rows.start : rows.stop, :], step.output)


# --- memory: no tensor of shape (..., L, S) --------------------------------------------------


@pytest.mark.parametrize("masking", ["none", "bool", "float", "causal"])
def test_no_tensor_of_shape_L_by_S_is_created(masking):
    L, S, d, block = 48, 40, 4, 8
    g = torch.Generator().manual_seed(0)
    q, k, v = (
        torch.randn(2, L, d, generator=g),
        torch.randn(2, S, d, generator=g),
        torch.randn(2, S, d, generator=g),
    )
    mask = {"bool": torch.rand(L, S, generator=g) > 0.3, "float": torch.randn(L, S, generator=g)}.get(masking)
    with AllocationRecorder() as recorder:
        tiled_attention(q, k, v, attn_mask=mask, is_causal=masking == "causal", block_size=block)
    assert not [shape for shape in recorder.shapes if shape[-2:] == (L, S)]
    largest = max(math.prod(shape) for shape in recorder.shapes)
    assert largest == 2 * L * d  # the output; a tile holds 2 * block * block = 128 numbers
    assert largest < L * S  # smaller than one (L, S) matrix

    with AllocationRecorder() as recorder:  # the recorder does see the naive version's matrices
        scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=masking == "causal")
    assert (2, L, S) in recorder.shapes


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("block_size", "message"),
    [
        (0, r"block_size must be a positive int or a pair \(block_q, block_k\).*got 0"),
        (-2, "got -2"),
        (2.0, "got 2.0"),
        (True, "got True"),
        ((2,), r"got \(2,\)"),
        ((2, 0), r"block_size\[1\] \(block_k\) must be an int of at least 1, got 0"),
        ((0.5, 2), r"block_size\[0\] \(block_q\) must be an int of at least 1, got 0.5"),
    ],
)
def test_bad_block_sizes_are_named(block_size, message):
    x = torch.zeros(3, 2)
    with pytest.raises(ValueError, match=message):
        tiled_attention(x, x, x, block_size=block_size)


def test_online_softmax_rejects_bad_arguments():
    with pytest.raises(ValueError, match="block_size must be an int of at least 1, got 0"):
        online_softmax(torch.zeros(3), block_size=0)
    with pytest.raises(TypeError, match=r"x must be a torch\.Tensor, got list"):
        online_softmax([1.0, 2.0])
    with pytest.raises(TypeError, match=r"x must have a floating dtype, got torch\.int64"):
        online_softmax(torch.arange(3))


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"key": torch.zeros(2, 5, 3)}, ValueError, r"key has shape \(2, 5, 3\), expected \(2, 5, 4\)"),
        ({"value": torch.zeros(2, 6, 4)}, ValueError, r"value has shape \(2, 6, 4\), expected \(2, 5, 4\)"),
        (
            {"attn_mask": torch.ones(5, 7, dtype=torch.bool)},
            ValueError,
            r"attn_mask has shape \(5, 7\).*\(2, 7, 5\)",
        ),
        (
            {"attn_mask": torch.ones(7, 5, dtype=torch.long)},
            TypeError,
            "attn_mask must have a floating or boolean",
        ),
        ({"query": torch.zeros(4)}, ValueError, r"query must have at least 2 dimensions, got shape \(4,\)"),
        ({"key": torch.zeros(2, 5, 4, dtype=torch.float64)}, TypeError, "share a dtype"),
        (
            {"attn_mask": torch.ones(7, 5, dtype=torch.bool), "is_causal": True},
            ValueError,
            "either attn_mask",
        ),
    ],
)
def test_argument_errors_name_the_argument(kwargs, error, message):
    args = {"query": torch.zeros(2, 7, 4), "key": torch.zeros(2, 5, 4), "value": torch.zeros(2, 5, 4)}
    with pytest.raises(error, match=message):
        tiled_attention(**{**args, **kwargs})
