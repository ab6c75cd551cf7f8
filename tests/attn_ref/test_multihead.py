"""attn_ref.MultiHeadAttention against torch.nn.MultiheadAttention, and grouped-query attention against
PyTorch's enable_gqa and the float64 reference."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attn_ref import MultiHeadAttention, merge_heads, repeat_kv_heads, split_heads
from attn_ref.masks import causal_mask, padding_mask
from tests.support import reference


@st.composite
def configurations(draw):
    num_heads = draw(st.integers(1, 4))
    embed_dim = num_heads * draw(st.integers(1, 4))
    B, L, S = draw(st.integers(1, 3)), draw(st.integers(1, 6)), draw(st.integers(1, 6))
    return num_heads, embed_dim, B, L, S, draw(st.booleans()), draw(st.integers(0, 2**31 - 1))


@settings(max_examples=40, deadline=None)
@given(configurations())
def test_reproduces_torch_multihead_attention(config):
    num_heads, embed_dim, B, L, S, bias, seed = config
    torch.manual_seed(seed)
    theirs = nn.MultiheadAttention(embed_dim, num_heads, bias=bias, batch_first=True).double()
    if bias:  # PyTorch initialises the biases to zero; make them count
        nn.init.normal_(theirs.in_proj_bias)
        nn.init.normal_(theirs.out_proj.bias)
    ours = MultiHeadAttention.from_torch(theirs)
    query = torch.randn(B, L, embed_dim, dtype=torch.float64)
    key, value = torch.randn(2, B, S, embed_dim, dtype=torch.float64)
    with torch.no_grad():
        output, weights = ours(query, key, value)
        expected, expected_weights = theirs(query, key, value, average_attn_weights=False)
    torch.testing.assert_close(output, expected)
    torch.testing.assert_close(weights, expected_weights)


@pytest.mark.parametrize("causal", [True, False])
def test_masks_follow_the_opposite_boolean_convention_of_nn_multiheadattention(causal):
    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(8, 2, batch_first=True)
    ours = MultiHeadAttention.from_torch(theirs)
    x = torch.randn(2, 4, 8)
    mask = causal_mask(4) if causal else padding_mask([4, 3])[:, None]  # (B, 1, 1, S)
    with torch.no_grad():
        output, _ = ours(x, x, x, attn_mask=mask)
        if causal:
            expected, _ = theirs(x, x, x, attn_mask=~mask)  # True means "blocked" there
        else:
            expected, _ = theirs(x, x, x, key_padding_mask=~mask[:, 0, 0])
    torch.testing.assert_close(output, expected)


def test_split_and_merge_heads_shapes_and_inverse():
    x = torch.randn(2, 5, 12)
    heads = split_heads(x, num_heads=3)
    assert heads.shape == (2, 3, 5, 4)
    assert torch.equal(heads[:, 1], x[..., 4:8])  # head 1 owns features 4..7
    assert torch.equal(merge_heads(heads), x)


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="num_heads=3 must divide embed_dim=8"):
        MultiHeadAttention(8, 3)
    with pytest.raises(
        ValueError, match=r"key has shape \(1, 4, 6\), expected \(1, 4, 8\): \(B, T, embed_dim\)"
    ):
        MultiHeadAttention(8, 2)(torch.zeros(1, 4, 8), torch.zeros(1, 4, 6), torch.zeros(1, 4, 8))
    with pytest.raises(ValueError, match="num_heads=5 must divide x's C=8"):
        split_heads(torch.zeros(1, 2, 8), num_heads=5)
    with pytest.raises(ValueError, match="mha must not use add_bias_kv"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2, add_bias_kv=True))


@st.composite
def grouped_configurations(draw):
    """Query heads, a divisor of them as key/value heads, and the shapes of one call."""
    num_heads = draw(st.integers(1, 6))
    num_kv_heads = draw(st.sampled_from([h for h in range(1, num_heads + 1) if num_heads % h == 0]))
    head_dim = draw(st.integers(1, 4))
    B, L, S = draw(st.integers(1, 3)), draw(st.integers(1, 6)), draw(st.integers(1, 6))
    return num_heads, num_kv_heads, head_dim, B, L, S, draw(st.integers(0, 2**31 - 1))


def _grouped_attention(seed, num_heads, num_kv_heads, head_dim, B, L, S):
    torch.manual_seed(seed)
    C = num_heads * head_dim
    ours = MultiHeadAttention(C, num_heads, num_kv_heads=num_kv_heads).double()
    for bias in (ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias, ours.out_proj.bias):
        nn.init.normal_(bias)
    query = torch.randn(B, L, C, dtype=torch.float64)
    key, value = torch.randn(2, B, S, C, dtype=torch.float64)
    return ours, query, key, value


@settings(max_examples=50, deadline=None)
@given(grouped_configurations())
def test_grouped_query_attention_matches_pytorchs_enable_gqa(config):
    num_heads, num_kv_heads, head_dim, B, L, S, seed = config
    ours, query, key, value = _grouped_attention(seed, num_heads, num_kv_heads, head_dim, B, L, S)
    with torch.no_grad():
        output, weights = ours(query, key, value)
        # The same computation with PyTorch's functions only; heads split by hand. nn.Linear stores W^T.
        q = (
            F.linear(query, ours.q_proj.weight, ours.q_proj.bias)
            .view(B, L, num_heads, head_dim)
            .transpose(1, 2)
        )
        k = (
            F.linear(key, ours.k_proj.weight, ours.k_proj.bias)
            .view(B, S, num_kv_heads, head_dim)
            .transpose(1, 2)
        )
        v = (
            F.linear(value, ours.v_proj.weight, ours.v_proj.bias)
            .view(B, S, num_kv_heads, head_dim)
            .transpose(1, 2)
        )
        heads = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)  # (B, H, L, d_k)
        expected = F.linear(heads.transpose(1, 2).reshape(B, L, -1), ours.out_proj.weight, ours.out_proj.bias)
    torch.testing.assert_close(output, expected)
    # The weights against the float64 reference: query head h reads key/value head h // group.
    group = num_heads // num_kv_heads
    k_for_each_query_head = np.repeat(k.numpy(), group, axis=1)  # (B, H, S, d_k)
    v_for_each_query_head = np.repeat(v.numpy(), group, axis=1)
    heads_ref, weights_ref = reference.attention(q.numpy(), k_for_each_query_head, v_for_each_query_head)
    np.testing.assert_allclose(weights.numpy(), weights_ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(heads.numpy(), heads_ref, rtol=1e-10, atol=1e-12)


@settings(max_examples=50, deadline=None)
@given(grouped_configurations())
def test_grouped_query_attention_is_multihead_attention_with_repeated_key_value_heads(config):
    num_heads, num_kv_heads, head_dim, B, L, S, seed = config
    ours, query, key, value = _grouped_attention(seed, num_heads, num_kv_heads, head_dim, B, L, S)
    C, group = num_heads * head_dim, num_heads // num_kv_heads

    def repeated(proj):  # (H_kv * d_k, C) rows, head by head -> each head's rows `group` times
        weight = proj.weight.view(num_kv_heads, head_dim, C).repeat_interleave(group, dim=0).reshape(C, C)
        return weight, proj.bias.view(num_kv_heads, head_dim).repeat_interleave(group, dim=0).reshape(C)

    theirs = nn.MultiheadAttention(C, num_heads, batch_first=True).double()
    with torch.no_grad():
        (k_weight, k_bias), (v_weight, v_bias) = repeated(ours.k_proj), repeated(ours.v_proj)
        theirs.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, k_weight, v_weight]))
        theirs.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, k_bias, v_bias]))
        theirs.out_proj.load_state_dict(ours.out_proj.state_dict())
        output, weights = ours(query, key, value)
        expected, expected_weights = theirs(query, key, value, average_attn_weights=False)
    torch.testing.assert_close(output, expected)
    torch.testing.assert_close(weights, expected_weights)


def test_repeat_kv_heads_groups_consecutive_query_heads_as_pytorch_does():
    kv = torch.arange(3.0).reshape(1, 3, 1, 1)  # H_kv = 3 heads, holding 0, 1 and 2
    assert repeat_kv_heads(kv, 6).flatten().tolist() == [0.0, 0.0, 1.0, 1.0, 2.0, 2.0]  # not 0, 1, 2, 0, 1, 2
    assert repeat_kv_heads(kv, 3) is kv
    # PyTorch's enable_gqa, with one key per head and queries that copy the value: the same order.
    q = torch.zeros(1, 6, 1, 1)
    assert F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True).flatten().tolist() == [0, 0, 1, 1, 2, 2]


def test_projections_shrink_with_fewer_key_value_heads():
    mha = MultiHeadAttention(embed_dim=32, num_heads=8, num_kv_heads=2)
    assert mha.q_proj.weight.shape == (32, 32)  # nn.Linear stores W^T: (out, in)
    assert mha.k_proj.weight.shape == mha.v_proj.weight.shape == (2 * 4, 32)
    assert MultiHeadAttention(32, 8).k_proj.weight.shape == (32, 32)  # the default: one per query head


@pytest.mark.parametrize(
    ("num_kv_heads", "message"),
    [
        (3, "num_kv_heads=3 must divide num_heads=8"),
        (16, "num_kv_heads=16 must divide num_heads=8"),
        (0, "num_kv_heads must be an int of at least 1, got 0"),
        (-2, "num_kv_heads must be an int of at least 1, got -2"),
        (2.0, r"num_kv_heads must be an int of at least 1, got 2\.0"),
        (True, "num_kv_heads must be an int of at least 1, got True"),
    ],
)
def test_num_kv_heads_must_divide_num_heads(num_kv_heads, message):
    with pytest.raises(ValueError, match=message):
        MultiHeadAttention(32, 8, num_kv_heads=num_kv_heads)


def test_repeat_kv_heads_errors_name_the_argument():
    with pytest.raises(ValueError, match=r"x's H_kv=3 must divide num_heads=4"):
        repeat_kv_heads(torch.zeros(1, 3, 2, 2), 4)
    with pytest.raises(
        ValueError, match=r"x has shape \(3, 2, 2\), expected 4 dimensions: \(B, H_kv, T, d_k\)"
    ):
        repeat_kv_heads(torch.zeros(3, 2, 2), 3)
