"""Attention heatmaps, drawn the same way on every page.

It serves the site's pages, and ships in the wheel because the tutorials' downloaded
notebooks import it to draw their figures.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from numpy.typing import ArrayLike

__all__ = ["InlineSVG", "attention_heatmap", "figure_to_svg"]


class InlineSVG(str):
    """SVG markup that a notebook displays as the figure itself (and ``print`` writes out)."""

    def _repr_html_(self) -> str:
        return str(self)


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


def figure_to_svg(figure: Figure, alt: str) -> InlineSVG:
    """Render ``figure`` as an inline SVG with a text alternative, and close it.

    Args:
        figure: The figure to render.
        alt: What the figure shows, for readers who cannot see it.

    Returns:
        SVG markup carrying ``role="img"`` and ``aria-label=alt``. Printed on
        a Markdown page it is the plot; as a notebook cell's last expression,
        the notebook shows it as the plot.

    Examples:
        >>> fig, _ = plt.subplots()
        >>> svg = figure_to_svg(fig, alt="an empty plot")
        >>> svg.startswith('<svg role="img" aria-label="an empty plot"')
        True
    """
    if not alt.strip():
        raise ValueError("alt must describe the figure")
    buffer = io.StringIO()
    # Stable element ids (identical builds); text as text, not glyph outlines (a fifth of the bytes).
    with plt.rc_context({"svg.hashsalt": "attn_ref", "svg.fonttype": "none"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None}, bbox_inches="tight")
    plt.close(figure)
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg") :]  # drop the XML prologue and doctype
    escaped = alt.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
    return InlineSVG(svg.replace("<svg", f'<svg role="img" aria-label="{escaped}"', 1))
