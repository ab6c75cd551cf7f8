"""Edits of a rendered page's HTML, found with an HTML parser and applied to the text in place.

MkDocs renders each page's Markdown to HTML. Five things can only be done after that, because the
markup they touch is made during rendering (by markdown-exec's executed blocks, by mkdocstrings and
by Pygments); `rendered_page` does all five:

- a plot printed as inline SVG (``attn_ref.plotting.figure_to_svg``) becomes an
  SVG file shown with ``<img alt=... loading="lazy">``; the page stays small, a plot shown twice
  loads once, and a plot is fetched when the reader scrolls near it, not on every first visit.
  A figure comes as two drawings, for the light and the dark scheme (``data-scheme``): they share
  a frame, and the page shows, and so fetches, only the one of the reader's scheme. Its kind
  (``data-kind``: a plot, or an explanatory diagram) goes on each image.
  It is never drawn below 75 % of its size (so that its 12 pt text stays 12 px or more on a
  phone, see ``sitebuild/matplotlibrc``): a plot wider than that scrolls inside its frame.
- code blocks, printed output (``text``) and examples (``python``, ``pycon``), are marked
  ``data-search-exclude``: a reader searching for "softmax" wants the page that teaches it, not
  every page that printed a tensor or called a function. It also halves the search index, which
  every page loads. The mark goes on the ``<pre>``: Material's search stops excluding at the first
  closing tag of the marked element's kind, and a ``<div>`` nests divs.
- on the API pages, each object's name and first paragraph stay searchable; the rest of its
  docstring (parameters, notes) is marked the same way, block by block.
- Pygments wraps every token in a ``<span class>``. Four kinds are drawn in the code's own
  colour on this site, so they look the same without it: plain names (``n``, which Material
  colours as the surrounding code), whitespace (``w``), punctuation (``p``) and operators (``o``).
  Material would draw the last two lighter than the code, which costs contrast (they fall
  below 4.5:1 on the code background) and weight (a thousand spans on a long page).
- each line of a code block (``<pre><code>``: code, printed output, examples) that holds anything
  goes in a ``<span class="l">``, its line break after it. On a phone a long line then wraps
  instead of scrolling sideways, indented under itself and marked in the margin (extra.css), and
  what a reader copies is still the block's text, line for line: the spans are inline blocks,
  which add no line break of their own.

Every edit replaces an exact span of the original text (an element's tags, found by the parser),
so the rest of the page is left byte for byte.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from html.parser import HTMLParser

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
LOOKLESS_TOKENS = {"n", "w", "p", "o"}  # names, whitespace, punctuation, operators
PLOT_SIZE = re.compile(r'\swidth="([\d.]+)pt" height="([\d.]+)pt"')
SMALLEST_PLOT_SCALE = 0.75


@dataclass
class Element:
    """One element of a page: its tag, attributes, and where its start and end tags lie in the text."""

    tag: str
    attrs: dict[str, str | None]
    start: int  # offset of "<tag"
    start_end: int  # offset just after the start tag's ">"
    parent: Element | None
    end: int | None = None  # offset of "</tag", None for a void or unclosed element
    end_end: int | None = None

    @property
    def classes(self) -> set[str]:
        return set((self.attrs.get("class") or "").split())


class _Parser(HTMLParser):
    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.text = text
        self.elements: list[Element] = []
        self.open: list[Element] = []
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def position(self) -> int:
        line, column = self.getpos()
        return self.line_starts[line - 1] + column

    def handle_starttag(self, tag, attrs):
        start = self.position()
        element = Element(
            tag,
            dict(attrs),
            start,
            start + len(self.get_starttag_text()),
            self.open[-1] if self.open else None,
        )
        self.elements.append(element)
        if tag not in VOID:
            self.open.append(element)

    def handle_startendtag(self, tag, attrs):
        start = self.position()
        parent = self.open[-1] if self.open else None
        self.elements.append(Element(tag, dict(attrs), start, start + len(self.get_starttag_text()), parent))

    def handle_endtag(self, tag):
        for depth in range(len(self.open) - 1, -1, -1):  # the nearest open element of that tag
            if self.open[depth].tag == tag:
                element = self.open[depth]
                element.end = self.position()
                element.end_end = self.text.index(">", element.end) + 1
                del self.open[depth:]
                return


def elements(html: str) -> list[Element]:
    """Every element of ``html``, in document order."""
    parser = _Parser(text=html)
    parser.feed(html)
    parser.close()
    return parser.elements


def apply(html: str, edits: list[tuple[int, int, str]]) -> str:
    """``html`` with each ``(start, end, replacement)`` applied; the spans must not overlap."""
    parts, done = [], 0
    for start, end, replacement in sorted(edits):
        if start < done:
            raise ValueError(f"overlapping edits at offset {start}")
        parts += [html[done:start], replacement]
        done = end
    return "".join([*parts, html[done:]])


def rendered_page(html: str, page_url: str) -> tuple[str, dict[str, str]]:
    """The five edits above, from one parse of the page: the page, and the plot files to write
    (``{site path: SVG}``). ``page_url`` is the page's address in the site, for the images' paths."""
    found = elements(html)
    plot_edits, files = _plots_to_files(html, found, page_url)
    edits = (
        _exclude_code_from_search(found)
        + _exclude_sections_from_search(found)
        + _keep_api_summaries_in_search(found)
        + _drop_lookless_spans(found)
        + _lines_of_code(html, found)
    )
    return apply(html, plot_edits + edits), files


KEEPS_WHITESPACE = {"pre", "code", "textarea", "script", "style"}  # where white space is content
INDENTATION = re.compile(r"[ \t\r\f]*\n[ \t\r\n\f]*")  # not \s: a no-break space is text


def without_indentation(page: str) -> str:
    """The whole page, each run of white space that holds a line break cut to the line break, except
    inside the elements where white space is content. Material's templates indent their markup
    deeply (a tenth of a page's bytes), and a browser draws a line break as it draws the run."""
    parts, done = [], 0
    for element in elements(page):
        if element.tag in KEEPS_WHITESPACE and element.end_end and element.start >= done:
            parts += [
                INDENTATION.sub("\n", page[done : element.start]),
                page[element.start : element.end_end],
            ]
            done = element.end_end
    return "".join([*parts, INDENTATION.sub("\n", page[done:])])


def named_dialogs(page: str) -> str:
    """The whole page, each dialog without a name named after its purpose: Material's search box is a
    ``role="dialog"`` with no ``aria-label``, which a screen reader announces as an unnamed dialog."""
    edits = []
    for element in elements(page):
        if element.attrs.get("role") == "dialog" and "aria-label" not in element.attrs:
            name = "Search" if "md-search" in element.classes else element.tag
            at = element.start + 1 + len(element.tag)
            edits.append((at, at, f' aria-label="{name}"'))
    return apply(page, edits)


def _plots_to_files(html: str, found: list[Element], page_url: str) -> tuple[list, dict[str, str]]:
    """Each inline plot (``<svg role="img" aria-label=...>``) replaced by an ``<img>`` of an SVG file."""
    edits, files = [], {}
    for element in found:
        if element.tag != "svg" or element.attrs.get("role") != "img" or element.end_end is None:
            continue
        if any(e.tag == "svg" for e in ancestors(element)):
            continue
        svg = html[element.start : element.end_end]
        path = f"assets/plots/{hashlib.sha256(svg.encode()).hexdigest()[:16]}.svg"
        files[path] = svg
        size = PLOT_SIZE.search(html, element.start, element.start_end)
        dimensions = ""
        if size:  # pt to CSS px
            width, height = float(size[1]) * 4 / 3, float(size[2]) * 4 / 3
            smallest = SMALLEST_PLOT_SCALE * width
            dimensions = f' width="{width:.0f}" height="{height:.0f}" style="min-width: {smallest:.0f}px"'
        alt = _attribute(element.attrs.get("aria-label") or "")
        scheme = element.attrs.get("data-scheme")
        classes = f"plot plot-{scheme}" if scheme in ("light", "dark") else "plot"
        kind = element.attrs.get("data-kind")  # a plot, or a diagram (the pages' pictures are counted)
        marked = f' data-kind="{_attribute(kind)}"' if kind else ""
        image = (
            f'<img class="{classes}"{marked} src="{"../" * page_url.count("/")}{path}" alt="{alt}"'
            f' loading="lazy"{dimensions}>'
        )
        edits.append((element.start, element.end_end, image))
    return _framed(html, edits), files


def _framed(html: str, edits: list) -> list:
    """Each plot's images in one frame: the light and the dark drawing of a figure, written one
    after the other (at most white space between them), share a frame (the page shows the one of
    its scheme, see extra.css)."""
    framed: list = []
    for start, end, image in edits:
        previous = framed[-1] if framed else None
        if (
            previous is not None
            and not html[previous[1] : start].strip()
            and "plot-light" in previous[2]
            and "plot-dark" in image
        ):
            framed[-1] = (previous[0], end, previous[2].removesuffix("</span>") + image + "</span>")
        else:
            framed.append((start, end, f'<span class="plot-frame">{image}</span>'))
    return framed


SEARCH_EXCLUDED = {"language-text", "language-python", "language-pycon"}  # pycon: docstring examples


def _exclude_code_from_search(found: list[Element]) -> list:
    """The ``<pre>`` of every printed-output or example block marked to stay out of search."""
    return [
        (e.start + len("<pre"), e.start + len("<pre"), " data-search-exclude")
        for e in found
        if e.tag == "pre" and e.parent is not None and e.parent.classes & SEARCH_EXCLUDED
    ]


# Sections whose headings stay in search and whose text does not: a search for a topic should land
# where it is taught, not on a list of citations or a question about it (and the index, which every
# first visit loads, is a seventh smaller).
UNSEARCHED_SECTIONS = {"references", "exercises"}


def _exclude_sections_from_search(found: list[Element]) -> list:
    """Every block of an unsearched section (up to the next ``<h2>``) marked to stay out of search."""
    edits, unsearched, parent = [], False, None
    for e in found:
        if e.tag == "h2":
            unsearched, parent = e.attrs.get("id") in UNSEARCHED_SECTIONS, e.parent
        elif unsearched and e.parent is parent:
            at = e.start + 1 + len(e.tag)
            edits.append((at, at, " data-search-exclude"))
    return edits


API_DETAILS = {"p", "ul", "ol", "table", "dl"}


def _keep_api_summaries_in_search(found: list[Element]) -> list:
    """On the API pages (mkdocstrings' ``div.doc-contents``), every block after an object's first
    paragraph marked to stay out of search: its name and its summary find it, and its details
    (parameters, notes) would make the index, which every page loads, a third larger."""
    edits, summarized = [], set()
    for e in found:
        contents = _doc_contents(e) if e.tag in API_DETAILS else None
        if contents is None:
            continue
        if e.tag == "p" and e.parent is contents and id(contents) not in summarized:
            summarized.add(id(contents))  # the summary stays searchable
            continue
        at = e.start + 1 + len(e.tag)
        edits.append((at, at, " data-search-exclude"))
    return edits


def _doc_contents(element: Element) -> Element | None:
    """The API object whose details hold ``element``, unless a block around it is marked already."""
    for ancestor in ancestors(element):
        if ancestor.tag in API_DETAILS:
            return None
        if ancestor.tag == "div" and "doc-contents" in ancestor.classes:
            return ancestor
    return None


def _drop_lookless_spans(found: list[Element]) -> list:
    """Pygments' spans of plain names and whitespace unwrapped; their text stays. (In a code block,
    `_lines_of_code` drops them as it rewrites the block.)"""
    edits = []
    for e in found:
        lookless = e.tag == "span" and e.end is not None and e.attrs.get("class") in LOOKLESS_TOKENS
        if lookless and not any(_is_code_block(a) for a in ancestors(e)):
            edits += [(e.start, e.start_end, ""), (e.end, e.end_end, "")]
    return edits


def _is_code_block(element: Element) -> bool:
    return element.tag == "code" and element.parent is not None and element.parent.tag == "pre"


MARKUP = re.compile(r"(<[^>]*>)|([^<]+)")
LOOKLESS_START = re.compile(rf'<span class="(?:{"|".join(sorted(LOOKLESS_TOKENS))})">')


def _lines_of_code(html: str, found: list[Element]) -> list:
    """Each code block's content, its lookless spans dropped and each line that holds anything in a
    ``<span class="l">``: a token that runs over several lines (a docstring) is closed at the end of
    each and opened again on the next, so that every span holds one line."""
    edits = []
    for block in found:
        if not _is_code_block(block) or block.end is None:
            continue
        lines, line, opened = [], [], []  # opened: the tags open here, None for a dropped one
        for tag, text in MARKUP.findall(html[block.start_end : block.end]):
            if tag.startswith("</"):
                kept = opened.pop()
                line.append(tag if kept else "")
            elif tag:
                kept = not LOOKLESS_START.fullmatch(tag)
                opened.append(tag if kept else None)
                line.append(tag if kept else "")
            else:
                for i, part in enumerate(text.split("\n")):
                    if i:  # a line break: close what is open, start the next line with it open again
                        tags = [t for t in opened if t]
                        line.append("".join(f"</{t[1:].split()[0].rstrip('>')}>" for t in reversed(tags)))
                        lines.append("".join(line))
                        line = tags[:]
                    line.append(part)
        lines.append("".join(line))
        wrapped = "\n".join(f'<span class="l">{text}</span>' if _holds_text(text) else text for text in lines)
        edits.append((block.start_end, block.end, wrapped))
    return edits


def _holds_text(line: str) -> bool:
    """Whether a line of markup shows anything (an empty line is left as a bare line break: an empty
    inline block would take no height)."""
    return bool(re.sub(r"<[^>]*>", "", line))


def ancestors(element: Element):
    parent = element.parent
    while parent is not None:
        yield parent
        parent = parent.parent


def _attribute(value: str) -> str:
    return value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
