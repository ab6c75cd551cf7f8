"""The KV-cache tutorial, as the build executed it, checked against references computed here.

The references are independent of attn_ref's cache and attention: greedy decoding written out
as a loop of full forward passes, float64 NumPy attention and causal masks (tests/reference.py)
on the same projections, the work per token and the cache sizes counted by hand from the
model's shapes. The timings depend on the machine; their table is checked to print what was measured.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from tests.printed import block_after, flag, line_after, list_after, number_after, numbers
from tests.reference import attention, causal


def _rows(printed, header, count):
    """The ``count`` lines printed under the one line ``header``, as lists of numbers."""
    assert printed.count(header + "\n") == 1, header
    lines = printed.split(header + "\n")[1].splitlines()[:count]
    return [[float(n) for n in re.findall(r"\d+(?:\.\d+)?", line.replace(",", ""))] for line in lines]


def test_cached_and_uncached_generation_give_the_greedy_tokens(printed, values):
    model, prompt, VOCAB = values["model"], values["prompt"], values["VOCAB"]
    tokens = prompt
    with torch.no_grad():
        for _ in range(values["cached_logits"].shape[1]):  # greedy, one full forward pass per token
            tokens = torch.cat([tokens, model(tokens)[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
    text = repr("".join(VOCAB[i] for i in tokens[0].tolist()))
    assert line_after(printed, "with the cache:").strip() == line_after(printed, "without:").strip() == text
    assert flag(printed, "identical tokens:")
    steps = values["cached_logits"].shape[1]
    difference = number_after(printed, f"largest |logit difference| over the {steps} steps:")
    assert difference == pytest.approx(
        (values["cached_logits"] - values["plain_logits"]).abs().max().item(), rel=0.05
    )
    gap = number_after(printed, "smallest gap between the best and the second-best logit:")
    assert difference < 1e-5 and 100 * difference < gap


def test_the_cache_holds_two_tensors_per_layer_and_position(printed, values):
    model = values["model"]
    C, H = model.blocks[0].attn.embed_dim, model.blocks[0].attn.num_heads
    assert f"after the prompt: 10 positions; layer 0 keys (1, {H}, 10, {C // H})" in printed
    assert f"after one token:  11 positions; layer 0 keys (1, {H}, 11, {C // H})" in printed
    assert number_after(printed, "bytes held:") == 2 * model.num_layers * C * 11 * 4  # keys, values, float32
    moved = number_after(printed, "largest change of a cached key or value when a token is appended:")
    assert 0 <= moved < 1e-5


def test_work_per_token_counted_by_hand(printed, values):
    model = values["model"]
    C, V, layers = 64, len(values["VOCAB"]), model.num_layers
    assert model.blocks[0].attn.embed_dim == C
    rows = _rows(printed, "    t  without cache  with cache  ratio  attention's share without", 4)
    for t, shown in zip((16, 64, 256, 512), rows, strict=True):
        per_position = layers * 24 * C * C + 2 * C * V  # projections and MLP, then the output head
        without = t * per_position + layers * 4 * t * t * C  # Q K^T and A V of t queries over t keys
        cached = per_position + layers * 4 * t * C  # one query over t keys
        assert shown == [t, without, cached, t, round(100 * layers * 4 * t * t * C / without)]


def test_the_timing_table_is_what_was_measured(printed, values):
    # Times depend on the machine: the page says what to look for, and this checks only that the
    # table and the fitted growth print what the build measured.
    timings, speedups, lengths = values["timings"], values["speedups"], values["lengths"]
    np.testing.assert_allclose(speedups, timings[:, 0] / timings[:, 1])
    rows = _rows(printed, "    t  without cache  with cache  speed-up", len(lengths))
    for t, (plain_ms, cached_ms), speedup, shown in zip(lengths, timings, speedups, rows, strict=True):
        assert shown == pytest.approx([t, plain_ms, cached_ms, speedup], abs=0.051)
    growth = values["growth"]
    for way in (0, 1):
        fitted = np.polyfit(np.log(lengths[-3:]), np.log(timings[-3:, way]), 1)[0]
        assert growth[way] == pytest.approx(fitted)
    shown = numbers(line_after(printed, "time grows like"))
    assert shown == pytest.approx(growth, abs=0.006)


def _alignment_data():
    """The page's one new query and six keys, drawn again from the same seed."""
    g = torch.Generator().manual_seed(1)
    q = torch.randn(1, 2, 1, 8, generator=g)
    k, v = torch.randn(2, 1, 2, 6, 8, generator=g)
    chunk = torch.randn(1, 2, 3, 8, generator=g)
    return q.double().numpy(), k.double().numpy(), v.double().numpy(), chunk.double().numpy()


def test_is_causal_lets_one_new_query_see_only_key_0(printed, values):
    q, k, v, _ = _alignment_data()
    assert numbers(line_after(printed, "is_causal=True, weights of head 0:")).tolist() == [1, 0, 0, 0, 0, 0]
    np.testing.assert_allclose(values["trap"].numpy(), v[:, :, :1], atol=1e-6)
    assert flag(printed, "the output is value 0, unchanged:")
    output, weights = attention(q, k, v)  # no mask: the new token is the last position
    np.testing.assert_allclose(
        numbers(line_after(printed, "no mask, weights of head 0:")), weights[0, 0, 0], atol=5e-4
    )
    np.testing.assert_allclose(values["right"].numpy(), output, atol=1e-6)
    wrong_minus_right = np.abs(v[:, :, :1] - output).max()
    assert number_after(printed, "largest |wrong - right| output:") == pytest.approx(
        wrong_minus_right, abs=0.006
    )


def test_a_chunk_of_new_queries_needs_the_bottom_right_mask(printed, values):
    _, k, v, chunk = _alignment_data()
    L, S = 3, 6
    top_left, bottom_right = causal(L, S), causal(L, S, lower_right=True)
    np.testing.assert_array_equal(block_after(printed, "top-left, as is_causal=True:", rows=L), top_left)
    np.testing.assert_array_equal(
        block_after(printed, "bottom-right, causal_mask(L, S, lower_right=True):", rows=L), bottom_right
    )
    right, _ = attention(chunk, k, v, allowed=bottom_right)
    wrong, _ = attention(chunk, k, v, allowed=top_left)
    np.testing.assert_allclose(values["theirs"].numpy(), right, atol=1e-6)
    shown = number_after(printed, "largest |is_causal=True - bottom-right| output:")
    assert shown == pytest.approx(np.abs(wrong - right).max(), abs=0.006)
    assert "pass attn_mask=causal_mask(L, S, lower_right=True) instead" in printed


def test_cache_sizes_by_hand(printed, values):
    T = values["cached_tokens"].shape[1] - 1  # every token but the last is read, so cached
    assert (
        numbers(line_after(printed, "sum of the cached tensors' bytes:")).tolist() == [2 * 4 * 64 * T * 4] * 2
    )
    # layers, key/value heads, head size, context, window. Llama 2: config.json on Hugging Face
    # (num_hidden_layers, num_key_value_heads, hidden_size / num_attention_heads,
    # max_position_embeddings); Mistral 7B: Table 1 of its paper; Llama 3.1: sku_list.py of
    # meta-llama/llama-models (n_layers, n_kv_heads, dim / n_heads, CONTEXT_LENGTH).
    models = {
        "7B class, 32 KV heads": (32, 32, 4096 // 32, 4096, None),
        "7B class, 8 KV heads": (32, 8, 4096 // 32, 4096, None),
        "7B class, 1 KV head": (32, 1, 4096 // 32, 4096, None),
        "Llama 2 70B": (80, 8, 8192 // 64, 4096, None),
        "Mistral 7B": (32, 8, 128, 8192, 4096),
        "Llama 3.1 8B": (32, 8, 4096 // 32, 131072, None),
        "Llama 3.1 70B": (80, 8, 8192 // 64, 131072, None),
    }
    for name, (layers, kv_heads, d_k, context, window) in models.items():
        per_token = 2 * layers * kv_heads * d_k * 2  # keys and values, 16-bit numbers
        kept = min(context, window or context)  # a rolling buffer keeps the last `window` positions
        expected = [per_token / 1024, context, per_token * 4096 / 2**30, per_token * kept / 2**30]
        if window:
            expected.append(window)
        assert numbers(line_after(printed, name + " ").replace(",", "")).tolist() == expected
    assert values["cache_table"]["Llama 3.1 8B"][1] == 16  # 131,072 tokens of 128 KiB
    assert values["cache_table"]["Mistral 7B"] == [0.5, 0.5]  # the window stops the growth


def _linear(x, layer):
    return x @ layer.weight.detach().double().numpy().T + layer.bias.detach().double().numpy()  # stores W^T


def test_grouped_query_attention_is_attention_with_shared_heads(printed, values):
    gqa, x = values["gqa"], values["x"].double().numpy()
    H, H_kv, d_k = 8, 2, 4
    assert (gqa.num_heads, gqa.num_kv_heads, gqa.head_dim) == (H, H_kv, d_k)
    assert list_after(printed, "key/value head of each query head:") == [h // (H // H_kv) for h in range(H)]
    assert "W_Q: (32, 32)  W_K: (32, 8)" in printed
    B, T, C = x.shape
    q = _linear(x, gqa.q_proj).reshape(B, T, H, d_k).transpose(0, 2, 1, 3)
    k = _linear(x, gqa.k_proj).reshape(B, T, H_kv, d_k).transpose(0, 2, 1, 3)
    v = _linear(x, gqa.v_proj).reshape(B, T, H_kv, d_k).transpose(0, 2, 1, 3)
    group = [h // (H // H_kv) for h in range(H)]  # the key/value head each query head reads
    heads, _ = attention(q, k[:, group], v[:, group], allowed=causal(T))
    output = _linear(heads.transpose(0, 2, 1, 3).reshape(B, T, C), gqa.out_proj)
    np.testing.assert_allclose(values["ours"].numpy(), output, atol=1e-5)
    np.testing.assert_allclose(values["heads"].numpy(), heads, atol=1e-5)
    assert number_after(printed, "largest |attn_ref - PyTorch enable_gqa| output:") < 1e-6
    assert number_after(printed, "largest |enable_gqa - repeated heads| per head:") < 1e-6


def test_fewer_key_value_heads_shrink_the_cache_by_the_group_size(printed):
    rows = _rows(printed, "H_kv  cache bytes  formula  MHA / this  identical tokens", 3)
    for shown, kv_heads in zip(rows, (8, 2, 1), strict=True):
        by_hand = 2 * 4 * kv_heads * (64 // 8) * 64 * 4  # layers, heads of 8, 64 tokens, float32
        assert shown == [kv_heads, by_hand, by_hand, 8 / kv_heads]
    lines = printed.split("H_kv  cache bytes  formula  MHA / this  identical tokens\n")[1].splitlines()[:3]
    assert all(line.endswith(" True") for line in lines)


def test_exercises(printed, values):
    for kv_heads in (32, 8, 1):  # a 24 GiB budget over the 7B-class shape's bytes per token
        shown = numbers(line_after(printed, f"H_kv = {kv_heads:>2}:").replace(",", ""))
        assert shown[0] == 24 * 2**30 // (2 * 32 * kv_heads * 128 * 2)
    assert flag(printed, "chunked equals full:")
    assert not flag(printed, "tiled matches enable_gqa:")
    assert number_after(printed, "largest difference:") > 0.1
    assert list_after(printed, "window mask:") == [0] * 6 + [1] * 4
    assert flag(printed, "same output:")
