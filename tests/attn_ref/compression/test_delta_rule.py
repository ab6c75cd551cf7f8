"""attn_ref.compression.delta_rule against independent references.

- The papers' recurrences written out in float64 NumPy, in their own (column) layout
  (tests/support/delta_rule_reference.py); the site's row-vector state is the transpose.
- Hand calculations: orthogonal unit keys store every pair exactly; a key written twice keeps
  the last value; beta = 0 writes nothing; alpha alone decays.
- Gradients: torch.autograd.gradcheck (finite differences) on both forms, and the two forms'
  gradients against each other on random shapes.
- The work: torch.utils.flop_counter counts the matrix products that run.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.flop_counter import FlopCounterMode

from attn_ref.compression import (
    DeltaRuleState,
    delta_rule_chunked,
    delta_rule_multiply_adds,
    delta_rule_recurrent,
)
from tests.support.delta_rule_reference import delta_rule_bound, delta_rule_inputs, delta_rule_np
from tests.support.reference import EPS32, EPS64

SETTINGS = settings(max_examples=40, deadline=None)

cases = st.tuples(
    st.integers(0, 10_000),  # seed
    st.lists(st.integers(1, 3), min_size=0, max_size=2),  # leading dimensions
    st.integers(1, 40),  # T
    st.integers(1, 9),  # d_k
    st.integers(1, 7),  # d_v
    st.integers(1, 17),  # chunk size
    st.booleans(),  # gated
)


def form_tolerance(eps, T, d_k, d_v, C, q, v):
    return delta_rule_bound(eps, T, d_k, d_v, C, float(q.detach().abs().max()), float(v.detach().abs().max()))


# --- both forms against the papers' recurrence ---------------------------------------------------


@SETTINGS
@given(cases)
def test_both_forms_follow_the_papers_recurrence(case):
    seed, batch, T, d_k, d_v, C, gated = case
    q, k, v, beta, *rest = delta_rule_inputs(seed, (*batch, T, d_k), d_v, gated)
    log_alpha = rest[0] if gated else None
    slow, slow_state = delta_rule_recurrent(q, k, v, beta, log_alpha)
    fast, fast_state = delta_rule_chunked(q, k, v, beta, log_alpha, chunk_size=C)
    tol = form_tolerance(EPS64, T, d_k, d_v, C, q, v)
    for index in np.ndindex(*batch):
        alpha = None if log_alpha is None else log_alpha[index].exp().numpy()
        expected, S = delta_rule_np(
            q[index].numpy(), k[index].numpy(), v[index].numpy(), beta[index].numpy(), alpha
        )
        for out, state in ((slow, slow_state), (fast, fast_state)):
            np.testing.assert_allclose(out[index].numpy(), expected, rtol=0, atol=tol)
            np.testing.assert_allclose(state.state[index].numpy(), S.T, rtol=0, atol=tol)  # ours: (d_k, d_v)
    assert slow_state.length == fast_state.length == T


@SETTINGS
@given(cases)
def test_chunked_equals_recurrent_in_float32(case):
    seed, batch, T, d_k, d_v, C, gated = case
    q, k, v, beta, *rest = delta_rule_inputs(seed, (*batch, T, d_k), d_v, gated, dtype=torch.float32)
    log_alpha = rest[0] if gated else None
    slow, s1 = delta_rule_recurrent(q, k, v, beta, log_alpha)
    fast, s2 = delta_rule_chunked(q, k, v, beta, log_alpha, chunk_size=C)
    tol = form_tolerance(EPS32, T, d_k, d_v, C, q, v)
    assert (fast - slow).abs().max() <= tol
    assert (s2.state - s1.state).abs().max() <= tol
    assert fast.dtype == slow.dtype == s2.state.dtype == torch.float32


def test_a_strong_decay_underflows_to_zero_not_nan():
    """exp(-60 * 64) is 0 in any precision: the chunked form must take gamma_C / gamma_r as one
    exponential of a difference, never 0 / 0."""
    q, k, v, beta = delta_rule_inputs(0, (1, 64, 4), 3, False, dtype=torch.float32)
    log_alpha = torch.full_like(beta, -60.0)
    slow, _ = delta_rule_recurrent(q, k, v, beta, log_alpha)
    fast, s2 = delta_rule_chunked(q, k, v, beta, log_alpha, chunk_size=64)
    assert torch.isfinite(fast).all() and torch.isfinite(s2.state).all()
    # alpha is e^-60: each state is the last token's write alone, beta_t k_t^T v_t.
    last = beta[..., -1, None, None] * k[..., -1:, :].mT @ v[..., -1:, :]
    torch.testing.assert_close(s2.state, last, rtol=0, atol=1e-6)
    torch.testing.assert_close(fast, slow, rtol=0, atol=1e-5)


# --- gradients ------------------------------------------------------------------------------------


@pytest.mark.parametrize("gated", [False, True])
@pytest.mark.parametrize("chunk", [None, 2, 4])
def test_gradients_match_finite_differences(gated, chunk):
    tensors = [
        x.requires_grad_() for x in delta_rule_inputs(3, (1, 1, 5, 3), 2, gated)
    ]  # chunks of 4: one short

    def run(q, k, v, beta, *rest):
        log_alpha = rest[0] if rest else None
        if chunk is None:
            out, state = delta_rule_recurrent(q, k, v, beta, log_alpha)
        else:
            out, state = delta_rule_chunked(q, k, v, beta, log_alpha, chunk_size=chunk)
        return out, state.state

    assert torch.autograd.gradcheck(run, tuple(tensors), eps=1e-6, atol=1e-7)


@settings(max_examples=20, deadline=None)
@given(cases)
def test_chunked_gradients_equal_recurrent_gradients(case):
    seed, batch, T, d_k, d_v, C, gated = case
    ours = [x.requires_grad_() for x in delta_rule_inputs(seed, (*batch, T, d_k), d_v, gated)]
    theirs = [x.detach().clone().requires_grad_() for x in ours]
    g = torch.Generator().manual_seed(seed + 1)
    w_out = torch.randn(*batch, T, d_v, generator=g, dtype=torch.float64)
    w_state = torch.randn(*batch, d_k, d_v, generator=g, dtype=torch.float64)
    for tensors, form in ((ours, delta_rule_chunked), (theirs, delta_rule_recurrent)):
        q, k, v, beta, *rest = tensors
        kwargs = {"chunk_size": C} if form is delta_rule_chunked else {}
        out, state = form(q, k, v, beta, rest[0] if rest else None, **kwargs)
        ((out * w_out).sum() + (state.state * w_state).sum()).backward()
    # each gradient sums up to T times more terms than an output, of the same sizes
    scale = float(w_out.abs().max() + w_state.abs().max())
    tol = T * form_tolerance(EPS64, T, d_k, d_v, C, ours[0], ours[2]) * scale
    for a, b in zip(ours, theirs, strict=True):
        assert (a.grad - b.grad).abs().max() <= tol


# --- hand calculations ----------------------------------------------------------------------------


def test_orthogonal_keys_are_stored_exactly_and_rewritten():
    keys = torch.eye(4, dtype=torch.float64)  # four orthogonal unit keys
    values = torch.arange(1.0, 9.0, dtype=torch.float64).reshape(4, 2)
    k = torch.cat([keys, keys[:1]])  # key 0 again, with a new value
    v = torch.cat([values, torch.tensor([[10.0, 20.0]], dtype=torch.float64)])
    expected = torch.cat([torch.tensor([[10.0, 20.0]], dtype=torch.float64), values[1:]])
    for form, kwargs in ((delta_rule_recurrent, {}), (delta_rule_chunked, {"chunk_size": 3})):
        _, state = form(k, k, v, torch.ones(5, dtype=torch.float64), **kwargs)
        assert torch.equal(keys @ state.state, expected)  # each key reads its row


def test_beta_zero_writes_nothing_and_alpha_decays():
    q, k, v, beta = delta_rule_inputs(0, (1, 1, 6, 3), 2, False)
    start = DeltaRuleState(torch.ones(1, 1, 3, 2, dtype=torch.float64), length=4)
    out, state = delta_rule_chunked(q, k, v, torch.zeros_like(beta), initial_state=start, chunk_size=4)
    assert torch.equal(state.state, start.state) and state.length == 10
    torch.testing.assert_close(out, q @ start.state, rtol=0, atol=1e-15)
    half = torch.full_like(beta, -0.5)
    _, decayed = delta_rule_recurrent(q, k, v, torch.zeros_like(beta), half, initial_state=start)
    torch.testing.assert_close(decayed.state, start.state * math.exp(-3.0), rtol=1e-14, atol=0)


@pytest.mark.parametrize("gated", [False, True])
def test_state_carries_from_call_to_call(gated):
    q, k, v, beta, *rest = delta_rule_inputs(5, (2, 2, 23, 4), 3, gated)
    log_alpha = rest[0] if gated else None
    whole, whole_state = delta_rule_recurrent(q, k, v, beta, log_alpha)
    parts, state = [], None
    for start, stop in ((0, 5), (5, 17), (17, 23)):
        piece = slice(start, stop)
        la = None if log_alpha is None else log_alpha[..., piece]
        out, state = delta_rule_chunked(
            q[..., piece, :], k[..., piece, :], v[..., piece, :], beta[..., piece], la,
            chunk_size=4, initial_state=state,
        )  # fmt: skip
        parts.append(out)
    tol = form_tolerance(EPS64, 23, 4, 3, 4, q, v)
    assert (torch.cat(parts, dim=-2) - whole).abs().max() <= tol
    assert (state.state - whole_state.state).abs().max() <= tol and state.length == 23


def test_scale_multiplies_the_outputs_only():
    q, k, v, beta = delta_rule_inputs(2, (1, 1, 9, 3), 2, False)
    out1, s1 = delta_rule_chunked(q, k, v, beta, chunk_size=4)
    out2, s2 = delta_rule_chunked(q, k, v, beta, chunk_size=4, scale=0.25)
    assert torch.equal(out2, 0.25 * out1) and torch.equal(s1.state, s2.state)


@pytest.mark.parametrize("T", [1, 10, 100])
def test_state_bytes_do_not_grow(T):
    q, k, v, beta = delta_rule_inputs(0, (2, 4, T, 16), 8, False, dtype=torch.float32)
    _, state = delta_rule_chunked(q, k, v, beta)
    assert state.nbytes == 2 * 4 * 16 * 8 * 4


# --- the work -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("T", "C"), [(37, None), (37, 8), (64, 16), (5, 16), (16, 1)])
def test_multiply_adds_are_the_products_that_run(T, C):
    B, H, d_k, d_v = 2, 3, 8, 5
    q, k, v, beta = delta_rule_inputs(1, (B, H, T, d_k), d_v, False)
    with FlopCounterMode(display=False) as counter:
        if C is None:
            delta_rule_recurrent(q, k, v, beta)
        else:
            delta_rule_chunked(q, k, v, beta, chunk_size=C)
    counted = delta_rule_multiply_adds(T, d_k, d_v, C)
    assert counter.get_total_flops() == 2 * B * H * counted["products"]  # a multiply-add is 2 FLOPs


def test_multiply_adds_by_hand():
    per_chunk = 2 * 16 * 16 * 8 + 16 * 16 * 5 + 3 * 16 * 8 * 5  # K K^T, Q K^T; (QK^T) U; W S, Q S, K^T U
    assert delta_rule_multiply_adds(64, 8, 5, 16) == {
        "products": 4 * per_chunk,
        "solve": 4 * (8 + 5) * (16 * 15 // 2),
        "total": 4 * per_chunk + 4 * (8 + 5) * (16 * 15 // 2),
    }
    assert delta_rule_multiply_adds(4096, 128, 128)["total"] == 3 * 4096 * 128 * 128


# --- bad input ------------------------------------------------------------------------------------


@pytest.mark.parametrize("form", [delta_rule_recurrent, delta_rule_chunked])
def test_bad_inputs_are_refused_by_name(form):
    q, k, v, beta = delta_rule_inputs(0, (1, 1, 4, 3), 2, False)
    with pytest.raises(TypeError, match=r"query must be a torch\.Tensor"):
        form(q.numpy(), k, v, beta)
    with pytest.raises(TypeError, match="key must have a floating dtype"):
        form(q, k.long(), v, beta)
    with pytest.raises(ValueError, match=r"key has shape \(1, 1, 4, 2\), expected \(1, 1, 4, 3\)"):
        form(q, k[..., :2], v, beta)
    with pytest.raises(ValueError, match=r"value has shape \(1, 1, 3, 2\), expected \(1, 1, 4, 2\)"):
        form(q, k, v[..., :3, :], beta)
    with pytest.raises(ValueError, match=r"beta has shape \(1, 1, 4, 1\), expected 3 dimensions"):
        form(q, k, v, beta[..., None])
    with pytest.raises(ValueError, match=r"log_alpha must be finite and <= 0 .*, got 0.1"):
        form(q, k, v, beta, torch.full_like(beta, 0.1))
    with pytest.raises(ValueError, match=r"log_alpha must be finite and <= 0 .*, got -inf"):
        form(q, k, v, beta, torch.full_like(beta, float("-inf")))
    with pytest.raises(TypeError, match=r"must share a dtype; got query torch\.float64"):
        form(q, k, v, beta.float())
    with pytest.raises(TypeError, match="initial_state must be a DeltaRuleState, got Tensor"):
        form(q, k, v, beta, initial_state=torch.zeros(1, 1, 3, 2))
    wrong = DeltaRuleState(torch.zeros(1, 1, 2, 3, dtype=torch.float64), 0)
    with pytest.raises(
        ValueError, match=r"initial_state.state has shape \(1, 1, 2, 3\), expected \(1, 1, 3, 2\)"
    ):
        form(q, k, v, beta, initial_state=wrong)


def test_bad_sizes_are_refused_by_name():
    q, k, v, beta = delta_rule_inputs(0, (1, 1, 4, 3), 2, False)
    with pytest.raises(ValueError, match="chunk_size must be an int of at least 1, got 0"):
        delta_rule_chunked(q, k, v, beta, chunk_size=0)
    with pytest.raises(ValueError, match="d_k must be an int of at least 1, got 0"):
        delta_rule_multiply_adds(10, 0, 4)
    with pytest.raises(ValueError, match=r"chunk_size must be an int of at least 1, got 2\.5"):
        delta_rule_multiply_adds(10, 4, 4, chunk_size=2.5)
