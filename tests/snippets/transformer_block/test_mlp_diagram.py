"""The picture of one token through the norm and the MLP: each row is the block's own step, against
the steps written out in float64 (transformer_block_reference) with their float32 bounds; the
labels' claims hold (mean 0 and spread 1 after the norm, the GELU's negatives near 0, the token's
printed mean and spread); the rows are drawn in the block's order and shapes; its text is legible
on a phone."""

import numpy as np

from tests.support.reference import U32, as64
from tests.support.transformer_block_reference import gelu, held, layer_norm, linear, state_of

PHONE_COLUMN_PX = 343  # a 375 px screen, less Material's side margins of 16 px
SMALLEST_TEXT_PX = 10
GELU_MINIMUM = -0.17  # x Phi(x) >= -0.1700 for every x (its least value, near x = -0.75)


def exact_steps(values) -> dict:
    """The norm, the widening, the GELU and the way back, exactly, each from the snippet's own input
    to that step, with how far float32 may lie from it."""
    state = state_of(values["block"])
    return {
        "normed": layer_norm(held(values["x"]), state["norm2.weight"], state["norm2.bias"], U32),
        "wide": linear(held(values["normed"]), state["mlp.0.weight"], state["mlp.0.bias"], U32),
        "bent": gelu(held(values["wide"]), U32),
        "write": linear(held(values["bent"]), state["mlp.2.weight"], state["mlp.2.bias"], U32),
    }


def test_each_row_is_the_blocks_own_step(values):
    for name, (exact, bound) in exact_steps(values).items():
        assert (np.abs(as64(values[name]) - exact) <= bound).all(), name


def test_the_norm_leaves_mean_0_and_spread_1(values):
    """The label "mean 0, spread 1": gamma and beta are still 1 and 0, and the exact result has mean
    0 and spread sqrt(var / (var + eps)), 1 to within eps / (2 var)."""
    state = state_of(values["block"])
    assert (state["norm2.weight"] == 1).all() and (state["norm2.bias"] == 0).all()
    exact, _ = exact_steps(values)["normed"]
    assert abs(exact.mean()) < 1e-12
    assert abs(exact.std() - 1) < 1e-5 / (2 * as64(values["x"]).var())


def test_the_token_is_off_zero_and_its_label_says_so(values):
    x = as64(values["x"])
    mean, spread = (float(word.rstrip(",")) for word in values["spread"].split()[1::2])
    assert abs(mean - x.mean()) <= 0.05 + 1e-6 and abs(spread - x.std()) <= 0.05 + 1e-6
    assert abs(x.mean()) > 0.5 and abs(x.std() - 1) > 0.5  # the norm visibly moves it


def test_the_gelu_squashes_what_is_below_0(values):
    """The label "below 0, near 0": every negative input comes out between GELU_MINIMUM and 0, and
    closer to 0 than it went in (x Phi(x) has Phi(x) < 1/2 there)."""
    wide, bent = as64(values["wide"]), as64(values["bent"])
    below = wide < 0
    assert below.sum() >= wide.size // 4  # enough pale cells to see
    assert ((bent[below] >= GELU_MINIMUM) & (bent[below] <= 0)).all()
    assert (np.abs(bent[below]) < np.abs(wide[below])).all()


def test_rows_are_drawn_in_order_and_the_gelu_on_its_inputs_scale(figure, values):
    (ax,) = figure.axes
    C, hidden = values["C"], values["block"].mlp[0].out_features
    assert hidden == 4 * C
    assert [image.get_array().shape for image in ax.images] == [(1, C), (1, C), (4, C), (4, C), (1, C)]
    widened, squashed = ax.images[2], ax.images[3]
    assert widened.norm.vmax == squashed.norm.vmax


def test_labels_name_the_blocks_modules_top_to_bottom(figure, values):
    (ax,) = figure.axes
    C, hidden = values["C"], 4 * values["C"]
    texts = [t.get_text() for t in sorted(ax.texts, key=lambda t: t.get_position()[1])]
    expected = [
        "x, one token",
        "LayerNorm",
        f"Linear {C}→{hidden}",
        "GELU",
        f"Linear {hidden}→{C}",
        "m, added",
    ]
    found = [next(i for i, text in enumerate(texts) if text.startswith(start)) for start in expected]
    assert found == sorted(found)


def test_text_is_legible_on_a_phone(figure):
    renderer = figure.canvas.get_renderer()
    width_pt = figure.get_tightbbox(renderer).width * 72
    scale = min(1.0, PHONE_COLUMN_PX / (width_pt * 96 / 72))
    sizes = [t.get_fontsize() * 96 / 72 * scale for t in figure.axes[0].texts]
    assert sizes and min(sizes) >= SMALLEST_TEXT_PX
