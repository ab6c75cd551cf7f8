"""A tutorial as the build executed it, and what it showed its reader, read without its labels.

A test checks what a tutorial computed from its kernel's variables (the ``values`` fixture)
against its own reference. Checking that the page *shows* those values is a second, optional
step, and it must not depend on the page's wording: the helpers here read the numbers (or the
``True``/``False`` verdicts) that each code cell printed, in order, ignoring every word around
them, and look for the expected values among them at the printed precision.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import nbformat
import numpy as np

from tests.support.drawings import texts
from tests.support.printed import numbers

# A comma between groups of three digits, as in 131,072: a thousands separator, not a list.
THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
# A bool as Python, NumPy or PyTorch print it: alone, or in a list, array or tensor; not the
# ``True`` of a keyword argument quoted in a label, such as ``need_weights=True:``.
# A unit written right after a number, as in 16.1x or 30ms: the number ends before it.
UNIT = re.compile(r"(?<=\d)(?=[A-Za-z]+(?:\s|$))", re.MULTILINE)
VERDICT = re.compile(r"(?:^|(?<=[\s\[(,]))(True|False)(?=$|[\s\]),])", re.MULTILINE)


@dataclass(frozen=True)
class ExecutedTutorial:
    """A tutorial as the build executed it: the notebook readers download, and the kernel's
    variables after its last cell."""

    notebook: nbformat.NotebookNode
    values: dict[str, Any]

    @property
    def code_cells(self) -> list[nbformat.NotebookNode]:
        return [cell for cell in self.notebook.cells if cell.cell_type == "code"]

    def printed(self, stream: str = "stdout") -> str:
        """Everything the cells printed on ``stream``, in order."""
        return "".join(
            output.text
            for cell in self.code_cells
            for output in cell.outputs
            if output.output_type == "stream" and output.name == stream
        )

    def result_of(self, last_line: str) -> dict:
        """The displayed result (mime type -> data) of the one cell whose last line is ``last_line``."""
        cells = [cell for cell in self.code_cells if cell.source.strip().splitlines()[-1] == last_line]
        assert len(cells) == 1, f"expected one cell ending with {last_line!r}, found {len(cells)}"
        (result,) = [output for output in cells[0].outputs if output.output_type == "execute_result"]
        return result.data


def printed_by_cell(tutorial: ExecutedTutorial, stream: str = "stdout") -> list[str]:
    """What each code cell printed on ``stream``, one string per cell."""
    return [
        "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == stream)
        for cell in tutorial.code_cells
    ]


def displayed(tutorial: ExecutedTutorial, mime: str) -> list[str]:
    """Every result or display of type ``mime`` (``text/plain``, ``text/html``...), in order."""
    return [
        o.data[mime]
        for cell in tutorial.code_cells
        for o in cell.outputs
        if o.output_type in {"execute_result", "display_data"} and mime in o.data
    ]


def drawn(tutorial: ExecutedTutorial) -> list[str]:
    """What each figure drew as text, one string per figure, in drawing order (a diagram's cells
    row by row, then its labels): pass them as ``texts`` to `assert_printed` to check the numbers a
    picture shows, as printed numbers are checked. Math (drawn in pieces) is left out."""
    return ["\n".join(texts(svg)) for svg in displayed(tutorial, "image/svg+xml")]


def numbers_of(text: str) -> np.ndarray:
    """Every number in ``text``, thousands separators removed and units split off."""
    return numbers(UNIT.sub(" ", THOUSANDS.sub("", text)))


def verdicts(tutorial: ExecutedTutorial) -> list[bool]:
    """Every ``True`` or ``False`` the tutorial printed, in order (labels ignored)."""
    return [word == "True" for text in printed_by_cell(tutorial) for word in VERDICT.findall(text)]


def _matches(shown: np.ndarray, expected: np.ndarray, atol: np.ndarray, rtol: np.ndarray) -> np.ndarray:
    """Elementwise: ``shown`` is ``expected`` at the given tolerance (nan matches nan, inf inf)."""
    with np.errstate(invalid="ignore"):
        close = np.abs(shown - expected) <= atol + rtol * np.abs(expected)
    return close | (np.isnan(shown) & np.isnan(expected)) | (shown == expected)


def _found(cell: np.ndarray, expected: np.ndarray, atol: np.ndarray, rtol: np.ndarray, gaps: bool) -> bool:
    n = expected.size
    if not gaps:
        return any(
            _matches(cell[start : start + n], expected, atol, rtol).all()
            for start in range(cell.size - n + 1)
        )
    at = 0  # in order, other numbers allowed in between: the earliest match of each is the best
    for shown in cell:
        if (
            at < n
            and _matches(np.array([shown]), expected[at : at + 1], atol[at : at + 1], rtol[at : at + 1])[0]
        ):
            at += 1
    return at == n


def assert_printed(
    tutorial: ExecutedTutorial,
    expected,
    *,
    atol=0.0,
    rtol=0.0,
    gaps: bool = False,
    texts: list[str] | None = None,
) -> None:
    """Some code cell printed the numbers ``expected`` (flattened), in this order.

    Without ``gaps`` they are printed one after another, as a matrix or a row of a table is;
    with ``gaps``, other numbers (digits of a label, a shape) may come in between. ``atol`` and
    ``rtol`` are the printed precision, a scalar or one per expected number. ``texts`` replaces
    the cells' printed text, for example with ``displayed(tutorial, "text/plain")``.
    """
    expected = np.asarray(expected, dtype=np.float64)
    atol, rtol = (
        np.broadcast_to(np.asarray(t, dtype=np.float64), expected.shape).ravel() for t in (atol, rtol)
    )
    expected = expected.ravel()
    cells = [numbers_of(text) for text in (printed_by_cell(tutorial) if texts is None else texts)]
    assert any(_found(cell, expected, atol, rtol, gaps) for cell in cells), (
        f"no cell printed {expected.tolist()} (atol {atol.max():g}, rtol {rtol.max():g}, gaps {gaps})"
    )


def half_unit(decimals: int) -> float:
    """What printing with ``decimals`` decimals may round away, and a float32 hair more."""
    return 0.5 * 10.0**-decimals + 1e-6


def sci_rtol(digits: int) -> float:
    """Relative rounding of a number printed with ``digits`` digits after the point of ``.e``."""
    return 0.5 * 10.0**-digits * 1.0001
