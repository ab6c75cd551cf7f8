"""mental_model/scaling.py (a pitfall on the page): the softmax of random scores as d_k grows, plain and scaled by
1/sqrt(d_k), against an independent computation from the snippet's own samples and the theory,
with margins from the sample size."""

from __future__ import annotations

import numpy as np

from tests.support.printed import assert_shown

SE = 4  # standard errors allowed between a sample's mean and its expectation
COLUMNS = ("variance", "largest weight", "entropy", "gradient")


def _per_query(z: np.ndarray) -> dict[str, np.ndarray]:
    """Each query's largest weight, entropy and softmax-gradient size, from its (S,) scores,
    by formulas other than the snippet's."""
    shifted = z - z.max(axis=1, keepdims=True)
    log_total = np.log(np.exp(shifted).sum(axis=1))
    p = np.exp(shifted - log_total[:, None])
    # ||diag(p) - p p^T||_F^2 = sum p^2 - 2 sum p^3 + (sum p^2)^2
    p2, p3 = (p**2).sum(axis=1), (p**3).sum(axis=1)
    return {
        "largest weight": p.max(axis=1),
        "entropy": log_total - (p * shifted).sum(axis=1),  # H = logsumexp(z) - sum p z
        "gradient": np.sqrt(np.maximum(p2 - 2 * p3 + p2**2, 0.0)),
    }


def _recomputed(values) -> dict[str, dict[str, np.ndarray]]:
    """Per kind (plain, scaled) and column: the mean over queries at each width, and its standard error."""
    table = {kind: {column: [] for column in COLUMNS} for kind in ("plain", "scaled")}
    errors = {kind: {column: [] for column in COLUMNS[1:]} for kind in ("plain", "scaled")}
    for d_k in values["widths"]:
        scores = values["samples"][d_k]
        assert scores.shape == (values["trials"], values["S"])
        for kind, z in [("plain", scores), ("scaled", scores / np.sqrt(d_k))]:
            table[kind]["variance"].append(((z - z.mean()) ** 2).mean())
            for column, per_query in _per_query(z).items():
                table[kind][column].append(per_query.mean())
                errors[kind][column].append(per_query.std() / np.sqrt(per_query.size))
    as_arrays = {kind: {c: np.array(v) for c, v in columns.items()} for kind, columns in table.items()}
    return as_arrays, {kind: {c: np.array(v) for c, v in columns.items()} for kind, columns in errors.items()}


def test_the_table_is_what_the_samples_give(values):
    table, _ = _recomputed(values)
    for kind in ("plain", "scaled"):
        snippet = np.array(values["results"][kind])  # (widths, columns)
        np.testing.assert_allclose(
            snippet[:, :2], np.stack([table[kind][c] for c in COLUMNS[:2]], 1), rtol=1e-12
        )
        np.testing.assert_allclose(snippet[:, 2], table[kind]["entropy"], rtol=1e-9, atol=1e-12)
        # sqrt of a difference that cancels near one-hot rows: absolute error up to sqrt(eps64).
        np.testing.assert_allclose(snippet[:, 3], table[kind]["gradient"], rtol=1e-9, atol=1e-7)


def test_score_variance_is_d_k_plain_and_one_scaled(values):
    """Var(q . k) = d_k; Var of its sample over N = trials S scores, S of them sharing a query
    (Cov(z_s^2, z_t^2) = E|q|^4 - d_k^2 = 2 d_k), is (2 d_k^2 + 6 d_k + 2 d_k (S - 1)) / N."""
    table, _ = _recomputed(values)
    S, N = values["S"], values["trials"] * values["S"]
    widths = np.array(values["widths"])
    relative_error = SE * np.sqrt((2 + (2 * S + 4) / widths) / N)
    assert (np.abs(table["plain"]["variance"] / widths - 1) < relative_error).all()
    assert (np.abs(table["scaled"]["variance"] - 1) < relative_error).all()


def test_plain_rows_saturate_and_scaled_rows_stay_flat(values):
    """The page's claims, each beyond SE standard errors of the sample means."""
    table, errors = _recomputed(values)
    S = values["S"]
    # Theorems: the largest of S weights is at least 1/S, and the entropy at most log S.
    for kind in ("plain", "scaled"):
        assert (table[kind]["largest weight"] >= 1 / S).all()
        assert (table[kind]["entropy"] <= np.log(S) + 1e-12).all()
    plain, plain_error = table["plain"]["largest weight"], errors["plain"]["largest weight"]
    # Unscaled: the largest weight rises with d_k, towards one-hot ...
    rise = np.diff(plain) - SE * np.hypot(plain_error[1:], plain_error[:-1])
    assert (rise > 0).all()
    assert plain[-1] - SE * plain_error[-1] > 0.9
    # ... and, past the smallest widths, the saturating softmax passes less and less gradient.
    gradient, gradient_error = table["plain"]["gradient"], errors["plain"]["gradient"]
    fall = -np.diff(gradient[1:]) - SE * np.hypot(gradient_error[2:], gradient_error[1:-1])
    assert (fall > 0).all()
    assert gradient[-1] + SE * gradient_error[-1] < gradient[0] - SE * gradient_error[0]
    # Scaled: the largest weight stays flat, within 0.1 between any two widths.
    scaled, scaled_error = table["scaled"]["largest weight"], errors["scaled"]["largest weight"]
    spread = np.abs(scaled[:, None] - scaled[None, :]) + SE * np.hypot(
        scaled_error[:, None], scaled_error[None, :]
    )
    assert spread.max() < 0.1


def test_plain_entropy_nears_zero_scaled_entropy_and_gradient_stay_put(values):
    """The pitfall's words: unscaled, a row's entropy falls towards zero (below a tenth of log S at
    the widest); scaled, the entropy and the gradient stay within a tenth of their values at the
    smallest width."""
    table, errors = _recomputed(values)
    S = values["S"]
    entropy, entropy_error = table["plain"]["entropy"], errors["plain"]["entropy"]
    assert (np.diff(entropy) + SE * np.hypot(entropy_error[1:], entropy_error[:-1]) < 0).all()
    assert entropy[-1] + SE * entropy_error[-1] < 0.1 * np.log(S)
    for column in ("entropy", "gradient"):
        scaled, error = table["scaled"][column], errors["scaled"][column]
        assert (np.abs(scaled - scaled[0]) + SE * np.hypot(error, error[0]) < 0.1 * scaled[0]).all()


def test_prints_the_table_and_the_uniform_row(printed, values):
    rows = [
        [d_k, *np.ravel([plain, scaled], order="F")]
        for d_k, plain, scaled in zip(
            values["widths"], values["results"]["plain"], values["results"]["scaled"], strict=True
        )
    ]
    S = values["S"]
    # By hand: uniform weights 1/S have entropy -sum (1/S) log(1/S) = log S.
    uniform = np.full(S, 1 / S)
    assert np.isclose(-(uniform * np.log(uniform)).sum(), np.log(S), rtol=1e-15)
    assert_shown(printed, *rows, 1 / S, np.log(S), decimals=3)
