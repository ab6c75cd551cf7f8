"""A key/value cache that keeps only the last ``window`` positions of each layer.

`SlidingWindowCache` is a `attn_ref.cache.KVCache` that trims itself after every
update; attend to what it returns with `attn_ref.masks.sliding_window_mask`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch  # noqa: F401 (the examples below use it)
from torch import Tensor

from attn_ref import _validate
from attn_ref.cache import KVCache

__all__ = ["SlidingWindowCache"]


@dataclass
class SlidingWindowCache(KVCache):
    """A key/value cache that keeps only the last ``window`` positions of each layer.

    `update` returns the kept positions followed by the new ones: attend to them with
    `attn_ref.masks.sliding_window_mask`, the ``L`` new queries being the last ``L``
    of the ``S`` positions returned (for one new token, that leaves out only the
    first of ``window + 1``). Then it keeps the last ``window``, so the cache never holds more
    than ``window`` positions, however long the text (a rolling buffer, as in
    Mistral 7B; there each position overwrites the one ``window`` before it, in place).

    Attributes:
        num_layers: Number of attention layers the cache serves.
        window: Positions kept per layer.
        keys: One ``(B, H_kv, min(T, window), d_k)`` tensor per layer.
        values: The same for values.

    Examples:
        >>> cache = SlidingWindowCache(num_layers=1, window=4)
        >>> for _ in range(3):
        ...     new = torch.zeros(1, 1, 2, 8)
        ...     keys, _ = cache.update(0, new, new)
        >>> keys.shape[-2], cache.length  # 4 kept + 2 new returned; 4 kept after
        (6, 4)
    """

    window: int = field(kw_only=True)

    def __post_init__(self) -> None:
        super().__post_init__()
        _validate.count("window", self.window)

    def update(self, layer: int, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Append new positions to ``layer``, return the kept and new ones, keep the last ``window``.

        Args:
            layer: Index of the attention layer; during the first call the layers must come in order.
            key: ``(B, H_kv, L, d_k)``.
            value: ``(B, H_kv, L, d_k)``, same shape as ``key``.

        Returns:
            ``(keys, values)``, each ``(B, H_kv, min(T_before, window) + L, d_k)``.
        """
        all_keys, all_values = super().update(layer, key, value)  # (B, H_kv, kept + L, d_k)
        # the last window positions, (B, H_kv, <= window, d_k), copied: the slice would keep all
        self.keys[layer] = all_keys[..., -self.window :, :].clone()
        self.values[layer] = all_values[..., -self.window :, :].clone()
        return all_keys, all_values
