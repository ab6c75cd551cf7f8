"""The tutorial "From nn.Linear to self-attention", as the build executed it.

Every number the tutorial prints that matters is checked here against float64 NumPy
written out independently (plain sums, a softmax with no max shift), against
``tests/reference.py``, or against a hand calculation. The random parameters of the
tutorial are inputs, not results: they are read from the kernel's variables, and the
test recomputes everything that follows from them. The sentences that describe printed
numbers are checked too: what they claim is asserted on the independent computation.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from attn_ref.examples import THREE_TOKENS
from attn_ref.plotting import attention_heatmap
from tests import reference
from tests.conftest import ExecutedTutorial
from tests.printed import block_after, flag, line_starting, number_after, numbers
from tests.site_tools import TUTORIALS

NOTEBOOK = TUTORIALS / "linear_to_self_attention.py"
TOKENS = ["t0", "t1", "t2"]  # counted from 0, as in the notation table
ATOL = 6e-5  # the tutorial prints four decimals
X = np.array(THREE_TOKENS, dtype=np.float64)  # (T, C) = (3, 4)


@dataclass(frozen=True)
class Run:
    """The executed tutorial, what it printed, and its random parameters in float64."""

    tutorial: ExecutedTutorial
    printed: str
    lines: list[str]
    probe: dict[str, np.ndarray]


@pytest.fixture(scope="module")
def run(tutorial: ExecutedTutorial) -> Run:
    values = tutorial.values
    parameters = {
        "layer_weight": values["layer"].weight,
        "layer_bias": values["layer"].bias,
        "rand_q": values["rand_q"].weight,
        "rand_k": values["rand_k"].weight,
        "rand_v": values["rand_v"].weight,
        "square": values["square"].weight,
    }
    printed = tutorial.printed()
    probe = {name: tensor.detach().double().numpy() for name, tensor in parameters.items()}
    return Run(tutorial, printed, printed.splitlines(), probe)


def _identity_part(run: Run) -> str:
    """What the tutorial printed before its random head (both parts print "weights:")."""
    return run.printed[: run.printed.index("W_Q = rand_q.weight.T")]


def _random_part(run: Run) -> str:
    return run.printed[run.printed.index("W_Q = rand_q.weight.T") :]


def _softmax_rows(z: np.ndarray) -> np.ndarray:
    """exp(z) / sum(exp(z)) per row, with no max shift: fine for these small scores."""
    return np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)


def _hand_attention(Q: np.ndarray, K: np.ndarray, V: np.ndarray, scale: float) -> dict[str, np.ndarray]:
    scores = np.array([[sum(q * k for q, k in zip(qi, kj, strict=True)) for kj in K] for qi in Q])
    weights = _softmax_rows(scores * scale)
    return {"scores": scores, "scaled": scores * scale, "weights": weights, "output": weights @ V}


IDENTITY = _hand_attention(X, X, X, scale=1 / math.sqrt(4))  # W_Q = W_K = W_V = I, d_k = 4


def _random_head(run: Run) -> dict[str, np.ndarray]:
    # nn.Linear stores W^T: W_Q = rand_q.weight.T, of shape (C, d_k) = (4, 2).
    Wq, Wk, Wv = (run.probe[name].T for name in ("rand_q", "rand_k", "rand_v"))
    return _hand_attention(X @ Wq, X @ Wk, X @ Wv, scale=1 / math.sqrt(2)) | {"V": X @ Wv, "W_Q": Wq}


def _markdown(run: Run) -> str:
    return "\n".join(c.source for c in run.tutorial.notebook.cells if c.cell_type == "markdown")


def test_notebook_shape_and_clean_run(run):
    assert run.tutorial.printed("stderr") == ""
    first = run.tutorial.notebook.cells[0]
    assert first.cell_type == "markdown"
    assert first.source.startswith("# From nn.Linear to self-attention")
    assert "](../../notation/)" in first.source
    headings = re.findall(r"^## (.+)$", _markdown(run), flags=re.M)
    assert headings[-3:] == ["Where the original notebook goes wrong", "Exercises", "References"]
    # Headings are plain text: no TeX for the table of contents and the navigation to show raw.
    assert not [h for h in re.findall(r"^#+ (.+)$", _markdown(run), flags=re.M) if "$" in h or "\\" in h]


def test_the_lesson_is_not_interrupted_and_the_original_is_named():
    source = NOTEBOOK.read_text()
    assert "admonition" not in source  # corrections are gathered at the end, not in warning boxes
    # "seed" only for random seeds: the original is "the original notebook".
    assert not re.findall(r"\bthe seed\b|\bseed's|\*seed\*", source, flags=re.I)
    assert source.count("the original notebook") >= 5
    assert "../../concepts/mental_model/#the-variance-argument" in source
    assert "https://arxiv.org/abs/1706.03762" in source


def test_one_head_without_bias_and_the_bias_pytorch_adds(run):
    prose = " ".join(_markdown(run).split())
    assert prose.count("One head of self-attention is three") == 2  # the opening and the summary
    assert (
        "here without bias, as in the formula; `nn.MultiheadAttention`, for one, adds a bias by default"
        in prose
    )
    layer = torch.nn.MultiheadAttention(4, num_heads=1)  # its defaults
    assert layer.in_proj_bias is not None and layer.out_proj.bias is not None
    for name in ("proj_q", "proj_k", "proj_v", "rand_q", "rand_k", "rand_v"):  # the page's layers: no bias
        assert run.tutorial.values[name].bias is None


def test_each_correction_is_linked_from_the_lesson_and_every_link_lands(run, built_site):
    markdown = _markdown(run)
    corrections = re.findall(r'<a id="(original-[a-z-]+)"></a>', markdown)
    assert len(corrections) == 4
    for anchor in corrections:
        assert f"](#{anchor})" in markdown, f"{anchor} is not linked from the lesson"
    html = (built_site.path / "tutorials" / "linear_to_self_attention" / "index.html").read_text()
    article = re.search(r"<article.*?</article>", html, re.S)[0]
    targets = set(re.findall(r'href="#([^"]+)"', article))
    assert {"where-the-original-notebook-goes-wrong", "exercises", *corrections} <= targets
    assert [t for t in targets if f'id="{t}"' not in article] == []


def test_source_types_no_result_of_the_worked_example():
    # The 3-token weights are pinned by attn_ref's doctest; the page must print them, never type them.
    source = NOTEBOOK.read_text()
    assert "THREE_TOKENS" in source
    for value in IDENTITY["weights"].ravel():
        assert f"{value:.4f}" not in source


def test_linear_layer_prints_its_parameters_and_the_formula(run):
    weight, b = run.probe["layer_weight"], run.probe["layer_bias"]
    assert weight.shape == (1, 3) and b.shape == (1,)  # nn.Linear's weight is W^T: (out, in)
    W = weight.T  # (in_features, out_features) = (3, 1)
    np.testing.assert_allclose(
        block_after(run.printed, "W = layer.weight.T, shape (3, 1):", rows=3), W, atol=ATOL
    )
    np.testing.assert_allclose(numbers(line_starting(run.printed, "b:")), b, atol=ATOL)

    x = [1.0, 2.0, 3.0]
    y_hand = x[0] * W[0, 0] + x[1] * W[1, 0] + x[2] * W[2, 0] + b[0]
    for label in ("layer(x): ", "x @ W + b:"):  # the layer and the formula, four decimals
        np.testing.assert_allclose(numbers(line_starting(run.printed, label)), [y_hand], atol=ATOL)
    assert "shapes: (3,) -> (1,)" in run.lines
    assert "batch: (1, 3) -> (1, 1)" in run.lines

    # The float32 results sit within a rounding step or two of the float64 value (the prose).
    assert line_starting(run.printed, "x @ W + b, float64:") == f"x @ W + b, float64: {y_hand:.9g}"
    step = np.finfo(np.float32).eps * abs(y_hand)
    float32 = [
        float(line_starting(run.printed, p).split(":")[1]) for p in ("nn.Linear,", "x @ W + b, float32:")
    ]
    for value in float32:
        assert abs(value - y_hand) <= 2 * step + 1e-9 * abs(y_hand)  # printed to 9 digits
    steps = number_after(run.printed, "float32 layer minus float64 formula, in rounding steps:")
    assert abs(steps) <= 2
    assert abs(steps - (float32[0] - y_hand) / step) < 0.1
    assert flag(run.printed, "torch.allclose(y, y_manual):")
    # IEEE-754 doubles: 0.1 + 0.2 rounds up, 0.2 + 0.3 is exactly 0.5.
    assert "(0.1 + 0.2) + 0.3 = 0.6000000000000001" in run.lines
    assert "0.1 + (0.2 + 0.3) = 0.6" in run.lines


def test_attention_steps_match_float64_hand_computation(run):
    printed = _identity_part(run)
    np.testing.assert_allclose(block_after(run.printed, "X:", rows=3), X)
    assert flag(run.printed, "Q, K and V all equal X:")  # identity projections
    np.testing.assert_allclose(block_after(printed, "scores = Q K^T:", rows=3), IDENTITY["scores"])
    assert "d_k = 4, sqrt(d_k) = 2.0000" in run.lines
    np.testing.assert_allclose(block_after(printed, "scores / sqrt(d_k):", rows=3), IDENTITY["scaled"])
    np.testing.assert_allclose(block_after(printed, "weights:", rows=3), IDENTITY["weights"], atol=ATOL)
    np.testing.assert_allclose(numbers(line_starting(printed, "row sums:")), np.ones(3), atol=ATOL)
    np.testing.assert_allclose(
        block_after(printed, "output = weights V:", rows=3), IDENTITY["output"], atol=ATOL
    )


def test_reading_the_weights_says_what_was_printed(run):
    weights = IDENTITY["weights"]
    for query, row in zip(TOKENS, weights, strict=True):
        strongest = [key for key, w in zip(TOKENS, row, strict=True) if np.isclose(w, row.max())]
        line = f"{query}: largest weight {row.max():.4f}, to {' and '.join(strongest)}"
        assert line in run.lines
    # The prose: token 1 keeps most of its attention for itself; tokens 0 and 2 give two keys
    # equal weights, each less than half of the row, and the third key keeps a share.
    assert weights[1, 1] > 0.5
    for row, tied, other in ((0, (0, 2), 1), (2, (1, 2), 0)):
        assert np.isclose(weights[row, tied[0]], weights[row, tied[1]])
        assert weights[row, tied[0]] < 0.5 and weights[row, other] > 0
    prose = " ".join(_markdown(run).split())
    assert "Token 1 keeps most of its attention for itself. Tokens 0 and 2 each have two keys" in prose
    # Tokens are counted from 0 (t = 0, ..., T - 1 in the notation table): there is no token 3.
    assert not re.search(r"\btoken 3\b", NOTEBOOK.read_text(), flags=re.I)
    assert "give those two keys equal weights. Each of those two keys gets less than half of the row" in prose
    assert "evenly" not in prose


def test_pytorch_agrees_with_the_float64_computation(run):
    values = run.tutorial.values
    np.testing.assert_allclose(values["weights_pt"].double().numpy(), IDENTITY["weights"], atol=1e-6)
    np.testing.assert_allclose(values["output_pt"].double().numpy(), IDENTITY["output"], atol=1e-6)
    np.testing.assert_allclose(values["weights_ref"].double().numpy(), IDENTITY["weights"], atol=1e-6)
    torch_output = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(X),) * 3)
    np.testing.assert_allclose(values["output_sdpa"].double().numpy(), torch_output.numpy(), atol=1e-6)
    labels = ("NumPy weights:", "NumPy output:", "F.sdpa output:", "attn_ref weights:", "attn_ref output:")
    gaps = {label: float(line_starting(run.printed, f"  {label}").split(":")[1]) for label in labels}
    assert all(0 <= gap < 1e-6 for gap in gaps.values())  # "all four agree": float32 rounding
    # The prose: NumPy (float64) and F.sdpa (another order) differ in the last bits; attn_ref,
    # scaling the scores after the product as the hand-written steps do, matches them exactly.
    assert gaps["NumPy weights:"] > 0 and gaps["NumPy output:"] > 0
    assert gaps["attn_ref weights:"] == 0 and gaps["attn_ref output:"] == 0
    X32 = torch.tensor(THREE_TOKENS)  # (3, 4), float32; identity projections
    sdpa = torch.nn.functional.scaled_dot_product_attention(X32, X32, X32)
    by_hand = torch.softmax(X32 @ X32.T / 2.0, dim=-1) @ X32  # divided after the product, sqrt(4) = 2
    expected = (sdpa.double() - by_hand.double()).abs().max().item()
    assert expected > 0 and f"{gaps['F.sdpa output:']:.1e}" == f"{expected:.1e}"
    # F.sdpa's order: its math path, Q and K each scaled by d_k^(-1/4) = 1/sqrt(2) before the product.
    with torch.profiler.profile() as profiler:
        torch.nn.functional.scaled_dot_product_attention(X32, X32, X32)
    assert "aten::_scaled_dot_product_attention_math" in {event.name for event in profiler.events()}
    scaled = X32 * (1 / math.sqrt(2))
    in_its_order = torch.softmax(scaled @ scaled.T, dim=-1) @ X32
    assert torch.equal(sdpa, in_its_order)
    assert line_starting(run.printed, "F.sdpa minus Q, K scaled first:").endswith(" 0.0e+00")


def test_heatmaps_are_drawn(run):
    plotting_cells = [
        c for c in run.tutorial.notebook.cells if c.cell_type == "code" and "attention_heatmap(" in c.source
    ]
    assert len(plotting_cells) == 2
    for cell in plotting_cells:
        assert "vmax=1.0" in cell.source  # the prose: both heatmaps share one colour scale
        figures = [o["data"]["text/html"] for o in cell.outputs if "text/html" in o.get("data", {})]
        assert len(figures) == 1, cell.source
        assert figures[0].startswith('<svg role="img" aria-label="')
        assert figures[0].count("<image ") == 2  # one heatmap: the weights and a colour bar
        assert "plot" in cell.metadata.get("tags", [])  # its code collapsed on the page


def test_heatmap_key_labels_do_not_overlap(run):
    tokens = run.tutorial.values["tokens"]
    assert tokens == TOKENS
    # The plotting cells' call (the title sits above the axes and moves no tick label).
    ax = attention_heatmap(IDENTITY["weights"], tokens, vmax=1.0)
    ax.figure.canvas.draw()
    boxes = [label.get_window_extent() for label in ax.get_xticklabels()]
    plt.close(ax.figure)
    assert len(boxes) == 3
    assert all(left.x1 < right.x0 for left, right in itertools.pairwise(boxes))


def test_random_projections_match_float64_hand_computation(run):
    head = _random_head(run)
    assert head["W_Q"].shape == (4, 2)  # (C, d_k)
    np.testing.assert_allclose(
        block_after(run.printed, "W_Q = rand_q.weight.T, shape (4, 2):", rows=4), head["W_Q"], atol=ATOL
    )
    after = _random_part(run)
    np.testing.assert_allclose(block_after(after, "scores = Q K^T:", rows=3), head["scores"], atol=ATOL)
    np.testing.assert_allclose(block_after(after, "weights:", rows=3), head["weights"], atol=ATOL)
    w = head["weights"]
    assert f"weights from {w.min():.4f} to {w.max():.4f}; uniform: {1 / 3:.4f}" in run.lines
    assert np.abs(w - 1 / 3).max() < 0.1  # the prose: "close to uniform"
    assert np.abs(head["scores"]).max() < 1.5  # the prose: "the scores are small"

    S = IDENTITY["scores"]
    symmetric = {
        "scores": (np.allclose(S, S.T), np.allclose(head["scores"], head["scores"].T)),
        "weights": (np.allclose(IDENTITY["weights"], IDENTITY["weights"].T), np.allclose(w, w.T)),
    }
    assert symmetric == {"scores": (True, False), "weights": (False, False)}  # what the prose says
    for name, (identity, random) in symmetric.items():
        assert f"{name} symmetric? identity: {identity}, random: {random}" in run.lines
    assert flag(run.printed, "matches F.sdpa:")


def test_the_original_notebooks_mistakes_are_shown_with_the_computed_truth(run):
    assert "two layers made without a seed have equal weights: False" in run.lines
    assert "seeding with 0 again gives back the first layer: True" in run.lines

    printed_w, printed_b, printed_y = (-0.4424, 0.4990, -0.0855), -0.3704, -0.0713  # the original's
    for x in ((3.0, 4.0, 5.0), (1.0, 2.0, 3.0)):
        value = x[0] * printed_w[0] + x[1] * printed_w[1] + x[2] * printed_w[2] + printed_b
        matches = abs(value - printed_y) < 5e-5
        assert f"x = {list(x)}: x W + b = {value:.4f}, its y: {matches}" in run.lines
    # Only the input the original's code used reproduces the y it printed.
    assert "x = [1.0, 2.0, 3.0]: x W + b = -0.0713, its y: True" in run.lines
    assert "x = [3.0, 4.0, 5.0]: x W + b = -0.1291, its y: False" in run.lines

    assert "y == y_manual gives a tensor: tensor([True])" in run.lines
    error = run.lines[run.lines.index("with two outputs, the check raises RuntimeError:") + 1]
    assert "more than one value is ambiguous" in error
    assert "torch.testing.assert_close passes with two outputs" in run.lines
    prose = " ".join(_markdown(run).split())
    assert "with two outputs the `assert` raises a `RuntimeError` instead of checking anything" in prose

    # The original's scale 1/sqrt(C) = 1/2 differs from 1/sqrt(d_k) = 1/sqrt(2) on the random head.
    head = _random_head(run)
    by_width = _softmax_rows(head["scores"] / 2.0) @ head["V"]
    off = np.abs(by_width - head["output"]).max()
    assert off > 1e-5
    assert "1/sqrt(C) matches F.sdpa: False" in run.lines
    assert abs(numbers(line_starting(run.printed, "largest difference:"))[0] - off) < 1e-4
    assert f"C = 512, d_k = 64: sqrt(C) / sqrt(d_k) = {math.sqrt(8):.4f}" in run.lines
    # The original's line is quoted with its dtype.
    assert "torch.sqrt(torch.tensor(d_model, dtype=torch.float32))" in NOTEBOOK.read_text()


def test_exercise_solutions_are_collapsed_and_correct(run):
    solutions = [c for c in run.tutorial.code_cells if "solution" in c.metadata.get("tags", [])]
    assert len(solutions) == 4

    # 1. Doubling every score: softmax(2z) = softmax(z)^2, renormalised.
    doubled = reference.softmax(2 * IDENTITY["scaled"])
    np.testing.assert_allclose(
        block_after(run.printed, "weights of the doubled scores:", rows=3), doubled, atol=ATOL
    )
    squared = IDENTITY["weights"] ** 2 / (IDENTITY["weights"] ** 2).sum(axis=-1, keepdims=True)
    assert np.allclose(doubled, squared)
    assert flag(run.printed, "equal to the squared weights, renormalised:")
    own = f"t1 on itself: {IDENTITY['weights'][1, 1]:.4f} -> {doubled[1, 1]:.4f}"
    assert own in run.lines
    # Doubling undoes the division by sqrt(d_k) = sqrt(4): printed, not typed in the comment.
    undone = np.array_equal(2 * IDENTITY["scaled"], IDENTITY["scores"])
    assert undone and f"sqrt(d_k) = {math.sqrt(4):g}; 2 * scaled_np is the unscaled scores: True" in run.lines
    assert "sqrt(d_k) = 2," not in NOTEBOOK.read_text()

    # 2. Overflow: float32's largest value is (2 - 2^-23) * 2^127, about e^88.72; e^101 is beyond it.
    largest = (2 - 2**-23) * 2.0**127
    assert f"the largest float32 is e to the power {math.log(largest):.2f}" in run.lines
    assert math.log(largest) < 100
    assert "exp(row):       tensor([inf, inf, inf])" in run.lines
    assert "naive softmax:  tensor([nan, nan, nan])" in run.lines
    e = math.e
    stable = numbers(line_starting(run.printed, "stable softmax:"))
    np.testing.assert_allclose(stable, [e / (2 * e + 1), 1 / (2 * e + 1), e / (2 * e + 1)], atol=ATOL)

    # 3. The transposition: nn.Linear computes X @ weight.T; X @ weight is another matrix.
    square = run.probe["square"]
    assert flag(run.printed, "proj(X) equals X @ weight.T:")
    assert flag(run.printed, "proj(X) equals X @ weight:  ") == bool(np.allclose(X @ square.T, X @ square))
    assert not np.allclose(X @ square.T, X @ square)  # the prose: the wrong orientation gives other numbers
    error = run.lines[run.lines.index("X @ weight, with weight (2, 4):") + 1]
    assert "cannot be multiplied (3x4 and 2x4)" in error

    # 4. Reversing the tokens reverses the outputs (no mask, no positions).
    order = [2, 1, 0]
    output_rev, weights_rev = reference.attention(X[order], X[order], X[order])
    assert np.allclose(output_rev, IDENTITY["output"][order])
    assert np.allclose(weights_rev, IDENTITY["weights"][order][:, order])
    assert flag(run.printed, "the old output rows, reversed:")
    assert flag(run.printed, "the old weights, rows and columns reversed:")
