"""linear_as_attention/picture.py: the picture's weights, values and output, worked out by hand for
x = (2, -1, 0.5, 1.5) and its W: ||x||_1 = 5, a = |x| / 5, v_i = 5 sign(x_i) w_i, and a v = x W^T."""

import numpy as np

from tests.support.printed import assert_shows, rounded


def test_the_picture_draws_the_construction_worked_out_by_hand(values, printed, figure):
    x = np.array([2.0, -1.0, 0.5, 1.5])
    W = np.array([[1.0, 0.0, -1.0, 2.0], [0.0, 1.0, 1.0, -1.0]])
    a = np.abs(x) / 5  # 0.4, 0.2, 0.1, 0.3
    v = 5 * np.sign(x)[:, None] * W.T  # row i: 5 sign(x_i) w_i
    y = a @ v
    np.testing.assert_allclose(y, x @ W.T, rtol=0, atol=1e-12)  # (4.5, -2)
    np.testing.assert_allclose(values["weights"][0, 0].numpy(), a, rtol=0, atol=1e-12)
    np.testing.assert_allclose(values["v"][0].numpy(), v, rtol=0, atol=1e-12)
    np.testing.assert_allclose(values["y"][0, 0].numpy(), y, rtol=0, atol=1e-12)
    assert_shows(printed, rounded(a, 3) + rounded(y, 3) + rounded(x @ W.T, 3))
    # The cells' numbers, in the order they are drawn: x, a, v, the output.
    (ax,) = figure.axes
    drawn = [float(t.get_text()) for t in ax.texts if t.get_text().lstrip("-").replace(".", "").isdigit()]
    expected = np.concatenate([x, a, (v + 0.0).ravel(), y])
    np.testing.assert_allclose(drawn, expected, rtol=0, atol=0.05 + 1e-9)
