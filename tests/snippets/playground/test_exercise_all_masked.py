"""playground/exercise_all_masked.py: NaN from a plain softmax, zeros from attn_ref and PyTorch."""

import numpy as np

from tests.support.printed import assert_shown
from tests.support.reference import as64, attention, plain_attention


def test_every_key_masked(values):
    q, K, V = (as64(values[name]) for name in ("q", "K", "V"))
    allowed = values["allowed"].numpy()
    assert allowed.shape == (len(q), len(K)) and not allowed.any()
    assert (values["scores"] == float("-inf")).all()  # masked_fill: exact

    # A plain softmax computes -inf - (-inf) = NaN: in float64 too.
    _, plain_weights = plain_attention(q, K, V, allowed)
    assert np.isnan(plain_weights).all()
    assert values["plain"].isnan().all()

    # attn_ref and PyTorch (2.5 and later) give a query that sees no key zero weights and a zero
    # output, as the float64 reference does: exactly, since no arithmetic is left.
    output, weights = attention(q, K, V, allowed=allowed)
    assert not output.any() and not weights.any()
    np.testing.assert_array_equal(as64(values["weights"]), weights)
    np.testing.assert_array_equal(as64(values["output"]), output)
    np.testing.assert_array_equal(as64(values["reference"]), output)


def test_prints_nan_then_zeros(printed, values):
    assert_shown(printed, values["plain"], values["weights"], values["output"], values["reference"])
