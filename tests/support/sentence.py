"""The core path's running example in float64, from attn_ref.examples: the sentence's features and
its hand-set head, and the queries, keys and values they give (small integers: exact in float32)."""

from __future__ import annotations

import numpy as np

from attn_ref import examples as ex
from attn_ref.examples import SENTENCE, SENTENCE_TOKENS, SENTENCE_W_K, SENTENCE_W_Q, SENTENCE_W_V
from tests.support.reference import as64

X = as64(SENTENCE)  # (T, C)
W_Q, W_K, W_V = (as64(W) for W in (SENTENCE_W_Q, SENTENCE_W_K, SENTENCE_W_V))  # (C, 2) each
Q, K, V = X @ W_Q, X @ W_K, X @ W_V  # (T, 2) each
# Page 4's two hand-set heads side by side, (C, C) each: head 0 in columns 0 to 2, head 1 in 3 to 5
HEADS_W_Q, HEADS_W_K, HEADS_W_V, HEADS_W_O = (
    as64(M)
    for M in (ex.SENTENCE_HEADS_W_Q, ex.SENTENCE_HEADS_W_K, ex.SENTENCE_HEADS_W_V, ex.SENTENCE_HEADS_W_O)
)
ALICE, MET, BOB, SHE = (SENTENCE_TOKENS.index(token) for token in ("Alice", "met", "Bob", "she"))


def leads(weights: np.ndarray, error: np.ndarray, winner: int) -> bool:
    """``winner`` has the largest weight, by more than float32 rounding could undo."""
    return bool(weights[winner] - np.delete(weights, winner).max() > 2 * np.max(error))
