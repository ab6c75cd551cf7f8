"""linear_as_attention/exercise_weights.py: the weights |x| / ||x||_1, and the zero feature masked."""

from fractions import Fraction

import numpy as np

from tests.support.printed import assert_printed_in_order, decimals, exact
from tests.support.reference import EPS64, as64


def test_weights_are_the_hand_computed_fractions(values, printed):
    x = as64(values["x"])[0]
    weights = as64(values["weights"])[0, 0]
    mask = values["mask"][0, 0].numpy()
    # By hand, for the exercise's x = (3, -1, 0, 2): ||x||_1 = 6, weights 1/2, 1/6, 0 and 1/3.
    assert x.tolist() == [3, -1, 0, 2]
    by_hand = [Fraction(1, 2), Fraction(1, 6), Fraction(0), Fraction(1, 3)]
    assert by_hand == [Fraction(abs(int(e)), int(np.abs(x).sum())) for e in x]
    # The logits log|x_i| - mean, times sqrt(d_k), go through q k^T with an orthonormal key
    # (condition number 1): a few eps per logit, and a weight moves by its size times that.
    logits = np.log(np.abs(x[x != 0]))
    tolerance = 16 * len(x) * EPS64 * (1 + np.abs(logits - logits.mean()).max())
    np.testing.assert_allclose(weights, [float(f) for f in by_hand], rtol=0, atol=tolerance)
    # The zero feature is masked, and a masked key gets exactly zero weight (exp(-inf) = 0).
    assert mask.tolist() == (x != 0).tolist()
    assert (weights[~mask] == 0).all()
    # What is printed: the weights to 6 decimals, then the index of each masked key.
    assert_printed_in_order(
        printed, [decimals(w, 6) for w in weights] + [exact(i) for i in np.flatnonzero(~mask)]
    )
