"""Read numbers back from printed text: the one parser every test uses.

Pages and tutorials print tensors, NumPy arrays, tables and ``label: value``
lines; a test checks them by reading the numbers back, in order, and comparing
them with a reference computed independently.
"""

from __future__ import annotations

import re

import numpy as np

# Integers, decimals, scientific notation, inf and nan; not the digits inside a name
# such as float32, x_1 or W2.
NUMBER = re.compile(r"(?<![\w.])[-+]?(?:(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|inf|nan)(?![\w.])")


def numbers(text: str) -> np.ndarray:
    """Every number in ``text``, in order, as float64."""
    return np.array([float(n) for n in NUMBER.findall(text)], dtype=np.float64)


def line_starting(text: str, prefix: str) -> str:
    """The one printed line that starts with ``prefix``."""
    found = [line for line in text.splitlines() if line.startswith(prefix)]
    assert len(found) == 1, f"expected one line starting with {prefix!r}, found {found}"
    return found[0]


def line_after(text: str, label: str) -> str:
    """The rest of the one line that starts with ``label``."""
    return line_starting(text, label)[len(label) :]


def number_after(text: str, label: str) -> float:
    """The first number on the one line that starts with ``label``."""
    found = numbers(line_after(text, label))
    assert found.size, f"no number after {label!r}"
    return float(found[0])


def flag(text: str, label: str) -> bool:
    """A printed ``label True`` or ``label False``."""
    value = line_after(text, label).strip()
    assert value in {"True", "False"}, f"{label!r} is followed by {value!r}, not True or False"
    return value == "True"


# A line of a printed matrix, tensor or array (a label line starts with a word).
MATRIX_LINE = re.compile(r"\s*(?:\[|tensor\(|array\(|[-+.\d]|nan|inf)")


def block_after(text: str, label: str, rows: int | None = None) -> np.ndarray:
    """The numbers printed under the one line ``label``.

    With ``rows``, exactly that many lines are read, one row of the result per line.
    Without, every following line of a printed matrix is read (up to the next label),
    and the numbers come back flat, however the printer wrapped them.
    """
    lines = text.splitlines()
    assert lines.count(label) == 1, f"expected one line {label!r}, found {lines.count(label)}"
    following = lines[lines.index(label) + 1 :]
    if rows is None:
        count = next((i for i, line in enumerate(following) if not MATRIX_LINE.match(line)), len(following))
        flat = numbers("\n".join(following[:count]))
        assert flat.size, f"nothing printed under {label!r}"
        return flat
    block = [numbers(line) for line in following[:rows]]
    assert len(block) == rows and all(row.size == block[0].size > 0 for row in block), (
        f"no {rows}-line matrix under {label!r}"
    )
    return np.array(block)


def list_after(text: str, label: str) -> list[bool | float]:
    """The Python list printed after ``label`` on its one line, such as ``[1.0, True, -inf]``.

    ``True`` and ``False`` stay bools; every other item is read as a float.
    """
    printed = line_after(text, label).strip()
    assert printed.startswith("[") and printed.endswith("]"), (
        f"{label!r} is followed by {printed!r}, not a list"
    )
    items = [item.strip() for item in printed[1:-1].split(",") if item.strip()]
    return [item == "True" if item in {"True", "False"} else float(item) for item in items]


def table_rows(text: str) -> list[list[str]]:
    """The body of the one Markdown table printed in ``text``: each row's cells, stripped.

    The header row and the ``|---|`` line under it are left out; an empty cell is ``""``.
    """
    lines = [line for line in text.splitlines() if line.startswith("|") and line.endswith("|")]
    rules = [line for line in lines if set(line) <= set("|-: ")]
    assert len(rules) == 1 and lines.index(rules[0]) == 1, f"expected one Markdown table, found {lines[:2]}"
    return [[cell.strip() for cell in line[1:-1].split("|")] for line in lines[2:]]
