"""mental_model/qkv_roles.py: hand-set projections make 'she' find Alice, against float64 NumPy and
PyTorch's own attention; and the picture of both rows of weights."""

from __future__ import annotations

import numpy as np
import torch

from attn_ref.examples import SENTENCE, SENTENCE_TOKENS
from tests.support.float32_attention_bounds import assert_within, float32_attention
from tests.support.printed import assert_shown, line_after
from tests.support.reference import as64

ALICE, MET, BOB, SHE = (SENTENCE_TOKENS.index(token) for token in ("Alice", "met", "Bob", "she"))


def _leads(weights: np.ndarray, error: np.ndarray, winner: int) -> bool:
    """``winner`` has the largest weight, by more than float32 rounding could undo."""
    return bool(weights[winner] - np.delete(weights, winner).max() > 2 * error.max())


def _plain():
    X = as64(SENTENCE)
    return float32_attention(X, X, X)


def _projected(values):
    Q, K, V = (as64(values[name]) for name in ("Q", "K", "V"))
    return float32_attention(Q, K, V)


def test_plain_dot_products_make_she_attend_to_itself(values):
    X = as64(values["X"])
    np.testing.assert_array_equal(X, SENTENCE)
    exact = _plain()
    assert_within(values["plain"], exact.weights, exact.weights_error, "plain weights")
    reference = torch.softmax(torch.tensor(X) @ torch.tensor(X).T / X.shape[-1] ** 0.5, dim=-1)
    np.testing.assert_allclose(exact.weights, reference.numpy(), rtol=1e-12)
    assert _leads(exact.weights[SHE], exact.weights_error[SHE], SHE)


def test_the_projections_are_the_roles_the_page_names(values):
    X, col = as64(values["X"]), values["col"]
    W_Q, W_K, W_V = (as64(values[name]) for name in ("W_Q", "W_K", "W_V"))
    for name, W in [("Q", W_Q), ("K", W_K), ("V", W_V)]:
        np.testing.assert_array_equal(as64(values[name]), X @ W)  # small integers: exact
    # Only a pronoun has a query; it asks for "name" and "female", the two key dimensions.
    assert np.flatnonzero(W_Q.any(axis=1)).tolist() == [col["pronoun"]]
    assert sorted(np.flatnonzero(W_K.any(axis=1)).tolist()) == sorted([col["name"], col["female"]])
    assert not W_K[col["verb"]].any()  # the key ignores the verb feature
    Q = X @ W_Q
    assert np.flatnonzero(Q.any(axis=1)).tolist() == [SHE]  # the other queries are zero


def test_projections_make_she_find_alice_and_take_her_identity(values):
    exact = _projected(values)
    assert_within(values["weights"], exact.weights, exact.weights_error, "projected weights")
    assert_within(values["output"], exact.output, exact.output_error, "output")
    Q, K, V = (torch.tensor(as64(values[name])) for name in ("Q", "K", "V"))
    sdpa = torch.nn.functional.scaled_dot_product_attention(Q, K, V)
    np.testing.assert_allclose(exact.output, sdpa.numpy(), rtol=1e-12, atol=1e-15)
    assert _leads(exact.weights[SHE], exact.weights_error[SHE], ALICE)
    # Its output is mostly "alice" (feature 0 of V), a feature the scores never used.
    assert exact.output[SHE, 0] - exact.output_error[SHE, 0] > 0.5 > exact.output[SHE, 1]
    # The rows of zero queries are uniform.
    T = len(SENTENCE)
    np.testing.assert_allclose(np.delete(exact.weights, SHE, axis=0), np.full((T - 1, T), 1 / T), rtol=1e-15)


def test_symmetry_plain_scores_yes_their_weights_no_projected_scores_no(values):
    Q, K = as64(values["Q"]), as64(values["K"])
    assert (Q @ K.T)[SHE, ALICE] > 0 == (Q @ K.T)[ALICE, SHE]  # she looks for Alice, not back
    X = as64(SENTENCE)
    assert (X @ X.T == (X @ X.T).T).all()
    exact = _plain()
    gap = np.abs(exact.weights - exact.weights.T) - exact.weights_error - exact.weights_error.T
    assert gap.max() > 0  # not symmetric, by more than rounding


def test_prints_the_output_and_the_symmetries(printed, values):
    assert_shown(printed, values["output"][SHE], decimals=3)
    Q, K = as64(values["Q"]), as64(values["K"])
    expected = [True, False, bool((Q @ K.T == (Q @ K.T).T).all())]  # X X^T: see the test above
    assert line_after(printed, "symmetric: X Xᵀ, its weights, Q Kᵀ:").split() == [str(b) for b in expected]


def test_the_picture_draws_both_grids_of_weights(grids, values):
    assert len(grids()) == 2
    for cells, exact in zip(grids(), (_plain(), _projected(values)), strict=True):
        assert cells.cmap == "viridis" and cells.clim == (0.0, 1.0)
        assert_within(cells.values, exact.weights, exact.weights_error, "drawn")
        assert_within(cells.numbers(), exact.weights, 0.005 + exact.weights_error, "written")
