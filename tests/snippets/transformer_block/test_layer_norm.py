"""Layer norm by hand and nn.LayerNorm against the formula in float64
(transformer_block_reference.layer_norm), each token's mean and spread before and after, and what
scaling the stream tenfold changes."""

import numpy as np

from tests.support.printed import (
    allclose_decided,
    assert_printed_in_order,
    decimals,
    printed_flags,
    significant,
)
from tests.support.reference import U32, as64
from tests.support.transformer_block_reference import LN_EPS, layer_norm


def reference(values, scale: float = 1.0):
    """LayerNorm(scale x) exactly, with its float32 bound (scale x rounds once when scale != 1)."""
    x = scale * as64(values["x"])
    dx = np.zeros_like(x) if scale == 1 else U32 * np.abs(x)
    norm = values["norm"]
    return layer_norm((x, dx), as64(norm.weight), as64(norm.bias), U32)


def test_by_hand_and_nn_layernorm_are_the_formula(values):
    assert values["norm"].eps == LN_EPS
    y, bound = reference(values)
    for name in ("by_hand", "theirs"):
        assert (np.abs(as64(values[name]) - y) <= bound).all(), name
    # gamma and beta were moved off 1 and 0, so the check covers them too.
    assert np.ptp(as64(values["norm"].weight)) > 0.1 and np.abs(as64(values["norm"].bias)).max() > 0.1


def test_each_token_has_mean_0_and_variance_1_after(values, printed):
    x = as64(values["x"])
    C = x.shape[-1]
    mean, var = x.mean(axis=-1), x.var(axis=-1)
    size = np.abs(x).max(axis=-1)
    # The kept mean and variance, float32, against the exact ones.
    assert (np.abs(as64(values["mean"]).ravel() - mean) <= 2 * C * U32 * size).all()
    assert (np.abs(as64(values["var"]).ravel() - var) <= 2 * (C + 3) * U32 * (x**2).mean(axis=-1)).all()
    z = as64(values["z"])
    z_exact = (x - mean[:, None]) / np.sqrt(var[:, None] + LN_EPS)
    z_size = np.abs(z).max(axis=-1)
    # Exactly: mean 0 and spread sqrt(var / (var + eps)), a hair under 1.
    np.testing.assert_allclose(z_exact.mean(axis=-1), 0, atol=1e-12)
    spread = np.sqrt(var / (var + LN_EPS))
    np.testing.assert_allclose(z_exact.std(axis=-1), spread, rtol=1e-12)
    (same,) = printed_flags(printed)
    ours, theirs = as64(values["ours"]), as64(values["theirs"])
    assert allclose_decided(ours, theirs, atol=1e-6) in (None, same)
    expected = [decimals(m, 2) for m in as64(values["mean"]).ravel()]
    expected += [decimals(m, 2, C * U32 * s) for m, s in zip(z.mean(axis=-1), z_size, strict=True)]
    expected += [decimals(s, 2, C * U32 * s) for s in np.sqrt(as64(values["var"]).ravel())]
    expected += [decimals(s, 2, (C + 2) * U32 * s) for s in z.std(axis=-1)]
    assert_printed_in_order(printed, expected)
    # What is printed after is what the formula gives: 0 and 1 at two decimals.
    assert (np.abs(z.mean(axis=-1)) < 0.005).all() and (np.abs(z.std(axis=-1) - 1) < 0.005).all()


def test_ten_times_the_stream_changes_only_what_eps_sees(values, printed):
    """LayerNorm(10 x) - LayerNorm(x) = gamma (d / sqrt(var + eps / 100) - d / sqrt(var + eps)):
    zero but for eps, at most gamma |z| eps / (2 var)."""
    (y, bound), (y10, bound10) = reference(values), reference(values, scale=10.0)
    change = np.abs(y10 - y).max()
    x = as64(values["x"])
    var = x.var(axis=-1, keepdims=True)
    z = (x - x.mean(axis=-1, keepdims=True)) / np.sqrt(var + LN_EPS)
    gamma = np.abs(as64(values["norm"].weight))
    assert change <= (gamma * np.abs(z) * LN_EPS / (2 * var)).max()
    # The kept change, float32, against the exact one: each LayerNorm within its bound.
    assert abs(values["change"] - change) <= (bound + bound10).max()
    assert_printed_in_order(printed, [significant(values["change"], 2)])
