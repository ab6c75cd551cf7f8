"""mental_model/one_query.py: she's query meeting the four keys, then every query at once, against
float64 NumPy and PyTorch's own attention; the literal vectors the page shows are the sentence's own
projections (attn_ref.examples), and the pictures draw the same numbers."""

from __future__ import annotations

import numpy as np
import torch

from tests.support.float32_attention_bounds import SAFETY, assert_within, float32_attention
from tests.support.printed import assert_shown, flag, line_after
from tests.support.reference import EPS32, as64
from tests.support.sentence import ALICE, BOB, MET, SHE, K, Q, V, leads

d_k = K.shape[-1]
ONE = float32_attention(Q[SHE : SHE + 1], K, V)  # she's query, in float64 with float32's bounds
EVERY = float32_attention(Q, K, V)


def _scores(queries):
    """queries K^T / sqrt(d_k) in float64, and how far float32 may be from it."""
    error = SAFETY * (d_k + 2) * EPS32 * (np.abs(queries) @ np.abs(K).T) / np.sqrt(d_k)
    return queries @ K.T / np.sqrt(d_k), error


def test_the_literal_vectors_are_the_sentences_projections(values):
    """The page types K, V and the queries so that a reader sees them; they are X W from
    attn_ref.examples, exactly."""
    np.testing.assert_array_equal(as64(values["K"]), K)
    np.testing.assert_array_equal(as64(values["V"]), V)
    np.testing.assert_array_equal(as64(values["q"]), Q[SHE])
    np.testing.assert_array_equal(as64(values["Q"]), Q)
    assert values["d_k"] == d_k == 2


def test_she_finds_alice_and_takes_her_value(printed):
    scores, _ = _scores(Q[SHE : SHE + 1])
    assert_shown(line_after(printed, "scores: "), scores[0], decimals=2)
    assert_shown(line_after(printed, "weights:"), ONE.weights[0], decimals=3)
    assert_shown(line_after(printed, "output: "), ONE.output[0], decimals=3)
    sdpa = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(x) for x in (Q[SHE:], K, V)))
    np.testing.assert_allclose(ONE.output, sdpa.numpy(), rtol=1e-12)
    # What the page says: Alice, a name and female, takes nearly all the weight, and she's output
    # is nearly Alice's value.
    assert leads(ONE.weights[0], ONE.weights_error, ALICE)
    assert ONE.weights[0, ALICE] - ONE.weights_error[0, ALICE] > 0.85
    assert np.abs(ONE.output[0] - V[ALICE]).max() < 0.15


def test_every_query_one_row_per_token(values, printed):
    assert_within(values["weights"], EVERY.weights, EVERY.weights_error, "weights")
    assert_within(values["output"], EVERY.output, EVERY.output_error, "output")
    scores, error = _scores(Q)
    assert_within(values["scores"], scores, error, "scores")
    assert_shown(printed.split("weights, a row per query:")[1], EVERY.weights, decimals=2)
    sdpa = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(x) for x in (Q, K, V)))
    np.testing.assert_allclose(EVERY.output, sdpa.numpy(), rtol=1e-12, atol=1e-15)
    assert flag(printed, "same as PyTorch's:")
    np.testing.assert_allclose(EVERY.weights[SHE], ONE.weights[0], rtol=1e-15)  # the first picture's row


def test_what_the_page_says_of_the_rows():
    """met splits its weight between the two names; Alice and Bob, whose queries are zero, weigh
    every token alike; a weight is not a similarity: she gives Alice nearly all, Alice gives she no
    more than any other token, and she gives itself hardly any."""
    T = len(K)
    w = EVERY.weights
    np.testing.assert_allclose(w[MET, ALICE], w[MET, BOB], rtol=1e-15)
    assert w[MET, ALICE] + w[MET, BOB] > 0.9 and w[MET, ALICE] < 0.5
    for token in (ALICE, BOB):
        assert not Q[token].any()
        np.testing.assert_allclose(w[token], np.full(T, 1 / T), rtol=1e-15)
    assert w[SHE, ALICE] > 0.85 and w[SHE, SHE] < 0.1
    assert w[ALICE, SHE] == w[ALICE].max() == w[ALICE].min()
    # met's output is a blend: half Alice, half Bob, to within what the other keys take.
    assert np.abs(EVERY.output[MET] - [0.5, 0.5]).max() < 0.05


def test_the_first_picture_draws_the_same_numbers(grids):
    """Seven grids: the query, the keys, the scores, the weights, the values, the weighted values
    and the output, each coloured and written as float64 gives them."""
    cells = grids("lookup_fig")
    w = ONE.weights[0]
    scores, scores_error = _scores(Q[SHE : SHE + 1])
    expected = [
        (Q[SHE], 0, 0, "RdBu_r"),
        (K, 0, 0, "RdBu_r"),
        (scores.T, scores_error.T, 2, "RdBu_r"),
        (w[:, None], ONE.weights_error.T, 2, "viridis"),
        (V, 0, 0, "RdBu_r"),
        (w[:, None] * V, ONE.weights_error.T * np.abs(V) + 2 * EPS32 * w[:, None] * np.abs(V), 2, "RdBu_r"),
        (ONE.output, ONE.output_error, 2, "RdBu_r"),
    ]
    assert len(cells) == len(expected)
    for grid, (drawn, allowed, places, cmap) in zip(cells, expected, strict=True):
        assert grid.cmap == cmap
        assert_within(grid.values, np.atleast_2d(drawn), allowed, cmap)
        assert_within(
            grid.numbers(), np.atleast_2d(drawn), 0.5 * 10.0**-places + np.asarray(allowed), "written"
        )
    assert cells[3].clim == (0.0, 1.0)  # weights: dark purple for 0, yellow for 1
    assert cells[0].clim == cells[1].clim  # one scale for the query and the keys
    assert cells[4].clim == cells[5].clim == cells[6].clim == (-1.0, 1.0)


def test_the_second_picture_draws_the_same_numbers(grids):
    """K transposed, Q, the scores, V, the weights and the output, in that order."""
    scores, error = _scores(Q)
    expected = [
        (K.T, 0, 0, "RdBu_r"),
        (Q, 0, 0, "RdBu_r"),
        (scores, error, 2, "RdBu_r"),
        (V, 0, 0, "RdBu_r"),
        (EVERY.weights, EVERY.weights_error, 2, "viridis"),
        (EVERY.output, EVERY.output_error, 2, "RdBu_r"),
    ]
    cells = grids("matrices_fig")
    assert len(cells) == len(expected)
    for grid, (drawn, allowed, places, cmap) in zip(cells, expected, strict=True):
        assert grid.cmap == cmap
        assert_within(grid.values, drawn, allowed, cmap)
        assert_within(grid.numbers(), drawn, 0.5 * 10.0**-places + np.asarray(allowed), "written")
    assert cells[4].clim == (0.0, 1.0)
    assert cells[0].clim == cells[1].clim and cells[3].clim == cells[5].clim
