"""linear_as_attention/key_size.py: a fixed key needs d_k = d_in - 1; a key built from x, d_k = 1."""

from __future__ import annotations

import numpy as np
import torch

from tests.printed import line_after, number_after
from tests.reference import softmax
from tests.snippets.linear_as_attention.helpers import D_IN, EPS64, B, bound, float64_data


def test_key_size_d_in_minus_one_works_and_smaller_fixed_keys_do_not(printed):
    generator, x, W = float64_data()
    torch.randn(D_IN, D_IN - 1, generator=generator, dtype=torch.float64)  # the d_k = d_in - 1 key
    k = torch.randn(D_IN, D_IN - 2, generator=generator, dtype=torch.float64).numpy()
    # The label holds the key's printed shape, (B, d_in, d_in - 1).
    error = number_after(printed, f"d_k = {D_IN - 1}: k ({B}, {D_IN}, {D_IN - 1}), max |y - x W^T| =")
    assert error <= bound(x, W, EPS64).max()
    message = line_after(printed, f"d_k = {D_IN - 2}: ValueError: ")
    assert message.startswith("d_k must be")
    assert f"got {D_IN - 2}" in message
    # Least squares over q and c in NumPy: the softmax of the fitted logits misses the weights.
    weights = np.abs(x) / np.abs(x).sum(-1, keepdims=True)
    reachable = np.concatenate([k, np.ones((D_IN, 1))], axis=1)
    solution = np.linalg.lstsq(reachable, np.log(weights).T, rcond=None)[0]
    miss = np.abs(softmax((reachable @ solution).T) - weights).max()
    assert miss > 0.01
    least_squares = f"d_k = {D_IN - 2}, least-squares q and c: max |weights - wanted| ="
    assert abs(number_after(printed, least_squares) - miss) <= 0.0051
    assert number_after(printed, "d_k = 1 with k built from x: max |y - x W^T| =") <= bound(x, W, EPS64).max()
