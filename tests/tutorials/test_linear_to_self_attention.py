"""The tutorial "From nn.Linear to self-attention", as the build executed it.

Every intermediate the tutorial prints is checked here against float64 NumPy
written out independently (no max-shift softmax, plain sums), or against a
hand calculation. The random parameters of the tutorial are inputs, not
results: they are read from the kernel's variables, and the test recomputes
everything that follows from them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from attn_ref.examples import THREE_TOKENS
from tests.conftest import ExecutedTutorial
from tests.printed import block_after, line_starting, numbers
from tests.site_tools import TUTORIALS

NOTEBOOK = TUTORIALS / "linear_to_self_attention.py"
TOKENS = ["token 1", "token 2", "token 3"]
ATOL = 6e-5  # the tutorial prints four decimals


@dataclass(frozen=True)
class Run:
    """The executed tutorial, what it printed, and its random parameters in float64."""

    tutorial: ExecutedTutorial
    printed: str
    lines: list[str]
    probe: dict[str, np.ndarray]


@pytest.fixture(scope="module")
def run(tutorial: ExecutedTutorial) -> Run:
    layer, rand_q, rand_k, rand_v = (
        tutorial.values[name] for name in ("layer", "rand_q", "rand_k", "rand_v")
    )
    parameters = {
        "layer_weight": layer.weight,
        "layer_bias": layer.bias,
        "rand_q": rand_q.weight,
        "rand_k": rand_k.weight,
        "rand_v": rand_v.weight,
    }
    printed = tutorial.printed()
    probe = {name: tensor.detach().double().numpy() for name, tensor in parameters.items()}
    return Run(tutorial, printed, printed.splitlines(), probe)


def _softmax_rows(z: np.ndarray) -> np.ndarray:
    """exp(z) / sum(exp(z)) per row, with no max shift: fine for these small scores."""
    return np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)


def _hand_attention(Q: np.ndarray, K: np.ndarray, V: np.ndarray, scale: float) -> dict[str, np.ndarray]:
    scores = np.array([[sum(q * k for q, k in zip(qi, kj, strict=True)) for kj in K] for qi in Q])
    weights = _softmax_rows(scores * scale)
    return {"scores": scores, "scaled": scores * scale, "weights": weights, "output": weights @ V}


def test_notebook_shape_and_clean_run(run):
    assert run.tutorial.printed("stderr") == ""
    first = run.tutorial.notebook.cells[0]
    assert first.cell_type == "markdown"
    assert first.source.startswith("# From nn.Linear to self-attention")


def test_source_types_no_result_of_the_worked_example():
    # The 3-token weights are pinned by attn_ref's doctest; the page must print them, never type them.
    weights = _softmax_rows(np.array(THREE_TOKENS) @ np.array(THREE_TOKENS).T / 2.0)
    source = NOTEBOOK.read_text()
    assert "THREE_TOKENS" in source
    for value in weights.ravel():
        assert f"{value:.4f}" not in source


def test_linear_layer_prints_its_parameters_and_the_formula(run):
    W, b = run.probe["layer_weight"], run.probe["layer_bias"]
    assert W.shape == (1, 3) and b.shape == (1,)  # (out_features, in_features), (out_features,)
    np.testing.assert_allclose(block_after(run.printed, "W, shape (1, 3):"), W.ravel(), atol=ATOL)
    np.testing.assert_allclose(block_after(run.printed, "b, shape (1,):"), b, atol=ATOL)

    x = [1.0, 2.0, 3.0]
    y_hand = x[0] * W[0, 0] + x[1] * W[0, 1] + x[2] * W[0, 2] + b[0]
    for prefix in ("y        =", "y_manual ="):
        printed = float(numbers(line_starting(run.printed, prefix))[0])
        assert abs(printed - y_hand) < ATOL
    assert "x shape (3,) -> y shape (1,)" in run.lines
    assert "x_row shape (1, 3) -> y shape (1, 1)" in run.lines

    # The float32 results sit within float32 rounding of the float64 value.
    assert line_starting(run.printed, "x @ W.T + b, float64:") == f"x @ W.T + b, float64: {y_hand:.10f}"
    float32_lines = ("nn.Linear,   float32:", "F.linear,    float32:", "x @ W.T + b, float32:")
    float32_values = [float(line_starting(run.printed, p).split(":")[1]) for p in float32_lines]
    for value in float32_values:
        assert abs(value - y_hand) < 1e-6
    gap = float(line_starting(run.printed, "float32 layer minus float64 formula:").split(":")[1])
    assert abs(gap - (float32_values[0] - y_hand)) < 1e-9
    assert gap != 0.0  # the prose says the float64 value differs in the last digits
    assert "torch.allclose(y, y_manual): True" in run.lines
    assert "layer close to the float64 formula: True" in run.lines


def test_seed_problems_are_shown_with_the_computed_truth(run):
    assert "two layers made without a seed have equal weights: False" in run.lines
    assert "seeding with 0 again gives back the layer above: True" in run.lines

    seed_w, seed_b, seed_y = (-0.4424, 0.4990, -0.0855), -0.3704, -0.0713
    for x in ((3.0, 4.0, 5.0), (1.0, 2.0, 3.0)):
        value = x[0] * seed_w[0] + x[1] * seed_w[1] + x[2] * seed_w[2] + seed_b
        matches = abs(value - seed_y) < 5e-5
        assert f"x = {list(x)}: x W^T + b = {value:.4f}, the seed's y: {matches}" in run.lines
    # Only the input the seed's code used reproduces the y it printed.
    assert "x = [1.0, 2.0, 3.0]: x W^T + b = -0.0713, the seed's y: True" in run.lines
    assert "x = [3.0, 4.0, 5.0]: x W^T + b = -0.1291, the seed's y: False" in run.lines

    assert "y == y_manual gives a tensor: tensor([True])" in run.lines
    assert "a layer with two outputs has W of shape (2, 3)" in run.lines
    assert "more than one value is ambiguous" in line_starting(
        run.printed, "the seed's check raises RuntimeError:"
    )
    assert "two outputs: layer and formula agree within float32 tolerance" in run.lines
    # IEEE-754 doubles: 0.1 + 0.2 rounds up, 0.2 + 0.3 is exactly 0.5.
    assert "(0.1 + 0.2) + 0.3 = 0.6000000000000001" in run.lines
    assert "0.1 + (0.2 + 0.3) = 0.6" in run.lines


@pytest.mark.parametrize("library", ["NumPy", "PyTorch"])
def test_attention_steps_match_float64_hand_computation(run, library):
    X = np.array(THREE_TOKENS, dtype=np.float64)
    expected = _hand_attention(X, X, X, scale=1 / math.sqrt(4))
    np.testing.assert_allclose(block_after(run.printed, f"X ({library}):"), X.ravel())
    for name in ("Q", "K", "V"):  # identity projections
        np.testing.assert_allclose(block_after(run.printed, f"{name} ({library}):"), X.ravel())
    np.testing.assert_allclose(
        block_after(run.printed, f"scores = Q K^T ({library}):"), expected["scores"].ravel()
    )
    np.testing.assert_allclose(
        block_after(run.printed, f"scores / sqrt(d_k) ({library}):"), expected["scaled"].ravel()
    )
    np.testing.assert_allclose(
        block_after(run.printed, f"weights ({library}):"), expected["weights"].ravel(), atol=ATOL
    )
    np.testing.assert_allclose(
        block_after(run.printed, f"row sums of the weights ({library}):"), np.ones(3), atol=ATOL
    )
    np.testing.assert_allclose(
        block_after(run.printed, f"output = weights V ({library}):"), expected["output"].ravel(), atol=ATOL
    )
    assert run.lines.count("d_k = 4, 1/sqrt(d_k) = 0.5000") == 2
    assert "same as torch.softmax: True" in run.lines


def test_stable_softmax_demo(run):
    # float32 overflows above about 3.4e38 = e^88.7, so e^100 is inf; naive softmax is inf/inf.
    assert "exp(big):       tensor([inf, inf])" in run.lines
    assert "naive softmax:  tensor([nan, nan])" in run.lines
    stable = [float(n) for n in numbers(line_starting(run.printed, "stable softmax:"))]
    np.testing.assert_allclose(stable, [1 / (1 + math.e), math.e / (1 + math.e)], atol=ATOL)


def test_four_computations_agree(run):
    names = [
        "NumPy vs PyTorch, weights",
        "NumPy vs PyTorch, output",
        "PyTorch vs F.sdpa, output",
        "PyTorch vs attn_ref, weights",
        "PyTorch vs attn_ref, output",
    ]
    for name in names:
        line = line_starting(run.printed, f"{name}: close")
        assert line.startswith(f"{name}: close True, largest difference ")
        assert float(line.rsplit(" ", 1)[1]) < 1e-6


def test_heatmaps_are_drawn_and_strongest_keys_are_right(run):
    X = np.array(THREE_TOKENS, dtype=np.float64)
    weights = _hand_attention(X, X, X, scale=0.5)["weights"]
    for query, row in zip(TOKENS, weights, strict=True):
        strongest = [key for key, w in zip(TOKENS, row, strict=True) if np.isclose(w, row.max())]
        assert f"{query} attends most to {' and '.join(strongest)}" in run.lines
    plotting_cells = [
        c for c in run.tutorial.notebook.cells if c.cell_type == "code" and "attention_heatmap(" in c.source
    ]
    assert len(plotting_cells) == 2
    heatmaps_per_cell = [1, 2]
    for cell, heatmaps in zip(plotting_cells, heatmaps_per_cell, strict=True):
        figures = [o["data"]["text/html"] for o in cell.outputs if "text/html" in o.get("data", {})]
        assert len(figures) == 1, cell.source
        assert figures[0].startswith('<svg role="img" aria-label="')
        assert figures[0].count("<image ") == 2 * heatmaps  # each heatmap: the weights and a colour bar


def test_random_projections_match_float64_hand_computation(run):
    X = np.array(THREE_TOKENS, dtype=np.float64)
    Wq, Wk, Wv = run.probe["rand_q"], run.probe["rand_k"], run.probe["rand_v"]
    assert Wq.shape == Wk.shape == Wv.shape == (2, 4)  # (d_head, d_model)
    Q, K, V = X @ Wq.T, X @ Wk.T, X @ Wv.T
    expected = _hand_attention(Q, K, V, scale=1 / math.sqrt(2))  # d_k = 2
    np.testing.assert_allclose(block_after(run.printed, "W_q (random), shape (2, 4):"), Wq.ravel(), atol=ATOL)
    np.testing.assert_allclose(
        block_after(run.printed, "scores = Q K^T (random projections):"),
        expected["scores"].ravel(),
        atol=ATOL,
    )
    np.testing.assert_allclose(
        block_after(run.printed, "weights (random projections):"), expected["weights"].ravel(), atol=ATOL
    )
    np.testing.assert_allclose(
        block_after(run.printed, "output (random projections):"), expected["output"].ravel(), atol=ATOL
    )
    w = expected["weights"]
    assert f"weights range from {w.min():.4f} to {w.max():.4f}; uniform: {1 / 3:.4f}" in run.lines

    S_identity = X @ X.T
    W_identity = _softmax_rows(S_identity / 2.0)
    assert run.lines[run.lines.index("scores symmetric?") + 1] == (
        f"  identity: {np.allclose(S_identity, S_identity.T)}  random: "
        f"{np.allclose(expected['scores'], expected['scores'].T)}"
    )
    assert run.lines[run.lines.index("weights symmetric?") + 1] == (
        f"  identity: {np.allclose(W_identity, W_identity.T)}  random: {np.allclose(w, w.T)}"
    )
    assert (
        run.lines[run.lines.index("Q equals K?") + 1] == f"  identity: True  random: {np.array_equal(Q, K)}"
    )

    # The seed's scale 1/sqrt(d_model) = 1/2 differs from 1/sqrt(d_k) = 1/sqrt(2) here.
    seed_output = _softmax_rows(expected["scores"] / 2.0) @ V
    off = np.abs(seed_output - expected["output"]).max()
    assert "1/sqrt(d_k) matches F.sdpa: True" in run.lines
    assert f"the seed's 1/sqrt(d_model) matches F.sdpa: {bool(off < 1e-5)}" in run.lines
    printed_off = float(
        line_starting(run.printed, "largest difference with the seed's scale:").rsplit(" ", 1)[1]
    )
    assert abs(printed_off - off) < 1e-4
