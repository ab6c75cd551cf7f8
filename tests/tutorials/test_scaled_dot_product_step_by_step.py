"""The scaled dot-product tutorial, as the build executed it, checked against references computed here.

Every key number is compared with an independent computation: NumPy in float64
(tests/reference.py), ``torch.nn.functional.scaled_dot_product_attention`` and
``torch.nn.MultiheadAttention``. The printed and typeset text is checked too, since
that is what a reader sees.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from attn_ref.examples import AV_VALUES, AV_WEIGHTS, TEN_TOKENS
from tests.printed import numbers
from tests.reference import attention, softmax

# What the seed printed as the result of AV_WEIGHTS @ AV_VALUES ("Expected Output").
SEED_CLAIMED_AV = [[0.62, 0.74, 0.86, 0.98], [0.42, 0.54, 0.66, 0.78], [0.64, 0.76, 0.88, 1.00]]


@pytest.fixture(scope="module")
def executed(tutorial):
    """The executed notebook and the tensors it computed."""
    values = dict(tutorial.values)
    values["mha_state"] = values["mha"].state_dict()
    return tutorial, values


@pytest.fixture(scope="module")
def reference():
    """Single-head attention with identity projections, in float64 NumPy."""
    X = np.array(TEN_TOKENS, dtype=np.float64)  # (T, C)
    output, weights = attention(X, X, X)
    return {"X": X, "scores": X @ X.T / np.sqrt(X.shape[1]), "weights": weights, "output": output}


def test_the_model_width_comes_from_the_feature_axis(executed, reference):
    _, values = executed
    T, C = reference["X"].shape
    assert tuple(values["X"].shape) == (1, T, C)
    assert values["d_model"] == C and values["d_k"] == C
    printed = executed[0].printed()
    # The seed's axis fails once tokens and features differ; the right one works.
    assert "identity of size(1): RuntimeError:" in printed
    assert f"identity of size(-1): shape (1, 4, {C})" in printed


def test_scores_weights_and_output_match_numpy_float64(executed, reference):
    _, values = executed
    for name in ("scores", "weights", "output"):
        np.testing.assert_allclose(values[name][0].double().numpy(), reference[name], atol=2e-6, err_msg=name)


def test_printed_matrices_are_the_numpy_ones(executed, reference):
    tutorial, _ = executed
    for name in ("X", "scores", "weights", "output"):
        shown = numbers(tutorial.result_of(name)["text/plain"])
        np.testing.assert_allclose(shown, reference[name].ravel(), atol=6e-5, err_msg=name)


def test_output_matches_pytorch_scaled_dot_product_attention(executed):
    _, values = executed
    X = values["X"].double()
    expected = torch.nn.functional.scaled_dot_product_attention(X, X, X)
    torch.testing.assert_close(values["output"].double(), expected, atol=2e-6, rtol=0)


def test_identity_projection_claims_hold(executed, reference):
    printed = executed[0].printed()
    scores = reference["scores"]
    assert np.allclose(scores, scores.T)
    assert (reference["weights"].argmax(axis=1) == np.arange(len(scores))).all()
    assert "scores symmetric: True" in printed
    assert "every token's strongest key is itself: True" in printed
    # Dividing by sqrt(d_k) flattens every row: its largest weight drops.
    unscaled = softmax(scores * np.sqrt(reference["X"].shape[1]))
    assert (unscaled.max(axis=1) > reference["weights"].max(axis=1)).all()


def test_av_product_is_the_hand_computed_one(executed):
    _, values = executed
    A, V = AV_WEIGHTS, AV_VALUES
    by_hand = [[sum(A[i][k] * V[k][j] for k in range(3)) for j in range(4)] for i in range(3)]
    np.testing.assert_allclose(values["AV"].double().numpy(), by_hand, atol=1e-6)
    np.testing.assert_allclose(
        numbers(executed[0].result_of("AV")["text/plain"]), np.ravel(by_hand), atol=6e-5
    )


def test_typeset_sums_use_the_data_and_the_right_results(executed):
    tutorial, _ = executed
    latex = tutorial.result_of('Markdown("".join(blocks) + display_math("equation*", matrix))')[
        "text/markdown"
    ]
    A, V = np.array(AV_WEIGHTS), np.array(AV_VALUES)
    lines = re.findall(r"O_\{(\d)(\d)\} &= (.+?) &&= ([\d.]+)", latex)
    assert len(lines) == A.shape[0] * V.shape[1]
    for i, j, terms, result in lines:
        i, j = int(i) - 1, int(j) - 1
        pairs = [tuple(float(x) for x in term.split(r" \times ")) for term in terms.split(" + ")]
        assert pairs == [(A[i, k], V[k, j]) for k in range(A.shape[1])], (i, j)
        assert float(result) == pytest.approx(A[i] @ V[:, j], abs=5e-5)
    matrix = re.search(r"\\begin\{bmatrix\}(.+?)\\end\{bmatrix\}", latex).group(1)
    entries = [float(x) for row in matrix.split(r"\\") for x in row.split("&")]
    np.testing.assert_allclose(entries, (A @ V).ravel(), atol=5e-5)
    # One block of sums per row of O, then O itself, each in a box the site's MathJax typesets.
    assert latex.count('<div class="arithmatex">') == A.shape[0] + 1


def test_the_seed_av_result_is_wrong_in_eleven_entries(executed):
    truth = np.array(AV_WEIGHTS) @ np.array(AV_VALUES)
    wrong = ~np.isclose(SEED_CLAIMED_AV, truth, atol=5e-3)
    assert int(wrong.sum()) == 11
    np.testing.assert_array_equal(executed[1]["wrong"].numpy(), wrong)
    assert f"entries the seed got wrong: {int(wrong.sum())} of 12" in executed[0].printed()


def _numpy_multihead(X: np.ndarray, state: dict, H: int) -> tuple[np.ndarray, np.ndarray]:
    """Multi-head self-attention in float64 NumPy from nn.MultiheadAttention's weights."""
    W = state["in_proj_weight"].double().numpy()
    b = state["in_proj_bias"].double().numpy()
    C = X.shape[1]
    d = C // H  # d_k of each head
    q, k, v = (X @ W[i * C : (i + 1) * C].T + b[i * C : (i + 1) * C] for i in range(3))
    heads, weights = [], []
    for h in range(H):
        cols = slice(h * d, (h + 1) * d)
        w = softmax(q[:, cols] @ k[:, cols].T / np.sqrt(d))
        weights.append(w)
        heads.append(w @ v[:, cols])
    concat = np.concatenate(heads, axis=1)
    out = concat @ state["out_proj.weight"].double().numpy().T + state["out_proj.bias"].double().numpy()
    return out, np.stack(weights)


def test_multi_head_steps_match_numpy_float64(executed, reference):
    _, values = executed
    H = values["num_heads"]
    T, C = reference["X"].shape
    assert C % H == 0 and H > 1
    assert tuple(values["q"].shape) == (1, H, T, C // H)
    assert tuple(values["head_weights"].shape) == (1, H, T, T)
    assert tuple(values["concat"].shape) == (1, T, C)
    out, weights = _numpy_multihead(reference["X"], values["mha_state"], H)
    np.testing.assert_allclose(values["head_weights"][0].double().numpy(), weights, atol=2e-6)
    np.testing.assert_allclose(values["mh_output"][0].double().numpy(), out, atol=2e-6)
    np.testing.assert_allclose(values["ours_mh_output"][0].double().numpy(), out, atol=2e-6)
    shown = numbers(executed[0].result_of("mh_output")["text/plain"])
    np.testing.assert_allclose(shown, out.ravel(), atol=6e-5)


def test_multi_head_matches_a_fresh_torch_multihead_attention(executed):
    _, values = executed
    C, H = values["X"].shape[-1], values["num_heads"]
    mha = torch.nn.MultiheadAttention(C, H, batch_first=True, dtype=torch.float64)
    mha.load_state_dict({name: t.double() for name, t in values["mha_state"].items()})
    X = values["X"].double()
    with torch.no_grad():
        out, averaged = mha(X, X, X)
        _, per_head = mha(X, X, X, average_attn_weights=False)
    torch.testing.assert_close(values["mh_output"].double(), out, atol=2e-6, rtol=0)
    torch.testing.assert_close(values["mha_output"].double(), out, atol=2e-6, rtol=0)
    torch.testing.assert_close(values["head_weights"].double(), per_head, atol=2e-6, rtol=0)
    torch.testing.assert_close(values["mha_weights"].double(), averaged, atol=2e-6, rtol=0)
    torch.testing.assert_close(values["head_weights"].double().mean(dim=1), averaged, atol=2e-6, rtol=0)


def test_every_check_the_tutorial_prints_holds(executed):
    printed = executed[0].printed()
    checks = re.findall(r"^(.+?):\s+(True|False)$", printed, flags=re.MULTILINE)
    assert len(checks) >= 15
    # The one expected False: learned projections make the scores asymmetric.
    assert [label for label, verdict in checks if verdict == "False"] == ["scores symmetric now"]


def test_one_heatmap_for_identity_weights_and_one_per_head(executed):
    tutorial, values = executed
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
