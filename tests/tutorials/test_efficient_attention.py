"""The efficient-attention tutorial, as the build executed it, checked against references computed here.

What the tutorial computed is read from its kernel's variables (``values``) where it keeps them,
and checked against references independent of attn_ref: float64 NumPy attention
(tests/support/reference.py), the online softmax written out as a plain loop, the tiles a causal mask
leaves visible counted from the causal mask of tests/support/reference.py, the paper's Algorithms 0 and 1
(Dao et al., 2022) counted loop by loop, and sizes in bytes worked out by hand. What a loop only
printed is read from the numbers its cell printed, without the page's labels
(tests/support/shown.py). What the page says about its memory measurements (growth like T**2 or
T, four matrices) is checked on the numbers the build measured, with margins derived from the
tensors involved; its timings depend on the machine and are only checked to print what was measured.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tests.support.drawings import texts
from tests.support.reference import as64, attention, causal, softmax
from tests.support.shown import assert_printed, displayed, half_unit, numbers_of, printed_by_cell, sci_rtol

FOUR = half_unit(4)
ARENA_MIB = 1.0  # what Python's arenas may add to one peak_memory measurement (its docstring)


def test_one_score_matrix_takes_4_B_H_T_squared_bytes(tutorial):
    sizes = []
    for T in (2_048, 32_768, 131_072):
        sizes += [T, 4 * 1 * 32 * T * T / 2**30]  # float32, B = 1, H = 32
    assert sizes[1::2] == [0.5, 128, 2048]
    assert_printed(tutorial, sizes)
    assert_printed(tutorial, [1, 2, 6, 6])  # the weights' shape, (B, H, T, T)


def test_online_softmax_trace_is_the_running_max_and_sum(tutorial, values):
    x = values["x"].numpy()
    trace, m, ell = [], -math.inf, 0.0
    for j, x_j in enumerate(x):  # the loop of Milakov and Gimelshein, written out
        new_m = max(m, x_j)
        rescale = math.exp(m - new_m)
        m, ell = new_m, ell * rescale + math.exp(x_j - new_m)
        trace.append([j, x_j, m, rescale, ell])
    steps = values["online_state"].trace
    computed = [[s.row_max.item(), s.rescale.item(), s.row_sum.item()] for s in steps]
    np.testing.assert_allclose(computed, np.array(trace)[:, 2:], rtol=1e-14, atol=1e-300)
    np.testing.assert_allclose(as64(values["weights"]), softmax(x), rtol=1e-14)
    assert m == x.max() and ell == pytest.approx(np.exp(x - x.max()).sum(), rel=1e-14)
    assert_printed(tutorial, trace, atol=[0, half_unit(1), half_unit(1), FOUR, FOUR])
    assert_printed(tutorial, [m, ell], atol=[half_unit(1), FOUR], gaps=True)  # "stable"
    gap = np.abs(as64(values["weights"]) - softmax(x)).max()
    assert gap < 1e-15
    assert_printed(tutorial, [gap], rtol=sci_rtol(1))


def test_online_softmax_does_not_overflow_where_exp_does(tutorial, values):
    logits = values["logits"]
    assert logits.dtype == torch.float32 and (logits > math.log(np.finfo(np.float32).max)).all()
    online = softmax(np.array([0.0, 1.0, 2.0]))  # shifting by 1e4 changes nothing
    np.testing.assert_allclose(as64(logits) - 1e4, [0, 1, 2])
    assert_printed(tutorial, [np.nan] * 3 + online.tolist(), atol=FOUR)
    assert_printed(tutorial, [math.log(np.finfo(np.float32).max)], atol=half_unit(2))


def _running_state(scores: np.ndarray, visible: np.ndarray, upto: int) -> tuple[np.ndarray, np.ndarray]:
    """m and ℓ of each row over the keys 0..upto-1 it may see, in float64."""
    s = np.where(visible[:, :upto], scores[:, :upto], -np.inf)
    m = s.max(axis=1)
    return m, np.exp(s - m[:, None]).sum(axis=1)


def test_the_trace_of_the_tiles_is_attention_over_the_keys_read_so_far(tutorial, values):
    """8 causal tokens in tiles of 2: every tile of the trace holds the running m, ℓ and output of
    attention over the keys read so far; the block of queries 4 and 5 prints them."""
    q, k, v = (as64(values[name]) for name in ("q8", "k8", "v8"))
    scores, visible = q @ k.T / math.sqrt(2), causal(8)
    steps = values["state8"].trace
    computed = {(s.rows.start, s.cols.start) for s in steps}
    assert computed == {(i, j) for i in range(0, 8, 2) for j in range(0, i + 1, 2)}  # 10 of 16
    for step in steps:
        rows, upto = slice(step.rows.start, step.rows.stop), step.cols.stop
        m, ell = _running_state(scores[rows], visible[rows], upto)
        previous_m = (
            _running_state(scores[rows], visible[rows], step.cols.start)[0] if step.cols.start else -np.inf
        )
        output = attention(q[rows], k[:upto], v[:upto], allowed=visible[rows, :upto])[0]
        np.testing.assert_allclose(as64(step.row_max), m, atol=1e-6)
        np.testing.assert_allclose(as64(step.rescale), np.exp(previous_m - m), atol=1e-6)
        np.testing.assert_allclose(as64(step.row_sum), ell, rtol=1e-6)
        np.testing.assert_allclose(as64(step.output), output, atol=1e-6)
        if step.rows.start == 4:
            shown = [*m, *np.exp(previous_m - m), *ell, *output.ravel()]
            assert_printed(tutorial, shown, atol=FOUR + 1e-6, gaps=True)
    expected = attention(q, k, v, allowed=visible)[0]
    error = np.abs(as64(values["out8"]) - expected).max()
    assert error < 1e-6


def test_the_opening_picture_draws_query_4_from_the_same_numbers(tutorial, values):
    """The picture above the first code: query 4's running m, ℓ and rescale after each of its three
    tiles, from the inputs the section "Tiled attention" prints, written in the figure."""
    q, k = as64(values["q8"]), as64(values["k8"])
    scores, visible = (q @ k.T / math.sqrt(2))[4:5], causal(8)[4:5]
    expected, previous = [], -np.inf
    for upto in (2, 4, 6):  # the block of queries 4, 5 computes three tiles and skips the fourth
        m, ell = _running_state(scores, visible, upto)
        expected.append((m[0], ell[0], np.exp(previous - m[0])))
        previous = m[0]
    np.testing.assert_allclose(values["picture_steps"], expected, rtol=1e-6)
    (figure,) = [d for d in displayed(tutorial, "image/svg+xml") if "query 4, tile by tile" in d]
    written = texts(figure)
    for m, ell, _ in expected:
        assert f"{m:.2f}" in written and f"{ell:.2f}" in written
    assert f"×{expected[1][2]:.2f}" in written


def test_tiled_equals_pytorch_with_masks_causal_and_gradients(tutorial, values):
    L, S, block = values["L"], values["S"], 16
    assert not values["boolean"][5].any()  # the query that may see no key
    visible = causal(L, S)  # top-left aligned
    causal_tiles = sum(
        visible[i : i + block, j : j + block].any() for i in range(0, L, block) for j in range(0, S, block)
    )
    all_tiles = math.ceil(L / block) * math.ceil(S / block)
    cases = values["cases"]
    assert sum("attn_mask" in kwargs for kwargs in cases.values()) == 2  # a boolean and an additive mask
    # Per case: the tiles computed (a causal mask skips the tiles it hides), then the largest output
    # and gradient errors against PyTorch, both float64 rounding.
    shown = []
    for kwargs in cases.values():
        shown += [causal_tiles if kwargs.get("is_causal") else all_tiles, 0.0, 0.0]
    assert causal_tiles < all_tiles
    assert_printed(tutorial, shown, atol=[0, 1e-13, 1e-13] * len(cases), gaps=True)


def test_causal_map_skips_exactly_the_tiles_above_the_diagonal(tutorial, values):
    n_blocks, (block, _) = values["n_blocks"], values["state_grid"].block_size
    steps = values["state_grid"].trace
    # row by row, each block of queries up to the diagonal: the order the picture numbers
    assert [(s.rows.start // block, s.cols.start // block) for s in steps] == [
        (i, j) for i in range(n_blocks) for j in range(i + 1)
    ]
    (figure,) = [d for d in displayed(tutorial, "image/svg+xml") if "rows: blocks of queries" in d]
    assert str(len(steps)) in texts(figure) and str(len(steps) + 1) not in texts(figure)
    shown = []
    for n in (2, 8, 64):
        skipped = int((~causal(n)).sum())
        assert skipped == n * (n - 1) // 2
        shown += [n, skipped, n * n, skipped / (n * n), (n - 1) / (2 * n)]
        assert skipped / (n * n) == (n - 1) / (2 * n)
    assert values["skipped"] == 64 * 63 // 2 and values["total"] == 64 * 64  # the last the loop kept
    assert_printed(tutorial, shown, atol=[0, 0, 0, half_unit(3), 1e-12] * 3, gaps=True)


def test_memory_table_is_what_was_measured(tutorial, values):
    lengths, peaks = values["lengths"], values["peaks"]
    np.testing.assert_array_equal(values["formula"], [4 * T * T / 2**20 for T in lengths])
    np.testing.assert_array_equal(values["io"], [4 * 4 * T * 128 / 2**20 for T in lengths])  # Q, K, V, O
    table = np.column_stack([lengths, *peaks.values(), values["formula"], values["io"]])
    assert_printed(tutorial, table, atol=[0] + [half_unit(2)] * 5)


def test_memory_grows_as_the_page_says(tutorial, values):
    peaks, io, formula, slopes = values["peaks"], values["io"], values["formula"], values["slopes"]
    # naive: about four (T, T) matrices beyond its inputs and output, so that part grows like T**2
    beyond = peaks["naive"] - io
    assert np.polyfit(np.log(values["lengths"][1:]), np.log(beyond[1:]), 1)[0] > 1.9
    assert 3.5 < beyond[-1] / formula[-1] < 4.5
    assert values["extra"] == pytest.approx(beyond[-1] / formula[-1])
    # tiled: like T, inputs and output plus a small part that does not grow; the slope below one.
    # "Small": a few of its (128, 128) float32 tiles (64 KiB each); "does not grow": its spread over
    # the lengths is a tenth of what the inputs and output grow by.
    beyond = peaks["tiled"] - io
    assert slopes["tiled"] < 1.0 and (beyond > 0).all() and beyond.max() < 16 * 128 * 128 * 4 / 2**20
    assert np.ptp(beyond) < 0.1 * (io[-1] - io[0])
    # PyTorch's kernel: like T, its fixed part stepping up with its larger tiles
    beyond = peaks["PyTorch"] - io
    # at T = 256 its fixed part is tens of KiB: within what peak_memory may fall short by (its docstring)
    assert slopes["PyTorch"] < 1.3 and (beyond > -0.1).all() and beyond.max() < 1.5
    for name, slope in slopes.items():  # the printed slopes: fits of log peak against log T, here
        expected = np.polyfit(np.log(values["lengths"][1:]), np.log(peaks[name][1:]), 1)[0]
        assert slope == pytest.approx(expected)
        shown = [expected, *(peaks[name] - io)]
        assert_printed(tutorial, shown, atol=[half_unit(2)] + [half_unit(2)] * len(io), gaps=True)
    assert_printed(tutorial, [values["lengths"][-1], values["extra"]], atol=[0, half_unit(2)])


def _hbm_by_hand(N, d, M):
    """One head's forward pass, counted loop by loop: Algorithms 0 and 1 of Dao et al. (2022), and
    Algorithm 1 of Dao (2023) with query blocks of FlashAttention's key-block size."""
    standard = 2 * N * d + N * N  # read Q, K; write S
    standard += 2 * N * N  # read S; write P
    standard += N * N + N * d + N * d  # read P, V; write O
    B_c, B_r = math.ceil(M / (4 * d)), min(math.ceil(M / (4 * d)), d)
    flash = N * d + 2 * N  # initialise O, l, m in HBM
    for j in range(0, N, B_c):
        flash += 2 * (min(j + B_c, N) - j) * d  # load K_j, V_j
        for i in range(0, N, B_r):
            rows = min(i + B_r, N) - i
            flash += 2 * rows * d + 2 * rows  # load Q_i, O_i, l_i, m_i
            flash += rows * d + 2 * rows  # write O_i, l_i, m_i
    queries_outside = 0
    for i in range(0, N, B_c):  # blocks of queries, as large as FlashAttention's blocks of keys
        rows = min(i + B_c, N) - i
        queries_outside += rows * d  # load Q_i
        for j in range(0, N, B_r):
            queries_outside += 2 * (min(j + B_r, N) - j) * d  # load K_j, V_j
        queries_outside += rows * d + rows  # write O_i and the log-sum-exp L_i
    return standard, flash, queries_outside


def test_hbm_traffic_counted_from_the_papers(tutorial, values):
    M = values["M"]
    assert M == 164 * 1024 // 2  # an A100 SM's shared memory at most (NVIDIA's Ampere tuning guide)
    assert_printed(tutorial, [M, math.ceil(M / 256)], gaps=True)
    counted = [2 * 64 * 16 * n / 1e9 for n in _hbm_by_hand(1024, 64, M)]  # bytes of fp16, in GB
    computed = [values[name] for name in ("standard", "flash", "flash2")]
    assert computed == pytest.approx(counted, rel=1e-12)
    assert_printed(tutorial, counted, rtol=0.005, gaps=True)
    paper = {  # Dao et al. (2022, arXiv v2), Figure 2 left: standard, FlashAttention
        "HBM R/W (GB)": (40.3, 4.4),
        "Runtime (ms)": (41.7, 7.3),
        "GFLOPs": (66.6, 75.2),
    }
    assert list(values["rows"].values()) == list(paper.values())
    shown = [[a, b, round(a / b, 1)] for a, b in paper.values()]
    assert_printed(tutorial, shown, atol=half_unit(1))


def test_the_traffic_ratio_levels_off_near_M_over_3_or_2_d_squared(values):
    M = values["M"]
    for d in (64, 128):
        counts = np.array([_hbm_by_hand(int(N), d, M) for N in values["Ns"]])
        for column, level in ((1, M / (3 * d * d)), (2, M / (2 * d * d))):
            ratios = counts[:, 0] / counts[:, column]
            assert ratios[-1] == pytest.approx(level, rel=0.03)
            assert ratios[-1] > ratios[0]
    np.testing.assert_array_equal(values["counts"], counts)  # the plot's last curve, d = 128
    # Below M = 3 d**2 (FlashAttention) or 2 d**2 (queries outside) the saving turns into a loss
    # at long lengths; above, a gain.
    for column, factor in ((1, 3), (2, 2)):
        below, above = (_hbm_by_hand(16_384, 128, factor * 128**2 + change) for change in (-1024, 4096))
        assert below[0] / below[column] < 1 < above[0] / above[column]


def test_cpu_timings_print_what_was_measured(tutorial, values):
    timings = values["timings"]  # the machine's: the page orders none of them
    assert len(timings) == 4 and all(ms > 0 for ms in timings.values())
    assert_printed(tutorial, list(timings.values()), atol=half_unit(1), gaps=True)


def test_pitfall_forgetting_to_rescale_the_output(tutorial, values):
    """Without the rescale of O the output is off by far more than rounding; with it, it is attention."""
    q, k, v = (as64(values[name]) for name in ("q8", "k8", "v8"))
    expected = attention(q, k, v)[0]
    wrong, right = (as64(values["one_pass_outputs"][r]) for r in (False, True))
    np.testing.assert_allclose(right, expected, atol=1e-6)
    # the loop written out: O keeps every tile's terms at its own maximum, while ℓ is rescaled
    scores = q @ k.T / math.sqrt(2)
    m_final = scores.max(axis=1)
    out = np.zeros_like(expected)
    for j in range(0, 8, 2):
        m_j = scores[:, : j + 2].max(axis=1)
        out += np.exp(scores[:, j : j + 2] - m_j[:, None]) @ v[j : j + 2]
    out /= np.exp(scores - m_final[:, None]).sum(axis=1)[:, None]
    np.testing.assert_allclose(wrong, out, atol=1e-5)
    gap = np.abs(wrong - expected).max()
    assert gap > 0.1
    assert_printed(tutorial, [gap, np.abs(right - expected).max()], rtol=[sci_rtol(1), 0.0], atol=[0.0, 1e-6])


def test_pitfall_skipping_by_the_top_left_test_under_a_bottom_right_mask(tutorial, values):
    visible = causal(6, 10, lower_right=True)
    blocks = [(i, j) for i in range(0, 6, 2) for j in range(0, 10, 4)]
    top_left = sum(j > i + 1 for i, j in blocks)  # first key after the last query, as if L = S
    empty = sum(not visible[i : i + 2, j : j + 4].any() for i, j in blocks)
    hides_visible = sum(j > i + 1 and visible[i : i + 2, j : j + 4].any() for i, j in blocks)
    assert (top_left, empty, hides_visible) == (5, 2, 3)
    skipping = values["skipping"]
    assert skipping["top-left test"][0] == top_left and skipping["shifted by S - L"][0] == empty
    assert skipping["top-left test"][1] > 0.1 and skipping["shifted by S - L"][1] < 1e-5
    assert_printed(tutorial, [top_left, float(skipping["top-left test"][1])], rtol=[0, sci_rtol(1)])
    assert_printed(tutorial, [empty, float(skipping["shifted by S - L"][1])], rtol=[0, sci_rtol(1)])


def test_exercise_merging_two_halves(tutorial, values):
    row = values["row"].numpy()
    m = row.max()
    ell = np.exp(row - m).sum()
    assert values["m"].item() == m and values["whole"].row_max.item() == m
    assert values["ell"].item() == pytest.approx(ell, rel=1e-13)
    assert values["whole"].row_sum.item() == pytest.approx(ell, rel=1e-13)
    assert_printed(tutorial, [m, ell, m, ell], atol=half_unit(6))


def test_exercise_new_tokens_after_a_cache(tutorial, values):
    visible = causal(6, 10, lower_right=True)  # bottom-right aligned
    np.testing.assert_array_equal(values["mask"].numpy(), visible)
    empty = sum(not visible[i : i + 2, j : j + 4].any() for i in range(0, 6, 2) for j in range(0, 10, 4))
    assert empty == 2 and values["empty"] == empty
    assert values["state"].tiles_skipped == 0  # tiled_attention skips no tile under an explicit mask
    q, k, v = (as64(values[name]) for name in ("q_new", "k_all", "v_all"))
    expected, _ = attention(q, k, v, allowed=visible)
    np.testing.assert_allclose(as64(values["ours"]), expected, atol=1e-5)
    np.testing.assert_allclose(as64(values["expected"]), expected, atol=1e-5)
    assert_printed(tutorial, [empty, 0])
    gap = np.abs(as64(values["ours"]) - as64(values["expected"])).max()
    assert_printed(tutorial, [gap], rtol=sci_rtol(0))


def test_exercise_the_logsumexp_recovers_the_weights(tutorial, values):
    q, k, v = (as64(values[name]) for name in ("q6", "k6", "v6"))
    weights = attention(q, k, v)[1][3]
    recovered = np.exp(as64(values["scores"]) - values["state6"].logsumexp[3].item())
    np.testing.assert_allclose(recovered, weights, rtol=1e-12)
    np.testing.assert_allclose(as64(values["weights6"])[3], weights, rtol=1e-12)
    assert_printed(tutorial, [*weights, *weights], atol=FOUR)


def test_exercise_autograd_memory_grows_faster_than_linear(tutorial):
    """Forward and backward at T = 512 and 1024: the cell is only printed (its loop reuses names).

    Both grow faster than T: the peak at 1024 exceeds twice the peak at 512 by more than what
    Python's arenas may add to the three measurements involved.
    """
    (text,) = [
        text
        for cell, text in zip(tutorial.code_cells, printed_by_cell(tutorial), strict=True)
        if {"solution", "measured"} <= set(cell.metadata.get("tags", []))
    ]
    rows = numbers_of(text).reshape(2, 5)  # per method: MiB at 512, 512, MiB at 1024, 1024, ratio
    for at_512, T_512, at_1024, T_1024, ratio in rows:
        assert (T_512, T_1024) == (512, 1024)
        assert ratio == pytest.approx(at_1024 / at_512, abs=0.05 + 0.01 * ratio)
        assert at_1024 - 2 * at_512 > 3 * ARENA_MIB
