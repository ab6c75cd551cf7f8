"""Read numbers back from printed text: the one parser every test uses, and the ways the tests
compare what was printed with what they computed.

Pages and tutorials print tensors, NumPy arrays, tables and ``label: value``
lines; a test checks them by reading the numbers back, in order, and comparing
them with a reference computed independently.

Three checks read the printed numbers in order, skipping those between (a label's digits, a row
index), so that a change of wording cannot break a test. They differ in how an expected value
is given and matched, and each is kept as its tests use it: `assert_printed_in_order` takes
`Printed` pairs (`decimals`, `significant`, `exact`), `assert_shows` takes (value, slack) pairs
(`rounded`, `rounded_significant`) and matches nan with nan, and `assert_shown` takes arrays
and their decimals.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np

from tests.support.reference import as64

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


# What a number looks like once printed: (value, how far the printed digits may lie from it).
Printed = tuple[float, float]


def decimals(value: float, n: int, slack: float = 0.0) -> Printed:
    """``value`` printed with ``n`` decimals (``.nf``, ``round(value, n)``, a tensor's 4 decimals)."""
    return float(value), 0.5 * 10.0**-n + slack


def significant(value: float, n: int, slack: float = 0.0) -> Printed:
    """``value`` printed with ``n`` significant digits (``.{n-1}e``, ``.{n}g``)."""
    size = abs(float(value))
    unit = 10.0 ** (np.floor(np.log10(size)) - n + 1) if size > 0 else 0.0
    return float(value), 0.5 * unit + slack


def exact(value: float) -> Printed:
    """A number printed in full: a count, an exact small number, inf."""
    return float(value), 0.0


def assert_printed_in_order(printed: str, expected: Iterable[Printed]) -> None:
    """The numbers ``printed`` shows include the ``expected`` ones, in this order.

    No label is looked up: other printed numbers (a label's ``atol=1e-3``, a row index) are
    skipped, so the page's wording may change; only the order of the values matters.
    """
    shown = numbers(printed)
    remaining = iter(shown)
    for i, (value, tolerance) in enumerate(expected):
        found = any(s == value or abs(s - value) <= tolerance * (1 + 1e-9) for s in remaining)
        assert found, f"expected value #{i}, {value} ± {tolerance}, not printed in order in {shown}"


def printed_flags(printed: str) -> list[bool]:
    """Every ``True`` and ``False`` printed, in order."""
    return [word == "True" for word in re.findall(r"\b(?:True|False)\b", printed)]


def allclose_decided(a, b, atol: float = 1e-8, rtol: float = 1e-5) -> bool | None:
    """The outcome of ``torch.allclose(a, b, atol=atol)`` where it is far from the edge of its
    tolerance (every entry within a quarter of it, or some entry beyond four times it); else None.
    What a printed allclose verdict must be, or None where either verdict may be printed."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    ratio = np.abs(a - b) / (atol + rtol * np.abs(b))
    if (ratio < 0.25).all():
        return True
    if (ratio > 4).any():
        return False
    return None


def within_allclose(error: np.ndarray, reference: np.ndarray) -> bool:
    """Whether two results that may each lie ``error`` from ``reference`` pass allclose(atol=1e-6)
    wherever their rounding falls."""
    return bool((2 * error < 1e-6 + 1e-5 * (np.abs(reference) - error)).all())


def assert_shows(printed: str, expected: Iterable[tuple[float, float]]) -> None:
    """The printed numbers include ``expected``, in order: pairs (value, how far its print may be).

    Numbers printed in labels between them are skipped, so a change of wording cannot break this.
    """
    shown = iter(numbers(printed))
    for value, slack in expected:
        assert any(
            (np.isnan(n) and np.isnan(value)) or n == value or abs(n - value) <= slack for n in shown
        ), f"{value} (within {slack}) is not printed in order:\n{printed}"


def rounded(values, decimals: int) -> list[tuple[float, float]]:
    """What ``round(decimals)`` prints: each value within half a unit of the last digit (and a
    thousandth of that more, for a value summed again in float64 by the test)."""
    return [(float(v), 0.5005 * 10.0**-decimals) for v in np.ravel(np.asarray(values, dtype=np.float64))]


def rounded_significant(values, digits: int) -> list[tuple[float, float]]:
    """What ``:.{digits - 1}e`` or ``:.{digits}g`` prints: each value to ``digits`` significant
    digits, allowed half a unit of the last digit of its mantissa, relative to the value."""
    return [
        (float(v), 0.5 * 10.0 ** (1 - digits) * abs(float(v)) * 1.0001 if np.isfinite(v) else 0.0)
        for v in np.ravel(values)
    ]


def assert_shown(printed: str, *values, decimals: int | list[int] = 4) -> None:
    """The numbers of ``values``, flattened and in this order, appear among the printed numbers in
    the same order (labels may put other numbers between them), each to ``decimals`` places, or
    to ``decimals`` places of its mantissa where it was printed in scientific notation.
    ``decimals`` is one count for all values, or one per value."""
    flat = [np.ravel(as64(value)) for value in values]
    places = [decimals] * len(flat) if isinstance(decimals, int) else decimals
    expected = np.concatenate(flat)
    halves = np.concatenate(
        [np.full(x.size, 0.5 * 10.0**-place * (1 + 1e-6)) for x, place in zip(flat, places, strict=True)]
    )
    shown = numbers(printed)
    at = 0
    for i, (number, half) in enumerate(zip(expected, halves, strict=True)):
        while at < shown.size and not np.isclose(shown[at], number, rtol=half, atol=half, equal_nan=True):
            at += 1
        assert at < shown.size, (
            f"printed numbers {shown.tolist()} do not show {expected[i:].tolist()} in order"
        )
        at += 1
