"""linear_as_attention/logit_shift.py: one number added to every logit changes only rounding."""

from __future__ import annotations

import numpy as np

from tests.support.printed import assert_printed_in_order, decimals, significant
from tests.support.reference import EPS32, EPS64, as64, softmax


def test_logit_shift_changes_only_rounding_and_noise_changes_the_weights(values, printed):
    x = as64(values["x"])
    d_in = x.shape[0]
    weights = np.abs(x) / np.abs(x).sum()  # the construction's weights, in float64
    np.testing.assert_allclose(as64(values["weights"]), weights, rtol=(d_in + 2) * EPS32, atol=0)
    log_weights = np.log(weights)
    np.testing.assert_allclose(
        as64(values["logits"]),
        log_weights,
        rtol=0,
        atol=(d_in + 4) * EPS32 * (1 + np.abs(log_weights).max()),
    )
    shift, changes = values["shift"], values["changes"]  # c: the largest change of a weight
    assert shift.numel() == 1 and shift.item() in changes  # ONE number, the same for every logit
    for c, change in changes.items():
        # Only rounding: logits + c is rounded to the spacing of floats near c.
        size = 1 + abs(c) + np.abs(log_weights).max()
        assert np.abs(softmax(log_weights + c) - weights).max() <= 4 * EPS64 * size  # in float64
        assert change <= 4 * EPS32 * size  # the snippet's, in float32
    # A different random number for each logit does change the weights, far beyond rounding.
    noise = as64(values["noise"])
    expected = np.abs(softmax(log_weights + noise) - weights).max()
    rounding = 8 * (d_in + 4) * EPS32 * (1 + np.abs(log_weights).max() + np.abs(noise).max())
    assert abs(values["change"] - expected) <= rounding
    assert expected > 1e3 * rounding
    # What is printed: the shift, each c and its change, then the change that noise makes.
    assert_printed_in_order(
        printed,
        [decimals(shift.item(), 4)]
        + [item for c, change in changes.items() for item in (significant(c, 3), significant(change, 2))]
        + [significant(values["change"], 2)],
    )
