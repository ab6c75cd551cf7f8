"""Our block with PyTorch's weights against nn.TransformerEncoderLayer(norm_first=True): the weights
are copied exactly, and both outputs are the pre-norm formula in float64
(tests/support/transformer_block_reference.py), with the causal mask; without a mask PyTorch's layer
gives something else."""

import numpy as np

from tests.support.printed import assert_printed_in_order, exact, printed_flags, significant
from tests.support.reference import U64, as64, causal
from tests.support.transformer_block_reference import (
    allclose_guaranteed,
    allclose_refuted,
    block_state_from_encoder_layer,
    held,
    pre_norm_block,
    state_of,
)


def test_every_weight_is_copied_exactly(values):
    theirs = block_state_from_encoder_layer(values["theirs"])
    ours = state_of(values["ours"])
    assert sorted(ours) == sorted(theirs)
    for name, value in theirs.items():
        np.testing.assert_array_equal(ours[name], value, err_msg=name)
    layer = values["theirs"]
    assert layer.norm_first and layer.linear1.out_features == 4 * values["C"]
    assert layer.self_attn.num_heads == values["H"] and layer.self_attn.batch_first


def reference(values, allowed):
    """The formula with PyTorch's weights. Both the snippet and this reference compute in float64,
    so each lies within the bound of the exact result: a snippet's output within twice it."""
    state = block_state_from_encoder_layer(values["theirs"])
    return pre_norm_block(held(values["x"]), state, values["H"], allowed, U64)["out"]


def test_both_are_the_pre_norm_formula_with_a_causal_mask(values, printed):
    value, bound = reference(values, causal(values["T"]))
    for name in ("out_ours", "out_theirs"):
        assert (np.abs(as64(values[name]) - value) <= 2 * bound).all(), name
    gap = np.abs(as64(values["out_ours"]) - as64(values["out_theirs"])).max()
    assert gap == values["gap"] and gap <= 4 * bound.max()
    same, unmasked = printed_flags(printed)
    assert allclose_guaranteed(4 * bound, value, 2 * bound, atol=1e-9, rtol=0)
    assert same
    # Without the mask every token sees the later ones too: a different output.
    no_mask = reference(values, np.ones((values["T"], values["T"]), dtype=bool))
    assert (np.abs(as64(values["out_unmasked"]) - no_mask[0]) <= 2 * no_mask[1]).all()
    assert allclose_refuted((value, 2 * bound), (no_mask[0], 2 * no_mask[1]), atol=1e-8)
    assert unmasked is False
    # This site's mask passed as is: PyTorch reads True as blocked, so query i sees only the keys
    # after it, and the last query none: NaN there, and the formula with that mask elsewhere.
    T = values["T"]
    reversed_mask = ~causal(T)
    reversed_mask[-1, -1] = True  # the last row is checked apart; rows are independent queries
    as_is = as64(values["out_as_is"])
    assert np.isnan(as_is[:, -1]).all() and not np.isnan(as_is[:, :-1]).any()
    value, bound = reference(values, reversed_mask)
    assert (np.abs(as_is[:, :-1] - value[:, :-1]) <= 2 * bound[:, :-1]).all()
    assert values["nan_at"] == [T - 1]
    assert_printed_in_order(printed, [exact(T - 1)])
    assert_printed_in_order(printed, [significant(values["gap"], 2)])
