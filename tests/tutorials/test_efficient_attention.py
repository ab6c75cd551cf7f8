"""The efficient-attention tutorial, as the build executed it, checked against references computed here.

The references are independent of attn_ref: float64 NumPy attention (tests/reference.py), the
online softmax written out as a plain loop, the tiles a causal mask leaves visible counted from
the causal mask of tests/reference.py, the paper's Algorithms 0 and 1 (Dao et al., 2022) counted loop by loop, and sizes
in bytes worked out by hand. What the page says about its memory measurements (growth like T**2 or T,
four matrices) is checked on the numbers the build measured, with margins derived from the
tensors involved; its timings depend on the machine and are only checked to print what was measured.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from tests.printed import line_after, number_after, numbers
from tests.reference import attention, causal, softmax


def test_one_score_matrix_takes_4_B_H_T_squared_bytes(printed):
    rows = re.findall(r"^  T = +([\d,]+): ([\d.]+) GiB$", printed, flags=re.M)
    assert [int(T.replace(",", "")) for T, _ in rows] == [2_048, 32_768, 131_072]
    for T, gib in rows:
        T = int(T.replace(",", ""))
        assert float(gib) == 4 * 1 * 32 * T * T / 2**30  # float32, B = 1, H = 32
    assert "weights: (1, 2, 6, 6)" in printed


def test_online_softmax_trace_is_the_running_max_and_sum(printed, values):
    x = values["x"].numpy()
    table = printed.split(" j  x_j    m  rescale       ℓ\n")[1].splitlines()[: len(x)]
    m, ell = -math.inf, 0.0
    for j, line in enumerate(table):  # the loop of Milakov and Gimelshein, written out
        new_m = max(m, x[j])
        rescale = math.exp(m - new_m)
        m, ell = new_m, ell * rescale + math.exp(x[j] - new_m)
        np.testing.assert_allclose(numbers(line), [j, x[j], m, rescale, ell], atol=5e-5)
    assert numbers(line_after(printed, "stable:")) == pytest.approx(
        [x.max(), np.exp(x - x.max()).sum()], abs=5e-5
    )
    assert number_after(printed, "largest |online - stable softmax|:") < 1e-15


def test_online_softmax_does_not_overflow_where_exp_does(printed):
    assert "exp / sum(exp): tensor([nan, nan, nan])" in printed
    online = numbers(line_after(printed, "online softmax:"))
    np.testing.assert_allclose(online, softmax(np.array([0.0, 1.0, 2.0])), atol=5e-5)
    assert number_after(printed, "float32 exp overflows above") == pytest.approx(
        math.log(np.finfo(np.float32).max), abs=0.005
    )


def test_the_trace_of_the_tiles_is_attention_over_the_keys_read_so_far(printed, values):
    q, k, v = (values[name].double().numpy() for name in ("q_small", "k_small", "v_small"))
    scores = q @ k.T / math.sqrt(q.shape[-1])
    states = [numbers(line) for line in printed.splitlines() if line.startswith("  m tensor(")]
    lines = printed.splitlines()
    outputs = [  # the two lines under each label: one row per query
        np.array([numbers(row) for row in lines[i + 1 : i + 3]])
        for i, line in enumerate(lines)
        if line == "  output so far, one row per query"
    ]
    assert len(states) == len(outputs) == 3
    previous_m = np.full(2, -np.inf)
    for step, (state, output) in enumerate(zip(states, outputs, strict=True)):
        seen = slice(0, 2 * step + 2)  # keys read so far, two per tile
        m = scores[:, seen].max(axis=1)
        ell = np.exp(scores[:, seen] - m[:, None]).sum(axis=1)
        np.testing.assert_allclose(state, [*m, *np.exp(previous_m - m), *ell], atol=5e-5)
        np.testing.assert_allclose(output, attention(q, k[seen], v[seen])[0], atol=5e-5)
        previous_m = m
    assert number_after(printed, "largest |tiled - attn_ref|:") < 1e-6


def test_tiled_equals_pytorch_with_masks_causal_and_gradients(printed, values):
    L, S, block = values["L"], values["S"], 16
    visible = causal(L, S)  # top-left aligned
    causal_tiles = sum(
        visible[i : i + block, j : j + block].any() for i in range(0, L, block) for j in range(0, S, block)
    )
    all_tiles = math.ceil(L / block) * math.ceil(S / block)
    expected_tiles = {
        "no mask": all_tiles,
        "boolean mask, a query with no key": all_tiles,
        "additive mask": all_tiles,
        "causal, L < S": causal_tiles,
    }
    for name, tiles in expected_tiles.items():
        tiles_shown, output_error, gradient_error = numbers(line_after(printed, name))
        assert tiles_shown == tiles, name
        assert output_error < 1e-13 and gradient_error < 1e-13, name
    assert not values["boolean"][5].any()  # the query that may see no key


def test_causal_map_skips_exactly_the_tiles_above_the_diagonal(printed):
    rows = [line for line in printed.splitlines() if line and set(line) <= set("■◩· ")]
    assert rows == [" ".join("■" * i + "◩" + "·" * (7 - i)) for i in range(8)]
    found = re.findall(
        r"^n = +(\d+): skipped +(\d+) of +(\d+) = ([\d.]+); \(n-1\)/\(2n\) = ([\d.]+)$", printed, re.M
    )
    assert [int(n) for n, *_ in found] == [2, 8, 64]
    for n, skipped, total, fraction, formula in found:
        n = int(n)
        visible = causal(n)
        assert int(skipped) == (~visible).sum() == n * (n - 1) // 2 and int(total) == n * n
        assert float(formula) == (n - 1) / (2 * n)
        assert (
            float(fraction) == round(int(skipped) / int(total), 3) == pytest.approx(float(formula), abs=6e-4)
        )


def test_memory_table_is_what_was_measured(printed, values):
    lengths, peaks = values["lengths"], values["peaks"]
    np.testing.assert_array_equal(values["formula"], [4 * T * T / 2**20 for T in lengths])
    np.testing.assert_array_equal(values["io"], [4 * 4 * T * 128 / 2**20 for T in lengths])  # Q, K, V, O
    for T, naive, tiled, torch_kernel, formula, io in zip(
        lengths, *peaks.values(), values["formula"], values["io"], strict=True
    ):
        assert numbers(line_after(printed, f"{T:>5}")) == pytest.approx(
            [naive, tiled, torch_kernel, formula, io], abs=0.006
        )


def test_memory_grows_as_the_page_says(printed, values):
    peaks, io, formula, slopes = values["peaks"], values["io"], values["formula"], values["slopes"]
    # naive: about four (T, T) matrices beyond its inputs and output, so that part grows like T**2
    beyond = peaks["naive"] - io
    assert np.polyfit(np.log(values["lengths"][1:]), np.log(beyond[1:]), 1)[0] > 1.9
    assert 3.5 < beyond[-1] / formula[-1] < 4.5
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
        assert number_after(printed, f"{name:<8} grows like T^") == pytest.approx(expected, abs=0.005)


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


def test_hbm_traffic_counted_from_the_papers(printed, values):
    M = values["M"]
    assert M == 164 * 1024 // 2  # an A100 SM's shared memory at most (NVIDIA's Ampere tuning guide)
    assert f"blocks of {math.ceil(M / 256)} keys" in printed
    counted = [2 * 64 * 16 * n / 1e9 for n in _hbm_by_hand(1024, 64, M)]  # bytes of fp16, in GB
    shown = numbers(line_after(printed, "HBM (GB), counted, forward:"))
    assert shown == pytest.approx(counted, rel=0.005)
    paper = {  # Dao et al. (2022, arXiv v2), Figure 2 left: standard, FlashAttention
        "HBM R/W (GB)": (40.3, 4.4),
        "Runtime (ms)": (41.7, 7.3),
        "GFLOPs": (66.6, 75.2),
    }
    for row, (a, b) in paper.items():
        assert numbers(line_after(printed, row)) == pytest.approx([a, b, round(a / b, 1)], abs=0.006)


def test_the_traffic_ratio_levels_off_near_M_over_3_or_2_d_squared(values):
    M = values["M"]
    for d in (64, 128):
        counts = np.array([_hbm_by_hand(int(N), d, M) for N in values["Ns"]])
        for column, level in ((1, M / (3 * d * d)), (2, M / (2 * d * d))):
            ratios = counts[:, 0] / counts[:, column]
            assert ratios[-1] == pytest.approx(level, rel=0.03)
            assert ratios[-1] > ratios[0]
    # Below M = 3 d**2 (FlashAttention) or 2 d**2 (queries outside) the saving turns into a loss
    # at long lengths; above, a gain.
    for column, factor in ((1, 3), (2, 2)):
        below, above = (_hbm_by_hand(16_384, 128, factor * 128**2 + change) for change in (-1024, 4096))
        assert below[0] / below[column] < 1 < above[0] / above[column]


def test_cpu_timings_print_what_was_measured(printed, values):
    timings = values["timings"]  # the machine's: the page orders none of them
    for name, ms in timings.items():
        assert number_after(printed, name) == pytest.approx(ms, abs=0.06)


def test_exercise_merging_two_halves(printed, values):
    row = values["row"].numpy()
    m = row.max()
    for label in ("merged m =", "whole  m ="):
        assert numbers(line_after(printed, label)) == pytest.approx([m, np.exp(row - m).sum()], abs=2e-6)


def test_exercise_new_tokens_after_a_cache(printed):
    visible = causal(6, 10, lower_right=True)  # bottom-right aligned
    empty = sum(not visible[i : i + 2, j : j + 4].any() for i in range(0, 6, 2) for j in range(0, 10, 4))
    assert numbers(line_after(printed, "tiles with no visible key:")).tolist() == [empty, 0]
    assert empty == 2
    assert number_after(printed, "largest difference:") < 1e-5


def test_exercise_the_logsumexp_recovers_the_weights(printed, values):
    q, k, v = (values[name].numpy() for name in ("q6", "k6", "v6"))
    weights = attention(q, k, v)[1][3]
    for label in ("recovered:", "weights:  "):
        np.testing.assert_allclose(numbers(line_after(printed, label)), weights, atol=5e-5)


def test_exercise_autograd_memory_grows_faster_than_linear(printed):
    for name in ("naive", "tiled"):
        at_512, at_1024, ratio = (numbers(line_after(printed, f"{name}: "))[i] for i in (0, 2, 4))
        assert ratio == pytest.approx(at_1024 / at_512, abs=0.06)
        assert ratio > 2.5  # linear growth doubles; quadratic growth quadruples
