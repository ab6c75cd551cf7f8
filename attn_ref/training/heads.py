r"""What the heads of a trained `AttentionOnlyDecoder` do: scores of their attention, copying, ablation, weights.

`previous_token_scores` and `prefix_matching_scores` measure where heads attend, the two halves of
an induction circuit (Olsson et al., 2022); `head_logits` and `copying_scores` measure what a head
writes: whether it raises the logit of the token it attends to (*copying*), by its effect on the
logits and by the eigenvalues of its OV circuit (Elhage et al., 2021); `without_heads` silences
heads to see what the loss depends on; `token_scores` reads a head's preference from token to
token off the weights.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable

import torch
from torch import Tensor

from attn_ref import _validate
from attn_ref.masks import causal_mask
from attn_ref.training.induction import AttentionOnlyDecoder

__all__ = [
    "copying_scores",
    "head_logits",
    "prefix_matching_scores",
    "previous_token_scores",
    "token_scores",
    "without_heads",
]


def previous_token_scores(weights: Tensor) -> Tensor:
    r"""Each head's mean attention weight on the previous token.

    $$
    \text{score}_h = \operatorname{mean}_{b,\; i \ge 1} \; a^{(h)}_{i,\, i-1}
    $$

    over every sequence $b$ and every query $i$ that has a previous token. A head that always
    attends to the token just before the query scores 1.

    Args:
        weights: ``(B, H, T, T)`` attention weights of one layer.

    Returns:
        ``(H,)`` scores.

    Examples:
        >>> previous = torch.eye(4).roll(-1, dims=1).tril()  # query i: key i - 1
        >>> previous[0, 0] = 1.0  # query 0 has only itself
        >>> uniform = causal_mask(4) / torch.arange(1.0, 5.0)[:, None]
        >>> previous_token_scores(torch.stack([previous, uniform])[None])
        tensor([1.0000, 0.3611])
    """
    _validate.tensor("weights", weights)
    _validate.shape("weights", weights, (None, None, None, None), "(B, H, T, T)")
    T = weights.shape[-1]
    _validate.count("weights' T", T, minimum=2)
    query = torch.arange(1, T, device=weights.device)  # (T - 1,)
    return weights[:, :, query, query - 1].mean(dim=(0, 2))  # (B, H, T - 1) -> (H,)


def prefix_matching_scores(weights: Tensor, tokens: Tensor, queries: Tensor | None = None) -> Tensor:
    r"""Each head's mean attention weight on the tokens an induction head would attend to.

    For query $i$, those are the keys $j \le i$ whose *previous* token equals the current one,
    $x_{j-1} = x_i$: the tokens that followed an earlier occurrence of $x_i$. Olsson et al.
    (2022) score prefix matching as "the average fraction of a head's attention weight given to
    the token we expect an induction head to attend to", on random sequences that repeat:

    $$
    \text{score}_h = \operatorname{mean}_{(b, i) \in \text{queries}}
    \sum_{j \le i,\; x_{j-1} = x_i} a^{(h)}_{i j}
    $$

    Args:
        weights: ``(B, H, T, T)`` attention weights of one layer.
        tokens: ``(B, T)`` the token ids the weights were computed on.
        queries: ``(B, T)`` boolean, the queries to average over; by default every query whose
            token occurred before (so that some key can match).

    Returns:
        ``(H,)`` scores.

    Examples:
        Tokens ``7 8 9 7 8``: query 3 (the second 7) should attend to key 1 (the 8 after the
        first 7), query 4 (the second 8) to key 2. A head that does scores 1:

        >>> tokens = torch.tensor([[7, 8, 9, 7, 8]])
        >>> ideal = torch.zeros(5, 5)
        >>> ideal[[0, 1, 2, 3, 4], [0, 1, 2, 1, 2]] = 1.0
        >>> prefix_matching_scores(ideal[None, None], tokens)
        tensor([1.])
    """
    _validate.tensor("weights", weights)
    _validate.token_ids("tokens", tokens, min_length=2)
    B, T = tokens.shape
    _validate.shape("weights", weights, (B, None, T, T), "(B, H, T, T) with tokens' B and T")
    before = torch.cat([torch.full_like(tokens[:, :1], -1), tokens[:, :-1]], dim=1)  # (B, T): x_{j-1}
    earlier = causal_mask(T, device=tokens.device)  # (T, T): key j <= query i
    target = (before[:, None, :] == tokens[:, :, None]) & earlier  # (B, T, T): x_{j-1} == x_i, j <= i
    if queries is None:
        queries = target.any(dim=-1)  # (B, T): some key can match
    if queries.shape != (B, T) or queries.dtype != torch.bool:
        raise ValueError(
            f"queries must be a ({B}, {T}) boolean mask, got {tuple(queries.shape)} {queries.dtype}"
        )
    on_target = (weights * target[:, None]).sum(dim=-1)  # (B, H, T): weight on matching keys
    return (on_target * queries[:, None]).sum(dim=(0, 2)) / queries.sum()  # (H,)


def without_heads(model: AttentionOnlyDecoder, heads: Iterable[tuple[int, int]]) -> AttentionOnlyDecoder:
    r"""A copy of ``model`` in which the given ``(layer, head)`` pairs write nothing.

    A layer's output is

    $$
    \operatorname{Concat}(\text{head}_1, \dots, \text{head}_H) W_O + b_O
    = \sum_h \text{head}_h W_O^{(h)} + b_O,
    $$

    where $W_O^{(h)}$ is the block of $d_k$ rows of
    $W_O$ that head $h$'s output meets. Zeroing that block removes the head's contribution and
    nothing else (*zero ablation*); in ``nn.Linear``'s storage, $W_O^\top$, it is a block of
    columns.

    Args:
        model: The model; left unchanged.
        heads: ``(layer, head)`` pairs to silence.

    Returns:
        The ablated copy.

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> model = AttentionOnlyDecoder(8, 6, embed_dim=4, num_layers=1, num_heads=2)
        >>> silent = without_heads(model, [(0, 0), (0, 1)])  # all: the bias is left
        >>> x = model.embed(torch.tensor([[1, 2, 3]]))
        >>> bias = model.layers[0].out_proj.bias
        >>> torch.equal(silent.layers[0](x, x, x)[0], bias.expand(1, 3, 4))
        True
    """
    ablated = copy.deepcopy(model)
    with torch.no_grad():
        for layer, head in heads:
            _validate.count("layer", layer, minimum=0, maximum=len(model.layers) - 1)
            attention = ablated.layers[layer]
            _validate.count("head", head, minimum=0, maximum=attention.num_heads - 1)
            d_k = attention.head_dim
            attention.out_proj.weight[:, head * d_k : (head + 1) * d_k] = 0.0  # W_O^T: (C, H * d_k)
    return ablated


def token_scores(model: AttentionOnlyDecoder, head: int, through: int | None = None) -> Tensor:
    r"""The attention score a head of layer 1 gives, from token to token, read off the weights.

    Row $a$, column $b$ is the score that a query of token $a$ gives a key made from token $b$,
    with every other contribution left out, in one of two ways:

    - ``through=None``, the *direct path*: the key is made from $b$'s own embedding,
      $k_b = E_b W_K$;
    - ``through=h0``, *K-composition* (Elhage et al., 2021): the key is made from what head
      ``h0`` of layer 0 writes into the stream when it attends to a position holding $b$,
      $k_b = (E_b W_V^{(h_0)} + b_V^{(h_0)}) W_O^{(h_0)} W_K$. If ``h0`` is a previous-token
      head, that is what it writes at the position *after* $b$.

    The query is $q_a = E_a W_Q + b_Q$, and the score $q_a \cdot k_b / \sqrt{d_k}$: the part of the
    score that depends on the two tokens alone. Set aside are:

    - the query's position embedding, $P_i W_Q$. Its term $P_i W_Q \cdot k_b$ depends on the
      key's token, so at a given query position it can change which token a row prefers: the
      scores describe the query's token, not its position;
    - the key's position embedding and the key's bias. Their term $q_a \cdot (P_j W_K + b_K)$
      does not depend on the key's token: at a given key position it adds the same amount along
      a row, and leaves which token the row prefers as it is;
    - the rest of the key's stream: the other heads of layer 0, and with ``through`` the key's
      own token embedding.

    Args:
        model: A model with at least two layers.
        head: The head of layer 1.
        through: A head of layer 0, or ``None``.

    Returns:
        ``(V, V)``: queries' tokens down, keys' tokens across.

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> model = AttentionOnlyDecoder(
        ...     vocab_size=5, context_length=4, embed_dim=4, num_layers=2, num_heads=2
        ... )
        >>> token_scores(model, head=0).shape
        torch.Size([5, 5])
        >>> token_scores(model, head=1, through=0).shape
        torch.Size([5, 5])
    """
    if len(model.layers) < 2:
        raise ValueError(f"model must have at least 2 layers for a head of layer 1, got {len(model.layers)}")
    first, second = model.layers[0], model.layers[1]
    _validate.count("head", head, minimum=0, maximum=second.num_heads - 1)
    d_k = second.head_dim
    rows = slice(head * d_k, (head + 1) * d_k)
    with torch.no_grad():
        E = model.token_embedding.weight  # (V, C)
        q = E @ second.q_proj.weight[rows].T + second.q_proj.bias[rows]  # (V, C) @ (C, d_k) -> (V, d_k)
        if through is None:
            source = E  # (V, C)
        else:
            _validate.count("through", through, minimum=0, maximum=first.num_heads - 1)
            d0 = first.head_dim
            block = slice(through * d0, (through + 1) * d0)
            value = E @ first.v_proj.weight[block].T + first.v_proj.bias[block]  # (V, d0)
            source = value @ first.out_proj.weight[:, block].T  # (V, d0) @ (d0, C) -> (V, C)
        k = source @ second.k_proj.weight[rows].T  # (V, C) @ (C, d_k) -> (V, d_k)
        return q @ k.T / math.sqrt(d_k)  # (V, d_k) @ (d_k, V) -> (V, V)


def _stream_before(model: AttentionOnlyDecoder, tokens: Tensor, layer: int) -> Tensor:
    """The residual stream that layer ``layer`` reads: ``(B, T)`` ids -> ``(B, T, C)``."""
    x = model.embed(tokens)  # (B, T, C)
    mask = causal_mask(tokens.shape[1], device=tokens.device)  # (T, T)
    for attention in model.layers[:layer]:
        x = x + attention(x, x, x, attn_mask=mask)[0]
    return x


def head_logits(model: AttentionOnlyDecoder, tokens: Tensor, layer: int) -> Tensor:
    r"""What each head of one layer adds to the logits directly, at every position.

    Head $h$ writes $\text{head}_h W_O^{(h)}$ into the stream (`without_heads` explains the block
    $W_O^{(h)}$); the unembedding reads it straight to the logits:

    $$
    \text{logits}^{(h)} = \text{head}_h W_O^{(h)} W_U, \qquad
    \text{head}_h = A^{(h)} (X W_V^{(h)} + b_V^{(h)})
    $$

    where $X$ is the stream the layer reads. The model has no layer norm, so the logits are the sum
    of such terms, of the embeddings' and of the output biases: for the last layer this is all a
    head does to the logits; for an earlier one it leaves out what later layers make of its
    output. The layer's output bias $b_O$ belongs to no head and is left out.

    Args:
        model: The model.
        tokens: ``(B, T)`` token ids.
        layer: The layer.

    Returns:
        ``(B, H, T, V)``: head $h$'s logits after position $i$.

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> model = AttentionOnlyDecoder(8, 6, embed_dim=4, num_layers=1, num_heads=2)
        >>> tokens = torch.tensor([[1, 2, 3, 1]])
        >>> per_head = head_logits(model, tokens, layer=0)
        >>> per_head.shape  # (B, H, T, V)
        torch.Size([1, 2, 4, 8])
        >>> x = model.embed(tokens)
        >>> rest = (x + model.layers[0].out_proj.bias) @ model.unembedding.weight.T
        >>> with torch.no_grad():
        ...     logits = model(tokens)[0]
        >>> heads = per_head.sum(dim=1)
        >>> torch.allclose(heads + rest, logits, atol=1e-6)  # the heads + the rest
        True
    """
    _validate.count("layer", layer, minimum=0, maximum=len(model.layers) - 1)
    attention = model.layers[layer]
    H, d_k = attention.num_heads, attention.head_dim
    with torch.no_grad():
        x = _stream_before(model, tokens, layer)  # (B, T, C)
        _, weights = attention(x, x, x, attn_mask=causal_mask(tokens.shape[1], device=tokens.device))
        B, T, C = x.shape
        v = attention.v_proj(x).view(B, T, H, d_k).transpose(1, 2)  # (B, T, C) -> (B, H, T, d_k)
        heads = weights @ v  # (B, H, T, T) @ (B, H, T, d_k) -> (B, H, T, d_k)
        W_O = attention.out_proj.weight.T.reshape(H, d_k, C)  # (H * d_k, C) -> (H, d_k, C)
        written = heads @ W_O[None]  # (B, H, T, d_k) @ (1, H, d_k, C) -> (B, H, T, C)
        return model.unembedding(written)  # (B, H, T, V)


def copying_scores(model: AttentionOnlyDecoder, layer: int) -> Tensor:
    r"""Elhage et al.'s eigenvalue test of copying, per head: how positive its OV circuit's eigenvalues are.

    The *OV circuit* of head $h$ maps a token to the logits the head writes when it attends to
    that token (Elhage et al., 2021), a $V \times V$ matrix:

    $$
    M^{(h)} = W_E W_V^{(h)} W_O^{(h)} W_U
    $$

    A head that copies raises the logit of the token it attends to: the diagonal of $M^{(h)}$
    is large, and its eigenvalues are positive ("copying requires positive eigenvalues", Elhage
    et al.). The score is

    $$
    \text{score}_h = \frac{\sum_k \lambda_k}{\sum_k |\lambda_k|}
    $$

    over the eigenvalues $\lambda_k$ of $M^{(h)}$: 1 when they are all positive, -1 when all
    negative, near 0 for random weights (whose eigenvalues spread evenly around zero). $M^{(h)}$ has
    rank at most $d_k$, and its nonzero eigenvalues are those of the $d_k \times d_k$ matrix
    $W_O^{(h)} W_U W_E W_V^{(h)}$, which is what is computed, in float64. The OV circuit reads the
    token embedding alone: the position embeddings, what earlier layers wrote, and the value
    bias (which adds the same vector whatever the head attends to) are set aside.

    Args:
        model: The model.
        layer: The layer.

    Returns:
        ``(H,)`` scores, float64.

    Examples:
        A head whose OV circuit is the identity copies perfectly:

        >>> model = AttentionOnlyDecoder(4, 3, embed_dim=4, num_layers=1, num_heads=1)
        >>> with torch.no_grad():
        ...     for w in (model.token_embedding.weight, model.unembedding.weight):
        ...         _ = w.copy_(torch.eye(4))
        ...     for p in (model.layers[0].v_proj, model.layers[0].out_proj):
        ...         _ = p.weight.copy_(torch.eye(4))
        >>> copying_scores(model, layer=0)
        tensor([1.], dtype=torch.float64)
        >>> with torch.no_grad():  # now it raises every other token instead
        ...     _ = model.layers[0].out_proj.weight.mul_(-1)
        >>> copying_scores(model, layer=0)
        tensor([-1.], dtype=torch.float64)
    """
    _validate.count("layer", layer, minimum=0, maximum=len(model.layers) - 1)
    attention = model.layers[layer]
    H, d_k = attention.num_heads, attention.head_dim
    with torch.no_grad():
        E = model.token_embedding.weight.double()  # (V, C): W_E, one row per token
        W_U = model.unembedding.weight.double().T  # (C, V)
        W_V = attention.v_proj.weight.double().T.reshape(-1, H, d_k)  # (C, H * d_k) -> (C, H, d_k)
        W_O = attention.out_proj.weight.double().T.reshape(H, d_k, -1)  # (H * d_k, C) -> (H, d_k, C)
        scores = []
        for h in range(H):
            small = W_O[h] @ W_U @ E @ W_V[:, h]  # (d_k, C) (C, V) (V, C) (C, d_k) -> (d_k, d_k)
            eigenvalues = torch.linalg.eigvals(small)  # (d_k,) complex
            scores.append(eigenvalues.sum().real / eigenvalues.abs().sum())
        return torch.stack(scores)  # (H,)
