"""Plots made at build become SVG files, shown with their text alternative.

Pages print a plot as inline SVG with ``role="img"`` and an ``aria-label``
(``attn_ref.plotting.figure_to_svg``). Inline, a plot weighs on every visit of its
page; as a file, the page stays small and a plot shown twice is loaded once. The
``aria-label`` becomes the image's ``alt``.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from mkdocs.utils import get_relative_url

INLINE_PLOT = re.compile(r'<svg (?=[^>]*role="img")[^>]*aria-label="([^"]*)".*?</svg>', re.S)
# nbconvert passes notebook outputs through an HTML parser that lowercases SVG names; HTML pages
# forgive that, a standalone .svg file does not. These are the camelCase names matplotlib writes.
SVG_NAMES = {"viewbox=": "viewBox=", "<clippath": "<clipPath", "</clippath>": "</clipPath>"}
PLOT_SIZE = re.compile(r'\swidth="([\d.]+)pt" height="([\d.]+)pt"')

plots: dict[str, str] = {}  # site path -> SVG, written after the build


def on_page_content(html, page, config, files):
    def to_file(match: re.Match) -> str:
        svg = match.group(0)
        for lowered, name in SVG_NAMES.items():
            svg = svg.replace(lowered, name)
        path = f"assets/plots/{hashlib.sha256(svg.encode()).hexdigest()[:16]}.svg"
        plots[path] = svg
        size = PLOT_SIZE.search(svg)
        dimensions = (
            f' width="{float(size[1]) * 4 / 3:.0f}" height="{float(size[2]) * 4 / 3:.0f}"' if size else ""
        )
        return (
            f'<img class="plot" src="{get_relative_url(path, page.url)}" alt="{match.group(1)}"{dimensions}>'
        )

    return INLINE_PLOT.sub(to_file, html)


def on_post_build(config):
    site = Path(config["site_dir"])
    for path, svg in plots.items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_text(svg)
