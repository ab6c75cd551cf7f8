"""The picture of a block: its boxes name the block's modules in the order forward() calls them, it
shows two additions to the stream, and its text stays at least 11 px tall on a phone."""

import torch
from matplotlib.patches import Circle, FancyBboxPatch

from attn_ref import DecoderBlock

PHONE_COLUMN_PX = 343  # a 375 px screen, less Material's side margins of 16 px
SMALLEST_TEXT_PX = 11


def modules_in_call_order() -> list[torch.nn.Module]:
    """The block's submodules in the order its forward() calls them, recorded by hooks."""
    block = DecoderBlock(embed_dim=8, num_heads=2)
    called = []
    for module in block.children():
        module.register_forward_hook(lambda module, inputs, output: called.append(module))
    with torch.no_grad():
        block(torch.randn(1, 3, 8), torch.ones(3, 3, dtype=torch.bool))
    return called


def box_texts(figure) -> list[str]:
    """The text inside each box, from the top box to the bottom one."""
    (ax,) = figure.axes
    texts = []
    for box in sorted((p for p in ax.patches if isinstance(p, FancyBboxPatch)), key=lambda p: -p.get_y()):
        x0, y0 = box.get_x(), box.get_y()
        inside = [
            t.get_text()
            for t in ax.texts
            if t.get_text()  # an arrow is a text with none
            and x0 <= t.get_position()[0] <= x0 + box.get_width()
            and y0 <= t.get_position()[1] <= y0 + box.get_height()
        ]
        assert len(inside) == 1, inside
        texts += inside
    return texts


def test_boxes_follow_the_forward_pass(figure):
    texts = box_texts(figure)
    called = modules_in_call_order()
    assert len(texts) == len(called) == 4
    for text, module in zip(texts, called, strict=True):
        if isinstance(module, torch.nn.Sequential):  # the MLP: every layer named, in order
            assert text.startswith("MLP"), text
            position = 0
            for layer in module:
                position = text.index(type(layer).__name__, position) + 1  # ValueError if missing
        else:
            assert text.startswith(type(module).__name__), text


def test_two_additions_to_the_stream(figure):
    """One circle per residual addition: after attention, after the MLP."""
    (ax,) = figure.axes
    assert sum(isinstance(p, Circle) for p in ax.patches) == 2


def test_text_is_legible_on_a_phone(figure):
    """Shown as wide as the phone's column, the picture scales its text by the column's width over
    its own (its tight bounding box, which is what the page shows)."""
    renderer = figure.canvas.get_renderer()
    width_pt = figure.get_tightbbox(renderer).width * 72
    scale = PHONE_COLUMN_PX / (width_pt * 96 / 72)  # 96 px per inch, 72 points per inch
    sizes = [t.get_fontsize() * 96 / 72 * scale for ax in figure.axes for t in ax.texts]
    assert sizes and min(sizes) >= SMALLEST_TEXT_PX
