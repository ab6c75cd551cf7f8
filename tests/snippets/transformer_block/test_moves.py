"""Which outputs move when one token changes: the MLP's output at that token only, attention's and
the block's at that token and every later one (causal mask). Where a part's output depends on the
changed token, the exact change (float64) exceeds both runs' rounding bounds, so the float32 outputs
must differ; where it does not depend on it, the float32 output is the same computation on the same
numbers, so it cannot move at all."""

import numpy as np

from tests.support.reference import U32, as64, causal
from tests.support.transformer_block_reference import (
    held,
    layer_norm,
    mlp,
    multi_head,
    pre_norm_block,
    state_of,
)


def parts(values):
    state, H, allowed = state_of(values["block"]), values["H"], causal(values["T"])

    def mlp_write(s):
        return mlp(layer_norm(s, state["norm2.weight"], state["norm2.bias"], U32), state, U32)["out"]

    def attention_write(s):
        h = layer_norm(s, state["norm1.weight"], state["norm1.bias"], U32)
        return multi_head(h, state, H, allowed, U32, prefix="attn.")["out"]

    def whole_block(s):
        return pre_norm_block(s, state, H, allowed, U32)["out"]

    return {"MLP": mlp_write, "attention": attention_write, "block": whole_block}


def test_outputs_move_where_they_depend_on_the_changed_token(values):
    T = values["T"]
    j, i = np.arange(T)[:, None], np.arange(T)[None, :]
    depends = {"MLP": i == j, "attention": i >= j, "block": i >= j}  # row j: token j changed
    x = held(values["x"])
    for name, f in parts(values).items():
        before, before_bound = f(x)
        moved = values["moved"][name].numpy()
        for changed in range(T):
            after, after_bound = f(held(values["replaced"][changed]))
            beyond = (np.abs(after - before) > before_bound + after_bound).any(axis=-1)[0]  # (T,)
            assert (beyond == depends[name][changed]).all(), (name, changed)
        np.testing.assert_array_equal(moved, depends[name].astype(int), err_msg=name)


def test_each_replacement_changes_one_token(values):
    x = as64(values["x"])
    for j, replaced in values["replaced"].items():
        differs = (as64(replaced) != x).any(axis=-1)[0]
        assert differs.tolist() == [t == j for t in range(values["T"])]


def test_the_picture_draws_each_table(values, figure):
    """One grid per part, in the order of the tables: a coloured cell where an output moved, a
    hatched (masked) one where it did not; the figure is drawn by the same code, run again."""
    (ax,) = figure.axes
    assert len(ax.images) == len(values["moved"])
    for image, (name, table) in zip(ax.images, values["moved"].items(), strict=True):
        drawn = image.get_array()
        np.testing.assert_array_equal(np.ma.getmaskarray(drawn), table.numpy() == 0, err_msg=name)
        assert (drawn.compressed() == 1).all(), name
