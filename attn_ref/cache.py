"""The key/value cache of a decoder: the keys and values of the tokens seen so far, layer by layer.

`attn_ref.multihead.MultiHeadAttention` reads and extends it; `attn_ref.decoder` fills it while
it generates.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from attn_ref import _validate

__all__ = ["KVCache"]


@dataclass
class KVCache:
    """The keys and values of every attention layer, for the tokens seen so far.

    Layer ``i`` keeps ``keys[i]`` and ``values[i]``, each of shape
    ``(B, H_kv, T, d_k)``: one key and one value vector per key/value head
    and per position. `update` appends the new positions of one layer and
    returns all of them; the lists fill up during the first call.

    Attributes:
        num_layers: Number of attention layers the cache serves.
        keys: One ``(B, H_kv, T, d_k)`` tensor per layer filled so far.
        values: One ``(B, H_kv, T, d_k)`` tensor per layer filled so far.

    Examples:
        >>> cache = KVCache(num_layers=2)
        >>> cache.length
        0
        >>> k = v = torch.zeros(1, 2, 3, 4)  # B=1, H_kv=2, three positions, d_k=4
        >>> for layer in range(2):
        ...     _ = cache.update(layer, k, v)
        >>> cache.length, tuple(cache.keys[0].shape)
        (3, (1, 2, 3, 4))
        >>> keys, values = cache.update(  # one more position in layer 0
        ...     0, k[:, :, :1], v[:, :, :1]
        ... )
        >>> tuple(keys.shape)
        (1, 2, 4, 4)
        >>> cache.nbytes  # float32, 4 B each; layer 0 holds 4 positions, layer 1 3
        448
    """

    num_layers: int
    keys: list[Tensor] = field(default_factory=list)
    values: list[Tensor] = field(default_factory=list)

    def __post_init__(self) -> None:
        _validate.count("num_layers", self.num_layers)

    @property
    def length(self) -> int:
        """Number of positions that every layer holds (0 while the first call fills the layers)."""
        return self.keys[-1].shape[-2] if len(self.keys) == self.num_layers else 0

    @property
    def nbytes(self) -> int:
        """Bytes held by the cached keys and values."""
        return sum(t.nbytes for t in (*self.keys, *self.values))

    def update(self, layer: int, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Append the keys and values of new positions to ``layer``; return all of that layer's.

        Args:
            layer: Index of the attention layer, ``0 <= layer < num_layers``;
                during the first call the layers must come in order.
            key: ``(B, H_kv, T_new, d_k)``.
            value: ``(B, H_kv, T_new, d_k)``, same shape as ``key``.

        Returns:
            ``(keys, values)``, each ``(B, H_kv, T + T_new, d_k)``: the cached
            positions first, then the new ones.
        """
        _validate.tensor("key", key)
        _validate.tensor("value", value)
        if key.ndim != 4 or value.shape != key.shape:
            raise ValueError(
                f"key and value must both have shape (B, H_kv, T_new, d_k), got {tuple(key.shape)} "
                f"and {tuple(value.shape)}"
            )
        if not 0 <= layer <= min(len(self.keys), self.num_layers - 1):
            raise ValueError(
                f"layer={layer} is out of order: the cache has {self.num_layers} layers and "
                f"{len(self.keys)} of them filled, so layer must lie in [0, {min(len(self.keys), self.num_layers - 1)}]"
            )
        if layer == len(self.keys):  # the first call: this layer's first positions
            self.keys.append(key)
            self.values.append(value)
            return key, value
        B, H_kv, _, d_k = self.keys[layer].shape
        if (key.shape[0], key.shape[1], key.shape[3]) != (B, H_kv, d_k):
            raise ValueError(
                f"key has shape {tuple(key.shape)}, expected ({B}, {H_kv}, T_new, {d_k}) "
                f"to match layer {layer}'s cached (B, H_kv, T, d_k) = {tuple(self.keys[layer].shape)}"
            )
        self.keys[layer] = torch.cat([self.keys[layer], key], dim=-2)  # (B, H_kv, T + T_new, d_k)
        self.values[layer] = torch.cat([self.values[layer], value], dim=-2)  # (B, H_kv, T + T_new, d_k)
        return self.keys[layer], self.values[layer]
