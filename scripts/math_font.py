"""Make docs/assets/fonts/latinmodern-math.woff2: Latin Modern Math, cut down to what the site draws.

    apt-get install fonts-lmodern                       # Debian's package of the Latin Modern fonts
    .venv/bin/python -m scripts.math_font [SITE_DIR]     # SITE_DIR: a built site (default: build one)

Browsers draw MathML with a math font, and need its OpenType MATH table to stretch brackets and
roots and to place limits; a machine without one draws them badly. The site ships Latin Modern
Math (GUST font license), cut to the characters its pages' MathML draws (see
`characters_in_math`) plus the radical, which MathML draws without writing it, with the larger
sizes and assembly parts of those glyphs that the MATH table names (fontTools keeps them). Run it again
when a page uses a new character: tests/site/test_site.py checks that every one is in the font.
"""

from __future__ import annotations

import html
import re
import sys
import tempfile
import unicodedata
from pathlib import Path

from fontTools import subset
from fontTools.ttLib import TTFont

from sitelook.project import ROOT, build, html_pages

SOURCE = Path("/usr/share/texmf/fonts/opentype/public/lm-math/latinmodern-math.otf")
TARGET = ROOT / "docs" / "assets" / "fonts" / "latinmodern-math.woff2"
MATH = re.compile(r"<math\b.*?</math>", re.S)
# Drawn by MathML without being written in the markup: the radical of <msqrt> and <mroot>, and the
# spaces. (A stretched bracket or a big operator is written, and the MATH table brings its larger sizes.)
UNWRITTEN = "\u221a \u00a0"
SINGLE_MI = re.compile(r"<mi>([^<])</mi>")  # a one-letter identifier with no mathvariant


def characters_in_math(page: str) -> set[str]:
    """Every character the browser draws for the ``<math>`` elements of ``page`` (HTML).

    That is the text of the markup, and for each one-letter identifier (``<mi>x</mi>``) its
    italic form: MathML Core draws it as the Unicode character MATHEMATICAL ITALIC SMALL X.
    """
    found = set()
    for math in MATH.findall(page):
        found |= set(html.unescape(re.sub(r"<[^>]+>", "", math)))
        found |= {
            italic for letter in SINGLE_MI.findall(math) if (italic := math_italic(html.unescape(letter)))
        }
    return found


def math_italic(letter: str) -> str | None:
    """The italic form MathML Core gives a one-letter identifier, or None if it keeps the letter."""
    if letter == "h":
        return "\u210e"  # PLANCK CONSTANT: the italic h the Mathematical Alphanumeric block leaves out
    name = unicodedata.name(letter, "")
    for script in ("LATIN ", "GREEK "):
        if name.startswith(script):
            wanted = "MATHEMATICAL ITALIC " + name.removeprefix(script).replace("LETTER ", "").replace(
                "LUNATE ", ""
            )
            try:
                return unicodedata.lookup(wanted)
            except KeyError:
                return None
    return None


def make(site: Path) -> None:
    used = set().union(*(characters_in_math(page.read_text()) for page in html_pages(site)))
    characters = used | set(UNWRITTEN)
    options = subset.Options()
    options.layout_features = [
        "ssty",
        "dtls",
        "flac",
    ]  # what MathML uses; not "aalt", which pulls in every alternate
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
