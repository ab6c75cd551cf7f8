r"""The sorting task: an encoder-decoder whose cross-attention learns to find the next number.

`sorting_batch` draws sequences of distinct numbers of random lengths, padded
into one batch (`SortingBatch`); `TinyEncoderDecoder` has one attention layer of
each kind, and `train_sorting` is its training recipe.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attn_ref import _validate
from attn_ref.masks import padding_mask
from attn_ref.multihead import MultiHeadAttention

__all__ = ["SortingBatch", "TinyEncoderDecoder", "sorting_batch", "train_sorting"]


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
        _validate.counts(vocab_size=vocab_size, context_length=context_length, embed_dim=embed_dim)
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
        _validate.ids_below(name, tokens, self.vocab_size)
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
