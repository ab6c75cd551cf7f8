"""The two pairings written out in float64 NumPy: interleaved rotates (2i, 2i+1), half-split
rotates (i, i + d/2), both by t theta_i (Su et al., 2021, equation 34; GPT-NeoX's rotate_half).

allclose(..., atol=1e-6) compares float32 results; the tests assert its printed outcome only where
the rounding bound decides it, and otherwise check the results themselves against that bound.
"""

import numpy as np

from tests.support.positions_reference import dot_rounding, rotate, rotation_rounding
from tests.support.printed import (
    allclose_decided,
    assert_printed_in_order,
    decimals,
    printed_flags,
    within_allclose,
)
from tests.support.reference import EPS32, EPS64, as64, softmax


def weights_and_error(X, W_Q, W_K, interleaved, eps=EPS32):
    """The weights softmax(rot(X W_Q) rot(X W_K)^T / sqrt(d)) in float64, and how far those computed
    in precision ``eps`` may lie from the exact ones: the projections' rounding (turned with their pair), the rotation's, the dot
    products', then at most 2 delta relative per weight for scores off by delta."""
    T, d = len(X), W_Q.shape[1]
    positions = np.arange(T)
    inputs, errors = [], []
    for W in (W_Q, W_K):
        projected = X @ W
        e = X.shape[1] * eps * (np.abs(X) @ np.abs(W))  # per entry of X W
        e = rotation_rounding(e, 0.5, interleaved)  # a pair's errors, turned: at most their sum each
        inputs.append(rotate(projected, positions, interleaved))
        errors.append(e + rotation_rounding(projected, eps, interleaved))
    (Q, K), (dQ, dK) = inputs, errors
    weights = softmax(Q @ K.T / np.sqrt(d))
    delta = (dot_rounding(Q, K, dQ, dK, eps) / np.sqrt(d)).max(axis=-1, keepdims=True)
    return weights, weights * (np.expm1(2 * delta) + (T + 2) * eps)


def test_half_split_is_interleaved_up_to_the_permutation(values, printed):
    x, perm = as64(values["x"]), values["perm"].numpy()
    d = x.shape[1]
    np.testing.assert_array_equal(perm, [*range(0, d, 2), *range(1, d, 2)])  # evens, then odds
    positions = np.arange(len(x))
    paper, neox = rotate(x, positions), rotate(x[:, perm], positions, interleaved=False)
    np.testing.assert_allclose(neox, paper[:, perm], rtol=0, atol=rotation_rounding(x, EPS64).max())
    # The snippet's, in float32, each within rounding of the float64 rotation.
    paper_error = rotation_rounding(x, EPS32)
    assert (np.abs(as64(values["paper"]) - paper) <= paper_error).all()
    assert (np.abs(as64(values["neox"]) - neox) <= paper_error[:, perm]).all()
    if within_allclose(paper_error[:, perm], paper[:, perm]):  # decided by the bound
        assert printed_flags(printed)[0]
    # What is printed is the check of the kept results, wherever it is far from its edge.
    outcome = allclose_decided(values["neox"], values["paper"][:, values["perm"]], atol=1e-6)
    assert outcome in (None, printed_flags(printed)[0])


def test_mixing_changes_the_weights_and_permuting_the_weights_fixes_it(values, printed):
    X, W_Q, W_K, perm = (as64(values[name]) for name in ("X", "W_Q", "W_K", "perm"))
    perm = perm.astype(int)
    right, right_error = weights_and_error(X, W_Q, W_K, interleaved=True)
    wrong, wrong_error = weights_and_error(X, W_Q, W_K, interleaved=False)
    fixed, fixed_error = weights_and_error(X, W_Q[:, perm], W_K[:, perm], interleaved=False)
    # Permuting the columns of W_Q and W_K gives the half-split layout the paper's pairs: the same
    # weights, up to float64's rounding (in another order).
    slack = (
        weights_and_error(X, W_Q, W_K, True, EPS64)[1]
        + weights_and_error(X, W_Q[:, perm], W_K[:, perm], False, EPS64)[1]
    )
    assert (np.abs(fixed - right) <= slack).all()
    for name, expected, error in (
        ("right", right, right_error),
        ("wrong", wrong, wrong_error),
        ("fixed", fixed, fixed_error),
    ):
        assert (np.abs(as64(values[name]) - expected) <= error).all(), name
    # Mixing the layouts changes a weight far beyond rounding.
    change = np.abs(right - wrong).max()
    assert abs(values["change"] - change) <= (right_error + wrong_error).max()
    assert change > 2 * (right_error + wrong_error).max()
    # The printed check of the fix must pass where the rounding bound decides it (for large scores,
    # as here, the worst-case bound is too loose to: then the weights above are what is checked),
    # and shows the check of the kept weights wherever that is far from its edge.
    if within_allclose(np.maximum(right_error, fixed_error), right):
        assert printed_flags(printed)[1]
    outcome = allclose_decided(values["fixed"], values["right"], atol=1e-6)
    assert outcome in (None, printed_flags(printed)[1])
    # What is printed: the largest change, to two decimals.
    assert_printed_in_order(printed, [decimals(values["change"], 2)])
