"""The scaled dot-product tutorial, as the build executed it, checked against references computed here.

Every number the tutorial prints or typesets is compared with an independent computation:
NumPy in float64 (tests/reference.py), ``torch.nn.functional.scaled_dot_product_attention``
and ``torch.nn.MultiheadAttention``, or a formula written out below. The page itself is
checked too: its links inside the page land on a heading, and no heading holds math.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

from attn_ref.examples import AV_VALUES, AV_WEIGHTS, TEN_TOKENS
from tests.printed import block_after, flag, number_after, numbers
from tests.reference import attention, multihead_attention, softmax
from tests.site_tools import ROOT

# The original notebook's "Expected Output" for AV_WEIGHTS @ AV_VALUES, as it printed it.
ORIGINAL_CLAIMED_AV = [[0.62, 0.74, 0.86, 0.98], [0.42, 0.54, 0.66, 0.78], [0.64, 0.76, 0.88, 1.00]]
TWO_DECIMALS = 0.005 + 1e-6  # what printing with precision=2 may round away


@pytest.fixture(scope="module")
def executed(tutorial):
    """The executed notebook, what it printed, and the tensors it computed."""
    values = dict(tutorial.values)
    values["mha_state"] = values["mha"].state_dict()
    return tutorial, tutorial.printed(), values


@pytest.fixture(scope="module")
def reference():
    """Single-head attention with identity projections, in float64 NumPy."""
    X = np.array(TEN_TOKENS, dtype=np.float64)  # (T, C)
    output, weights = attention(X, X, X)
    return {"X": X, "scores": X @ X.T / np.sqrt(X.shape[1]), "weights": weights, "output": output}


# The lesson, single head


def test_the_input_and_the_identity_projections(executed, reference):
    _, printed, values = executed
    T, C = reference["X"].shape
    assert tuple(values["X"].shape) == (1, T, C)
    assert f"B = 1 sequence, T = {T} tokens, C = {C} features per token" in printed
    shown = block_after(printed, "X[0], one token per row:", rows=T)
    np.testing.assert_allclose(shown, reference["X"], atol=TWO_DECIMALS)
    assert flag(printed, "Q, K and V all equal X:")
    for name in ("Q", "K", "V"):
        np.testing.assert_array_equal(values[name].numpy(), np.float32(reference["X"])[None])


def test_scores_weights_and_output_match_numpy_float64(executed, reference):
    _, _, values = executed
    for name in ("scores", "weights", "output"):
        np.testing.assert_allclose(values[name][0].double().numpy(), reference[name], atol=2e-6, err_msg=name)


def test_printed_scores_and_output_are_the_numpy_ones(executed, reference):
    _, printed, _ = executed
    T, C = reference["X"].shape
    assert f"d_k = {C}, sqrt(d_k) = {math.sqrt(C):.4f}" in printed
    shown = block_after(printed, f"scores.shape = (1, {T}, {T})", rows=T)
    np.testing.assert_allclose(shown, reference["scores"], atol=TWO_DECIMALS)
    shown = block_after(printed, f"output.shape = (1, {T}, {C})", rows=T)
    np.testing.assert_allclose(shown, reference["output"], atol=TWO_DECIMALS)


def test_dividing_by_sqrt_d_k_lowers_the_largest_weight_of_every_row(executed, reference):
    _, printed, _ = executed
    C = reference["X"].shape[1]
    without = softmax(reference["scores"] * np.sqrt(C)).max(axis=1)
    scaled = reference["weights"].max(axis=1)
    assert (without > scaled).all()  # the claim, on the reference
    label = "largest weight of each row, without the division and with it:"
    np.testing.assert_allclose(block_after(printed, label, rows=2), [without, scaled], atol=TWO_DECIMALS)


def test_identity_projection_claims_hold(executed, reference):
    _, printed, _ = executed
    scores, weights = reference["scores"], reference["weights"]
    assert np.allclose(weights.sum(axis=1), 1.0) and flag(printed, "every row sums to one:")
    assert np.allclose(scores, scores.T) and flag(printed, "scores symmetric:")
    assert (weights.argmax(axis=1) == np.arange(len(scores))).all()
    assert flag(printed, "each token's strongest key is itself:")


def test_output_matches_attn_ref_and_pytorch(executed):
    _, printed, values = executed
    X = values["X"].double()
    expected = torch.nn.functional.scaled_dot_product_attention(X, X, X)
    torch.testing.assert_close(values["output"].double(), expected, atol=2e-6, rtol=0)
    assert flag(printed, "attn_ref agrees (allclose, atol=1e-6):")
    assert flag(printed, "PyTorch agrees (allclose, atol=1e-6):")
    assert number_after(printed, "largest |difference| from PyTorch:") < 1e-5  # float32 rounding


def test_av_product_and_its_printout_are_the_hand_computed_ones(executed):
    _, printed, values = executed
    A, V = AV_WEIGHTS, AV_VALUES
    by_hand = [[sum(A[i][k] * V[k][j] for k in range(3)) for j in range(4)] for i in range(3)]
    np.testing.assert_allclose(values["AV"].double().numpy(), by_hand, atol=1e-6)
    np.testing.assert_allclose(block_after(printed, "A =", rows=3), A, atol=TWO_DECIMALS)
    np.testing.assert_allclose(block_after(printed, "V =", rows=3), V, atol=TWO_DECIMALS)
    np.testing.assert_allclose(block_after(printed, "AV =", rows=3), by_hand, atol=TWO_DECIMALS)


def test_typeset_sums_use_the_data_and_the_right_results(executed):
    tutorial, _, _ = executed
    latex = tutorial.result_of('Markdown("\\n\\n".join(boxes))')["text/markdown"]
    A, V = np.array(AV_WEIGHTS), np.array(AV_VALUES)
    lines = re.findall(r"O_\{(\d)(\d)\} &= (.+?) &&= ([\d.]+)", latex)
    assert len(lines) == A.shape[0] * V.shape[1]
    for i, j, terms, result in lines:
        i, j = int(i), int(j)  # counted from 0, like the tokens
        pairs = [tuple(float(x) for x in term.split(r" \times ")) for term in terms.split(" + ")]
        assert pairs == [(A[i, k], V[k, j]) for k in range(A.shape[1])], (i, j)
        assert float(result) == pytest.approx(A[i] @ V[:, j], abs=5e-5)
    # One block of sums per row of O, each in a box the site's MathJax typesets.
    assert latex.count('<div class="arithmatex">\\begin{align*}') == A.shape[0]


# The lesson, multi-head


def test_multi_head_steps_match_numpy_float64(executed, reference):
    _, printed, values = executed
    H = values["num_heads"]
    T, C = reference["X"].shape
    assert C % H == 0 and H > 1
    assert tuple(values["q"].shape) == (1, H, T, C // H)
    assert tuple(values["head_weights"].shape) == (1, H, T, T)
    assert f"in_proj_weight: ({3 * C}, {C})" in printed
    assert f"q, k, v split into heads: (1, {H}, {T}, {C // H})" in printed
    assert flag(printed, f"head 1 holds features {C // H}..{C - 1} of Q:")
    assert number_after(printed, "scale 1/sqrt(d_k) =") == pytest.approx(1 / math.sqrt(C // H), abs=5e-5)
    ref = multihead_attention(reference["X"], values["mha_state"], H)
    np.testing.assert_allclose(values["head_weights"][0].double().numpy(), ref["weights"], atol=2e-6)
    np.testing.assert_allclose(values["concat"][0].double().numpy(), ref["concat"], atol=2e-6)
    np.testing.assert_allclose(values["mh_output"][0].double().numpy(), ref["output"], atol=2e-6)
    np.testing.assert_allclose(values["ours_mh_output"][0].double().numpy(), ref["output"], atol=2e-6)
    assert f"mh_output.shape = (1, {T}, {C})" in printed


def test_multi_head_matches_a_fresh_torch_multihead_attention(executed):
    _, printed, values = executed
    C, H = values["X"].shape[-1], values["num_heads"]
    mha = torch.nn.MultiheadAttention(C, H, batch_first=True, dtype=torch.float64)
    mha.load_state_dict({name: t.double() for name, t in values["mha_state"].items()})
    X = values["X"].double()
    with torch.no_grad():
        out, per_head = mha(X, X, X, average_attn_weights=False)
    torch.testing.assert_close(values["mh_output"].double(), out, atol=2e-6, rtol=0)
    torch.testing.assert_close(values["mha_output"].double(), out, atol=2e-6, rtol=0)
    torch.testing.assert_close(values["head_weights"].double(), per_head, atol=2e-6, rtol=0)
    assert number_after(printed, "largest |difference| of the outputs:") < 1e-5


def test_cost_of_several_heads_is_the_formulas(executed):
    """Matrix-product FLOPs: 2 m n k for an (m, k) @ (k, n) product; float32 weights: 4 bytes each."""
    _, printed, _ = executed
    T, C = 16384, 4096
    projections = 4 * (2 * T * C * C)  # W_Q, W_K, W_V and W_O, each (T, C) @ (C, C)
    assert number_after(printed, "the four projections, for any H:") == pytest.approx(projections, rel=1e-3)
    header = "  H   d_k  QK^T and AV FLOPs  (B, H, T, T) weights"
    lines = printed.split(header + "\n")[1].splitlines()[:3]
    rows = [numbers(line) for line in lines]
    assert [int(row[0]) for row in rows] == [1, 8, 32]
    for H, d_k, flops, gib in rows:
        assert d_k == C // H
        assert flops == pytest.approx(H * 2 * (2 * T * T * d_k), rel=1e-3)  # QK^T and AV in each head
        assert flops == pytest.approx(4 * T * T * C, rel=1e-3)  # the same for every H
        assert gib == pytest.approx(4 * H * T * T / 2**30)  # H times one head's (T, T)


# Where the original notebook goes wrong


def test_the_original_notebooks_axis_fails_once_tokens_and_features_differ(executed):
    _, printed, _ = executed
    C = len(TEN_TOKENS[0])
    assert "identity of size(1): RuntimeError:" in printed
    assert f"identity of size(-1): shape (1, 4, {C})" in printed
    assert f"values of width 4 give an output of shape (1, {len(TEN_TOKENS)}, 4)" in printed


def test_per_sequence_shapes_are_not_called_a_mistake_and_m_stays_the_mask(executed):
    tutorial, _, _ = executed
    markdown = " ".join(
        " ".join(cell.source for cell in tutorial.notebook.cells if cell.cell_type == "markdown").split()
    )
    # The notation table gives A, V and O per sequence, without a batch axis: no mistake to correct.
    notation = (ROOT / "docs" / "notation.md").read_text()
    assert re.search(r"^\| \$A\$ \|.*\| \$\(L, S\)\$ \|$", notation, flags=re.M)
    assert "leave out the batch axis" not in markdown
    assert "**2. It takes the output's width from the model.**" in markdown
    # M is the mask in the notation table; the product of the projections is W_QK.
    assert re.search(r"^\| \$M\$ \| mask", notation, flags=re.M)
    assert "x_i M x_j" not in markdown and "M = W_Q" not in markdown
    assert "$x_i W_{QK} x_j^\\top$ with $W_{QK} = W_Q W_K^\\top$" in markdown


def test_the_original_notebooks_av_result_is_wrong_in_eleven_entries(executed):
    _, printed, values = executed
    truth = np.array(AV_WEIGHTS) @ np.array(AV_VALUES)
    wrong = ~np.isclose(ORIGINAL_CLAIMED_AV, truth, atol=5e-3)
    assert int(wrong.sum()) == 11
    np.testing.assert_array_equal(values["wrong"].numpy(), wrong)
    assert f"wrong entries: {int(wrong.sum())} of 12" in printed
    steps = np.concatenate(
        [np.diff(np.array(m), axis=1).ravel() for m in (AV_VALUES, truth, ORIGINAL_CLAIMED_AV)]
    )
    shown = block_after(printed, "step from column to column in V, in AV, and in its result:")
    np.testing.assert_allclose(shown, steps, atol=TWO_DECIMALS)
    assert np.allclose(steps[:18], 0.1) and not np.allclose(steps[18:], 0.1)  # the argument holds


def test_the_original_notebooks_final_layer_is_random(executed):
    _, printed, values = executed
    assert flag(printed, "the reshape changed nothing:")
    C = values["X"].shape[-1]
    finals = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        layer = torch.nn.Linear(C, C)
        with torch.no_grad():
            finals.append(layer.double()(values["output"].double()))
    gap = (finals[0] - finals[1]).abs().max().item()
    shown = number_after(printed, "two random 'final outputs' differ by up to")
    assert shown == pytest.approx(gap, abs=0.005 + 1e-4) and gap > 0.1


# Exercises


def test_exercise_1_shifting_the_keys_changes_nothing_shifting_the_queries_does(executed, reference):
    _, printed, values = executed
    X, c = reference["X"], values["c"].double().numpy()
    scale = 1 / np.sqrt(X.shape[1])
    keys_shifted = softmax(X @ (X + c).T * scale)
    queries_shifted = softmax((X + c) @ X.T * scale)
    assert np.abs(keys_shifted - reference["weights"]).max() < 1e-12  # exactly the same, but for rounding
    assert number_after(printed, "keys + c:    largest change in the weights") < 1e-5
    change = np.abs(queries_shifted - reference["weights"]).max()
    shown = number_after(printed, "queries + c: largest change in the weights")
    assert shown == pytest.approx(change, abs=TWO_DECIMALS) and change > 0.05


def test_exercise_2_a_token_twice_as_long_outshines_the_first(executed, reference):
    _, printed, _ = executed
    X = reference["X"]
    X11 = np.vstack([X, 2 * X[:1]])  # (T + 1, C)
    _, weights = attention(X11, X11, X11)
    assert number_after(printed, "query 0's strongest key:") == weights[0].argmax() == len(X)
    ratio = weights[0, len(X)] / weights[0, 0]
    assert number_after(printed, "weight on t10 / weight on t0:") == pytest.approx(ratio, abs=5e-3)
    derived = math.exp(X[0] @ X[0] / math.sqrt(X.shape[1]))
    assert ratio == pytest.approx(derived, rel=1e-12)  # the derivation is exact
    assert number_after(printed, "derived, exp(|x_0|^2 / sqrt(d_k)):") == pytest.approx(derived, abs=5e-3)


def test_exercise_3_a_reshape_without_transpose_mixes_tokens(executed, reference):
    _, printed, values = executed
    H = values["num_heads"]
    T, C = reference["X"].shape
    ref = multihead_attention(reference["X"], values["mha_state"], H)
    np.testing.assert_allclose(values["broken"][0].double().numpy(), ref["heads"].reshape(T, C), atol=2e-6)
    np.testing.assert_allclose(values["fixed"][0].double().numpy(), ref["concat"], atol=2e-6)
    assert not flag(printed, "broken merge == concat:")
    assert flag(printed, "row 0 is head 0 of tokens 0, 1:")
    assert flag(printed, "fixed merge == concat:")


def test_the_exercises_have_collapsed_solutions(executed):
    tutorial, _, _ = executed
    cells = tutorial.notebook.cells
    start = next(i for i, cell in enumerate(cells) if cell.source.startswith("## Exercises"))
    solutions = [cell for cell in cells[start:] if "solution" in cell.metadata.get("tags", [])]
    assert 3 <= len(solutions) <= 5
    assert all(cell.outputs for cell in solutions)


# Every printed check, the figures, and the page


def test_every_check_the_tutorial_prints_holds(executed):
    _, printed, _ = executed
    checks = re.findall(r"^(.+?):\s+(True|False)$", printed, flags=re.MULTILINE)
    assert len(checks) >= 15
    # The expected Falses: learned projections make the scores asymmetric, and the broken merge.
    falses = [label for label, verdict in checks if verdict == "False"]
    assert falses == ["scores symmetric now", "broken merge == concat"]


def test_one_heatmap_for_identity_weights_and_one_per_head(executed):
    tutorial, _, values = executed
    figures = [
        o["data"]["text/html"]
        for c in tutorial.code_cells
        for o in c.outputs
        if "text/html" in o.get("data", {})
    ]
    figures = [svg for svg in figures if svg.startswith('<svg role="img" aria-label="')]
    assert len(figures) == 2
    # Each heatmap draws two images, the weights and a colour bar: one heatmap, then one per head.
    assert figures[0].count("<image ") == 2
    assert figures[1].count("<image ") == 2 * values["num_heads"]


def test_the_original_is_called_the_original_notebook_and_headings_hold_no_math(executed):
    tutorial, _, _ = executed
    markdown = "\n".join(cell.source for cell in tutorial.notebook.cells if cell.cell_type == "markdown")
    # "seed" only for random seeds, never for the document the page started from.
    assert not re.search(r"\bthe seed\b|\bseed's\b", markdown, flags=re.IGNORECASE)
    random_seeds = re.sub(r"random seed|two seeds|a seeded", "", markdown, flags=re.IGNORECASE)
    assert "seed" not in random_seeds.lower()
    headings = re.findall(r"^#+ (.+)$", markdown, flags=re.MULTILINE)
    assert headings and not [h for h in headings if "$" in h or "\\" in h]


def test_links_inside_the_page_land_on_an_element(built_site):
    page = (built_site.path / "tutorials" / "scaled_dot_product_step_by_step" / "index.html").read_text()
    ids = set(re.findall(r'\bid="([^"]+)"', page))
    targets = set(re.findall(r'href="#([^"]+)"', page))
    assert {"where-the-original-notebook-goes-wrong", "exercises"} <= targets
    assert targets - ids == set()
