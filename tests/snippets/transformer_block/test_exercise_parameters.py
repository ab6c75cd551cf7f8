"""A block of GPT-2 small's width (C = 768, 12 heads; Radford et al., 2019, Table 2): 12 C^2 + 13 C
parameters, two thirds of them in the MLP, counted by hand from the shapes of the weights."""

from tests.support.printed import assert_printed_in_order, decimals, exact


def test_counts(values, printed):
    C = values["C"]
    assert C == 768
    attention = 4 * (C * C + C)  # W_Q, W_K, W_V, W_O and their biases
    mlp = (C * 4 * C + 4 * C) + (4 * C * C + C)  # C -> 4C and 4C -> C, with biases
    norms = 2 * 2 * C  # gamma and beta, twice
    total = attention + mlp + norms
    assert total == 12 * C**2 + 13 * C == values["counted"] == values["formula"]
    assert values["in_mlp"] == mlp
    shown = printed.replace(",", "")  # thousands separators
    expected = [exact(total), exact(total), exact(mlp), decimals(mlp / total, 3), exact(12 * total)]
    assert_printed_in_order(shown, expected)
    assert abs(mlp / total - 2 / 3) < 0.001  # "two thirds"
