r"""One forward pass of a decoder over many requests, with the attention left to the caller.

`run_decoder` is `attn_ref.decoder.TinyDecoder`'s forward pass with two changes a
server needs: each token brings its own position, and an ``attend`` function
decides which keys each query sees, in whatever memory layout the engine keeps
them (`Attend`). `attention` is the attention every engine of `attn_ref.serving`
calls once it has gathered a request's keys.
"""

from __future__ import annotations

from collections.abc import Callable

import torch  # noqa: F401 (the examples below use it)
from torch import Tensor

from attn_ref import _validate
from attn_ref.decoder import TinyDecoder
from attn_ref.functional import scaled_dot_product_attention
from attn_ref.multihead import merge_heads, repeat_kv_heads, split_heads

__all__ = ["attention", "run_decoder"]

# attend(layer, q, k, v) -> output: see run_decoder
Attend = Callable[[int, Tensor, Tensor, Tensor], Tensor]


def run_decoder(model: TinyDecoder, tokens: Tensor, positions: Tensor, attend: Attend) -> Tensor:
    """The forward pass of ``model`` with the attention left to ``attend``.

    It computes what `TinyDecoder.forward` computes, layer by layer, but each
    token brings its own position, and ``attend`` decides which keys each
    query sees: the cached keys of its own request, in whatever memory
    layout. That is all a server changes in a model.

    Args:
        model: The decoder whose weights are used.
        tokens: ``(B, T)`` integer ids.
        positions: ``(B, T)`` integer positions, each below ``model.context_length``.
        attend: ``attend(layer, q, k, v)`` gets the new queries ``(B, H, T, d_k)``
            and the new keys and values ``(B, H_kv, T, d_k)`` of one layer,
            stores the keys and values where it keeps them, and returns the
            attention output ``(B, H, T, d_k)``.

    Returns:
        ``(B, T, vocab_size)`` logits.

    Examples:
        Attending to the tokens passed, with a causal mask, is the model's own forward pass:

        >>> from attn_ref.masks import causal_mask
        >>> _ = torch.manual_seed(0)
        >>> model = TinyDecoder(
        ...     vocab_size=10, context_length=8, embed_dim=16,
        ...     num_layers=2, num_heads=4,
        ... )
        >>> tokens = torch.tensor([[1, 2, 3]])
        >>> def attend(layer, q, k, v):
        ...     return attention(q, k, v, causal_mask(3))
        >>> logits = run_decoder(model, tokens, torch.arange(3)[None], attend)
        >>> torch.allclose(logits, model(tokens), atol=1e-6)
        True
    """
    _validate.token_ids("tokens", tokens)
    _validate.token_ids("positions", positions)
    if positions.shape != tokens.shape:
        raise ValueError(
            f"positions has shape {tuple(positions.shape)}, expected tokens' shape {tuple(tokens.shape)}"
        )
    if positions.numel() and (positions.min() < 0 or positions.max() >= model.context_length):
        raise ValueError(
            f"positions must lie in [0, {model.context_length}) (the model's context_length), "
            f"got {positions.min().item()}..{positions.max().item()}"
        )
    x = model.token_embedding(tokens) + model.position_embedding(positions)  # (B, T, C)
    for layer, block in enumerate(model.blocks):
        attn, h = block.attn, block.norm1(x)  # (B, T, C)
        q = split_heads(attn.q_proj(h), attn.num_heads)  # (B, T, C) -> (B, H, T, d_k)
        k = split_heads(attn.k_proj(h), attn.num_kv_heads)  # (B, T, H_kv * d_k) -> (B, H_kv, T, d_k)
        v = split_heads(attn.v_proj(h), attn.num_kv_heads)  # (B, T, H_kv * d_k) -> (B, H_kv, T, d_k)
        heads = attend(layer, q, k, v)  # (B, H, T, d_k)
        x = x + attn.out_proj(merge_heads(heads))  # (B, H, T, d_k) -> (B, T, C)
        x = x + block.mlp(block.norm2(x))  # (B, T, C)
    return model.head(model.norm(x))  # (B, T, C) -> (B, T, vocab_size)


def attention(q: Tensor, k: Tensor, v: Tensor, allowed: Tensor) -> Tensor:
    """``attn_ref``'s attention of ``q`` ``(..., H, L, d_k)`` over ``k``, ``v`` ``(..., H_kv, S, d_k)``.

    Key/value heads are repeated for their groups of query heads; ``allowed``
    is a boolean mask broadcastable to ``(..., H, L, S)``.

    Examples:
        >>> q = k = v = torch.ones(1, 2, 1, 4)
        >>> attention(q, k, v, torch.ones(1, 1, dtype=torch.bool)).shape
        torch.Size([1, 2, 1, 4])
    """
    num_heads = q.shape[-3]
    k = repeat_kv_heads(k, num_heads)  # (..., H_kv, S, d_k) -> (..., H, S, d_k)
    v = repeat_kv_heads(v, num_heads)  # (..., H_kv, S, d_k) -> (..., H, S, d_k)
    return scaled_dot_product_attention(q, k, v, attn_mask=allowed)[0]  # (..., H, L, d_k)
