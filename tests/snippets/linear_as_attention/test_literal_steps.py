"""linear_as_attention/literal_steps.py: steps 2 to 5 taken literally in float32, four checks and their
errors, for one seed and for many.

A check such as ``allclose(_y, y1)`` compares two float32 results at the edge of a tolerance, and
its outcome may differ between CPUs. So the tests assert an outcome only where the rounding bound
decides it (the check must pass when even the worst rounding stays inside the tolerance), and
otherwise check the errors themselves against that bound.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.support.linear_as_attention_bound import bound, literal_data
from tests.support.printed import assert_printed_in_order, decimals, exact, printed_flags, significant
from tests.support.reference import EPS32, as64

ATOL = 1e-3  # the fourth check: allclose(y2, y1, atol=1e-3)


def y1_rounding(x: np.ndarray, W: np.ndarray) -> np.ndarray:
    """A bound on |x @ W^T in float32 - x W^T| per row: d_in products and sums, each rounded."""
    return x.shape[-1] * EPS32 * np.abs(x).sum(-1) * np.abs(W).max()


def cond_rounding(cond: np.ndarray) -> np.ndarray:
    """How far float32's cond(k) may lie from float64's: sigma_min is known to eps sigma_max."""
    return 8 * EPS32 * cond**2


@pytest.fixture(scope="module")
def seeds(values) -> dict[str, np.ndarray]:
    """Per seed of the many-seeds block: cond(k) of its worst key, the error bound for cond(k) = 1,
    the bound for y1, and whether the default check can fail by rounding alone."""
    per_seed: dict[str, list] = {"cond": [], "unit_bound": [], "y1_bound": [], "can_fail": []}
    for seed in range(values["n_seeds"]):
        x, W, k = literal_data(seed, values["LINEAR_SHAPE"])
        cond = np.linalg.cond(k).max()
        per_seed["cond"].append(cond)
        per_seed["unit_bound"].append(bound(x, W, EPS32).max())  # times cond(k): the bound for y2
        per_seed["y1_bound"].append(y1_rounding(x, W).max())
        # The default check (rtol 1e-5, atol 1e-8) compares two float32 results that both round
        # x W^T: it can fail only where twice the rounding bound exceeds the tolerance of an entry.
        per_seed["can_fail"].append((2 * bound(x, W, EPS32)[:, None] > 1e-8 + 1e-5 * np.abs(x @ W.T)).any())
    return {name: np.array(column) for name, column in per_seed.items()}


def test_one_seed_errors_are_rounding_bounded_by_the_condition_of_k(values):
    x, W, k = (as64(values[name]) for name in ("x", "fc_weight", "k"))
    cond = np.linalg.cond(k)
    exact_y = x @ W.T
    np.testing.assert_allclose(as64(values["y_exact"]), exact_y, rtol=0, atol=1e-12)
    for name, estimate in (
        ("y1", y1_rounding(x, W)),
        ("_y", bound(x, W, EPS32)),
        ("y2", bound(x, W, EPS32, cond.max())),
    ):
        error = np.abs(as64(values[name]) - exact_y).max(-1)  # per row
        assert (error <= estimate).all(), name


def test_one_seed_checks_pass_where_rounding_decides(values, printed):
    x, W = as64(values["x"]), as64(values["fc_weight"])
    flags = printed_flags(printed)  # the four checks, in order; the many seeds print none
    assert len(flags) == 4
    # softmax(logits) = attn_weights up to a few eps (log in float32, then exp in float64), far
    # inside allclose's rtol of 1e-5: that check cannot fail.
    logits, weights = as64(values["logits"]), as64(values["attn_weights"])
    reference = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    assert (np.abs(reference - weights) <= 4 * EPS32 * (1 + np.abs(logits).max()) * weights).all()
    assert flags[1]
    # |y2 - y1| <= |y2 - x W^T| + |y1 - x W^T|: where that stays under atol the check cannot fail.
    y2_error = np.abs(as64(values["y2"]) - x @ W.T) + y1_rounding(x, W)[:, None]
    if (y2_error < ATOL).all():
        assert flags[3]


def test_many_seeds_every_error_within_the_bound_for_its_key(values, seeds):
    n_seeds = values["n_seeds"]
    conds, errors = values["conds"].numpy(), values["errors"].numpy()
    assert conds.shape == errors.shape == (n_seeds,)
    # float32's cond(k) against float64's, and each error within the bound for that key
    assert (np.abs(conds - seeds["cond"]) <= cond_rounding(seeds["cond"])).all()
    assert (errors <= seeds["unit_bound"] * conds).all()


def test_many_seeds_checks_fail_only_where_rounding_allows(values, seeds):
    errors = values["errors"].numpy()
    atol_passes, exact_passes = np.array(values["atol_passes"]), np.array(values["exact_passes"])
    y1_bounds = seeds["y1_bound"]
    # |y2 - y1| <= |y2 - x W^T| + |y1 - x W^T|: where that stays under atol the check cannot fail,
    # and where it failed, some entry of y2 lies more than atol - |y1 - x W^T| from x W^T.
    assert atol_passes[errors + y1_bounds < ATOL].all()
    assert (errors[~atol_passes] > ATOL - y1_bounds[~atol_passes]).all()
    # The default check can fail only where the rounding bound says it can.
    assert not (~exact_passes & ~seeds["can_fail"]).any()
    assert torch.equal(values["atol_fails"], ~torch.tensor(values["atol_passes"]))


def test_many_seeds_ranks_of_the_failing_keys(values):
    conds = values["conds"].numpy()
    ranks = np.argsort(np.argsort(conds)) / (len(conds) - 1)
    assert torch.equal(values["rank"], torch.tensor(ranks, dtype=values["rank"].dtype))
    fails = values["atol_fails"].numpy()
    if fails.any():
        assert values["worst_tenth"].item() == pytest.approx((ranks[fails] >= 0.9).mean(), abs=1e-6)


def test_prints_what_was_computed(values, printed):
    """The one seed's errors and conditions, then the many seeds' counts, worst case and ranks."""
    exact_y, cond = as64(values["y_exact"]), np.linalg.cond(as64(values["k"]))
    one_seed = [significant(np.abs(as64(values[name]) - exact_y).max(), 2) for name in ("y1", "_y", "y2")]
    one_seed += [decimals(c, 0, slack=cond_rounding(c)) for c in cond]  # cond(k) rounded to integers
    n_seeds, conds, errors = values["n_seeds"], values["conds"].numpy(), values["errors"].numpy()
    exact_fails, atol_fails = n_seeds - sum(values["exact_passes"]), values["atol_fails"].numpy()
    median = np.sort(conds)[(n_seeds - 1) // 2]  # torch's median: the lower middle value
    many_seeds = [
        exact(exact_fails),
        exact(n_seeds),
        exact(atol_fails.sum()),
        exact(n_seeds),
        significant(errors.max(), 2),
        exact(errors.argmax()),
        decimals(median, 0),
        decimals(conds.max(), 0),
    ]
    if atol_fails.any():
        failing = np.sort(values["rank"].numpy()[atol_fails])
        many_seeds += [
            decimals(100 * failing[(len(failing) - 1) // 2], 0, slack=1e-4),  # percent
            decimals(100 * values["worst_tenth"].item(), 0, slack=1e-4),
        ]
    assert_printed_in_order(printed, one_seed + many_seeds)
