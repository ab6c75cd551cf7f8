"""The snippets of the linear-layer-as-attention page, each run in a fresh interpreter.

Each test re-creates the snippet's random data from the same seeds (torch's
generator is only the data source) and checks what the snippet printed against
float64 NumPy computations, hand reasoning, or the error bound derived on the
page, ``C eps cond(k) ||x||_1 max|W| (1 + spread of the logits)``.
"""

from __future__ import annotations

import re

import numpy as np
import torch

from attn_ref.examples import LINEAR_SEED, LINEAR_SHAPE, THREE_TOKENS
from tests.conftest import run_snippet

B, D_IN, D_OUT = LINEAR_SHAPE
EPS32 = float(np.finfo(np.float32).eps)
EPS64 = float(np.finfo(np.float64).eps)


def _number_after(text: str, label: str) -> float:
    """The first number printed after ``label``."""
    rest = text.split(label, 1)[1]
    return float(re.search(r"-?[\d.]+(?:e[+-]?\d+)?|-?inf|nan", rest).group())


def _list_after(text: str, label: str) -> list:
    line = text.split(label, 1)[1].split("\n", 1)[0]
    inner = line[line.index("[") + 1 : line.index("]")]
    return [_parse(item.strip()) for item in inner.split(",")]


def _parse(item: str) -> bool | float:
    if item in ("True", "False"):
        return item == "True"
    return float(item)


def _bound(x: np.ndarray, W: np.ndarray, eps: float, cond: float = 1.0) -> np.ndarray:
    """Per-row error bound C eps cond ||x||_1 max|W| (1 + max|centred log|x||), C = 16."""
    nonzero = x != 0
    logs = np.where(nonzero, np.log(np.abs(np.where(nonzero, x, 1.0))), 0.0)
    centred = np.where(
        nonzero, logs - logs.sum(-1, keepdims=True) / np.maximum(nonzero.sum(-1, keepdims=True), 1), 0
    )
    spread = np.abs(centred).max(-1)
    return 16 * eps * cond * np.abs(x).sum(-1) * np.abs(W).max() * (1 + spread)


def _softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _post_data(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    torch.manual_seed(seed)
    x = torch.randn(B, D_IN)
    W = torch.randn(D_OUT, D_IN)
    k = torch.randn(B, D_IN, D_IN)
    return x.double().numpy(), W.double().numpy(), k.double().numpy()


def test_post_code_errors_are_rounding_bounded_by_the_condition_of_k():
    out = run_snippet("linear_as_attention/post_code.py")
    x, W, k = _post_data(LINEAR_SEED)
    cond = np.linalg.cond(k)
    np.testing.assert_allclose(_list_after(out, "condition number of k, per row:"), cond, rtol=1e-3, atol=0.5)
    # The three checks hold for this seed, and every printed error is of float32 size.
    assert out.count("True") == 3
    # Logits: |log a| plus the post's shift (a standard normal draw, below 5 in size).
    logits_size = np.abs(np.log(np.abs(x) / np.abs(x).sum(-1, keepdims=True))).max() + 5
    assert _number_after(out, "max |logits_rec - logits|") <= 16 * EPS32 * cond.max() * logits_size
    y1_error = _number_after(out, "max |y1 - x W^T (float64)|")
    assert 0 < y1_error <= D_IN * EPS32 * np.abs(x).sum(-1).max() * np.abs(W).max()
    assert _number_after(out, "max |_y - x W^T (float64)|") <= _bound(x, W, EPS32).max()
    assert _number_after(out, "max |y2 - x W^T (float64)|") <= _bound(x, W, EPS32, cond.max()).max()


def test_post_code_failure_counts_match_an_independent_float32_computation():
    out = run_snippet("linear_as_attention/post_code.py")
    n_seeds = int(re.search(r"fails for \d+ of (\d+) seeds", out).group(1))
    # The post's first check, recomputed in NumPy float32 with np.allclose's identical rule.
    numpy_fails = 0
    for seed in range(n_seeds):
        x, W, _ = (a.astype(np.float32) for a in _post_data(seed))
        x_sum = np.abs(x).sum(-1, keepdims=True)
        v = W.T[None] * (x_sum[..., None] * np.sign(x)[..., None])
        _y = ((np.abs(x) / x_sum)[:, None] @ v)[:, 0]
        numpy_fails += not np.allclose(_y, x @ W.T)
    fails_exact = _number_after(out, "allclose(_y, y1) fails for")
    assert 0.05 * n_seeds < fails_exact < 0.6 * n_seeds
    assert abs(fails_exact - numpy_fails) <= 0.1 * n_seeds
    # The worst seed: its key is ill-conditioned, and its error fits the bound for that key.
    worst_error = _number_after(out, "largest |y2 - x W^T| =")
    worst_seed = int(_number_after(out, "at seed"))
    x, W, k = _post_data(worst_seed)
    cond = np.linalg.cond(k).max()
    # Printed from float32: the smallest singular value is accurate to about eps32 * sigma_max.
    printed_cond = _number_after(out, "the largest cond(k) at that seed:")
    assert abs(printed_cond - cond) <= max(1e-3, 8 * EPS32 * cond) * cond
    assert worst_error <= _bound(x, W, EPS32, cond).max()
    assert cond > 1e3  # the largest error comes with a badly conditioned key
    if worst_error > 2e-3:  # then the post's atol=1e-3 check must have failed at least once
        assert _number_after(out, "allclose(y2, y1, atol=1e-3) fails for") >= 1


def test_logit_shift_changes_only_rounding_and_noise_changes_the_weights():
    out = run_snippet("linear_as_attention/logit_shift.py")
    torch.manual_seed(LINEAR_SEED)
    x = torch.randn(D_IN).double().numpy()
    shift = -torch.randn(1).item()
    noise = torch.randn(D_IN).double().numpy()
    weights = np.abs(x) / np.abs(x).sum()
    assert abs(_number_after(out, "the post's shift: tensor([") - shift) < 1e-4
    rows = re.findall(r"^\s*([-\d.e+]+)\s+([\d.e+-]+)$", out, flags=re.MULTILINE)
    assert len(rows) == 5
    for c, change in ((float(c), float(change)) for c, change in rows):
        # Only rounding: logits + c is rounded to the spacing of floats near c (float64 here).
        size = 1 + abs(c) + np.abs(np.log(weights)).max()
        assert np.abs(_softmax(np.log(weights) + c) - weights).max() <= 4 * EPS64 * size
        assert change <= 4 * EPS32 * size
    expected = np.abs(_softmax(np.log(weights) + noise) - weights).max()
    assert abs(_number_after(out, "max change") - expected) <= 0.051 * expected


def test_with_attn_ref_masks_zeros_reproduces_the_weights_and_is_exact_to_rounding():
    out = run_snippet("linear_as_attention/with_attn_ref.py")
    generator = torch.Generator().manual_seed(LINEAR_SEED)
    x = torch.randn(B, D_IN, generator=generator, dtype=torch.float64).numpy()
    x[0, [1, 5]] = 0.0
    x[3] = 0.0
    W = torch.randn(D_OUT, D_IN, generator=generator, dtype=torch.float64).numpy()
    for name, shape in (
        ("q", (B, 1, D_IN)),
        ("k", (B, D_IN, D_IN)),
        ("v", (B, D_IN, D_OUT)),
        ("mask", (B, 1, D_IN)),
    ):
        assert re.search(rf"^{name}\s+{re.escape(str(shape))}$", out, flags=re.MULTILINE)
    assert _list_after(out, "mask of row 0:") == (x[0] != 0).tolist()
    wanted = np.abs(x[0]) / np.abs(x[0]).sum()
    np.testing.assert_allclose(_list_after(out, "weights of row 0:"), wanted, atol=5.1e-5)
    np.testing.assert_allclose(_list_after(out, "|x_0| / ||x_0||_1:"), wanted, atol=5.1e-5)
    for dtype, eps in (("float64", EPS64), ("float32", EPS32)):
        line = next(line for line in out.splitlines() if line.startswith(f"torch.{dtype}"))
        assert _number_after(line, "max |y - x W^T| =") <= _bound(x, W, eps).max()
        assert line.endswith("row 3 is 0: True")


def test_conditioning_error_grows_like_eps_times_cond():
    out = run_snippet("linear_as_attention/conditioning.py")
    rows = re.findall(r"^\| \$10\^\{(\d+)\}\$ \| ([^|]*) \| ([^|]*) \|$", out, flags=re.MULTILINE)
    assert [int(r[0]) for r in rows] == list(range(15))
    generator = torch.Generator().manual_seed(LINEAR_SEED)
    x = torch.randn(B, D_IN, generator=generator, dtype=torch.float64).numpy()
    W = torch.randn(D_OUT, D_IN, generator=generator, dtype=torch.float64).numpy()
    spread_factor = (_bound(x, W, 1.0) / (16 * np.abs(x).sum(-1) * np.abs(W).max())).max()
    for column, largest in ((1, 7), (2, 14)):
        exponents = np.array([int(r[0]) for r in rows if r[column].strip()])
        in_eps = np.array([float(r[column]) for r in rows if r[column].strip()])
        assert exponents.max() == largest
        # Bounded by C cond(k) (in units of eps ||x||_1 max|W|) ...
        assert (in_eps <= 16 * spread_factor * 10.0**exponents).all()
        # ... and growing like cond(k): slope of log10(error) against log10(cond) near one.
        slope = np.polyfit(exponents[1:], np.log10(in_eps[1:]), 1)[0]
        assert 0.8 < slope < 1.2
    # The post's keys: compare the printed quantiles with NumPy's own standard normal keys.
    conds = np.linalg.cond(np.random.default_rng(0).standard_normal((10_000, D_IN, D_IN)))
    median = _number_after(out, "the median of cond(k) is")
    p99 = _number_after(out, "one key in a hundred exceeds")
    assert abs(median - np.median(conds)) <= 0.1 * np.median(conds)
    assert abs(p99 - np.quantile(conds, 0.99)) <= 0.35 * np.quantile(conds, 0.99)


def test_key_size_d_in_minus_one_works_and_smaller_fixed_keys_do_not():
    out = run_snippet("linear_as_attention/key_size.py")
    generator = torch.Generator().manual_seed(LINEAR_SEED)
    x = torch.randn(B, D_IN, generator=generator, dtype=torch.float64).numpy()
    W = torch.randn(D_OUT, D_IN, generator=generator, dtype=torch.float64).numpy()
    torch.randn(D_IN, D_IN - 1, generator=generator, dtype=torch.float64)  # the d_k = d_in - 1 key
    k = torch.randn(D_IN, D_IN - 2, generator=generator, dtype=torch.float64).numpy()
    assert f"k ({B}, {D_IN}, {D_IN - 1})" in out
    error = _number_after(out, f"d_k = {D_IN - 1}: k ({B}, {D_IN}, {D_IN - 1}), max |y - x W^T| =")
    assert error <= _bound(x, W, EPS64).max()
    assert f"d_k = {D_IN - 2}: ValueError: d_k must be" in out
    assert f"got {D_IN - 2}" in out
    # Least squares over q and c in NumPy: the softmax of the fitted logits misses the weights.
    weights = np.abs(x) / np.abs(x).sum(-1, keepdims=True)
    reachable = np.concatenate([k, np.ones((D_IN, 1))], axis=1)
    solution = np.linalg.lstsq(reachable, np.log(weights).T, rcond=None)[0]
    miss = np.abs(_softmax((reachable @ solution).T) - weights).max()
    assert miss > 0.01
    assert abs(_number_after(out, "least-squares q and c: max |weights - wanted| =") - miss) <= 0.0051
    assert _number_after(out, "d_k = 1 with k built from x: max |y - x W^T| =") <= _bound(x, W, EPS64).max()


def test_zero_entries_break_the_post_and_not_attn_ref():
    out = run_snippet("linear_as_attention/zero_entries.py")
    torch.manual_seed(LINEAR_SEED)
    x = torch.randn(B, D_IN).double().numpy()
    x[0, 2] = 0.0
    x[1] = 0.0
    W = torch.randn(D_OUT, D_IN).double().numpy()
    with np.errstate(divide="ignore"):
        logits = np.log(np.abs(x[0]) / np.abs(x[0]).sum())
    printed = _list_after(out, "post, logits of row 0:")
    assert printed[2] == -np.inf
    np.testing.assert_allclose(np.delete(printed, 2), np.delete(logits, 2), atol=5.1e-3)
    assert all(np.isinf(v) or np.isnan(v) for v in _list_after(out, "post, q of row 0:"))
    assert _list_after(out, "post, rows of y2 with nan:") == [0.0, 1.0]  # the rows with zeros
    assert _list_after(out, "attn_ref, mask of row 0:") == (x[0] != 0).tolist()
    assert _list_after(out, "attn_ref, mask of row 1:") == [True] * D_IN  # zero row: nothing masked
    assert _number_after(out, "attn_ref, max |y - x W^T| =") <= _bound(x, W, EPS32).max()
    assert out.strip().endswith("row 1 of y is exactly zero: True")


def test_what_depends_on_x_matches_the_algebra():
    out = run_snippet("linear_as_attention/what_depends_on_x.py")
    table = {line.split()[0]: line.split()[1:] for line in out.splitlines()[1:4]}
    # k is a constant; v(x) = ||x||_1 sign(x) W^T is homogeneous, not additive; q(2x) = q(x).
    assert table == {
        "q": ["False", "False", "False"],
        "k": ["True", "False", "False"],
        "v": ["False", "True", "False"],
    }
    assert out.strip().endswith("q(2 x1) = q(x1): True")


def test_uniform_weights_reproduce_x_w_with_values_linear_in_x():
    out = run_snippet("linear_as_attention/uniform_weights.py")
    assert _number_after(out, "max |y - x W^T| =") < 1e-12
    assert out.strip().endswith("v(x + x2) = v(x) + v(x2): True")


def _self_attention(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    weights = _softmax(X @ X.T / np.sqrt(X.shape[1]))
    return weights @ X, weights


def test_converse_frozen_weights_are_linear_recomputed_weights_are_not():
    out = run_snippet("linear_as_attention/converse.py")
    X = np.array(THREE_TOKENS)
    Y = torch.randn(3, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64).numpy()

    def f(Z):
        return _self_attention(Z)[0]

    assert _number_after(out, "|g(2X) - 2 g(X)| =") < 1e-14
    assert _number_after(out, "|g(X + Y) - g(X) - g(Y)| =") < 1e-14
    for label, expected in (
        ("|f(2X) - 2 f(X)| =", np.abs(f(2 * X) - 2 * f(X)).max()),
        ("|f(X + Y) - f(X) - f(Y)| =", np.abs(f(X + Y) - f(X) - f(Y)).max()),
    ):
        assert expected > 0.1
        assert abs(_number_after(out, label) - expected) <= 0.051 * expected
    for t in (1.0, 0.1, 0.01, 0.001):
        expected = np.abs(f(t * X) / t - X.mean(axis=0)).max()
        printed = _number_after(out, f"t = {t:<6} |f(tX) / t - mean token| =")
        assert abs(printed - expected) <= 0.051 * expected
    assert _number_after(out, "t = 0.001") < 1e-5  # the limit of the proof: the mean token


def test_converse_heatmaps_report_the_sharpened_weights():
    out = run_snippet("linear_as_attention/converse_heatmaps.py")
    X = np.array(THREE_TOKENS)
    for label, scale in (("A(X):", 1), ("A(2X):", 2)):
        expected = _self_attention(scale * X)[1].max(axis=1)
        np.testing.assert_allclose(_list_after(out, label), expected, atol=5.1e-5)
    # Doubling X quadruples the scores: every row's largest weight grows.
    assert all(b > a for a, b in zip(_list_after(out, "A(X):"), _list_after(out, "A(2X):"), strict=True))
