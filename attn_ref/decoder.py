r"""A tiny decoder-only transformer, its key/value cache, and greedy generation.

A language model generates one token at a time: it reads the tokens so far,
predicts the next, appends it, and repeats. Without a cache, every step runs
the model on the whole sequence again. With a cache, every step runs it on
the one new token only: the keys and values of the earlier tokens do not
change (causal attention never lets an early position see a later one), so
they are computed once and kept in a `KVCache`.

`TinyDecoder` is the smallest model that shows this: token and position
embeddings, a few pre-norm blocks of causal multi-head attention and an MLP,
a final norm and an output head. `generate` decodes greedily, with or without
the cache, and returns the logits of every step so that the two can be
compared. `kv_cache_bytes` is the size of a cache, and `decoding_flops` the
work of one step, by formula.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attn_ref import _validate
from attn_ref.cache import KVCache
from attn_ref.masks import causal_mask
from attn_ref.multihead import MultiHeadAttention

__all__ = ["DecoderBlock", "TinyDecoder", "decoding_flops", "generate", "kv_cache_bytes"]


def kv_cache_bytes(
    num_layers: int,
    num_kv_heads: int,
    head_dim: int,
    num_tokens: int,
    bytes_per_number: int = 2,
    batch_size: int = 1,
) -> int:
    r"""Bytes of a key/value cache, by formula.

    $$
    \text{bytes} = 2 \times \text{layers} \times H_{kv} \times d_k \times
    \text{tokens} \times \text{bytes per number} \times B
    $$

    The factor 2 counts keys and values. Queries are not cached: each is used
    once, by the token that made it.

    Args:
        num_layers: Number of attention layers.
        num_kv_heads: Key/value heads per layer, ``H_kv``.
        head_dim: Size of each head, ``d_k``.
        num_tokens: Positions cached per sequence.
        bytes_per_number: 2 for float16 or bfloat16, 4 for float32.
        batch_size: Number of sequences ``B``.

    Returns:
        The size in bytes.

    Examples:
        A 7-billion-parameter-class shape (32 layers, 32 heads of 128, 16-bit
        numbers) at 4,096 tokens, checked by hand:
        $2 \cdot 2^5 \cdot 2^5 \cdot 2^7 \cdot 2^{12} \cdot 2 = 2^{31}$ bytes, 2 GiB.

        >>> kv_cache_bytes(
        ...     num_layers=32, num_kv_heads=32, head_dim=128, num_tokens=4096
        ... ) == 2**31
        True
        >>> kv_cache_bytes(
        ...     num_layers=32, num_kv_heads=8, head_dim=128, num_tokens=4096
        ... ) / 2**30
        0.5
    """
    sizes = {
        "num_layers": num_layers,
        "num_kv_heads": num_kv_heads,
        "head_dim": head_dim,
        "num_tokens": num_tokens,
        "bytes_per_number": bytes_per_number,
        "batch_size": batch_size,
    }
    for name, size in sizes.items():
        _validate.count(name, size, minimum=0)
    return 2 * num_layers * num_kv_heads * head_dim * num_tokens * bytes_per_number * batch_size


def decoding_flops(model: TinyDecoder, t: int, use_cache: bool) -> int:
    r"""Floating-point operations of the matrix products that choose the token after ``t`` tokens.

    Without a cache the model runs on all ``t`` positions; with one, on the
    last position only, against ``t`` keys. A product of an ``(a, b)`` and a
    ``(b, c)`` matrix counts $2 a b c$ operations (a multiply and an add), as
    `torch.utils.flop_counter.FlopCounterMode` counts them. Per layer and per
    position run, with width $C$, $H_{kv}$ key/value heads of size $d_k$ and
    $S = t$ keys:

    $$
    \underbrace{4 C^2}_{W_Q,\, W_O} + \underbrace{4 C H_{kv} d_k}_{W_K,\, W_V}
    + \underbrace{16 C^2}_{\text{MLP}} + \underbrace{4 C S}_{Q K^\top,\, A V}
    $$

    and the output head adds $2 C \lvert \mathcal{V} \rvert$ per position, for a
    vocabulary $\mathcal{V}$.
    So a step costs about $t$ times more without a cache, and its attention
    term grows like $t^2$ instead of $t$. Norms, softmax and GELU are not
    matrix products and are not counted.

    Args:
        model: The decoder.
        t: Tokens so far, ``1 <= t <= context_length``.
        use_cache: Whether the keys and values of the first ``t - 1`` tokens are cached.

    Returns:
        The number of operations.

    Examples:
        Two layers of width 16, a vocabulary of 10, the token after 8 tokens;
        checked by hand against the formula above:

        >>> model = TinyDecoder(
        ...     vocab_size=10, context_length=8, embed_dim=16, num_layers=2,
        ...     num_heads=4,
        ... )
        >>> cached = decoding_flops(model, 8, use_cache=True)
        >>> cached == 2 * (24 * 16**2 + 4 * 16 * 8) + 2 * 16 * 10
        True
        >>> decoding_flops(model, 8, use_cache=False) == (
        ...     8 * (2 * 24 * 16**2 + 2 * 16 * 10) + 2 * 4 * 16 * 8**2
        ... )
        True
    """
    _validate.count("t", t, maximum=model.context_length)
    attn = model.blocks[0].attn
    C, kv_width, vocab = attn.embed_dim, attn.num_kv_heads * attn.head_dim, model.head.out_features
    positions = 1 if use_cache else t  # positions the model runs on
    # Every position's scores against all t keys are computed; the causal mask hides some afterwards.
    per_layer = positions * (20 * C**2 + 4 * C * kv_width + 4 * C * t)
    return model.num_layers * per_layer + positions * 2 * C * vocab


class DecoderBlock(nn.Module):
    """One pre-norm transformer block: causal self-attention, then an MLP, each added back.

    ``x + attn(norm1(x))``, then ``x + mlp(norm2(x))``, as GPT-2 and
    ``torch.nn.TransformerEncoderLayer(norm_first=True)`` compute it; the MLP
    widens to ``4 C`` with a GELU in between.

    Args:
        embed_dim: Model width ``C``.
        num_heads: Query heads ``H``.
        num_kv_heads: Key/value heads ``H_kv``; defaults to ``num_heads``.
    """

    def __init__(self, embed_dim: int, num_heads: int, num_kv_heads: int | None = None) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(embed_dim)
        self.attn = MultiHeadAttention(embed_dim, num_heads, num_kv_heads=num_kv_heads)
        self.norm2 = nn.LayerNorm(embed_dim)
        self.mlp = nn.Sequential(
            nn.Linear(embed_dim, 4 * embed_dim), nn.GELU(), nn.Linear(4 * embed_dim, embed_dim)
        )

    def forward(self, x: Tensor, attn_mask: Tensor, cache: KVCache | None = None, layer: int = 0) -> Tensor:
        """``(B, T, C) -> (B, T, C)``; ``attn_mask`` is ``(T, S)``, ``S`` counting cached positions."""
        h = self.norm1(x)  # (B, T, C)
        x = x + self.attn(h, h, h, attn_mask=attn_mask, cache=cache, layer=layer)[0]  # (B, T, C)
        return x + self.mlp(self.norm2(x))  # (B, T, C)


class TinyDecoder(nn.Module):
    """A small decoder-only transformer: it maps tokens to the logits of the next token.

    Token and learned position embeddings are added, go through
    ``num_layers`` blocks (`DecoderBlock`) and a final layer norm, and an output
    head (a linear map without bias, not tied to the token embedding) turns
    each position's vector into one logit per vocabulary entry.

    Args:
        vocab_size: Number of distinct tokens.
        context_length: Most positions the model can read (the position table's size).
        embed_dim: Model width ``C``.
        num_layers: Number of blocks.
        num_heads: Query heads ``H`` per block.
        num_kv_heads: Key/value heads ``H_kv`` per block; defaults to ``num_heads``.

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> model = TinyDecoder(
        ...     vocab_size=10, context_length=8, embed_dim=16, num_layers=2,
        ...     num_heads=4,
        ... )
        >>> tokens = torch.tensor([[1, 2, 3]])
        >>> model(tokens).shape  # (B, T, vocab_size): a prediction after each position
        torch.Size([1, 3, 10])

        Run on the prompt, then on one new token with the cache, the model
        gives the last position's logits of the full sequence:

        >>> cache = KVCache(model.num_layers)
        >>> _ = model(tokens, cache)
        >>> step = model(torch.tensor([[4]]), cache)  # (1, 1, 10): the new position
        >>> full = model(torch.tensor([[1, 2, 3, 4]]))  # (1, 4, 10): every position
        >>> torch.allclose(step[:, -1], full[:, -1], atol=1e-6), cache.length
        (True, 4)
    """

    def __init__(
        self,
        vocab_size: int,
        context_length: int,
        embed_dim: int,
        num_layers: int,
        num_heads: int,
        num_kv_heads: int | None = None,
    ) -> None:
        super().__init__()
        _validate.counts(vocab_size=vocab_size, context_length=context_length, num_layers=num_layers)
        self.context_length = context_length
        self.num_layers = num_layers
        self.token_embedding = nn.Embedding(vocab_size, embed_dim)
        self.position_embedding = nn.Embedding(context_length, embed_dim)
        self.blocks = nn.ModuleList(
            DecoderBlock(embed_dim, num_heads, num_kv_heads) for _ in range(num_layers)
        )
        self.norm = nn.LayerNorm(embed_dim)
        self.head = nn.Linear(embed_dim, vocab_size, bias=False)

    def forward(self, tokens: Tensor, cache: KVCache | None = None) -> Tensor:
        """Logits for the next token after each position of ``tokens``.

        Args:
            tokens: ``(B, T)`` integer token ids. With a ``cache``, these are the
                positions after the cached ones.
            cache: Keys and values of the earlier positions; updated in place.

        Returns:
            ``(B, T, vocab_size)`` logits.
        """
        _validate.token_ids("tokens", tokens)
        if cache is not None and cache.num_layers != self.num_layers:
            raise ValueError(f"cache has num_layers={cache.num_layers}, expected {self.num_layers}")
        start = cache.length if cache is not None else 0  # positions already in the cache
        T = tokens.shape[1]
        if start + T > self.context_length:
            raise ValueError(
                f"tokens has T={T} positions after {start} cached ones, {start + T} in all; "
                f"the model's context_length is {self.context_length}"
            )
        positions = torch.arange(start, start + T, device=tokens.device)  # (T,)
        x = self.token_embedding(tokens) + self.position_embedding(positions)  # (B, T, C)
        mask = causal_mask(T, start + T, device=tokens.device, lower_right=True)  # (T, S)
        for layer, block in enumerate(self.blocks):
            x = block(x, mask, cache, layer)  # (B, T, C)
        return self.head(self.norm(x))  # (B, T, C) -> (B, T, vocab_size)


@torch.no_grad()
def generate(
    model: TinyDecoder, prompt: Tensor, max_new_tokens: int, use_cache: bool = True
) -> tuple[Tensor, Tensor]:
    """Greedy decoding: append the most likely next token, ``max_new_tokens`` times.

    Without a cache, each step runs the model on the whole sequence so far
    and keeps the last position's logits. With a cache, the first step runs
    it on the prompt and fills the cache; each later step runs it on the one
    token chosen last.

    Args:
        model: The decoder.
        prompt: ``(B, T)`` integer token ids, ``T >= 1``.
        max_new_tokens: Number of tokens to append.
        use_cache: Keep the keys and values of earlier positions in a `KVCache`.

    Returns:
        ``(tokens, logits)``: ``(B, T + max_new_tokens)`` ids, the prompt
        first, and ``(B, max_new_tokens, vocab_size)``, the logits each new
        token was chosen from.

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> model = TinyDecoder(
        ...     vocab_size=10, context_length=8, embed_dim=16, num_layers=2,
        ...     num_heads=4,
        ... )
        >>> prompt = torch.tensor([[1, 2, 3]])
        >>> tokens, logits = generate(model, prompt, max_new_tokens=4)
        >>> tokens.shape, logits.shape
        (torch.Size([1, 7]), torch.Size([1, 4, 10]))
        >>> plain, _ = generate(model, prompt, max_new_tokens=4, use_cache=False)
        >>> torch.equal(tokens, plain)
        True
    """
    _validate.token_ids("prompt", prompt, min_length=1)
    _validate.count("max_new_tokens", max_new_tokens, minimum=0)
    T = prompt.shape[1]
    if prompt.shape[1] > model.context_length:
        raise ValueError(
            f"prompt has T={T} tokens, more than the model's context_length={model.context_length}"
        )
    needed = T + max_new_tokens - 1  # the last new token is chosen, never read
    if max_new_tokens and needed > model.context_length:
        raise ValueError(
            f"prompt (T={T}) and max_new_tokens={max_new_tokens} need {needed} positions "
            f"(the last new token is never read); the model's context_length is {model.context_length}"
        )
    cache = KVCache(model.num_layers) if use_cache else None
    tokens = prompt
    new_input = prompt  # what the next step reads: all tokens, or only the uncached ones
    step_logits = []
    for _ in range(max_new_tokens):
        logits = model(new_input if use_cache else tokens, cache)[:, -1]  # (B, vocab_size)
        next_token = logits.argmax(dim=-1, keepdim=True)  # (B, 1)
        tokens = torch.cat([tokens, next_token], dim=1)  # (B, T + step + 1)
        new_input = next_token
        step_logits.append(logits)
    if not step_logits:
        empty = model.head.weight.new_zeros(prompt.shape[0], 0, model.head.out_features)
        return tokens, empty  # (B, 0, vocab_size)
    return tokens, torch.stack(step_logits, dim=1)  # (B, max_new_tokens, vocab_size)
