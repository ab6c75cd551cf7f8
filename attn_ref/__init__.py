"""attn_ref: a small, tested reference implementation of attention.

Every function here is checked against PyTorch's own implementation in the
test suite, and the docstring examples pin the numbers shown on the site.
"""

from attn_ref.cache import KVCache
from attn_ref.decoder import DecoderBlock, TinyDecoder, decoding_flops, generate, kv_cache_bytes
from attn_ref.functional import scaled_dot_product_attention, softmax
from attn_ref.linear_as_attention import linear_as_attention
from attn_ref.masks import causal_mask, padding_mask
from attn_ref.multihead import MultiHeadAttention, merge_heads, repeat_kv_heads, split_heads
from attn_ref.positional import alibi_bias, alibi_slopes, apply_rotary, sinusoidal_positional_encoding
from attn_ref.tiled import online_softmax, tiled_attention

__all__ = [
    "DecoderBlock",
    "KVCache",
    "MultiHeadAttention",
    "TinyDecoder",
    "alibi_bias",
    "alibi_slopes",
    "apply_rotary",
    "causal_mask",
    "decoding_flops",
    "generate",
    "kv_cache_bytes",
    "linear_as_attention",
    "merge_heads",
    "online_softmax",
    "padding_mask",
    "repeat_kv_heads",
    "scaled_dot_product_attention",
    "sinusoidal_positional_encoding",
    "softmax",
    "split_heads",
    "tiled_attention",
]
