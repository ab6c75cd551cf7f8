"""An executed tutorial notebook, written as a Markdown page: the site renders it like every other page.

A tutorial page is the Markdown of its notebook: each markdown cell as it is, each code cell as a
fenced Python block followed by what it printed (a ``text`` block) or displayed (a plot's two
SVG drawings, light and dark, kept as raw HTML). So the tutorials share the other pages' code highlighting, copy buttons, math,
admonitions and search, and the HTML that comes out is MkDocs' own.

A code cell's tags say how the page shows it:

- ``solution``: code and output inside a collapsed "Solution" block;
- ``plot``: the code inside a collapsed "Plotting code" block, the plot in view under it;
- ``check``: the code inside a collapsed "Checking code" block, what it printed in view under it
  (a check of a claim, or a pitfall's symptom: the result is the lesson, the code is for later);
- ``deeper``: code and output inside the collapsed "Going deeper" block that ends the markdown
  cell just before it, with the side topic's prose;
- ``measured``: the cell times code or weighs its memory, so its output changes from build to
  build; it is wrapped in ``<div class="measured">``, which `make measure` leaves out when it
  compares two builds.

A markdown cell writes a side topic as HTML, ``<details class="note"><summary>...</summary>``,
which Jupyter shows folded too; on the page it becomes the site's collapsed block, ``??? note``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import yaml
from nbformat import NotebookNode

from attn_ref.plotting import PLOT_MIME

INDENT = " " * 4
FOLDED_CODE = {"plot": "Plotting code", "check": "Checking code"}  # tag: its collapsed block's title
FRONT_MATTER = ("search",)  # notebook metadata a tutorial page takes as its front matter
# A side topic in a markdown cell: <details class="note"><summary>Title</summary> body </details>
DETAILS = re.compile(
    r'^<details class="(?P<kind>\w+)">\s*<summary>(?P<title>.*?)</summary>\n(?P<body>.*?)\n</details>$',
    re.S | re.M,
)


def markdown_page(notebook: NotebookNode, download: str) -> str:
    """The page of an executed ``notebook``, with a button under its title to download it as ``download``."""
    parts: list[str] = []
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            parts.append(_markdown_cell(cell.source))
        elif cell.cell_type == "code":
            _add_code_cell(parts, cell)
    page = "\n\n".join(parts) + "\n"
    button = f"[Download this tutorial as a notebook ({download})]({download}){{ .md-button .md-button--primary download }}"
    title, found, rest = page.partition("\n")
    if not title.startswith("# "):
        raise ValueError("a tutorial must start with a markdown cell whose first line is its '# Title'")
    # The notebook's own settings for the page, such as its search boost (jupytext's header,
    # ``jupyter: search: boost: 2``), as the front matter a Markdown page would carry.
    settings = {key: notebook.metadata[key] for key in FRONT_MATTER if key in notebook.metadata}
    front = f"---\n{yaml.safe_dump(settings)}---\n\n" if settings else ""
    return front + (f"{title}\n\n{button}\n{rest}" if found else f"{title}\n\n{button}\n")


def _markdown_cell(source: str) -> str:
    """The cell's Markdown, its ``<details>`` side topics as collapsed blocks."""

    def collapsed(match: re.Match) -> str:
        title = _unescape_summary(match["title"]).replace('"', "&quot;")
        return f'??? {match["kind"]} "{title}"\n\n' + _indented(match["body"].strip("\n"))

    return DETAILS.sub(collapsed, source)


def _unescape_summary(title: str) -> str:
    """A ``<summary>`` may hold inline HTML such as ``<code>x</code>``: the block's title is Markdown."""
    return re.sub(r"</?code>", "`", title)


def _add_code_cell(parts: list[str], cell: NotebookNode) -> None:
    tags = set(cell.metadata.get("tags", []))
    code = _fenced("python", cell.source)
    outputs = list(_outputs(cell))
    if "solution" in tags:
        blocks = ['??? success "Solution"\n\n' + _indented("\n\n".join([code, *outputs]))]
    elif tags & FOLDED_CODE.keys():
        (tag,) = tags & FOLDED_CODE.keys()
        blocks = [f'??? example "{FOLDED_CODE[tag]}"\n\n' + _indented(code), *outputs]
    else:
        blocks = [code, *outputs]
    if "measured" in tags:  # its output differs from build to build: make measure skips it
        blocks = ['<div class="measured" markdown>', *blocks, "</div>"]
    text = "\n\n".join(blocks)
    if "deeper" in tags:  # into the collapsed block that ends the markdown cell before it
        if not parts or not parts[-1].rstrip().splitlines()[-1].startswith(INDENT) or "??? " not in parts[-1]:
            raise ValueError(
                "a cell tagged deeper must follow a markdown cell that ends with <details>...</details>: "
                + cell.source.splitlines()[0]
            )
        parts[-1] += "\n\n" + _indented(text)
    else:
        parts.append(text)


def _outputs(cell: NotebookNode) -> Iterator[str]:
    for output in cell.get("outputs", []):
        if output.output_type == "stream":
            yield _fenced("text", output.text.rstrip("\n"))
        elif output.output_type in ("execute_result", "display_data"):
            data = output.data
            if (
                "text/markdown" in data
            ):  # Markdown the cell wrote (IPython.display.Markdown): part of the page
                yield data["text/markdown"].strip()
            elif PLOT_MIME in data:  # a plot (attn_ref.plotting.figure_to_svg): both its drawings
                yield '<div class="output-html" markdown="0">\n' + data[PLOT_MIME].strip() + "\n</div>"
            elif "text/html" in data:  # a table
                yield '<div class="output-html" markdown="0">\n' + data["text/html"].strip() + "\n</div>"
            elif "text/plain" in data:
                yield _fenced("text", data["text/plain"])
            else:
                raise ValueError(f"no way to show an output of types {sorted(data)} on a page")
        elif output.output_type == "error":
            raise ValueError(f"a tutorial cell failed: {output.ename}: {output.evalue}")


def _fenced(language: str, text: str) -> str:
    """``text`` in a fenced block, its fence longer than any run of backticks inside."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def _indented(text: str) -> str:
    return "\n".join(INDENT + line if line.strip() else "" for line in text.splitlines())
