"""playground/pictures.py: the two pictures drawn before the views draw the views' first numbers,
recomputed here in float64 NumPy from attn_ref.examples, masked cells hatched and left blank."""

from __future__ import annotations

import numpy as np

from attn_ref.examples import LOOKUP_KEYS, LOOKUP_QUERY, LOOKUP_VALUES, THREE_TOKENS
from tests.support.float32_attention_bounds import SAFETY, assert_within, float32_attention
from tests.support.reference import EPS32, causal

q, K, V = (np.array(x, dtype=np.float64) for x in (LOOKUP_QUERY, LOOKUP_KEYS, LOOKUP_VALUES))
TAU = np.sqrt(K.shape[-1])
LOOKUP = float32_attention(q, K, V, scale=1 / TAU)
X = np.array(THREE_TOKENS, dtype=np.float64)[:, :2]  # the view's tokens: two features each
ALLOWED = causal(len(X))
SELF = float32_attention(X, X, X, allowed=ALLOWED)


def _scores_error(exact):
    # Halves and integers: the dot products are exact in float32; the division rounds once more.
    return SAFETY * 2 * EPS32 * np.abs(exact)


def _check_grid(grid, expected, error, places, cmap, allowed=None):
    """The grid's colours and written numbers are ``expected`` (within ``error`` and the rounding
    to ``places``); masked cells, where ``allowed`` is False, have no colour and no number."""
    expected = np.atleast_2d(expected)
    allowed = np.ones(expected.shape, dtype=bool) if allowed is None else allowed
    assert grid.cmap == cmap
    assert grid.values.shape == expected.shape
    assert np.isnan(grid.values[~allowed]).all() and (grid.texts[~allowed] == "").all()
    error = np.broadcast_to(np.asarray(error, dtype=np.float64), expected.shape)
    assert_within(grid.values[allowed], expected[allowed], error[allowed], cmap)
    written = grid.texts[allowed].astype(np.float64)
    assert_within(written, expected[allowed], 0.5 * 10.0**-places + error[allowed], "written")


def test_the_lookup_picture_draws_the_views_first_state(grids):
    """The query, the keys, the scores, the weights, the values and the output, in that order."""
    cells = grids("lookup_fig")
    scores = q @ K.T / TAU
    expected = [
        (q[0], 0, 1, "RdBu_r"),
        (K, 0, 1, "RdBu_r"),
        (scores.T, _scores_error(scores).T, 2, "RdBu_r"),
        (LOOKUP.weights.T, LOOKUP.weights_error.T, 2, "viridis"),
        (V, 0, 1, "RdBu_r"),
        (LOOKUP.output, LOOKUP.output_error, 2, "RdBu_r"),
    ]
    assert len(cells) == len(expected)
    for grid, (drawn, error, places, cmap) in zip(cells, expected, strict=True):
        _check_grid(grid, drawn, error, places, cmap)
    assert cells[3].clim == (0.0, 1.0)  # weights: dark purple for 0, yellow for 1
    assert cells[0].clim == cells[1].clim  # one scale for the query and the keys
    assert cells[4].clim == cells[5].clim  # one scale for the values and the output
    np.testing.assert_allclose(LOOKUP.output, LOOKUP.weights @ V, rtol=1e-12)  # the "sum" arrow


def test_the_self_attention_picture_draws_the_causal_first_state(grids):
    """K transposed, Q, the scores (future hatched), V, the weights (future hatched) and the output."""
    cells = grids("matrices_fig")
    scores = X @ X.T / np.sqrt(X.shape[-1])
    expected = [
        (X.T, 0, 0, "RdBu_r", None),
        (X, 0, 0, "RdBu_r", None),
        (scores, _scores_error(scores), 2, "RdBu_r", ALLOWED),
        (X, 0, 0, "RdBu_r", None),
        (SELF.weights, SELF.weights_error, 2, "viridis", ALLOWED),
        (SELF.output, SELF.output_error, 2, "RdBu_r", None),
    ]
    assert len(cells) == len(expected)
    for grid, (drawn, error, places, cmap, allowed) in zip(cells, expected, strict=True):
        _check_grid(grid, drawn, error, places, cmap, allowed)
    assert cells[4].clim == (0.0, 1.0)
    assert cells[3].clim == cells[5].clim  # one scale for the values and the output
    # What the alt text and the page say: token 0 sees only itself, the last token every token.
    assert SELF.weights[0, 0] == 1 and (SELF.weights[-1] > 0).all()
