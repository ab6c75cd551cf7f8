"""What a snippet's diagrams draw (attn_ref.diagrams): each grid of coloured cells, read back from
the figure, and the fixtures that run the snippet and read its grids."""

from __future__ import annotations

import runpy
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pytest

from tests.support.snippets import snippet_for


@dataclass(frozen=True)
class Cells:
    """One grid of a picture (`attn_ref.diagrams.grid`): the values its colours encode, the number
    written in each cell ("" where none), its colour map and the values at the map's two ends."""

    values: np.ndarray
    texts: np.ndarray
    cmap: str
    clim: tuple[float, float]

    def numbers(self) -> np.ndarray:
        """The numbers written in the cells, as float64 (every cell must hold one)."""
        assert (self.texts != "").all(), f"cells without a number: {self.texts}"
        return self.texts.astype(np.float64)


def _cells(ax, image) -> Cells:
    values = np.ma.filled(np.ma.asarray(image.get_array(), dtype=np.float64), np.nan)
    rows, columns = values.shape
    left, right, bottom, top = image.get_extent()  # y grows downwards: bottom > top
    texts = np.full(values.shape, "", dtype=object)
    for text in ax.texts:
        x, y = text.get_position()
        if left < x < right and top < y < bottom:
            row = int((y - top) / (bottom - top) * rows)
            column = int((x - left) / (right - left) * columns)
            assert texts[row, column] == "", f"two numbers in cell {(row, column)}"
            texts[row, column] = text.get_text()
    return Cells(values, texts, image.get_cmap().name, image.get_clim())


@pytest.fixture(scope="module")
def pictures(request: pytest.FixtureRequest) -> Iterator[dict]:
    """The variables of this module's snippet, run in this process (figures are not printed);
    its figures closed afterwards."""
    namespace = runpy.run_path(str(snippet_for(request.path)))
    yield namespace
    plt.close("all")


@pytest.fixture(scope="module")
def grids(pictures) -> Callable[[str], list[Cells]]:
    """``grids(name)``: every grid the snippet's figure ``name`` draws, in the order it draws them."""

    def read(name: str = "fig") -> list[Cells]:
        (ax,) = pictures[name].axes
        return [_cells(ax, image) for image in ax.images]

    return read
