"""A figure's SVG as matplotlib writes it (``svg.fonttype: path``), read back as what it paints:
its ink (strokes, markers, the glyphs and rules of its text) and what each mark is painted over
(the page, a filled shape, a colour-mapped image), in painting order.

`contrast_failures` is WCAG 1.4.11's check of a drawing: every mark stands out from what it is
painted over by 3:1 at least. `font_requests` finds any font the drawing would ask the reader's
machine for (text left as text), `texts` what its texts say and `text_sizes` each text's size.
"""

from __future__ import annotations

import base64
import html
import io
import re
from dataclasses import dataclass, field
from functools import cached_property
from xml.etree import ElementTree

import numpy as np
from matplotlib.colors import to_rgba
from PIL import Image

from tests.support.colours import contrast

SVG = "{http://www.w3.org/2000/svg}"
HREF = "{http://www.w3.org/1999/xlink}href"
FONT_SCALE = 100  # matplotlib draws a glyph of size s at scale(s / 100) (matplotlib.textpath)
MINIMUM_CONTRAST = 3.0  # WCAG 2.1, 1.4.11: graphical objects and their parts


def _matrix(transform: str | None) -> np.ndarray:
    """An SVG ``transform`` attribute as a 3 x 3 matrix."""
    matrix = np.eye(3)
    for name, arguments in re.findall(r"(\w+)\(([^)]*)\)", transform or ""):
        a = [float(v) for v in re.split(r"[\s,]+", arguments.strip())]
        if name == "translate":
            step = [[1, 0, a[0]], [0, 1, a[1] if len(a) > 1 else 0], [0, 0, 1]]
        elif name == "scale":
            step = [[a[0], 0, 0], [0, a[1] if len(a) > 1 else a[0], 0], [0, 0, 1]]
        elif name == "rotate":
            c, s = np.cos(np.radians(a[0])), np.sin(np.radians(a[0]))
            cx, cy = (a[1], a[2]) if len(a) == 3 else (0, 0)
            step = [[c, -s, cx - c * cx + s * cy], [s, c, cy - s * cx - c * cy], [0, 0, 1]]
        elif name == "matrix":
            step = [[a[0], a[2], a[4]], [a[1], a[3], a[5]], [0, 0, 1]]
        else:
            raise ValueError(f"transform {name}() is not read here")
        matrix = matrix @ np.array(step)
    return matrix


def _points(d: str) -> np.ndarray:
    """The end points of a path's segments (matplotlib writes absolute M, L, Q, C and z)."""
    commands = re.findall(r"([MLQCZz])([^MLQCZz]*)", d)
    unknown = set(re.findall(r"[A-Za-z]", d)) - set("MLQCZz")
    if unknown:
        raise ValueError(f"path commands {sorted(unknown)} are not read here")
    ends = []
    for _, numbers in commands:
        values = [float(v) for v in numbers.split()]
        if values:
            ends.append(values[-2:])
    return np.array(ends, dtype=float).reshape(-1, 2)


def _style(element: ElementTree.Element) -> dict[str, str]:
    style = dict(item.split(":", 1) for item in (element.get("style") or "").split(";") if ":" in item)
    return {k.strip(): v.strip() for k, v in style.items()}


def _paint(value: str | None, opacity: str | None) -> tuple[float, ...] | None:
    """An SVG paint as RGBA, or None for none (and for a pattern, such as hatching)."""
    if value is None or value == "none" or value.startswith("url("):
        return None
    r, g, b, a = to_rgba(value)
    alpha = a * float(opacity if opacity is not None else 1)
    return (r, g, b, alpha) if alpha > 0 else None


@dataclass(frozen=True)
class Ink:
    """A mark of the drawing: what it is (``text "0.25"``, ``line2d_3``), its colour, where it lies."""

    what: str
    colour: tuple[float, ...]
    points: np.ndarray = field(repr=False)
    artist: str = ""  # the group of the artist that drew it (its arrowhead is not under its line)


@dataclass(frozen=True)
class _Below:
    """Something a mark may be painted over: a filled shape's box, or an image and its pixels."""

    box: tuple[float, float, float, float]  # left, top, right, bottom
    artist: str = ""
    colour: tuple[float, ...] | None = None
    image: np.ndarray | None = None  # RGBA in [0, 1], row 0 at the top of the box
    to_pixel: np.ndarray | None = None  # page point to (column, row) of the image

    def colour_at(self, x: float, y: float) -> tuple[float, ...] | None:
        left, top, right, bottom = self.box
        inside = 1e-6  # on the edge is outside: a frame drawn around a box is on the page
        if not (left + inside < x < right - inside and top + inside < y < bottom - inside):
            return None
        if self.image is None:
            return self.colour
        column, row, _ = self.to_pixel @ (x, y, 1)
        height, width = self.image.shape[:2]
        pixel = self.image[min(max(int(row), 0), height - 1), min(max(int(column), 0), width - 1)]
        return tuple(pixel) if pixel[3] > 0 else None


class Drawing:
    """One SVG drawing, read: its marks and what lies under them, in painting order."""

    def __init__(self, svg: str):
        self.svg = svg
        self.root = ElementTree.fromstring(svg)
        self.glyph_centres = {
            element.get("id"): self._centre(element)
            for element in self.root.iter(f"{SVG}path")
            if element.get("id") and element.get("d")
        }
        self.closed = {e.get("id") for e in self.root.iter(f"{SVG}path") if "z" in (e.get("d") or "").lower()}
        self.painted: list[Ink | _Below] = []
        self.sizes: list[tuple[str, float, bool]] = []  # text, size in pt, whether a tick label
        self.said: dict[str, str] = {}  # each text's group: what it says (matplotlib's comment)
        self._walk(self.root, np.eye(3), {"fill": "#000000"}, context=[])

    @staticmethod
    def _centre(element: ElementTree.Element) -> np.ndarray:
        points = _points(element.get("d"))
        local = _matrix(element.get("transform"))
        ends = (local @ np.c_[points, np.ones(len(points))].T).T[:, :2] if len(points) else points
        return (ends.min(axis=0) + ends.max(axis=0)) / 2 if len(ends) else np.zeros(2)

    def _walk(self, element, matrix, inherited, context):
        tag = element.tag.removeprefix(SVG)
        if tag in ("defs", "metadata", "clipPath", "pattern", "style"):
            return
        matrix = matrix @ _matrix(element.get("transform"))
        style = {**inherited, **_style(element)}
        gid = element.get("id") or ""
        if tag == "g" and gid:
            context = [*context, gid]
        text = next((c for c in reversed(context) if c.startswith("text_")), None)
        if tag == "g" and gid.startswith("text_"):
            comment = re.search(rf'<g id="{gid}">\s*<!-- (.*?) -->', self.svg, re.S)
            said = (
                comment[1].replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&") if comment else ""
            )
            glyphs = next((g for g in element.iter(f"{SVG}g") if g is not element), None)
            scale = (
                np.sqrt(abs(np.linalg.det(_matrix(glyphs.get("transform"))[:2, :2])))
                if glyphs is not None
                else 0
            )
            self.sizes.append(
                (said, scale * FONT_SCALE, any(c.startswith(("xtick_", "ytick_")) for c in context))
            )
            self.said[gid] = said
        label = f'text "{self.said[text]}"' if text else (context[-1] if context else tag)
        artist = context[-1] if context else ""
        if tag == "path" and element.get("d"):
            points = self._placed(matrix, _points(element.get("d")))
            fill = _paint(style.get("fill"), style.get("fill-opacity"))
            stroke = _paint(style.get("stroke"), style.get("stroke-opacity"))
            width = float(style.get("stroke-width", 1))
            if fill is not None and len(points):
                if text:  # a rule of math (a fraction's bar, a root's bar): part of the text
                    self.painted.append(Ink(label, fill, points, artist))
                else:
                    self.painted.append(
                        _Below((*points.min(axis=0), *points.max(axis=0)), artist, colour=fill)
                    )
            if stroke is not None and width > 0 and len(points):
                self.painted.append(Ink(label, stroke, points, artist))
        elif tag == "use":
            reference = element.get(HREF, "").removeprefix("#")
            place = matrix @ _matrix(f"translate({element.get('x', 0)} {element.get('y', 0)})")
            if element.get("style") is None and reference in self.glyph_centres:  # a glyph of a text
                colour = _paint(style.get("fill"), style.get("fill-opacity"))
                if colour is not None:
                    self.painted.append(
                        Ink(label, colour, self._placed(place, self.glyph_centres[reference][None]), artist)
                    )
            else:  # a marker: its own stroke, and its fill if it has an inside (a tick has none)
                closed = reference in self.closed
                for paint, opacity in (("fill", "fill-opacity"), ("stroke", "stroke-opacity")):
                    if paint == "fill" and not closed:
                        continue
                    colour = _paint(style.get(paint), style.get(opacity))
                    if colour is not None:
                        self.painted.append(Ink(label, colour, self._placed(place, np.zeros((1, 2))), artist))
        elif tag == "image":
            self.painted.append(self._image(element, matrix))
        for child in element:
            self._walk(child, matrix, {k: v for k, v in style.items() if k != "opacity"}, context)

    @staticmethod
    def _placed(matrix: np.ndarray, points: np.ndarray) -> np.ndarray:
        if not len(points):
            return points
        return (matrix @ np.c_[points, np.ones(len(points))].T).T[:, :2]

    @staticmethod
    def _image(element, matrix) -> _Below:
        data = element.get(HREF).split("base64,", 1)[1]
        pixels = np.asarray(Image.open(io.BytesIO(base64.b64decode(data))).convert("RGBA"), dtype=float) / 255
        x, y = float(element.get("x", 0)), float(element.get("y", 0))
        width, height = float(element.get("width")), float(element.get("height"))
        corners = Drawing._placed(matrix, np.array([[x, y], [x + width, y + height]]))
        rows, columns = pixels.shape[:2]
        # page -> image's own space -> pixel (column, row)
        to_pixel = np.array(
            [[columns / width, 0, -x * columns / width], [0, rows / height, -y * rows / height], [0, 0, 1]]
        )
        to_pixel = to_pixel @ np.linalg.inv(matrix)
        return _Below((*corners.min(axis=0), *corners.max(axis=0)), image=pixels, to_pixel=to_pixel)

    @cached_property
    def inks(self) -> list[tuple[int, Ink]]:
        return [(order, mark) for order, mark in enumerate(self.painted) if isinstance(mark, Ink)]

    def below(self, x: float, y: float, order: int, page: tuple[float, ...]) -> tuple[float, ...]:
        """The colour painted at ``(x, y)`` before mark ``order``: the page, then each shape and image."""
        colour = np.array(page[:3], dtype=float)
        artist = self.painted[order].artist
        for under in self.painted[:order]:
            if isinstance(under, _Below) and not (artist and under.artist == artist):
                found = under.colour_at(x, y)
                if found is not None:
                    colour = found[3] * np.array(found[:3]) + (1 - found[3]) * colour
        return tuple(colour)


@dataclass(frozen=True)
class OnThePage:
    """A mark where it lies on the page itself (not on a shape or an image of the figure)."""

    what: str
    colour: str  # as seen, "#rrggbb"
    contrast: float | None  # with the page, the least over its points there; None: no point there


def on_the_page(svg: str, page: str) -> list[OnThePage]:
    """Every mark of the drawing ``svg``, in painting order, with its contrast against the page of
    colour ``page`` where it is drawn on the page: a line at its end points, a text at each glyph.
    Where it lies on a box, a bar or a heatmap's cells it stands out from those, not from the page."""
    drawing = Drawing(svg)
    paper = to_rgba(page)[:3]
    marks = []
    for order, mark in drawing.inks:
        worst, colour = None, mark.colour
        for x, y in mark.points:
            under = drawing.below(x, y, order, paper)
            if max(abs(u - p) for u, p in zip(under, paper, strict=True)) > 0.5 / 255:
                continue
            alpha = mark.colour[3]
            seen = tuple(alpha * c + (1 - alpha) * u for c, u in zip(mark.colour[:3], under, strict=True))
            ratio = contrast(seen, under)
            if worst is None or ratio < worst:
                worst, colour = ratio, seen
        marks.append(OnThePage(mark.what, _hex(colour), worst))
    return marks


def contrast_failures(svg: str, page: str, minimum: float = MINIMUM_CONTRAST) -> list[str]:
    """Each mark of ``svg`` drawn on the page (of colour ``page``) at less than ``minimum`` contrast
    with it: what it is, its colour and the ratio."""
    return [
        f"{mark.what}: {mark.colour} on {page}, {mark.contrast:.2f}:1"
        for mark in on_the_page(svg, page)
        if mark.contrast is not None and mark.contrast < minimum
    ]


def _hex(colour) -> str:
    return "#" + "".join(f"{round(c * 255):02x}" for c in colour[:3])


FONT_REQUEST = re.compile(r"font-family\s*:\s*([^;\"]+)|<text\b[^>]*>([^<]*)")


def font_requests(svg: str) -> list[str]:
    """Each font the drawing asks the reader's machine for, and each text it writes as text (which
    the reader's fonts would draw): drawn as paths, a text asks for none."""
    return [m[1].strip() if m[1] else f"a text written as text: {m[2]!r}" for m in FONT_REQUEST.finditer(svg)]


TEXT = re.compile(r"<!-- (.*?) -->", re.S)  # matplotlib writes each text it draws as shapes in a comment


def texts(svg: str) -> list[str]:
    """What each text of the drawing says, line by line, in drawing order; math (``$...$``) left out."""
    said = (html.unescape(line) for line in TEXT.findall(svg))
    return [line for line in said if "$" not in line]


def text_sizes(svg: str) -> list[tuple[str, float, bool]]:
    """Each text of the drawing: what it says, its size in points, whether it is a tick label."""
    return Drawing(svg).sizes
