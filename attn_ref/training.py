r"""Tiny attention models that learn in seconds, and the measurements that show what they learned.

Every other page runs attention with random weights. The two models here are trained, on a CPU,
in a few seconds each, so that a page can show what trained heads do:

- `AttentionOnlyDecoder` learns to continue sequences that repeat (`repeated_tokens`), which it
  does with *induction heads* (Olsson et al., 2022): a previous-token head in one layer
  (`previous_token_scores`) lets a head of the next layer find the token that followed an
  earlier copy of the current token (`prefix_matching_scores`). `without_heads` zeroes heads to
  see which ones the loss depends on, and `token_scores` reads the mechanism off the weights.
- `TinyEncoderDecoder` learns to sort (`sorting_batch`). Its cross-attention takes its queries
  from the output written so far and its keys and values from the input, as in the
  encoder-decoder of Vaswani et al. (2017), with inputs of different lengths padded in one batch.

Both are built from `attn_ref.multihead.MultiHeadAttention`; `to_torch_multihead` copies one
into `torch.nn.MultiheadAttention` to check them against PyTorch. `train_induction` and
`train_sorting` are the training recipes, seeded and deterministic on a given machine.
`playground_json` writes the trained induction model's attention weights to a small JSON file
for a page that runs the model in the browser, and `model_from_playground_json` reads it back.
"""

from __future__ import annotations

import base64
import copy
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attn_ref import _validate
from attn_ref.masks import causal_mask, padding_mask
from attn_ref.multihead import MultiHeadAttention

__all__ = [
    "AttentionOnlyDecoder",
    "InductionHistory",
    "SortingBatch",
    "TinyEncoderDecoder",
    "model_from_playground_json",
    "next_token_losses",
    "part_masks",
    "playground_json",
    "prefix_matching_scores",
    "previous_token_scores",
    "repeated_tokens",
    "sorting_batch",
    "to_torch_multihead",
    "token_scores",
    "train_induction",
    "train_sorting",
    "without_heads",
]


# --- the induction task ------------------------------------------------------------------------


def repeated_tokens(
    batch_size: int,
    seq_len: int,
    vocab_size: int,
    periods: tuple[int, int] = (8, 16),
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    r"""Random sequences that repeat: each is its first ``period`` tokens, over and over.

    Token $t$ of a sequence with period $p$ is token $t \bmod p$: the first $p$ tokens are drawn
    uniformly from the vocabulary, and everything after them repeats them. Each sequence draws
    its own period from ``periods``, so where the repeat starts, and how far back the earlier
    copy of a token lies, changes from one sequence to the next.

    Args:
        batch_size: Number of sequences ``B``.
        seq_len: Tokens per sequence ``T``.
        vocab_size: Tokens are drawn from ``0 .. vocab_size - 1``.
        periods: Smallest and largest period, both included; at least 2 and at most ``seq_len``.
        generator: The random generator to draw from.

    Returns:
        ``(tokens, periods)``: ``(B, T)`` token ids and each sequence's ``(B,)`` period.

    Examples:
        >>> g = torch.Generator().manual_seed(0)
        >>> tokens, period = repeated_tokens(1, 10, 64, (4, 4), g)
        >>> tokens
        tensor([[47, 53,  0,  3, 47, 53,  0,  3, 47, 53]])
        >>> period
        tensor([4])
    """
    _validate.count("batch_size", batch_size)
    _validate.count("seq_len", seq_len)
    _validate.count("vocab_size", vocab_size)
    shortest = _validate.count("periods[0]", periods[0], minimum=2, maximum=seq_len)
    longest = _validate.count("periods[1]", periods[1], minimum=shortest, maximum=seq_len)
    period = torch.randint(shortest, longest + 1, (batch_size,), generator=generator)  # (B,)
    first = torch.randint(0, vocab_size, (batch_size, seq_len), generator=generator)  # (B, T)
    source = torch.arange(seq_len)[None, :] % period[:, None]  # (B, T): the position each token copies
    return first.gather(1, source), period  # (B, T): token t is token t mod p


def part_masks(periods: Tensor, seq_len: int) -> tuple[Tensor, Tensor]:
    r"""Which next-token predictions fall in the first part of each sequence, and which repeat.

    The prediction made at position $i$ is that of token $i + 1$. With period $p$:

    - the *first part* holds the predictions of tokens $1, \dots, p - 1$: new random tokens,
      which nothing before them can predict;
    - the *repeated part* holds the predictions made at positions $i \ge p$, where the current
      token already occurred, $p$ positions back, and the token after that occurrence comes next.

    The prediction made at position $p - 1$ (of token $p$, the first repeated one) is in
    neither: its current token has not occurred before.

    Args:
        periods: ``(B,)`` period of each sequence.
        seq_len: Tokens per sequence ``T``.

    Returns:
        ``(first, repeated)``: two ``(B, T - 1)`` boolean masks over the predictions.

    Examples:
        >>> first, repeated = part_masks(torch.tensor([3]), seq_len=7)
        >>> first.tolist()
        [[True, True, False, False, False, False]]
        >>> repeated.tolist()
        [[False, False, False, True, True, True]]
    """
    _validate.integer_vector("periods", periods)
    _validate.count("seq_len", seq_len, minimum=2)
    position = torch.arange(seq_len - 1)[None, :]  # (1, T - 1): where each prediction is made
    return position < periods[:, None] - 1, position >= periods[:, None]


def next_token_losses(logits: Tensor, tokens: Tensor) -> Tensor:
    r"""Cross-entropy of every next-token prediction: $-\log p(x_{i+1} \mid x_0, \dots, x_i)$.

    Args:
        logits: ``(B, T, V)``; position $i$ predicts token $i + 1$.
        tokens: ``(B, T)`` token ids.

    Returns:
        ``(B, T - 1)`` losses in nats; the last position predicts nothing.

    Examples:
        >>> logits = torch.zeros(1, 3, 4)  # all tokens equally likely: loss ln 4
        >>> next_token_losses(logits, torch.tensor([[0, 1, 2]]))
        tensor([[1.3863, 1.3863]])
    """
    _validate.tensor("logits", logits)
    _validate.token_ids("tokens", tokens, min_length=2)
    B, T = tokens.shape
    _validate.shape("logits", logits, (B, T, None), "(B, T, V) with tokens' B and T")
    predicted = logits[:, :-1].reshape(B * (T - 1), -1)  # (B, T - 1, V) -> (B * (T - 1), V)
    losses = F.cross_entropy(predicted, tokens[:, 1:].reshape(-1), reduction="none")
    return losses.view(B, T - 1)  # (B * (T - 1),) -> (B, T - 1)


class AttentionOnlyDecoder(nn.Module):
    r"""A decoder-only transformer with attention layers and nothing else.

    Token and learned position embeddings are added into the *residual stream*; each layer is a
    causal `attn_ref.multihead.MultiHeadAttention` whose output is added back to it; a linear
    map without bias (the *unembedding*) turns the stream into one logit per token. There is no
    MLP and no layer norm, as in the attention-only models of Elhage et al. (2021), so that
    every path from the input to the logits is a product of the weights and attention patterns:

    $$
    x_0 = E[t] + P, \qquad x_{\ell + 1} = x_\ell + \operatorname{MHA}_\ell(x_\ell), \qquad
    \text{logits} = x_{\text{last}} W_U
    $$

    Args:
        vocab_size: Number of distinct tokens.
        context_length: Most positions the model can read (the position table's size).
        embed_dim: Width ``C`` of the residual stream.
        num_layers: Number of attention layers.
        num_heads: Heads ``H`` per layer; must divide ``embed_dim``.

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> model = AttentionOnlyDecoder(
        ...     vocab_size=8, context_length=6, embed_dim=4, num_layers=2, num_heads=2
        ... )
        >>> logits, weights = model(torch.tensor([[1, 2, 3, 1, 2]]))
        >>> logits.shape  # (B, T, V)
        torch.Size([1, 5, 8])
        >>> [tuple(w.shape) for w in weights]  # per layer, (B, H, T, T)
        [(1, 2, 5, 5), (1, 2, 5, 5)]
        >>> bool(weights[0][0, 0].triu(diagonal=1).eq(0).all())  # causal
        True
    """

    def __init__(
        self, vocab_size: int, context_length: int, embed_dim: int, num_layers: int, num_heads: int
    ) -> None:
        super().__init__()
        for name, size in (
            ("vocab_size", vocab_size),
            ("context_length", context_length),
            ("embed_dim", embed_dim),
            ("num_layers", num_layers),
        ):
            _validate.count(name, size)
        self.vocab_size = vocab_size
        self.context_length = context_length
        self.token_embedding = nn.Embedding(vocab_size, embed_dim)
        self.position_embedding = nn.Embedding(context_length, embed_dim)
        self.layers = nn.ModuleList(MultiHeadAttention(embed_dim, num_heads) for _ in range(num_layers))
        self.unembedding = nn.Linear(embed_dim, vocab_size, bias=False)

    @property
    def num_heads(self) -> int:
        """Heads per layer."""
        return self.layers[0].num_heads

    def embed(self, tokens: Tensor) -> Tensor:
        """The residual stream before the first layer: ``(B, T)`` ids -> ``(B, T, C)``."""
        _validate.token_ids("tokens", tokens, min_length=1)
        T = tokens.shape[1]
        if self.context_length < T:
            raise ValueError(f"tokens has T={T} positions, more than context_length={self.context_length}")
        if (tokens < 0).any() or (tokens >= self.vocab_size).any():
            raise ValueError(f"tokens must lie in [0, {self.vocab_size - 1}], got {tokens.tolist()}")
        positions = torch.arange(T, device=tokens.device)  # (T,)
        return self.token_embedding(tokens) + self.position_embedding(positions)  # (B, T, C)

    def forward(self, tokens: Tensor) -> tuple[Tensor, list[Tensor]]:
        """Next-token logits after every position, and every layer's attention weights.

        Args:
            tokens: ``(B, T)`` token ids, ``T <= context_length``.

        Returns:
            ``(logits, weights)``: ``(B, T, vocab_size)``, and one ``(B, H, T, T)`` tensor per layer.
        """
        x = self.embed(tokens)  # (B, T, C)
        mask = causal_mask(tokens.shape[1], device=tokens.device)  # (T, T)
        weights = []
        for attention in self.layers:
            output, layer_weights = attention(x, x, x, attn_mask=mask)
            x = x + output  # (B, T, C): each layer adds to the residual stream
            weights.append(layer_weights)
        return self.unembedding(x), weights


@dataclass(frozen=True)
class InductionHistory:
    """The losses of `train_induction`, one per training step, on that step's batch (nats).

    Attributes:
        first: Mean loss on the first part of the sequences (`part_masks`).
        repeated: Mean loss on the repeated part.
        total: Mean loss over every prediction: what the optimiser minimises.
    """

    first: list[float]
    repeated: list[float]
    total: list[float]


def train_induction(
    model: AttentionOnlyDecoder,
    steps: int = 200,
    batch_size: int = 32,
    lr: float = 1e-2,
    periods: tuple[int, int] = (8, 16),
    seed: int = 0,
) -> InductionHistory:
    """Train ``model`` in place on `repeated_tokens`, one fresh batch per step.

    Each step draws ``batch_size`` sequences of ``model.context_length`` tokens, computes the
    mean next-token loss over every position, and takes one step of AdamW (PyTorch's defaults
    but the learning rate ``lr``). The batches come from a generator seeded with ``seed``, so
    two runs on the same machine draw the same data; seed the model's initial weights yourself
    (``torch.manual_seed``) before building it.

    Args:
        model: The model; trained in place.
        steps: Optimiser steps.
        batch_size: Sequences per step.
        lr: AdamW's learning rate, constant.
        periods: Smallest and largest period of the sequences.
        seed: Seed of the data.

    Returns:
        The losses of every step (`InductionHistory`).

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> model = AttentionOnlyDecoder(
        ...     vocab_size=8, context_length=8, embed_dim=8, num_layers=2, num_heads=2
        ... )
        >>> history = train_induction(model, steps=3, batch_size=4, periods=(2, 4))
        >>> len(history.repeated), model.training  # a loss per step; eval mode
        (3, False)
    """
    _validate.count("steps", steps)
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    history = InductionHistory([], [], [])
    model.train()
    for _ in range(steps):
        tokens, period = repeated_tokens(
            batch_size, model.context_length, model.vocab_size, periods, generator
        )
        logits, _ = model(tokens)
        losses = next_token_losses(logits, tokens)  # (B, T - 1)
        loss = losses.mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        first, repeated = part_masks(period, model.context_length)
        history.first.append(losses[first].mean().item())
        history.repeated.append(losses[repeated].mean().item())
        history.total.append(loss.item())
    model.eval()
    return history


# --- what the heads do -------------------------------------------------------------------------


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

    The query is $q_a = E_a W_Q + b_Q$, and the score $q_a \cdot k_b / \sqrt{d_k}$. Left out are
    the position embeddings and the key's bias: for a given query and key position they add the
    same amount to every entry of a row, so they do not change which token a row prefers.

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


# --- the sorting task --------------------------------------------------------------------------


@dataclass(frozen=True)
class SortingBatch:
    """Sequences to sort, padded to one length, with the answers and the alignment.

    The numbers are the tokens ``0 .. num_values - 1``, and three more tokens follow them
    (`sorting_batch`): ``num_values`` pads, ``num_values + 1`` starts every output and
    ``num_values + 2`` ends it. A source of $n$ numbers has an output of $n + 1$ tokens, the
    sorted numbers and the end token, so a batch has ``S`` source positions and ``L = S + 1``
    output positions.

    Attributes:
        source: ``(B, S)`` the numbers to sort, distinct, padded after each sequence's length.
        lengths: ``(B,)`` each source's length $n$.
        decoder_input: ``(B, L)`` the start token, then the sorted numbers, then padding.
        target: ``(B, L)`` the sorted numbers, the end token, then padding: output $i < n$ is
            the $i$-th smallest number.
        alignment: ``(B, L)`` where output $i$ sits in the source, ``source[alignment[i]] ==
            target[i]``; ``-1`` for the end token and the padding.
    """

    source: Tensor
    lengths: Tensor
    decoder_input: Tensor
    target: Tensor
    alignment: Tensor


def sorting_batch(
    batch_size: int,
    num_values: int,
    lengths: tuple[int, int] = (5, 10),
    generator: torch.Generator | None = None,
) -> SortingBatch:
    """Random sequences of distinct numbers to sort, of random lengths, padded into one batch.

    Args:
        batch_size: Number of sequences ``B``.
        num_values: The numbers are ``0 .. num_values - 1``; the vocabulary has three more
            tokens (pad, start, end).
        lengths: Shortest and longest length, both included; every source is padded to
            the longest, ``S = lengths[1]``.
        generator: The random generator to draw from.

    Returns:
        A `SortingBatch`.

    Examples:
        >>> g = torch.Generator().manual_seed(1)
        >>> batch = sorting_batch(2, num_values=10, lengths=(2, 4), generator=g)
        >>> batch.source  # 10 pads
        tensor([[ 2,  4,  0, 10],
                [ 9,  1,  8,  3]])
        >>> batch.decoder_input  # 11 starts every output
        tensor([[11,  0,  2,  4, 10],
                [11,  1,  3,  8,  9]])
        >>> batch.target  # 12 ends it
        tensor([[ 0,  2,  4, 12, 10],
                [ 1,  3,  8,  9, 12]])
        >>> batch.alignment  # source[alignment[i]] is target[i]
        tensor([[ 2,  0,  1, -1, -1],
                [ 1,  3,  2,  0, -1]])
    """
    _validate.count("batch_size", batch_size)
    _validate.count("num_values", num_values)
    shortest = _validate.count("lengths[0]", lengths[0])
    S = _validate.count("lengths[1]", lengths[1], minimum=shortest, maximum=num_values)
    pad, start, end = num_values, num_values + 1, num_values + 2
    length = torch.randint(shortest, S + 1, (batch_size,), generator=generator)  # (B,)
    numbers = torch.rand(batch_size, num_values, generator=generator).argsort(dim=1)[
        :, :S
    ]  # (B, S): distinct
    padded = torch.arange(S)[None, :] >= length[:, None]  # (B, S)
    source = numbers.masked_fill(padded, pad)
    ordered, alignment = source.sort(dim=1)  # pad is the largest token: the padding stays last
    alignment = alignment.masked_fill(padded, -1)
    column = torch.full((batch_size, 1), pad)
    target = torch.cat([ordered, column], dim=1)  # (B, S + 1)
    target[torch.arange(batch_size), length] = end  # right after the last number
    decoder_input = torch.cat([torch.full((batch_size, 1), start), ordered], dim=1)  # (B, S + 1)
    alignment = torch.cat([alignment, column.new_full((batch_size, 1), -1)], dim=1)  # (B, S + 1)
    return SortingBatch(source, length, decoder_input, target, alignment)


class TinyEncoderDecoder(nn.Module):
    r"""An encoder-decoder with one attention layer of each kind, and nothing else.

    The encoder reads the source: embeddings, then self-attention in which padded keys are
    masked. The decoder reads the output written so far: embeddings, causal self-attention, then
    *cross-attention*, whose queries come from the decoder and whose keys and values come from
    the encoder's output, with the same padding mask. Each attention's output is added back to
    its input, and a linear map turns the decoder's stream into logits. Source and output share
    one token embedding; each has its own position embedding.

    Args:
        vocab_size: Number of distinct tokens, padding and start token included.
        context_length: Most positions in the source, and in the output.
        embed_dim: Width ``C``.
        num_heads: Heads of each attention layer.

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> model = TinyEncoderDecoder(
        ...     vocab_size=13, context_length=5, embed_dim=8, num_heads=1
        ... )
        >>> g = torch.Generator().manual_seed(1)
        >>> batch = sorting_batch(2, num_values=10, lengths=(2, 4), generator=g)
        >>> logits, weights = model(batch.source, batch.lengths, batch.decoder_input)
        >>> logits.shape  # (B, L, V): L = 5 outputs
        torch.Size([2, 5, 13])
        >>> weights["cross"].shape  # (B, H, L, S): S = 4 keys
        torch.Size([2, 1, 5, 4])
        >>> weights["cross"][0, 0, :, 3]  # source 0 has 3 numbers: key 3 is padding
        tensor([0., 0., 0., 0., 0.], grad_fn=<SelectBackward0>)
    """

    def __init__(self, vocab_size: int, context_length: int, embed_dim: int, num_heads: int) -> None:
        super().__init__()
        for name, size in (
            ("vocab_size", vocab_size),
            ("context_length", context_length),
            ("embed_dim", embed_dim),
        ):
            _validate.count(name, size)
        self.vocab_size = vocab_size
        self.context_length = context_length
        self.token_embedding = nn.Embedding(vocab_size, embed_dim)
        self.source_positions = nn.Embedding(context_length, embed_dim)
        self.output_positions = nn.Embedding(context_length, embed_dim)
        self.encoder_attn = MultiHeadAttention(embed_dim, num_heads)
        self.decoder_attn = MultiHeadAttention(embed_dim, num_heads)
        self.cross_attn = MultiHeadAttention(embed_dim, num_heads)
        self.unembedding = nn.Linear(embed_dim, vocab_size, bias=False)

    def embed_source(self, source: Tensor) -> Tensor:
        """The encoder's input: ``(B, S)`` ids -> ``(B, S, C)``, token plus source position."""
        return self._embed(source, "source", self.source_positions)

    def embed_output(self, decoder_input: Tensor) -> Tensor:
        """The decoder's input: ``(B, L)`` ids -> ``(B, L, C)``, token plus output position."""
        return self._embed(decoder_input, "decoder_input", self.output_positions)

    def _embed(self, tokens: Tensor, name: str, positions: nn.Embedding) -> Tensor:
        _validate.token_ids(name, tokens, min_length=1)
        T = tokens.shape[1]
        if self.context_length < T:
            raise ValueError(f"{name} has {T} positions, more than context_length={self.context_length}")
        if (tokens < 0).any() or (tokens >= self.vocab_size).any():
            raise ValueError(f"{name} must lie in [0, {self.vocab_size - 1}], got {tokens.tolist()}")
        return self.token_embedding(tokens) + positions(torch.arange(T, device=tokens.device))  # (B, T, C)

    def forward(
        self, source: Tensor, lengths: Tensor | list[int], decoder_input: Tensor
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """Logits for every output position, and the attention weights of the three layers.

        Args:
            source: ``(B, S)`` token ids; positions at or after a sequence's length are padding.
            lengths: ``(B,)`` the number of real tokens in each source.
            decoder_input: ``(B, L)`` the output so far, shifted: position $i$ holds output $i - 1$.

        Returns:
            ``(logits, weights)``: ``(B, L, vocab_size)``, and the weights by layer: ``"encoder"``
            ``(B, H, S, S)``, ``"decoder"`` ``(B, H, L, L)`` and ``"cross"`` ``(B, H, L, S)``.
        """
        x = self.embed_source(source)  # (B, S, C)
        y = self.embed_output(decoder_input)  # (B, L, C)
        keys_kept = padding_mask(lengths, source.shape[1])[:, None]  # (B, 1, S) -> (B, 1, 1, S)
        if keys_kept.shape[0] != source.shape[0]:
            raise ValueError(
                f"lengths has {keys_kept.shape[0]} entries, expected source's B={source.shape[0]}"
            )
        encoded, encoder_weights = self.encoder_attn(x, x, x, attn_mask=keys_kept)
        x = x + encoded  # (B, S, C): the encoder's output, the keys and values of cross-attention
        decoded, decoder_weights = self.decoder_attn(y, y, y, is_causal=True)
        y = y + decoded  # (B, L, C)
        crossed, cross_weights = self.cross_attn(y, x, x, attn_mask=keys_kept)  # L queries, S keys
        y = y + crossed  # (B, L, C)
        weights = {"encoder": encoder_weights, "decoder": decoder_weights, "cross": cross_weights}
        return self.unembedding(y), weights


def train_sorting(
    model: TinyEncoderDecoder,
    steps: int = 300,
    batch_size: int = 32,
    lr: float = 1e-2,
    lengths: tuple[int, int] = (5, 10),
    seed: int = 0,
) -> list[float]:
    """Train ``model`` in place to sort `sorting_batch` sequences, one fresh batch per step.

    The loss is the mean cross-entropy of the outputs that are not padding, with the correct
    previous outputs as the decoder's input (*teacher forcing*). AdamW (PyTorch's defaults but
    the learning rate) runs with a learning rate that falls linearly from ``lr`` to 0. The
    numbers are ``0 .. model.vocab_size - 4``; the last three tokens are the pad, start and end
    tokens.

    Args:
        model: The model; trained in place.
        steps: Optimiser steps.
        batch_size: Sequences per step.
        lr: The starting learning rate.
        lengths: Shortest and longest source length.
        seed: Seed of the data; seed the model's initial weights yourself.

    Returns:
        The loss of every step, on that step's batch (nats).

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> model = TinyEncoderDecoder(  # 10 numbers and 3 tokens
        ...     vocab_size=13, context_length=5, embed_dim=8, num_heads=1
        ... )
        >>> len(train_sorting(model, steps=2, batch_size=4, lengths=(2, 4)))
        2
    """
    _validate.count("steps", steps)
    num_values = model.vocab_size - 3
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 - step / steps)
    history = []
    model.train()
    for _ in range(steps):
        batch = sorting_batch(batch_size, num_values, lengths, generator)
        logits, _ = model(batch.source, batch.lengths, batch.decoder_input)
        loss = F.cross_entropy(logits.flatten(0, 1), batch.target.flatten(), ignore_index=num_values)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        history.append(loss.item())
    model.eval()
    return history


# --- PyTorch's module, and the playground's file -------------------------------------------------


def to_torch_multihead(attention: MultiHeadAttention) -> nn.MultiheadAttention:
    """A `torch.nn.MultiheadAttention` (``batch_first=True``) with the weights of ``attention``.

    The inverse of `MultiHeadAttention.from_torch`: the three input projections are stacked into
    PyTorch's one ``(3C, C)`` ``in_proj_weight``. Remember that PyTorch reads a boolean mask the
    other way round: ``True`` there means *may not attend*.

    Args:
        attention: An `attn_ref.multihead.MultiHeadAttention` with as many key/value heads as
            query heads (PyTorch's module has no grouped-query attention).

    Returns:
        The PyTorch module, on the same device and dtype.

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> ours = MultiHeadAttention(8, num_heads=2)
        >>> theirs = to_torch_multihead(ours)
        >>> x = torch.randn(2, 5, 8)
        >>> torch.allclose(ours(x, x, x)[0], theirs(x, x, x)[0], atol=1e-6)
        True
    """
    if attention.num_kv_heads != attention.num_heads:
        raise ValueError(
            f"attention must have num_kv_heads == num_heads, got {attention.num_kv_heads} and "
            f"{attention.num_heads}: torch.nn.MultiheadAttention has no grouped-query attention"
        )
    like = attention.q_proj.weight
    has_bias = attention.q_proj.bias is not None
    theirs = nn.MultiheadAttention(
        attention.embed_dim,
        attention.num_heads,
        bias=has_bias,
        batch_first=True,
        device=like.device,
        dtype=like.dtype,
    )
    projections = (attention.q_proj, attention.k_proj, attention.v_proj)
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([p.weight for p in projections]))  # three (C, C) -> (3C, C)
        theirs.out_proj.weight.copy_(attention.out_proj.weight)
        if has_bias:
            theirs.in_proj_bias.copy_(torch.cat([p.bias for p in projections]))  # (3C,)
            theirs.out_proj.bias.copy_(attention.out_proj.bias)
    return theirs


PLAYGROUND_FORMAT = "attn_ref induction model, attention only, int8"
_EMBEDDINGS = ("token_embedding.weight", "position_embedding.weight")
_PROJECTIONS = {0: ("q_proj", "k_proj", "v_proj", "out_proj"), 1: ("q_proj", "k_proj")}


def _playground_tensors(model: AttentionOnlyDecoder) -> dict[str, Tensor]:
    """The tensors the attention weights of both layers depend on, by their state_dict names."""
    state = model.state_dict()
    names = list(_EMBEDDINGS)
    for layer, projections in _PROJECTIONS.items():
        names += [f"layers.{layer}.{p}.{kind}" for p in projections for kind in ("weight", "bias")]
    return {name: state[name] for name in names}


def playground_json(model: AttentionOnlyDecoder) -> str:
    r"""The trained induction model's attention, as a small JSON document for a browser to run.

    It holds what the attention weights of both layers depend on, and nothing else: the token
    and position embeddings, all four projections of layer 0 (its output feeds layer 1), and
    the query and key projections of layer 1. The logits are not computable from it.

    Format (version 1), a JSON object:

    - ``"format"``: ``"attn_ref induction model, attention only, int8"``; ``"version"``: ``1``;
    - ``"vocab_size"``, ``"context_length"``, ``"embed_dim"``, ``"num_layers"``,
      ``"num_heads"``: the model's sizes (``head_dim`` is ``embed_dim / num_heads``);
    - ``"tensors"``: by PyTorch's ``state_dict`` names, for example
      ``"layers.0.q_proj.weight"``, each ``{"shape": [...], "scale": s, "int8": base64}``: its
      entries in row-major order as signed bytes $n$, each standing for $n \cdot s$. Linear
      layers are stored as ``nn.Linear`` stores them, $W^\top$: ``y = x @ weight.T + bias``.

    The browser's forward pass, for tokens $t_0 \dots t_{T-1}$: $x = E[t] + P[0..T-1]$; per
    layer and head $h$ (rows $h d_k \dots (h+1) d_k - 1$ of each projection), causal scaled
    dot-product attention; layer 0's heads concatenated, multiplied by ``out_proj`` and added
    to $x$ before layer 1. `model_from_playground_json` reads the file back into a model whose
    attention weights are the ones the browser should compute.

    Args:
        model: A two-layer `AttentionOnlyDecoder`.

    Returns:
        The JSON text.
    """
    if len(model.layers) != 2:
        raise ValueError(f"model must have 2 layers, got {len(model.layers)}")
    tensors = {}
    for name, tensor in _playground_tensors(model).items():
        values = tensor.detach().float().cpu()
        scale = float(f"{values.abs().max().item() / 127:.6g}") or 1.0  # the step between two levels
        levels = (values / scale).round().clamp(-127, 127).to(torch.int8)
        encoded = base64.b64encode(levels.numpy().tobytes()).decode("ascii")
        tensors[name] = {"shape": list(values.shape), "scale": scale, "int8": encoded}
    document = {
        "format": PLAYGROUND_FORMAT,
        "version": 1,
        "vocab_size": model.vocab_size,
        "context_length": model.context_length,
        "embed_dim": model.token_embedding.embedding_dim,
        "num_layers": len(model.layers),
        "num_heads": model.num_heads,
        "tensors": tensors,
    }
    return json.dumps(document, separators=(",", ":"))


def model_from_playground_json(text: str) -> AttentionOnlyDecoder:
    """The model `playground_json` wrote: its attention weights are the ones the file defines.

    Parameters the file does not hold (layer 1's value and output projections, and the
    unembedding) are zero, so its logits mean nothing.

    Args:
        text: The JSON text.

    Returns:
        An `AttentionOnlyDecoder` in evaluation mode.

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> model = AttentionOnlyDecoder(16, 8, embed_dim=8, num_layers=2, num_heads=2)
        >>> copy = model_from_playground_json(playground_json(model))
        >>> tokens = torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6]])
        >>> gap = (model(tokens)[1][1] - copy(tokens)[1][1]).abs().max()
        >>> gap < 0.05  # int8 weights: close
        tensor(True)
    """
    document = json.loads(text)
    if document.get("format") != PLAYGROUND_FORMAT or document.get("version") != 1:
        raise ValueError(f"text is not version 1 of {PLAYGROUND_FORMAT!r}")
    model = AttentionOnlyDecoder(
        document["vocab_size"],
        document["context_length"],
        document["embed_dim"],
        document["num_layers"],
        document["num_heads"],
    )
    state = {name: torch.zeros_like(tensor) for name, tensor in model.state_dict().items()}
    for name, stored in document["tensors"].items():
        levels = torch.frombuffer(bytearray(base64.b64decode(stored["int8"])), dtype=torch.int8)
        state[name] = (levels.float() * stored["scale"]).reshape(stored["shape"])  # rows, one after the other
    model.load_state_dict(state)
    return model.eval()
