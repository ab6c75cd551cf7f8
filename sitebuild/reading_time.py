"""How long a teaching page takes to read, shown under its title and on the home page's map.

Counted on the page as rendered, as a reader meets it: the words of prose in view (not code,
printed output, math, or what is folded away: solutions, plotting code, side topics), at
200 words a minute; the lines of code in view, at 2 seconds a line; and 12 seconds a figure.
Reference pages and the home page are for looking things up, and get no reading time.

The home page's map names pages with ``<span class="page-minutes" data-page="<source>">``;
`with_minutes` fills each with that page's minutes once every page is built.
"""

from __future__ import annotations

import math
import re
from html import unescape

from sitebuild import page_html

WORDS_PER_MINUTE = 200
SECONDS_PER_CODE_LINE = 2
SECONDS_PER_FIGURE = 12
NOT_TIMED = ("reference/", "index.md", "notation.md")
SKIPPED = {"pre", "math", "details", "script", "style"}  # not prose, or folded away
TAG = re.compile(r"<[^>]+>")
WORD = re.compile(r"\b[^\W\d_][\w'’-]*", re.UNICODE)


def minutes(content: str) -> int:
    """Minutes to read a page's rendered ``content`` (its HTML), rounded up.

    >>> minutes("<h1>T</h1>" + "<p>" + "word " * 399 + "</p>")  # 400 words
    2
    >>> minutes("<p>one</p><details><p>" + "folded " * 4000 + "</p></details>")
    1
    """
    found = page_html.elements(content)
    spans, code_lines, figures = [], 0, 0
    for element in found:
        folded = any(e.tag == "details" for e in page_html.ancestors(element))
        if element.tag in SKIPPED and element.end_end is not None:
            if not any(e.tag in SKIPPED for e in page_html.ancestors(element)):
                spans.append((element.start, element.end_end))
            if element.tag == "pre" and not folded:
                code_lines += content[element.start_end : element.end].count("\n") + 1
        elif "plot-frame" in element.classes and not folded:
            figures += 1
    prose, done = [], 0
    for start, end in spans:
        prose.append(content[done:start])
        done = end
    prose.append(content[done:])
    words = len(WORD.findall(unescape(TAG.sub(" ", " ".join(prose)))))
    seconds = (
        60 * words / WORDS_PER_MINUTE + SECONDS_PER_CODE_LINE * code_lines + SECONDS_PER_FIGURE * figures
    )
    return max(1, math.ceil(seconds / 60))


def with_reading_time(content: str, src_uri: str) -> tuple[str, int | None]:
    """``content`` with a line under its title saying how long the page takes to read, and the
    minutes (``None`` for a page that is not timed)."""
    if src_uri.startswith(NOT_TIMED) or "</h1>" not in content:
        return content, None
    taken = minutes(content)
    line = f'<p class="reading-time">About {taken} min to read, folded parts aside.</p>'
    title_end = content.index("</h1>") + len("</h1>")
    return content[:title_end] + line + content[title_end:], taken


PAGE_MINUTES = re.compile(r'(<span class="page-minutes" data-page="([^"]+)">)(</span>)')


def with_minutes(page: str, taken: dict[str, int]) -> str:
    """``page`` with each ``page-minutes`` span holding the minutes of the page it names.

    >>> with_minutes('<span class="page-minutes" data-page="a.md"></span>', {"a.md": 4})
    '<span class="page-minutes" data-page="a.md">4</span>'
    """
    return PAGE_MINUTES.sub(lambda m: f"{m[1]}{taken[m[2]]}{m[3]}" if m[2] in taken else m[0], page)
