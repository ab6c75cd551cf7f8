"""Pictures of the ideas, drawn from the numbers they show: matrices as grids of coloured cells,
vectors as strips of cells, and arrows and words between them.

A diagram is drawn on a `canvas` measured in cells, with y growing downwards, as a page is read.
`grid` draws a matrix whose cells are coloured by a colour map (signed values: blue below zero,
red above; attention weights: viridis, dark purple for 0 and yellow for 1), optionally with each
value written in its cell and masked cells hatched; it returns the `Box` it filled, whose edges
place the next piece. `arrow` and `note` connect and name the pieces. The cells are drawn through a
colour map, so `attn_ref.plotting.figure_to_svg` keeps their colours in the dark drawing and
redraws the ink around them. `outline` draws a frame around a part of a picture (a tile, a row),
and `tile_order` the tiles of a tiled computation, each numbered by the step that computed it.

It ships in the wheel because the tutorials' downloaded notebooks import it to draw their figures.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, Rectangle
from numpy.typing import ArrayLike

__all__ = ["Box", "arrow", "canvas", "grid", "note", "outline", "tile_order"]

SIGNED = "RdBu_r"  # blue below zero, white at zero, red above
WEIGHTS = "viridis"  # the site's colour map for attention weights
EDGE = "0.35"  # the lines between cells: a grey, redrawn for the dark page
MASKED = "0.85"
ORDER = "Blues"  # tiles numbered by the step that computed them: pale first, deeper later


@dataclass(frozen=True)
class Box:
    """The rectangle a piece of a diagram fills, in the canvas's cells (y downwards)."""

    x: float
    y: float
    width: float
    height: float

    @property
    def left(self) -> tuple[float, float]:
        return (self.x, self.y + self.height / 2)

    @property
    def right(self) -> tuple[float, float]:
        return (self.x + self.width, self.y + self.height / 2)

    @property
    def top(self) -> tuple[float, float]:
        return (self.x + self.width / 2, self.y)

    @property
    def bottom(self) -> tuple[float, float]:
        return (self.x + self.width / 2, self.y + self.height)

    @property
    def center(self) -> tuple[float, float]:
        return (self.x + self.width / 2, self.y + self.height / 2)


def canvas(width: float, height: float, scale: float = 0.45) -> tuple[Figure, Axes]:
    """A figure for a diagram ``width`` cells wide and ``height`` cells high.

    Args:
        width: Cells across.
        height: Cells down.
        scale: Inches per cell. The default draws a cell about 43 px wide on a page; a
            diagram of 10 cells or fewer across fits a phone's column at three quarters of
            its size or more (the site's smallest, for legible text).

    Returns:
        The figure and its axes, which span (0, 0) at the top left to (``width``, ``height``),
        with no axes drawn.

    Examples:
        >>> fig, ax = canvas(6, 3)
        >>> [float(v) for v in (*ax.get_xlim(), *ax.get_ylim())]  # y grows downwards
        [0.0, 6.0, 3.0, 0.0]
        >>> plt.close(fig)
    """
    if width <= 0 or height <= 0:
        raise ValueError(f"width and height must be positive, got {width} and {height}")
    fig = plt.figure(figsize=(width * scale, height * scale))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig, ax


def grid(
    ax: Axes,
    values: ArrayLike,
    x: float,
    y: float,
    *,
    cmap: str = SIGNED,
    vmin: float | None = None,
    vmax: float | None = None,
    decimals: int | None = None,
    mask: ArrayLike | None = None,
    label: str | None = None,
    cell: float = 1.0,
    labels: ArrayLike | None = None,
    row_names: Sequence[str] | None = None,
    column_names: Sequence[str] | None = None,
) -> Box:
    """Draw a matrix (or a vector, as one row) as a grid of coloured cells, top left at (x, y).

    Args:
        ax: A `canvas`'s axes.
        values: ``(rows, columns)`` values, or ``(columns,)`` for one row.
        x: Left edge, in cells.
        y: Top edge, in cells.
        cmap: The colour map: ``"RdBu_r"`` (the default) for signed values, ``"viridis"`` for
            attention weights.
        vmin: The value drawn in the map's first colour; by default ``-vmax`` for the signed map
            and 0 for the others.
        vmax: The value drawn in its last colour; by default the largest magnitude (signed map)
            or 1.
        decimals: Write each value in its cell with this many decimals (``None``: no numbers).
            Each number is black or white, whichever stands out from its cell's colour.
        mask: ``(rows, columns)`` booleans (``(columns,)`` for one row), ``False`` where the
            cell is masked: drawn hatched in grey, with no colour and no number.
        label: A name written above the grid.
        cell: The side of one cell, in canvas cells.
        labels: ``(rows, columns)`` words to write in the cells instead of their values, such as
            the ids of blocks coloured by their owner (``""``: nothing); masked cells get none.
            Each word is black or white, whichever stands out from its cell's colour.
        row_names: A name for each row, written to the left of the grid (tokens, positions).
        column_names: A name for each column, written above the grid, under its ``label``.

    Returns:
        The `Box` the grid fills.

    Examples:
        >>> fig, ax = canvas(5, 3)
        >>> box = grid(ax, [[1.0, -1.0], [0.5, 0.0]], x=1, y=1, decimals=1, label="A")
        >>> box.right, box.bottom
        ((3.0, 2.0), (2.0, 3.0))
        >>> [t.get_text() for t in ax.texts]
        ['1.0', '-1.0', '0.5', '0.0', 'A']
        >>> causal = [[True, False], [True, True]]
        >>> weights = [[1.0, 0.0], [0.4, 0.6]]
        >>> _ = grid(ax, weights, x=3, y=1, cmap="viridis", mask=causal)
        >>> len([p for p in ax.patches if p.get_hatch()])  # the masked cell
        1

        Categories, each a colour of ``tab10``, with words in their cells:

        >>> owners = [[0.5, 1.5, 0.5]]  # owners 0, 1, 0: colours 0, 1, 0 of ten
        >>> words = [["4", "7", "2"]]
        >>> _ = grid(ax, owners, x=0, y=3, cmap="tab10", vmax=10, labels=words)
        >>> [t.get_text() for t in ax.texts][-3:]
        ['4', '7', '2']
        >>> plt.close(fig)

        Rows and columns named (a query per row, a key per column):

        >>> fig, ax = canvas(5, 4)
        >>> _ = grid(
        ...     ax, weights, x=2, y=2, cmap="viridis",
        ...     row_names=["q0", "q1"], column_names=["k0", "k1"],
        ... )
        >>> [t.get_text() for t in ax.texts]
        ['q0', 'q1', 'k0', 'k1']
        >>> plt.close(fig)
    """
    v = np.asarray(values.detach().cpu() if hasattr(values, "detach") else values, dtype=float)
    if v.ndim == 1:
        v = v[None, :]
    if v.ndim != 2 or v.size == 0:
        raise ValueError(f"values must have shape (rows, columns) or (columns,), got {np.shape(values)}")
    rows, columns = v.shape
    allowed = np.ones_like(v, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    if allowed.ndim == 1:  # the mask of one row, as the values may be
        allowed = allowed[None, :]
    if allowed.shape != v.shape:
        raise ValueError(f"mask has shape {allowed.shape}, expected the values' {v.shape}")
    if cell <= 0:
        raise ValueError(f"cell must be positive, got {cell}")
    if labels is not None:
        if decimals is not None:
            raise ValueError("give decimals (write the values) or labels (write words), not both")
        words = np.asarray(labels, dtype=object)
        if words.size != v.size:
            raise ValueError(f"labels has {words.size} entries, expected one per cell of {v.shape}")
        words = words.reshape(v.shape)
    for name, names, count in (("row_names", row_names, rows), ("column_names", column_names, columns)):
        if names is not None and len(names) != count:
            raise ValueError(f"{name} has {len(names)} names, expected one per {name.split('_')[0]}: {count}")
    signed = cmap == SIGNED
    if vmax is None:
        vmax = float(np.abs(v[allowed]).max()) if signed and allowed.any() else 1.0
        vmax = vmax or 1.0
    if vmin is None:
        vmin = -vmax if signed else 0.0
    width, height = columns * cell, rows * cell
    image = ax.imshow(
        np.ma.masked_where(~allowed, v),
        cmap=cmap,
        norm=Normalize(vmin, vmax),
        extent=(x, x + width, y + height, y),
        interpolation="nearest",
        zorder=1,
    )
    for i, j in zip(*np.nonzero(~allowed), strict=True):
        ax.add_patch(
            Rectangle(
                (x + j * cell, y + i * cell), cell, cell, facecolor=MASKED, edgecolor=EDGE, hatch="///", lw=0
            )
        )
    for k in range(columns + 1):
        ax.plot([x + k * cell] * 2, [y, y + height], color=EDGE, lw=0.6, zorder=2)
    for k in range(rows + 1):
        ax.plot([x, x + width], [y + k * cell] * 2, color=EDGE, lw=0.6, zorder=2)
    if decimals is not None or labels is not None:
        for i, j in zip(*np.nonzero(allowed), strict=True):
            text = f"{v[i, j]:.{decimals}f}" if labels is None else str(words[i, j])
            if not text:
                continue
            r, g, b, _ = image.cmap(image.norm(v[i, j]))
            ink = "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"
            ax.text(
                x + (j + 0.5) * cell,
                y + (i + 0.5) * cell,
                text,
                ha="center",
                va="center",
                color=ink,
                fontsize=10,
                zorder=3,
            )
    for i, name in enumerate(row_names or []):
        ax.text(x - 0.15, y + (i + 0.5) * cell, name, ha="right", va="center", fontsize=10)
    for j, name in enumerate(column_names or []):
        ax.text(x + (j + 0.5) * cell, y - 0.1, name, ha="center", va="bottom", fontsize=10)
    if label:
        above = y - (0.6 if column_names else 0.15)
        ax.text(x + width / 2, above, label, ha="center", va="bottom")
    return Box(x, y, width, height)


def arrow(
    ax: Axes,
    start: Sequence[float],
    end: Sequence[float],
    text: str | None = None,
    bend: float = 0.0,
) -> None:
    """An arrow from ``start`` to ``end`` (canvas cells), with ``text`` beside its middle.

    Args:
        ax: A `canvas`'s axes.
        start: Where the arrow starts, ``(x, y)``.
        end: Where its head points, ``(x, y)``.
        text: A word or two beside it.
        bend: How far it curves: 0 is straight; 0.3 is a gentle arc.

    Examples:
        >>> fig, ax = canvas(4, 2)
        >>> arrow(ax, (0.5, 1), (3.5, 1), text="softmax")
        >>> [t.get_text() for t in ax.texts], len(ax.patches)
        (['softmax'], 1)
        >>> plt.close(fig)
    """
    ax.add_patch(
        FancyArrowPatch(
            tuple(start),
            tuple(end),
            arrowstyle="-|>",
            mutation_scale=12,
            color="black",
            lw=1.0,
            connectionstyle=f"arc3,rad={bend}",
            shrinkA=2,
            shrinkB=2,
        )
    )
    if text:
        mx, my = (start[0] + end[0]) / 2, (start[1] + end[1]) / 2
        ax.text(mx, my - 0.15, text, ha="center", va="bottom", fontsize=11)


def note(ax: Axes, x: float, y: float, text: str, **options) -> None:
    """Words at ``(x, y)`` (canvas cells), centred there unless ``options`` say otherwise.

    Examples:
        >>> fig, ax = canvas(4, 2)
        >>> note(ax, 2, 1, "a query meets the keys", ha="left")
        >>> ax.texts[0].get_text(), ax.texts[0].get_ha()
        ('a query meets the keys', 'left')
        >>> plt.close(fig)
    """
    ax.text(x, y, text, **{"ha": "center", "va": "center", "fontsize": 11, **options})


def outline(ax: Axes, box: Box, *, width: float = 2.0, style: str = "-") -> Box:
    """A frame around ``box`` (a tile of a grid, a row, a whole matrix), drawn over the cells.

    Args:
        ax: A `canvas`'s axes.
        box: What to frame, in canvas cells.
        width: The line's width, in points.
        style: ``"-"`` solid, ``"--"`` dashed.

    Returns:
        ``box``, to place words or arrows beside it.

    Examples:
        >>> fig, ax = canvas(4, 2)
        >>> box = outline(ax, Box(1, 0.5, 2, 1))
        >>> frame = ax.patches[0]
        >>> frame.get_xy(), frame.get_width(), frame.get_fill()
        ((1, 0.5), 2, False)
        >>> plt.close(fig)
    """
    if box.width <= 0 or box.height <= 0:
        raise ValueError(f"box must have a positive width and height, got {box}")
    ax.add_patch(
        Rectangle(
            (box.x, box.y), box.width, box.height, fill=False, edgecolor="black", lw=width, ls=style, zorder=4
        )
    )
    return box


def tile_order(
    ax: Axes,
    steps: Sequence,
    shape: tuple[int, int],
    block_size: tuple[int, int],
    x: float,
    y: float,
    *,
    label: str | None = None,
    cell: float = 1.0,
) -> Box:
    """The tiles of a tiled attention, one cell per tile, numbered in the order they were computed.

    Rows are blocks of queries, columns blocks of keys. A tile no step computed (skipped, as a
    causal mask skips the tiles above the diagonal) is hatched, with no number.

    Args:
        ax: A `canvas`'s axes.
        steps: The computed tiles in order: anything with ``rows`` and ``cols`` ranges, such as
            the trace of `attn_ref.tiled.tiled_attention` or of
            `attn_ref.backward.flash_attention_backward`.
        shape: ``(L, S)``, the queries and keys.
        block_size: ``(block_q, block_k)``, the tile's shape.
        x: Left edge, in cells.
        y: Top edge, in cells.
        label: A name written above the tiles.
        cell: The side of one tile, in canvas cells.

    Returns:
        The `Box` the tiles fill.

    Examples:
        >>> import torch
        >>> from attn_ref.tiled import tiled_attention
        >>> x = torch.zeros(6, 1)  # 6 tokens in blocks of 2: 3 by 3 tiles
        >>> _, state = tiled_attention(
        ...     x, x, x, is_causal=True, block_size=2, trace=True
        ... )
        >>> fig, ax = canvas(4, 4)
        >>> box = tile_order(ax, state.trace, (6, 6), (2, 2), x=0.5, y=0.5)
        >>> [t.get_text() for t in ax.texts]  # row by row, 3 tiles skipped
        ['1', '2', '3', '4', '5', '6']
        >>> plt.close(fig)
    """
    (L, S), (block_q, block_k) = shape, block_size
    if min(L, S, block_q, block_k) <= 0:
        raise ValueError(f"shape and block_size must be positive, got {shape} and {block_size}")
    rows, columns = math.ceil(L / block_q), math.ceil(S / block_k)
    order = np.zeros((rows, columns))
    for number, step in enumerate(steps, start=1):
        i, j = step.rows.start // block_q, step.cols.start // block_k
        if not (0 <= i < rows and 0 <= j < columns):
            raise ValueError(
                f"step {number} starts at query {step.rows.start} and key {step.cols.start}, "
                f"outside the {L} queries and {S} keys of shape"
            )
        order[i, j] = number
    vmax = 2.0 * max(1.0, order.max())  # the last tile mid-blue: its black number stays legible
    return grid(
        ax, order, x, y, cmap=ORDER, vmin=0.0, vmax=vmax, decimals=0, mask=order > 0, label=label, cell=cell
    )
