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


def line_after(text: str, label: str) -> str:
    """The rest of the one line that starts with ``label``."""
    found = [line for line in text.splitlines() if line.startswith(label)]
    assert len(found) == 1, f"expected one line starting with {label!r}, found {found}"
    return found[0][len(label) :]


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


def block_after(text: str, label: str, rows: int | None = None) -> np.ndarray:
    """The numbers printed on the lines under the one line ``label``, one row per line.

    With ``rows``, exactly that many lines are read; without, every following line
    that holds numbers, up to the first that holds none.
    """
    lines = text.splitlines()
    assert lines.count(label) == 1, f"expected one line {label!r}, found {lines.count(label)}"
    following = lines[lines.index(label) + 1 :]
    if rows is None:
        rows = next((i for i, line in enumerate(following) if not numbers(line).size), len(following))
    block = [numbers(line) for line in following[:rows]]
    assert block and all(row.size == block[0].size for row in block), f"no matrix under {label!r}"
    return np.array(block)
