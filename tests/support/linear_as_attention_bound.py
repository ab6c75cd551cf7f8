"""The error bound of the linear-as-attention page, and the literal steps' draws it is checked on
for many seeds (the tests of snippets/linear_as_attention/).

Each test reads its snippet's inputs and results from the ``values`` fixture and checks them
against float64 NumPy computations, hand reasoning, or the error bound derived on the page,
``gamma eps cond(k) ||x||_1 max|W|``, with gamma = 16 (1 + spread of the logits).
"""

from __future__ import annotations

import numpy as np
import torch


def bound(x: np.ndarray, W: np.ndarray, eps: float, cond: float = 1.0) -> np.ndarray:
    """Per-row error estimate gamma eps cond ||x||_1 max|W|, gamma = 16 (1 + max|centred log|x||)."""
    nonzero = x != 0
    logs = np.where(nonzero, np.log(np.abs(np.where(nonzero, x, 1.0))), 0.0)
    centred = np.where(
        nonzero, logs - logs.sum(-1, keepdims=True) / np.maximum(nonzero.sum(-1, keepdims=True), 1), 0
    )
    spread = np.abs(centred).max(-1)
    return 16 * eps * cond * np.abs(x).sum(-1) * np.abs(W).max() * (1 + spread)


def literal_data(seed: int, shape: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x (B, d_in), W (d_out, d_in) and the random key k (B, d_in, d_in), drawn in float32 as
    literal_steps.py draws them after ``torch.manual_seed(seed)``, as float64 arrays.

    Only for the many seeds of literal_steps.py, whose draws stay inside a function: keeping a
    thousand seeds' inputs would clutter the reader's code. Same machine, same draws.
    """
    B, d_in, d_out = shape
    torch.manual_seed(seed)
    x = torch.randn(B, d_in)
    W = torch.randn(d_out, d_in)
    k = torch.randn(B, d_in, d_in)
    return x.double().numpy(), W.double().numpy(), k.double().numpy()
