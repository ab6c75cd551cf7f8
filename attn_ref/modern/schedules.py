r"""Layer schedules: which layers see everything and which see a window, and what the cache costs.

Configs name each layer's kind, ``"sliding_attention"`` or ``"full_attention"``
(Hugging Face's ``layer_types``); `tile_layer_types` repeats a pattern over the
layers. `AttentionConfig` holds what a published model's key/value cache depends on,
`PUBLISHED` the configurations of Gemma 2, Gemma 3, gpt-oss and nanochat, and
`kv_bytes` adds up their cache layer by layer with `attn_ref.kv_cache_bytes`.
`ScheduleCache` is the bill paid by real caches: a `attn_ref.KVCache` per full layer,
a `attn_ref.compression.SlidingWindowCache` per sliding one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from attn_ref import _validate
from attn_ref.cache import KVCache
from attn_ref.compression.sliding_window import SlidingWindowCache
from attn_ref.decoder import kv_cache_bytes

if TYPE_CHECKING:
    from attn_ref.modern.model import ModernDecoder

__all__ = [
    "FULL",
    "PUBLISHED",
    "SLIDING",
    "AttentionConfig",
    "ScheduleCache",
    "kv_bytes",
    "tile_layer_types",
]

SLIDING, FULL = "sliding_attention", "full_attention"  # Hugging Face's names in config.json


def tile_layer_types(pattern: Sequence[str], num_layers: int, last: str | None = None) -> tuple[str, ...]:
    """Repeat a pattern of layer kinds over ``num_layers`` layers, as configs write schedules.

    Args:
        pattern: Kinds, each `SLIDING` (``"sliding_attention"``) or `FULL`
            (``"full_attention"``), from the first layer on.
        num_layers: Layers in the model.
        last: Force the last layer's kind (nanochat keeps its last layer full).

    Returns:
        One kind per layer.

    Examples:
        Gemma 3: five sliding layers, then one full, from the first layer on.

        >>> kinds = tile_layer_types([SLIDING] * 5 + [FULL], 8)
        >>> [k[0] for k in kinds]  # s: sliding, f: full
        ['s', 's', 's', 's', 's', 'f', 's', 's']
    """
    _validate.count("num_layers", num_layers)
    pattern = tuple(pattern)
    if not pattern:
        raise ValueError("pattern must hold at least one kind, got an empty sequence")
    for kind in pattern:
        _validate.one_of("each kind in pattern", kind, (SLIDING, FULL))
    kinds = [pattern[i % len(pattern)] for i in range(num_layers)]
    if last is not None:
        kinds[-1] = _validate.one_of("last", last, (SLIDING, FULL))
    return tuple(kinds)


@dataclass(frozen=True)
class AttentionConfig:
    """What a model's key/value cache depends on, from its published configuration.

    Attributes:
        name: The model.
        layer_types: One kind per layer, `SLIDING` or `FULL`.
        num_kv_heads: ``num_key_value_heads``.
        head_dim: ``head_dim``.
        window: Keys a sliding layer's query sees, itself included.
        context_length: The longest context (``max_position_embeddings``).
        source: Where the values come from (a URL).

    Examples:
        >>> c = AttentionConfig("toy", (SLIDING, FULL), 2, 64, 128, 4096, "")
        >>> c.all_full().layer_types == (FULL, FULL)
        True
    """

    name: str
    layer_types: tuple[str, ...]
    num_kv_heads: int
    head_dim: int
    window: int | None
    context_length: int
    source: str

    def __post_init__(self) -> None:
        tile_layer_types(self.layer_types, len(self.layer_types))  # checks the kinds
        _validate.counts(
            num_kv_heads=self.num_kv_heads, head_dim=self.head_dim, context_length=self.context_length
        )
        if SLIDING in self.layer_types:
            _validate.count("window", self.window)

    def all_full(self) -> AttentionConfig:
        """The same model with every layer full: the bill without the schedule."""
        return AttentionConfig(
            f"{self.name}, all full",
            (FULL,) * len(self.layer_types),
            self.num_kv_heads,
            self.head_dim,
            None,
            self.context_length,
            self.source,
        )


def kv_bytes(config: AttentionConfig, num_tokens: int, bytes_per_number: int = 2) -> int:
    r"""Bytes of one sequence's key/value cache after ``num_tokens`` tokens, layer by layer.

    A full layer keeps every token; a sliding layer keeps the last $W$. Each
    layer's term is `attn_ref.kv_cache_bytes` with one layer:

    $$
    \begin{aligned}
    \text{bytes} &= \sum_{\ell} 2\, H_{kv}\, d_k\, b \cdot n_\ell, \\
    n_\ell &= T \text{ (full)}, \ \min(T, W) \text{ (sliding)}.
    \end{aligned}
    $$

    Args:
        config: The model.
        num_tokens: $T$.
        bytes_per_number: $b$: 2 for bfloat16.

    Returns:
        The size in bytes.

    Examples:
        gpt-oss-20b: 24 layers alternating sliding (128) and full, 8
        key/value heads of 64:

        >>> gpt_oss = next(c for c in PUBLISHED if c.name == "gpt-oss-20b")
        >>> kv_bytes(gpt_oss, 131_072) == 12 * 2 * 8 * 64 * 2 * (131_072 + 128)
        True
        >>> kv_bytes(gpt_oss.all_full(), 1)  # bytes per token, all layers full
        49152
    """
    if not isinstance(config, AttentionConfig):
        raise TypeError(f"config must be an AttentionConfig, got {type(config).__name__}")
    _validate.count("num_tokens", num_tokens, minimum=0)
    _validate.count("bytes_per_number", bytes_per_number)
    return sum(
        kv_cache_bytes(
            num_layers=1,
            num_kv_heads=config.num_kv_heads,
            head_dim=config.head_dim,
            num_tokens=num_tokens if kind == FULL else min(num_tokens, config.window),
            bytes_per_number=bytes_per_number,
        )
        for kind in config.layer_types
    )


_GEMMA = (
    "https://github.com/google/gemma_pytorch/blob/014acb7ac4563a5f77c76d7ff98f31b568c16508/gemma/config.py"
)
_GPT_OSS = (
    "https://github.com/openai/gpt-oss/blob/7b583341fe16729127f6d5b94a7b09ccae97e1a1/gpt_oss/torch/model.py"
)
_NANOCHAT = (
    "https://github.com/karpathy/nanochat/blob/92d63d4e8bb4df75c3b71618f31ddde2378b2bcd/nanochat/gpt.py"
)
_ALTERNATING = (SLIDING, FULL)  # Gemma 2 and gpt-oss: sliding first, then full
_FIVE_TO_ONE = (SLIDING,) * 5 + (FULL,)  # Gemma 3

PUBLISHED = (
    AttentionConfig("Gemma 2 2B", tile_layer_types(_ALTERNATING, 26), 4, 256, 4096, 8192, _GEMMA),
    AttentionConfig("Gemma 2 9B", tile_layer_types(_ALTERNATING, 42), 8, 256, 4096, 8192, _GEMMA),
    AttentionConfig("Gemma 2 27B", tile_layer_types(_ALTERNATING, 46), 16, 128, 4096, 8192, _GEMMA),
    AttentionConfig("Gemma 3 1B", tile_layer_types(_FIVE_TO_ONE, 26), 1, 256, 512, 32_768, _GEMMA),
    # The 4B config leaves max_position_embeddings at the class default 8192; the Gemma 3
    # report gives it a 128K context, as for the 12B and 27B.
    AttentionConfig("Gemma 3 4B", tile_layer_types(_FIVE_TO_ONE, 34), 4, 256, 1024, 131_072, _GEMMA),
    AttentionConfig("Gemma 3 12B", tile_layer_types(_FIVE_TO_ONE, 48), 8, 256, 1024, 131_072, _GEMMA),
    AttentionConfig("Gemma 3 27B", tile_layer_types(_FIVE_TO_ONE, 62), 16, 128, 1024, 131_072, _GEMMA),
    AttentionConfig("gpt-oss-20b", tile_layer_types(_ALTERNATING, 24), 8, 64, 128, 131_072, _GPT_OSS),
    AttentionConfig("gpt-oss-120b", tile_layer_types(_ALTERNATING, 36), 8, 64, 128, 131_072, _GPT_OSS),
    # nanochat d20 (base_train's defaults): 20 layers, 10 key/value heads of 128, "SSSL" with
    # the last layer full; FlashAttention's left window 512 sees 513 keys, itself included.
    AttentionConfig(
        "nanochat d20",
        tile_layer_types((SLIDING,) * 3 + (FULL,), 20, last=FULL),
        10,
        128,
        513,
        2048,
        _NANOCHAT,
    ),
)
"""The published configurations (quoted with their sources on the page *Layer schedules*)."""


@dataclass
class ScheduleCache:
    """One cache per layer, chosen by the layer's kind, and the positions read so far.

    A full layer keeps every key and value (`attn_ref.KVCache`); a sliding one
    keeps the last ``window`` (`attn_ref.compression.SlidingWindowCache`).
    ``windowed=False`` gives every layer a full cache: the window is then only
    a mask, the same tokens come out, and the memory is an all-full model's.

    Attributes:
        layers: One one-layer cache per layer of the model.
        seen: Positions read so far (a sliding cache stops at its window).

    Examples:
        >>> import torch
        >>> from attn_ref.modern import ModernDecoder
        >>> _ = torch.manual_seed(0)
        >>> model = ModernDecoder(
        ...     10, 32, embed_dim=8, num_heads=2, layer_types=(SLIDING, FULL),
        ...     window=4,
        ... )
        >>> cache = ScheduleCache.for_model(model)
        >>> _ = model(torch.randint(0, 10, (1, 12)), cache)
        >>> [c.length for c in cache.layers], cache.seen
        ([4, 12], 12)
        >>> cache.nbytes == 2 * (4 + 12) * 8 * 4  # keys and values, float32
        True
    """

    layers: list[KVCache]
    seen: int = field(default=0)

    @classmethod
    def for_model(cls, model: ModernDecoder, windowed: bool = True) -> ScheduleCache:
        """A fresh cache for ``model``; ``windowed=False`` keeps every position in every layer."""
        return cls(
            [
                SlidingWindowCache(1, window=layer.window)
                if windowed and layer.window is not None
                else KVCache(1)
                for layer in model.layers
            ]
        )

    @property
    def nbytes(self) -> int:
        """Bytes of every cached key and value."""
        return sum(cache.nbytes for cache in self.layers)
