"""Worst-case float32 rounding carried step by step: `Rounded`, an exact value and how far any float32
computation of it may land, through each operation of attention (the tests of snippets/bugs/).

A snippet computes in float32; its test computes the same quantity exactly (float64 NumPy on the
snippet's own float32 inputs, which float64 holds exactly) and bounds how far any float32
computation of it may land, whatever the CPU's vector width, the kernel PyTorch picks or the
number of threads. The bounds are the classic worst-case ones (Higham, *Accuracy and Stability
of Numerical Algorithms*, 2002, chapter 3), with u = 2^-24 the unit roundoff of float32:

- a sum of n products is off by at most gamma_n = n u / (1 - n u) times the sum of their
  magnitudes, in any order of summation, with or without fused multiply-adds;
- a product or a quotient by a scalar, or a sum of two numbers, rounds once (relative u); a
  Python scalar becomes a float32 first (one more u);
- a softmax: if every input of a row is off by at most D, each weight is off by a factor within
  exp(+-2D) (softmax(s + e) / softmax(s) = exp(e_i) / sum_j w_j exp(e_j)). Computing weight i
  rounds x_i - max (relative u, so exp of it moves by u |x_i - max|), exp (at most 4 ulp, 8u,
  for the vectorised approximations), the row's sum (gamma_n, and each term's own error: their
  average weighted by w_j) and the division (2u, also if done as a product by the reciprocal);
  ``softmax`` doubles that to leave room for the rescaling an online softmax (PyTorch's flash
  kernel for the CPU) adds. A blocked key gets exp(-inf) = 0 exactly.

These bounds hold on every IEEE machine, and are loose: the errors seen are 10 to 100 times
smaller. So a test checks a float32 result against its bound, and reads a page's verdict such as
"passes" (a largest error below the page's tolerance) as the page's promise, checked as such.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tests.support.reference import U32


def gamma(n: int) -> float:
    """The bound on the relative error of a sum of n terms, n u / (1 - n u)."""
    return n * U32 / (1 - n * U32)


def exact(a) -> Rounded:
    """A float32 input: exactly the float64 number it holds."""
    a = np.asarray(a.detach().double() if hasattr(a, "detach") else a, dtype=np.float64)
    return Rounded(a, np.zeros_like(a))


@dataclass(frozen=True)
class Rounded:
    """The exact value of a quantity, and a bound on how far a float32 computation of it may be.

    ``value`` and ``error`` are float64 arrays of one shape; a float32 result ``r`` computed by
    any order of the same operations satisfies ``|r - value| <= error``, entry by entry.
    """

    value: np.ndarray
    error: np.ndarray

    def map(self, rearrange: Callable[[np.ndarray], np.ndarray]) -> Rounded:
        """The same numbers moved around (a reshape, transpose, slice): no rounding."""
        return Rounded(rearrange(self.value), rearrange(self.error))

    @property
    def mT(self) -> Rounded:
        return self.map(lambda a: np.swapaxes(a, -1, -2))

    def holds(self, result) -> bool:
        """Whether a float32 ``result`` (tensor or array) lies within the bound."""
        result = np.asarray(result.detach().double() if hasattr(result, "detach") else result)
        return result.shape == self.value.shape and bool((np.abs(result - self.value) <= self.error).all())


def matmul(a: Rounded, b: Rounded, roundings: int = 0) -> Rounded:
    """``a @ b``; ``roundings`` more per product (a scale applied to a factor first, say)."""
    av, bv = np.abs(a.value), np.abs(b.value)
    propagated = a.error @ bv + av @ b.error + a.error @ b.error
    n = a.value.shape[-1]
    return Rounded(a.value @ b.value, propagated + gamma(n + roundings) * ((av + a.error) @ (bv + b.error)))


def scaled(a: Rounded, factor: float) -> Rounded:
    """``a * factor`` or ``a / (1 / factor)`` with a Python float: the factor rounds, the product rounds."""
    return Rounded(a.value * factor, abs(factor) * (a.error + 3 * U32 * (np.abs(a.value) + a.error)))


def plus(a: Rounded, b: Rounded) -> Rounded:
    """``a + b`` (broadcast), one rounding."""
    total = a.value + b.value
    error = a.error + b.error
    return Rounded(total, error + U32 * (np.abs(total) + error))


def total(a: Rounded, axis: int = -1) -> Rounded:
    """The sum along ``axis``, in any order."""
    n = a.value.shape[axis]
    error = a.error.sum(axis) + gamma(max(n - 1, 1)) * (np.abs(a.value) + a.error).sum(axis)
    return Rounded(a.value.sum(axis), error)


def softmax(scores: Rounded, allowed: np.ndarray | None = None) -> Rounded:
    """softmax along the last axis, blocked entries (``allowed`` False) excluded; a row that may
    see no key gets zero weights (as PyTorch's SDPA gives them since 2.5; see tests/support/reference.py)."""
    s = scores.value
    allowed = np.ones(s.shape, bool) if allowed is None else np.broadcast_to(allowed, s.shape)
    masked = np.where(allowed, s, -np.inf)
    top = masked.max(-1, keepdims=True)
    sees = np.isfinite(top)
    below = np.where(allowed, np.where(sees, top, 0.0) - masked, 0.0)  # x - max, negated
    e = np.where(allowed, np.exp(-below), 0.0)
    z = e.sum(-1, keepdims=True)
    weights = np.divide(e, z, out=np.zeros_like(e), where=z > 0)
    D = np.where(allowed, scores.error, 0.0).max(-1, keepdims=True)
    n = allowed.sum(-1, keepdims=True)
    # Weight i: its own x - max and exp, and the row's sum of such terms, weighted.
    spread = below + (weights * below).sum(-1, keepdims=True)
    rounding = 2 * (spread + 16 + n + 2) * U32
    relative = np.exp(2 * D) * (1 + rounding) - 1
    return Rounded(weights, weights * relative)


def attention(
    q: Rounded, k: Rounded, v: Rounded, allowed: np.ndarray | None = None, scale: float | None = None
) -> tuple[Rounded, Rounded]:
    """softmax(q k^T * scale) v and its weights, in whichever order a kernel computes it: the scores
    as a product then scaled, or with sqrt(scale) applied to q and to k first (PyTorch's math path)."""
    scale = q.value.shape[-1] ** -0.5 if scale is None else scale
    weights = softmax(scaled(matmul(q, k.mT, roundings=4), scale), allowed)
    return matmul(weights, v), weights


def linear(x: Rounded, W: Rounded, b: Rounded | None = None) -> Rounded:
    """``x @ W^T + b``, as nn.Linear computes it (W stored transposed)."""
    product = matmul(x, W.mT)
    return product if b is None else plus(product, b)


def multihead_attention(x: np.ndarray, module, allowed: np.ndarray | None = None) -> Rounded:
    """A ``torch.nn.MultiheadAttention``'s self-attention of ``x`` (B, T, C), from its weights:
    the in-projection, ``module.num_heads`` heads of C / H features each, attention (``allowed``,
    True where a query may see a key, broadcastable to (B, H, T, T)), the out-projection."""
    B, T, C = x.shape
    H = module.num_heads
    state = {name: exact(p) for name, p in module.state_dict().items()}
    X = exact(x)

    def projection(i):  # rows i C to (i + 1) C of the stacked W_Q^T, W_K^T, W_V^T, split into heads
        W = state["in_proj_weight"].map(lambda W: W[i * C : (i + 1) * C])
        b = state["in_proj_bias"].map(lambda b: b[i * C : (i + 1) * C])
        return linear(X, W, b).map(lambda a: a.reshape(B, T, H, C // H).transpose(0, 2, 1, 3))

    heads, _ = attention(projection(0), projection(1), projection(2), allowed=allowed)
    concat = heads.map(lambda a: a.transpose(0, 2, 1, 3).reshape(B, T, C))
    return linear(concat, state["out_proj.weight"], state["out_proj.bias"])


def largest_difference(a: Rounded, b: Rounded) -> tuple[float, float]:
    """max |a - b| of the exact values, and how far a float32 max |a - b| may lie from it."""
    gap = float(np.abs(a.value - b.value).max())
    slack = float((a.error + b.error).max())
    return gap, slack + U32 * (gap + slack)


def assert_largest_difference(worst: float, *pairs: tuple[Rounded, Rounded]) -> tuple[float, float]:
    """A float32 largest |a - b| over the ``pairs`` (a, b) is the exact one, up to rounding.

    Returns the range it may take on any machine, (lowest, highest).
    """
    ranges = [(gap - slack, gap + slack) for gap, slack in (largest_difference(a, b) for a, b in pairs)]
    lowest, highest = max(low for low, _ in ranges), max(high for _, high in ranges)
    assert lowest <= worst <= highest, (worst, lowest, highest)
    return lowest, highest
