"""attn_ref.modern against independent references: NumPy in float64 written out here, PyTorch's
SDPA with an extra key column, PyTorch's flex_attention, and hand arithmetic from the published
configurations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn.attention import flex_attention as torch_flex

from attn_ref import KVCache
from attn_ref.compression import SlidingWindowCache
from attn_ref.modern import (
    FULL,
    PUBLISHED,
    SLIDING,
    AttentionConfig,
    ModernAttention,
    ModernDecoder,
    ScheduleCache,
    first_position_mass,
    generate,
    kv_bytes,
    no_match_queries,
    output_gate,
    qk_norm,
    sink_attention,
    sink_softmax,
    softcap,
    softcap_score_mod,
    tile_layer_types,
)
from attn_ref.serving import create_block_mask, flex_attention
from tests.support.modern_reference import QUOTED, bill_by_hand
from tests.support.reference import as64

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
F32 = 2**-23  # float32's unit roundoff, relative


# --- NumPy references, float64, written from the formulas ----------------------------------------


def np_softmax_with_sink(scores: np.ndarray, sink: np.ndarray) -> np.ndarray:
    """exp(s_j) / (exp(sink_h) + sum_k exp(s_k)), scores (B, H, L, S) with -inf where masked."""
    col = np.broadcast_to(sink[None, :, None, None], (*scores.shape[:-1], 1))
    both = np.concatenate([scores, col], axis=-1)  # the sink as one more column
    top = both.max(axis=-1, keepdims=True)
    e = np.exp(both - top)
    return (e / e.sum(axis=-1, keepdims=True))[..., :-1]


def np_attention(q, k, v, allowed, sink=None, cap=None, gate=None):
    """(B, H, L, d) NumPy attention: scale, optional cap, mask, softmax (with sink), times gate."""
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if cap is not None:
        s = cap * np.tanh(s / cap)
    s = np.where(allowed, s, -np.inf)
    if sink is None:
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        w = e / e.sum(axis=-1, keepdims=True)
    else:
        w = np_softmax_with_sink(s, sink)
    out = w @ v
    return (out if gate is None else out * gate), w


def np_rms(x, g=None, eps=1e-6):
    y = x / np.sqrt((x**2).mean(axis=-1, keepdims=True) + eps)
    return y if g is None else y * g


# --- softcap ------------------------------------------------------------------------------------


def test_softcap_is_the_formula_and_stays_below_the_cap():
    x = torch.tensor([-1e30, -300.0, -50.0, -1.0, 0.0, 1e-3, 1.0, 49.0, 50.0, 300.0, 1e30])
    for cap in (1.0, 30.0, 50.0):
        got = softcap(x, cap)
        np.testing.assert_allclose(as64(got), cap * np.tanh(as64(x) / cap), rtol=4 * F32, atol=cap * 4 * F32)
        assert bool((got.abs() <= cap).all())
    small = torch.tensor([1e-3])
    assert softcap(small, 50.0).item() == pytest.approx(1e-3, rel=1e-6)  # identity near 0


def test_softcap_written_wrong_does_not_cap():
    """unsloth-zoo #593: logits * tanh(logits / cap) is |logits| once tanh saturates."""
    x = torch.tensor([124.0])
    assert (x * torch.tanh(x / 30.0)).item() > 120.0 > 30.0 > softcap(x, 30.0).item()


@pytest.mark.parametrize("block", [2, 3, 16])
def test_softcap_score_mod_matches_pytorch_flex_attention_and_numpy(block):
    g = torch.Generator().manual_seed(block)
    B, H, L, d = 2, 3, 7, 4
    q, k, v = (6 * torch.randn(B, H, L, d, generator=g) for _ in range(3))
    cap = 5.0
    mod = softcap_score_mod(cap)
    causal = lambda b, h, q_idx, kv_idx: q_idx >= kv_idx  # noqa: E731
    ours, _ = flex_attention(q, k, v, score_mod=mod, block_mask=create_block_mask(causal, 1, 1, L, L, block))
    their_mask = torch_flex.create_block_mask(causal, None, None, L, L, device="cpu")
    theirs = torch_flex.flex_attention(q, k, v, score_mod=mod, block_mask=their_mask)
    expected, _ = np_attention(as64(q), as64(k), as64(v), np.tri(L, dtype=bool), cap=cap)
    # |v| is a few units times 6; float32 rounds the softmax and the sum of L products.
    np.testing.assert_allclose(as64(ours), expected, atol=1e-4)
    np.testing.assert_allclose(as64(theirs), expected, atol=1e-4)


def test_softcap_score_mod_is_what_the_layer_applies():
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    layer = ModernAttention(8, num_heads=2, softcap=0.5)
    x = 3 * torch.randn(1, 6, 8, generator=g)
    _, w = layer(x)
    q = as64(layer.q_proj(x).view(1, 6, 2, 4).transpose(1, 2))
    k = as64(layer.k_proj(x).view(1, 6, 2, 4).transpose(1, 2))
    v = np.zeros_like(q)
    _, expected = np_attention(q, k, v, np.tri(6, dtype=bool), cap=0.5)
    np.testing.assert_allclose(as64(w), expected, atol=1e-6)


# --- sinks ----------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_sink_is_an_extra_key_column_with_zero_value(seed):
    """PyTorch's own SDPA over one more key: key 0 (score 0) plus a float mask of sigma_h on that
    column gives score sigma_h; its value is 0. Dropping the column's weight is sink attention."""
    g = torch.Generator().manual_seed(seed)
    B, H, L, S, d = 2, 3, 5, 7, 4
    q, k, v = (torch.randn(B, H, n, d, generator=g) for n in (L, S, S))
    sink = 3 * torch.randn(H, generator=g)
    allowed = torch.rand(L, S, generator=g) > 0.3
    ours, weights = sink_attention(q, k, v, sink, allowed)
    k_plus = torch.cat([k, torch.zeros(B, H, 1, d)], dim=2)  # (B, H, S + 1, d)
    v_plus = torch.cat([v, torch.zeros(B, H, 1, d)], dim=2)
    bias = torch.zeros(B, H, L, S + 1).masked_fill(~F.pad(allowed, (0, 1), value=True), float("-inf"))
    bias[..., -1] = sink.view(1, H, 1)  # the extra column's score is sigma_h
    theirs = F.scaled_dot_product_attention(q, k_plus, v_plus, attn_mask=bias)
    np.testing.assert_allclose(as64(ours), as64(theirs), atol=1e-6)
    scores = np.where(as64(allowed), as64(q @ k.transpose(-1, -2)) / 2.0, -np.inf)
    np.testing.assert_allclose(as64(weights), np_softmax_with_sink(scores, as64(sink)), atol=1e-6)


@settings(max_examples=25, deadline=None)
@given(
    H=st.integers(1, 3),
    L=st.integers(1, 4),
    S=st.integers(1, 6),
    sink_scale=st.floats(0.0, 20.0),
    seed=st.integers(0, 2**16),
)
def test_sink_softmax_matches_numpy_for_any_shape(H, L, S, sink_scale, seed):
    g = torch.Generator().manual_seed(seed)
    scores = 4 * torch.randn(2, H, L, S, generator=g)
    scores = scores.masked_fill(torch.rand(2, H, L, S, generator=g) < 0.3, float("-inf"))
    sink = sink_scale * torch.randn(H, generator=g)
    got = sink_softmax(scores, sink)
    np.testing.assert_allclose(as64(got), np_softmax_with_sink(as64(scores), as64(sink)), atol=1e-6)
    assert bool((got.sum(-1) <= 1 + 1e-6).all())


def test_output_gate_is_the_sigmoid_times_each_head():
    g = torch.Generator().manual_seed(0)
    heads = torch.randn(2, 3, 5, 4, generator=g)  # (B, H, T, d_k)
    per_head = torch.randn(2, 5, 3, generator=g)  # (B, T, H)
    per_feature = torch.randn(2, 5, 12, generator=g)  # (B, T, H d_k)
    sig = lambda a: 1 / (1 + np.exp(-a))  # noqa: E731
    expected = as64(heads) * sig(as64(per_head)).transpose(0, 2, 1)[..., None]
    np.testing.assert_allclose(as64(output_gate(heads, per_head)), expected, rtol=1e-6)
    gates = sig(as64(per_feature)).reshape(2, 5, 3, 4).transpose(0, 2, 1, 3)
    np.testing.assert_allclose(as64(output_gate(heads, per_feature)), as64(heads) * gates, rtol=1e-6)


def test_sink_weights_sum_to_what_the_sink_leaves():
    scores = torch.zeros(1, 2, 1, 3)
    sink = torch.tensor([0.0, math.log(9.0)])
    w = sink_softmax(scores, sink)
    np.testing.assert_allclose(as64(w.sum(-1)).ravel(), [3 / 4, 3 / 12], rtol=4 * F32)


def test_sink_survives_large_logits_and_rows_with_no_key():
    """A sink of 1000 or scores of 1000 do not overflow; a row that sees nothing gets zeros."""
    scores = torch.tensor([[[[1000.0, 999.0, float("-inf")], [float("-inf")] * 3]]])  # (1, 1, 2, 3)
    for sink in (torch.tensor([1000.0]), torch.tensor([-1000.0])):
        w = sink_softmax(scores, sink)
        assert torch.isfinite(w).all()
        np.testing.assert_allclose(
            as64(w[0, 0, 0]), np_softmax_with_sink(as64(scores), as64(sink))[0, 0, 0], atol=1e-7
        )
        assert w[0, 0, 1].eq(0).all()


def test_modular_6591_dropped_sink_and_wrong_head():
    """modular/modular #6591: a kernel that leaves the sink out of the denominator returns 1 where
    S / (S + e^sigma) is due (zero logits, values 1); indexing the sink by row % H is right for a
    decode row (seq_q = 1) and wrong for a prefill's rows."""
    H, S = 4, 10
    sink = torch.tensor([0.5, 1.0, 1.5, 2.0])
    out = sink_softmax(torch.zeros(1, H, 1, S), sink) @ torch.ones(1, H, S, 1)
    np.testing.assert_allclose(as64(out).ravel(), S / (S + np.exp(as64(sink))), rtol=8 * F32)
    for L in (1, 5):
        r = np.arange(2 * H * L)  # rows (b * H + h) * L + i of a [B * H, L, S] layout
        assert ((r % H) == (r // L) % H).all() == (L == 1)


# --- QK-norm ------------------------------------------------------------------------------------


def test_qk_norm_matches_numpy_and_bounds_the_logits():
    g = torch.Generator().manual_seed(0)
    x = 1000 * torch.randn(3, 5, 16, generator=g)
    gain = torch.rand(16, generator=g) + 0.5
    np.testing.assert_allclose(as64(qk_norm(x, gain)), np_rms(as64(x), as64(gain)), rtol=1e-5, atol=1e-6)
    q, k = qk_norm(x, gain), qk_norm(x.flip(1), gain)
    scores = as64(q @ k.transpose(-1, -2)) / 4.0
    bound = 4.0 * as64(gain).max() ** 2  # sqrt(d) * max g_q * max g_k, d = 16
    assert np.abs(scores).max() <= bound * (1 + 1e-5)


def test_layer_with_everything_matches_numpy():
    """Sink, elementwise gate, cap, QK-norm, a window, GQA: the layer against the formulas."""
    torch.manual_seed(1)
    C, H, H_kv, T, W = 12, 3, 1, 9, 4
    layer = ModernAttention(
        C, H, num_kv_heads=H_kv, window=W, sink=True, gate="elementwise", softcap=2.0, qk_norm=True, bias=True
    )
    with torch.no_grad():
        layer.sink.copy_(torch.tensor([-1.0, 0.5, 2.0]))
        layer.q_norm.weight.uniform_(0.5, 1.5)
        layer.k_norm.weight.uniform_(0.5, 1.5)
    x = torch.randn(2, T, C)
    out, w = layer(x)
    X = as64(x)
    P = {
        n: (as64(getattr(layer, n).weight), as64(getattr(layer, n).bias))
        for n in ("q_proj", "k_proj", "v_proj", "out_proj", "gate_proj")
    }
    lin = lambda a, n: a @ P[n][0].T + P[n][1]  # noqa: E731
    d = C // H
    heads = lambda a, h: a.reshape(2, T, h, d).transpose(0, 2, 1, 3)  # noqa: E731
    q = np_rms(heads(lin(X, "q_proj"), H), as64(layer.q_norm.weight))
    k = np.repeat(np_rms(heads(lin(X, "k_proj"), H_kv), as64(layer.k_norm.weight)), H, axis=1)
    v = np.repeat(heads(lin(X, "v_proj"), H_kv), H, axis=1)
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    allowed = (j <= i) & (i - j < W)
    gate = 1 / (1 + np.exp(-lin(X, "gate_proj")))
    o, expected_w = np_attention(q, k, v, allowed, sink=as64(layer.sink), cap=2.0, gate=heads(gate, H))
    expected = lin(o.transpose(0, 2, 1, 3).reshape(2, T, C), "out_proj")
    np.testing.assert_allclose(as64(w), expected_w, atol=1e-6)
    np.testing.assert_allclose(as64(out), expected, atol=1e-5)


def test_plain_layer_is_pytorch_sdpa():
    torch.manual_seed(2)
    layer = ModernAttention(8, 2)
    x = torch.randn(3, 6, 8)
    out, _ = layer(x)
    q, k, v = (p(x).view(3, 6, 2, 4).transpose(1, 2) for p in (layer.q_proj, layer.k_proj, layer.v_proj))
    heads = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    np.testing.assert_allclose(
        as64(out), as64(layer.out_proj(heads.transpose(1, 2).reshape(3, 6, 8))), atol=1e-6
    )


# --- schedules, caches and the bill ---------------------------------------------------------------


@pytest.mark.parametrize("seed", range(2))
def test_cached_decoding_with_a_schedule_is_the_full_pass(seed):
    torch.manual_seed(seed)
    model = ModernDecoder(
        30,
        80,
        embed_dim=16,
        num_heads=4,
        num_kv_heads=2,
        layer_types=tile_layer_types([SLIDING] * 2 + [FULL], 6),
        window=5,
        rope_bases={SLIDING: 1e4, FULL: 1e6},
        sink=True,
        gate="head",
        qk_norm=True,
    ).eval()
    prompt = torch.randint(0, 30, (2, 7), generator=torch.Generator().manual_seed(seed))
    plain = generate(model, prompt, 24)
    cache = ScheduleCache.for_model(model)
    assert torch.equal(generate(model, prompt, 24, cache), plain)
    read = 7 + 24 - 1
    per_layer = lambda n: 2 * 2 * 2 * 4 * n * 4  # K and V, B = 2, H_kv = 2, d_k = 4, float32  # noqa: E731
    assert cache.nbytes == 4 * per_layer(5) + 2 * per_layer(read)
    assert [type(c) for c in cache.layers] == [SlidingWindowCache, SlidingWindowCache, KVCache] * 2


def test_window_forgotten_at_decode_changes_the_tokens():
    """nanochat #452: the SDPA path's single-token decode attended to every cached key."""
    torch.manual_seed(0)
    model = ModernDecoder(30, 80, embed_dim=16, num_heads=2, layer_types=(SLIDING,) * 3, window=3).eval()
    prompt = torch.randint(0, 30, (4, 6), generator=torch.Generator().manual_seed(0))
    right = generate(model, prompt, 30)
    cache = ScheduleCache.for_model(model, windowed=False)
    logits, _ = model(prompt, cache)
    tokens = torch.cat([prompt, logits[:, -1:].argmax(-1)], dim=1)
    for layer in model.layers:
        layer.window = None
    with torch.no_grad():
        for _ in range(29):
            logits, _ = model(tokens[:, -1:], cache)
            tokens = torch.cat([tokens, logits[:, -1:].argmax(-1)], dim=1)
    assert not torch.equal(tokens, right)
    assert torch.equal(tokens[:, :7], right[:, :7])  # the prefill was right


@pytest.mark.parametrize("row", QUOTED, ids=[r[0] for r in QUOTED])
def test_the_bill_of_each_published_config_by_hand(row):
    name, n, kv, d, w, full, ctx = row
    config = next(c for c in PUBLISHED if c.name == name)
    assert [k == FULL for k in config.layer_types] == full(n)
    assert (config.num_kv_heads, config.head_dim, config.window, config.context_length) == (kv, d, w, ctx)
    for T in (1, w - 1, w, w + 1, ctx):
        assert kv_bytes(config, T) == bill_by_hand(name, T)
        assert kv_bytes(config.all_full(), T) == 2 * kv * d * 2 * T * n == bill_by_hand(name, T, True)


def test_the_bill_against_numbers_measured_elsewhere():
    """gpt-oss-20b: 49,152 B per token with every layer full (gguf-parser-go #32, f16 cache);
    192.0 MiB of full history at 4096 tokens (sglang #30091's table)."""
    gpt_oss = next(c for c in PUBLISHED if c.name == "gpt-oss-20b")
    assert kv_bytes(gpt_oss.all_full(), 1) == 49152
    assert kv_bytes(gpt_oss.all_full(), 4096) == 192 * 2**20


def test_tile_layer_types_gemma3_27b_has_ten_full_layers():
    kinds = tile_layer_types([SLIDING] * 5 + [FULL], 62)
    assert [i for i, k in enumerate(kinds) if k == FULL] == list(range(5, 62, 6))


# --- measurements ---------------------------------------------------------------------------


def test_no_match_queries_and_first_position_mass_by_loop():
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 6, (3, 9), generator=g)
    got = no_match_queries(tokens)
    for b in range(3):
        for i in range(9):
            assert bool(got[b, i]) == (i >= 2 and tokens[b, i].item() not in tokens[b, :i].tolist())
    w = torch.rand(3, 2, 9, 9, generator=g)
    chosen = [(b, i) for b in range(3) for i in range(9) if got[b, i]]
    expected = [np.mean([w[b, h, i, 0].item() for b, i in chosen]) for h in range(2)]
    np.testing.assert_allclose(as64(first_position_mass(w, got)), expected, rtol=1e-6)


# --- bad arguments are refused by name --------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "name"),
    [
        (lambda: softcap(torch.ones(2), 0.0), ValueError, "cap"),
        (lambda: softcap(torch.ones(2), float("inf")), ValueError, "cap"),
        (lambda: softcap([1.0], 1.0), TypeError, "x"),
        (lambda: softcap_score_mod(-1.0), ValueError, "cap"),
        (lambda: sink_softmax(torch.zeros(1, 2, 1, 3), torch.zeros(3)), ValueError, "sink"),
        (
            lambda: sink_attention(
                torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 5, 3), torch.zeros(1, 2, 5, 4), torch.zeros(2)
            ),
            ValueError,
            "key",
        ),
        (lambda: qk_norm(torch.ones(2, 4), torch.ones(3)), ValueError, "weight"),
        (lambda: output_gate(torch.ones(1, 2, 3, 4), torch.ones(1, 3, 5)), ValueError, "gate_logits"),
        (lambda: ModernAttention(8, 3), ValueError, "num_heads"),
        (lambda: ModernAttention(8, 2, gate="yes"), ValueError, "gate"),
        (lambda: ModernAttention(8, 2, window=0), ValueError, "window"),
        (lambda: ModernAttention(8, 2, softcap=-5.0), ValueError, "softcap"),
        (lambda: ModernDecoder(10, 8, 8, 2, layer_types=(SLIDING,)), ValueError, "window"),
        (lambda: tile_layer_types(["local"], 4), ValueError, "pattern"),
        (lambda: tile_layer_types([FULL], 0), ValueError, "num_layers"),
        (lambda: AttentionConfig("x", (SLIDING,), 1, 8, None, 16, ""), ValueError, "window"),
        (lambda: kv_bytes("gpt-oss", 4), TypeError, "config"),
        (
            lambda: first_position_mass(torch.ones(1, 1, 2, 2), torch.zeros(1, 2, dtype=torch.bool)),
            ValueError,
            "queries",
        ),
    ],
)
def test_bad_arguments_are_refused_by_name(call, error, name):
    with pytest.raises(error, match=name):
        call()
