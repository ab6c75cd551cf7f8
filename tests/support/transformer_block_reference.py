"""A transformer block written out in float64 NumPy from its weights, and how far a computation in
float32 (or float64) may lie from it, step by step (the tests of snippets/transformer_block/).

The block is the pre-norm block of GPT-2's ``block()`` (x + attn(norm(x)), then x + mlp(norm(x)),
an MLP of 4C with a GELU between), or the post-norm block of Vaswani et al. (2017), section 3.1,
LayerNorm(x + Sublayer(x)). Nothing here imports attn_ref: the weights are read from a module's
``state_dict`` and every step is written out again.

Each step takes a value and an error bound (elementwise, absolute: how far the computed input may
lie from the exact one) and returns the exact result of the step on the exact input, computed in
float64, with a bound on how far a computation with unit roundoff ``u`` may lie from it: the
input's error carried through the step, plus the step's own rounding. Each elementary operation is
within u of its exact result, relatively (IEEE round to nearest; exp and erf within one unit in the
last place, 2u), and a sum of n terms within (n - 1) u of the sum of its terms' sizes, whatever its
order, so kernels that order or fuse the same steps differently (blocked matrix products, a running
mean, x r - mu r instead of (x - mu) r) are covered too. The bounds are worst cases: far above
what a run shows, which is why the tests check a snippet step by step, from the inputs it kept,
rather than carrying a bound through many steps.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from tests.support.reference import as64

LN_EPS = 1e-5  # nn.LayerNorm's default eps, added to the variance
GELU_SLOPE = 1.13  # |d/dx x Phi(x)| <= 1.129 for every x (its largest value, near x = 1.41)

Bounded = tuple[np.ndarray, np.ndarray]  # (exact value, how far a computed one may lie from it)


def state_of(module: torch.nn.Module) -> dict[str, np.ndarray]:
    """A module's parameters, by their state_dict names, as float64 arrays."""
    return {name: as64(value) for name, value in module.state_dict().items()}


def add(a: Bounded, b: Bounded, u: float) -> Bounded:
    """a + b, rounded once."""
    (x, dx), (y, dy) = a, b
    s = x + y
    return s, dx + dy + u * (np.abs(s) + dx + dy)


def linear(a: Bounded, weight: np.ndarray, bias: np.ndarray | None, u: float) -> Bounded:
    """x W^T + b for nn.Linear's weight (out, in): n products and n additions, each rounded."""
    x, dx = a
    n = weight.shape[1]
    bias = np.zeros(weight.shape[0]) if bias is None else bias
    magnitude = np.abs(weight.T)
    y = x @ weight.T + bias
    rounding = 1.01 * (n + 1) * u * ((np.abs(x) + dx) @ magnitude + np.abs(bias))
    return y, dx @ magnitude + rounding


def layer_norm(a: Bounded, weight: np.ndarray, bias: np.ndarray, u: float) -> Bounded:
    """(x - mean) / sqrt(var + LN_EPS) * gamma + beta over the last axis (the variance divides by C).

    Carried errors, to first order with the second-order terms kept: the mean moves by at most the
    mean of its input's errors; the variance by 2 mean(|d| dx) (a shift of every x by the same amount
    leaves it alone), and 1 / sqrt(var + LN_EPS) by half the variance's relative error (at most
    t / 2 + t^2 for a relative error t <= 1/2). Rounding: the mean of C numbers is within 2 C u
    max |x| (a sum in any order, or a running mean), the variance within 2 (C + 3) u mean(x^2)
    (which is at least the variance, and also covers the form mean(x^2) - mean^2), 1 / sqrt within
    3 u, the normalised value within 3 u r (|x| + |mean|) (as (x - mean) r, or as x r - mean r), and
    gamma, beta add a product and a sum.
    """
    x, dx = a
    C = x.shape[-1]
    size = np.abs(x) + dx
    mu = x.mean(axis=-1, keepdims=True)
    d = x - mu
    var = (d**2).mean(axis=-1, keepdims=True)
    r = 1.0 / np.sqrt(var + LN_EPS)
    z = d * r
    d_mu = dx.mean(axis=-1, keepdims=True) + 2 * C * u * size.max(axis=-1, keepdims=True)
    d_var = (2 * np.abs(d) * dx).mean(axis=-1, keepdims=True) + ((dx + d_mu) ** 2).mean(
        axis=-1, keepdims=True
    )
    d_var += 2 * (C + 3) * u * (size**2).mean(axis=-1, keepdims=True)
    t = d_var / (var + LN_EPS)
    assert (t <= 0.5).all(), "the variance is not known to within a factor of 2"
    relative_r = t / 2 + t**2 + 3 * u
    d_z = r * (dx + d_mu) * (1 + relative_r) + np.abs(z) * relative_r
    d_z += 3 * u * r * (size + np.abs(mu) + d_mu)
    y = z * weight + bias
    d_y = np.abs(weight) * d_z * (1 + 2 * u) + u * (np.abs(z * weight) + np.abs(y))
    return y, d_y


def gelu(a: Bounded, u: float) -> Bounded:
    """x Phi(x) = x (1 + erf(x / sqrt 2)) / 2, the exact GELU (not the tanh approximation).

    Its slope is at most GELU_SLOPE, so the input's error grows by at most that. Computing it rounds
    x / sqrt 2 (which moves erf by at most 2 / sqrt(pi) times that), erf itself (2 u of it, at most
    2 u), 1 + erf, and one product (halving is exact).
    """
    x, dx = a
    erf = np.vectorize(math.erf)(x / math.sqrt(2))
    y = 0.5 * x * (1 + erf)
    size = np.abs(x) + dx
    rounding = 0.5 * size * (0.8 * u * size + 4 * u) + 2 * u * (np.abs(y) + GELU_SLOPE * dx)
    return y, GELU_SLOPE * dx + rounding


def attention(q: Bounded, k: Bounded, v: Bounded, allowed: np.ndarray, u: float) -> dict:
    """softmax(q k^T / sqrt(d) masked) v for (..., L, d) queries and (..., S, d) keys and values.

    A score off by delta_j moves its row's weights by a factor within e^(+-2 max delta) (the softmax's
    sum moves too). Computing the softmax rounds the subtraction of the row's maximum (counted in
    delta), then exp (2 u), the sum and the division: S + 3 u per weight. A masked key's weight is
    exactly 0 however its score is off. Every row here has a key it may see.
    """
    (q, dq), (k, dk), (v, dv) = q, k, v
    d, S = q.shape[-1], k.shape[-2]
    qs, ks = np.abs(q) + dq, np.abs(k) + dk

    def t(m):
        return np.swapaxes(m, -1, -2)

    scores = q @ t(k) / math.sqrt(d)
    d_scores = (dq @ t(ks) + np.abs(q) @ t(dk) + 1.01 * (d + 2) * u * (qs @ t(ks))) / math.sqrt(d)
    allowed = np.broadcast_to(allowed, scores.shape)
    row_max = np.where(allowed, scores, -np.inf).max(axis=-1, keepdims=True)
    e = np.where(allowed, np.exp(scores - row_max), 0.0)
    weights = e / e.sum(axis=-1, keepdims=True)
    spread = np.where(allowed, np.abs(scores - row_max) + 2 * d_scores, 0.0)
    delta = np.where(allowed, d_scores + u * spread, 0.0).max(axis=-1, keepdims=True)
    d_weights = weights * (np.expm1(2 * delta) + 1.01 * (S + 3) * u * np.exp(2 * delta))
    vs = np.abs(v) + dv
    out = weights @ v
    d_out = d_weights @ vs + weights @ dv + 1.01 * S * u * ((weights + d_weights) @ vs)
    return {"out": (out, d_out), "weights": (weights, d_weights), "scores": (scores, d_scores)}


def split(a: Bounded, H: int) -> Bounded:
    """(..., T, C) -> (..., H, T, C / H): head h gets features h d_k to (h + 1) d_k - 1."""
    return tuple(np.moveaxis(t.reshape(*t.shape[:-1], H, t.shape[-1] // H), -2, -3) for t in a)


def merge(a: Bounded) -> Bounded:
    """(..., H, T, d_k) -> (..., T, H d_k), the heads side by side."""
    return tuple(np.moveaxis(t, -3, -2).reshape(*t.shape[:-3], t.shape[-2], -1) for t in a)


def multi_head(x: Bounded, state: dict, H: int, allowed: np.ndarray, u: float, prefix: str = "") -> dict:
    """Multi-head self-attention from a state with ``q_proj``, ``k_proj``, ``v_proj`` and
    ``out_proj`` weights and biases (names after ``prefix``): project, split into heads, attend,
    put the heads side by side, multiply by W_O."""

    def proj(name, a):
        return linear(a, state[f"{prefix}{name}.weight"], state.get(f"{prefix}{name}.bias"), u)

    q, k, v = (split(proj(name, x), H) for name in ("q_proj", "k_proj", "v_proj"))
    heads = attention(q, k, v, allowed, u)
    concat = merge(heads["out"])
    return {
        "heads": heads["out"],
        "weights": heads["weights"],
        "concat": concat,
        "out": proj("out_proj", concat),
    }


def block_state_from_encoder_layer(layer: torch.nn.TransformerEncoderLayer) -> dict[str, np.ndarray]:
    """A TransformerEncoderLayer's weights under DecoderBlock's names: its stacked (3C, C)
    in_proj_weight cut into W_Q^T, W_K^T, W_V^T, linear1 and linear2 as mlp.0 and mlp.2."""
    theirs = state_of(layer)
    C = theirs["norm1.weight"].shape[0]
    state = {f"{norm}.{p}": theirs[f"{norm}.{p}"] for norm in ("norm1", "norm2") for p in ("weight", "bias")}
    for i, name in enumerate(("q_proj", "k_proj", "v_proj")):
        state[f"attn.{name}.weight"] = theirs["self_attn.in_proj_weight"][i * C : (i + 1) * C]
        state[f"attn.{name}.bias"] = theirs["self_attn.in_proj_bias"][i * C : (i + 1) * C]
    for p in ("weight", "bias"):
        state[f"attn.out_proj.{p}"] = theirs[f"self_attn.out_proj.{p}"]
        state[f"mlp.0.{p}"], state[f"mlp.2.{p}"] = theirs[f"linear1.{p}"], theirs[f"linear2.{p}"]
    return state


def mlp(a: Bounded, state: dict, u: float) -> dict:
    """Linear C -> 4C, GELU, Linear 4C -> C, from DecoderBlock's ``mlp.0`` and ``mlp.2``."""
    hidden = gelu(linear(a, state["mlp.0.weight"], state["mlp.0.bias"], u), u)
    return {"hidden": hidden, "out": linear(hidden, state["mlp.2.weight"], state["mlp.2.bias"], u)}


def pre_norm_block(x: Bounded, state: dict, H: int, allowed: np.ndarray, u: float) -> dict:
    """x + attn(norm1(x)), then + mlp(norm2(.)), with every intermediate: the attention's write
    ``a``, the stream between ``mid``, the MLP's write ``m`` and the block's ``out``."""
    h = layer_norm(x, state["norm1.weight"], state["norm1.bias"], u)
    attn = multi_head(h, state, H, allowed, u, prefix="attn.")
    mid = add(x, attn["out"], u)
    m = mlp(layer_norm(mid, state["norm2.weight"], state["norm2.bias"], u), state, u)
    out = add(mid, m["out"], u)
    return {"attn": attn, "a": attn["out"], "mid": mid, "m": m["out"], "out": out}


def post_norm_block(x: Bounded, state: dict, H: int, allowed: np.ndarray, u: float) -> Bounded:
    """norm1(x + attn(x)), then norm2(. + mlp(.)): the original Transformer's order."""
    attn = multi_head(x, state, H, allowed, u, prefix="attn.")
    mid = layer_norm(add(x, attn["out"], u), state["norm1.weight"], state["norm1.bias"], u)
    m = mlp(mid, state, u)
    return layer_norm(add(mid, m["out"], u), state["norm2.weight"], state["norm2.bias"], u)


def held(array) -> Bounded:
    """An input held exactly (a float32 tensor is exact in float64)."""
    array = as64(array)
    return array, np.zeros_like(array)


def allclose_guaranteed(difference_bound, reference, reference_bound, atol, rtol=1e-5) -> bool:
    """Whether torch.allclose(a, b) is True wherever the rounding falls, for a and b at most
    ``difference_bound`` apart and b within ``reference_bound`` of ``reference``."""
    return bool((difference_bound <= atol + rtol * (np.abs(reference) - reference_bound)).all())


def allclose_refuted(a: Bounded, b: Bounded, atol, rtol=1e-5) -> bool:
    """Whether torch.allclose(a, b) is False wherever the rounding falls: some entry of the exact
    values is further apart than both bounds and allclose's tolerance together."""
    (a, da), (b, db) = a, b
    return bool((np.abs(a - b) - da - db > atol + rtol * (np.abs(b) + db)).any())


def norm_rounding(v: np.ndarray, u: float) -> np.ndarray:
    """How far a vector length computed in precision u (squares, a sum, a square root) may lie from
    the exact length of the same numbers, for each row of ``v``."""
    n = v.shape[-1]
    return 1.01 * (n + 2) * u * np.linalg.norm(v, axis=-1)
