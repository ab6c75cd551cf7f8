"""linear_as_attention/post_code.py: the post's construction in float32, its four checks and its
errors, for one seed and for many.

A check such as ``allclose(_y, y1)`` compares two float32 results at the edge of a tolerance, and
its outcome may differ between CPUs. So the tests assert an outcome only where the rounding bound
decides it (the check must pass when even the worst rounding stays inside the tolerance), and
otherwise check the errors themselves against that bound.
"""

from __future__ import annotations

import numpy as np
import torch

from tests.printed import flag, line_after, number_after, numbers
from tests.snippets.linear_as_attention.helpers import D_IN, EPS32, bound, post_data


def y1_rounding(x: np.ndarray, W: np.ndarray) -> np.ndarray:
    """A bound on |x @ W^T in float32 - x W^T| per row: d_in products and sums, each rounded."""
    return D_IN * EPS32 * np.abs(x).sum(-1) * np.abs(W).max()


def test_one_seed_errors_are_rounding_bounded_by_the_condition_of_k(printed, values):
    x, W, k = post_data(values["LINEAR_SEED"])
    cond = np.linalg.cond(k)
    np.testing.assert_allclose(torch.linalg.cond(values["k"].double()).numpy(), cond, rtol=1e-6)
    np.testing.assert_allclose(numbers(line_after(printed, "cond(k), per row:")), cond, rtol=1e-3, atol=0.5)
    exact = x @ W.T
    for name, estimate in (
        ("y1", y1_rounding(x, W)),
        ("_y", bound(x, W, EPS32)),
        ("y2", bound(x, W, EPS32, cond.max())),
    ):
        error = np.abs(values[name].double().numpy() - exact).max(-1)  # per row
        assert (error <= estimate).all(), name
        assert number_after(printed, f"max |{name} - x W^T| =") <= 1.05 * error.max() + 1e-12
    # A check that even the worst rounding cannot fail must pass; the others may go either way.
    y1_bound = y1_rounding(x, W)[:, None]
    y2_error = np.abs(values["y2"].double().numpy() - exact) + y1_bound
    if (y2_error < 1e-3).all():
        assert flag(printed, "allclose(y2, y1, atol=1e-3):")
    assert flag(printed, "allclose(softmax(logits), attn_weights):")  # equal up to a few eps, rtol 1e-5


def test_many_seeds_every_error_within_the_bound_for_its_key(values):
    n_seeds = values["n_seeds"]
    conds, errors = values["conds"].numpy(), values["errors"].numpy()
    assert conds.shape == errors.shape == (n_seeds,)
    for seed in range(n_seeds):
        x, W, k = post_data(seed)
        cond = np.linalg.cond(k).max()
        assert abs(conds[seed] - cond) <= 8 * EPS32 * cond**2, (
            seed
        )  # float32's cond: sigma_min to eps sigma_max
        assert errors[seed] <= bound(x, W, EPS32, conds[seed]).max(), seed


def test_many_seeds_checks_fail_only_where_rounding_allows(values, printed):
    n_seeds, errors = values["n_seeds"], values["errors"].numpy()
    atol_passes, exact_passes = np.array(values["atol_passes"]), np.array(values["exact_passes"])
    y1_bounds = np.array([y1_rounding(*post_data(seed)[:2]).max() for seed in range(n_seeds)])
    # |y2 - y1| <= |y2 - x W^T| + |y1 - x W^T|: where that stays under atol the check cannot fail,
    # and where it failed, some entry of y2 lies more than atol - |y1 - x W^T| from x W^T.
    assert atol_passes[errors + y1_bounds < 1e-3].all()
    assert (errors[~atol_passes] > 1e-3 - y1_bounds[~atol_passes]).all()
    # The default check (rtol 1e-5, atol 1e-8) compares two float32 results that both round x W^T:
    # it can fail only where twice the rounding bound exceeds the tolerance of the smallest entry.
    can_fail = []
    for seed in range(n_seeds):
        x, W, _ = post_data(seed)
        exact = x @ W.T
        can_fail.append((2 * bound(x, W, EPS32)[:, None] > 1e-8 + 1e-5 * np.abs(exact)).any())
    assert not (~exact_passes & ~np.array(can_fail)).any()
    # What is printed is what was computed.
    assert number_after(printed, "allclose(_y, y1) fails for") == (~exact_passes).sum()
    assert number_after(printed, "allclose(y2, y1, atol=1e-3) fails for") == (~atol_passes).sum()
    worst_error, worst_seed = numbers(line_after(printed, "largest |y2 - x W^T| ="))
    assert worst_seed == errors.argmax() and abs(worst_error - errors.max()) <= 0.05 * errors.max()


def test_many_seeds_ranks_of_the_failing_keys(values, printed):
    conds, fails = values["conds"].numpy(), values["atol_fails"].numpy()
    ranks = np.argsort(np.argsort(conds)) / (len(conds) - 1)
    median = np.sort(conds)[(len(conds) - 1) // 2]  # torch's median: the lower middle value
    assert numbers(line_after(printed, "cond(k) over all seeds:")).tolist() == [
        round(median),
        round(conds.max()),
    ]
    if fails.any():
        failing = ranks[fails]
        shown = numbers(line_after(printed, "where atol=1e-3 fails: median rank"))
        lower_median = np.sort(failing)[(len(failing) - 1) // 2]
        np.testing.assert_allclose(
            shown[:2], 100 * np.array([lower_median, (failing >= 0.9).mean()]), atol=0.5
        )
    assert torch.equal(values["rank"], torch.tensor(ranks, dtype=values["rank"].dtype))
