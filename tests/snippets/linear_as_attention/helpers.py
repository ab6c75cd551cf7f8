"""What the tests of snippets/linear_as_attention/ share: machine epsilons, the page's error bound,
the blog post's draws for many seeds, and how to compare printed numbers with the kept ones.

Each test reads its snippet's inputs and results from the ``values`` fixture and checks them
against float64 NumPy computations, hand reasoning, or the error bound derived on the page,
``gamma eps cond(k) ||x||_1 max|W|``, with gamma = 16 (1 + spread of the logits).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np
import torch

from tests.support.printed import numbers

EPS32 = float(np.finfo(np.float32).eps)
EPS64 = float(np.finfo(np.float64).eps)


def as_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A tensor kept by a snippet, as a float64 array."""
    return tensor.detach().double().numpy()


def bound(x: np.ndarray, W: np.ndarray, eps: float, cond: float = 1.0) -> np.ndarray:
    """Per-row error estimate gamma eps cond ||x||_1 max|W|, gamma = 16 (1 + max|centred log|x||)."""
    nonzero = x != 0
    logs = np.where(nonzero, np.log(np.abs(np.where(nonzero, x, 1.0))), 0.0)
    centred = np.where(
        nonzero, logs - logs.sum(-1, keepdims=True) / np.maximum(nonzero.sum(-1, keepdims=True), 1), 0
    )
    spread = np.abs(centred).max(-1)
    return 16 * eps * cond * np.abs(x).sum(-1) * np.abs(W).max() * (1 + spread)


def post_data(seed: int, shape: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x (B, d_in), W (d_out, d_in) and the post's key k (B, d_in, d_in), drawn in float32 as the
    post draws them after ``torch.manual_seed(seed)``, as float64 arrays.

    Only for the many seeds of post_code.py, whose draws stay inside a function: keeping a
    thousand seeds' inputs would clutter the reader's code. Same machine, same draws.
    """
    B, d_in, d_out = shape
    torch.manual_seed(seed)
    x = torch.randn(B, d_in)
    W = torch.randn(d_out, d_in)
    k = torch.randn(B, d_in, d_in)
    return x.double().numpy(), W.double().numpy(), k.double().numpy()


# What a number looks like once printed: (value, how far the printed digits may lie from it).
Printed = tuple[float, float]


def decimals(value: float, n: int, slack: float = 0.0) -> Printed:
    """``value`` printed with ``n`` decimals (``.nf``, ``round(value, n)``)."""
    return float(value), 0.5 * 10.0**-n + slack


def significant(value: float, n: int, slack: float = 0.0) -> Printed:
    """``value`` printed with ``n`` significant digits (``.{n-1}e``, ``.{n}g``)."""
    size = abs(float(value))
    unit = 10.0 ** (np.floor(np.log10(size)) - n + 1) if size > 0 else 0.0
    return float(value), 0.5 * unit + slack


def exact(value: float) -> Printed:
    """A number printed in full: a count, an exact small number, inf."""
    return float(value), 0.0


def assert_printed_in_order(printed: str, expected: Iterable[Printed]) -> None:
    """The numbers ``printed`` shows include the ``expected`` ones, in this order.

    No label is looked up: other printed numbers (a label's ``atol=1e-3``, a row index) are
    skipped, so the page's wording may change; only the order of the values matters.
    """
    shown = numbers(printed)
    remaining = iter(shown)
    for i, (value, tolerance) in enumerate(expected):
        found = any(s == value or abs(s - value) <= tolerance * (1 + 1e-9) for s in remaining)
        assert found, f"expected value #{i}, {value} ± {tolerance}, not printed in order in {shown}"


def printed_flags(printed: str) -> list[bool]:
    """Every ``True`` and ``False`` printed, in order."""
    return [word == "True" for word in re.findall(r"\b(?:True|False)\b", printed)]
