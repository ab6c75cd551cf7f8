"""mental_model/convex_mix.py: outputs are weighted averages of the values, not linear in X."""

from __future__ import annotations

import numpy as np

from tests.printed import flag, line_after, numbers
from tests.reference import attention
from tests.snippets.mental_model.helpers import seeded_randn


def test_convex_mix_outputs_are_averages_of_values_but_not_linear_in_x(printed):
    X, W_Q, W_K, W_V = seeded_randn((5, 8), (8, 4), (8, 4), (8, 4))

    def layer(X):
        return attention(X @ W_Q, X @ W_K, X @ W_V)

    output, weights = layer(X)
    V = X @ W_V
    assert (weights >= 0).all() and np.allclose(weights.sum(axis=-1), 1)
    assert line_after(printed, "weights >= 0, rows sum to one:").split() == ["True", "True"]
    assert flag(printed, "output = A @ V:")
    inside = (output >= V.min(axis=0) - 1e-9) & (output <= V.max(axis=0) + 1e-9)
    assert inside.all() and flag(printed, "every output feature within its range over V:")
    difference = np.abs(layer(2 * X)[0] - 2 * output).max()
    assert difference > 1e-3  # not linear
    np.testing.assert_allclose(
        numbers(line_after(printed, "largest difference, f(2 X) - 2 f(X):")), [difference], atol=5e-3
    )
