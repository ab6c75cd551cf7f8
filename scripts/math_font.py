"""Make docs/assets/fonts/latinmodern-math.woff2: Latin Modern Math, cut down to what the site draws.

    apt-get install fonts-lmodern                       # Debian's package of the Latin Modern fonts
    .venv/bin/python -m scripts.math_font [SITE_DIR]     # SITE_DIR: a built site (default: build one)

Browsers draw MathML with a math font, and need its OpenType MATH table to stretch brackets and
roots and to place limits; a machine without one draws them badly. The site ships Latin Modern
Math (GUST font license), cut to the characters its pages' MathML uses plus the ones MathML draws
without writing them (the radical, stretchy brackets and bars, big operators), with the variants
and assembly parts of those glyphs that the MATH table names (fontTools keeps them). Run it again
when a page uses a new character: tests/test_site.py checks that every one is in the font.
"""

from __future__ import annotations

import html
import re
import sys
import tempfile
from pathlib import Path

from fontTools import subset
from fontTools.ttLib import TTFont

from tests.site_tools import ROOT, build, html_pages

SOURCE = Path("/usr/share/texmf/fonts/opentype/public/lm-math/latinmodern-math.otf")
TARGET = ROOT / "docs" / "assets" / "fonts" / "latinmodern-math.woff2"
MATH = re.compile(r"<math\b.*?</math>", re.S)
# Drawn by MathML without being written in the markup, or stretched from a written one.
ALWAYS = "√∛()[]{}|‖⟨⟩⌊⌋⌈⌉/\\∑∏∫∮⋃⋂⋁⋀←→↔⇐⇒⇔↑↓⏞⏟‾_^~¯-−=+×·…⋯⋮⋱ "
ASCII = "".join(chr(c) for c in range(0x20, 0x7F))


def characters_in_math(page: str) -> set[str]:
    """Every character inside a ``<math>`` element of ``page`` (HTML), markup left out."""
    found = set()
    for math in MATH.findall(page):
        found |= set(html.unescape(re.sub(r"<[^>]+>", "", math)))
    return found


def make(site: Path) -> None:
    used = set().union(*(characters_in_math(page.read_text()) for page in html_pages(site)))
    characters = used | set(ALWAYS) | set(ASCII)
    options = subset.Options()
    options.layout_features = ["*"]
    options.flavor = "woff2"
    options.name_IDs = ["*"]  # keep the copyright and license notices
    options.notdef_outline = True
    options.drop_tables += ["FFTM"]  # FontForge's timestamp: nothing to draw with
    font = TTFont(SOURCE)
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=[ord(c) for c in characters])
    subsetter.subset(font)
    TARGET.parent.mkdir(parents=True, exist_ok=True)
    font.flavor = "woff2"
    font.save(TARGET)
    print(f"{TARGET.relative_to(ROOT)}: {len(characters)} characters, {TARGET.stat().st_size:,} bytes")


def main() -> None:
    if len(sys.argv) > 1:
        make(Path(sys.argv[1]))
        return
    with tempfile.TemporaryDirectory() as folder:
        build(ROOT, Path(folder) / "site")
        make(Path(folder) / "site")


if __name__ == "__main__":
    main()
