"""Head 1's values set to zero: without W_O only head 1's slice of the concatenated heads moves (the
other heads are the same computations on the same numbers); after W_O every feature moves, beyond
rounding, because each head writes through C columns."""

import numpy as np

from tests.support.printed import assert_printed_in_order, exact
from tests.support.reference import U32, as64, causal
from tests.support.transformer_block_reference import held, multi_head, state_of


def test_only_head_1s_values_differ(values):
    ours, silenced, d_k = state_of(values["mha"]), state_of(values["silenced"]), values["d_k"]
    for name, value in ours.items():
        other = silenced[name]
        if name.startswith("v_proj."):
            assert not other[d_k : 2 * d_k].any()
            np.testing.assert_array_equal(
                np.delete(other, np.s_[d_k : 2 * d_k], 0), np.delete(value, np.s_[d_k : 2 * d_k], 0)
            )
        else:
            np.testing.assert_array_equal(other, value, err_msg=name)


def test_what_moves_with_and_without_w_o(values, printed):
    H, T, C, d_k = values["H"], values["T"], values["C"], values["d_k"]
    before = multi_head(held(values["x"]), state_of(values["mha"]), H, causal(T), U32)
    after = multi_head(held(values["x"]), state_of(values["silenced"]), H, causal(T), U32)
    for result, kept in ((before, ("concat", "out")), (after, ("concat_1", "out_1"))):
        for key, name in zip(("concat", "out"), kept, strict=True):
            value, bound = result[key]
            assert (np.abs(as64(values[name]) - value) <= bound).all(), name
    concat_changed, out_changed = values["changed"].values()  # without W_O, then with it
    head_1 = np.zeros(C, dtype=bool)
    head_1[d_k : 2 * d_k] = True
    # Head 1's slice: its values are zero, so its output is exactly zero; before, it was not.
    assert not as64(values["concat_1"])[..., head_1].any()
    (c0, dc0), (o0, do0), (o1, do1) = before["concat"], before["out"], after["out"]
    assert (np.abs(c0[..., head_1]) > dc0[..., head_1]).any(axis=1).all()
    # The other heads' slices: the same numbers through the same steps, bit for bit.
    np.testing.assert_array_equal(
        as64(values["concat_1"])[..., ~head_1], as64(values["concat"])[..., ~head_1]
    )
    assert concat_changed.tolist() == head_1.tolist()
    # After W_O: every feature moves by more than both runs' rounding, at some token.
    assert (np.abs(o1 - o0) > do0 + do1).any(axis=1)[0].all()
    assert out_changed.all()
    # Printed: how many features change, of C, and the first and last of them.
    shown = []
    for features in (np.flatnonzero(head_1), np.arange(C)):
        shown += [exact(n) for n in (len(features), C, features[0], features[-1])]
    assert_printed_in_order(printed, shown)
