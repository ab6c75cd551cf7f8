r"""The backward pass of attention: its gradients written by hand, and FlashAttention's tiled backward.

For one head, scaled dot-product attention computes $S = \text{scale} \cdot Q K^\top$ (plus a
mask), $P = \operatorname{softmax}(S)$ row by row, and $O = P V$. Given $dO$, the gradient of a
loss with respect to $O$, the chain rule gives the gradients of the inputs:

$$
dV = P^\top dO, \quad dP = dO \, V^\top, \quad dS = P \circ (dP - D), \quad
dQ = \text{scale} \cdot dS \, K, \quad dK = \text{scale} \cdot dS^\top Q,
$$

where $D = \operatorname{rowsum}(P \circ dP)$ holds one number per query, and equals
$\operatorname{rowsum}(dO \circ O)$.

`attention_backward` computes them from the full ``(L, S)`` weights $P$, which the forward pass
must then keep: this is the standard backward pass, and `standard_attention` wraps it, with
`attn_ref.functional.scaled_dot_product_attention` as its forward pass, in a
`torch.autograd.Function`. `flash_attention_backward` computes the same gradients from what
FlashAttention-2 keeps instead (Dao, 2023, Algorithm 2): the output $O$ and one log-sum-exp $L$
per query. It recomputes every tile of $P$ from $Q$, $K$ and $L$, and adds each tile's share to
$dQ$, $dK$ and $dV$. `flash_attention` pairs it with `attn_ref.tiled.tiled_attention` as the
forward pass, so that neither pass holds an ``(L, S)`` matrix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from attn_ref import _validate
from attn_ref._numerics import compute_dtype
from attn_ref.functional import scaled_dot_product_attention
from attn_ref.tiled import block_sizes, dropout_mask, tile_scores, tiled_attention

__all__ = [
    "BackwardTileStep",
    "FlashBackwardState",
    "attention_backward",
    "flash_attention",
    "flash_attention_backward",
    "softmax_backward",
    "softmax_jacobian",
    "standard_attention",
]


def softmax_jacobian(weights: Tensor) -> Tensor:
    r"""The Jacobian of the softmax at one row of weights $p$: $\operatorname{diag}(p) - p p^\top$.

    Entry $(j, k)$ is $\partial p_j / \partial s_k = p_j (\delta_{jk} - p_k)$: raising one score
    raises its own weight and lowers every other weight in proportion to it. Each row and each
    column sums to zero, since the weights always sum to one.

    Args:
        weights: Softmax weights, ``(..., S)``, the last dimension summing to one.

    Returns:
        The Jacobians, ``(..., S, S)``.

    Examples:
        >>> softmax_jacobian(torch.tensor([0.5, 0.5]))
        tensor([[ 0.2500, -0.2500],
                [-0.2500,  0.2500]])
    """
    _validate.tensor("weights", weights, min_ndim=1)
    return torch.diag_embed(weights) - weights[..., :, None] * weights[..., None, :]  # (..., S, S)


def softmax_backward(weights: Tensor, grad_weights: Tensor) -> Tensor:
    r"""The gradient of the scores from that of the weights, row by row: $P \circ (dP - D)$.

    Multiplying $dP$ by the (symmetric) Jacobian of `softmax_jacobian` gives, row by row,
    $ds = (\operatorname{diag}(p) - p p^\top)\, dp = p \circ (dp - p^\top dp)$, so with
    $D = \operatorname{rowsum}(P \circ dP)$ no ``(S, S)`` Jacobian is ever formed. A row of
    weights that are all zero (a query that may see no key) gets a gradient of zero.

    Args:
        weights: $P$, ``(..., L, S)``.
        grad_weights: $dP$, the same shape.

    Returns:
        $dS$, ``(..., L, S)``.

    Examples:
        >>> p = torch.tensor([[0.5, 0.5], [0.0, 0.0]])
        >>> softmax_backward(p, torch.tensor([[1.0, 0.0], [3.0, 4.0]]))
        tensor([[ 0.2500, -0.2500],
                [ 0.0000,  0.0000]])
    """
    _validate.tensor("weights", weights, min_ndim=1)
    _validate.tensor("grad_weights", grad_weights)
    _validate.shape("grad_weights", grad_weights, tuple(weights.shape), "(..., L, S), like weights")
    D = (weights * grad_weights).sum(dim=-1, keepdim=True)  # (..., L, 1): one number per query
    return weights * (grad_weights - D)


def attention_backward(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    weights: Tensor,
    grad_output: Tensor,
    *,
    scale: float | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    r"""$dQ$, $dK$ and $dV$ of scaled dot-product attention, from its full ``(L, S)`` weights.

    This is the standard backward pass (Dao et al., 2022, Algorithm 3): it needs the weights
    $P$ of the forward pass, so the forward pass must keep them.

    $$
    dV = P^\top dO, \quad dP = dO \, V^\top, \quad
    dS = P \circ \bigl(dP - \operatorname{rowsum}(P \circ dP)\bigr), \quad
    dQ = \text{scale} \cdot dS \, K, \quad dK = \text{scale} \cdot dS^\top Q
    $$

    The mask needs no argument: it is in $P$, whose masked entries are zero, and so are their
    entries of $dS$. A query that may see no key has weights of zero and gets $dQ = 0$, as from
    PyTorch's ``scaled_dot_product_attention``.

    Args:
        query: ``(..., L, d_k)``.
        key: ``(..., S, d_k)``.
        value: ``(..., S, d_v)``.
        weights: $P$, ``(..., L, S)``, mask and causal mask included.
        grad_output: $dO$, ``(..., L, d_v)``.
        scale: The scores' multiplier of the forward pass; defaults to $1/\sqrt{d_k}$.

    Returns:
        ``(grad_query, grad_key, grad_value)``, shaped and typed like the inputs.

    Raises:
        TypeError: An argument is not a floating tensor, or dtypes differ.
        ValueError: A shape does not fit; the message names the argument, what it got and
            what it needs.

    Examples:
        One query and two keys with equal scores: the query's weights are a half each.

        >>> q = torch.tensor([[0.0, 0.0]])
        >>> k = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
        >>> v = torch.tensor([[1.0], [3.0]])
        >>> p = torch.tensor([[0.5, 0.5]])
        >>> dO = torch.tensor([[1.0]])
        >>> dq, dk, dv = attention_backward(q, k, v, p, dO, scale=1.0)
        >>> dv.T  # each value gets its weight times dO
        tensor([[0.5000, 0.5000]])
        >>> dq  # raising the score of key 1 (value 3) raises the output
        tensor([[-0.5000,  0.5000]])
    """
    batch, L, S, d_k = _validate.attention_inputs(query, key, value, None, False)
    d_v = value.shape[-1]
    _validate.tensor("weights", weights)
    _validate.tensor("grad_output", grad_output)
    _validate.shape("weights", weights, (*batch, L, S), "(..., L, S): the forward pass's weights")
    _validate.shape("grad_output", grad_output, (*batch, L, d_v), "(..., L, d_v), like the output")
    dtype = compute_dtype(query.dtype)
    q, k, v, p, dO = (t.to(dtype) for t in (query, key, value, weights, grad_output))
    if scale is None:
        scale = 1.0 / math.sqrt(d_k)
    dV = p.transpose(-2, -1) @ dO  # (..., S, L) @ (..., L, d_v) -> (..., S, d_v)
    dP = dO @ v.transpose(-2, -1)  # (..., L, d_v) @ (..., d_v, S) -> (..., L, S)
    dS = softmax_backward(p, dP)  # (..., L, S)
    dQ = scale * (dS @ k)  # (..., L, S) @ (..., S, d_k) -> (..., L, d_k)
    dK = scale * (dS.transpose(-2, -1) @ q)  # (..., S, L) @ (..., L, d_k) -> (..., S, d_k)
    return dQ.to(query.dtype), dK.to(key.dtype), dV.to(value.dtype)


class _StandardAttention(torch.autograd.Function):
    """The forward pass of `attn_ref.functional`, keeping $P$; the backward of `attention_backward`."""

    @staticmethod
    def forward(ctx, query, key, value, attn_mask, is_causal, scale):
        dtype = compute_dtype(query.dtype)
        output, weights = scaled_dot_product_attention(
            query.to(dtype), key.to(dtype), value.to(dtype), attn_mask, is_causal=is_causal, scale=scale
        )
        ctx.save_for_backward(query, key, value, weights)  # weights: (..., L, S), the matrix kept
        ctx.scale = scale
        return output.to(query.dtype)

    @staticmethod
    def backward(ctx, grad_output):
        query, key, value, weights = ctx.saved_tensors
        grads = attention_backward(query, key, value, weights, grad_output, scale=ctx.scale)
        return (*grads, None, None, None)


def standard_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    *,
    is_causal: bool = False,
    scale: float | None = None,
) -> Tensor:
    r"""Scaled dot-product attention whose backward pass is `attention_backward`, written by hand.

    The forward pass is `attn_ref.functional.scaled_dot_product_attention`, which keeps the
    ``(L, S)`` weights for the backward pass; autograd does not differentiate it step by step.
    A floating ``attn_mask`` gets no gradient.

    Args:
        query: ``(..., L, d_k)``.
        key: ``(..., S, d_k)``.
        value: ``(..., S, d_v)``.
        attn_mask: Boolean (``True`` = may attend) or floating, broadcastable to ``(..., L, S)``.
        is_causal: Apply a lower-triangular (top-left aligned) mask.
        scale: Multiplier of the scores; defaults to $1/\sqrt{d_k}$.

    Returns:
        The output, ``(..., L, d_v)``.

    Examples:
        The gradient of the three tokens' output, as PyTorch's own autograd finds it:

        >>> from attn_ref.examples import THREE_TOKENS
        >>> X = torch.tensor(THREE_TOKENS, requires_grad=True)
        >>> (grad_ours,) = torch.autograd.grad(standard_attention(X, X, X).sum(), X)
        >>> Y = X.detach().requires_grad_()
        >>> out_autograd = scaled_dot_product_attention(Y, Y, Y)[0]
        >>> (grad_autograd,) = torch.autograd.grad(out_autograd.sum(), Y)
        >>> torch.allclose(grad_ours, grad_autograd)
        True
    """
    _no_grad_for_the_mask(attn_mask)
    return _StandardAttention.apply(query, key, value, attn_mask, is_causal, scale)


@dataclass(frozen=True)
class BackwardTileStep:
    """One tile of `flash_attention_backward`, as recomputed there.

    Attributes:
        rows: Query positions of the tile.
        cols: Key positions of the tile.
        weights: $P_{ij} = e^{S_{ij} - L_i}$, ``(..., len(rows), len(cols))``, before dropout.
        keep: With dropout, the tile's mask, regenerated from the seed; else ``None``.
        grad_scores: $dS_{ij}$, the same shape as ``weights``.
    """

    rows: range
    cols: range
    weights: Tensor
    keep: Tensor | None
    grad_scores: Tensor


@dataclass(frozen=True)
class FlashBackwardState:
    """What `flash_attention_backward` did.

    Attributes:
        tiles_computed: Tiles recomputed.
        tiles_skipped: Tiles skipped because every key in them lies after every query
            (``is_causal=True`` only): the same tiles the forward pass skips.
        multiply_adds: Multiply-adds of the five matrix products of every computed tile:
            $S_{ij} = Q_i K_j^\\top$ again, then $dV_j$, $dP_{ij}$, $dQ_i$ and $dK_j$.
        recompute_multiply_adds: The part of ``multiply_adds`` that recomputes $S_{ij}$: work
            the forward pass did already.
        exponentials: Weights recomputed, one exponential each.
        block_size: ``(block_q, block_k)``.
        trace: One `BackwardTileStep` per computed tile, in the order computed, when asked for.
    """

    tiles_computed: int
    tiles_skipped: int
    multiply_adds: int
    recompute_multiply_adds: int
    exponentials: int
    block_size: tuple[int, int]
    trace: list[BackwardTileStep] | None = None


@torch.no_grad()
def flash_attention_backward(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    output: Tensor,
    logsumexp: Tensor,
    grad_output: Tensor,
    attn_mask: Tensor | None = None,
    *,
    is_causal: bool = False,
    scale: float | None = None,
    block_size: int | tuple[int, int] = 64,
    dropout_p: float = 0.0,
    dropout_seed: int | None = None,
    trace: bool = False,
) -> tuple[Tensor, Tensor, Tensor, FlashBackwardState]:
    r"""$dQ$, $dK$ and $dV$ from the output and one log-sum-exp per query, tile by tile.

    This is FlashAttention-2's backward pass (Dao, 2023, Algorithm 2), with the scale, the
    masks and dropout of FlashAttention's (Dao et al., 2022, Algorithm 4). First
    $D = \operatorname{rowsum}(dO \circ O)$, one number per query. Then the keys and values go
    in blocks $K_j, V_j$ in the outer loop, the queries in blocks $Q_i$ in the inner one, and
    each tile recomputes its weights from the log-sum-exp $L_i$ of the forward pass:

    $$
    \begin{aligned}
    P_{ij} &= e^{S_{ij} - L_i}, \quad S_{ij} = \text{scale} \cdot Q_i K_j^\top \text{ (mask added)} \\
    dV_j &\mathrel{+}= P_{ij}^\top dO_i, \quad dP_{ij} = dO_i V_j^\top, \quad
    dS_{ij} = P_{ij} \circ (dP_{ij} - D_i) \\
    dQ_i &\mathrel{+}= \text{scale} \cdot dS_{ij} K_j, \quad
    dK_j \mathrel{+}= \text{scale} \cdot dS_{ij}^\top Q_i
    \end{aligned}
    $$

    No tensor larger than one tile is made. With ``is_causal=True`` the tiles above the
    diagonal are skipped, as in the forward pass. A query that may see no key has
    $L = -\infty$; it is read as $+\infty$ (the value FlashAttention's CUDA kernels store, except
    for the partial results of their split-KV path, which keep $-\infty$), so that
    its weights are $e^{-\infty} = 0$ rather than $e^{-\infty + \infty}$, which is ``nan``, and
    its gradient is zero, as from PyTorch's ``scaled_dot_product_attention``. With dropout, each
    tile's mask is regenerated from the seed (`attn_ref.tiled.dropout_mask`), and
    $dV_j \mathrel{+}= (P_{ij} \circ Z_{ij})^\top dO_i / (1 - p)$,
    $dP_{ij} = (dO_i V_j^\top) \circ Z_{ij} / (1 - p)$. Half-precision inputs are computed in
    float32 and the gradients cast back. Nothing is recorded for autograd (no double backward).

    Args:
        query: ``(..., L, d_k)``.
        key: ``(..., S, d_k)``, same leading dimensions as ``query``.
        value: ``(..., S, d_v)``, same leading dimensions as ``query``.
        output: $O$ of the forward pass, ``(..., L, d_v)``.
        logsumexp: $L$ of the forward pass, ``(..., L)``: ``state.logsumexp`` of
            `attn_ref.tiled.tiled_attention`, ``-inf`` for a query that sees no key.
        grad_output: $dO$, ``(..., L, d_v)``.
        attn_mask: The forward pass's: boolean or floating, broadcastable to ``(..., L, S)``.
        is_causal: The forward pass's.
        scale: The forward pass's; defaults to $1/\sqrt{d_k}$.
        block_size: The tile's shape, one int or ``(block_q, block_k)``; need not be the
            forward pass's.
        dropout_p: The forward pass's dropout probability.
        dropout_seed: The forward pass's seed (``state.dropout_seed``); needed with dropout.
        trace: Also return one `BackwardTileStep` per computed tile.

    Returns:
        ``(grad_query, grad_key, grad_value, state)``: the gradients, shaped and typed like the
        inputs, and a `FlashBackwardState` with the tiles computed and skipped, the
        multiply-adds and exponentials, and the trace.

    Raises:
        TypeError: An argument is not a floating tensor, or dtypes differ.
        ValueError: A shape, block size or dropout argument does not fit; the message names the
            argument, what it got and what it needs.

    Examples:
        The gradients equal those of the standard backward pass, which keeps the weights:

        >>> from attn_ref.tiled import tiled_attention
        >>> g = torch.Generator().manual_seed(0)
        >>> q, k, v, dO = (
        ...     torch.randn(5, 3, generator=g, dtype=torch.float64) for _ in range(4)
        ... )
        >>> O, state = tiled_attention(q, k, v, block_size=2)
        >>> dq, dk, dv, counts = flash_attention_backward(
        ...     q, k, v, O, state.logsumexp, dO, block_size=2
        ... )
        >>> weights = scaled_dot_product_attention(q, k, v)[1]
        >>> expected = attention_backward(q, k, v, weights, dO)
        >>> all(torch.allclose(a, b) for a, b in zip((dq, dk, dv), expected))
        True

        Five products per tile against the forward pass's two:

        >>> counts.multiply_adds / state.multiply_adds
        2.5
    """
    batch, L, S, d_k, d_v, dropout_p, dtype, scale, attn_mask = _validate.tiled_pass(
        query, key, value, attn_mask, is_causal, scale, dropout_p
    )
    block_q, block_k = block_sizes(block_size)
    for name, tensor in (("output", output), ("logsumexp", logsumexp), ("grad_output", grad_output)):
        _validate.tensor(name, tensor)
    _validate.shape("output", output, (*batch, L, d_v), "(..., L, d_v): the forward pass's output")
    _validate.shape("logsumexp", logsumexp, (*batch, L), "(..., L): one log-sum-exp per query")
    _validate.shape("grad_output", grad_output, (*batch, L, d_v), "(..., L, d_v), like output")
    if dropout_p > 0.0:
        if dropout_seed is None:
            raise ValueError("dropout_p > 0 needs dropout_seed: the forward pass's (state.dropout_seed)")
        _validate.count("dropout_seed", dropout_seed, minimum=0, maximum=2**32 - 1)

    dO_all = grad_output.to(dtype)  # (..., L, d_v)
    D = (dO_all * output.to(dtype)).sum(dim=-1)  # (..., L): rowsum(dO ∘ O), Algorithm 2 line 4
    # A query that may see no key has L = -inf: read it as +inf, so that its weights are 0, not nan.
    lse = logsumexp.to(dtype).masked_fill(logsumexp == -math.inf, math.inf)  # (..., L)
    grad_query = torch.zeros((*batch, L, d_k), dtype=dtype, device=query.device)  # (..., L, d_k)
    grad_key = torch.zeros((*batch, S, d_k), dtype=dtype, device=query.device)  # (..., S, d_k)
    grad_value = torch.zeros((*batch, S, d_v), dtype=dtype, device=query.device)  # (..., S, d_v)
    computed = skipped = multiply_adds = recompute = exponentials = 0
    per_entry = math.prod(batch)
    steps = [] if trace else None
    for k_start in range(0, S, block_k):  # keys and values outside, as in Algorithm 2
        cols = range(k_start, min(k_start + block_k, S))
        k = key[..., cols.start : cols.stop, :].to(dtype)  # (..., bk, d_k)
        v = value[..., cols.start : cols.stop, :].to(dtype)  # (..., bk, d_v)
        dk = torch.zeros_like(k)  # (..., bk, d_k): on chip in Algorithm 2
        dv = torch.zeros_like(v)  # (..., bk, d_v)
        for q_start in range(0, L, block_q):
            rows = range(q_start, min(q_start + block_q, L))
            if is_causal and cols.start > rows[-1]:  # every key here comes after every query here
                skipped += 1
                continue
            computed += 1
            area = per_entry * len(rows) * len(cols)
            recompute += area * d_k
            multiply_adds += area * (3 * d_k + 2 * d_v)  # S again; dV, dP; dQ, dK
            exponentials += area
            q = query[..., rows.start : rows.stop, :].to(dtype)  # (..., bq, d_k)
            dO = dO_all[..., rows.start : rows.stop, :]  # (..., bq, d_v)
            scores = tile_scores(q, k, scale, attn_mask, is_causal, rows, cols)  # (..., bq, bk)
            p = scores.sub_(lse[..., rows.start : rows.stop, None]).exp_()  # (..., bq, bk): P_ij, in place
            dP = dO @ v.transpose(-2, -1)  # (..., bq, d_v) @ (..., d_v, bk) -> (..., bq, bk)
            keep = None
            if dropout_p > 0.0:  # the forward pass's mask, computed again from the seed
                keep = dropout_mask(dropout_seed, batch, rows, cols, dropout_p, device=query.device)
                dropped = p.masked_fill(~keep, 0.0) / (1.0 - dropout_p)  # (..., bq, bk)
                dP = dP.masked_fill(~keep, 0.0) / (1.0 - dropout_p)
            else:
                dropped = p
            dv += dropped.transpose(-2, -1) @ dO  # (..., bk, bq) @ (..., bq, d_v) -> (..., bk, d_v)
            dS = dP.sub_(D[..., rows.start : rows.stop, None]).mul_(p)  # (..., bq, bk): in dP's place
            grad_query[..., rows.start : rows.stop, :] += (dS @ k).mul_(scale)  # (..., bq, d_k)
            dk += (dS.transpose(-2, -1) @ q).mul_(scale)  # (..., bk, bq) @ (..., bq, d_k) -> (..., bk, d_k)
            if steps is not None:
                steps.append(BackwardTileStep(rows, cols, p, keep, dS))
        grad_key[..., cols.start : cols.stop, :] = dk
        grad_value[..., cols.start : cols.stop, :] = dv
    state = FlashBackwardState(
        computed, skipped, multiply_adds, recompute, exponentials, (block_q, block_k), steps
    )
    return grad_query.to(query.dtype), grad_key.to(key.dtype), grad_value.to(value.dtype), state


class _FlashAttention(torch.autograd.Function):
    """`tiled_attention` forward, keeping $O$ and $L$; `flash_attention_backward` backward."""

    @staticmethod
    def forward(ctx, query, key, value, attn_mask, is_causal, scale, block_size, dropout_p, dropout_seed):
        output, state = tiled_attention(
            query,
            key,
            value,
            attn_mask,
            is_causal=is_causal,
            scale=scale,
            block_size=block_size,
            dropout_p=dropout_p,
            dropout_seed=dropout_seed,
        )
        # What is kept: the inputs (alive anyway), the output and one number per query.
        ctx.save_for_backward(query, key, value, output, state.logsumexp, attn_mask)
        ctx.options = {
            "is_causal": is_causal,
            "scale": scale,
            "block_size": block_size,
            "dropout_p": dropout_p,
            "dropout_seed": state.dropout_seed,
        }
        return output

    @staticmethod
    def backward(ctx, grad_output):
        query, key, value, output, logsumexp, attn_mask = ctx.saved_tensors
        dq, dk, dv, _ = flash_attention_backward(
            query, key, value, output, logsumexp, grad_output, attn_mask, **ctx.options
        )
        return dq, dk, dv, None, None, None, None, None, None


def flash_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    *,
    is_causal: bool = False,
    scale: float | None = None,
    block_size: int | tuple[int, int] = 64,
    dropout_p: float = 0.0,
    dropout_seed: int | None = None,
) -> Tensor:
    r"""Attention whose forward and backward passes both go tile by tile, as in FlashAttention-2.

    The forward pass is `attn_ref.tiled.tiled_attention`; it keeps, for the backward pass,
    only the output and the log-sum-exp of each query (beside the inputs, which the caller
    holds anyway). The backward pass is `flash_attention_backward`. So memory grows like
    $L + S$, not $L \cdot S$, in both passes. Arguments follow
    `torch.nn.functional.scaled_dot_product_attention`; a floating ``attn_mask`` gets no
    gradient, and the dropout mask comes from ``dropout_seed`` (`attn_ref.tiled.dropout_mask`).

    Args:
        query: ``(..., L, d_k)``.
        key: ``(..., S, d_k)``, same leading dimensions as ``query``.
        value: ``(..., S, d_v)``, same leading dimensions as ``query``.
        attn_mask: Boolean (``True`` = may attend) or floating, broadcastable to ``(..., L, S)``.
        is_causal: Apply a lower-triangular (top-left aligned) mask, skipping the tiles above
            the diagonal in both passes.
        scale: Multiplier of the scores; defaults to $1/\sqrt{d_k}$.
        block_size: The tile's shape, one int or ``(block_q, block_k)``.
        dropout_p: Probability of dropping each weight, in ``[0, 1)``.
        dropout_seed: Seed of the dropout mask; by default drawn from PyTorch's generator.

    Returns:
        The output, ``(..., L, d_v)``, differentiable with respect to ``query``, ``key`` and
        ``value``.

    Raises:
        TypeError: An argument is not a floating tensor, or dtypes differ.
        ValueError: A shape or block size does not fit, or ``attn_mask`` requires a gradient.

    Examples:
        >>> g = torch.Generator().manual_seed(0)
        >>> q, k, v = (
        ...     torch.randn(6, 4, generator=g, requires_grad=True) for _ in range(3)
        ... )
        >>> out = flash_attention(q, k, v, is_causal=True, block_size=2)
        >>> out.sum().backward()
        >>> q.grad.shape, k.grad.shape, v.grad.shape
        (torch.Size([6, 4]), torch.Size([6, 4]), torch.Size([6, 4]))
    """
    _no_grad_for_the_mask(attn_mask)
    return _FlashAttention.apply(
        query, key, value, attn_mask, is_causal, scale, block_size, dropout_p, dropout_seed
    )


def _no_grad_for_the_mask(attn_mask: Tensor | None) -> None:
    """These functions give a floating mask no gradient: refuse one that asks for it."""
    if isinstance(attn_mask, Tensor) and attn_mask.requires_grad:
        raise ValueError(
            "attn_mask requires grad, but gets no gradient here; pass attn_mask.detach() "
            "(a learned bias needs its gradient dS, an (L, S) matrix per head)"
        )
