"""The KV-cache tutorial, as the build executed it, checked against references computed here.

What the tutorial computed is read from its kernel's variables (``values``), and checked against
references independent of attn_ref's cache and attention: greedy decoding written out as a loop
of full forward passes, float64 NumPy attention and causal masks (tests/support/reference.py) on the same
projections, the work per token and the cache sizes counted by hand from the model's shapes. What
a loop only printed is read from the numbers its cell printed, without the page's labels
(tests/support/shown.py). The timings depend on the machine; their table is checked to print
what was measured.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attn_ref.cache import KVCache
from tests.support.reference import as64, attention, causal
from tests.support.shown import assert_printed, half_unit, printed_by_cell, sci_rtol, verdicts

# layers, key/value heads, head size, context, window. Llama 2: config.json on Hugging Face
# (num_hidden_layers, num_key_value_heads, hidden_size / num_attention_heads,
# max_position_embeddings); Mistral 7B: Table 1 of its paper; Llama 3.1: sku_list.py of
# meta-llama/llama-models (n_layers, n_kv_heads, dim / n_heads, CONTEXT_LENGTH).
MODELS = [
    (32, 32, 4096 // 32, 4096, None),  # Llama 2 7B
    (32, 8, 4096 // 32, 4096, None),  # the same shape with 8 key/value heads
    (32, 1, 4096 // 32, 4096, None),  # and with 1
    (80, 8, 8192 // 64, 4096, None),  # Llama 2 70B
    (32, 8, 128, 8192, 4096),  # Mistral 7B, its rolling buffer
    (32, 8, 4096 // 32, 131072, None),  # Llama 3.1 8B
    (80, 8, 8192 // 64, 131072, None),  # Llama 3.1 70B
]


def test_cached_and_uncached_generation_give_the_greedy_tokens(tutorial, values):
    model, prompt, VOCAB = values["model"], values["prompt"], values["VOCAB"]
    cached_logits, plain_logits = values["cached_logits"], values["plain_logits"]
    steps = cached_logits.shape[1]
    # The greedy choice is robust: the best logit leads the second by far more than the two ways
    # of computing them differ, on any machine.
    best_two = cached_logits.topk(2, dim=-1).values
    gap = (best_two[..., 0] - best_two[..., 1]).min().item()
    difference = (cached_logits - plain_logits).abs().max().item()
    assert values["gap"].item() == gap and values["difference"].item() == difference
    assert difference < 1e-5 and 100 * difference < gap
    tokens = prompt
    with torch.no_grad():
        for _ in range(steps):  # greedy, one full forward pass per token
            tokens = torch.cat([tokens, model(tokens)[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
    assert torch.equal(values["cached_tokens"], tokens) and torch.equal(values["plain_tokens"], tokens)
    text = repr("".join(VOCAB[i] for i in tokens[0].tolist()))
    assert any(text in printed for printed in printed_by_cell(tutorial))
    assert_printed(tutorial, [steps, difference, gap], rtol=[0, sci_rtol(1), sci_rtol(1)], gaps=True)


def _layer_norm(x, norm):
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + norm.eps) * as64(norm.weight) + as64(norm.bias)


def test_the_opening_picture_is_layer_0_of_the_model_recomputed_without_a_cache(values):
    """The picture above the first code: layer 0, head 0 of the page's model, fed the prompt and
    then one greedy token at a time. Its keys and weights equal a float64 computation over the
    whole text at once, written out from the model's parameters (embeddings, layer norm,
    projections, causal softmax): a cache changes nothing but what is recomputed."""
    model, tokens = values["model"], values["picture_tokens"]
    assert tokens.shape == (1, 7) and [len(w) for w in values["calls"]] == [4, 1, 1, 1]
    with torch.no_grad():  # the greedy tokens: the best next token after each prefix
        for t in range(4, 7):
            assert tokens[0, t] == model(tokens[:, :t])[0, -1].argmax()
    ids = tokens[0].numpy()
    x = as64(model.token_embedding.weight)[ids] + as64(model.position_embedding.weight)[:7]  # (T, C)
    block = model.blocks[0]
    h = _layer_norm(x, block.norm1)
    q, k = _linear(h, block.attn.q_proj)[:, :16], _linear(h, block.attn.k_proj)[:, :16]  # head 0
    _, weights = attention(q, k, k, allowed=causal(7))
    np.testing.assert_allclose(as64(values["picture_weights"]), weights, atol=1e-5)
    np.testing.assert_array_equal(values["computed"].numpy(), causal(7))
    np.testing.assert_allclose(as64(values["picture_cache"].keys[0][0, 0]), k, atol=1e-5)


def test_the_cache_holds_two_tensors_per_layer_and_position(tutorial, values):
    model, prompt = values["model"], values["prompt"]
    C, H = model.blocks[0].attn.embed_dim, model.blocks[0].attn.num_heads
    T0 = prompt.shape[1]
    assert values["T0"] == T0
    shown = []
    for length in (T0, T0 + 1):  # the prompt, then one more token: one more position in every layer
        shown += [length, 0, 1, H, length, C // H]  # positions; layer 0's keys, (1, H, positions, d_k)
    shown.append(2 * model.num_layers * C * (T0 + 1) * 4)  # keys and values, float32
    assert_printed(tutorial, shown, gaps=True)
    # Appending a token leaves every cached key and value as it was, bit for bit.
    short, longer = values["short"], values["longer"]
    assert short.length == T0 and longer.length == T0 + 1
    for new, old in zip(longer.keys + longer.values, short.keys + short.values, strict=True):
        assert tuple(new.shape) == (1, H, T0 + 1, C // H)
        torch.testing.assert_close(new[:, :, :T0], old, atol=1e-6, rtol=0)
    assert values["moved"].item() < 1e-6
    assert_printed(tutorial, [values["moved"].item()], rtol=sci_rtol(1))


def test_work_per_token_counted_by_hand(tutorial, values):
    model = values["model"]
    C, V, layers = 64, len(values["VOCAB"]), model.num_layers
    assert model.blocks[0].attn.embed_dim == C
    rows = []
    for t in (16, 64, 256, 512):
        per_position = layers * 24 * C * C + 2 * C * V  # projections and MLP, then the output head
        without = t * per_position + layers * 4 * t * t * C  # Q K^T and A V of t queries over t keys
        cached = per_position + layers * 4 * t * C  # one query over t keys
        rows.append([t, without, cached, without / cached, 100 * layers * 4 * t * t * C / without])
    assert values["plain"] == rows[-1][1] and values["attention"] == layers * 4 * 512 * 512 * C  # t = 512
    assert_printed(tutorial, rows, atol=[0, 0, 0, half_unit(0), half_unit(0)])


def test_the_timing_table_is_what_was_measured(tutorial, values):
    # Times depend on the machine: the page says what to look for, and this checks only that the
    # table and the fitted growth print what the build measured.
    timings, speedups, lengths = values["timings"], values["speedups"], values["lengths"]
    np.testing.assert_allclose(speedups, timings[:, 0] / timings[:, 1])
    table = np.column_stack([lengths, timings, speedups])
    assert_printed(tutorial, table, atol=[0, half_unit(2), half_unit(2), half_unit(1)])
    growth = values["growth"]
    for way in (0, 1):
        fitted = np.polyfit(np.log(lengths[-3:]), np.log(timings[-3:, way]), 1)[0]
        assert growth[way] == pytest.approx(fitted)
    assert_printed(tutorial, growth, atol=half_unit(2), gaps=True)


def test_is_causal_lets_one_new_query_see_only_key_0(tutorial, values):
    q, k, v = (as64(values[name]) for name in ("query", "keys", "values"))
    assert q.shape[-2] == 1 < k.shape[-2]  # one new query, six keys
    S = k.shape[-2]
    top_left = causal(1, S)  # what is_causal=True means: query 0 sees key 0
    _, trap_weights = attention(q, k, v, allowed=top_left)
    np.testing.assert_array_equal(trap_weights[..., 0, :], np.broadcast_to(np.eye(S)[0], (*q.shape[:2], S)))
    np.testing.assert_allclose(as64(values["trap"]), v[:, :, :1], atol=1e-6)  # value 0, unchanged
    np.testing.assert_allclose(as64(values["trap_weights"]), trap_weights, atol=1e-7)
    output, weights = attention(q, k, v)  # no mask: the new token is the last position
    np.testing.assert_allclose(as64(values["right"]), output, atol=1e-6)
    np.testing.assert_allclose(as64(values["right_weights"]), weights, atol=1e-6)
    wrong_minus_right = np.abs(v[:, :, :1] - output).max()
    assert wrong_minus_right > 0.1
    assert_printed(tutorial, trap_weights[0, 0, 0], atol=half_unit(3))
    assert_printed(tutorial, weights[0, 0, 0], atol=half_unit(3))
    assert_printed(tutorial, [wrong_minus_right], atol=half_unit(2))


def test_a_chunk_of_new_queries_needs_the_bottom_right_mask(tutorial, values):
    k, v, chunk = (as64(values[name]) for name in ("keys", "values", "chunk"))
    L, S = chunk.shape[-2], k.shape[-2]
    assert (values["L"], L, S) == (3, 3, 6)
    top_left, bottom_right = causal(L, S), causal(L, S, lower_right=True)
    np.testing.assert_array_equal(values["lower_right"].numpy(), bottom_right)
    right, _ = attention(chunk, k, v, allowed=bottom_right)
    wrong, _ = attention(chunk, k, v, allowed=top_left)
    np.testing.assert_allclose(as64(values["theirs"]), right, atol=1e-6)
    np.testing.assert_allclose(as64(values["wrong"]), wrong, atol=1e-6)
    assert_printed(tutorial, top_left.astype(int))
    assert_printed(tutorial, bottom_right.astype(int))
    assert_printed(tutorial, [np.abs(wrong - right).max()], atol=half_unit(2))


def test_attn_ref_refuses_is_causal_once_its_cache_holds_keys(values):
    layer, cache = values["layer"], values["layer_cache"]
    assert cache.length > 0  # the first call filled it
    one = torch.zeros(1, 1, layer.embed_dim)
    with pytest.raises(ValueError, match="lower_right"):  # and it says what to pass instead
        layer(one, one, one, is_causal=True, cache=cache)
    with torch.no_grad():  # with an empty cache, top-left is right
        layer(one, one, one, is_causal=True, cache=KVCache(num_layers=1))


def test_cache_sizes_by_hand(tutorial, values):
    model, cache = values["model"], values["cache"]
    T = values["cached_tokens"].shape[1] - 1  # every token but the last is read, so cached
    assert cache.length == T
    by_hand = 2 * model.num_layers * 64 * T * 4  # keys and values, 64 features per position, float32
    assert cache.nbytes == by_hand == sum(t.numel() * 4 for t in cache.keys + cache.values)
    assert_printed(tutorial, [by_hand, by_hand], gaps=True)
    assert list(values["models"].values()) == [tuple(m) for m in MODELS]
    shown = []
    for table, (layers, kv_heads, d_k, context, window) in zip(
        values["cache_table"].values(), MODELS, strict=True
    ):
        per_token = 2 * layers * kv_heads * d_k * 2  # keys and values, 16-bit numbers
        kept = min(context, window or context)  # a rolling buffer keeps the last `window` positions
        expected = [per_token * 4096 / 2**30, per_token * kept / 2**30]
        assert table == expected
        shown.append([per_token / 1024, context, *expected] + ([window] if window else []))
    for row in shown:  # a line per model; the window only where there is one
        assert_printed(tutorial, row, gaps=True)
    assert shown[5][3] == 16  # Llama 3.1 8B: 131,072 tokens of 128 KiB
    assert shown[4][2:4] == [0.5, 0.5]  # Mistral 7B: the window stops the growth


def _linear(x, layer):
    return x @ as64(layer.weight).T + as64(layer.bias)  # nn.Linear stores W^T


def test_grouped_query_attention_is_attention_with_shared_heads(tutorial, values):
    gqa, x = values["gqa"], as64(values["x"])
    H, H_kv, d_k = gqa.num_heads, gqa.num_kv_heads, gqa.head_dim
    assert (H, H_kv, d_k) == (8, 2, 4)
    group = [h // (H // H_kv) for h in range(H)]  # the key/value head each query head reads
    assert_printed(tutorial, group)
    assert tuple(gqa.q_proj.weight.T.shape) == (32, 32) and tuple(gqa.k_proj.weight.T.shape) == (32, 8)
    B, T, C = x.shape
    q = _linear(x, gqa.q_proj).reshape(B, T, H, d_k).transpose(0, 2, 1, 3)
    k = _linear(x, gqa.k_proj).reshape(B, T, H_kv, d_k).transpose(0, 2, 1, 3)
    v = _linear(x, gqa.v_proj).reshape(B, T, H_kv, d_k).transpose(0, 2, 1, 3)
    for name, expected in (("q", q), ("k", k), ("v", v)):
        np.testing.assert_allclose(as64(values[name]), expected, atol=1e-5, err_msg=name)
    heads, _ = attention(q, k[:, group], v[:, group], allowed=causal(T))
    output = _linear(heads.transpose(0, 2, 1, 3).reshape(B, T, C), gqa.out_proj)
    for name, expected in (("ours", output), ("torch_gqa", output), ("heads", heads), ("repeated", heads)):
        np.testing.assert_allclose(as64(values[name]), expected, atol=1e-5, err_msg=name)
    gaps = [
        (values["ours"] - values["torch_gqa"]).abs().max().item(),
        (values["heads"] - values["repeated"]).abs().max().item(),
    ]
    assert max(gaps) < 1e-6
    assert_printed(tutorial, gaps, rtol=sci_rtol(1))


def test_fewer_key_value_heads_shrink_the_cache_by_the_group_size(tutorial, values):
    sizes = values["cache_sizes"]
    rows = []
    for kv_heads in (8, 2, 1):
        by_hand = 2 * 4 * kv_heads * (64 // 8) * 64 * 4  # layers, heads of 8, 64 tokens, float32
        assert sizes[kv_heads] == by_hand
        rows.append([kv_heads, by_hand, by_hand, sizes[8] / by_hand])
        assert rows[-1][3] == 8 / kv_heads
    assert_printed(tutorial, rows)


def test_pitfall_tiling_the_key_value_heads(tutorial, values):
    """repeat (0, 1, 0, 1...) pairs query heads with the wrong key/value heads: float64 attention with
    that pairing is what the page computed, and it is far from grouped-query attention."""
    q, k, v = (as64(values[name]) for name in ("q", "k", "v"))
    H, H_kv = 8, 2
    tiled_heads = [h % H_kv for h in range(H)]
    grouped_heads = [h // (H // H_kv) for h in range(H)]
    T = q.shape[-2]
    wrong, _ = attention(q, k[:, tiled_heads], v[:, tiled_heads], allowed=causal(T))
    right, _ = attention(q, k[:, grouped_heads], v[:, grouped_heads], allowed=causal(T))
    np.testing.assert_allclose(as64(values["tiled"]), wrong, atol=1e-5)
    np.testing.assert_allclose(as64(values["heads"]), right, atol=1e-5)
    gap = np.abs(wrong - right).max()
    assert gap > 0.1
    assert_printed(tutorial, [gap], atol=half_unit(2) + 1e-5)


def test_exercises(tutorial, values):
    shown = []
    for kv_heads in (32, 8, 1):  # a 24 GiB budget over the 7B-class shape's bytes per token
        shown += [kv_heads, 24 * 2**30 // (2 * 32 * kv_heads * 128 * 2)]
    assert_printed(tutorial, shown)
    model, tokens = values["model"], values["tokens"]
    with torch.no_grad():
        full = model(tokens)
    torch.testing.assert_close(torch.cat(values["chunks"], dim=1), full, atol=1e-5, rtol=0)
    W, S = values["W"], values["S"]
    window = np.arange(S) >= S - W
    np.testing.assert_array_equal(values["window"].numpy(), window)
    assert_printed(tutorial, window.astype(int))
    q1, k_all, v_all = (as64(values[name]) for name in ("q1", "k_all", "v_all"))
    expected, _ = attention(q1, k_all, v_all, allowed=window)
    np.testing.assert_allclose(as64(values["full_window"]), expected, atol=1e-6)
    np.testing.assert_allclose(as64(values["bounded"]), expected, atol=1e-6)  # a cache of W positions


def test_every_verdict_the_tutorial_prints_is_the_truth(tutorial, values):
    """The True/False the page prints, in order, are what the tests above establish independently."""
    expected = [
        True,  # cached and uncached generation: identical tokens
        True,
        True,
        True,  # 8, 2 and 1 key/value heads: identical tokens with and without the cache
        True,  # the pitfall: with is_causal=True the output is value 0
        False,  # the pitfall: tiled (repeat) key/value heads do not match enable_gqa
        True,  # chunked prefill equals the full pass
        True,  # the sliding window: the same output with a cache of W positions
    ]
    assert verdicts(tutorial) == expected
