"""transformer_block/no_residual.py: with the residual each token stays close to itself after
attention; without it, the write replaces the token. Cosines from the block written out in float64,
with their rounding bounds."""

import numpy as np

from tests.support.printed import assert_shown, line_after
from tests.support.reference import U32, as64, causal
from tests.support.transformer_block_reference import add, held, layer_norm, multi_head, state_of


def _cosine(a, b):
    return (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)


def test_the_residual_keeps_each_token_and_its_absence_replaces_it(values, printed):
    state, T = state_of(values["block"]), values["T"]
    x = held(values["x"])
    h = layer_norm(x, state["norm1.weight"], state["norm1.bias"], U32)
    assert (np.abs(as64(values["h"]) - h[0]) <= h[1]).all()
    a = multi_head(held(values["h"]), state, 4, causal(T), U32, prefix="attn.")["out"]
    assert (np.abs(as64(values["a"]) - a[0]) <= a[1]).all()
    kept = add(x, a, U32)
    # A cosine moves by at most 2 |dv| / |v| when v moves by dv (and by its own rounding, far less).
    for name, (value, bound) in (("kept", kept), ("replaced", a)):
        cos = _cosine(value[0], x[0][0])
        slack = 2 * np.linalg.norm(bound[0], axis=-1) / np.linalg.norm(value[0], axis=-1) + 1e-5
        assert (np.abs(as64(values[name]) - cos) <= slack).all(), name
        if name == "kept":
            assert (cos - slack > 0.9).all()  # each token stays close to itself
        else:
            assert (np.abs(cos) + slack < 0.5).all()  # replaced: far from what it was
    assert_shown(line_after(printed, "  x + a:"), values["kept"], decimals=2)
    assert_shown(line_after(printed, "  a:    "), values["replaced"], decimals=2)
