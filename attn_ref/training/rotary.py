r"""An attention-only decoder whose only sense of position is RoPE, and copies of it at other frequencies.

`RotaryDecoder` is `attn_ref.training.AttentionOnlyDecoder` without its learned position table:
queries and keys are turned by RoPE in every layer, so nothing bounds the length it reads, and
`attn_ref.training.train_induction` trains it as it trains the other. `with_frequencies` copies
a trained model with other frequencies (those of `attn_ref.rope_scaling`, for instance) and an
optional factor on queries and keys, leaving its weights as they were.
"""

from __future__ import annotations

import copy

import torch
from torch import Tensor, nn

from attn_ref import _validate
from attn_ref.functional import scaled_dot_product_attention
from attn_ref.masks import causal_mask
from attn_ref.multihead import MultiHeadAttention, merge_heads, split_heads
from attn_ref.positional import apply_rotary, rope_frequencies

__all__ = ["RotaryDecoder", "with_frequencies"]


class RotaryDecoder(nn.Module):
    r"""A decoder-only transformer of attention layers, with RoPE on the queries and keys of each.

    Tokens are embedded into the residual stream with no position added. Each layer is a causal
    multi-head attention whose queries and keys, head by head, are turned by
    `attn_ref.positional.apply_rotary` at the model's ``frequencies`` and multiplied by its
    ``attention_scale`` (1 unless changed, as YaRN changes it); its output is added back to the
    stream. A linear map without bias turns the stream into one logit per token:

    $$
    \begin{aligned}
    q_h &= \operatorname{RoPE}(x W^Q_h) \cdot c, \quad
    k_h = \operatorname{RoPE}(x W^K_h) \cdot c, \\
    x_{\ell + 1} &= x_\ell + \operatorname{Concat}_h\bigl(
    \operatorname{softmax}(q_h k_h^\top / \sqrt{d_k})\, x W^V_h\bigr) W^O .
    \end{aligned}
    $$

    Position enters only through the angles of RoPE, and the score of a query and a key depends
    on their distance, not on where they sit. ``context_length`` is the length
    `attn_ref.training.train_induction` trains on; the model reads sequences of any length.

    Attributes:
        frequencies: ``(d_k/2,)`` float64, RoPE's $\theta_i$ of base ``base`` unless changed
            (`with_frequencies`).
        attention_scale: $c$, the factor on queries and keys.

    Args:
        vocab_size: Number of distinct tokens.
        context_length: Tokens per training sequence.
        embed_dim: Width ``C`` of the residual stream.
        num_layers: Number of attention layers.
        num_heads: Heads ``H`` per layer; must divide ``embed_dim``, with an even
            ``d_k = embed_dim / num_heads``.
        base: RoPE's base $b$, above 1.

    Raises:
        ValueError: A size is not a positive int, ``num_heads`` does not divide ``embed_dim``,
            ``d_k`` is odd, or ``base`` is not above 1.

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> model = RotaryDecoder(8, 6, embed_dim=8, num_layers=2, num_heads=2)
        >>> logits, weights = model(torch.tensor([[1, 2, 3, 1, 2, 3, 1, 2, 3]]))
        >>> logits.shape, weights[1].shape  # longer than context_length: allowed
        (torch.Size([1, 9, 8]), torch.Size([1, 2, 9, 9]))
        >>> model.frequencies  # d_k = 4: two pairs
        tensor([1.0000, 0.0100], dtype=torch.float64)
    """

    def __init__(
        self,
        vocab_size: int,
        context_length: int,
        embed_dim: int,
        num_layers: int,
        num_heads: int,
        base: float = 10000.0,
    ) -> None:
        super().__init__()
        _validate.counts(
            vocab_size=vocab_size, context_length=context_length, embed_dim=embed_dim, num_layers=num_layers
        )
        self.vocab_size = vocab_size
        self.context_length = context_length
        self.token_embedding = nn.Embedding(vocab_size, embed_dim)
        self.layers = nn.ModuleList(MultiHeadAttention(embed_dim, num_heads) for _ in range(num_layers))
        d_k = self.layers[0].head_dim
        if d_k % 2:
            raise ValueError(
                f"embed_dim / num_heads = {embed_dim} / {num_heads} = {d_k} must be even: RoPE turns "
                "pairs of a head's features"
            )
        self.unembedding = nn.Linear(embed_dim, vocab_size, bias=False)
        self.frequencies = rope_frequencies(d_k, base)  # (d_k/2,)
        self.attention_scale = 1.0

    @property
    def num_heads(self) -> int:
        """Heads per layer."""
        return self.layers[0].num_heads

    def forward(
        self, tokens: Tensor, masks: list[Tensor] | None = None, positions: Tensor | None = None
    ) -> tuple[Tensor, list[Tensor]]:
        """Next-token logits after every position, and every layer's attention weights.

        Args:
            tokens: ``(B, T)`` token ids, any ``T >= 1``.
            masks: One boolean mask per layer, broadcastable to ``(B, H, T, T)``, true where a
                query may attend to a key; causal unless given
                (`attn_ref.serving.decode_mask` builds one for a reduced cache).
            positions: ``(T,)`` the position RoPE gives each token; ``0 .. T - 1`` unless given.

        Returns:
            ``(logits, weights)``: ``(B, T, vocab_size)``, and one ``(B, H, T, T)`` tensor per layer.
        """
        _validate.token_ids("tokens", tokens, min_length=1)
        _validate.ids_below("tokens", tokens, self.vocab_size)
        T = tokens.shape[1]
        if masks is not None and len(masks) != len(self.layers):
            raise ValueError(f"masks must hold one mask per layer, {len(self.layers)}, got {len(masks)}")
        if positions is not None:
            _validate.shape("positions", positions, (T,), "(T,) one position per token")
        x = self.token_embedding(tokens)  # (B, T, C)
        causal = causal_mask(T, device=tokens.device)  # (T, T)
        weights = []
        for number, attention in enumerate(self.layers):
            H = attention.num_heads
            q = split_heads(attention.q_proj(x), H)  # (B, T, C) -> (B, H, T, d_k)
            k = split_heads(attention.k_proj(x), H)  # (B, T, C) -> (B, H, T, d_k)
            v = split_heads(attention.v_proj(x), H)  # (B, T, C) -> (B, H, T, d_k)
            q = apply_rotary(q, positions, frequencies=self.frequencies) * self.attention_scale
            k = apply_rotary(k, positions, frequencies=self.frequencies) * self.attention_scale
            mask = causal if masks is None else masks[number]
            heads, layer_weights = scaled_dot_product_attention(q, k, v, attn_mask=mask)
            x = x + attention.out_proj(merge_heads(heads))  # (B, H, T, d_k) -> (B, T, C)
            weights.append(layer_weights)
        return self.unembedding(x), weights


def with_frequencies(
    model: RotaryDecoder,
    frequencies: Tensor,
    attention_scale: float = 1.0,
    context_length: int | None = None,
) -> RotaryDecoder:
    """A copy of ``model`` that turns its queries and keys at other frequencies.

    The weights are copied as they are; the original model is left unchanged.

    Args:
        model: A `RotaryDecoder`.
        frequencies: ``(d_k/2,)`` positive frequencies, such as those of `attn_ref.rope_scaling`.
        attention_scale: The factor on queries and keys, positive (YaRN's
            `attn_ref.rope_scaling.yarn_attention_scale`).
        context_length: The copy's training length, for `attn_ref.training.train_induction`;
            ``model``'s unless given.

    Returns:
        The copy.

    Raises:
        ValueError: ``frequencies`` is not ``(d_k/2,)`` and positive, ``attention_scale`` is
            not positive, or ``context_length`` is not a positive int.

    Examples:
        >>> from attn_ref.rope_scaling import interpolated_frequencies
        >>> _ = torch.manual_seed(0)
        >>> model = RotaryDecoder(8, 6, 8, num_layers=1, num_heads=2, base=100.0)
        >>> theta = interpolated_frequencies(model.frequencies, factor=2)
        >>> slower = with_frequencies(model, theta, context_length=12)
        >>> slower.frequencies / model.frequencies, slower.context_length
        (tensor([0.5000, 0.5000], dtype=torch.float64), 12)
    """
    theta = _validate.frequencies("frequencies", frequencies, len(model.frequencies))
    scale = _validate.number("attention_scale", attention_scale, 0.0, above=True)
    changed = copy.deepcopy(model)
    changed.frequencies = theta.to(torch.float64)
    changed.attention_scale = scale
    if context_length is not None:
        changed.context_length = _validate.count("context_length", context_length)
    return changed
