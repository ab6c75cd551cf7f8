"""Attention heatmaps, drawn the same way on every page."""

from __future__ import annotations

import io
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
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
) -> Axes:
    """Draw an ``(L, S)`` attention-weight matrix, one row per query.

    Each cell is also written as a number (for up to 12 keys by default),
    so that the figure does not rely on colour alone.

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

    Returns:
        The axes drawn on.

    Examples:
        >>> ax = attention_heatmap([[0.9, 0.1], [0.3, 0.7]], query_labels=["a", "b"])
        >>> [t.get_text() for t in ax.texts]
        ['0.90', '0.10', '0.30', '0.70']
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
    fontsize = 8  # numbers in cells drawn on the caller's axes, whose size the caller chose
    if ax is None:  # cells just wide enough for their numbers, so a phone shrinks the figure less
        cell, fontsize = 0.42, 10
        size = min(1.0 + cell * S, 7.0)
        _, ax = plt.subplots(figsize=(size + 1.2, min(0.8 + cell * L, 7.0)), layout="constrained")
    vmax = float(w.max()) if vmax is None else vmax
    image = ax.imshow(w, cmap="viridis", vmin=0.0, vmax=max(1e-12, vmax))
    ax.figure.colorbar(image, ax=ax, shrink=0.8, label="attention weight")
    ax.set_xticks(range(S), key_labels)
    ax.set_yticks(range(L), query_labels)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    if title:
        ax.set_title(title)
    if annotate if annotate is not None else S <= 12:
        threshold = 0.6 * vmax
        for i in range(L):
            for j in range(S):
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
