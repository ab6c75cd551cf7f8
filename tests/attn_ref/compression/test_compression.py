"""attn_ref.compression against independent references: DeepSeek-V2's MLA equations and KIVI's
quantizer written out in float64 NumPy, linear attention's formula, masks and byte counts by hand.

Tolerances follow from the arithmetic: a float64 (or float32) result that sums at most ``n``
products of numbers of size at most ``m`` is off by at most about ``n * eps * m`` per operation
in a chain; the helpers below spell out the sizes each check multiplies.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attn_ref.cache import KVCache
from attn_ref.compression import (
    AssociativeRecall,
    LatentCache,
    LinearAttentionState,
    MultiHeadLatentAttention,
    QuantizedKVCache,
    SlidingWindowCache,
    linear_attention,
    linear_attention_recurrent,
    pack_codes,
    quantize,
    unpack_codes,
)
from attn_ref.masks import sliding_window_mask
from tests.support import reference
from tests.support.compression_reference import (
    linear_np,
    linear_tolerance,
    mla_np,
    mla_tolerance,
    phi_np,
    tolerance,
    weights_of,
)
from tests.support.reference import EPS32, EPS64

SETTINGS = settings(max_examples=30, deadline=None)


# --- multi-head latent attention -------------------------------------------------------------


@st.composite
def mla_setups(draw, dtype=torch.float64):
    sizes = {
        "embed_dim": draw(st.integers(1, 8)),
        "num_heads": draw(st.integers(1, 3)),
        "kv_lora_rank": draw(st.integers(1, 6)),
        "qk_nope_head_dim": draw(st.integers(1, 4)),
        "qk_rope_head_dim": draw(st.sampled_from([2, 4])),
        "v_head_dim": draw(st.integers(1, 4)),
        "q_lora_rank": draw(st.none() | st.integers(1, 5)),
    }
    seed = draw(st.integers(0, 2**31 - 1))
    torch.manual_seed(seed)
    mla = MultiHeadLatentAttention(**sizes).to(dtype)
    B, T = draw(st.integers(1, 2)), draw(st.integers(1, 6))
    x = torch.randn(B, T, sizes["embed_dim"], generator=torch.Generator().manual_seed(seed), dtype=dtype)
    return mla, x


@SETTINGS
@given(mla_setups())
def test_mla_follows_the_papers_equations(setup):
    mla, x = setup
    expected = mla_np(mla, x.numpy())
    cache = LatentCache(num_layers=1)
    with torch.no_grad():
        output = mla(x, cache=cache)
    tol = mla_tolerance(mla, x, EPS64)
    np.testing.assert_allclose(output.numpy(), expected["output"], rtol=0, atol=tol)
    np.testing.assert_allclose(cache.latents[0].numpy(), expected["latent"], rtol=0, atol=tol)
    np.testing.assert_allclose(cache.rope_keys[0].numpy(), expected["rope_key"], rtol=0, atol=tol)


@SETTINGS
@given(mla_setups())
def test_absorbed_form_equals_the_plain_one(setup):
    mla, x = setup
    with torch.no_grad():
        plain, absorbed = mla(x), mla(x, absorbed=True)
    torch.testing.assert_close(absorbed, plain, rtol=0, atol=mla_tolerance(mla, x, EPS64))


@SETTINGS
@given(mla_setups(dtype=torch.float32))
def test_absorbed_form_equals_the_plain_one_in_float32(setup):
    mla, x = setup
    with torch.no_grad():
        plain, absorbed = mla(x), mla(x, absorbed=True)
    torch.testing.assert_close(absorbed, plain, rtol=0, atol=mla_tolerance(mla, x, EPS32))


@SETTINGS
@given(mla_setups(), st.booleans(), st.data())
def test_generation_in_chunks_from_the_latent_cache_equals_one_pass(setup, absorbed, data):
    mla, x = setup
    T = x.shape[1]
    cuts = sorted(data.draw(st.sets(st.integers(1, T - 1), max_size=3))) if T > 1 else []
    bounds = [0, *cuts, T]
    cache = LatentCache(num_layers=1)
    with torch.no_grad():
        full = mla(x)
        chunks = [mla(x[:, a:b], cache=cache, absorbed=absorbed) for a, b in itertools.pairwise(bounds)]
    torch.testing.assert_close(torch.cat(chunks, dim=1), full, rtol=0, atol=mla_tolerance(mla, x, EPS64))
    assert cache.length == T
    itemsize = x.element_size()
    assert cache.nbytes == x.shape[0] * T * (mla.kv_lora_rank + mla.qk_rope_head_dim) * itemsize


def test_absorbed_weights_are_the_products_of_the_papers_matrices():
    torch.manual_seed(0)
    mla = MultiHeadLatentAttention(
        12, 3, kv_lora_rank=5, qk_nope_head_dim=4, qk_rope_head_dim=2, v_head_dim=3, q_lora_rank=7
    )
    query_weight, output_weight = mla.absorbed_weights()
    assert tuple(query_weight.shape) == (3, 7, 5) and tuple(output_weight.shape) == (3, 5, 12)
    w_uq = weights_of(mla.q_up).reshape(7, 3, 6)[..., :4]  # (q_in, H, d_nope)
    w_uk = weights_of(mla.k_up).reshape(5, 3, 4)  # (d_c, H, d_nope)
    w_uv = weights_of(mla.v_up).reshape(5, 3, 3)  # (d_c, H, d_v)
    w_o = weights_of(mla.out_proj).reshape(3, 3, 12)  # (H, d_v, C)
    tol = tolerance(EPS32, 4, 1.0)  # float32 sums of d_nope = 4 (or d_v = 3) products below 1
    for h in range(3):
        np.testing.assert_allclose(
            query_weight[h].detach().double().numpy(), w_uq[:, h] @ w_uk[:, h].T, rtol=0, atol=tol
        )
        np.testing.assert_allclose(
            output_weight[h].detach().double().numpy(), w_uv[:, h] @ w_o[h], rtol=0, atol=tol
        )


def test_plain_mla_equals_pytorch_attention_on_its_keys_and_values():
    """PyTorch's own attention on the queries, keys and values of the paper's equations (its default
    scale is 1/sqrt(d_nope + d_R), their width) gives the layer's output, in both forms."""
    torch.manual_seed(1)
    mla = MultiHeadLatentAttention(
        16, 4, kv_lora_rank=8, qk_nope_head_dim=4, qk_rope_head_dim=4, v_head_dim=4
    ).double()
    x = torch.randn(2, 7, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    ref = {name: torch.from_numpy(np.ascontiguousarray(a)) for name, a in mla_np(mla, x.numpy()).items()}
    heads = F.scaled_dot_product_attention(ref["query"], ref["key"], ref["value"], is_causal=True)
    theirs = heads.transpose(1, 2).reshape(2, 7, 16) @ torch.from_numpy(weights_of(mla.out_proj))
    tol = mla_tolerance(mla, x, EPS64)
    with torch.no_grad():
        torch.testing.assert_close(mla(x), theirs, rtol=0, atol=tol)
        torch.testing.assert_close(mla(x, absorbed=True), theirs, rtol=0, atol=tol)


def test_mla_refuses_bad_input():
    with pytest.raises(ValueError, match="qk_rope_head_dim=3"):
        MultiHeadLatentAttention(8, 2, kv_lora_rank=4, qk_nope_head_dim=2, qk_rope_head_dim=3, v_head_dim=2)
    with pytest.raises(ValueError, match="kv_lora_rank must be an int of at least 1, got 0"):
        MultiHeadLatentAttention(8, 2, kv_lora_rank=0, qk_nope_head_dim=2, qk_rope_head_dim=2, v_head_dim=2)
    mla = MultiHeadLatentAttention(8, 2, kv_lora_rank=4, qk_nope_head_dim=2, qk_rope_head_dim=2, v_head_dim=2)
    with pytest.raises(ValueError, match=r"x has shape \(1, 3, 6\), expected \(1, 3, 8\)"):
        mla(torch.zeros(1, 3, 6))
    with pytest.raises(TypeError, match="x must have a floating dtype"):
        mla(torch.zeros(1, 3, 8, dtype=torch.long))
    cache = LatentCache(num_layers=2)
    with pytest.raises(ValueError, match="layer=1 is out of order"):
        mla(torch.zeros(1, 3, 8), cache=cache, layer=1)
    cache.update(0, torch.zeros(1, 3, 4), torch.zeros(1, 3, 2))
    with pytest.raises(ValueError, match=r"latent has shape \(1, 1, 5\), expected \(1, 1, 4\)"):
        cache.update(0, torch.zeros(1, 1, 5), torch.zeros(1, 1, 2))


# --- quantization ------------------------------------------------------------------------------


@SETTINGS
@given(st.sampled_from([2, 4, 8]), st.lists(st.integers(1, 3), max_size=2), st.integers(1, 4), st.data())
def test_pack_and_unpack_are_inverse_and_put_code_j_at_bit_j_times_bits(bits, batch, groups, data):
    per_byte = 8 // bits
    shape = (*batch, groups * per_byte)
    flat = data.draw(
        st.lists(st.integers(0, 2**bits - 1), min_size=math.prod(shape), max_size=math.prod(shape))
    )
    codes = torch.tensor(flat, dtype=torch.uint8).reshape(shape)
    packed = pack_codes(codes, bits)
    assert packed.dtype == torch.uint8 and packed.shape[-1] == groups
    by_hand = np.array(flat).reshape(*batch, groups, per_byte) << (bits * np.arange(per_byte))
    np.testing.assert_array_equal(packed.numpy(), by_hand.sum(axis=-1))
    assert torch.equal(unpack_codes(packed, bits), codes)


def quantize_np(x: np.ndarray, bits: int, per: str) -> dict[str, np.ndarray]:
    """KIVI's min-max quantizer in float64: groups along the channels (per token) or the tokens."""
    axis = -1 if per == "token" else -2
    low, high = x.min(axis=axis, keepdims=True), x.max(axis=axis, keepdims=True)
    scale = (high - low) / (2**bits - 1)
    exact = np.divide(x - low, scale, out=np.zeros_like(x), where=scale > 0)  # the code before rounding
    return {"scale": scale, "zero": low, "exact": exact, "codes": np.rint(exact)}


@st.composite
def tensors_to_quantize(draw):
    bits = draw(st.sampled_from([2, 4, 8]))
    per = draw(st.sampled_from(["token", "channel"]))
    batch = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    T, d = draw(st.integers(1, 6)), draw(st.integers(1, 3)) * (8 // bits)
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    x = torch.randn(*batch, T, d, generator=g, dtype=torch.float64) * draw(st.sampled_from([0.1, 1.0, 30.0]))
    if draw(st.booleans()):  # some outlier channels
        x[..., : draw(st.integers(1, d))] *= 20
    if draw(st.booleans()):  # a constant token or channel
        if per == "token":
            x[..., 0, :] = 1.5
        else:
            x[..., :, 0] = -2.0
    return x, bits, per


@SETTINGS
@given(tensors_to_quantize())
def test_quantize_is_kivis_min_max_quantizer(case):
    x, bits, per = case
    q = quantize(x, bits, per)
    ref = quantize_np(x.numpy(), bits, per)
    np.testing.assert_allclose(q.scale.numpy(), ref["scale"], rtol=4 * EPS64, atol=0)
    np.testing.assert_array_equal(q.zero.numpy(), ref["zero"])  # a minimum is exact
    codes = unpack_codes(q.codes, bits).numpy()
    assert q.shape == x.shape and codes.shape == x.shape
    # Away from a tie (a code before rounding within rounding of .5), the codes are the same.
    clear = np.abs(ref["exact"] - np.floor(ref["exact"]) - 0.5) > 1e-9
    np.testing.assert_array_equal(codes[clear], ref["codes"][clear])
    assert np.all(np.abs(codes - ref["codes"]) <= 1)
    # Every number comes back within half a step, plus the rounding of q s + z.
    error = np.abs(q.dequantize().numpy() - x.numpy())
    bound = ref["scale"] / 2 + 8 * EPS64 * (np.abs(ref["zero"]) + np.abs(ref["scale"]) * 2**bits)
    assert np.all(error <= bound)
    constant = ref["scale"] == 0
    assert np.all(error[np.broadcast_to(constant, x.shape)] == 0)


def test_quantize_keeps_scales_in_the_inputs_dtype_and_counts_its_bytes():
    x = torch.randn(2, 3, 5, 8, generator=torch.Generator().manual_seed(0)).half()
    for bits in (2, 4, 8):
        q = quantize(x, bits, "token")
        assert q.scale.dtype == q.zero.dtype == torch.float16 and q.dequantize().dtype == torch.float16
        assert tuple(q.scale.shape) == (2, 3, 5, 1)
        assert q.nbytes == 2 * 3 * 5 * 8 * bits // 8 + 2 * (2 * 3 * 5) * 2  # codes; scales and zeros
        q = quantize(x, bits, "channel")
        assert tuple(q.scale.shape) == (2, 3, 1, 8)
        assert q.nbytes == 2 * 3 * 5 * 8 * bits // 8 + 2 * (2 * 3 * 8) * 2


def test_an_outlier_channel_costs_the_other_channels_precision_per_token_only():
    """Per token a channel 100 times larger sets each token's step; per channel it does not."""
    g = torch.Generator().manual_seed(2)
    x = torch.randn(64, 8, generator=g, dtype=torch.float64)
    x[:, 3] *= 100
    small = [c for c in range(8) if c != 3]
    per_token = (quantize(x, 4, "token").dequantize() - x)[:, small].abs().max()
    per_channel = (quantize(x, 4, "channel").dequantize() - x)[:, small].abs().max()
    ranges = x[:, small].max(dim=0).values - x[:, small].min(dim=0).values
    assert per_channel <= ranges.max() / 30 + 1e-12  # half a step of 15 levels, channel by channel
    assert per_token > 10 * per_channel


def test_quantize_refuses_bad_input():
    with pytest.raises(ValueError, match="bits must be one of 2, 4, 8, got 3"):
        quantize(torch.zeros(2, 8), 3, "token")
    with pytest.raises(ValueError, match="per must be one of 'token', 'channel', got 'row'"):
        quantize(torch.zeros(2, 8), 4, "row")
    with pytest.raises(ValueError, match="8 // bits=4 must divide x's d=6"):
        quantize(torch.zeros(2, 6), 2, "token")
    with pytest.raises(ValueError, match=r"codes must lie in \[0, 3\]"):
        pack_codes(torch.tensor([4, 0, 0, 0]), 2)
    with pytest.raises(TypeError, match="codes must be an integer"):
        pack_codes(torch.zeros(4), 2)


def expected_stream(x: np.ndarray, bits: int, per: str, group: int) -> np.ndarray:
    """What a stream of ``x`` (B, H, S, d) reads back: per token each token quantized on its own;
    per channel complete groups of ``group`` positions quantized per channel, the rest exact."""
    if per == "token":
        ref = quantize_np(x, bits, "token")
        return ref["codes"] * ref["scale"] + ref["zero"]
    S = x.shape[-2]
    full = S // group * group
    out = x.copy()
    for start in range(0, full, group):
        ref = quantize_np(x[..., start : start + group, :], bits, "channel")
        out[..., start : start + group, :] = ref["codes"] * ref["scale"] + ref["zero"]
    return out


@SETTINGS
@given(
    st.sampled_from([2, 4, 8]),
    st.sampled_from(["token", "channel"]),
    st.sampled_from(["token", "channel"]),
    st.integers(1, 5),
    st.lists(st.integers(1, 7), min_size=1, max_size=4),
    st.integers(0, 2**31 - 1),
)
def test_quantized_cache_reads_back_kivis_groups(bits, key_per, value_per, group, chunks, seed):
    g = torch.Generator().manual_seed(seed)
    S, d = sum(chunks), 8
    keys = torch.randn(1, 2, S, d, generator=g, dtype=torch.float64)
    values = torch.randn(1, 2, S, d, generator=g, dtype=torch.float64)
    cache = QuantizedKVCache(num_layers=1, bits=bits, key_per=key_per, value_per=value_per, group_size=group)
    start = 0
    for n in chunks:
        k_all, v_all = cache.update(0, keys[:, :, start : start + n], values[:, :, start : start + n])
        start += n
        assert cache.length == start
    for name, got, x, per in (("keys", k_all, keys, key_per), ("values", v_all, values, value_per)):
        expected = expected_stream(x.numpy(), bits, per, group)
        # The same float64 operations (x - z, / s, round, q s + z): a few roundings of |x| at most.
        tol = tolerance(EPS64, 4, np.abs(x.numpy()).max())
        np.testing.assert_allclose(got.numpy(), expected, rtol=0, atol=tol, err_msg=name)
    full = S // group * group
    by_hand = 0
    for per in (key_per, value_per):
        codes = 2 * (S if per == "token" else full) * d * bits // 8  # 2 heads
        scales = 2 * 2 * (S if per == "token" else (S // group) * d) * 8  # scale and zero, float64
        residual = 0 if per == "token" else 2 * (S - full) * d * 8
        by_hand += codes + scales + residual
    assert cache.nbytes == by_hand


def test_quantized_cache_refuses_bad_input():
    with pytest.raises(ValueError, match="key_per must be one of"):
        QuantizedKVCache(1, 4, key_per="head")
    with pytest.raises(ValueError, match="group_size must be an int of at least 1, got 0"):
        QuantizedKVCache(1, 4, group_size=0)
    cache = QuantizedKVCache(1, 4)
    with pytest.raises(ValueError, match=r"value has shape \(1, 1, 2, 8\), expected \(1, 1, 3, 8\)"):
        cache.update(0, torch.zeros(1, 1, 3, 8), torch.zeros(1, 1, 2, 8))
    with pytest.raises(ValueError, match="layer=1 is out of order"):
        cache.update(1, torch.zeros(1, 1, 3, 8), torch.zeros(1, 1, 3, 8))


# --- sliding window ------------------------------------------------------------------------------


@SETTINGS
@given(st.integers(1, 12), st.integers(0, 12), st.integers(1, 14))
def test_sliding_window_mask_is_the_band_of_the_last_window_positions(L, extra, window):
    S = L + extra
    mask = sliding_window_mask(torch.arange(S - L, S), torch.arange(S), window)  # the last L of S
    query_pos = np.arange(S - L, S)[:, None]
    key_pos = np.arange(S)[None, :]
    np.testing.assert_array_equal(mask.numpy(), (key_pos <= query_pos) & (key_pos > query_pos - window))
    if window >= S:
        np.testing.assert_array_equal(mask.numpy(), reference.causal(L, S, lower_right=True))


@SETTINGS
@given(st.integers(1, 6), st.lists(st.integers(1, 4), min_size=1, max_size=6), st.integers(0, 2**31 - 1))
def test_sliding_window_cache_gives_windowed_attention_and_holds_at_most_the_window(window, chunks, seed):
    g = torch.Generator().manual_seed(seed)
    T = sum(chunks)
    q, k, v = (torch.randn(1, 2, T, 4, generator=g, dtype=torch.float64) for _ in range(3))
    allowed = sliding_window_mask(torch.arange(T), torch.arange(T), window).numpy()
    expected, _ = reference.attention(q.numpy(), k.numpy(), v.numpy(), allowed)
    cache = SlidingWindowCache(num_layers=1, window=window)
    start, outputs = 0, []
    for n in chunks:
        keys, values = cache.update(0, k[:, :, start : start + n], v[:, :, start : start + n])
        S = keys.shape[-2]  # the kept positions, then the new ones
        assert keys.shape[-2] == min(start, window) + n
        out, _ = reference.attention(
            q[:, :, start : start + n].numpy(),
            keys.numpy(),
            values.numpy(),
            sliding_window_mask(torch.arange(S - n, S), torch.arange(S), window).numpy(),
        )
        outputs.append(out)
        start += n
        assert cache.length == min(start, window)
        assert cache.nbytes == 2 * 2 * min(start, window) * 4 * 8
        np.testing.assert_array_equal(cache.keys[0].numpy(), k[:, :, max(0, start - window) : start].numpy())
    np.testing.assert_allclose(
        np.concatenate(outputs, axis=-2), expected, rtol=0, atol=tolerance(EPS64, 4 + T, 5.0)
    )


# --- linear attention --------------------------------------------------------------------------


@st.composite
def linear_inputs(draw, dtype=torch.float64, same_length=True):
    batch = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    L = draw(st.integers(1, 9))
    S = L if same_length else draw(st.integers(1, 9))
    d_k, d_v = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    spread = draw(st.sampled_from([0.5, 1.0, 3.0]))
    q = spread * torch.randn(*batch, L, d_k, generator=g, dtype=dtype)
    k = spread * torch.randn(*batch, S, d_k, generator=g, dtype=dtype)
    v = torch.randn(*batch, S, d_v, generator=g, dtype=dtype)
    return q, k, v


@SETTINGS
@given(st.booleans().flatmap(lambda causal: st.tuples(st.just(causal), linear_inputs(same_length=causal))))
def test_linear_attention_is_the_papers_formula(case):
    causal, (q, k, v) = case
    output, weights = linear_attention(q, k, v, is_causal=causal)
    expected, expected_weights = linear_np(q.numpy(), k.numpy(), v.numpy(), causal)
    tol = linear_tolerance(q, k, v, EPS64, against_numpy=True)
    np.testing.assert_allclose(output.numpy(), expected, rtol=0, atol=tol)
    weight_tol = linear_tolerance(q, k, torch.ones(1, dtype=q.dtype), EPS64, against_numpy=True)
    np.testing.assert_allclose(weights.numpy(), expected_weights, rtol=0, atol=weight_tol)
    assert (weights >= 0).all()
    np.testing.assert_allclose(weights.sum(dim=-1).numpy(), 1.0, rtol=0, atol=weight_tol)


@SETTINGS
@given(linear_inputs())
def test_recurrent_form_equals_the_causal_quadratic_form(inputs):
    q, k, v = inputs
    quadratic, _ = linear_attention(q, k, v, is_causal=True)
    recurrent, state = linear_attention_recurrent(q, k, v)
    torch.testing.assert_close(recurrent, quadratic, rtol=0, atol=linear_tolerance(q, k, v, EPS64))
    phi_k = phi_np(k.numpy())  # each of PyTorch's phi values is within about eps of it, absolutely
    state_tol = tolerance(EPS64, k.shape[-2] + 1, float((1 + phi_k.max()) * v.abs().max()))
    np.testing.assert_allclose(
        state.state.numpy(), np.swapaxes(phi_k, -1, -2) @ v.numpy(), rtol=0, atol=state_tol
    )
    normalizer_tol = tolerance(EPS64, k.shape[-2] + 1, float(1 + phi_k.max()))
    np.testing.assert_allclose(state.normalizer.numpy(), phi_k.sum(axis=-2), rtol=0, atol=normalizer_tol)
    assert state.length == q.shape[-2]
    assert state.nbytes == state.state.numel() * 8 + state.normalizer.numel() * 8


@SETTINGS
@given(linear_inputs(dtype=torch.float32))
def test_recurrent_form_equals_the_causal_quadratic_form_in_float32(inputs):
    q, k, v = inputs
    quadratic, _ = linear_attention(q, k, v, is_causal=True)
    recurrent, _ = linear_attention_recurrent(q, k, v)
    torch.testing.assert_close(recurrent, quadratic, rtol=0, atol=linear_tolerance(q, k, v, EPS32))


@SETTINGS
@given(linear_inputs(), st.data())
def test_the_state_carries_across_calls(inputs, data):
    q, k, v = inputs
    T = q.shape[-2]
    cut = data.draw(st.integers(1, T)) if T > 1 else 1
    whole, whole_state = linear_attention_recurrent(q, k, v)
    first, state = linear_attention_recurrent(q[..., :cut, :], k[..., :cut, :], v[..., :cut, :])
    if cut < T:
        second, state = linear_attention_recurrent(q[..., cut:, :], k[..., cut:, :], v[..., cut:, :], state)
        first = torch.cat([first, second], dim=-2)
    tol = linear_tolerance(q, k, v, EPS64)  # the same sums in the same order, elementwise maps aside
    torch.testing.assert_close(first, whole, rtol=0, atol=tol)
    state_tol = tolerance(EPS64, T + 1, float((1 + phi_np(k.numpy()).max()) * v.abs().max()))
    torch.testing.assert_close(state.state, whole_state.state, rtol=0, atol=state_tol)
    assert state.length == T


def test_the_state_does_not_grow_with_the_tokens():
    g = torch.Generator().manual_seed(3)
    sizes = set()
    for T in (1, 10, 100):
        q, k, v = (torch.randn(1, 2, T, 4, generator=g) for _ in range(3))
        _, state = linear_attention_recurrent(q, k, v)
        sizes.add(state.nbytes)
        cache = KVCache(num_layers=1)
        cache.update(0, k, v)
        assert cache.nbytes == 2 * 2 * T * 4 * 4
    assert sizes == {2 * (4 * 4 + 4) * 4}  # per head: a 4 x 4 state and 4 normalizers, float32


def test_linear_attention_refuses_bad_input():
    x = torch.zeros(1, 3, 4)
    with pytest.raises(ValueError, match="is_causal=True needs one query per key, L == S, got L=3, S=2"):
        linear_attention(x, x[:, :2], x[:, :2], is_causal=True)
    with pytest.raises(ValueError, match="the same T tokens, got L=3 and S=2"):
        linear_attention_recurrent(x, x[:, :2], x[:, :2])
    with pytest.raises(ValueError, match=r"key has shape \(1, 3, 5\), expected \(1, 3, 4\)"):
        linear_attention(x, torch.zeros(1, 3, 5), x)
    bad_state = LinearAttentionState(torch.zeros(1, 5, 4), torch.zeros(1, 4), 1)
    with pytest.raises(ValueError, match=r"state.state has shape \(1, 5, 4\), expected \(1, 4, 4\)"):
        linear_attention_recurrent(x, x, x, bad_state)


# --- associative recall ------------------------------------------------------------------------


@pytest.mark.parametrize("attention", ["softmax", "linear"])
def test_recall_model_is_one_head_over_summed_pair_embeddings(attention):
    torch.manual_seed(0)
    model = AssociativeRecall(10, 7, embed_dim=6, head_dim=3, attention=attention).double()
    g = torch.Generator().manual_seed(1)
    keys = torch.stack([torch.randperm(10, generator=g)[:5] for _ in range(2)])  # (B, N)
    values = torch.randint(0, 7, (2, 5), generator=g)
    queries = keys[:, [4, 0, 2]]  # (B, Q)
    E_k = model.key_embed.weight.detach().numpy()
    E_v = model.value_embed.weight.detach().numpy()
    memory = E_k[keys.numpy()] + E_v[values.numpy()]  # (B, N, C)
    q = E_k[queries.numpy()] @ weights_of(model.q_proj)
    k, v = memory @ weights_of(model.k_proj), memory @ weights_of(model.v_proj)
    if attention == "softmax":
        read, weights = reference.attention(q, k, v)
    else:
        read, weights = linear_np(q, k, v, causal=False)
    expected = read @ weights_of(model.head) + model.head.bias.detach().numpy()
    # Embedding sums, projections of 6 and 3 terms, a mix of 5, the head's 6: values below 10.
    tol = tolerance(EPS64, 2 + 6 + 3 + 5 + 6, 10.0)
    with torch.no_grad():
        np.testing.assert_allclose(model(keys, values, queries).numpy(), expected, rtol=0, atol=tol)
        shown = model.attention_weights(keys, values, queries).numpy()  # (B, Q, N)
    np.testing.assert_allclose(shown, weights, rtol=0, atol=tol)
    np.testing.assert_allclose(shown.sum(axis=-1), 1.0, rtol=0, atol=tol)


def test_both_recall_models_have_the_same_parameters():
    shapes = [
        [tuple(p.shape) for p in AssociativeRecall(64, 64, 32, 16, attention=kind).parameters()]
        for kind in ("softmax", "linear")
    ]
    assert shapes[0] == shapes[1]


def test_recall_model_refuses_bad_input():
    with pytest.raises(ValueError, match="attention must be one of 'softmax', 'linear', got 'relu'"):
        AssociativeRecall(4, 4, 4, 2, attention="relu")
    model = AssociativeRecall(4, 4, 4, 2)
    with pytest.raises(ValueError, match=r"values must have the shape of keys"):
        model(torch.tensor([[0, 1]]), torch.tensor([[0, 1, 2]]), torch.tensor([[0]]))
    with pytest.raises(ValueError, match=r"queries must be a \(B, T\) tensor of integer ids"):
        model(torch.tensor([[0, 1]]), torch.tensor([[0, 1]]), torch.tensor([0]))
