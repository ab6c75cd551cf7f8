r"""Fewer bytes per cached token: latent attention, quantized caches, windows and linear attention.

A key/value cache keeps $2 H_{kv} d_k$ numbers per token and per layer
(`attn_ref.KVCache`). Each tool here keeps fewer, and gives something up for it:

- `MultiHeadLatentAttention` (DeepSeek-V2's multi-head latent attention, MLA) caches
  one compressed latent per token, plus a small key that carries the rotary
  positions, in a `LatentCache`. With ``absorbed=True`` it attends to the latents
  directly: the up-projections of the keys and values are folded into the query
  and output projections.
- `quantize` stores a tensor in 8, 4 or 2 bits per number, with one scale and one
  zero point per token or per channel (`QuantizedTensor`); `QuantizedKVCache` keeps
  keys per channel and values per token, as KIVI does (Liu et al., 2024).
- `SlidingWindowCache` keeps only the last ``window`` positions (`attn_ref.masks.sliding_window_mask`).
- `linear_attention` replaces the softmax by a feature map (Katharopoulos et al.,
  2020); `linear_attention_recurrent` computes the same causal output token by
  token from a state of fixed size (`LinearAttentionState`).
- `AssociativeRecall` is a one-layer model that recalls a value from its key, with
  softmax or linear attention, to measure what the fixed state costs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attn_ref import _validate
from attn_ref._numerics import compute_dtype
from attn_ref.cache import KVCache
from attn_ref.functional import scaled_dot_product_attention
from attn_ref.masks import causal_mask
from attn_ref.multihead import merge_heads
from attn_ref.positional import apply_rotary

__all__ = [
    "AssociativeRecall",
    "LatentCache",
    "LinearAttentionState",
    "MultiHeadLatentAttention",
    "QuantizedKVCache",
    "QuantizedTensor",
    "SlidingWindowCache",
    "elu_feature_map",
    "linear_attention",
    "linear_attention_recurrent",
    "pack_codes",
    "quantize",
    "unpack_codes",
]

BITS = (2, 4, 8)
PER = ("token", "channel")


# --- multi-head latent attention -----------------------------------------------------------


@dataclass
class LatentCache:
    """What multi-head latent attention caches: one latent and one rotary key per token and layer.

    Layer ``i`` keeps ``latents[i]``, of shape ``(B, S, d_c)``, and ``rope_keys[i]``,
    of shape ``(B, S, d_R)``: no head dimension, since every head reads the same
    latent and the same rotary key. `update` appends the new positions of one layer
    and returns all of them, as `attn_ref.KVCache.update` does.

    Attributes:
        num_layers: Number of attention layers the cache serves.
        latents: One ``(B, S, d_c)`` tensor per layer filled so far.
        rope_keys: One ``(B, S, d_R)`` tensor per layer filled so far.

    Examples:
        >>> cache = LatentCache(num_layers=1)
        >>> latents, rope_keys = cache.update(
        ...     0, torch.zeros(1, 3, 8), torch.zeros(1, 3, 2)
        ... )
        >>> cache.length, tuple(latents.shape)
        (3, (1, 3, 8))
        >>> cache.nbytes  # 3 positions of 8 + 2 float32 numbers
        120
    """

    num_layers: int
    latents: list[Tensor] = field(default_factory=list)
    rope_keys: list[Tensor] = field(default_factory=list)

    def __post_init__(self) -> None:
        _validate.count("num_layers", self.num_layers)

    @property
    def length(self) -> int:
        """Number of positions that every layer holds (0 while the first call fills the layers)."""
        return self.latents[-1].shape[1] if len(self.latents) == self.num_layers else 0

    @property
    def nbytes(self) -> int:
        """Bytes held by the cached latents and rotary keys."""
        return sum(t.nbytes for t in (*self.latents, *self.rope_keys))

    def layer_length(self, layer: int) -> int:
        """Positions that ``layer`` holds so far: the position of its next token."""
        return self.latents[layer].shape[1] if layer < len(self.latents) else 0

    def update(self, layer: int, latent: Tensor, rope_key: Tensor) -> tuple[Tensor, Tensor]:
        """Append the latents and rotary keys of new positions to ``layer``; return all of that layer's.

        Args:
            layer: Index of the attention layer; during the first call the layers must come in order.
            latent: ``(B, L, d_c)``.
            rope_key: ``(B, L, d_R)``, the same ``B`` and ``L``.

        Returns:
            ``(latents, rope_keys)``: ``(B, S, d_c)`` and ``(B, S, d_R)``, the cached positions first.
        """
        _validate.tensor("latent", latent)
        _validate.tensor("rope_key", rope_key)
        _validate.shape("latent", latent, (None, None, None), "(B, L, d_c)")
        _validate.shape("rope_key", rope_key, (latent.shape[0], latent.shape[1], None), "(B, L, d_R)")
        if not 0 <= layer <= min(len(self.latents), self.num_layers - 1):
            raise ValueError(
                f"layer={layer} is out of order: the cache has {self.num_layers} layers and "
                f"{len(self.latents)} of them filled"
            )
        if layer == len(self.latents):
            self.latents.append(latent)
            self.rope_keys.append(rope_key)
            return latent, rope_key
        B, _, d_c = self.latents[layer].shape
        d_R = self.rope_keys[layer].shape[-1]
        _validate.shape("latent", latent, (B, None, d_c), f"(B, L, d_c) matching layer {layer}'s cache")
        _validate.shape("rope_key", rope_key, (B, None, d_R), f"(B, L, d_R) matching layer {layer}'s cache")
        self.latents[layer] = torch.cat([self.latents[layer], latent], dim=1)  # (B, S + L, d_c)
        self.rope_keys[layer] = torch.cat([self.rope_keys[layer], rope_key], dim=1)  # (B, S + L, d_R)
        return self.latents[layer], self.rope_keys[layer]


class MultiHeadLatentAttention(nn.Module):
    r"""Multi-head latent attention (MLA), DeepSeek-V2's causal self-attention with a compressed cache.

    Each token $h_t$ (a row of ``x``) is compressed into one latent
    $c_t = h_t W_{DKV}$ of ``kv_lora_rank`` $= d_c$ numbers. Every head's key
    and value are up-projected from it:

    $$
    k^C_{t,i} = c_t W_{UK,i}, \qquad v_{t,i} = c_t W_{UV,i}.
    $$

    Rotary positions (RoPE) travel separately: each head has a rotated query
    part $q^R_{t,i}$ and all heads share one rotated key $k^R_t = \operatorname{RoPE}(h_t W_{KR})$
    of ``qk_rope_head_dim`` $= d_R$ numbers. Head $i$ attends with
    $q_{t,i} = [q^C_{t,i}; q^R_{t,i}]$ and $k_{j,i} = [k^C_{j,i}; k^R_j]$, and the
    scores are divided by $\sqrt{d_\text{nope} + d_R}$ (DeepSeek-V2, equations 9 to 19,
    with row vectors, as on this site). The cache holds $c_t$ and $k^R_t$ only:
    $d_c + d_R$ numbers per token and layer, whatever the number of heads.

    With ``absorbed=True`` the keys and values are never formed. The score of head
    $i$ is $q^C_{t,i} \cdot c_j W_{UK,i} = (q^C_{t,i} W_{UK,i}^\top) \cdot c_j$, so
    $W_{UK,i}^\top$ joins the query projection; and the output
    $\sum_j a_{tj} c_j W_{UV,i} W_{O,i}$ lets $W_{UV,i}$ join the output projection
    $W_{O,i}$ (`absorbed_weights`). Attention then runs on the cached latents
    themselves, like multi-query attention with keys $[c_j; k^R_j]$ and values $c_j$.
    In exact arithmetic both forms give the same output.

    The projections have no biases, as in the paper's equations. DeepSeek's released
    code also normalises the latents (RMSNorm); that is left out here.

    Args:
        embed_dim: Model width ``C``.
        num_heads: Number of heads ``H``.
        kv_lora_rank: Size of the cached latent, ``d_c``.
        qk_nope_head_dim: Size of each head's query and key part without positions.
        qk_rope_head_dim: Size of the rotary part ``d_R`` (even), of each query head and of the shared key.
        v_head_dim: Size of each head's value.
        q_lora_rank: Size of the queries' own latent (DeepSeek-V2 compresses them too, to save
            activations in training, not cache); ``None`` projects the queries directly.
        rope_base: The base of the rotary frequencies.

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> mla = MultiHeadLatentAttention(16, num_heads=4, kv_lora_rank=8,
        ...     qk_nope_head_dim=4, qk_rope_head_dim=2, v_head_dim=4)
        >>> x = torch.randn(1, 5, 16)
        >>> cache = LatentCache(num_layers=1)
        >>> y = mla(x, cache=cache)
        >>> latents, rope_keys = cache.latents[0], cache.rope_keys[0]
        >>> tuple(y.shape), tuple(latents.shape), tuple(rope_keys.shape)
        ((1, 5, 16), (1, 5, 8), (1, 5, 2))
        >>> torch.allclose(mla(x, absorbed=True), y, atol=1e-6)
        True
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        kv_lora_rank: int,
        qk_nope_head_dim: int,
        qk_rope_head_dim: int,
        v_head_dim: int,
        q_lora_rank: int | None = None,
        rope_base: float = 10000.0,
    ) -> None:
        super().__init__()
        for name, size in (
            ("embed_dim", embed_dim),
            ("num_heads", num_heads),
            ("kv_lora_rank", kv_lora_rank),
            ("qk_nope_head_dim", qk_nope_head_dim),
            ("qk_rope_head_dim", qk_rope_head_dim),
            ("v_head_dim", v_head_dim),
        ):
            _validate.count(name, size)
        _validate.divides("2", 2, "qk_rope_head_dim", qk_rope_head_dim, "RoPE rotates pairs of features")
        if q_lora_rank is not None:
            _validate.count("q_lora_rank", q_lora_rank)
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.kv_lora_rank = kv_lora_rank
        self.qk_nope_head_dim = qk_nope_head_dim
        self.qk_rope_head_dim = qk_rope_head_dim
        self.v_head_dim = v_head_dim
        self.q_lora_rank = q_lora_rank
        self.rope_base = rope_base
        q_in = q_lora_rank or embed_dim
        self.q_down = nn.Linear(embed_dim, q_lora_rank, bias=False) if q_lora_rank else nn.Identity()
        self.q_up = nn.Linear(q_in, num_heads * (qk_nope_head_dim + qk_rope_head_dim), bias=False)
        self.kv_down = nn.Linear(embed_dim, kv_lora_rank, bias=False)  # W_DKV
        self.k_rope_proj = nn.Linear(embed_dim, qk_rope_head_dim, bias=False)  # W_KR
        self.k_up = nn.Linear(kv_lora_rank, num_heads * qk_nope_head_dim, bias=False)  # W_UK
        self.v_up = nn.Linear(kv_lora_rank, num_heads * v_head_dim, bias=False)  # W_UV
        self.out_proj = nn.Linear(num_heads * v_head_dim, embed_dim, bias=False)  # W_O

    @property
    def scale(self) -> float:
        r"""$1 / \sqrt{d_\text{nope} + d_R}$: the scale of the scores, in both forms."""
        return 1.0 / math.sqrt(self.qk_nope_head_dim + self.qk_rope_head_dim)

    def absorbed_weights(self) -> tuple[Tensor, Tensor]:
        r"""The query and output projections with the up-projections folded in.

        Returns:
            ``(query_weight, output_weight)``: per head $i$,
            $W_{UQ,i} W_{UK,i}^\top$ of shape ``(H, q_in, d_c)`` (``q_in`` is
            ``q_lora_rank``, or ``embed_dim`` without one), and $W_{UV,i} W_{O,i}$
            of shape ``(H, d_c, C)``.
        """
        H, d_n, d_R, d_v = self.num_heads, self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim
        d_c = self.kv_lora_rank
        # nn.Linear stores W^T, of shape (out, in): .T gives W, of shape (in, out)
        w_uq = self.q_up.weight.T.unflatten(1, (H, d_n + d_R))[..., :d_n]  # (q_in, H, d_n)
        w_uk = self.k_up.weight.T.unflatten(1, (H, d_n))  # (d_c, H, d_n)
        w_uv = self.v_up.weight.T.unflatten(1, (H, d_v))  # (d_c, H, d_v)
        w_o = self.out_proj.weight.T.unflatten(0, (H, d_v))  # (H, d_v, C)
        query_weight = torch.einsum("rhn,chn->hrc", w_uq, w_uk)  # (H, q_in, d_c)
        output_weight = torch.einsum("chv,hve->hce", w_uv, w_o)  # (H, d_c, C)
        assert query_weight.shape[-1] == output_weight.shape[1] == d_c
        return query_weight, output_weight

    def forward(
        self, x: Tensor, cache: LatentCache | None = None, layer: int = 0, absorbed: bool = False
    ) -> Tensor:
        """Causal self-attention of the new tokens ``x`` over the cached ones and themselves.

        Args:
            x: ``(B, L, C)``: the new tokens, which follow the ``S - L`` positions already
                cached for ``layer`` (the rotary positions continue from there).
            cache: Latents and rotary keys of earlier calls, updated in place.
            layer: Which of the cache's layers this attention reads and writes.
            absorbed: Attend to the latents with the absorbed projections instead of
                forming every head's keys and values.

        Returns:
            ``(B, L, C)``.
        """
        _validate.tensor("x", x)
        _validate.shape("x", x, (None, None, self.embed_dim), "(B, L, embed_dim)")
        B, L, _ = x.shape
        H, d_n, d_R, d_v = self.num_heads, self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim
        start = cache.layer_length(layer) if cache is not None else 0
        positions = torch.arange(start, start + L, device=x.device)  # (L,)
        rope = {"positions": positions, "base": self.rope_base}

        q_in = self.q_down(x)  # (B, L, q_in)
        q = self.q_up(q_in).view(B, L, H, d_n + d_R).transpose(1, 2)  # (B, L, H, .) -> (B, H, L, d_n + d_R)
        q_nope, q_rope = q.split([d_n, d_R], dim=-1)  # (B, H, L, d_n), (B, H, L, d_R)
        q_rope = apply_rotary(q_rope, **rope)
        latent = self.kv_down(x)  # (B, L, d_c)
        rope_key = apply_rotary(self.k_rope_proj(x), **rope)  # (B, L, d_R)
        if cache is not None:
            latent, rope_key = cache.update(layer, latent, rope_key)  # (B, S, d_c), (B, S, d_R)
        S = latent.shape[1]
        mask = causal_mask(L, S, device=x.device, lower_right=True)  # the new tokens are the last L

        if not absorbed:
            k_nope = self.k_up(latent).view(B, S, H, d_n).transpose(1, 2)  # (B, S, H*d_n) -> (B, H, S, d_n)
            value = self.v_up(latent).view(B, S, H, d_v).transpose(1, 2)  # (B, S, H*d_v) -> (B, H, S, d_v)
            k_rope = rope_key[:, None].expand(B, H, S, d_R)  # (B, S, d_R) -> (B, H, S, d_R), not copied
            query = torch.cat([q_nope, q_rope], dim=-1)  # (B, H, L, d_n + d_R)
            key = torch.cat([k_nope, k_rope], dim=-1)  # (B, H, S, d_n + d_R)
            heads, _ = scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=self.scale)
            return self.out_proj(merge_heads(heads))  # (B, H, L, d_v) -> (B, L, H*d_v) -> (B, L, C)

        query_weight, output_weight = self.absorbed_weights()
        q_latent = torch.einsum("blr,hrc->bhlc", q_in, query_weight)  # (B, H, L, d_c)
        query = torch.cat([q_latent, q_rope], dim=-1)  # (B, H, L, d_c + d_R)
        key = torch.cat([latent, rope_key], dim=-1)[:, None]  # (B, 1, S, d_c + d_R): one key head
        value = latent[:, None]  # (B, 1, S, d_c): the latents are the values
        d_c = self.kv_lora_rank
        key, value = key.expand(B, H, S, d_c + d_R), value.expand(B, H, S, d_c)  # shared, not copied
        heads, _ = scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=self.scale)
        return torch.einsum("bhlc,hce->ble", heads, output_weight)  # (B, H, L, d_c) -> (B, L, C)


# --- quantized caches ----------------------------------------------------------------------


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


# --- sliding window ----------------------------------------------------------------------------


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


# --- linear attention ---------------------------------------------------------------------------


def elu_feature_map(x: Tensor) -> Tensor:
    r"""$\phi(x) = \operatorname{elu}(x) + 1$, elementwise: positive everywhere (Katharopoulos et al., 2020).

    Examples:
        >>> elu_feature_map(torch.tensor([-1.0, 0.0, 2.0]))
        tensor([0.3679, 1.0000, 3.0000])
    """
    return F.elu(x) + 1.0


def linear_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    *,
    is_causal: bool = False,
    feature_map: Callable[[Tensor], Tensor] = elu_feature_map,
) -> tuple[Tensor, Tensor]:
    r"""Attention with a feature map in place of the softmax, in its quadratic form.

    $$
    o_i = \frac{\sum_j \phi(q_i) \cdot \phi(k_j)\; v_j}{\sum_j \phi(q_i) \cdot \phi(k_j)}
    $$

    over every key $j$, or over $j \le i$ with ``is_causal=True``. The similarity
    $\phi(q_i) \cdot \phi(k_j)$ replaces $e^{q_i \cdot k_j / \sqrt{d_k}}$; with a
    positive $\phi$ every weight is positive and each row sums to one. This form
    builds the ``(L, S)`` weights, as `attn_ref.scaled_dot_product_attention` does;
    `linear_attention_recurrent` gives the causal output without them.

    Args:
        query: ``(..., L, d_k)``.
        key: ``(..., S, d_k)``, same leading dimensions as ``query``.
        value: ``(..., S, d_v)``.
        is_causal: Query $i$ sees keys $0, \dots, i$ only; needs ``L == S``.
        feature_map: $\phi$, applied to queries and keys; it must be positive.

    Returns:
        ``(output, weights)``: ``(..., L, d_v)`` and ``(..., L, S)``.

    Examples:
        >>> q = k = torch.zeros(1, 3, 2)  # phi(0) = 1: every key weighs the same
        >>> v = torch.tensor([[[3.0], [6.0], [9.0]]])
        >>> linear_attention(q, k, v)[0].flatten()
        tensor([6., 6., 6.])
        >>> linear_attention(q, k, v, is_causal=True)[0].flatten()  # the mean so far
        tensor([3.0000, 4.5000, 6.0000])
    """
    _, L, S, _ = _validate.attention_inputs(query, key, value, None, is_causal)
    if is_causal and L != S:
        raise ValueError(f"is_causal=True needs one query per key, L == S, got L={L}, S={S}")
    dtype = compute_dtype(query.dtype)
    phi_q, phi_k = feature_map(query.to(dtype)), feature_map(key.to(dtype))  # (..., L, d_k), (..., S, d_k)
    weights = phi_q @ phi_k.transpose(-2, -1)  # (..., L, d_k) @ (..., d_k, S) -> (..., L, S)
    if is_causal:
        weights = weights.masked_fill(~causal_mask(L, S, device=query.device), 0.0)
    weights = weights / weights.sum(dim=-1, keepdim=True)
    output = weights @ value.to(dtype)  # (..., L, S) @ (..., S, d_v) -> (..., L, d_v)
    return output.to(query.dtype), weights.to(query.dtype)


@dataclass(frozen=True)
class LinearAttentionState:
    r"""What causal linear attention keeps between tokens: a fixed size, however many tokens came.

    Attributes:
        state: $\sum_j \phi(k_j)^\top v_j$ over the tokens read, ``(..., d_k, d_v)``.
        normalizer: $\sum_j \phi(k_j)$, ``(..., d_k)``.
        length: Number of tokens read.
    """

    state: Tensor
    normalizer: Tensor
    length: int

    @property
    def nbytes(self) -> int:
        """Bytes of the state and the normalizer."""
        return self.state.nbytes + self.normalizer.nbytes


def linear_attention_recurrent(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    state: LinearAttentionState | None = None,
    *,
    feature_map: Callable[[Tensor], Tensor] = elu_feature_map,
) -> tuple[Tensor, LinearAttentionState]:
    r"""Causal linear attention, token by token, from a state of fixed size.

    For token $t$, with $S_t = S_{t-1} + \phi(k_t)^\top v_t$ (a $d_k \times d_v$
    matrix) and $z_t = z_{t-1} + \phi(k_t)$:

    $$
    o_t = \frac{\phi(q_t)\, S_t}{\phi(q_t) \cdot z_t},
    $$

    which is `linear_attention` with ``is_causal=True``, regrouped: the sums over
    $j \le t$ are kept instead of recomputed (Katharopoulos et al., 2020, section 3.4).
    A language model generating text keeps $(S, z)$ per head and layer instead of a
    key/value cache.

    Args:
        query: ``(..., T, d_k)``: ``T`` new tokens, in order.
        key: ``(..., T, d_k)``.
        value: ``(..., T, d_v)``.
        state: The state after earlier tokens; ``None`` starts from zero.
        feature_map: $\phi$; it must be positive.

    Returns:
        ``(output, state)``: ``(..., T, d_v)`` and the `LinearAttentionState` after the last token.

    Examples:
        >>> q = k = torch.zeros(1, 3, 2)
        >>> v = torch.tensor([[[3.0], [6.0], [9.0]]])
        >>> out, state = linear_attention_recurrent(q, k, v)
        >>> out.flatten(), tuple(state.state.shape), state.length
        (tensor([3.0000, 4.5000, 6.0000]), (1, 2, 1), 3)
        >>> out2, _ = linear_attention_recurrent(  # a 4th token
        ...     q[:, :1], k[:, :1], v[:, :1], state
        ... )
        >>> out2.flatten()  # (3 + 6 + 9 + 3) / 4
        tensor([5.2500])
    """
    _, L, S, d_k = _validate.attention_inputs(query, key, value, None, False)
    if L != S:
        raise ValueError(f"query and key must hold the same T tokens, got L={L} and S={S}")
    _validate.count("T (the tokens in query)", L)
    dtype = compute_dtype(query.dtype)
    phi_q, phi_k = feature_map(query.to(dtype)), feature_map(key.to(dtype))  # (..., T, d_k)
    v = value.to(dtype)
    batch, d_v = query.shape[:-2], value.shape[-1]
    if state is None:
        S_t = torch.zeros((*batch, d_k, d_v), dtype=dtype, device=query.device)  # (..., d_k, d_v)
        z_t = torch.zeros((*batch, d_k), dtype=dtype, device=query.device)  # (..., d_k)
        length = 0
    else:
        _validate.shape("state.state", state.state, (*batch, d_k, d_v), "(..., d_k, d_v) of these inputs")
        _validate.shape("state.normalizer", state.normalizer, (*batch, d_k), "(..., d_k) of these inputs")
        S_t, z_t, length = state.state.to(dtype), state.normalizer.to(dtype), state.length
    outputs = []
    for t in range(L):
        S_t = S_t + phi_k[..., t, :, None] * v[..., t, None, :]  # (..., d_k, 1) * (..., 1, d_v)
        z_t = z_t + phi_k[..., t, :]
        numerator = (phi_q[..., t, None, :] @ S_t).squeeze(
            -2
        )  # (..., 1, d_k) @ (..., d_k, d_v) -> (..., d_v)
        denominator = (phi_q[..., t, :] * z_t).sum(dim=-1, keepdim=True)  # (..., 1)
        outputs.append(numerator / denominator)
    output = torch.stack(outputs, dim=-2)  # T of (..., d_v) -> (..., T, d_v)
    kept = LinearAttentionState(S_t.to(query.dtype), z_t.to(query.dtype), length + L)
    return output.to(query.dtype), kept


# --- associative recall ----------------------------------------------------------------------


class AssociativeRecall(nn.Module):
    r"""One attention layer that must recall: given key-value pairs, name the value of each query key.

    Position $j$ of the context holds one pair, embedded as
    $m_j = E_K[\text{key}_j] + E_V[\text{value}_j]$. A query is a key alone,
    $E_K[\text{query}]$. One head of size ``head_dim`` attends from the queries
    to the context, with queries $E_K[\cdot] W_Q$, keys $m W_K$ and values
    $m W_V$, and a linear layer turns what it read into a score per value.

    With ``attention="softmax"`` the head is scaled dot-product attention; with
    ``"linear"``, `linear_attention` with $\phi = \operatorname{elu} + 1$. The two
    models have the same parameters; only the way the scores become weights differs.
    Generating, the softmax model would cache every pair's key and value
    (``head_dim + embed_dim`` numbers a pair); the linear one, a
    ``head_dim`` by ``embed_dim`` state, whatever the number of pairs.

    Args:
        num_keys: Size of the keys' vocabulary.
        num_values: Size of the values' vocabulary, and number of scores.
        embed_dim: Width of the embeddings and of the values read, ``C``.
        head_dim: Width of the queries and keys, ``d_k``.
        attention: ``"softmax"`` or ``"linear"``.

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> model = AssociativeRecall(
        ...     num_keys=8, num_values=8, embed_dim=16, head_dim=4
        ... )
        >>> keys, values = torch.tensor([[3, 5, 1]]), torch.tensor([[0, 7, 2]])
        >>> queries = torch.tensor([[5, 3]])
        >>> model(keys, values, queries=queries).shape  # (B, Q, num_values)
        torch.Size([1, 2, 8])
    """

    def __init__(
        self, num_keys: int, num_values: int, embed_dim: int, head_dim: int, attention: str = "softmax"
    ) -> None:
        super().__init__()
        for name, size in (
            ("num_keys", num_keys),
            ("num_values", num_values),
            ("embed_dim", embed_dim),
            ("head_dim", head_dim),
        ):
            _validate.count(name, size)
        self.attention = _validate.one_of("attention", attention, ("softmax", "linear"))
        self.key_embed = nn.Embedding(num_keys, embed_dim)
        self.value_embed = nn.Embedding(num_values, embed_dim)
        self.q_proj = nn.Linear(embed_dim, head_dim, bias=False)
        self.k_proj = nn.Linear(embed_dim, head_dim, bias=False)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.head = nn.Linear(embed_dim, num_values)

    def forward(self, keys: Tensor, values: Tensor, queries: Tensor) -> Tensor:
        """Scores of every value for every query.

        Args:
            keys: ``(B, N)`` key ids of the ``N`` pairs.
            values: ``(B, N)`` value ids.
            queries: ``(B, Q)`` key ids to look up.

        Returns:
            ``(B, Q, num_values)`` scores (logits).
        """
        _validate.token_ids("keys", keys, min_length=1)
        _validate.token_ids("values", values)
        _validate.token_ids("queries", queries, min_length=1)
        if values.shape != keys.shape or queries.shape[0] != keys.shape[0]:
            raise ValueError(
                f"values must have the shape of keys, (B, N) = {tuple(keys.shape)}, and queries (B, Q) the "
                f"same B; got values {tuple(values.shape)} and queries {tuple(queries.shape)}"
            )
        memory = self.key_embed(keys) + self.value_embed(values)  # (B, N, C): one pair per position
        q = self.q_proj(self.key_embed(queries))  # (B, Q, d_k)
        k, v = self.k_proj(memory), self.v_proj(memory)  # (B, N, d_k), (B, N, C)
        if self.attention == "softmax":
            read, _ = scaled_dot_product_attention(q, k, v)  # (B, Q, C)
        else:
            read, _ = linear_attention(q, k, v)  # (B, Q, C)
        return self.head(read)  # (B, Q, num_values)
