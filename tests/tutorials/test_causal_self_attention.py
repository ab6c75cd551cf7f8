"""The causal self-attention tutorial, as the build executed it, checked against references
computed here.

Every number the tutorial prints is compared with an independent computation: NumPy in
float64 written out below, a hand calculation, or
``torch.nn.functional.scaled_dot_product_attention``. The printed text is parsed, because it
is what a reader sees.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

from attn_ref.examples import BATCH_SEED, BATCH_SHAPE, HEAD_SIZE
from tests.printed import block_after, line_starting, numbers
from tests.reference import attention

B, T, C = BATCH_SHAPE


@pytest.fixture(scope="module")
def executed(tutorial):
    """The executed notebook, its printed text, and its tensors as float64 NumPy arrays."""
    values = {name: _as_numpy(value) for name, value in tutorial.values.items()}
    values.update(W_K=values["key"], W_Q=values["query"], W_V=values["value"])
    return tutorial.notebook, tutorial.printed(), values


def _as_numpy(value):
    if isinstance(value, torch.nn.Linear):
        value = value.weight.detach()  # (out_features, in_features), as nn.Linear stores it
    if not isinstance(value, torch.Tensor):
        return value
    return value.double().numpy() if value.is_floating_point() else value.numpy()


# ---------------------------------------------------------------- independent references


def np_attention(x, W_Q, W_K, W_V, allowed, scale=True):
    """Masked attention of x's projections in float64: (weights, output)."""
    x = np.asarray(x, dtype=np.float64)
    output, weights = attention(x @ W_Q.T, x @ W_K.T, x @ W_V.T, allowed, scale=None if scale else 1.0)
    return weights, output


def tril(n):
    return np.arange(n)[None, :] <= np.arange(n)[:, None]  # key j <= query i


@pytest.fixture(scope="module")
def ref(executed):
    _, _, val = executed
    W = (val["W_Q"], val["W_K"], val["W_V"])
    wei, out = np_attention(val["x"], *W, tril(T))
    wei_seed, _ = np_attention(val["x"], *W, tril(T), scale=False)
    q, k = val["x"] @ W[0].T, val["x"] @ W[1].T
    raw = q @ np.swapaxes(k, -1, -2)
    scores = raw / math.sqrt(HEAD_SIZE)
    return {"W": W, "wei": wei, "out": out, "wei_seed": wei_seed, "scores": scores, "raw": raw}


# ---------------------------------------------------------------- the notebook itself


def test_first_cell_is_the_title_and_prose_types_no_results(executed):
    notebook, _, _ = executed
    assert notebook.cells[0].cell_type == "markdown"
    assert notebook.cells[0].source.startswith("# Self-attention from scratch, with a causal mask")
    prose = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown")
    assert re.findall(r"\d\.\d|\d%", prose) == [], "a computed number typed into prose"
    assert prose.count('<div class="admonition warning">') >= 4


def test_uses_the_seeds_data_and_layer_order(executed):
    _, printed, val = executed
    torch.manual_seed(BATCH_SEED)
    x = torch.randn(B, T, C)
    layers = [torch.nn.Linear(C, HEAD_SIZE, bias=False) for _ in range(3)]  # key, query, value
    np.testing.assert_array_equal(val["x"], x.double().numpy())
    for name, layer in zip(("W_K", "W_Q", "W_V"), layers, strict=True):
        np.testing.assert_array_equal(val[name], layer.weight.detach().double().numpy())
    first = block_after(printed, "first six features of token 0 of sequence 0:", 1)[0]
    np.testing.assert_allclose(first, x[0, 0, :6].numpy(), atol=6e-5)


def test_shapes_printed(executed):
    _, printed, val = executed
    assert line_starting(printed, "scores:") == f"scores: {(B, T, T)}"
    assert f"out: {(B, T, HEAD_SIZE)}" in line_starting(printed, "wei:")
    assert line_starting(printed, "wei is") == f"wei is {(B, T, T)} not {(T, T)}"
    assert line_starting(printed, "the seed's out:") == (
        f"the seed's out: {(B, T, C)}  a head's output: {(B, T, HEAD_SIZE)}"
    )
    assert val["out_seed"].shape == (B, T, C)


# ---------------------------------------------------------------- scores, mask, weights


def test_scores_and_weights_match_numpy(executed, ref):
    _, printed, val = executed
    np.testing.assert_allclose(val["scores"], ref["scores"], atol=1e-5)
    np.testing.assert_allclose(val["wei"], ref["wei"], atol=1e-6)
    np.testing.assert_allclose(val["wei_seed"], ref["wei_seed"], atol=1e-6)
    np.testing.assert_allclose(
        block_after(printed, "scaled scores of sequence 0:", T), ref["scores"][0], atol=6e-5
    )
    masked = block_after(printed, "masked scores of sequence 0:", T)
    np.testing.assert_allclose(masked, np.where(tril(T), ref["scores"][0], -np.inf), atol=6e-5)
    np.testing.assert_allclose(block_after(printed, "weights of sequence 0:", T), ref["wei"][0], atol=6e-5)
    seed = block_after(printed, "the seed's weights of sequence 0 (no scaling):", T)
    np.testing.assert_allclose(seed, ref["wei_seed"][0], atol=6e-5)


def test_the_seeds_printed_row_seven_is_the_unscaled_one(executed, ref):
    # The last row of wei[0] as the seed's notebook printed it (its own run, an outside record).
    # It matches the unscaled weights recomputed here, not the scaled ones.
    seed_row_7 = [0.0210, 0.0843, 0.0555, 0.2297, 0.0573, 0.0709, 0.2423, 0.2391]
    np.testing.assert_allclose(ref["wei_seed"][0, 7], seed_row_7, atol=6e-5)
    assert np.abs(ref["wei"][0, 7] - seed_row_7).max() > 0.05  # and not the scaled one


def test_first_row_and_masked_entries(executed, ref):
    _, printed, val = executed
    expected = np.zeros(T)
    expected[0] = 1.0
    np.testing.assert_array_equal(val["wei"][:, 0], np.tile(expected, (B, 1)))
    np.testing.assert_array_equal(block_after(printed, "first row of the weights, one line per sequence:", B),
                                  np.tile(expected, (B, 1)))  # fmt: skip
    assert line_starting(printed, "largest weight above the diagonal:").endswith(" 0.0")
    assert (val["wei"][:, ~tril(T)] == 0).all()
    assert line_starting(printed, "every row sums to one:").endswith("True")
    np.testing.assert_array_equal(val["out"][:, 0], val["v"][:, 0])
    assert line_starting(printed, "output at position 0 equals v at position 0:").endswith("True")


def test_sharpness_table(executed, ref):
    _, printed, _ = executed
    table = block_after(
        printed, f"{'query i':>7} {'seed (unscaled)':>16} {'scaled':>7} {'uniform 1/(i+1)':>16}", T
    )
    np.testing.assert_array_equal(table[:, 0], np.arange(T))
    np.testing.assert_allclose(table[:, 1], ref["wei_seed"][0].max(-1), atol=6e-5)
    np.testing.assert_allclose(table[:, 2], ref["wei"][0].max(-1), atol=6e-5)
    np.testing.assert_allclose(table[:, 3], 1 / np.arange(1, T + 1), atol=6e-5)
    row_seed, row = ref["wei_seed"][0, -1], ref["wei"][0, -1]
    line = line_starting(printed, f"position {T - 1}: largest / smallest weight")
    np.testing.assert_allclose(numbers(line)[1:], [row_seed.max() / row_seed.min(), row.max() / row.min()],
                               atol=0.051)  # fmt: skip


def test_variance_of_dot_products(executed, ref):
    _, printed, _ = executed
    for d_k in (16, 64, 256, 1024):
        std, std_scaled = numbers(line_starting(printed, f"d_k = {d_k:4d}"))[1:]
        assert abs(std / math.sqrt(d_k) - 1) < 0.05  # Var(q·k) = d_k for unit-variance entries
        assert abs(std_scaled - 1) < 0.05
    raw_std, scaled_std = numbers(line_starting(printed, "  std of the raw scores"))
    np.testing.assert_allclose(raw_std, ref["raw"].std(ddof=1), atol=0.006)
    np.testing.assert_allclose(scaled_std, ref["scores"].std(ddof=1), atol=0.006)


# ---------------------------------------------------------------- -inf against finite constants


def test_finite_fills_leak_exactly_as_computed_in_numpy(executed, ref):
    _, printed, _ = executed
    future = ~tril(T)
    for fill in (-1.0, -10.0, -30.0, -100.0, -1e4, -1e9, -np.inf):
        s = np.where(future, fill, ref["scores"])
        w = np.exp(s - s.max(-1, keepdims=True))
        w /= w.sum(-1, keepdims=True)
        expected = (w * future).sum(-1).max()
        printed_value = numbers(line_starting(printed, f"  fill {fill:>8g}:"))[-1]
        np.testing.assert_allclose(printed_value, expected, rtol=2e-2, atol=0)
    assert line_starting(printed, "  fill     -inf:").endswith(" 0")


def test_additive_minus_ten_thousand_leaks_at_large_scale(executed, ref):
    _, printed, _ = executed
    future = ~tril(T)
    for logit_scale in (1, 100, 1_000, 10_000):
        s = ref["scores"] * logit_scale + np.where(future, -1e4, 0.0)
        w = np.exp(s - s.max(-1, keepdims=True))
        w /= w.sum(-1, keepdims=True)
        # "scores x <scale>: future weight <finite> with -1e4, <infinite> with -inf"
        _, finite, _, infinite, _ = numbers(line_starting(printed, f"scores x {logit_scale:>6}:"))
        np.testing.assert_allclose(finite, (w * future).sum(-1).max(), atol=1e-3)
        assert infinite == 0
    assert numbers(line_starting(printed, "scores x  10000:"))[1] > 0.5  # the table shows a leak


def test_float16_cannot_hold_minus_a_billion(executed):
    _, printed, _ = executed
    assert numbers(line_starting(printed, "largest finite float16:"))[-1] == np.finfo(np.float16).max
    with np.errstate(over="ignore"):
        assert np.float16(-1e9) == -np.inf
    assert line_starting(printed, "-1e9 converted to float16:").endswith("-inf")
    assert (
        "overflow"
        in printed.split("masked_fill(..., -1e9) on float16 scores raises:\n", 1)[1].splitlines()[0]
    )
    assert line_starting(printed, "float16 with -inf, weight on future keys:").endswith(" 0.0")


# ---------------------------------------------------------------- output and PyTorch


def test_output_matches_numpy_and_pytorch(executed, ref):
    _, printed, val = executed
    np.testing.assert_allclose(val["out"], ref["out"], atol=1e-6)
    q, k, v = (torch.from_numpy(val["x"] @ W.T) for W in ref["W"])
    torch_out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).numpy()
    np.testing.assert_allclose(val["out"], torch_out, atol=1e-6)
    for label in ("largest |out - PyTorch output|:", "largest |out - attn_ref output|:",
                  "largest |wei - attn_ref weights|:"):  # fmt: skip
        assert numbers(line_starting(printed, label))[-1] < 1e-6
    assert line_starting(printed, "allclose to PyTorch:").endswith("True")


# ---------------------------------------------------------------- the library analogy


def test_row_seven_table_and_ranking(executed, ref):
    _, printed, _ = executed
    table = block_after(printed, f"{'book j':>6} {'score':>7} {'weight':>8} {'seed (unscaled)':>16}", T)
    np.testing.assert_array_equal(table[:, 0], np.arange(T))
    np.testing.assert_allclose(table[:, 1], ref["scores"][0, -1], atol=6e-4)
    np.testing.assert_allclose(table[:, 2] / 100, ref["wei"][0, -1], atol=6e-5)
    np.testing.assert_allclose(table[:, 3] / 100, ref["wei_seed"][0, -1], atol=6e-5)
    order = np.argsort(-ref["wei"][0, -1]).tolist()
    assert line_starting(printed, "books by weight, scaled:") == f"books by weight, scaled:   {order}"
    assert line_starting(printed, "books by weight, unscaled:").endswith(
        str(np.argsort(-ref["wei_seed"][0, -1]).tolist())
    )
    assert line_starting(printed, "uniform share:") == f"uniform share: {100 / T:.2f}%"


def test_other_random_projections_prefer_other_books(executed):
    _, printed, val = executed
    favourites = set()
    for init_seed in range(5):
        torch.manual_seed(init_seed)
        W_K = torch.nn.Linear(C, HEAD_SIZE, bias=False).weight.detach().double().numpy()
        W_Q = torch.nn.Linear(C, HEAD_SIZE, bias=False).weight.detach().double().numpy()
        s = (val["x"][0] @ W_K.T) @ (W_Q @ val["x"][0, -1]) / math.sqrt(HEAD_SIZE)
        w = np.exp(s - s.max())
        w /= w.sum()
        header = f"projections drawn with seed {init_seed}: favourite book {int(w.argmax())}"
        np.testing.assert_allclose(block_after(printed, header, 1)[0], w, atol=6e-5)
        favourites.add(int(w.argmax()))
    assert len(favourites) > 1


def test_scores_are_not_symmetric(executed, ref):
    _, printed, _ = executed
    expected = np.abs(ref["scores"] - np.swapaxes(ref["scores"], -1, -2)).max()
    np.testing.assert_allclose(numbers(line_starting(printed, "largest |score(i, j) - score(j, i)|:"))[-1],
                               expected, atol=1e-5)  # fmt: skip


# ---------------------------------------------------------------- the causal property


def test_changing_a_token_moves_no_earlier_output(executed, ref):
    _, printed, val = executed
    changed = val["changed"]
    differs = np.abs(val["x_changed"] - val["x"]).max(axis=(0, 2)) > 0
    np.testing.assert_array_equal(differs, np.arange(T) == changed)
    _, out_changed = np_attention(val["x_changed"], *ref["W"], tril(T))
    expected = np.abs(out_changed - ref["out"]).max(axis=(0, 2))
    printed_moves = [numbers(line_starting(printed, f"position {t}: largest change"))[-1] for t in range(T)]
    assert printed_moves[:changed] == [0.0] * changed  # exactly, not approximately
    assert (val["moved"][:changed] == 0).all()
    np.testing.assert_allclose(printed_moves[changed:], expected[changed:], atol=1e-5)
    assert min(printed_moves[changed:]) > 0.01


# ---------------------------------------------------------------- padding


def test_right_padding_real_tokens_match_each_sequence_alone(executed, ref):
    _, printed, val = executed
    lengths = val["lengths"]
    key_real = np.arange(T)[None, :] < np.array(lengths)[:, None]  # (B, T)
    np.testing.assert_array_equal(val["mask"], tril(T)[None] & key_real[:, None, :])
    for seq, n in enumerate(lengths):
        _, alone = np_attention(val["x"][seq, :n], *ref["W"], tril(n))
        np.testing.assert_allclose(val["out_pad"][seq, :n], alone, atol=1e-6)
        assert numbers(line_starting(printed, f"  sequence {seq}, positions 0..{n - 1}:"))[-1] == 0
    assert numbers(line_starting(printed, "largest |attn_ref - PyTorch|:"))[-1] < 1e-6


def test_left_padding_and_queries_with_no_key(executed, ref):
    _, printed, val = executed
    lengths = val["lengths"]
    key_real = np.arange(T)[None, :] >= T - np.array(lengths)[:, None]  # real tokens at the end
    mask_left = tril(T)[None] & key_real[:, None, :]
    np.testing.assert_array_equal(val["mask_left"], mask_left)
    _, causal_only = np_attention(val["x"], *ref["W"], tril(T))
    for seq, n in enumerate(lengths):
        _, alone = np_attention(val["x"][seq, T - n :], *ref["W"], tril(n))
        np.testing.assert_allclose(val["out_left"][seq, T - n :], alone, atol=1e-6)
        with_pad, without_pad = numbers(line_starting(printed, f"  sequence {seq}: "))[1:3]
        assert with_pad < 1e-6
        expected = np.abs(causal_only[seq, T - n :] - alone).max()
        assert f"{without_pad:.2g}" == f"{expected:.2g}"
        no_key = [t for t in range(T) if not mask_left[seq, t].any()]
        assert line_starting(printed, f"sequence {seq}: queries with no key") == (
            f"sequence {seq}: queries with no key {no_key}"
        )
        # attn_ref and PyTorch: zeros; a plain softmax: nan; a -1e9 fill: 1/T each, by hand.
        assert (val["out_left"][seq, no_key] == 0).all() and (val["wei_left"][seq, no_key] == 0).all()
        assert (val["reference_left"][seq, no_key] == 0).all()
        assert np.isnan(val["plain"][seq, no_key]).all()
        np.testing.assert_allclose(val["finite"][seq, no_key], 1 / T, atol=1e-7)
        assert np.isnan(val["mha_out"][seq, no_key]).all()
        assert np.isfinite(val["mha_out_fused"][seq, no_key]).all()


def test_the_no_key_table_shows_what_was_computed(executed):
    _, printed, _ = executed
    table = printed.split("sequence 2, query 0, torch ", 1)[1]
    rows = dict(zip(table.splitlines()[1::2], table.splitlines()[2::2], strict=False))
    assert numbers(rows["  attn_ref, weights:"]).tolist() == [0.0] * T
    assert numbers(rows["  attn_ref, output:"]).tolist() == [0.0] * T
    assert numbers(rows["  PyTorch scaled_dot_product_attention, output:"]).tolist() == [0.0] * T
    assert all(math.isnan(n) for n in numbers(rows["  plain softmax over -inf, weights:"]))
    np.testing.assert_allclose(numbers(rows["  softmax with a -1e9 fill, weights:"]), [1 / T] * T)
    assert all(math.isnan(n) for n in numbers(rows["  nn.MultiheadAttention, output:"]))
    assert all(
        math.isfinite(n) for n in numbers(rows["  nn.MultiheadAttention with need_weights=False, output:"])
    )


def test_nan_spreads_to_real_tokens_and_zeros_do_not(executed):
    _, printed, val = executed
    n = val["lengths"][2]
    assert np.isnan(val["next_layer"][2, T - n :]).any(-1).all()
    assert np.isfinite(val["next_layer_zeros"][2, T - n :]).all()
    assert "True" in line_starting(printed, "  from the plain softmax:")
    assert "True" not in line_starting(printed, "  from attn_ref's zeros:")
