"""The MLP's shapes (C -> 4C -> C, Vaswani et al. 2017, section 3.3: d_ff = 4 d_model) and each part
of the block's parameters, counted from the weights' shapes and by formula."""

import math

from tests.support.printed import assert_printed_in_order, exact
from tests.support.transformer_block_reference import state_of


def test_the_hidden_layer_is_4c_wide(values):
    state, C = state_of(values["block"]), values["C"]
    assert state["mlp.0.weight"].shape == (4 * C, C) and state["mlp.2.weight"].shape == (C, 4 * C)
    assert [type(layer).__name__ for layer in values["block"].mlp] == ["Linear", "GELU", "Linear"]


def test_parameters_counted_and_by_formula(values, printed):
    state, C = state_of(values["block"]), values["C"]

    def counted(prefixes):
        return sum(math.prod(v.shape) for k, v in state.items() if k.startswith(prefixes))

    expected_counts = {
        "attention": (counted("attn."), 4 * C * C + 4 * C),  # four (C, C) matrices, four biases
        "MLP": (counted("mlp."), C * 4 * C + 4 * C + 4 * C * C + C),
        "norms": (counted(("norm1.", "norm2.")), 2 * 2 * C),
    }
    assert counted("") == sum(n for n, _ in expected_counts.values())  # nothing left out
    for name, (n, formula) in expected_counts.items():
        assert n == formula == values["counts"][name][0] == values["counts"][name][1], name
    expected = [exact(n) for n in (C, 4 * C, 4 * C, C)]  # the MLP as printed: in and out features
    for n, formula in expected_counts.values():
        expected += [exact(n), exact(formula)]
    assert_printed_in_order(printed, expected)


def test_the_mlp_holds_about_two_thirds_of_the_block(values):
    """The page: "The MLP holds about two thirds of the block's parameters" (8C^2 + 5C of
    12C^2 + 13C, two thirds as C grows; at this C, a little less)."""
    counts = {name: counted for name, (counted, _) in values["counts"].items()}
    share = counts["MLP"] / sum(counts.values())
    assert 0.6 < share < 2 / 3
