r"""The induction task: sequences that repeat, and an attention-only decoder that learns to continue them.

`repeated_tokens` draws the sequences and `part_masks` splits their predictions
into the first part and the repeated part; `one_token_induction_losses` is the
loss an ideal induction head would get on them; `AttentionOnlyDecoder` is the
model, and `train_induction` its training recipe, which records the loss of each
part (`InductionHistory`, `next_token_losses`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attn_ref import _validate
from attn_ref.masks import causal_mask
from attn_ref.multihead import MultiHeadAttention

__all__ = [
    "AttentionOnlyDecoder",
    "InductionHistory",
    "next_token_losses",
    "one_token_induction_losses",
    "part_masks",
    "repeated_tokens",
    "train_induction",
]


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


def one_token_induction_losses(tokens: Tensor) -> Tensor:
    r"""The loss of a perfect one-token induction head at every prediction: how low copying can go.

    At position $i$ the head attends, in equal shares, to every key $j \le i$ whose previous token
    is the current one, $x_{j-1} = x_i$ (the keys of `prefix_matching_scores`), and predicts
    the tokens it finds there in the same shares, with nothing else. Its loss is

    $$
    -\ln \frac{\#\{j \le i : x_{j-1} = x_i,\ x_j = x_{i+1}\}}{\#\{j \le i : x_{j-1} = x_i\}}
    $$

    In the repeated part of `repeated_tokens`, the key $i - p + 1$ always holds the next token,
    so the loss is finite; it is above zero where the current token occurs more than once in a
    period, followed by different tokens: one token of context cannot tell which comes next.

    Args:
        tokens: ``(B, T)`` token ids.

    Returns:
        ``(B, T - 1)`` losses in nats (the prediction made at position $i$, of token $i + 1$):
        ``nan`` where no key matches, ``inf`` where no matching key holds the next token.

    Examples:
        ``7 8 7 9 7 8``: the last 7 occurred twice before, followed by 8 and by 9; half of
        its matches hold the next token, 8.

        >>> losses = one_token_induction_losses(torch.tensor([[7, 8, 7, 9, 7, 8]]))
        >>> round(losses[0, 4].item(), 4)  # at the last 7: ln 2
        0.6931
        >>> losses[0, :2]  # positions 0 and 1: no earlier copy of their token
        tensor([nan, nan])
    """
    _validate.token_ids("tokens", tokens, min_length=2)
    T = tokens.shape[1]
    before = torch.cat([torch.full_like(tokens[:, :1], -1), tokens[:, :-1]], dim=1)  # (B, T): x_{j-1}
    earlier = causal_mask(T, device=tokens.device)  # (T, T): key j <= query i
    matches = (before[:, None, :] == tokens[:, :, None]) & earlier  # (B, T, T): x_{j-1} == x_i
    matches = matches[:, :-1]  # (B, T - 1, T): the queries that predict a next token
    right = matches & (tokens[:, None, :] == tokens[:, 1:, None])  # (B, T - 1, T): x_j == x_{i+1}
    share = right.sum(dim=-1) / matches.sum(dim=-1)  # (B, T - 1): nan where nothing matches
    return -share.log()


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
        _validate.counts(
            vocab_size=vocab_size, context_length=context_length, embed_dim=embed_dim, num_layers=num_layers
        )
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
        _validate.ids_below("tokens", tokens, self.vocab_size)
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
