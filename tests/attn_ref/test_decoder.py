"""attn_ref.decoder: the cache changes nothing but the cost, against PyTorch's own layers and the
float64 reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch.nn.attention.bias import causal_lower_right
from torch.utils.flop_counter import FlopCounterMode

from attn_ref import (
    KVCache,
    MultiHeadAttention,
    TinyDecoder,
    decoding_flops,
    generate,
    kv_cache_bytes,
    scaled_dot_product_attention,
)
from attn_ref.masks import causal_mask
from tests.support import reference

SETTINGS = settings(max_examples=40, deadline=None)


@st.composite
def decoders(draw):
    """A float64 TinyDecoder of random shape and seed, including grouped and multi-query heads."""
    num_heads = draw(st.integers(1, 4))
    num_kv_heads = draw(st.sampled_from([h for h in range(1, num_heads + 1) if num_heads % h == 0]))
    config = {
        "vocab_size": draw(st.integers(2, 12)),
        "context_length": draw(st.integers(2, 12)),
        "embed_dim": num_heads * draw(st.integers(1, 4)),
        "num_layers": draw(st.integers(1, 3)),
        "num_heads": num_heads,
        "num_kv_heads": num_kv_heads,
    }
    torch.manual_seed(draw(st.integers(0, 2**31 - 1)))
    return TinyDecoder(**config).double().eval()


@st.composite
def decoders_and_prompts(draw):
    model = draw(decoders())
    B = draw(st.integers(1, 2))
    T = draw(st.integers(1, model.context_length))
    max_new_tokens = draw(st.integers(0, model.context_length - T + 1))
    prompt = torch.randint(0, model.head.out_features, (B, T))
    return model, prompt, max_new_tokens


@SETTINGS
@given(decoders_and_prompts())
def test_cached_generation_gives_the_same_tokens_and_logits(case):
    model, prompt, max_new_tokens = case
    tokens, logits = generate(model, prompt, max_new_tokens, use_cache=True)
    expected_tokens, expected_logits = generate(model, prompt, max_new_tokens, use_cache=False)
    assert torch.equal(tokens, expected_tokens)
    assert tokens.shape == (prompt.shape[0], prompt.shape[1] + max_new_tokens)
    assert torch.equal(tokens[:, : prompt.shape[1]], prompt)
    torch.testing.assert_close(logits, expected_logits, rtol=1e-10, atol=1e-10)
    # Each new token is the argmax of its step's logits, and the uncached logits of step i are
    # the full model's prediction after position T + i - 1.
    assert torch.equal(tokens[:, prompt.shape[1] :], logits.argmax(dim=-1))
    if max_new_tokens:
        with torch.no_grad():
            full = model(tokens[:, :-1])  # (B, T + N - 1, vocab)
        torch.testing.assert_close(logits, full[:, prompt.shape[1] - 1 :], rtol=1e-10, atol=1e-10)


@SETTINGS
@given(decoders(), st.data())
def test_a_chunk_of_new_tokens_after_the_cache_matches_the_full_sequence(model, data):
    # Several new queries at once (chunked prefill): the mask must be aligned to the bottom right.
    T = data.draw(st.integers(2, model.context_length))
    split = data.draw(st.integers(1, T - 1))
    tokens = torch.randint(0, model.head.out_features, (2, T))
    cache = KVCache(model.num_layers)
    with torch.no_grad():
        first = model(tokens[:, :split], cache)  # (B, split, vocab)
        second = model(tokens[:, split:], cache)  # (B, T - split, vocab)
        full = model(tokens)  # (B, T, vocab)
    torch.testing.assert_close(torch.cat([first, second], dim=1), full, rtol=1e-10, atol=1e-10)
    assert cache.length == T


def _torch_decoder_logits(model: TinyDecoder, tokens: torch.Tensor) -> torch.Tensor:
    """The same model run through torch.nn.TransformerEncoderLayer(norm_first=True) blocks."""
    T = tokens.shape[1]
    x = model.token_embedding(tokens) + model.position_embedding(torch.arange(T))  # (B, T, C)
    mask = nn.Transformer.generate_square_subsequent_mask(T, dtype=x.dtype)  # (T, T), -inf above
    for block in model.blocks:
        C = block.norm1.normalized_shape[0]
        layer = nn.TransformerEncoderLayer(
            C, block.attn.num_heads, 4 * C, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
        ).double()
        with torch.no_grad():
            attn = block.attn
            layer.self_attn.in_proj_weight.copy_(
                torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight])
            )
            layer.self_attn.in_proj_bias.copy_(
                torch.cat([attn.q_proj.bias, attn.k_proj.bias, attn.v_proj.bias])
            )
            layer.self_attn.out_proj.load_state_dict(attn.out_proj.state_dict())
            layer.norm1.load_state_dict(block.norm1.state_dict())
            layer.norm2.load_state_dict(block.norm2.state_dict())
            layer.linear1.load_state_dict(block.mlp[0].state_dict())
            layer.linear2.load_state_dict(block.mlp[2].state_dict())
        x = layer.eval()(x, src_mask=mask)
    return model.head(model.norm(x))


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 8), st.integers(0, 2**31 - 1))
def test_the_uncached_forward_is_pytorchs_pre_norm_transformer(num_heads, num_layers, T, seed):
    torch.manual_seed(seed)
    model = TinyDecoder(17, 8, 4 * num_heads, num_layers, num_heads).double().eval()
    for parameter in model.parameters():  # PyTorch zeroes biases and sets norms to one: make them count
        nn.init.normal_(parameter, std=0.5)
    tokens = torch.randint(0, 17, (2, T))
    with torch.no_grad():
        torch.testing.assert_close(model(tokens), _torch_decoder_logits(model, tokens))


@pytest.mark.parametrize(("num_heads", "num_kv_heads"), [(8, 8), (8, 4), (8, 2), (8, 1), (6, 3)])
def test_the_cache_measures_what_the_formula_says_and_shrinks_by_the_group_size(num_heads, num_kv_heads):
    torch.manual_seed(0)
    embed_dim, num_layers, B, T = 48, 3, 2, 7
    model = TinyDecoder(11, 16, embed_dim, num_layers, num_heads, num_kv_heads).eval()
    cache = KVCache(num_layers)
    with torch.no_grad():
        model(torch.randint(0, 11, (B, T - 2)), cache)
        model(torch.randint(0, 11, (B, 1)), cache)
        model(torch.randint(0, 11, (B, 1)), cache)
    head_dim = embed_dim // num_heads
    assert cache.length == T
    assert all(k.shape == (B, num_kv_heads, T, head_dim) for k in cache.keys + cache.values)
    assert cache.nbytes == kv_cache_bytes(
        num_layers, num_kv_heads, head_dim, T, bytes_per_number=4, batch_size=B
    )
    # By hand: keys and values, 3 layers, H_kv heads of 48 / H numbers, 7 positions, 2 sequences, 4 bytes.
    assert cache.nbytes == 2 * 3 * num_kv_heads * (48 // num_heads) * 7 * 2 * 4
    full = kv_cache_bytes(num_layers, num_heads, head_dim, T, bytes_per_number=4, batch_size=B)
    assert full / cache.nbytes == num_heads / num_kv_heads


def test_cache_size_of_a_7b_class_shape_by_hand():
    # 32 layers, 32 heads of 128, 2 bytes a number: 2 * 32 * 32 * 128 * 2 = 2**19 bytes per token.
    assert kv_cache_bytes(32, 32, 128, 1) == 2**19 == 524_288
    assert kv_cache_bytes(32, 32, 128, 32_768) == 2**34  # 16 GiB
    assert kv_cache_bytes(32, 8, 128, 32_768) == 2**32  # 4 GiB
    assert kv_cache_bytes(32, 1, 128, 32_768) == 2**29  # 512 MiB


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3), st.integers(1, 9), st.integers(1, 8), st.integers(0, 2**31 - 1))
def test_alignment_trap_one_new_query_against_the_cache(num_heads, S, d_k, seed):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, num_heads, 1, d_k, generator=g, dtype=torch.float64)  # one new query
    k = torch.randn(1, num_heads, S, d_k, generator=g, dtype=torch.float64)  # S cached keys (it included)
    v = torch.randn(1, num_heads, S, d_k, generator=g, dtype=torch.float64)
    right, _ = reference.attention(q.numpy(), k.numpy(), v.numpy())
    key_0_only, _ = reference.attention(q.numpy(), k[..., :1, :].numpy(), v[..., :1, :].numpy())
    trap = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # top-left: sees key 0 only
    np.testing.assert_allclose(trap.numpy(), key_0_only, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(key_0_only, v[..., :1, :].numpy(), rtol=1e-12, atol=1e-12)
    for output in (
        F.scaled_dot_product_attention(q, k, v),  # no mask
        F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(1, S)),
        scaled_dot_product_attention(q, k, v)[0],
        scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(1, S, lower_right=True))[0],
    ):
        np.testing.assert_allclose(output.numpy(), right, rtol=1e-10, atol=1e-12)
    if S > 1:  # the trap is a real difference, not a rounding one
        assert not np.allclose(trap.numpy(), right)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(0, 6), st.integers(1, 8), st.integers(0, 2**31 - 1))
def test_a_chunk_of_new_queries_needs_the_lower_right_mask(L, cached, d_k, seed):
    S = cached + L  # the L new queries are the last L of S positions
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(2, L, d_k, generator=g, dtype=torch.float64)
    k = torch.randn(2, S, d_k, generator=g, dtype=torch.float64)
    v = torch.randn(2, S, d_k, generator=g, dtype=torch.float64)
    # Written out: query i sits at position cached + i and may see keys 0..cached + i.
    allowed = np.arange(S)[None, :] <= cached + np.arange(L)[:, None]  # (L, S)
    expected, expected_weights = reference.attention(q.numpy(), k.numpy(), v.numpy(), allowed=allowed)
    assert np.array_equal(causal_mask(L, S, lower_right=True).numpy(), allowed)
    output, weights = scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(L, S, lower_right=True))
    np.testing.assert_allclose(output.numpy(), expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(weights.numpy(), expected_weights, rtol=1e-10, atol=1e-12)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(L, S))
    np.testing.assert_allclose(theirs.numpy(), expected, rtol=1e-10, atol=1e-12)


def test_is_causal_with_a_filled_cache_is_refused():
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2)
    cache = KVCache(num_layers=1)
    x = torch.randn(1, 3, 8)
    mha(x, x, x, is_causal=True, cache=cache)  # an empty cache: top-left is right here
    with pytest.raises(ValueError, match=r"is_causal=True aligns the mask to the top left.*lower_right=True"):
        mha(x[:, :1], x[:, :1], x[:, :1], is_causal=True, cache=cache)


def test_generation_is_not_stuck_on_one_token():
    # The demonstration of equal tokens means little if every token is the same.
    torch.manual_seed(0)
    model = TinyDecoder(vocab_size=32, context_length=40, embed_dim=32, num_layers=2, num_heads=4).eval()
    tokens, _ = generate(model, torch.tensor([[1, 2, 3]]), max_new_tokens=30)
    assert len(set(tokens[0, 3:].tolist())) > 10


def test_zero_new_tokens_returns_the_prompt_and_no_logits():
    model = TinyDecoder(5, 4, 8, 1, 2)
    prompt = torch.tensor([[0, 1, 2, 3]])  # fills the context: nothing is read after it
    tokens, logits = generate(model, prompt, 0)
    assert torch.equal(tokens, prompt) and logits.shape == (1, 0, 5)
    tokens, logits = generate(model, prompt, 1)  # the one new token is chosen, never read
    assert tokens.shape == (1, 5) and logits.shape == (1, 1, 5)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda m: generate(m, torch.zeros(1, 9, dtype=torch.long), 1),
            ValueError,
            r"prompt has T=9 tokens, more than the model's context_length=8",
        ),
        (
            lambda m: generate(m, torch.zeros(1, 6, dtype=torch.long), 4),
            ValueError,
            r"prompt \(T=6\) and max_new_tokens=4 need 9 positions.*context_length is 8",
        ),
        (
            lambda m: generate(m, torch.zeros(1, 3), 1),
            ValueError,
            r"prompt must be a \(B, T\) tensor of integer",
        ),
        (
            lambda m: generate(m, torch.zeros(3, dtype=torch.long), 1),
            ValueError,
            r"prompt must be a \(B, T\).*got shape \(3,\)",
        ),
        (
            lambda m: generate(m, torch.zeros(1, 0, dtype=torch.long), 1),
            ValueError,
            r"prompt must have T >= 1 tokens, got shape \(1, 0\)",
        ),
        (
            lambda m: generate(m, torch.zeros(1, 2, dtype=torch.long), -1),
            ValueError,
            "max_new_tokens must be",
        ),
        (
            lambda m: m(torch.zeros(1, 9, dtype=torch.long)),
            ValueError,
            r"tokens has T=9 positions after 0 cached ones, 9 in all; the model's context_length is 8",
        ),
        (lambda m: m(torch.zeros(1, 2)), ValueError, r"tokens must be a \(B, T\) tensor of integer ids"),
        (
            lambda m: m(torch.zeros(1, 2, dtype=torch.long), KVCache(3)),
            ValueError,
            "cache has num_layers=3, expected 2",
        ),
        (
            lambda m: TinyDecoder(10, 8, 12, 2, num_heads=4, num_kv_heads=3),
            ValueError,
            r"num_kv_heads=3 must divide num_heads=4",
        ),
        (
            lambda m: TinyDecoder(10, 8, 12, 2, num_heads=5),
            ValueError,
            r"num_heads=5 must divide embed_dim=12",
        ),
        (
            lambda m: TinyDecoder(10, 0, 12, 2, 4),
            ValueError,
            "context_length must be an int of at least 1, got 0",
        ),
        (lambda m: KVCache(0), ValueError, "num_layers must be an int of at least 1, got 0"),
        (
            lambda m: kv_cache_bytes(32, 8, 128, -1),
            ValueError,
            "num_tokens must be an int of at least 0, got -1",
        ),
    ],
)
def test_bad_input_raises_an_error_naming_the_argument(call, error, message):
    torch.manual_seed(0)
    model = TinyDecoder(vocab_size=10, context_length=8, embed_dim=12, num_layers=2, num_heads=4)
    with pytest.raises(error, match=message):
        call(model)


def test_cache_update_rejects_mismatched_shapes_and_layers_out_of_order():
    cache = KVCache(num_layers=2)
    k = torch.zeros(1, 2, 3, 4)
    with pytest.raises(ValueError, match=r"layer=1 is out of order.*lie in \[0, 0\]"):
        cache.update(1, k, k)
    with pytest.raises(ValueError, match=r"key and value must both have shape \(B, H_kv, T_new, d_k\)"):
        cache.update(0, k, torch.zeros(1, 2, 3, 5))
    cache.update(0, k, k)
    with pytest.raises(ValueError, match=r"key has shape \(1, 1, 1, 4\), expected \(1, 2, T_new, 4\)"):
        cache.update(0, torch.zeros(1, 1, 1, 4), torch.zeros(1, 1, 1, 4))
    with pytest.raises(ValueError, match=r"layer=2 is out of order"):
        cache.update(2, k, k)


@settings(max_examples=30, deadline=None)
@given(decoders(), st.data())
def test_decoding_flops_is_what_pytorchs_flop_counter_counts(model, data):
    t = data.draw(st.integers(1, model.context_length))
    tokens = torch.randint(0, model.head.out_features, (1, t))
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(tokens)
    assert counter.get_total_flops() == decoding_flops(model, t, use_cache=False)
    cache = KVCache(model.num_layers)
    with torch.no_grad():
        if t > 1:
            model(tokens[:, :-1], cache)
        with FlopCounterMode(display=False) as counter:
            model(tokens[:, -1:], cache)
    assert counter.get_total_flops() == decoding_flops(model, t, use_cache=True)


def test_decoding_flops_rejects_lengths_beyond_the_context():
    model = TinyDecoder(5, 4, 8, 1, 2)
    with pytest.raises(ValueError, match=r"t must be an int in \[1, 4\], got 5"):
        decoding_flops(model, 5, use_cache=True)
