r"""Multi-head latent attention (MLA): one compressed latent per token in the cache, whatever the heads.

`MultiHeadLatentAttention` is DeepSeek-V2's attention: every head's keys and
values are up-projected from one latent per token, and the rotary positions
travel in one small shared key; `LatentCache` holds the two. With
``absorbed=True`` it attends to the latents directly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from attn_ref import _validate
from attn_ref.functional import scaled_dot_product_attention
from attn_ref.masks import causal_mask
from attn_ref.multihead import merge_heads
from attn_ref.positional import apply_rotary

__all__ = ["LatentCache", "MultiHeadLatentAttention"]


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
        _validate.counts(
            embed_dim=embed_dim,
            num_heads=num_heads,
            kv_lora_rank=kv_lora_rank,
            qk_nope_head_dim=qk_nope_head_dim,
            qk_rope_head_dim=qk_rope_head_dim,
            v_head_dim=v_head_dim,
        )
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
