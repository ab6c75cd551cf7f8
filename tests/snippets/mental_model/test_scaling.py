"""mental_model/scaling.py: the softmax of random scores as d_k grows, plain and scaled by
1/sqrt(d_k), against an independent computation and the theory."""

from __future__ import annotations

import numpy as np

from tests.printed import block_after, line_after, line_starting, numbers


def _scaling_reference():
    """Per width: (variance, largest weight, entropy, gradient norm) for plain and scaled scores."""
    rng = np.random.default_rng(0)
    S, trials = 16, 400
    rows = {"plain": [], "scaled": []}
    for d_k in [1, 4, 16, 64, 256, 1024]:
        q = rng.standard_normal((trials, 1, d_k))
        k = rng.standard_normal((trials, S, d_k))
        scores = np.einsum("td,tsd->ts", q[:, 0], k)
        for name, z in [("plain", scores), ("scaled", scores / np.sqrt(d_k))]:
            shifted = z - z.max(axis=1, keepdims=True)
            log_total = np.log(np.exp(shifted).sum(axis=1))
            p = np.exp(shifted - log_total[:, None])
            entropy = log_total - (p * shifted).sum(axis=1)  # H = logsumexp(z) - sum p z
            # ||diag(p) - p p^T||_F^2 = sum p^2 - 2 sum p^3 + (sum p^2)^2
            p2, p3 = (p**2).sum(axis=1), (p**3).sum(axis=1)
            gradient = np.sqrt(np.maximum(p2 - 2 * p3 + p2**2, 0.0))
            rows[name].append((z.var(), p.max(axis=1).mean(), entropy.mean(), gradient.mean()))
    return rows


def test_scaling_table_matches_an_independent_computation_and_the_theory(printed):
    reference = _scaling_reference()
    widths = [1, 4, 16, 64, 256, 1024]
    rows = block_after(
        printed, line_starting(printed, " d_k"), rows=len(widths)
    )  # d_k, then 4 (plain, scaled)
    table = {int(row[0]): row[1:] for row in rows}
    assert list(table) == widths
    for i, d_k in enumerate(widths):
        expected = np.ravel(list(zip(reference["plain"][i], reference["scaled"][i], strict=True)))
        np.testing.assert_allclose(table[d_k], expected, atol=6e-4, rtol=1e-6)
        plain_var, scaled_var = table[d_k][0], table[d_k][1]
        assert abs(plain_var / d_k - 1) < 0.1  # Var(q · k) = d_k
        assert abs(scaled_var - 1) < 0.1  # Var(q · k / sqrt(d_k)) = 1
    plain_max = [table[d][2] for d in widths]
    scaled_max = [table[d][3] for d in widths]
    assert plain_max == sorted(plain_max) and plain_max[-1] > 0.9  # towards one-hot
    assert max(scaled_max) - min(scaled_max) < 0.1  # flat with the scaling
    plain_gradient = [table[d][6] for d in widths]
    assert plain_gradient[-1] < plain_gradient[0] / 4  # the saturated softmax passes little gradient
    uniform = numbers(line_after(printed, "uniform weights:"))  # 1 (of 1/S), 1/S, log S
    np.testing.assert_allclose(uniform[[1, 2]], [1 / 16, np.log(16)], atol=6e-4)


def test_scaling_plot_is_legible_without_colour(figure):
    axes = figure.axes
    assert len(axes) == 3
    assert axes[-1].get_xlabel()  # stacked, sharing the x-axis: its label under the last panel
    for ax in axes:
        assert ax.get_xscale() == "log" and ax.get_ylabel()
        curves = [line for line in ax.get_lines() if len(line.get_xdata()) > 2]
        assert {(line.get_marker(), line.get_linestyle()) for line in curves} == {("o", "-"), ("s", "--")}
    assert figure.legends and len(figure.legends[0].get_texts()) == 3
