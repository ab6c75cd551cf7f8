"""attn_ref.backward against PyTorch's autograd, finite differences and float64 NumPy.

The gradients are compared with three independent references: PyTorch's own gradients of
``F.scaled_dot_product_attention`` (its math backend or its fused CPU kernel), finite
differences (``torch.autograd.gradcheck``), and ``reference_gradients``, the textbook formulas
written out in float64 NumPy. Tolerances come from ``error_bounds``: the first-order forward
error analysis of the float computation (Higham's ``gamma_n = n u / (1 - n u)`` for a chain of
``n`` roundings), entry by entry, so that a float32 or float16 result is held to what its
arithmetic guarantees, not to a threshold read off one run.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn.attention import SDPBackend

from attn_ref.backward import (
    attention_backward,
    flash_attention,
    flash_attention_backward,
    softmax_backward,
    softmax_jacobian,
    standard_attention,
)
from attn_ref.tiled import dropout_mask, tiled_attention
from tests.support import reference
from tests.support.allocations import AllocationRecorder
from tests.support.backward_reference import (
    error_bounds,
    half_output_bound,
    pytorch_gradients,
    reference_gradients,
    reference_weights,
    subnormal_gap,
)
from tests.support.reference import as64
from tests.support.strategies import block_sizes, pair, tiles

SETTINGS = settings(max_examples=30, deadline=None)
MAX_LEN = 12


# --- references -------------------------------------------------------------------------------


def assert_within(computed, exact, bound, what=""):
    """|computed - exact| <= bound, entry by entry (a zero bound allows only an exact zero; a NaN
    where the exact value is a number is beyond any bound)."""
    computed, exact = as64(computed), np.asarray(exact, dtype=np.float64)
    assert computed.shape == exact.shape, f"{what}: shape {computed.shape}, expected {exact.shape}"
    gap = np.abs(computed - exact)
    bad = ~(gap <= bound * (1 + 1e-9))
    assert not bad.any(), (
        f"{what}: {bad.sum()} entries beyond their bound; worst gap {gap[bad].max():.3g} "
        f"against bound {bound[bad][np.argmax(gap[bad])]:.3g}"
    )


# --- strategies ---------------------------------------------------------------------------------


@st.composite
def problems(draw):
    """Random float64 (query, key, value, d_out), L != S allowed, and the masking."""
    batch = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=2)))
    L, S = draw(st.integers(1, MAX_LEN)), draw(st.integers(1, MAX_LEN))
    d_k, d_v = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    q = torch.randn(*batch, L, d_k, generator=g, dtype=torch.float64)
    k = torch.randn(*batch, S, d_k, generator=g, dtype=torch.float64)
    v = torch.randn(*batch, S, d_v, generator=g, dtype=torch.float64)
    d_out = torch.randn(*batch, L, d_v, generator=g, dtype=torch.float64)
    masking = draw(st.sampled_from(["none", "boolean", "additive", "causal"]))
    kwargs = {}
    if masking == "boolean":
        shape = draw(st.sampled_from([(L, S), (1, S), (L, 1), (*batch, L, S)]))
        allowed = torch.rand(shape, generator=g) > 0.4
        if draw(st.booleans()) and shape[-2] == L:
            allowed[..., 0, :] = False  # the first query sees no key
        kwargs["attn_mask"] = allowed
    elif masking == "additive":
        additive = torch.randn(L, S, generator=g, dtype=torch.float64)
        additive[torch.rand(L, S, generator=g) > 0.7] = -math.inf  # some rows fully blocked
        kwargs["attn_mask"] = additive
    elif masking == "causal":
        kwargs["is_causal"] = True
    return q, k, v, d_out, kwargs


def numpy_masks(q, k, kwargs):
    """(allowed, additive) of the reference functions, for the masking of ``kwargs``."""
    L, S = q.shape[-2], k.shape[-2]
    mask = kwargs.get("attn_mask")
    if kwargs.get("is_causal"):
        return reference.causal(L, S), None
    if mask is None:
        return None, None
    if mask.dtype == torch.bool:
        return mask.numpy(), None
    return None, as64(mask)


# --- the softmax --------------------------------------------------------------------------------


@SETTINGS
@given(st.lists(st.floats(-20, 20), min_size=1, max_size=10))
def test_softmax_jacobian_is_autograds(scores):
    s = torch.tensor(scores, dtype=torch.float64)
    p = torch.softmax(s, dim=-1)
    expected = torch.autograd.functional.jacobian(lambda x: torch.softmax(x, dim=-1), s)
    torch.testing.assert_close(softmax_jacobian(p), expected, rtol=0, atol=4 * torch.finfo(torch.float64).eps)
    assert softmax_jacobian(p).sum(dim=-1).abs().max() <= len(scores) * torch.finfo(torch.float64).eps


@SETTINGS
@given(st.integers(1, 4), st.integers(1, 9), st.integers(0, 2**31 - 1))
def test_softmax_backward_is_the_jacobian_times_the_gradient(rows, cols, seed):
    g = torch.Generator().manual_seed(seed)
    p = torch.softmax(3 * torch.randn(rows, cols, generator=g, dtype=torch.float64), dim=-1)
    p[0] = 0.0  # a row that sees nothing
    dp = torch.randn(rows, cols, generator=g, dtype=torch.float64)
    P, dP = p.numpy(), dp.numpy()
    expected = np.stack([(np.diag(P[i]) - np.outer(P[i], P[i])) @ dP[i] for i in range(rows)])
    # both sides sum cols + 2 terms of sizes p_j |dp_j| and p_j p_k |dp_k|: gamma_{cols+2} each
    u = np.finfo(np.float64).eps / 2
    magnitude = np.abs(P) * np.abs(dP) + np.abs(P) * (np.abs(P) * np.abs(dP)).sum(axis=-1, keepdims=True)
    assert_within(softmax_backward(p, dp), expected, 2 * (cols + 2) * u / (1 - (cols + 2) * u) * magnitude)
    assert torch.equal(softmax_backward(p, dp)[0], torch.zeros(cols, dtype=torch.float64))


# --- the standard backward pass ------------------------------------------------------------------


@SETTINGS
@given(problems())
def test_attention_backward_equals_pytorch_and_the_formulas(problem):
    q, k, v, d_out, kwargs = problem
    allowed, additive = numpy_masks(q, k, kwargs)
    # the weights in float64 NumPy, mask included: independent of attn_ref's forward pass
    weights = torch.from_numpy(reference_weights(as64(q), as64(k), as64(v), allowed, additive)[1])
    ours = attention_backward(q, k, v, weights, d_out)
    exact = reference_gradients(q, k, v, d_out, allowed, additive)
    bounds = error_bounds(q, k, v, d_out, torch.finfo(torch.float64).eps, allowed, additive)
    _, *theirs = pytorch_gradients(q, k, v, d_out, SDPBackend.MATH, **kwargs)
    for name, a, b, x, e in zip("QKV", ours, theirs, exact, bounds, strict=True):
        assert_within(a, x, e, f"d{name} against the formulas")
        assert_within(b, x, e, f"PyTorch's d{name} against the formulas")  # the bound holds for it too


@pytest.mark.parametrize("masking", ["none", "boolean", "additive", "causal"])
def test_standard_attention_passes_gradcheck(masking):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 3, generator=g, dtype=torch.float64, requires_grad=True)
    k, v = (torch.randn(2, 6, 3, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(2))
    boolean = torch.rand(4, 6, generator=g) > 0.4
    boolean[1] = False
    additive = torch.randn(4, 6, generator=g, dtype=torch.float64)
    additive[:, 2] = -math.inf
    kwargs = {
        "none": {},
        "boolean": {"attn_mask": boolean},
        "additive": {"attn_mask": additive},
        "causal": {"is_causal": True},
    }[masking]
    assert torch.autograd.gradcheck(lambda *qkv: standard_attention(*qkv, **kwargs), (q, k, v))


def test_standard_attention_keeps_the_weights_and_half_precision_is_computed_in_float32():
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(5, 4, generator=g).half().requires_grad_() for _ in range(3))
    out = standard_attention(q, k, v)
    assert out.dtype == torch.float16
    grads = torch.autograd.grad(out.float().sum(), (q, k, v))
    assert all(grad.dtype == torch.float16 for grad in grads)
    exact = reference_gradients(as64(q), as64(k), as64(v), np.ones((5, 4)))
    bounds = error_bounds(as64(q), as64(k), as64(v), np.ones((5, 4)), torch.finfo(torch.float32).eps)
    u16 = torch.finfo(torch.float16).eps / 2
    for grad, x, e in zip(grads, exact, bounds, strict=True):  # float32 work, one rounding to half
        assert_within(grad, x, e + u16 * (np.abs(x) + e))


# --- FlashAttention's backward pass ---------------------------------------------------------------


@SETTINGS
@given(problems(), block_sizes(MAX_LEN + 2))
def test_flash_backward_equals_pytorch_in_float64(problem, block_size):
    q, k, v, d_out, kwargs = problem
    out, state = tiled_attention(q, k, v, block_size=block_size, **kwargs)
    *ours, _ = flash_attention_backward(q, k, v, out, state.logsumexp, d_out, block_size=block_size, **kwargs)
    allowed, additive = numpy_masks(q, k, kwargs)
    exact = reference_gradients(q, k, v, d_out, allowed, additive)
    bounds = error_bounds(q, k, v, d_out, torch.finfo(torch.float64).eps, allowed, additive)
    _, *theirs = pytorch_gradients(q, k, v, d_out, SDPBackend.MATH, **kwargs)
    for name, a, b, x, e in zip("QKV", ours, theirs, exact, bounds, strict=True):
        assert_within(a, x, e, f"flash d{name}")
        assert_within(b, x, e, f"PyTorch's d{name}")


@SETTINGS
@given(problems(), block_sizes(MAX_LEN + 2), st.sampled_from([torch.float32, torch.bfloat16, torch.float16]))
def test_flash_attention_in_lower_precision_is_within_its_rounding(problem, block_size, dtype):
    """float32 is computed in float32; bfloat16 and float16 inputs too, their gradients rounded once."""
    q, k, v, d_out, kwargs = (
        *(t.to(dtype) for t in problem[:4]),
        {
            name: (
                value.to(torch.float32)
                if isinstance(value, torch.Tensor) and value.is_floating_point()
                else value
            )
            for name, value in problem[4].items()
        },
    )
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = flash_attention(*leaves, block_size=block_size, **kwargs)
    assert out.dtype == dtype
    grads = torch.autograd.grad((out.float() * d_out.float()).sum(), leaves)
    assert all(grad.dtype == dtype for grad in grads)
    allowed, additive = numpy_masks(q, k, kwargs)
    exact = reference_gradients(as64(q), as64(k), as64(v), as64(d_out), allowed, additive)
    bounds = error_bounds(
        as64(q), as64(k), as64(v), as64(d_out), torch.finfo(torch.float32).eps, allowed, additive
    )
    # The final rounding to the half format: u |x|, or half the gap between subnormals near 0.
    u, gap = (0.0, 0.0) if dtype == torch.float32 else (torch.finfo(dtype).eps / 2, subnormal_gap(dtype))
    for name, grad, x, e in zip("QKV", grads, exact, bounds, strict=True):
        if dtype != torch.float32:  # the output, stored in half, enters D: its rounding too
            e = e + half_output_bound(q, k, v, d_out, allowed, additive, u, gap / 2, name)
        assert_within(grad, x, e + u * (np.abs(x) + e) + gap / 2, f"d{name} in {dtype}")


@SETTINGS
@given(problems(), block_sizes(MAX_LEN + 2), block_sizes(MAX_LEN + 2))
def test_the_backward_blocks_need_not_be_the_forwards(problem, forward_block, backward_block):
    q, k, v, d_out, kwargs = problem
    out, state = tiled_attention(q, k, v, block_size=forward_block, **kwargs)
    *ours, _ = flash_attention_backward(
        q, k, v, out, state.logsumexp, d_out, block_size=backward_block, **kwargs
    )
    allowed, additive = numpy_masks(q, k, kwargs)
    exact = reference_gradients(q, k, v, d_out, allowed, additive)
    bounds = error_bounds(q, k, v, d_out, torch.finfo(torch.float64).eps, allowed, additive)
    for name, a, x, e in zip("QKV", ours, exact, bounds, strict=True):
        assert_within(a, x, e, f"d{name}")


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_passes_gradcheck(causal):
    g = torch.Generator().manual_seed(2)
    q = torch.randn(1, 2, 5, 3, generator=g, dtype=torch.float64, requires_grad=True)
    k, v = (torch.randn(1, 2, 7, 3, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(2))
    assert torch.autograd.gradcheck(
        lambda *qkv: flash_attention(*qkv, is_causal=causal, block_size=(2, 3)), (q, k, v)
    )


def test_a_query_that_sees_no_key_gets_zero_gradient_as_from_pytorch():
    g = torch.Generator().manual_seed(3)
    q, k, v, d_out = torch.randn(4, 1, 1, 6, 4, generator=g, dtype=torch.float64)  # (B, H, T, d)
    allowed = torch.ones(6, 6, dtype=torch.bool)
    allowed[2] = False
    out, state = tiled_attention(q, k, v, allowed, block_size=4)
    assert state.logsumexp[0, 0, 2] == -math.inf  # the true value, kept by the forward pass
    dq, dk, dv, _ = flash_attention_backward(q, k, v, out, state.logsumexp, d_out, allowed, block_size=4)
    assert torch.equal(dq[0, 0, 2], torch.zeros(4, dtype=torch.float64)) and not dq.isnan().any()
    for backend in (SDPBackend.MATH, SDPBackend.FLASH_ATTENTION):  # PyTorch's fused CPU kernel too
        _, *theirs = pytorch_gradients(q, k, v, d_out, backend, attn_mask=allowed)
        assert torch.equal(theirs[0][0, 0, 2], torch.zeros(4, dtype=torch.float64))
    d_out[0, 0, 2] += 100.0  # its output gradient reaches nothing
    moved = flash_attention_backward(q, k, v, out, state.logsumexp, d_out, allowed, block_size=4)
    assert torch.equal(moved[1], dk) and torch.equal(moved[2], dv)


# --- tiles, order and counts -------------------------------------------------------------------


@SETTINGS
@given(
    st.integers(1, 30),
    st.integers(1, 30),
    block_sizes(MAX_LEN + 2),
    st.booleans(),
    st.integers(1, 3),
    st.integers(1, 3),
)
def test_both_passes_count_the_same_tiles_and_the_multiply_adds_of_their_products(
    L, S, block_size, causal, d_k, d_v
):
    block_q, block_k = pair(block_size)
    visible = reference.causal(L, S) if causal else np.ones((L, S), dtype=bool)
    computed = [(rows, cols) for rows, cols in tiles(L, S, block_q, block_k) if visible[rows, cols].any()]
    areas = [(rows.stop - rows.start) * (cols.stop - cols.start) for rows, cols in computed]
    q, k, v = torch.zeros(2, L, d_k), torch.zeros(2, S, d_k), torch.zeros(2, S, d_v)  # batch of 2
    out, fwd = tiled_attention(q, k, v, is_causal=causal, block_size=block_size)
    *_, bwd = flash_attention_backward(
        q, k, v, out, fwd.logsumexp, out, is_causal=causal, block_size=block_size
    )
    for state in (fwd, bwd):
        assert state.tiles_computed == len(computed)
        assert state.tiles_computed + state.tiles_skipped == len(tiles(L, S, block_q, block_k))
    assert fwd.multiply_adds == 2 * sum(areas) * (d_k + d_v)  # Q_i K_j^T and P V_j
    assert bwd.multiply_adds == 2 * sum(areas) * (3 * d_k + 2 * d_v)  # S again, dV, dP, dQ, dK
    assert bwd.recompute_multiply_adds == 2 * sum(areas) * d_k
    assert bwd.exponentials == 2 * sum(areas)
    if d_k == d_v:
        assert bwd.multiply_adds * 2 == fwd.multiply_adds * 5  # FlashAttention-2, section 4.1


@SETTINGS
@given(st.integers(1, MAX_LEN), st.integers(1, MAX_LEN), block_sizes(MAX_LEN + 2), st.booleans())
def test_the_backward_pass_goes_keys_outside_queries_inside(L, S, block_size, causal):
    """Algorithm 2 of Dao (2023): for each block of keys, every block of queries in turn."""
    x = torch.zeros(max(L, S), 1)
    out, fwd = tiled_attention(x[:L], x[:S], x[:S], is_causal=causal, block_size=block_size, trace=True)
    *_, bwd = flash_attention_backward(
        x[:L], x[:S], x[:S], out, fwd.logsumexp, out, is_causal=causal, block_size=block_size, trace=True
    )
    order = [(step.cols.start, step.rows.start) for step in bwd.trace]
    assert order == sorted(order)  # keys outside, queries inside, both ascending
    assert {(s.rows, s.cols) for s in bwd.trace} == {(s.rows, s.cols) for s in fwd.trace}


def test_the_traced_weights_are_the_forward_weights_tile_by_tile():
    g = torch.Generator().manual_seed(4)
    q, k, v, d_out = (torch.randn(7, 3, generator=g, dtype=torch.float64) for _ in range(4))
    out, fwd = tiled_attention(q, k, v, is_causal=True, block_size=(3, 2))
    *_, bwd = flash_attention_backward(
        q, k, v, out, fwd.logsumexp, d_out, is_causal=True, block_size=(3, 2), trace=True
    )
    _, weights = reference.attention(as64(q), as64(k), as64(v), reference.causal(7))
    for step in bwd.trace:
        expected = weights[step.rows.start : step.rows.stop, step.cols.start : step.cols.stop]
        np.testing.assert_allclose(as64(step.weights), expected, rtol=1e-13, atol=1e-300)
        assert step.keep is None


# --- memory: no (L, S) tensor, what is saved ------------------------------------------------------


@pytest.mark.parametrize("masking", ["none", "bool", "float", "causal"])
def test_no_tensor_of_shape_L_by_S_in_either_pass(masking):
    L, S, d, block = 48, 40, 4, 8
    g = torch.Generator().manual_seed(5)
    q = torch.randn(2, L, d, generator=g, requires_grad=True)
    k, v = (torch.randn(2, S, d, generator=g, requires_grad=True) for _ in range(2))
    mask = {"bool": torch.rand(L, S, generator=g) > 0.3, "float": torch.randn(L, S, generator=g)}.get(masking)
    with AllocationRecorder() as recorder:
        out = flash_attention(q, k, v, mask, is_causal=masking == "causal", block_size=block)
        out.sum().backward()
    assert not [shape for shape in recorder.shapes if shape[-2:] == (L, S)]
    assert max(math.prod(shape) for shape in recorder.shapes) == 2 * L * d  # an input, output or gradient
    with AllocationRecorder() as recorder:  # the recorder does see the standard pass's weights
        standard_attention(q, k, v, mask, is_causal=masking == "causal").sum().backward()
    assert (2, L, S) in recorder.shapes


def test_flash_attention_saves_the_inputs_the_output_and_one_number_per_query():
    q, k, v = (torch.randn(1, 2, 9, 4, requires_grad=True) for _ in range(3))
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        out = flash_attention(q, k, v, block_size=4)
    shapes = sorted(tuple(t.shape) for t in saved)
    assert shapes == [(1, 2, 9), (1, 2, 9, 4), (1, 2, 9, 4), (1, 2, 9, 4), (1, 2, 9, 4)]
    pointers = {t.data_ptr() for t in saved}
    assert {x.data_ptr() for x in (q, k, v, out)} <= pointers  # the tensors themselves, not copies


# --- dropout ------------------------------------------------------------------------------------


@SETTINGS
@given(
    st.integers(0, 2**32 - 1),
    st.lists(st.integers(1, 3), max_size=2),
    st.integers(1, 15),
    st.integers(1, 15),
    block_sizes(MAX_LEN + 2),
    st.floats(0.0, 0.95),
)
def test_the_dropout_mask_depends_only_on_the_positions(seed, batch, L, S, block_size, p):
    whole = dropout_mask(seed, batch, range(L), range(S), p)
    assert whole.shape == (*batch, L, S) and whole.dtype == torch.bool
    block_q, block_k = pair(block_size)
    for rows, cols in tiles(L, S, block_q, block_k):
        tile = dropout_mask(seed, batch, range(L)[rows], range(S)[cols], p)
        assert torch.equal(tile, whole[..., rows, cols])


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_the_dropout_mask_keeps_one_minus_p_of_the_weights_independently(p):
    """Over n draws, a fair mask keeps (1 - p) n +- 5 sigma, sigma = sqrt(p (1 - p) n); two seeds
    agree on p^2 + (1 - p)^2 of the entries, and neighbours are uncorrelated, within 5 sigma."""
    n_rows, n_cols = 300, 400
    keep = dropout_mask(11, (2,), range(n_rows), range(n_cols), p).double()  # (2, 300, 400)
    n = keep.numel()
    assert abs(keep.mean().item() - (1 - p)) < 5 * math.sqrt(p * (1 - p) / n)
    other = dropout_mask(12, (2,), range(n_rows), range(n_cols), p).double()
    agree = 1 - p * (1 - p) * 2
    assert abs((keep == other).double().mean().item() - agree) < 5 * math.sqrt(agree * (1 - agree) / n)
    for a, b in (
        (keep[..., :, 1:], keep[..., :, :-1]),
        (keep[..., 1:, :], keep[..., :-1, :]),
        (keep[0], keep[1]),
    ):
        corr = ((a - a.mean()) * (b - b.mean())).mean() / (a.std() * b.std())
        assert abs(corr.item()) < 5 / math.sqrt(a.numel())


@SETTINGS
@given(problems(), block_sizes(MAX_LEN + 2), st.floats(0.05, 0.8), st.integers(0, 2**32 - 1))
def test_dropout_forward_and_backward_use_one_mask_regenerated_from_the_seed(problem, block_size, p, seed):
    q, k, v, d_out, kwargs = problem
    out, state = tiled_attention(
        q, k, v, block_size=block_size, dropout_p=p, dropout_seed=seed, trace=True, **kwargs
    )
    assert state.dropout_seed == seed
    *grads, bwd = flash_attention_backward(
        q,
        k,
        v,
        out,
        state.logsumexp,
        d_out,
        block_size=block_size,
        dropout_p=p,
        dropout_seed=seed,
        trace=True,
        **kwargs,
    )
    used = {(s.rows, s.cols): s.keep for s in state.trace}
    regenerated = {(s.rows, s.cols): s.keep for s in bwd.trace}
    assert used.keys() == regenerated.keys() and all(torch.equal(used[t], regenerated[t]) for t in used)
    keep = dropout_mask(seed, q.shape[:-2], range(q.shape[-2]), range(k.shape[-2]), p).numpy()
    allowed, additive = numpy_masks(q, k, kwargs)
    # the output: (P * Z) V with the mask from the positions, in float64 NumPy
    weights = reference_weights(as64(q), as64(k), as64(v), allowed, additive)[1]
    np.testing.assert_allclose(as64(out), (weights * keep / (1 - p)) @ as64(v), rtol=1e-10, atol=1e-12)
    exact = reference_gradients(q, k, v, d_out, allowed, additive, keep=keep, p=p)
    bounds = error_bounds(q, k, v, d_out, torch.finfo(torch.float64).eps, allowed, additive, keep=keep, p=p)
    for name, a, x, e in zip("QKV", grads, exact, bounds, strict=True):
        assert_within(a, x, e, f"d{name} with dropout")


def test_dropout_through_flash_attention_and_the_global_generator():
    g = torch.Generator().manual_seed(6)
    q, k, v = (torch.randn(1, 6, 2, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    torch.manual_seed(0)
    first = flash_attention(q, k, v, block_size=3, dropout_p=0.3)
    torch.manual_seed(0)
    again = flash_attention(q, k, v, block_size=5, dropout_p=0.3)
    torch.testing.assert_close(first, again)  # the same seed drawn: the same mask, any tiles
    assert not torch.allclose(first, flash_attention(q, k, v, block_size=3))  # dropout did something
    assert torch.autograd.gradcheck(
        lambda *qkv: flash_attention(*qkv, block_size=3, dropout_p=0.3, dropout_seed=5), (q, k, v)
    )


# --- the forward pass's additions ---------------------------------------------------------------


def test_without_dropout_the_trace_has_no_mask_and_no_seed_is_kept():
    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(7))
    _, state = tiled_attention(x, x, x, block_size=2, trace=True, dropout_seed=3)
    assert state.dropout_seed is None and all(step.keep is None for step in state.trace)


# --- bad input ----------------------------------------------------------------------------------


def _good():
    q, k, v = torch.zeros(2, 7, 4), torch.zeros(2, 5, 4), torch.zeros(2, 5, 3)
    out, state = tiled_attention(q, k, v)
    return {"query": q, "key": k, "value": v, "output": out, "logsumexp": state.logsumexp, "grad_output": out}


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        (
            {"logsumexp": torch.zeros(2, 7, 1)},
            ValueError,
            r"logsumexp has shape \(2, 7, 1\), expected 2 dimensions: \(\.\.\., L\)",
        ),
        (
            {"logsumexp": torch.zeros(2, 6)},
            ValueError,
            r"logsumexp has shape \(2, 6\), expected \(2, 7\): \(\.\.\., L\)",
        ),
        (
            {"output": torch.zeros(2, 7, 4)},
            ValueError,
            r"output has shape \(2, 7, 4\), expected \(2, 7, 3\): \(\.\.\., L, d_v\)",
        ),
        (
            {"grad_output": torch.zeros(7, 3)},
            ValueError,
            r"grad_output has shape \(7, 3\), expected 3 dimensions",
        ),
        ({"grad_output": [0.0]}, TypeError, "grad_output must be a torch.Tensor"),
        (
            {"logsumexp": torch.zeros(2, 7, dtype=torch.long)},
            TypeError,
            "logsumexp must have a floating dtype",
        ),
        ({"key": torch.zeros(2, 5, 3)}, ValueError, r"key has shape \(2, 5, 3\), expected \(2, 5, 4\)"),
        ({"block_size": 0}, ValueError, "block_size must be a positive int"),
        ({"dropout_p": 1.0}, ValueError, r"dropout_p must be a number in \[0, 1\), got 1.0"),
        ({"dropout_p": 0.5}, ValueError, "dropout_p > 0 needs dropout_seed"),
        (
            {"dropout_p": 0.5, "dropout_seed": -1},
            ValueError,
            "dropout_seed must be an int of at least 0, got -1",
        ),
    ],
)
def test_flash_backward_names_the_bad_argument(change, error, message):
    with pytest.raises(error, match=message):
        flash_attention_backward(**{**_good(), **change})


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda: attention_backward(
                torch.zeros(3, 2), torch.zeros(4, 2), torch.zeros(4, 5), torch.zeros(3, 3), torch.zeros(3, 5)
            ),
            ValueError,
            r"weights has shape \(3, 3\), expected \(3, 4\): \(\.\.\., L, S\)",
        ),
        (
            lambda: attention_backward(
                torch.zeros(3, 2), torch.zeros(4, 2), torch.zeros(4, 5), torch.zeros(3, 4), torch.zeros(3, 2)
            ),
            ValueError,
            r"grad_output has shape \(3, 2\), expected \(3, 5\): \(\.\.\., L, d_v\)",
        ),
        (
            lambda: softmax_backward(torch.zeros(2, 3), torch.zeros(3, 2)),
            ValueError,
            r"grad_weights has shape \(3, 2\), expected \(2, 3\)",
        ),
        (
            lambda: softmax_jacobian(torch.tensor(1.0)),
            ValueError,
            r"weights must have at least 1 dimensions, got shape \(\)",
        ),
        (
            lambda: flash_attention(
                torch.zeros(3, 2), torch.zeros(3, 2), torch.zeros(3, 2), torch.zeros(3, 3, requires_grad=True)
            ),
            ValueError,
            "attn_mask requires grad",
        ),
        (
            lambda: tiled_attention(torch.zeros(3, 2), torch.zeros(3, 2), torch.zeros(3, 2), dropout_p=-0.1),
            ValueError,
            "dropout_p must be",
        ),
        (
            lambda: tiled_attention(
                torch.zeros(3, 2), torch.zeros(3, 2), torch.zeros(3, 2), dropout_p=0.1, dropout_seed=2**32
            ),
            ValueError,
            r"dropout_seed must be an int in \[0, 4294967295\]",
        ),
        (
            lambda: dropout_mask(1, (), range(2), range(2), float("nan")),
            ValueError,
            "dropout_p must be a number in",
        ),
    ],
)
def test_bad_input_is_named(call, error, message):
    with pytest.raises(error, match=message):
        call()
