"""linear_as_attention/uniform_weights.py: q = 0 and v = d_in x_i w_i give x W^T."""

from tests.printed import flag, number_after


def test_uniform_weights_reproduce_x_w_with_values_linear_in_x(printed):
    assert number_after(printed, "max |y - x W^T| =") < 1e-12
    assert flag(printed, "v(x + x2) = v(x) + v(x2):")
