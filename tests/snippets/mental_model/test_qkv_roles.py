"""mental_model/qkv_roles.py: hand-set projections make 'she' find Alice, against float64 NumPy and
PyTorch's own attention."""

from __future__ import annotations

import numpy as np
import torch

from attn_ref.examples import SENTENCE, SENTENCE_TOKENS
from tests.support.float32_attention_bounds import assert_within, float32_attention
from tests.support.printed import assert_shown
from tests.support.reference import as64

ALICE, MET, SHE = (SENTENCE_TOKENS.index(token) for token in ("Alice", "met", "she"))


def _leads(weights: np.ndarray, error: np.ndarray, winner: int) -> bool:
    """``winner`` has the largest weight, by more than float32 rounding could undo."""
    return bool(weights[winner] - np.delete(weights, winner).max() > 2 * error.max())


def test_plain_dot_products_make_she_attend_to_itself(values):
    X = as64(values["X"])
    np.testing.assert_array_equal(X, SENTENCE)
    exact = float32_attention(X, X, X)
    assert_within(values["plain"], exact.weights, exact.weights_error, "plain weights")
    reference = torch.softmax(torch.tensor(X) @ torch.tensor(X).T / X.shape[-1] ** 0.5, dim=-1)
    np.testing.assert_allclose(exact.weights, reference.numpy(), rtol=1e-12)
    assert _leads(exact.weights[SHE], exact.weights_error[SHE], SHE)


def test_projected_scores_are_not_symmetric(values):
    X = as64(values["X"])
    Q, K, V, scores = (as64(values[name]) for name in ("Q", "K", "V", "scores"))
    for name, P in [("Q", Q), ("K", K), ("V", V)]:
        np.testing.assert_array_equal(P, X @ as64(values[f"W_{name}"]))  # small integers: exact
    np.testing.assert_array_equal(scores, Q @ K.T)
    assert scores[SHE, ALICE] > 0  # she scores Alice
    assert not scores[ALICE].any()  # Alice, whose query is zero, scores no one
    assert not K[MET].any() and not as64(values["W_K"])[values["col"]["verb"]].any()  # W_K ignores 'verb'


def test_projections_make_she_find_alice(values):
    Q, K, V = (as64(values[name]) for name in ("Q", "K", "V"))
    exact = float32_attention(Q, K, V)
    assert_within(values["weights"], exact.weights, exact.weights_error, "projected weights")
    assert_within(values["output"], exact.output, exact.output_error, "output")
    sdpa = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(x) for x in (Q, K, V)))
    np.testing.assert_allclose(exact.output, sdpa.numpy(), rtol=1e-12, atol=1e-15)
    assert _leads(exact.weights[SHE], exact.weights_error[SHE], ALICE)


def test_prints_the_weights_scores_output_and_key(printed, values):
    shown = [
        values["plain"][SHE],
        values["scores"],
        values["weights"][SHE],
        values["output"][SHE],
        values["K"][MET],
    ]
    assert_shown(printed, *shown, decimals=[3, 1, 3, 3, 1])
