"""bugs/inverted_mask.py: the triu mask read as "may attend" (SDPA's convention) and as "blocked"
(nn.MultiheadAttention's), recomputed exactly in float64 from the snippet's own inputs, weights and
module, each float32 result within its rounding bound (tests/support/worst_case_rounding.py)."""

import numpy as np
import torch

from tests.support import reference
from tests.support.printed import assert_shows, rounded_significant
from tests.support.reference import causal
from tests.support.worst_case_rounding import (
    assert_largest_difference,
    attention,
    exact,
    matmul,
    multihead_attention,
)


def test_the_mask_and_the_buggy_weights(printed, values):
    q, k, v, mask = (values[name] for name in ("q", "k", "v", "mask"))
    T = q.shape[1]
    np.testing.assert_array_equal(mask, ~causal(T))  # triu(diagonal=1): True where the key comes later
    # SDPA reads True as "may attend": each query sees the keys after it only.
    buggy, weights = attention(exact(q), exact(k), exact(v), allowed=mask.numpy())
    assert weights.holds(values["weights"]) and buggy.holds(values["buggy"]) and buggy.holds(values["out"])
    assert (values["weights"][0][causal(T)] == 0).all()  # exp(-inf) = 0: no weight on the present or past
    assert (values["buggy"][0, -1] == 0).all()  # the last query sees no key: PyTorch gives it zeros
    assert values["same"] is True  # attn_ref and SDPA agree (up to the rounding bounded above)
    # The fix, ~mask, is the causal mask.
    fixed, _ = attention(exact(q), exact(k), exact(v), allowed=causal(T))
    assert fixed.holds(values["fixed"]) and fixed.holds(values["causal"])
    assert values["fixed_is_causal"] is True
    assert_shows(printed, [(0.0, 0.0)] * 4)  # the last query's output: zeros


def test_the_picture_shows_the_buggy_weights_above_the_causal_ones(figure, values):
    """Each panel's numbers are its weights at two decimals, on the keys its mask lets a query see:
    the bug's above the diagonal, the fix's on and below it (the exact weights, from above)."""
    q, k, v = (values[name] for name in ("q", "k", "v"))
    T = q.shape[1]
    for ax, allowed in zip(figure.axes[:2], (~causal(T), causal(T)), strict=True):
        _, weights = attention(exact(q), exact(k), exact(v), allowed=allowed)
        shown = [float(t.get_text()) for t in ax.texts]
        expected = weights.value[0][allowed]  # row by row, the cells a query sees
        np.testing.assert_allclose(shown, expected, rtol=0, atol=0.005 + 1e-6)


def _sdpa_layer(x, values, allowed):
    X = exact(x)
    q, k, v = (matmul(X, exact(values[name])) for name in ("W_Q", "W_K", "W_V"))
    return attention(q, k, v, allowed=allowed)[0]


def test_multihead_attention_reads_the_triu_mask_as_blocked(values):
    x, mha, future = values["x"], values["mha"], values["future"]
    T = x.shape[1]
    np.testing.assert_array_equal(future, ~causal(T))
    expected = multihead_attention(x.numpy(), mha, allowed=causal(T))
    np.testing.assert_allclose(
        expected.value,
        reference.multihead_attention(x.numpy(), mha.state_dict(), mha.num_heads, causal(T))["output"],
    )
    with torch.no_grad():
        assert expected.holds(mha(x, x, x, attn_mask=future, need_weights=False)[0])


def test_the_check(printed, values):
    x, mha, future, changed = values["x"].numpy(), values["mha"], values["future"].numpy(), values["changed"]
    worst, tolerance = values["worst"], values["tolerance"]
    layers = [  # in the snippet's order: SDPA with the triu mask, with ~mask, nn.MultiheadAttention
        lambda a: _sdpa_layer(a, values, allowed=future),  # True: may attend
        lambda a: _sdpa_layer(a, values, allowed=~future),
        lambda a: multihead_attention(a, mha, allowed=~future),  # True: blocked
    ]
    ranges = []
    for index, (name, layer) in enumerate(zip(worst, layers, strict=True)):
        before = layer(x)
        edits = {j: y.numpy() for (layer_name, j), y in changed.items() if layer_name == name}
        assert sorted(edits) == list(range(1, x.shape[1]))  # every token after the first, changed
        pairs = []
        for j, y in edits.items():
            assert (y[:, :j] == x[:, :j]).all() and (y[:, j + 1 :] == x[:, j + 1 :]).all()
            pairs.append((layer(y).map(lambda a, j=j: a[:, :j]), before.map(lambda a, j=j: a[:, :j])))
            if index > 0:  # causal: an earlier output does not depend on a later token
                np.testing.assert_allclose(pairs[-1][0].value, pairs[-1][1].value, rtol=0, atol=1e-12)
        ranges.append(assert_largest_difference(worst[name], *pairs))
    buggy, fixed, multihead = worst.values()
    assert ranges[0][0] > tolerance and buggy > tolerance  # earlier outputs move: fails on every machine
    # The causal layers' float32 outputs move by rounding at most (checked above), and the page
    # promises that stays below the tolerance.
    assert fixed < tolerance and multihead < tolerance
    assert_shows(printed, rounded_significant([buggy, fixed, multihead], 2))
