"""The causal self-attention tutorial, as the build executed it, checked against references
computed here.

Every number the tutorial prints is compared with an independent computation: NumPy in
float64 written out below, a hand calculation, or
``torch.nn.functional.scaled_dot_product_attention``. The printed text is parsed, because it
is what a reader sees. The exercises' solutions are checked the same way.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

from attn_ref.examples import BATCH_SEED, BATCH_SHAPE, HEAD_SIZE
from tests.printed import block_after, flag, line_after, line_starting, list_after, numbers
from tests.reference import attention, causal, multihead_attention, softmax

B, T, C = BATCH_SHAPE
# Row 7 of sequence 0 as the original notebook printed it (its own run: an outside record).
ORIGINAL_ROW_7 = [0.0210, 0.0843, 0.0555, 0.2297, 0.0573, 0.0709, 0.2423, 0.2391]


@pytest.fixture(scope="module")
def executed(tutorial):
    """The executed notebook, its printed text, and its tensors as float64 NumPy arrays."""
    values = {name: _as_numpy(value) for name, value in tutorial.values.items()}
    values.update(W_K=values["key"].T, W_Q=values["query"].T, W_V=values["value"].T)  # (C, d_k)
    return tutorial.notebook, tutorial.printed(), values


def _as_numpy(value):
    if isinstance(value, torch.nn.Module):
        value = value.weight.detach() if isinstance(value, torch.nn.Linear) else None
    if not isinstance(value, torch.Tensor):
        return value
    return value.double().numpy() if value.is_floating_point() else value.numpy()


# ---------------------------------------------------------------- independent references


def projections(x, W_Q, W_K, W_V):
    """x's queries, keys and values (row vectors: x @ W) in float64, to pass to attention."""
    x = np.asarray(x, dtype=np.float64)
    return x @ W_Q, x @ W_K, x @ W_V


@pytest.fixture(scope="module")
def ref(executed):
    _, _, val = executed
    W = (val["W_Q"], val["W_K"], val["W_V"])
    out, wei = attention(*projections(val["x"], *W), causal(T))
    _, wei_original = attention(*projections(val["x"], *W), causal(T), scale=1.0)
    raw = (val["x"] @ W[0]) @ np.swapaxes(val["x"] @ W[1], -1, -2)
    return {"W": W, "wei": wei, "out": out, "wei_original": wei_original, "raw": raw, "scores": raw / 4.0}


# ---------------------------------------------------------------- the page as a lesson


def markdown(notebook):
    return "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown")


def test_title_sections_and_links(executed):
    notebook, _, _ = executed
    assert notebook.cells[0].source.startswith("# Self-attention from scratch, with a causal mask")
    prose = markdown(notebook)
    headings = re.findall(r"^(#{2,3}) (.+)$", prose, flags=re.M)
    titles = [title for _, title in headings]
    order = ["Why attention", "The simplest attention: an average of the past",
             "Attention is a communication mechanism", "Queries, keys and values",
             "Where the original notebook goes wrong", "Exercises", "References"]  # fmt: skip
    assert [titles.index(title) for title in order] == sorted(titles.index(title) for title in order)
    assert titles[-1] == "References"
    assert all("$" not in title and "\\" not in title for title in titles), "TeX in a heading"
    for link in ("../../notation/", "../../concepts/mental_model/#the-variance-argument",
                 "https://arxiv.org/abs/1706.03762", "#where-the-original-notebook-goes-wrong"):  # fmt: skip
        assert f"({link})" in prose, link
    assert "The cat, which sat on the mat, ran away." in prose
    assert "zero-mean, unit-variance and independent" in prose


def test_attention_is_dated_right_and_the_projections_shaped_as_in_the_notation(executed, built_site):
    notebook, _, val = executed
    prose = " ".join(markdown(notebook).split())
    assert "Attention, the mechanism at the heart of the transformer" not in prose  # attention is older
    assert "first added to recurrent translation models (Bahdanau et al., 2014;" in prose
    assert "(https://arxiv.org/abs/1409.0473)" in prose
    page = (built_site.path / "tutorials" / "causal_self_attention" / "index.html").read_text()
    assert 'href="#attention-date"' in page and page.count('id="attention-date"') == 1
    # W_V is (C, d_v) in the notation table; here d_v = d_k.
    assert "$W_V$ has shape $(C, d_v)$, here with $d_v = d_k$" in prose
    assert val["W_V"].shape == val["W_Q"].shape == (C, HEAD_SIZE)
    # The causal mask keeps each node's edge to itself: a node hears the nodes before it, and itself.
    assert "hears only the nodes before it, and itself" in prose
    assert val["allowed"].diagonal().all()


def test_prose_types_no_results_and_says_original_not_seed(executed):
    notebook, _, _ = executed
    prose = markdown(notebook)
    typed = re.sub(r"\]\(https?://[^)]+\)", "]", prose).replace('"Others: ~9%"', "")  # links; a quote
    assert re.findall(r"\d\.\d|\d%", typed) == [], "a computed number typed into prose"
    assert "admonition" not in prose, "a warning box interrupts the lesson"
    # "seed" only ever means a random seed.
    assert [m.start() for m in re.finditer(r"seed", prose)] == [
        m.start() + len("random ") for m in re.finditer(r"random seed", prose)
    ]
    code = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")
    assert "wei_seed" not in code and "the seed" not in code


def test_side_topics_are_collapsed_going_deeper_blocks(executed, built_site):
    notebook, _, _ = executed
    cells = notebook.cells
    deeper = [n for n, cell in enumerate(cells) if "deeper" in cell.metadata.get("tags", [])]
    assert len(deeper) == 3
    for n in deeper:  # each follows a "Going deeper" block, or another cell of the same block
        before = cells[n - 1]
        assert "deeper" in before.metadata.get("tags", []) or (
            before.cell_type == "markdown"
            and re.search(r'<details class="note">\s*<summary>Going deeper: [^<]+</summary>', before.source)
            and before.source.rstrip().endswith("</details>")
        )
    page = (built_site.path / "tutorials" / "causal_self_attention" / "index.html").read_text()
    blocks = re.findall(r'<details class="note">.*?</details>', page, flags=re.S)
    cell = 'celltag_deeper" id="cell-id='
    inside = [block.count(cell) for block in blocks]
    assert sorted(inside) == [0] * (len(blocks) - 3) + [1, 1, 1]  # each code cell inside its block
    assert page.count(cell) == 3


def test_each_copy_button_copies_the_highlighted_code_it_sits_on(executed, built_site):
    notebook, _, _ = executed
    page = (built_site.path / "tutorials" / "causal_self_attention" / "index.html").read_text()
    targets = re.findall(r'<clipboard-copy [^>]*for="([^"]+)"', page)
    assert len(targets) == len([cell for cell in notebook.cells if cell.cell_type == "code"])
    assert all(page.count(f'<pre id="{target}">') == 1 for target in targets)
    assert "clipboard-copy-txt" not in page and "celltoolbar" not in page  # no second copy, no tag list


# ---------------------------------------------------------------- data, average, layers


def test_uses_the_original_notebooks_data_and_layer_order(executed):
    _, printed, val = executed
    torch.manual_seed(BATCH_SEED)
    x = torch.randn(B, T, C)
    layers = [torch.nn.Linear(C, HEAD_SIZE, bias=False) for _ in range(3)]  # key, query, value
    np.testing.assert_array_equal(val["x"], x.double().numpy())
    for name, layer in zip(("W_K", "W_Q", "W_V"), layers, strict=True):
        np.testing.assert_array_equal(val[name], layer.weight.detach().double().numpy().T)
    first = numbers(line_after(printed, "x: (4, 8, 32)  token 0 of sequence 0 starts"))
    np.testing.assert_allclose(first, x[0, 0, :4].numpy(), atol=6e-4)
    assert (
        line_starting(printed, "query.weight:")
        == f"query.weight: {(HEAD_SIZE, C)}  q, k, v: {(B, T, HEAD_SIZE)}"
    )
    assert flag(printed, "q equals x @ W_Q, with W_Q = query.weight.T:")


def test_the_average_of_the_past(executed):
    _, printed, val = executed
    by_hand = np.array([[1 / (i + 1) if j <= i else 0.0 for j in range(T)] for i in range(T)])
    np.testing.assert_allclose(val["wei_avg"], by_hand, atol=1e-7)
    np.testing.assert_allclose(
        block_after(printed, "weights of the average of the past:", T), by_hand, atol=6e-4
    )
    running = np.cumsum(val["x"], axis=1) / np.arange(1, T + 1)[:, None]
    np.testing.assert_allclose(val["xbow"], running, atol=1e-6)
    assert flag(printed, "equal to the running mean of x:")


# ---------------------------------------------------------------- scores, mask, weights


def test_variances_and_spread_of_the_scores(executed, ref):
    _, printed, val = executed
    x_var, q_var, k_var = numbers(line_starting(printed, "variance of x"))
    q, k = val["x"] @ ref["W"][0], val["x"] @ ref["W"][1]
    np.testing.assert_allclose([x_var, q_var, k_var], [a.var(ddof=1) for a in (val["x"], q, k)], atol=6e-4)
    assert q_var < x_var and k_var < x_var  # the prose: nn.Linear's small weights, not unit variance
    assert ref["raw"].std(ddof=1) < math.sqrt(HEAD_SIZE)  # "even the raw scores spread less than sqrt(d_k)"
    raw_std, scaled_std = numbers(line_starting(printed, "std of the raw scores"))
    np.testing.assert_allclose(
        [raw_std, scaled_std], [ref["raw"].std(ddof=1), ref["scores"].std(ddof=1)], atol=6e-4
    )
    assert line_starting(printed, "scores:") == f"scores: {(B, T, T)}"


def test_mask_scores_and_weights_match_numpy(executed, ref):
    _, printed, val = executed
    np.testing.assert_allclose(val["scores"], ref["scores"], atol=1e-5)
    np.testing.assert_allclose(val["wei"], ref["wei"], atol=1e-6)
    np.testing.assert_array_equal(val["allowed"], causal(T))
    np.testing.assert_allclose(val["masked"], np.where(causal(T), ref["scores"], -np.inf), atol=1e-5)
    np.testing.assert_allclose(block_after(printed, "weights of sequence 0:", T), ref["wei"][0], atol=6e-4)
    assert line_after(printed, "largest weight above the diagonal, any sequence:") == " 0.0"
    assert (val["wei"][:, ~causal(T)] == 0).all()
    assert flag(printed, "every row sums to one:")
    assert flag(printed, "first row of every sequence is [1, 0, ..., 0]:")
    assert (val["wei"][:, 0, 0] == 1).all() and (val["wei"][:, 0, 1:] == 0).all()


# ---------------------------------------------------------------- going deeper: finite fills


def leak(scores, fill_where_future):
    w = softmax(scores + fill_where_future)
    return (w * ~causal(T)).sum(-1).max()


def test_finite_fills_leak_exactly_as_computed_in_numpy(executed, ref):
    _, printed, _ = executed
    future = ~causal(T)
    for fill in (-1.0, -10.0, -1e4):
        expected = leak(np.where(future, fill, ref["scores"]), 0.0)
        printed_value = numbers(line_starting(printed, f"fill {fill:g}:"))[-1]
        np.testing.assert_allclose(printed_value, expected, rtol=6e-3, atol=0)
    assert line_starting(printed, "fill -inf:").endswith(" 0")
    assert numbers(line_starting(printed, "fill -1:"))[-1] > 0.1  # small fills leak


def test_additive_minus_ten_thousand_leaks_at_large_scale(executed, ref):
    _, printed, _ = executed
    for factor in (1, 1_000, 10_000):
        expected = leak(ref["scores"] * factor, np.where(~causal(T), -1e4, 0.0))
        _, finite, _, infinite, _ = numbers(
            line_starting(printed, f"scores x {factor}:")
        )  # ... -1e4 ... -inf
        np.testing.assert_allclose(finite, expected, atol=6e-3)
        assert infinite == 0
    assert numbers(line_starting(printed, "scores x 10000:"))[1] > 0.5  # the leak the prose describes


def test_float16_cannot_hold_minus_a_billion(executed):
    _, printed, _ = executed
    assert numbers(line_after(printed, "largest finite float16:")).tolist() == [np.finfo(np.float16).max]
    with np.errstate(over="ignore"):
        assert np.float16(-1e9) == -np.inf
    assert line_after(printed, "-1e9 in float16:") == " -inf"
    assert line_starting(printed, "float16 with -inf, weight on future keys:").endswith(" 0.0")


# ---------------------------------------------------------------- output and PyTorch


def test_output_matches_numpy_and_pytorch(executed, ref):
    _, printed, val = executed
    np.testing.assert_allclose(val["out"], ref["out"], atol=1e-6)
    q, k, v = (torch.from_numpy(val["x"] @ W) for W in ref["W"])
    torch_out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).numpy()
    np.testing.assert_allclose(val["out"], torch_out, atol=1e-6)
    np.testing.assert_allclose(val["wei_ref"], ref["wei"], atol=1e-6)
    for label in ("largest |out - PyTorch|:", "largest |out - attn_ref|:"):
        assert numbers(line_starting(printed, label))[-1] < 1e-6
    assert (
        line_starting(printed, "wei:")
        == f"wei: {(B, T, T)}  v: {(B, T, HEAD_SIZE)}  out: {(B, T, HEAD_SIZE)}"
    )
    assert flag(printed, "output at position 0 equals v at position 0:")
    np.testing.assert_array_equal(val["out"][:, 0], val["v"][:, 0])


# ---------------------------------------------------------------- the library analogy


def test_row_seven_scores_and_weights(executed, ref):
    _, printed, _ = executed
    scores = numbers(line_after(printed, "query 7, scores: "))
    np.testing.assert_allclose(scores, ref["scores"][0, -1], atol=6e-4)
    np.testing.assert_allclose(
        numbers(line_after(printed, "query 7, weights:")), ref["wei"][0, -1], atol=6e-4
    )


def test_other_random_projections_prefer_other_books(executed):
    _, printed, val = executed
    favourites = []
    for init_seed in range(5):
        torch.manual_seed(init_seed)
        W_K, W_Q = torch.randn(2, C, HEAD_SIZE).double().numpy()
        favourites.append(int(np.argmax((val["x"][0] @ W_K) @ (val["x"][0, -1] @ W_Q))))
    assert list_after(printed, "favourite book, random seeds 0 to 4:") == favourites
    assert len(set(favourites)) > 1


# ---------------------------------------------------------------- the causal property


def test_changing_a_token_moves_no_earlier_output_and_no_other_sequence(executed, ref):
    _, printed, val = executed
    changed = val["changed"]
    differs = np.abs(val["x_changed"] - val["x"]).max(axis=-1) > 0  # (B, T)
    expected_change = np.zeros((B, T), dtype=bool)
    expected_change[0, changed] = True
    np.testing.assert_array_equal(differs, expected_change)
    out_changed, _ = attention(*projections(val["x_changed"], *ref["W"]), causal(T))
    expected = np.abs(out_changed - ref["out"]).max(axis=-1)  # (B, T)
    printed_moves = numbers(line_after(printed, "sequence 0, change at positions 0 to 7:"))
    np.testing.assert_allclose(printed_moves, expected[0], atol=6e-4)
    assert (val["moved"][0, :changed] == 0).all() and (val["moved"][1:] == 0).all()  # exactly
    assert flag(printed, "positions 0 to 4 exactly unchanged:")
    assert flag(printed, "other sequences exactly unchanged:")
    assert (expected[0, changed:] > 0.01).all()


# ---------------------------------------------------------------- padding


def test_right_padding_real_tokens_match_each_sequence_alone(executed, ref):
    _, printed, val = executed
    lengths = val["lengths"]
    key_real = np.arange(T)[None, :] < np.array(lengths)[:, None]  # (B, T)
    np.testing.assert_array_equal(val["mask"], causal(T)[None] & key_real[:, None, :])
    np.testing.assert_array_equal(block_after(printed, line_starting(printed, "mask: "), T), val["mask"][2])
    for seq, n in enumerate(lengths):
        alone, _ = attention(*projections(val["x"][seq, :n], *ref["W"]), causal(n))
        np.testing.assert_allclose(val["out_pad"][seq, :n], alone, atol=1e-6)
    assert numbers(line_starting(printed, "largest change of a real token's output"))[-1] == 0


def test_left_padding_and_queries_with_no_key(executed, ref):
    _, printed, val = executed
    lengths = val["lengths"]
    key_real = np.arange(T)[None, :] >= T - np.array(lengths)[:, None]  # real tokens at the end
    mask_left = causal(T)[None] & key_real[:, None, :]
    np.testing.assert_array_equal(val["mask_left"], mask_left)
    no_key = [[t for t in range(T) if not mask_left[seq, t].any()] for seq in range(B)]
    assert (
        line_starting(printed, "queries with no key, per sequence:")
        == f"queries with no key, per sequence: {no_key}"
    )
    for seq, n in enumerate(lengths):
        alone, _ = attention(*projections(val["x"][seq, T - n :], *ref["W"]), causal(n))
        np.testing.assert_allclose(val["out_left"][seq, T - n :], alone, atol=1e-6)
        # Going deeper: equal with the padding mask, different with the causal mask only.
        with_pad, without_pad = numbers(line_starting(printed, f"sequence {seq}: "))[1:3]
        assert with_pad < 1e-6
        np.testing.assert_allclose(
            without_pad, np.abs(ref["out"][seq, T - n :] - alone).max(), rtol=0.05, atol=1e-6
        )
        rows = no_key[seq]  # attn_ref and PyTorch: zeros; plain softmax: nan; a -1e9 fill: 1/T each
        assert (val["out_left"][seq, rows] == 0).all() and (val["wei_left"][seq, rows] == 0).all()
        assert (val["reference_left"][seq, rows] == 0).all()
        assert np.isnan(val["plain"][seq, rows]).all()
        np.testing.assert_allclose(val["finite"][seq, rows], 1 / T, atol=1e-7)
        assert np.isnan(val["mha_out"][seq, rows]).any(-1).all()
        assert np.isfinite(val["mha_out_sdpa"][seq, rows]).all()


def test_the_no_key_comparison_shows_what_was_computed(executed):
    _, printed, _ = executed
    assert line_starting(printed, "sequence 2, query 0, torch ").startswith(
        f"sequence 2, query 0, torch {torch.__version__}"
    )
    for label in ("attn_ref weights:", "attn_ref output:", "PyTorch SDPA output:"):
        assert numbers(line_after(printed, f"  {label}")).tolist() == [0.0] * 4
    assert np.isnan(numbers(line_after(printed, "  plain softmax weights:"))).all()
    np.testing.assert_allclose(numbers(line_after(printed, "  weights with a -1e9 fill:")), [1 / T] * 4)
    assert flag(printed, "nan for a query with no key, need_weights=True: ")
    assert not flag(printed, "nan for a query with no key, need_weights=False:")
    assert flag(printed, "nan for a query with no key, fast path:")


def _kernels(call):
    with torch.profiler.profile() as profiler:
        call()
    return {event.name for event in profiler.events()}


def test_multihead_attention_fast_path_still_returns_nan(tutorial, executed):
    _, _, val = executed
    fast, mha = tutorial.values["fast"], tutorial.values["mha"]
    q, blocked = tutorial.values["q"], tutorial.values["blocked"]
    mask_left, no_key = val["mask_left"], val["no_key"]
    # Which path each layer takes, seen by the profiler: the fused kernel for the second only.
    with torch.no_grad():
        assert "aten::_native_multi_head_attention" in _kernels(
            lambda: fast(q, q, q, attn_mask=blocked, need_weights=False)
        )
        k, v = tutorial.values["k"], tutorial.values["v"]
        assert "aten::_native_multi_head_attention" not in _kernels(
            lambda: mha(q, k, v, attn_mask=~tutorial.values["mask_left"], need_weights=False)
        )
    assert not fast.training and fast.num_heads % 2 == 0 and mha.training and mha.num_heads == 1
    # The layer's own computation in float64: projections, two heads, the mask, the output projection.
    reference = multihead_attention(val["q"], fast.state_dict(), fast.num_heads, mask_left[:, None])
    out = reference["output"]  # a query with no key: zeros
    fast_out = val["fast_out"]
    np.testing.assert_allclose(fast_out[~no_key], out[~no_key], atol=1e-5)  # the queries with a key
    assert np.isnan(fast_out[no_key]).any(-1).all()  # the fast path: nan where the reference has zeros
    prose = " ".join(markdown(tutorial.notebook).split())
    assert "its output stays finite, as long as the layer does not take its fast path" in prose
    assert "(../../practice/bugs/#a-query-with-no-key-to-see)" in prose


def test_nan_spreads_to_real_tokens_and_zeros_do_not(executed):
    _, printed, val = executed
    n = val["lengths"][2]
    assert np.isnan(val["next_layer"][2, T - n :]).any(-1).all()
    assert np.isfinite(val["next_layer_zeros"][2, T - n :]).all()
    assert line_after(printed, "  after the plain softmax:").strip() == "[ True  True  True]"
    assert line_after(printed, "  after attn_ref's zeros:").strip() == "[False False False]"


# ---------------------------------------------------------------- where the original goes wrong


def test_the_original_notebooks_weights_are_the_unscaled_ones(executed, ref):
    _, printed, val = executed
    np.testing.assert_allclose(val["wei_original"], ref["wei_original"], atol=1e-6)
    row_7 = numbers(line_after(printed, "row 7 unscaled, in %:")) / 100
    np.testing.assert_allclose(row_7, ref["wei_original"][0, 7], atol=6e-5)
    np.testing.assert_allclose(row_7, ORIGINAL_ROW_7, atol=6e-5)  # what it printed
    assert np.abs(ref["wei"][0, 7] - ORIGINAL_ROW_7).max() > 0.05  # and not the scaled row


def test_unscaled_weights_are_sharper(executed, ref):
    _, printed, _ = executed
    unscaled = numbers(line_after(printed, "row maxima, unscaled:"))
    scaled = numbers(line_after(printed, "row maxima, scaled:"))
    uniform = 1 / np.arange(1, T + 1)
    np.testing.assert_allclose(unscaled, ref["wei_original"][0].max(-1), atol=6e-4)
    np.testing.assert_allclose(scaled, ref["wei"][0].max(-1), atol=6e-4)
    assert (unscaled[1:] > scaled[1:]).all() and (scaled[1:] > uniform[1:]).all()


def test_its_percentages(executed, ref):
    _, printed, _ = executed
    left_out = ref["wei_original"][0, 7, [1, 2, 4, 5]]
    largest, mean = numbers(line_after(printed, "books 1, 2, 4 and 5, unscaled:")) / 100
    np.testing.assert_allclose([largest, mean], [left_out.max(), left_out.mean()], atol=6e-5)
    assert largest < 0.09  # its "Others: ~9%" is more than any of them
    row_original, row = ref["wei_original"][0, 7], ref["wei"][0, 7]
    assert (
        np.argsort(-row_original)[:3].tolist() == [6, 7, 3] and np.argmin(row_original) == 0
    )  # as the prose says
    assert row_original[[6, 7]].max() - row_original[3] < 0.015  # book 3 "almost level with the top two"
    assert (
        np.abs(row - 1 / T).max() < np.abs(row_original - 1 / T).max() / 2.5
    )  # scaled: "much closer to uniform"


def test_it_mixes_tokens_and_its_shape_comment(executed):
    _, printed, val = executed
    assert val["out_original"].shape == (B, T, C)
    np.testing.assert_allclose(val["out_original"], val["wei_original"] @ val["x"], atol=1e-6)
    assert line_starting(printed, "its wei:") == f"its wei: {(B, T, T)}  its out: {(B, T, C)}"


def test_scores_are_not_symmetric(executed, ref):
    _, printed, _ = executed
    expected = np.abs(ref["scores"] - np.swapaxes(ref["scores"], -1, -2)).max()
    printed_value = numbers(line_starting(printed, "largest |score(i, j) - score(j, i)|:"))[-1]
    np.testing.assert_allclose(printed_value, expected, atol=5e-3)  # two decimals
    assert printed_value > 0.1


# ---------------------------------------------------------------- exercises


def test_exercise_1_the_leaky_mask_is_caught(executed, ref):
    _, printed, val = executed
    masks = {
        "diagonal=1": np.tri(T, k=1, dtype=bool),
        "no mask": np.ones((T, T), dtype=bool),
        "causal_mask": causal(T),
    }
    moved = {}  # per mask: the positions of sequence 0 whose output changes
    for name, allowed in masks.items():
        before, _ = attention(*projections(val["x"], *ref["W"]), allowed)
        after, _ = attention(*projections(val["x_changed"], *ref["W"]), allowed)
        change = np.abs(after - before).max(-1)  # (B, T)
        moved[name] = np.nonzero(change[0] > 1e-9)[0].tolist()
        line = line_starting(printed, f"{name}: moved")
        assert line.startswith(f"{name}: moved {moved[name]}; other sequences ")
        assert numbers(line)[-1] == 0 and change[1:].max() == 0
    assert moved["diagonal=1"] == [4, 5, 6, 7]  # the leak
    assert moved["causal_mask"] == [5, 6, 7]


def test_exercise_2_from_an_average_to_attention(executed, ref):
    _, printed, _ = executed
    for factor in (0, 1, 10, 1000):
        expected = softmax(factor * ref["scores"][0, 7])
        np.testing.assert_allclose(numbers(line_after(printed, f"lambda = {factor:4}:")), expected, atol=6e-4)
    np.testing.assert_allclose(numbers(line_after(printed, "lambda =    0:")), [1 / T] * T, atol=6e-4)


def test_exercise_3_the_missing_division_is_a_temperature(executed, ref):
    _, printed, val = executed
    W_Q, W_K, W_V = ref["W"]
    _, bigger = attention(*projections(val["x"], W_Q * math.sqrt(HEAD_SIZE), W_K, W_V), causal(T))
    np.testing.assert_allclose(bigger, ref["wei_original"], atol=1e-12)  # the derivation, in float64
    assert numbers(line_after(printed, "largest |difference| from the unscaled weights:"))[-1] < 1e-6
