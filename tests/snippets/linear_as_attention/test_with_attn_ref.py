"""linear_as_attention/with_attn_ref.py: attn_ref's construction masks zero features, gives the
weights |x| / ||x||_1 and is exact up to rounding."""

from __future__ import annotations

import numpy as np
import torch

from tests.support.linear_as_attention_bound import bound
from tests.support.printed import assert_printed_in_order, decimals, printed_flags
from tests.support.reference import EPS64, as64


def test_with_attn_ref_masks_zeros_and_reproduces_the_weights(values):
    x = as64(values["x"])
    zero_rows = ~x.any(axis=-1)
    assert zero_rows.any() and (x[~zero_rows] == 0).any()  # the batch has both kinds of zeros
    # Zero features are masked; a row of zeros is not (its values are zero: any weights will do).
    mask = values["mask"][:, 0].numpy()
    np.testing.assert_array_equal(mask, (x != 0) | zero_rows[:, None])
    # The weights of the other rows are |x| / ||x||_1 (an orthonormal key: condition number 1).
    weights = as64(values["weights"])[:, 0][~zero_rows]
    rows = x[~zero_rows]
    spread = bound(rows, np.ones(1), 1.0) / (16 * np.abs(rows).sum(-1))  # 1 + spread of the logits
    tolerance = 16 * rows.shape[-1] * EPS64 * spread.max()
    expected = np.abs(rows) / np.abs(rows).sum(-1, keepdims=True)
    np.testing.assert_allclose(weights, expected, rtol=0, atol=tolerance)
    assert (weights[rows == 0] == 0).all()  # exp(-inf) = 0


def test_with_attn_ref_is_exact_to_rounding_in_both_dtypes(values):
    x, W = as64(values["x"]), as64(values["W"])
    outputs = values["outputs"]  # dtype: y
    assert set(outputs) == {torch.float64, torch.float32}
    for dtype, y in outputs.items():
        error = np.abs(as64(y) - x @ W.T).max(-1)  # per row; the bound is 0 for the zero row
        assert (error <= bound(x, W, torch.finfo(dtype).eps)).all(), dtype
        assert (y[~x.any(axis=-1)] == 0).all(), dtype  # zero values: exactly zero


def test_with_attn_ref_prints_what_it_computed(values, printed):
    x, y_exact, scale = (as64(values[name]) for name in ("x", "y_exact", "scale"))
    outputs = values["outputs"]
    in_eps = [
        (np.abs(as64(y) - y_exact) / scale).max() / torch.finfo(dtype).eps for dtype, y in outputs.items()
    ]
    assert_printed_in_order(
        printed,
        [decimals(w, 4) for w in as64(values["weights"])[0, 0]]
        + [decimals(a, 4) for a in np.abs(x[0]) / np.abs(x[0]).sum()]
        + [decimals(e, 1) for e in in_eps],
    )
    # The mask of row 0, then, for each dtype, whether the zero row gave zero.
    zero_rows = ~x.any(axis=-1)
    expected = values["mask"][0, 0].tolist() + [bool((y[zero_rows] == 0).all()) for y in outputs.values()]
    assert printed_flags(printed) == expected
