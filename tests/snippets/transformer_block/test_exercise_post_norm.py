"""The post-norm block (Vaswani et al., 2017, section 3.1: "LayerNorm(x + Sublayer(x))") built from
DecoderBlock's modules against nn.TransformerEncoderLayer(norm_first=False), in float64; after it
every token has the spread LayerNorm gives (gamma 1, beta 0), while the pre-norm stream keeps its own."""

import numpy as np

from tests.support.printed import assert_printed_in_order, decimals, printed_flags
from tests.support.reference import U64, as64, causal
from tests.support.transformer_block_reference import (
    LN_EPS,
    allclose_guaranteed,
    block_state_from_encoder_layer,
    held,
    layer_norm,
    post_norm_block,
    pre_norm_block,
    state_of,
)


def test_post_norm_is_pytorchs_norm_first_false(values, printed):
    layer = values["theirs"]
    assert not layer.norm_first
    state = block_state_from_encoder_layer(layer)
    for name, value in state.items():
        np.testing.assert_array_equal(state_of(values["parts"])[name], value, err_msg=name)
    allowed = causal(values["T"])
    value, bound = post_norm_block(held(values["x"]), state, values["H"], allowed, U64)
    for name in ("post", "out_theirs"):
        assert (np.abs(as64(values[name]) - value) <= 2 * bound).all(), name
    (same,) = printed_flags(printed)
    assert allclose_guaranteed(4 * bound, value, 2 * bound, atol=1e-9, rtol=0) and same


def test_spread_of_each_token_after_each_block(values, printed):
    state = block_state_from_encoder_layer(values["theirs"])
    # PyTorch starts LayerNorm at gamma = 1, beta = 0: a post-norm output is z itself.
    assert (state["norm2.weight"] == 1).all() and (state["norm2.bias"] == 0).all()
    allowed = causal(values["T"])
    post, post_bound = post_norm_block(held(values["x"]), state, values["H"], allowed, U64)
    pre, pre_bound = pre_norm_block(held(values["x"]), state, values["H"], allowed, U64)["out"]
    expected = []
    for value, bound in ((post, post_bound), (pre, pre_bound)):
        spreads = value[0].std(axis=-1)
        expected += [
            decimals(s, 2, 2 * b + 1e-12) for s, b in zip(spreads, bound[0].max(axis=-1), strict=True)
        ]
    assert_printed_in_order(printed, expected)
    # Post-norm: sqrt(var / (var + eps)) for each token, a hair under 1; pre-norm: far from 1.
    mid = layer_norm((post, np.zeros_like(post)), np.ones(values["C"]), np.zeros(values["C"]), U64)[0]
    np.testing.assert_allclose(mid, post, atol=1e-6)  # normalising it again changes it only by eps
    assert (np.abs(post[0].std(axis=-1) - 1) < LN_EPS).all()
    assert (np.abs(pre[0].std(axis=-1) - 1) > 0.5).all()
