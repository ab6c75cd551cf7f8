"""attn_ref.MultiHeadAttention against torch.nn.MultiheadAttention."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attn_ref import MultiHeadAttention, causal_mask, merge_heads, padding_mask, split_heads


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
    with pytest.raises(ValueError, match=r"key has shape \(1, 4, 6\), expected \(B, T, 8\)"):
        MultiHeadAttention(8, 2)(torch.zeros(1, 4, 8), torch.zeros(1, 4, 6), torch.zeros(1, 4, 8))
    with pytest.raises(ValueError, match="num_heads=5 does not divide"):
        split_heads(torch.zeros(1, 2, 8), num_heads=5)
    with pytest.raises(ValueError, match="mha must not use add_bias_kv"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2, add_bias_kv=True))
