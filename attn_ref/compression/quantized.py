r"""Quantized caches: keys and values stored in 8, 4 or 2 bits per number, as KIVI stores them.

`quantize` stores a tensor with one scale and one zero point per token or per
channel (`QuantizedTensor`, its codes packed by `pack_codes`);
`QuantizedKVCache` keeps keys per channel and values per token (Liu et al., 2024).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from attn_ref import _validate
from attn_ref._numerics import compute_dtype

__all__ = ["QuantizedKVCache", "QuantizedTensor", "pack_codes", "quantize", "unpack_codes"]

BITS = (2, 4, 8)
PER = ("token", "channel")


def pack_codes(codes: Tensor, bits: int) -> Tensor:
    """Pack integer codes of ``bits`` bits, ``8 // bits`` to a byte, along the last dimension.

    Code ``j`` of each group of ``8 // bits`` goes to bits ``j * bits`` and up of its byte.

    Args:
        codes: ``(..., d)`` integers in ``[0, 2**bits)``, ``d`` a multiple of ``8 // bits``.
        bits: 2, 4 or 8.

    Returns:
        ``(..., d * bits // 8)`` ``torch.uint8``.

    Examples:
        >>> pack_codes(torch.tensor([1, 2, 3, 0]), bits=2)  # 1 + 2*4 + 3*16 + 0 = 57
        tensor([57], dtype=torch.uint8)
        >>> unpack_codes(pack_codes(torch.tensor([1, 2, 3, 0]), bits=2), bits=2)
        tensor([1, 2, 3, 0], dtype=torch.uint8)
    """
    _validate.one_of("bits", bits, BITS)
    if not isinstance(codes, Tensor) or codes.dtype.is_floating_point or codes.dtype == torch.bool:
        raise TypeError(f"codes must be an integer torch.Tensor, got {getattr(codes, 'dtype', type(codes))}")
    per_byte = 8 // bits
    _validate.divides(
        "8 // bits", per_byte, "codes' last dimension", codes.shape[-1], "codes fill whole bytes"
    )
    wide = codes.to(torch.int32)  # compared as uint8, 2**8 would wrap to 0
    if wide.numel() and (wide.min() < 0 or wide.max() >= 2**bits):
        raise ValueError(f"codes must lie in [0, {2**bits - 1}] for bits={bits}")
    grouped = wide.unflatten(-1, (-1, per_byte))  # (..., d) -> (..., d / per_byte, per_byte)
    shifts = torch.arange(per_byte, device=codes.device, dtype=torch.int32) * bits  # (per_byte,)
    return (grouped << shifts).sum(dim=-1).to(torch.uint8)  # the fields do not overlap: sum = or


def unpack_codes(packed: Tensor, bits: int) -> Tensor:
    """Undo `pack_codes`: ``(..., n)`` bytes to ``(..., n * 8 // bits)`` codes, ``torch.uint8``."""
    _validate.one_of("bits", bits, BITS)
    if not isinstance(packed, Tensor) or packed.dtype != torch.uint8:
        raise TypeError(f"packed must be a torch.uint8 tensor, got {getattr(packed, 'dtype', type(packed))}")
    per_byte = 8 // bits
    shifts = torch.arange(per_byte, device=packed.device, dtype=torch.int32) * bits  # (per_byte,)
    fields = (packed.to(torch.int32)[..., None] >> shifts) & (2**bits - 1)  # (..., n, per_byte)
    return fields.flatten(-2).to(torch.uint8)  # (..., n, per_byte) -> (..., n * per_byte)


@dataclass(frozen=True)
class QuantizedTensor:
    r"""A tensor stored as ``bits``-bit codes, with a scale and a zero point per token or per channel.

    Number $x$ is stored as the code $q = \operatorname{round}((x - z) / s)$ and read back
    as $q s + z$ (`dequantize`), where $z$ is the minimum and $s = (\max - \min) / (2^b - 1)$
    of its group: one token's channels (``per="token"``), or one channel over the
    tokens (``per="channel"``).

    Attributes:
        codes: ``(..., T, d * bits // 8)`` packed codes (`pack_codes`).
        scale: $s$: ``(..., T, 1)`` per token or ``(..., 1, d)`` per channel, in the original dtype.
        zero: $z$, the same shape and dtype.
        bits: Bits per code: 2, 4 or 8.
        per: ``"token"`` or ``"channel"``.
    """

    codes: Tensor
    scale: Tensor
    zero: Tensor
    bits: int
    per: str

    @property
    def nbytes(self) -> int:
        """Bytes of the codes, scales and zero points."""
        return self.codes.nbytes + self.scale.nbytes + self.zero.nbytes

    @property
    def shape(self) -> torch.Size:
        """The shape of the tensor it stores, ``(..., T, d)``."""
        return torch.Size((*self.codes.shape[:-1], self.codes.shape[-1] * 8 // self.bits))

    def dequantize(self) -> Tensor:
        """$q s + z$, in the dtype of the tensor that was quantized."""
        dtype = compute_dtype(self.scale.dtype)
        codes = unpack_codes(self.codes, self.bits).to(dtype)  # (..., T, d)
        return (codes * self.scale.to(dtype) + self.zero.to(dtype)).to(self.scale.dtype)


def quantize(x: Tensor, bits: int, per: str) -> QuantizedTensor:
    r"""Asymmetric min-max quantization of ``x``, per token or per channel.

    For each group (the ``d`` channels of one token with ``per="token"``; the ``T``
    tokens of one channel with ``per="channel"``), with $z = \min x$ and
    $s = (\max x - \min x) / (2^b - 1)$:

    $$
    q = \operatorname{round}\!\left(\frac{x - z}{s}\right) \in \{0, \dots, 2^b - 1\},
    \qquad \hat x = q s + z, \qquad \lvert \hat x - x \rvert \le s / 2 .
    $$

    This is KIVI's quantizer (Liu et al., 2024). A group whose numbers are all equal
    has $s = 0$ and is stored exactly.
    One large channel widens the range of every token it appears in, so per token
    every other channel of those tokens loses precision; per channel it widens
    only its own range.

    Args:
        x: ``(..., T, d)``, floating, ``d`` a multiple of ``8 // bits``.
        bits: 2, 4 or 8.
        per: ``"token"`` (a scale per row) or ``"channel"`` (a scale per column).

    Returns:
        A `QuantizedTensor`; its scales and zero points keep ``x``'s dtype.

    Examples:
        Two tokens with one large channel, in 2 bits (codes 0 to 3). Per token, the large
        channel sets each token's range, and the three small channels fall to its minimum:

        >>> x = torch.tensor(  # T = 2, d = 4
        ...     [[0.0, 1.0, 2.0, 100.0], [3.0, 4.0, 5.0, 103.0]]
        ... )
        >>> per_token = quantize(x, bits=2, per="token")
        >>> per_token.scale.flatten(), per_token.dequantize()
        (tensor([33.3333, 33.3333]), tensor([[  0.,   0.,   0., 100.],
                [  3.,   3.,   3., 103.]]))

        Per channel, each column spans 3, a scale of 1: every number is on its grid.

        >>> quantize(x, bits=2, per="channel").dequantize()
        tensor([[  0.,   1.,   2., 100.],
                [  3.,   4.,   5., 103.]])
        >>> per_token.nbytes  # 2 bytes of codes, then 2 scales and 2 zeros of 4 bytes
        18
    """
    _validate.tensor("x", x, min_ndim=2)
    _validate.one_of("bits", bits, BITS)
    _validate.one_of("per", per, PER)
    _validate.divides("8 // bits", 8 // bits, "x's d", x.shape[-1], "codes fill whole bytes")
    dim = -1 if per == "token" else -2  # the dimension along which one scale is shared
    xc = x.to(compute_dtype(x.dtype))
    low, high = xc.amin(dim=dim, keepdim=True), xc.amax(dim=dim, keepdim=True)  # (..., T, 1) or (..., 1, d)
    levels = 2**bits - 1
    scale = (high - low) / levels
    step = scale.masked_fill(scale == 0, 1.0)  # a constant group: every code is 0, read back as z
    codes = ((xc - low) / step).round().clamp(0, levels).to(torch.uint8)  # (..., T, d)
    return QuantizedTensor(pack_codes(codes, bits), scale.to(x.dtype), low.to(x.dtype), bits, per)


@dataclass
class _QuantizedStream:
    """The keys (or values) of one layer: quantized groups, and the newest positions still in float."""

    bits: int
    per: str
    group_size: int
    groups: list[QuantizedTensor] = field(default_factory=list)
    residual: Tensor | None = None  # (B, H_kv, r, d), r < group_size, per channel only

    def append(self, x: Tensor) -> Tensor:
        """Store ``x`` (``(B, H_kv, L, d)``); return every position stored, dequantized."""
        if self.per == "token":  # each token on its own: quantize at once
            self.groups.append(quantize(x, self.bits, "token"))
        else:  # per channel: a group of group_size tokens shares each channel's scale
            pending = x if self.residual is None else torch.cat([self.residual, x], dim=-2)
            full = pending.shape[-2] // self.group_size * self.group_size
            if full:
                grouped = pending[..., :full, :].unflatten(-2, (-1, self.group_size))  # (B, H, n, G, d)
                self.groups.append(quantize(grouped, self.bits, "channel"))
            self.residual = pending[..., full:, :] if full < pending.shape[-2] else None
        return self.read()

    def read(self) -> Tensor:
        parts = [
            group.dequantize().flatten(-3, -2) if group.per == "channel" else group.dequantize()
            for group in self.groups
        ]  # (B, H, n, G, d) -> (B, H, n*G, d) per channel
        if self.residual is not None:
            parts.append(self.residual)
        return torch.cat(parts, dim=-2)  # (B, H_kv, S, d)

    @property
    def nbytes(self) -> int:
        return sum(g.nbytes for g in self.groups) + (0 if self.residual is None else self.residual.nbytes)

    @property
    def length(self) -> int:
        quantized = sum(g.shape[-2] * (g.shape[-3] if g.per == "channel" else 1) for g in self.groups)
        return quantized + (0 if self.residual is None else self.residual.shape[-2])


class QuantizedKVCache:
    """A key/value cache whose numbers are stored in ``bits`` bits, as KIVI stores them.

    Keys are quantized per channel by default and values per token (Liu et al., 2024).
    Per token, a new position is quantized at once, with its own scale and zero point
    for each key/value head. Per channel, the scale of a channel is shared by a group
    of ``group_size`` positions: new positions wait in float (the *residual*) until a
    group is full, then the group is quantized. Scales, zero points and the residual
    keep the dtype of the keys and values given.

    `update` has the interface of `attn_ref.KVCache.update`: it returns every
    position of the layer, dequantized, for attention to read.

    Args:
        num_layers: Number of attention layers the cache serves.
        bits: 2, 4 or 8 bits per number.
        key_per: ``"channel"`` or ``"token"``.
        value_per: ``"token"`` or ``"channel"``.
        group_size: Positions that share a scale per channel.

    Examples:
        >>> cache = QuantizedKVCache(num_layers=1, bits=4, group_size=2)
        >>> x = torch.arange(24.0).reshape(1, 1, 3, 8)  # (B, H_kv, T, d)
        >>> keys, values = cache.update(0, x, x)
        >>> torch.equal(keys, x), cache.length  # these are on the 4-bit grids exactly
        (True, 3)

        Keys: 8 B of codes, 64 B of scales and zero points, 32 B of residual;
        values: 12 + 24 B.

        >>> cache.nbytes
        140
    """

    def __init__(
        self,
        num_layers: int,
        bits: int,
        key_per: str = "channel",
        value_per: str = "token",
        group_size: int = 32,
    ) -> None:
        self.num_layers = _validate.count("num_layers", num_layers)
        self.bits = _validate.one_of("bits", bits, BITS)
        self.key_per = _validate.one_of("key_per", key_per, PER)
        self.value_per = _validate.one_of("value_per", value_per, PER)
        self.group_size = _validate.count("group_size", group_size)
        self._keys: list[_QuantizedStream] = []
        self._values: list[_QuantizedStream] = []

    @property
    def length(self) -> int:
        """Number of positions that every layer holds (0 while the first call fills the layers)."""
        return self._keys[-1].length if len(self._keys) == self.num_layers else 0

    @property
    def nbytes(self) -> int:
        """Bytes held: codes, scales, zero points and the residual positions still in float."""
        return sum(stream.nbytes for stream in (*self._keys, *self._values))

    def update(self, layer: int, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Store the keys and values of new positions of ``layer``; return all of that layer's, dequantized.

        Args:
            layer: Index of the attention layer; during the first call the layers must come in order.
            key: ``(B, H_kv, L, d_k)``, ``d_k`` a multiple of ``8 // bits``.
            value: ``(B, H_kv, L, d_k)``, same shape as ``key``.

        Returns:
            ``(keys, values)``, each ``(B, H_kv, S, d_k)``, in ``key``'s dtype.
        """
        _validate.tensor("key", key)
        _validate.tensor("value", value)
        _validate.shape("key", key, (None, None, None, None), "(B, H_kv, L, d_k)")
        _validate.shape("value", value, tuple(key.shape), "(B, H_kv, L, d_k), the shape of key")
        if not 0 <= layer <= min(len(self._keys), self.num_layers - 1):
            raise ValueError(
                f"layer={layer} is out of order: the cache has {self.num_layers} layers and "
                f"{len(self._keys)} of them filled"
            )
        if layer == len(self._keys):
            self._keys.append(_QuantizedStream(self.bits, self.key_per, self.group_size))
            self._values.append(_QuantizedStream(self.bits, self.value_per, self.group_size))
        return self._keys[layer].append(key), self._values[layer].append(value)
