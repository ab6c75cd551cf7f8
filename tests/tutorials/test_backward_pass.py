"""The backward-pass tutorial, as the build executed it, checked against references computed here.

What the tutorial computed is read from its kernel's variables (``values``) and checked against
float64 NumPy: the softmax's Jacobian written out, the chain rule of ``reference_gradients``
(tests/support/backward_reference.py), weights from tests/support/reference.py, tiles and
multiply-adds counted from the causal mask, and float16 rounding done by NumPy. Float tolerances
come from ``error_bounds``, the float error analysis beside it. What the page says about
its memory measurements is checked on the numbers the build measured, with margins derived from
the tensors involved and peak_memory's arena slack; what a cell printed is matched as numbers
(tests/support/shown.py), never by its labels.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tests.support.backward_reference import (
    error_bounds,
    half_output_bound,
    reference_gradients,
    reference_weights,
    subnormal_gap,
)
from tests.support.drawings import texts
from tests.support.reference import EPS64, as64, attention, causal, softmax
from tests.support.shown import assert_printed, displayed, half_unit, sci_rtol, verdicts

FOUR = half_unit(4)
ARENA_MIB = 1.0  # what Python's arenas may add to one peak_memory measurement (its docstring)


def masks_of(kwargs, L, S):
    """(allowed, additive) for the reference functions, from a tutorial's mask arguments."""
    if kwargs.get("is_causal"):
        return causal(L, S), None
    mask = kwargs.get("attn_mask")
    if mask is None:
        return None, None
    return (mask.numpy(), None) if mask.dtype == torch.bool else (None, as64(mask))


def largest(bounds) -> float:
    return max(float(np.max(b)) if np.size(b) else 0.0 for b in bounds)


# --- the softmax ----------------------------------------------------------------------------------


def test_the_jacobian_is_diag_p_minus_p_p_transposed(tutorial, values):
    s, p = values["s"].numpy(), softmax(values["s"].numpy())
    J = np.diag(p) - np.outer(p, p)  # dp_j / ds_k = p_j (delta_jk - p_k)
    np.testing.assert_allclose(values["J"].numpy(), J, rtol=0, atol=4 * EPS64)
    np.testing.assert_allclose(values["J_autograd"].numpy(), J, rtol=0, atol=4 * EPS64)
    assert s.tolist() == [1.0, 2.0, 0.5]
    assert_printed(tutorial, p, atol=FOUR)
    assert_printed(tutorial, J, atol=FOUR)
    row_sum = np.abs(values["J"].numpy().sum(axis=-1)).max()
    assert row_sum <= 3 * 3 * EPS64  # three entries of size < 1, summed: zero up to rounding
    gap = np.abs(values["J"].numpy() - values["J_autograd"].numpy()).max()
    assert_printed(tutorial, [gap, row_sum], rtol=sci_rtol(1), gaps=True)


def test_the_vector_jacobian_product_needs_one_dot_product(tutorial, values):
    p, dp = softmax(values["s"].numpy()), values["dp"].numpy()
    expected = (np.diag(p) - np.outer(p, p)) @ dp
    short = p * (dp - p @ dp)
    np.testing.assert_allclose(short, expected, rtol=0, atol=8 * EPS64)
    assert_printed(tutorial, [*expected, *short, p @ dp], atol=FOUR, gaps=True)


# --- the gradients ---------------------------------------------------------------------------------


def test_by_hand_equals_autograd_and_the_chain_rule(tutorial, values):
    q, k, v, d_out = (as64(values[name]) for name in ("q_few", "k_few", "v_few", "d_out_few"))
    assert (q.shape, k.shape, v.shape) == ((4, 3), (6, 3), (6, 2))
    exact = reference_gradients(q, k, v, d_out)
    bounds = error_bounds(q, k, v, d_out, EPS64)
    shown = []
    for ours, theirs, x, e in zip(values["by_hand"], values["by_autograd"], exact, bounds, strict=True):
        assert (np.abs(as64(ours) - x) <= e).all() and (np.abs(as64(theirs) - x) <= e).all()
        shown += [*ours.shape, np.abs(as64(ours) - as64(theirs)).max()]
    assert_printed(tutorial, shown, rtol=[0, 0, sci_rtol(1)] * 3, gaps=True)
    out, weights = attention(q, k, v)
    D = (d_out * out).sum(axis=-1)  # rowsum(dO * O)
    np.testing.assert_allclose(((weights * (d_out @ v.T)).sum(axis=-1)), D, rtol=1e-12)  # rowsum(P * dP)
    np.testing.assert_allclose(values["D_from_weights"].numpy(), D, rtol=1e-12)
    np.testing.assert_allclose(values["D_from_output"].numpy(), D, rtol=1e-12)
    assert_printed(tutorial, [*D, *D], atol=FOUR)


def test_the_opening_picture_draws_the_gradients_of_the_example(values):
    """The picture above the first code: each matrix, for the inputs the section "The gradients of
    attention" differentiates, from the chain rule in float64."""
    q, k, v, d_out = (as64(values[name]) for name in ("q_few", "k_few", "v_few", "d_out_few"))
    _, P = attention(q, k, v)
    dQ, dK, dV = reference_gradients(q, k, v, d_out)
    dP = d_out @ v.T
    D = (P * dP).sum(axis=-1, keepdims=True)  # rowsum(P dP): the same number as rowsum(dO O)
    expected = {"S": q @ k.T / math.sqrt(3), "dP": dP, "D": D, "dS": P * (dP - D)}
    expected |= {"dQ": dQ, "dK": dK, "dV": dV}
    flow = values["flow"]
    assert flow.keys() == expected.keys()
    for name, matrix in expected.items():
        np.testing.assert_allclose(as64(flow[name]), matrix, rtol=1e-10, atol=1e-14, err_msg=name)


def test_gradcheck_passes_and_pytorch_agrees_in_every_case(tutorial, values):
    q, k, v, d_out = (as64(values[name]) for name in ("q_two", "k_two", "v_two", "d_out_two"))
    L, S = q.shape[-2], k.shape[-2]
    boolean, additive = values["boolean"].numpy(), as64(values["additive"])
    assert not boolean[2].any() and np.isneginf(additive[:, 3]).all()
    shown = []
    for name, kwargs in values["cases"].items():
        allowed, extra = masks_of(kwargs, L, S)
        bounds = error_bounds(q, k, v, d_out, EPS64, allowed, extra)
        passed, gap = values["checked"][name]
        assert passed is True
        # ours and PyTorch's each lie within the bound of the exact gradients
        assert gap <= 2 * largest(bounds)
        shown += [gap]
    assert_printed(tutorial, shown, rtol=sci_rtol(0), gaps=True)


def test_a_query_that_sees_no_key_gets_zeros_from_both(tutorial, values):
    q, k, v, d_out = (as64(values[name]) for name in ("q_two", "k_two", "v_two", "d_out_two"))
    allowed = values["boolean"].numpy()
    exact = reference_gradients(q, k, v, d_out, allowed)
    assert (exact[0][:, 2] == 0).all()  # the chain rule: zero weights pass nothing back
    for grads in (values["grads_ours"], values["grads_torch"]):
        assert torch.equal(grads[0][0, 2], torch.zeros(2, dtype=torch.float64))
    for out in (values["out_ours"], values["out_torch"]):
        assert torch.equal(out[0, 2], torch.zeros(2, dtype=torch.float64))
    moved = d_out.copy()
    moved[:, 2] += 100.0
    changed = reference_gradients(q, k, v, moved, allowed)
    np.testing.assert_array_equal(changed[1], exact[1])  # dK and dV do not see query 2's dO
    np.testing.assert_array_equal(changed[2], exact[2])
    assert values["unchanged"] is True


# --- what autograd keeps -------------------------------------------------------------------------


def test_what_each_way_keeps(tutorial, values):
    saved = values["saved"]
    square = {name: sum(shape[-2:] == (64, 64) for shape in shapes) for name, shapes in saved.items()}
    assert square["autograd"] >= 2  # "several": the scores, their exponentials, the weights
    assert square["standard"] == 1  # P, and nothing else of that size
    expected = sorted([(1, 1, 64, 8)] * 4 + [(1, 1, 64)])  # Q, K, V, O and one number per query
    assert sorted(saved["flash"]) == expected
    assert sorted(saved["PyTorch"]) == expected  # PyTorch's CPU kernel: the same five
    assert sorted(saved["standard"]) == sorted([(1, 1, 64, 8)] * 3 + [(1, 1, 64, 64)])
    shown = []
    for name, shapes in saved.items():
        shown += [len(shapes), square[name]]
    assert_printed(tutorial, shown, gaps=True)


def test_the_naive_peak_grows_like_T_squared_and_holds_the_kept_matrices(tutorial, values):
    lengths, peak = np.array(values["naive_lengths"]), values["naive_mib"]
    d = values["d_head"]
    linear = 7 * 4 * lengths * d / 2**20  # Q, K, V, O, dQ, dK, dV in float32
    matrix = 4 * lengths**2 / 2**20
    np.testing.assert_allclose(values["linear_mib"], linear, rtol=1e-15)
    np.testing.assert_allclose(values["matrix_mib"], matrix, rtol=1e-15)
    beyond = peak - linear
    # autograd keeps at least the (T, T) tensors counted above for every head, all at once
    kept = sum(shape[-2:] == (64, 64) for shape in values["saved"]["autograd"])
    assert (beyond >= kept * matrix - ARENA_MIB).all()
    # what lies beyond the (T, d) tensors grows like T**2: its slope over the lengths
    assert np.polyfit(np.log(lengths), np.log(beyond), 1)[0] > 1.9
    slope = np.polyfit(np.log(lengths), np.log(peak), 1)[0]
    assert values["naive_slope"] == pytest.approx(slope, rel=1e-12) and 1.8 < slope < 2.2
    np.testing.assert_allclose(values["naive_matrices"], beyond / matrix, rtol=1e-12)
    table = np.column_stack([lengths, peak, linear, beyond / matrix])
    assert_printed(tutorial, table, atol=[0, half_unit(2), half_unit(2), half_unit(2)])
    assert_printed(tutorial, [slope], atol=half_unit(2))


# --- FlashAttention's backward pass ----------------------------------------------------------------


def test_the_two_passes_visit_the_tiles_in_their_orders_and_skip_the_same(tutorial, values):
    visible = causal(16)
    blocks = [
        (i, j) for i in range(4) for j in range(4) if visible[4 * i : 4 * i + 4, 4 * j : 4 * j + 4].any()
    ]
    forward = sorted(blocks)  # queries outside: row by row
    backward = sorted(blocks, key=lambda t: (t[1], t[0]))  # keys outside: column by column
    for state, order in ((values["forward16"], forward), (values["state16"], backward)):
        assert [(s.rows.start // 4, s.cols.start // 4) for s in state.trace] == order
    skipped = 16 - len(blocks)
    assert skipped == 4 * 3 // 2  # n(n - 1)/2 tiles above the diagonal
    for state in (values["forward16"], values["state16"]):
        assert (state.tiles_computed, state.tiles_skipped) == (len(blocks), skipped)
    assert_printed(tutorial, [len(blocks), skipped, len(blocks), skipped], gaps=True)


def test_the_opened_tile_is_recomputed_from_the_log_sum_exp_and_D(tutorial, values):
    """The picture's tile of queries 8-11 and keys 4-7: its weights are those of attention over all
    16 keys, its dS is P (dP - D) with D = rowsum(dO O), both in float64 from the inputs."""
    q, k, v, d_out = (as64(values[name]) for name in ("q16", "k16", "v16", "d_out16"))
    out, P = attention(q, k, v, allowed=causal(16))
    D = (d_out * out).sum(axis=-1)
    rows, cols = slice(8, 12), slice(4, 8)
    opened = values["opened"]
    assert (opened.rows, opened.cols) == (range(8, 12), range(4, 8))
    np.testing.assert_allclose(as64(opened.weights), P[rows, cols], rtol=1e-12)
    np.testing.assert_allclose(as64(values["D16"]), D, rtol=1e-12, atol=1e-15)
    dS = P[rows, cols] * (d_out[rows] @ v[cols].T - D[rows, None])
    np.testing.assert_allclose(as64(opened.grad_scores), dS, rtol=1e-10, atol=1e-14)
    (figure,) = [d for d in displayed(tutorial, "image/svg+xml") if "the framed tile" in d]
    written = texts(figure)
    for weight in P[rows, cols].ravel():
        assert f"{weight:.2f}" in written
    for d in D[rows]:
        assert f"{d:.1f}" in written


def test_flash_gradients_equal_the_standard_ones(tutorial, values):
    q, k, v, d_out = (as64(values[name]) for name in ("q16", "k16", "v16", "d_out16"))
    allowed = causal(16)
    exact = reference_gradients(q, k, v, d_out, allowed)
    bounds = error_bounds(q, k, v, d_out, EPS64, allowed)
    shown = []
    for flash, standard, x, e in zip(values["grads16"], values["standard16"], exact, bounds, strict=True):
        assert (np.abs(as64(flash) - x) <= e).all() and (np.abs(as64(standard) - x) <= e).all()
        shown.append(np.abs(as64(flash) - as64(standard)).max())
    assert_printed(tutorial, shown, rtol=sci_rtol(1), gaps=True)
    np.testing.assert_allclose(
        values["lse_grid"].numpy(), np.log(np.exp(np.where(allowed, q @ k.T / math.sqrt(8), -np.inf)).sum(-1))
    )


def test_every_random_case_differs_from_pytorch_by_rounding_only(tutorial, values):
    """|flash - PyTorch| <= |flash - exact| + |PyTorch - exact|, each within error_bounds for the
    arithmetic it ran in (float32 for the half formats, plus their rounding of the result)."""
    cases, sweep, dtypes = values["sweep_cases"], values["sweep"], values["dtypes"]
    assert len(cases) == 20 and len(sweep) == 20 * len(dtypes)
    assert {case[3] for case in cases} == {"none", "boolean", "additive", "causal"}
    by_case = {(row[0], row[1]): row for row in sweep}
    for number, (inputs, d_out, mask, masking, blocks) in enumerate(cases):
        q, k, v = (as64(t) for t in inputs)
        d_out = as64(d_out)
        L, S = q.shape[-2], k.shape[-2]
        allowed = causal(L, S) if masking == "causal" else None
        if mask is not None and mask.dtype == torch.bool:
            allowed = mask.numpy()
        for dtype in dtypes:
            exact_dtype = dtype in (torch.float64, torch.float32)
            work = dtype if exact_dtype else torch.float32
            rounded = [x.to(dtype).double().numpy() for x in (torch.from_numpy(t) for t in (q, k, v, d_out))]
            additive = None if mask is None or mask.dtype == torch.bool else as64(mask.to(work))
            exact = reference_gradients(*rounded, allowed, additive)
            bounds = error_bounds(*rounded, torch.finfo(work).eps, allowed, additive)
            total = []
            for name, x, e in zip("QKV", exact, bounds, strict=True):
                bound = 2 * e  # flash's and PyTorch's
                if not exact_dtype:
                    u, gap = torch.finfo(dtype).eps / 2, subnormal_gap(dtype)
                    bound = bound + half_output_bound(*rounded, allowed, additive, u, gap / 2, name)
                    bound = bound + u * (np.abs(x) + e) + gap / 2
                total.append(bound)
            _, _, difference, biggest = by_case[(number, str(dtype))]
            assert difference <= largest(total), (number, dtype, masking, blocks)
            truth = max(np.abs(x).max() if x.size else 0.0 for x in exact)
            assert abs(biggest - truth) <= largest(bounds) + 1e-300
    shown = []
    for dtype in dtypes:
        rows = [row for row in sweep if row[1] == str(dtype)]
        shown += [max(r[2] for r in rows), torch.finfo(dtype).eps, max(r[3] for r in rows)]
    assert_printed(tutorial, shown, rtol=[sci_rtol(1), sci_rtol(1), 0] * 4, atol=[0, 0, half_unit(1)] * 4)


# --- memory of both passes -------------------------------------------------------------------------


def test_the_flash_peak_grows_like_T(tutorial, values):
    lengths, peak = np.array(values["flash_lengths"]), values["flash_mib"]
    d = values["d_head"]
    linear = 7 * 4 * lengths * d / 2**20
    np.testing.assert_allclose(values["flash_linear"], linear, rtol=1e-15)
    beyond = peak - linear
    # "just above": a few tiles of 256 x 256 float32 (256 KiB each) and the arenas, never a
    # (T, T) matrix; "about the same at every length": its spread is a tenth of what the seven
    # (T, d) tensors grow by
    tile = 4 * 256 * 256 / 2**20
    assert (beyond > -0.1).all() and beyond.max() < 8 * tile + ARENA_MIB
    assert np.ptp(beyond) < 0.1 * (linear[-1] - linear[0])
    slope = np.polyfit(np.log(lengths[-3:]), np.log(peak[-3:]), 1)[0]
    assert values["flash_slope"] == pytest.approx(slope, rel=1e-12) and 0 < slope < 1
    naive = dict(zip(values["naive_lengths"], values["naive_mib"], strict=True))
    shared = [T for T in values["flash_lengths"] if T in naive]
    ratios = [peak[list(lengths).index(T)] / naive[T] for T in shared]
    assert len(shared) >= 2 and all(r < 1 for r in ratios) and ratios == sorted(ratios, reverse=True)
    rows = []
    for T, p, b in zip(lengths, peak, beyond, strict=True):
        rows.append([T, naive[T], p, b] if T in naive else [T, p, b])
    for row in rows:
        assert_printed(tutorial, row, atol=[0] + [half_unit(2)] * (len(row) - 1))
    assert_printed(tutorial, [values["naive_slope"], slope], atol=half_unit(2), gaps=True)


# --- what it costs ----------------------------------------------------------------------------------


def test_the_work_of_both_passes_counted_from_the_tiles(tutorial, values):
    T, d = values["T_cost"], values["d_cost"]
    shown_tiles, shown_work = [], []
    for is_causal, (fwd, bwd) in values["costs"].items():
        visible = causal(T) if is_causal else np.ones((T, T), dtype=bool)
        areas = [
            min(128, T - i) * min(128, T - j)
            for i in range(0, T, 128)
            for j in range(0, T, 128)
            if visible[i : i + 128, j : j + 128].any()
        ]
        skipped = math.ceil(T / 128) ** 2 - len(areas)
        for state in (fwd, bwd):
            assert (state.tiles_computed, state.tiles_skipped) == (len(areas), skipped)
        forward = sum(areas) * (d + d)  # Q_i K_j^T and P V_j
        assert fwd.multiply_adds == forward
        assert bwd.multiply_adds == sum(areas) * (3 * d + 2 * d)  # S again, dV, dP, dQ, dK
        assert bwd.multiply_adds / forward == 2.5  # exactly: 5 products of one size against 2
        assert bwd.recompute_multiply_adds / forward == 0.5
        assert bwd.exponentials == sum(areas)
        paper = 4 * T**2 * d / (2 if is_causal else 1) / 2  # Dao (2023), section 4.1, in multiply-adds
        assert (paper / forward == 1.0) if not is_causal else (paper / forward < 1.0)
        shown_tiles += [len(areas), skipped, len(areas), skipped]
        shown_work += [forward, bwd.multiply_adds, 2.5, 0.5, sum(areas), paper / forward]
    assert_printed(tutorial, shown_tiles, gaps=True)
    assert_printed(
        tutorial, shown_work, atol=[0, 0, half_unit(2), half_unit(2), 0, half_unit(3)] * 2, gaps=True
    )


def test_dropout_regenerates_the_forward_mask(tutorial, values):
    used, regenerated = values["used"], values["regenerated"]
    assert used.keys() == regenerated.keys() and len(used) == 3 * 3  # tiles of 4 by 5 over 12 by 12
    assert all(torch.equal(used[t], regenerated[t]) for t in used) and values["same_masks"] is True
    assert torch.equal(values["stored"], values["whole"])
    stored = values["stored"].numpy()
    n, p = stored.size, values["p_drop"]
    assert abs(stored.mean() - (1 - p)) < 5 * math.sqrt(p * (1 - p) / n)  # a fair mask, 5 sigma
    q, k, v, d_out = (as64(values[name]) for name in ("q_d", "k_d", "v_d", "d_out_d"))
    weights = reference_weights(q, k, v, None, None)[1]
    out = (weights * stored / (1 - p)) @ v
    np.testing.assert_allclose(as64(values["out_d"]), out, rtol=1e-12, atol=1e-14)
    exact = reference_gradients(q, k, v, d_out, keep=stored, p=p)
    bounds = error_bounds(q, k, v, d_out, EPS64, keep=stored, p=p)
    for ours, stored_grad, x, e in zip(values["grads_d"], values["grads_stored"], exact, bounds, strict=True):
        assert (np.abs(as64(ours) - x) <= e).all() and (np.abs(as64(stored_grad) - x) <= e).all()
    assert_printed(tutorial, [len(used), stored.mean(), stored.size], atol=[0, half_unit(3), 0], gaps=True)
    gap_out = np.abs(as64(values["out_d"]) - as64(values["out_stored"])).max()
    assert_printed(tutorial, [gap_out, values["gap_d"]], rtol=sci_rtol(1), gaps=True)


# --- common pitfalls ----------------------------------------------------------------------------


def test_pitfall_leaving_out_D(tutorial, values):
    q, k, v, d_out = (as64(values[name]) for name in ("q_few", "k_few", "v_few", "d_out_few"))
    _, P = attention(q, k, v)
    dQ, dK, _ = reference_gradients(q, k, v, d_out)
    dS = P * (d_out @ v.T)  # the chain rule through exp alone
    wrong = [np.abs(dS.sum(axis=-1)).max()]  # a row of dS should sum to zero
    wrong += [np.abs(dS @ k / math.sqrt(3) - dQ).max(), np.abs(dS.T @ q / math.sqrt(3) - dK).max()]
    d_term = {name: [float(x) for x in row] for name, row in values["d_term"].items()}
    np.testing.assert_allclose(d_term["P * dP"], wrong, rtol=1e-10)
    assert min(wrong) > 0.1
    assert max(d_term["P * (dP - D)"]) < 1e-14
    assert_printed(tutorial, wrong, rtol=sci_rtol(1))


def test_pitfall_dS_on_the_wrong_side(tutorial, values):
    q, k, v, d_out = (as64(values[name]) for name in ("q5", "k5", "v5", "d_out5"))
    _, P = attention(q, k, v)
    dS = P * (d_out @ v.T - (d_out * (P @ v)).sum(axis=-1, keepdims=True))
    dK = reference_gradients(q, k, v, d_out)[1]
    np.testing.assert_allclose(as64(values["dk_right"]), dK, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(as64(values["dk_wrong"]), dS @ q / math.sqrt(3), rtol=1e-10, atol=1e-14)
    gap = np.abs(dS @ q / math.sqrt(3) - dK).max()
    assert gap > 0.1
    assert_printed(tutorial, [5, 3, 5, 3, gap], atol=[0, 0, 0, 0, half_unit(2)], gaps=True)


def test_pitfall_a_log_sum_exp_of_minus_infinity(tutorial, values):
    q, k, v, d_out = (as64(values[name]) for name in ("q_n", "k_n", "v_n", "d_out_n"))
    sees = values["sees"].numpy()
    assert not sees[1].any() and sees[0].any() and sees[2].any()
    lse = as64(values["fwd_n"].logsumexp)
    assert lse[1] == -np.inf
    scores = q @ k.T / math.sqrt(2)
    seen = np.exp(np.where(sees, scores, -np.inf))[[0, 2]]  # the queries that see a key
    np.testing.assert_allclose(lse[[0, 2]], np.log(seen.sum(-1)))
    # read as +inf: the weights of query 1 are zero, and dV is the reference's
    np.testing.assert_allclose(as64(values["dv_n"]), reference_gradients(q, k, v, d_out, sees)[2], rtol=1e-12)
    assert_printed(tutorial, [np.nan] * 3 + [v.size], gaps=True)  # as stored: every entry of dV is nan
    assert_printed(tutorial, [0.0] * 3 + [0], gaps=True)


# --- exercises ----------------------------------------------------------------------------------


def test_exercise_D_from_the_jacobian(tutorial, values):
    q, k, v, d_out = (as64(values[name]) for name in ("q1", "k1", "v1", "d_out1"))
    out, P = attention(q, k, v)
    D = (d_out * out).sum(axis=-1)
    np.testing.assert_allclose((P * (d_out @ v.T)).sum(axis=-1), D, rtol=1e-12)
    assert_printed(tutorial, [*D, *D], atol=FOUR)


def test_exercise_causal_tiles_skipped(tutorial, values):
    L, bq, bk = 1000, 64, 128
    visible = causal(L)
    empty = sum(not visible[i : i + bq, j : j + bk].any() for i in range(0, L, bq) for j in range(0, L, bk))
    assert values["formula"] == empty
    assert values["fwd2"].tiles_skipped == values["bwd2"].tiles_skipped == empty
    assert_printed(tutorial, [empty, empty, empty], gaps=True)


def test_exercise_the_log_sum_exp_in_float16(tutorial, values):
    q, k, v, d_out = (as64(values[name]) for name in ("q3", "k3", "v3", "d_out3"))
    previous = 0.0
    for factor, (lse32, lse16) in values["lse_by_factor"].items():
        L32 = as64(lse32)
        L16 = L32.astype(np.float16).astype(np.float64)  # NumPy's rounding to float16
        np.testing.assert_array_equal(as64(lse16), L16)
        worst = np.abs(L32 - L16).max()
        assert worst <= np.finfo(np.float16).eps / 2 * np.abs(L32).max() * (1 + 1e-12)  # half an ulp
        assert worst > previous  # it grows with the scores
        previous = worst
        # dV with the weights exp(S - L16) instead of exp(S - L32): each row scaled by exp(L32 - L16)
        scores = factor * q @ k.T / math.sqrt(q.shape[-1])
        P32, P16 = np.exp(scores - L32[:, None]), np.exp(scores - L16[:, None])
        expected = np.abs(P16.T @ d_out - P32.T @ d_out).max()
        # both flash runs carry their float32 rounding: twice the bound of dV
        bound = 2 * error_bounds(factor * q, k, v, d_out, np.finfo(np.float32).eps)[2].max()
        assert abs(values["errors3"][factor] - expected) <= bound
        assert_printed(
            tutorial,
            [np.abs(L32).max(), worst, 100 * math.expm1(worst), values["errors3"][factor]],
            atol=[half_unit(2), half_unit(4), half_unit(2), 0],
            rtol=[0, 0, 0, sci_rtol(0)],
            gaps=True,
        )


def test_exercise_grouped_query_gradients_are_summed_over_the_group(tutorial, values):
    q, k, v, d_out = (as64(values[name]) for name in ("q4", "k4", "v4", "d_out4"))
    k_rep, v_rep = np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1)  # heads 0, 1 read 0; 2, 3 read 1
    allowed = causal(10)
    _, dk, dv = reference_gradients(q, k_rep, v_rep, d_out, allowed)
    _, e_k, e_v = error_bounds(q, k_rep, v_rep, d_out, EPS64, allowed)
    dk, dv = dk.reshape(1, 2, 2, 10, 8).sum(axis=2), dv.reshape(1, 2, 2, 10, 8).sum(axis=2)
    e_k, e_v = e_k.reshape(1, 2, 2, 10, 8).sum(axis=2), e_v.reshape(1, 2, 2, 10, 8).sum(axis=2)
    e_k, e_v = e_k + 2 * EPS64 * np.abs(dk), e_v + 2 * EPS64 * np.abs(dv)  # the sum's rounding
    for name, exact, bound in (("dk", dk, e_k), ("dv", dv, e_v)):
        assert (np.abs(as64(values[f"{name}_summed"]) - exact) <= bound).all()
        assert (np.abs(as64(values[f"{name}_torch"]) - exact) <= bound).all()
    gaps = [np.abs(as64(values[f"{n}_summed"]) - as64(values[f"{n}_torch"])).max() for n in ("dk", "dv")]
    assert_printed(tutorial, [1, 2, 10, 8, gaps[0], 1, 2, 10, 8, gaps[1]], rtol=sci_rtol(1), gaps=True)


def test_every_verdict_the_tutorial_prints_is_the_truth(tutorial, values):
    """The True/False the page prints, in order, are what the tests above establish independently."""
    expected = [
        True,  # gradcheck, no mask
        True,  # gradcheck, boolean with a query that sees no key
        True,  # gradcheck, additive
        True,  # gradcheck, causal with L < S
        True,  # dK and dV unchanged when query 2's dO changes
        False,  # the costs table: not causal
        True,  # the costs table: causal
        False,  # the work table: not causal
        True,  # the work table: causal
        True,  # each regenerated dropout mask equals the forward's
        True,  # the whole mask in one call equals the tiles'
    ]
    assert verdicts(tutorial) == expected
