"""One pre-norm block, line by line, against the block written out in float64
(tests/support/transformer_block_reference.py): each line checked from the tensors the snippet
kept, within that line's own rounding."""

import copy

import numpy as np
import pytest
import torch

from tests.support.printed import allclose_decided, assert_printed_in_order, decimals, exact, printed_flags
from tests.support.reference import U32, U64, as64, causal
from tests.support.transformer_block_reference import (
    add,
    allclose_guaranteed,
    held,
    layer_norm,
    mlp,
    multi_head,
    norm_rounding,
    pre_norm_block,
    state_of,
)


def steps(values) -> dict:
    """Each line of the snippet, exactly, from the inputs it read, with its rounding bound."""
    state, H, allowed = state_of(values["block"]), values["H"], causal(values["T"])
    x = held(values["x"])
    return {
        "h": layer_norm(x, state["norm1.weight"], state["norm1.bias"], U32),
        "a": multi_head(held(values["h"]), state, H, allowed, U32, prefix="attn.")["out"],
        "x_mid": add(x, held(values["a"]), U32),
        "h_mid": layer_norm(held(values["x_mid"]), state["norm2.weight"], state["norm2.bias"], U32),
        "m": mlp(held(values["h_mid"]), state, U32)["out"],
        "out": add(held(values["x_mid"]), held(values["m"]), U32),
    }


def test_each_line_is_the_formula(values):
    assert values["mask"].equal(torch.tril(torch.ones(values["T"], values["T"], dtype=torch.bool)))
    for name, (value, bound) in steps(values).items():
        assert (np.abs(as64(values[name]) - value) <= bound).all(), name


def test_decoder_block_computes_the_pre_norm_formula(values):
    """In float64 (the kept block, copied), DecoderBlock's forward is x + attn(norm1(x)), then
    + mlp(norm2(.)): within float64 rounding of the formula, which is all the printed check needs."""
    block = copy.deepcopy(values["block"]).double()
    x, H, T = values["x"].double(), values["H"], values["T"]
    with torch.no_grad():
        out = as64(block(x, values["mask"]))
    reference, bound = pre_norm_block(held(x), state_of(block), H, causal(T), U64)["out"]
    assert (np.abs(out - reference) <= 2 * bound).all()  # 2: the float64 reference rounds too
    # So block(x) in float32 is within the float32 rounding of the same formula as the lines are.
    full, full_bound = pre_norm_block(held(values["x"]), state_of(values["block"]), H, causal(T), U32)["out"]
    assert (np.abs(as64(values["out"]) - full) <= full_bound).all()


def test_prints_shapes_the_check_and_each_tokens_length(values, printed):
    (same,) = printed_flags(printed)
    assert same == values["same"]
    full, full_bound = pre_norm_block(
        held(values["x"]), state_of(values["block"]), values["H"], causal(values["T"]), U32
    )["out"]
    if allclose_guaranteed(2 * full_bound, full, full_bound, atol=1e-6):
        assert same
    # The check itself, run again on the kept input: what it printed, wherever far from its edge.
    with torch.no_grad():
        again = values["block"](values["x"], values["mask"])
    assert allclose_decided(values["out"], again, atol=1e-6) in (None, same)
    B, T, C = values["x"].shape
    expected = [exact(n) for n in (B, T, C) * 4]
    sizes = {}
    for name in ("x", "a", "m", "out"):
        v = as64(values[name])[0]
        sizes[name] = np.linalg.norm(v, axis=-1)
        slack = norm_rounding(v, U32)
        expected += [decimals(s, 2, e) for s, e in zip(sizes[name], slack, strict=True)]
    assert_printed_in_order(printed, expected)
    # What the page says of them: each write is shorter than the stream it is added to.
    exact_steps = steps(values)
    for name in ("a", "m"):
        value, bound = exact_steps[name]
        assert (np.linalg.norm(value[0], axis=-1) + np.linalg.norm(bound[0], axis=-1) < sizes["x"]).all()


def test_the_picture_draws_the_lines_numbers_on_one_colour_scale(values, figure):
    """Seven grids, in the order the lines compute them, each the snippet's tensor (the figure is
    drawn by the same seeded code, run again in this process), all on one signed colour scale."""
    (ax,) = figure.axes
    names = ("x", "h", "a", "x_mid", "h_mid", "m", "out")
    assert len(ax.images) == len(names)
    top = max(np.abs(as64(values[name])).max() for name in names)
    for image, name in zip(ax.images, names, strict=True):
        np.testing.assert_allclose(np.asarray(image.get_array()), as64(values[name])[0], atol=1e-6)
        assert image.norm.vmax == pytest.approx(top, rel=1e-6) and image.norm.vmin == -image.norm.vmax
    # What the page says of it: on that one scale the writes are pale next to the stream.
    exact_steps = steps(values)
    for name in ("a", "m"):
        value, bound = exact_steps[name]
        assert np.abs(value).max() + bound.max() < 0.5 * np.abs(as64(values["x"])).max()
