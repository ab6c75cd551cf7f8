"""The heatmap helper draws what it is given and labels it; figures drawn for both pages."""

import re
import runpy

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from matplotlib.colors import to_rgba

from attn_ref.plotting import DARK_PAPER, PLOT_MIME, attention_heatmap, dark_colour, figure_to_svg
from sitelook.project import ROOT
from tests.support.colours import contrast, luminance
from tests.support.drawings import contrast_failures, font_requests


def test_heatmap_draws_the_weights_with_labels_and_numbers():
    weights = torch.tensor([[0.25, 0.75], [1.0, 0.0]])
    ax = attention_heatmap(weights, query_labels=["a", "b"], title="t")
    assert ax.images[0].get_array().tolist() == weights.tolist()
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b"]
    assert [t.get_text() for t in ax.texts] == ["0.25", "0.75", "1.00", "0.00"]
    plt.close(ax.figure)


def test_heatmap_rejects_wrong_label_count_and_shape():
    with pytest.raises(ValueError, match="expected 2 query labels and 2 key labels"):
        attention_heatmap([[0.5, 0.5], [0.5, 0.5]], query_labels=["only one"])
    with pytest.raises(ValueError, match=r"weights must have shape \(L, S\), got \(3,\)"):
        attention_heatmap([0.2, 0.3, 0.5])


def test_both_drawings_carry_the_text_alternative_and_their_scheme_and_no_date():
    fig, _ = plt.subplots()
    svg = figure_to_svg(fig, alt='a "quoted" <plot>')
    for scheme, drawing in (("light", svg.light), ("dark", svg.dark)):
        assert drawing.startswith(
            f'<svg role="img" aria-label="a &quot;quoted&quot; &lt;plot>" data-scheme="{scheme}"'
        )
        assert "<dc:date>" not in drawing
    assert str(svg) == svg.light + svg.dark
    with pytest.raises(ValueError, match="alt must describe"):
        figure_to_svg(plt.figure(), alt=" ")


def test_shared_vmax_fixes_the_colour_scale():
    ax = attention_heatmap([[0.2, 0.3], [0.1, 0.4]], vmax=1.0)
    assert ax.images[0].get_clim() == (0.0, 1.0)
    plt.close(ax.figure)


def test_a_notebook_shows_the_light_drawing_and_the_site_gets_both():
    svg = figure_to_svg(plt.figure(), alt="empty")
    bundle = svg._repr_mimebundle_()
    assert bundle == {"image/svg+xml": svg.light, PLOT_MIME: svg.light + svg.dark}


IMAGE_DATA = re.compile(r'xlink:href="data:image/png;base64,([^"]+)"')


def test_a_heatmaps_colours_mean_the_same_weight_in_both_drawings():
    """The weights and the colour bar are the same image in both; the numbers over the cells keep
    the colour chosen against their cell; the rest of the text turns light on the dark page."""
    ax = attention_heatmap([[1.0, 0.0], [0.25, 0.75]], query_labels=["a", "b"], title="weights")
    svg = figure_to_svg(ax.figure, alt="a heatmap")
    light_images, dark_images = IMAGE_DATA.findall(svg.light), IMAGE_DATA.findall(svg.dark)
    assert len(light_images) == 2 and light_images == dark_images  # the cells, the colour bar
    light_text, dark_text = _text_colours(svg.light), _text_colours(svg.dark)
    for number in ("1.00", "0.00", "0.25", "0.75"):  # over their cells: as chosen against them
        assert light_text[number] == dark_text[number]
    assert light_text["weights"] == "#000000" and contrast(dark_text["weights"], DARK_PAPER) >= 4.5


@pytest.mark.parametrize("height", [2.4, 2.43, 2.46, 2.49, 2.52])
def test_a_laid_out_figure_keeps_its_layout_in_the_dark_drawing(height):
    """Under a layout engine a second drawing could move the axes by a fraction of a pixel and
    resample the colour-mapped images (seen: a colour bar 9 pixels wide in one drawing, 8 in the
    other); the dark drawing keeps the light one's layout, so the images are the same."""
    fig, axes = plt.subplots(1, 3, figsize=(5.6, height), layout="constrained")
    for ax, seed in zip(axes, range(3), strict=True):
        image = ax.imshow(np.random.default_rng(seed).random((3, 3)), vmin=0, vmax=1)
        ax.set_title("weights of a query", fontsize=11)
    fig.colorbar(image, ax=axes, shrink=0.8)
    svg = figure_to_svg(fig, alt="three heatmaps")
    light_images, dark_images = IMAGE_DATA.findall(svg.light), IMAGE_DATA.findall(svg.dark)
    assert len(light_images) == 4 and light_images == dark_images


TEXT_COLOUR = re.compile(r'<g id="text_\d+">\s*<!-- (.*?) -->\s*<g (?:style="fill: (#[0-9a-f]{6})")?')


def _text_colours(svg: str) -> dict[str, str]:
    """Each text of a drawing (drawn as shapes, its words in a comment): its fill, black when none
    is given."""
    return {text: fill or "#000000" for text, fill in TEXT_COLOUR.findall(svg)}


@pytest.mark.parametrize("colour", ["black", "0.3", "tab:blue", "tab:brown", "#8c1515", "navy", "tab:olive"])
def test_ink_and_text_stand_out_from_the_dark_page_and_keep_their_hue(colour):
    import colorsys

    assert contrast(dark_colour(colour), DARK_PAPER) >= 3.0
    assert contrast(dark_colour(colour, "text"), DARK_PAPER) >= 4.5
    r, g, b, _ = to_rgba(colour)
    if max(r, g, b) - min(r, g, b) >= 0.08:  # a hue, not a grey
        hue = colorsys.rgb_to_hls(r, g, b)[0]
        dark_hue = colorsys.rgb_to_hls(*dark_colour(colour, "text")[:3])[0]
        assert min(abs(hue - dark_hue), 1 - abs(hue - dark_hue)) < 0.02


def test_greys_turn_around_and_pale_fills_deepen():
    assert np.allclose(dark_colour("white")[:3], to_rgba(DARK_PAPER)[:3])
    assert luminance(dark_colour("black")) > 0.5 > luminance(dark_colour("white"))
    assert luminance(dark_colour("#dbe9f6", "fill")) < 0.1  # a pale box behind text
    assert dark_colour("tab:orange", "fill") == to_rgba("tab:orange")  # a bar keeps its colour
    with pytest.raises(ValueError, match="role must be 'ink', 'text' or 'fill', got 'paint'"):
        dark_colour("red", "paint")


def test_a_diagrams_arrows_and_words_stand_out_from_both_pages():
    """The transformer block's diagram (page 5) draws its stream and its read and add arrows with
    ax.annotate: for_dark redraws an annotation's arrow with its words, so every mark of both
    drawings stands out from its page by 3:1."""
    figure = runpy.run_path(str(ROOT / "snippets" / "transformer_block" / "diagram.py"))["fig"]
    svg = figure_to_svg(figure, alt="one block", kind="diagram")
    assert 'data-kind="diagram"' in svg.light and 'data-kind="diagram"' in svg.dark
    assert contrast_failures(svg.light, "#ffffff") == []
    assert contrast_failures(svg.dark, DARK_PAPER) == []
    assert font_requests(svg.light) == font_requests(svg.dark) == []


def test_the_check_sees_black_ink_on_the_dark_page():
    """The light drawing of an arrow and a word, set on the dark page: both fail, named."""
    fig, ax = plt.subplots(figsize=(2, 1))
    ax.axis("off")
    ax.annotate("add", (0.9, 0.5), (0.1, 0.5), arrowprops={"arrowstyle": "-|>", "color": "black"})
    light = figure_to_svg(fig, alt="an arrow").light.replace("#ffffff", DARK_PAPER)  # its white paper too
    failures = contrast_failures(light, DARK_PAPER)
    assert any(f.startswith('text "add"') for f in failures) and any(f.startswith("patch_") for f in failures)


def test_a_figures_kind_is_a_plot_or_a_diagram():
    with pytest.raises(ValueError, match="kind must be one of 'plot', 'diagram', got 'chart'"):
        figure_to_svg(plt.figure(), alt="x", kind="chart")


def test_a_translucent_line_stands_out_from_the_dark_page_as_it_shows_there():
    """A line drawn with alpha=0.8 in tab:blue stands out from white by 3:1; for the dark page
    for_dark lightens it until it does there too, its alpha mixing it with the page."""
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1], [0, 1], color="tab:blue", alpha=0.8, lw=2)
    svg = figure_to_svg(fig, alt="a line")
    assert contrast_failures(svg.light, "#ffffff") == []
    assert contrast_failures(svg.dark, DARK_PAPER) == []
