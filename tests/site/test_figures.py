"""Every figure of the built site, read from its SVG drawings (tests/support/drawings.py): no figure
asks the reader's machine for a font; every stroke, arrow and label of an explanatory diagram stands
out from the page by 3:1 in both schemes (WCAG 2.1, 1.4.11); and the dark drawing of every figure,
plot or diagram, shows each mark that its light drawing shows on the page."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from attn_ref.plotting import DARK_PAPER
from sitebuild.page_html import elements
from tests.support import colours, drawings, kept
from tests.support.drawings import MINIMUM_CONTRAST, OnThePage, font_requests, on_the_page

pytestmark = [pytest.mark.site, pytest.mark.xdist_group("figures")]

PAGES = {"light": "#ffffff", "dark": DARK_PAPER}  # the page behind each scheme's drawing
CHECKING = [Path(drawings.__file__).read_bytes(), Path(colours.__file__).read_bytes()]


@dataclass(frozen=True)
class Figure:
    page: str
    kind: str  # "plot" or "diagram", as attn_ref.plotting.figure_to_svg was told
    drawings: dict[str, Path]  # scheme: its SVG file


def _figures(site: Path) -> list[Figure]:
    found = []
    for html in sorted(site.rglob("index.html")):
        for frame in elements(text := html.read_text()):
            if frame.tag != "span" or "plot-frame" not in frame.classes:
                continue
            images = [e for e in elements(text[frame.start : frame.end_end]) if e.tag == "img"]
            schemes = {
                scheme: html.parent / i.attrs["src"]
                for i in images
                for scheme in PAGES
                if f"plot-{scheme}" in i.classes
            }
            kinds = {i.attrs.get("data-kind") for i in images}
            found.append(Figure(html.parent.relative_to(site).as_posix(), kinds.pop(), schemes))
    return found


def _marks(svg: Path, scheme: str) -> list[OnThePage]:
    """The drawing's marks on the page, read once per drawing (kept under its bytes: a plot's file
    is named by its contents)."""
    key = kept.digest([svg.read_bytes(), scheme, *CHECKING])
    return kept.remembered("drawing", key, lambda: on_the_page(svg.read_text(), PAGES[scheme]))


@pytest.fixture(scope="module")
def figures(built_site) -> list[Figure]:
    return _figures(built_site.path)


def test_every_figure_has_a_kind_and_both_drawings(figures):
    assert figures, "no figure found"
    assert [(f.page, f.kind) for f in figures if f.kind not in ("plot", "diagram")] == []
    assert [f.page for f in figures if sorted(f.drawings) != sorted(PAGES)] == []


def test_no_figure_asks_the_readers_machine_for_a_font(built_site):
    """Text is drawn as shapes: no font-family, no text left as text, in any drawing of the site."""
    asking = {
        svg.name: requests
        for svg in sorted((built_site.path / "assets" / "plots").glob("*.svg"))
        if (requests := sorted(set(font_requests(svg.read_text()))))
    }
    assert asking == {}


@pytest.mark.parametrize("scheme", PAGES)
def test_every_mark_of_a_diagram_stands_out_from_the_page(figures, scheme):
    """A diagram's every line, arrow, marker and glyph, where it is drawn on the page itself, at
    3:1 or more against it."""
    faint = [
        f"{figure.page}: {mark.what} {mark.colour} at {mark.contrast:.2f}:1"
        for figure in figures
        if figure.kind == "diagram"
        for mark in _marks(figure.drawings[scheme], scheme)
        if mark.contrast is not None and mark.contrast < MINIMUM_CONTRAST
    ]
    assert sorted(set(faint)) == []


def test_a_dark_drawing_shows_every_mark_its_light_drawing_shows(figures):
    """The dark drawing is the light one redrawn (attn_ref.plotting.for_dark): the same marks, and each
    mark that stands out from the light page by 3:1 stands out from the dark page by 3:1 too."""
    lost = []
    for figure in figures:
        light, dark = (_marks(figure.drawings[scheme], scheme) for scheme in PAGES)
        assert [m.what for m in light] == [m.what for m in dark], f"{figure.page}: the drawings differ"
        lost += [
            f"{figure.page}: {a.what} {a.colour} at {a.contrast:.1f}:1 on white, {b.colour} at {b.contrast:.2f}:1 on dark"
            for a, b in zip(light, dark, strict=True)
            if a.contrast is not None
            and a.contrast >= MINIMUM_CONTRAST
            and b.contrast is not None
            and b.contrast < MINIMUM_CONTRAST
        ]
    assert sorted(set(lost)) == []
