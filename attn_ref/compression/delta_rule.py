r"""The delta rule and the gated delta rule: a state of fixed size that corrects what it holds.

Linear attention (`attn_ref.compression.linear_attention_recurrent`) adds every
$k_t^\top v_t$ to its state. The *delta rule* first reads what the state returns
for $k_t$, then writes only the difference (Schlag et al., 2021; DeltaNet, Yang et
al., 2024). In the site's row-vector notation, with a state $S$ of shape
$d_k \times d_v$ read as $o = q S$:

$$
\begin{aligned}
S_t &= S_{t-1} - \beta_t \, k_t^\top \bigl(k_t S_{t-1} - v_t\bigr) \\
o_t &= q_t S_t
\end{aligned}
$$

The *gated* delta rule (Gated DeltaNet, Yang, Kautz and Hatamizadeh, 2025) first
multiplies the state by a decay $\alpha_t \in (0, 1]$. The papers write the
transposed state, $d_v \times d_k$, read as $S_t q_t$.

- `delta_rule_recurrent`: one token at a time, the form used to generate.
- `delta_rule_chunked`: a chunk of tokens at a time, in matrix products and one
  triangular solve per chunk (the WY form used to train); the same outputs and
  state up to rounding.
- `delta_rule_multiply_adds`: the work of either form, counted.
- `DeltaRuleState`: what either form carries from call to call, and its bytes.

Both forms take the gate as $\log \alpha_t \le 0$ (``log_alpha``), as the reference
implementations do: a product of many decays becomes a sum of logarithms.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from attn_ref import _validate

__all__ = ["DeltaRuleState", "delta_rule_chunked", "delta_rule_multiply_adds", "delta_rule_recurrent"]


@dataclass(frozen=True)
class DeltaRuleState:
    r"""What the (gated) delta rule keeps between tokens: one $d_k \times d_v$ matrix per head.

    Unlike `attn_ref.compression.LinearAttentionState` there is no normalizer: the
    delta rule reads $q S$ as it is.

    Attributes:
        state: ``(..., d_k, d_v)``.
        length: Number of tokens written.

    Examples:
        >>> state = DeltaRuleState(torch.zeros(2, 4, 16, 32), length=5)
        >>> state.nbytes  # 2 * 4 * 16 * 32 numbers of 4 bytes
        16384
    """

    state: Tensor
    length: int

    @property
    def nbytes(self) -> int:
        """Bytes of the state matrix: the same after one token or a million."""
        return self.state.nbytes


def _inputs(
    query: object,
    key: object,
    value: object,
    beta: object,
    log_alpha: object,
    initial_state: object,
) -> tuple[list[int], int, int, int]:
    """Check the arguments of both forms; return ``(batch, T, d_k, d_v)``."""
    for name, x in (("query", query), ("key", key), ("value", value), ("beta", beta)):
        _validate.tensor(name, x)
    _validate.tensor("query", query, min_ndim=2)
    *batch, T, d_k = query.shape
    _validate.shape("key", key, query.shape, "(..., T, d_k), query's shape")
    _validate.shape("value", value, (*batch, T, None), "(..., T, d_v) with query's ... and T")
    _validate.shape("beta", beta, (*batch, T), "(..., T), one write strength per token")
    if log_alpha is None:
        _validate.same_dtype(query=query, key=key, value=value, beta=beta)
    else:
        _validate.tensor("log_alpha", log_alpha)
        _validate.shape("log_alpha", log_alpha, (*batch, T), "(..., T), one decay per token")
        _validate.same_dtype(query=query, key=key, value=value, beta=beta, log_alpha=log_alpha)
        _validate.log_decay("log_alpha", log_alpha)
    d_v = value.shape[-1]
    if initial_state is not None:
        if not isinstance(initial_state, DeltaRuleState):
            raise TypeError(f"initial_state must be a DeltaRuleState, got {type(initial_state).__name__}")
        _validate.shape("initial_state.state", initial_state.state, (*batch, d_k, d_v), "(..., d_k, d_v)")
    return batch, T, d_k, d_v


def _start(query: Tensor, batch: list[int], d_k: int, d_v: int, initial: DeltaRuleState | None):
    """The state to start from, and the tokens it has read."""
    if initial is None:
        return query.new_zeros((*batch, d_k, d_v)), 0  # (..., d_k, d_v)
    return initial.state.to(query.dtype), initial.length


def delta_rule_recurrent(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    beta: Tensor,
    log_alpha: Tensor | None = None,
    *,
    initial_state: DeltaRuleState | None = None,
    scale: float = 1.0,
) -> tuple[Tensor, DeltaRuleState]:
    r"""The (gated) delta rule one token at a time: decay, read, correct, write, answer.

    For each token $t$, from the state $S_{t-1}$ of shape ``(..., d_k, d_v)``:

    $$
    \begin{aligned}
    S' &= \alpha_t S_{t-1} \\
    u_t &= \beta_t \bigl(v_t - k_t S'\bigr) \\
    S_t &= S' + k_t^\top u_t \\
    o_t &= \text{scale} \cdot q_t S_t
    \end{aligned}
    $$

    $k_t S'$ is what the state returns for $k_t$ before the write; $u_t$ is
    $\beta_t$ times the error. Without ``log_alpha``, $\alpha_t = 1$: DeltaNet.
    The decay comes first, as in Gated DeltaNet's
    $S_t = S_{t-1}\bigl(\alpha_t(I - \beta_t k_t k_t^\top)\bigr) + \beta_t v_t k_t^\top$
    (transposed here).

    Nothing is normalized here: DeltaNet's layer gives $k_t$ (and $q_t$) unit
    length before calling this, so that $I - \beta_t k_t^\top k_t$ has no
    eigenvalue outside $[1 - \beta_t, 1]$.

    Args:
        query: ``(..., T, d_k)``.
        key: ``(..., T, d_k)``.
        value: ``(..., T, d_v)``.
        beta: ``(..., T)``, the write strength of each token (in ``(0, 1)`` after a sigmoid).
        log_alpha: ``(..., T)``, $\log \alpha_t \le 0$; ``None`` for no decay.
        initial_state: The state after earlier tokens; ``None`` starts from zero.
        scale: Multiplier of the outputs (the papers: 1; reference kernels: $d_k^{-1/2}$).

    Returns:
        ``(output, state)``: ``(..., T, d_v)`` and the `DeltaRuleState` after the last token.

    Raises:
        TypeError: An input is not a floating tensor, or the dtypes differ.
        ValueError: A shape does not fit, or ``log_alpha`` is positive or not finite.

    Examples:
        One key written twice: the delta rule replaces the first value, where linear
        attention would add both.

        >>> k = torch.tensor([[1.0, 0.0], [1.0, 0.0]])  # (T, d_k)
        >>> v = torch.tensor([[3.0], [5.0]])  # (T, d_v)
        >>> out, state = delta_rule_recurrent(k, k, v, torch.ones(2))
        >>> out.flatten().tolist(), state.state.flatten().tolist()
        ([3.0, 5.0], [5.0, 0.0])
        >>> half = torch.full((2,), 0.5)  # beta = 0.5: move halfway
        >>> delta_rule_recurrent(k, k, v, half)[0].flatten().tolist()
        [1.5, 3.25]
    """
    batch, T, d_k, d_v = _inputs(query, key, value, beta, log_alpha, initial_state)
    S, length = _start(query, batch, d_k, d_v, initial_state)
    outputs = []
    for t in range(T):
        if log_alpha is not None:
            S = S * log_alpha[..., t, None, None].exp()  # decay first
        k_t = key[..., t : t + 1, :]  # (..., 1, d_k)
        error = value[..., t : t + 1, :] - k_t @ S  # (..., 1, d_v): v_t minus what S returns for k_t
        S = S + k_t.transpose(-2, -1) @ (beta[..., t, None, None] * error)  # (..., d_k, 1) @ (..., 1, d_v)
        outputs.append(query[..., t : t + 1, :] @ S)  # (..., 1, d_k) @ (..., d_k, d_v)
    output = torch.cat(outputs, dim=-2) * scale  # T of (..., 1, d_v) -> (..., T, d_v)
    return output, DeltaRuleState(S, length + T)


def delta_rule_chunked(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    beta: Tensor,
    log_alpha: Tensor | None = None,
    *,
    chunk_size: int = 64,
    initial_state: DeltaRuleState | None = None,
    scale: float = 1.0,
) -> tuple[Tensor, DeltaRuleState]:
    r"""The outputs and state of `delta_rule_recurrent`, a chunk of tokens at a time.

    In a chunk of $C$ tokens that starts from the state $S_0$, let
    $\gamma_r = \alpha_1 \cdots \alpha_r$ and $\Gamma_{ri} = \gamma_r / \gamma_i$
    for $i \le r$, 0 above the diagonal (all ones on and below it without decay).
    Unrolled, the recurrence gives the state after token $r$ as
    $S_r = \gamma_r S_0 + \sum_{i \le r} \Gamma_{ri}\, k_i^\top u_i$, where each
    corrected value $u_i$ depends on earlier ones only:

    $$
    \begin{aligned}
    u_i = \beta_i v_i &- \beta_i \gamma_i\, k_i S_0 \\
    &- \beta_i \textstyle\sum_{j < i} \Gamma_{ij} (k_i \cdot k_j)\, u_j
    \end{aligned}
    $$

    That is one lower-triangular system for the chunk,
    $(I + A)\, U = \operatorname{diag}(\beta) V - \operatorname{diag}(\beta\gamma) K S_0$,
    with $A$ the part of $\operatorname{diag}(\beta)(K K^\top \odot \Gamma)$ below
    the diagonal. Its solution is $U = \tilde U - \tilde W S_0$, with
    $\tilde U = (I + A)^{-1} \operatorname{diag}(\beta) V$ and
    $\tilde W = (I + A)^{-1} \operatorname{diag}(\beta\gamma) K$: DeltaNet's WY
    representation (Gated DeltaNet's when $\alpha \ne 1$). Then

    $$
    \begin{aligned}
    O &= \operatorname{diag}(\gamma)\, Q S_0 + (Q K^\top \odot \Gamma)\, U \\
    S_C &= \gamma_C S_0 + \bigl(\operatorname{diag}(\gamma_C / \gamma)\, K\bigr)^\top U
    \end{aligned}
    $$

    Every step is a product of chunk-sized blocks except the triangular solve
    (`torch.linalg.solve_triangular`); only the state passes from chunk to chunk.
    The last chunk may be shorter; nothing is padded. Ratios of decays are taken
    as differences of their logarithms, so a strong decay underflows to 0, never
    to 0 / 0.

    Args:
        query: ``(..., T, d_k)``.
        key: ``(..., T, d_k)``.
        value: ``(..., T, d_v)``.
        beta: ``(..., T)``.
        log_alpha: ``(..., T)``, $\log \alpha_t \le 0$; ``None`` for no decay.
        chunk_size: Tokens per chunk, $C \ge 1$; ``1`` is the recurrence again.
        initial_state: The state after earlier tokens; ``None`` starts from zero.
        scale: Multiplier of the outputs.

    Returns:
        ``(output, state)``, as `delta_rule_recurrent`.

    Raises:
        TypeError: An input is not a floating tensor, or the dtypes differ.
        ValueError: A shape or ``chunk_size`` does not fit, or ``log_alpha`` is
            positive or not finite.

    Examples:
        >>> g = torch.Generator().manual_seed(0)
        >>> q, k = torch.randn(2, 1, 10, 4, generator=g, dtype=torch.float64)
        >>> k = k / k.norm(dim=-1, keepdim=True)  # unit keys, as DeltaNet's
        >>> v = torch.randn(1, 10, 3, generator=g, dtype=torch.float64)
        >>> b = torch.rand(1, 10, generator=g, dtype=torch.float64)
        >>> a = -torch.rand(1, 10, generator=g, dtype=torch.float64)
        >>> slow, s1 = delta_rule_recurrent(q, k, v, b, a)
        >>> fast, s2 = delta_rule_chunked(q, k, v, b, a, chunk_size=4)
        >>> bool((fast - slow).abs().max() < 1e-12), s2.length
        (True, 10)
        >>> bool((s2.state - s1.state).abs().max() < 1e-12)
        True
    """
    batch, T, d_k, d_v = _inputs(query, key, value, beta, log_alpha, initial_state)
    _validate.count("chunk_size", chunk_size)
    S, length = _start(query, batch, d_k, d_v, initial_state)
    output, state = _chunks(query, key, value, beta, log_alpha, chunk_size, S)
    return output * scale, DeltaRuleState(state, length + T)


def _chunks(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    beta: Tensor,
    log_alpha: Tensor | None,
    chunk_size: int,
    S: Tensor | None,
) -> tuple[Tensor, Tensor]:
    r"""`delta_rule_chunked` on checked inputs: the outputs and the final state, unscaled.

    ``S`` is the state to start from. ``None`` stands for zeros and leaves the
    products with $S_0$ out of the first chunk; `delta_rule_chunked` passes its
    zeros, so that every chunk makes the products `delta_rule_multiply_adds`
    counts. The recall models call this directly, with ``None``: their gates are
    $\le 0$ by construction, and the check of ``log_alpha`` (a branch on the data)
    cannot run under `torch.func.vmap`, which trains several of them at once.
    """
    T, d_k = key.shape[-2:]
    outputs = []
    for start in range(0, T, chunk_size):
        chunk = slice(start, min(start + chunk_size, T))
        q, k, v, b = query[..., chunk, :], key[..., chunk, :], value[..., chunk, :], beta[..., chunk]
        C = k.shape[-2]
        below = torch.ones(C, C, dtype=torch.bool, device=k.device).tril()  # (C, C): i <= r
        if log_alpha is None:
            gamma = tail = torch.ones_like(b)  # (..., C)
            decay = below.to(k.dtype)  # (C, C): Gamma without decay
        else:
            log_gamma = log_alpha[..., chunk].cumsum(dim=-1)  # (..., C): log of alpha_1 ... alpha_r
            gamma = log_gamma.exp()
            tail = (log_gamma[..., -1:] - log_gamma).exp()  # (..., C): gamma_C / gamma_r
            gaps = log_gamma[..., :, None] - log_gamma[..., None, :]  # (..., C, C): log gamma_r / gamma_i
            decay = gaps.masked_fill(~below, float("-inf")).exp()  # (..., C, C): 0 above the diagonal
        beta_k = b[..., None] * k  # (..., C, d_k): row i is beta_i k_i
        A = ((beta_k @ k.transpose(-2, -1)) * decay).tril(-1)  # (..., C, C): beta_i Gamma_ij k_i . k_j, j < i
        system = torch.eye(C, dtype=k.dtype, device=k.device) + A
        scores = (q @ k.transpose(-2, -1)) * decay  # (..., C, C), 0 above the diagonal
        if S is None:  # a state of zeros: U is U~, and S_0 adds nothing to O or S_C
            u = torch.linalg.solve_triangular(system, b[..., None] * v, upper=False, unitriangular=True)
            outputs.append(scores @ u)  # (..., C, d_v)
            S = (tail[..., None] * k).transpose(-2, -1) @ u  # (..., d_k, d_v)
            continue
        right = torch.cat([b[..., None] * v, gamma[..., None] * beta_k], dim=-1)  # (..., C, d_v + d_k)
        solved = torch.linalg.solve_triangular(system, right, upper=False, unitriangular=True)
        u_tilde, w_tilde = solved.split([v.shape[-1], d_k], dim=-1)  # (..., C, d_v), (..., C, d_k)
        u = u_tilde - w_tilde @ S  # (..., C, d_k) @ (..., d_k, d_v) -> (..., C, d_v)
        outputs.append(gamma[..., None] * (q @ S) + scores @ u)  # (..., C, d_v)
        S = gamma[..., -1:, None] * S + (tail[..., None] * k).transpose(-2, -1) @ u  # (..., d_k, d_v)
    return torch.cat(outputs, dim=-2), S  # chunks of (..., C, d_v) -> (..., T, d_v)


def delta_rule_multiply_adds(T: int, d_k: int, d_v: int, chunk_size: int | None = None) -> dict[str, int]:
    r"""Multiply-adds of one head's (gated) delta rule over ``T`` tokens, by kind of step.

    Recurrent, per token: the read $k_t S$, the write $k_t^\top u_t$ and the
    output $q_t S$, $d_k d_v$ each. Chunked, per chunk of $c$ tokens: $K K^\top$
    and $Q K^\top$ ($c^2 d_k$ each); $\tilde W S_0$, $Q S_0$ and $K^\top U$
    ($c\, d_k d_v$ each); $(Q K^\top \odot \Gamma)\, U$ ($c^2 d_v$); and the
    triangular solve with $d_k + d_v$ right-hand sides ($c(c-1)/2$ each). The
    elementwise steps (the gate, $\beta$, $\Gamma$) are not counted: they grow
    like $c^2$ or $d_k d_v$, not like a product of both.

    Args:
        T: Tokens.
        d_k: Key width.
        d_v: Value width.
        chunk_size: ``None`` for the recurrent form, else $C$ of the chunked form.

    Returns:
        ``{"products": ..., "solve": ..., "total": ...}``: the multiply-adds of the
        matrix products, of the triangular solves (0 for the recurrent form), and both.

    Examples:
        >>> delta_rule_multiply_adds(64, 16, 32)  # 3 * 64 * 16 * 32
        {'products': 98304, 'solve': 0, 'total': 98304}
        >>> delta_rule_multiply_adds(64, 16, 32, chunk_size=64)["products"]
        360448
    """
    _validate.counts(T=T, d_k=d_k, d_v=d_v)
    if chunk_size is None:
        products = 3 * T * d_k * d_v
        return {"products": products, "solve": 0, "total": products}
    _validate.count("chunk_size", chunk_size)
    sizes = [chunk_size] * (T // chunk_size) + ([T % chunk_size] if T % chunk_size else [])
    products = sum(2 * c * c * d_k + c * c * d_v + 3 * c * d_k * d_v for c in sizes)
    solve = sum((d_k + d_v) * c * (c - 1) // 2 for c in sizes)
    return {"products": products, "solve": solve, "total": products + solve}
