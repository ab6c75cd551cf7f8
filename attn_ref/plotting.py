"""Attention heatmaps, drawn the same way on every page, and figures drawn for a light and a dark page.

`figure_to_svg` renders a finished figure twice: as it was drawn, on white, and again for a dark
page (`for_dark`). Colours that carry data through a colour map (a heatmap's weights, its colour
bar) are the same in both, so a colour means the same value on either page; the ink and paper
around them (text, axes, lines, arrows, boxes) are redrawn for the dark page, not inverted by a
filter. Text is drawn as shapes, so a figure asks the reader's machine for no font and looks the
same on every machine.

It serves the site's pages, and ships in the wheel because the tutorials' downloaded
notebooks import it to draw their figures.
"""

from __future__ import annotations

import colorsys
import io
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import Collection
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.text import Annotation, Text
from numpy.typing import ArrayLike

__all__ = ["KINDS", "PLOT_MIME", "PlotSVG", "attention_heatmap", "dark_colour", "figure_to_svg", "for_dark"]

PLOT_MIME = "application/vnd.attn-ref.plot+html"  # both drawings, for the site's pages
DARK_PAPER = "#1e2129"  # the dark scheme's page (Material's slate background)
DARK_INK = "#d5d8df"  # its text, a little brighter than the page's for thin lines
KINDS = ("plot", "diagram")  # a plot of results or data; a diagram: a drawn mechanism (arrows, steps)


class PlotSVG(str):
    """A figure drawn for a light page and for a dark one: the markup of both, one after the other.

    ``print`` writes out both (a Markdown page of the site shows the one of the reader's scheme);
    a notebook displays the light drawing, on white, which reads in any notebook theme.

    Attributes:
        light: SVG markup of the figure as drawn.
        dark: SVG markup of the figure redrawn for a dark page.
    """

    light: str
    dark: str

    def __new__(cls, light: str, dark: str) -> PlotSVG:
        plot = super().__new__(cls, light + dark)
        plot.light, plot.dark = light, dark
        return plot

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        return {"image/svg+xml": self.light, PLOT_MIME: str(self)}


def attention_heatmap(
    weights: ArrayLike,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
    annotate: bool | None = None,
    vmax: float | None = None,
    mask: ArrayLike | None = None,
) -> Axes:
    """Draw an ``(L, S)`` attention-weight matrix, one row per query.

    Each cell is also written as a number (for up to 12 keys by default),
    so that the figure does not rely on colour alone. With a ``mask``, a
    key that a query may not see is drawn hatched in grey, not as a weight
    of 0.00 in the colour of the smallest weights: a masked key and a key
    given almost no weight are different things.

    Args:
        weights: ``(L, S)`` weights, as a tensor or an array.
        query_labels: ``L`` row labels; defaults to positions.
        key_labels: ``S`` column labels; defaults to ``query_labels`` when
            the matrix is square.
        ax: Axes to draw on; a new figure is made when omitted.
        title: Optional title.
        annotate: Write each weight in its cell.
        vmax: Weight drawn in the brightest colour; defaults to the largest
            weight. Give panels the same ``vmax`` to compare them by colour.
        mask: ``(L, S)`` booleans, ``True`` where the query may attend to the
            key (as `attn_ref.masks.causal_mask` makes them); ``None``: every key.

    Returns:
        The axes drawn on.

    Examples:
        >>> ax = attention_heatmap([[0.9, 0.1], [0.3, 0.7]], query_labels=["a", "b"])
        >>> [t.get_text() for t in ax.texts]
        ['0.90', '0.10', '0.30', '0.70']

        A causal mask: the key after the first query is hatched, not written.

        >>> mask = [[True, False], [True, True]]
        >>> ax = attention_heatmap([[1.0, 0.0], [0.4, 0.6]], mask=mask)
        >>> [t.get_text() for t in ax.texts]
        ['1.00', '0.40', '0.60']
    """
    w = np.asarray(weights.detach().cpu() if hasattr(weights, "detach") else weights, dtype=float)
    if w.ndim != 2:
        raise ValueError(f"weights must have shape (L, S), got {w.shape}")
    L, S = w.shape
    query_labels = list(query_labels) if query_labels is not None else [str(i) for i in range(L)]
    if key_labels is None:
        key_labels = query_labels if L == S else [str(j) for j in range(S)]
    if len(query_labels) != L or len(key_labels) != S:
        raise ValueError(f"expected {L} query labels and {S} key labels for weights of shape {w.shape}")
    allowed = np.ones_like(w, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    if allowed.shape != w.shape:
        raise ValueError(f"mask has shape {allowed.shape}, expected the weights' (L, S) = {w.shape}")
    fontsize = 8  # numbers in cells drawn on the caller's axes, whose size the caller chose
    if ax is None:  # cells just wide enough for their numbers, so a phone shrinks the figure less
        cell, fontsize = 0.5, 11
        size = min(1.0 + cell * S, 7.0)
        _, ax = plt.subplots(figsize=(size + 1.2, min(0.8 + cell * L, 7.0)), layout="constrained")
    vmax = float(w.max()) if vmax is None else vmax
    image = ax.imshow(np.ma.masked_where(~allowed, w), cmap="viridis", vmin=0.0, vmax=max(1e-12, vmax))
    label = "attention weight" if allowed.all() else "attention weight\n(hatched: masked)"
    ax.figure.colorbar(image, ax=ax, shrink=0.8, label=label)
    for i, j in zip(*np.nonzero(~allowed), strict=True):  # masked: grey, hatched, no number
        ax.add_patch(
            Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="0.85", edgecolor="0.45", hatch="///", lw=0)
        )
    ax.set_xticks(range(S), key_labels)
    ax.set_yticks(range(L), query_labels)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    if title:
        ax.set_title(title)
    if annotate if annotate is not None else S <= 12:
        threshold = 0.6 * vmax
        for i, j in zip(*np.nonzero(allowed), strict=True):
            colour = "black" if w[i, j] > threshold else "white"
            ax.text(j, i, f"{w[i, j]:.2f}", ha="center", va="center", color=colour, fontsize=fontsize)
    return ax


def figure_to_svg(figure: Figure, alt: str, kind: str = "plot") -> PlotSVG:
    """Render ``figure`` as SVG for a light and for a dark page, with a text alternative; close it.

    Text is drawn as shapes (``svg.fonttype: path``): the drawing asks for no font, and a formula
    such as $\\sqrt{d_k}$ looks as matplotlib laid it out on every machine.

    Args:
        figure: The figure to render.
        alt: What the figure shows, for readers who cannot see it.
        kind: ``"plot"`` (results or data: a heatmap of weights, a curve) or ``"diagram"`` (an
            explanatory picture of a mechanism: arrows, steps, the pieces of a computation). The
            site counts the diagrams of each page.

    Returns:
        The two drawings (`PlotSVG`), each carrying ``role="img"``, ``aria-label=alt``,
        ``data-scheme`` (``light`` or ``dark``) and ``data-kind``. Printed on a Markdown page it is
        the plot; as a notebook cell's last expression, the notebook shows it as the plot.

    Examples:
        >>> fig, _ = plt.subplots()
        >>> svg = figure_to_svg(fig, alt="an empty plot")
        >>> svg.light.startswith('<svg role="img" aria-label="an empty plot"')
        True
        >>> 'data-scheme="light"' in svg.light, 'data-scheme="dark"' in svg.dark
        (True, True)
        >>> 'data-kind="plot"' in svg.light
        True
    """
    if not alt.strip():
        raise ValueError("alt must describe the figure")
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(map(repr, KINDS))}, got {kind!r}")
    escaped = alt.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
    drawings = {}
    for scheme in ("light", "dark"):
        if scheme == "dark":
            for_dark(figure)
            # The light drawing's layout, kept: another pass of a layout engine moves axes by a
            # fraction of a pixel, and a colour-mapped image resampled there changes its pixels.
            figure.set_layout_engine("none")
        buffer = io.StringIO()
        # Stable element ids (identical builds); text as glyph outlines, each defined once per drawing.
        with plt.rc_context({"svg.hashsalt": "attn_ref", "svg.fonttype": "path"}):
            figure.savefig(buffer, format="svg", metadata={"Date": None}, bbox_inches="tight")
        svg = buffer.getvalue()
        svg = svg[svg.index("<svg") :]  # drop the XML prologue and doctype
        drawings[scheme] = svg.replace(
            "<svg", f'<svg role="img" aria-label="{escaped}" data-scheme="{scheme}" data-kind="{kind}"', 1
        )
    plt.close(figure)
    return PlotSVG(drawings["light"], drawings["dark"])


def _luminance(rgb: Sequence[float]) -> float:
    """WCAG's relative luminance of an sRGB colour."""
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb[:3]]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _contrast(a: Sequence[float], b: Sequence[float]) -> float:
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def dark_colour(
    colour: str | Sequence[float], role: str = "ink", alpha: float | None = None
) -> tuple[float, float, float, float]:
    """The colour that plays ``colour``'s part on a dark page.

    Greys turn around: black ink becomes light ink, white paper the dark page, and the greys
    between follow. Other colours keep their hue. As ink (``"ink"`` for lines, edges and markers,
    ``"text"``) they are lightened until they stand out from the dark page (3:1, or 4.5:1 for
    text, as WCAG asks), as they show there: a translucent ink mixed with the page; as a
    ``"fill"``, a pale tint (a box behind text) becomes a deep tint of the same hue, and a fill of
    full colour (a bar) stays as it is. No colour (alpha 0, matplotlib's ``"none"``) stays none.

    Args:
        colour: Any colour matplotlib reads.
        role: ``"ink"``, ``"text"`` or ``"fill"``.
        alpha: The alpha its artist draws it with (``artist.set_alpha``), which matplotlib puts in
            place of the colour's own; ``None``: the colour's.

    Returns:
        The colour as RGBA, its alpha kept.

    Examples:
        >>> from matplotlib.colors import to_hex
        >>> to_hex(dark_colour("white")), to_hex(dark_colour("black"))  # paper, ink
        ('#1e2129', '#d5d8df')
        >>> pale_blue = "#dbe9f6"  # a box behind text
        >>> to_hex(dark_colour("tab:blue")), to_hex(dark_colour(pale_blue, "fill"))
        ('#1f77b4', '#23425e')
        >>> to_hex(dark_colour("tab:blue", alpha=0.8))  # drawn translucent: lighter
        '#2388ce'

    """
    if role not in ("ink", "text", "fill"):
        raise ValueError(f"role must be 'ink', 'text' or 'fill', got {role!r}")
    r, g, b, a = to_rgba(colour)
    if a == 0:
        return (r, g, b, a)
    paper, ink = to_rgba(DARK_PAPER), to_rgba(DARK_INK)
    if max(r, g, b) - min(r, g, b) < 0.08:  # a grey: its lightness turns around
        t = 1.0 - (r + g + b) / 3  # 0 for white (paper), 1 for black (ink)
        return (*(p + t * (i - p) for p, i in zip(paper[:3], ink[:3], strict=True)), a)
    hue, lightness, saturation = colorsys.rgb_to_hls(r, g, b)
    if role == "fill":
        if lightness > 0.75:  # a tint behind ink: the same hue, as deep as the tint is pale
            r, g, b = colorsys.hls_to_rgb(hue, 0.2 + 0.6 * (1.0 - lightness), min(saturation, 0.45))
        return (r, g, b, a)
    needed = 4.5 if role == "text" else 3.0

    shown = a if alpha is None else alpha

    def seen(rgb: Sequence[float]) -> list[float]:  # as it shows on the page
        return [shown * c + (1 - shown) * p for c, p in zip(rgb, paper[:3], strict=True)]

    while _contrast(seen((r, g, b)), paper) < needed and lightness < 0.95:
        lightness = min(0.95, lightness + 0.02)
        r, g, b = colorsys.hls_to_rgb(hue, lightness, saturation)
    return (r, g, b, a)


def _over_an_image(text: Text, ax: Axes) -> bool:
    """Whether ``text`` is written over an image of data (a heatmap's numbers): its colour was
    chosen against that image's colours, which stay."""
    if text.get_transform() != ax.transData:
        return False
    x, y = text.get_position()
    for image in ax.images:
        left, right, bottom, top = image.get_extent()
        if min(left, right) <= x <= max(left, right) and min(bottom, top) <= y <= max(bottom, top):
            return True
    return False


def _redrawn(colour, role: str = "ink", alpha: float | None = None):
    """`dark_colour`, or ``"none"`` for no colour: an alpha of 0 set again under an artist's own
    alpha (``alpha=0.35``) would take that alpha and show."""
    return "none" if to_rgba(colour)[3] == 0 else dark_colour(colour, role, alpha)


def _redraw_patch(patch: Patch) -> None:
    alpha = patch.get_alpha()
    patch.set_facecolor(_redrawn(patch.get_facecolor(), "fill", alpha))
    patch.set_edgecolor(_redrawn(patch.get_edgecolor(), alpha=alpha))
    patch.set_hatchcolor(_redrawn(patch.get_hatchcolor(), alpha=alpha))


def for_dark(figure: Figure) -> None:
    """Redraw ``figure`` for a dark page, in place, each colour by `dark_colour`.

    What is drawn through a colour map (images, meshes, coloured scatters) keeps its colours,
    and so does text written over an image (a heatmap's numbers, dark on its bright cells and
    light on its dark ones). An annotation's arrow (``ax.annotate(..., arrowprops=...)``) is
    redrawn with its text, and what has no colour (``"none"``) keeps none.

    Examples:
        >>> fig, ax = plt.subplots()
        >>> ax.imshow([[0.0, 1.0]], cmap="viridis").get_cmap().name
        'viridis'
        >>> arrow = {"arrowstyle": "-|>"}
        >>> note = ax.annotate("add", (1, 1), (0, 0), arrowprops=arrow)
        >>> for_dark(fig)
        >>> ax.images[0].get_cmap().name, ax.title.get_color() != "black"
        ('viridis', True)
        >>> from matplotlib.colors import to_hex
        >>> to_hex(note.arrow_patch.get_edgecolor())  # light ink, not black
        '#d5d8df'
        >>> plt.close(fig)
    """
    on_images = {id(t) for ax in figure.axes for t in ax.texts if _over_an_image(t, ax)}
    for artist in figure.findobj():
        mapped = isinstance(artist, Collection) and artist.get_array() is not None
        if isinstance(artist, AxesImage) or mapped:
            continue
        if isinstance(artist, Text):
            if isinstance(artist, Annotation) and artist.arrow_patch is not None:
                _redraw_patch(artist.arrow_patch)  # not among the figure's children
            if id(artist) in on_images:
                continue
            artist.set_color(dark_colour(artist.get_color(), "text"))
            box = artist.get_bbox_patch()
            if box is not None:
                _redraw_patch(box)
        elif isinstance(artist, Line2D):
            alpha = artist.get_alpha()
            artist.set_color(_redrawn(artist.get_color(), alpha=alpha))
            for get, put in (
                (artist.get_markerfacecolor, artist.set_markerfacecolor),
                (artist.get_markeredgecolor, artist.set_markeredgecolor),
            ):
                colour = get()
                if not (isinstance(colour, str) and colour in ("none", "auto")):
                    put(_redrawn(colour, alpha=alpha))
        elif isinstance(artist, Patch):
            _redraw_patch(artist)
        elif isinstance(artist, Collection):
            faces, edges = artist.get_facecolor(), artist.get_edgecolor()  # the artist's alpha applied
            if len(faces):
                artist.set_facecolor([_redrawn(c, "fill") for c in faces])
            if len(edges):
                artist.set_edgecolor([_redrawn(c) for c in edges])
