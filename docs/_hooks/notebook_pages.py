"""Tutorial pages: executed once, rendered from the result, light and downloadable.

- Each ``docs/tutorials/<name>.py`` is executed by ``tutorial_execution`` (two at a time,
  while MkDocs builds the Markdown pages, and only when the tutorial or the code it imports
  changed). The executed notebook takes the ``.py`` file's place as ``tutorials/<name>.ipynb``
  (a ``File`` whose source folder is the cache), which is the name the navigation and the
  pages link to; mkdocs-jupyter renders it with ``execute: false`` at the same address,
  ``tutorials/<name>/``.
- mkdocs-jupyter copies that executed notebook next to the page (``include_source``); a
  button under the title downloads it.
- nbconvert inlines about 580 KB of CSS in every notebook page: it moves to one shared,
  content-hashed stylesheet, loaded once for all tutorials. nbconvert's Mermaid loader goes
  too: no tutorial draws a Mermaid diagram.
- Exercises: a code cell tagged ``solution`` (``# %% tags=["solution"]`` in the tutorial) is
  shown collapsed, as a "Solution" block a reader opens; ``tutorial_execution`` collapses it
  in the downloaded notebook too.
- Plots: the code of a cell tagged ``plot`` is shown collapsed, as a "Plotting code" block;
  the plot it draws stays in view.
- Going deeper: a code cell tagged ``deeper`` (``# %% tags=["deeper"]``) moves into the
  ``<details class="note">`` block ("Going deeper: ...") that ends the markdown cell just before
  it, so that a side topic's code and output stay collapsed with its prose.
- mkdocs-jupyter (0.26.3, and 0.27.0 still) appends its highlighting CSS a second time, written
  as the repr of a Python list, which is not CSS: removed (the stylesheet has the same rules).
- Lighter markup, the same look: the copy buttons share one icon (an SVG ``<use>`` of a
  symbol defined once per page, instead of a copy of the icon per cell); a copy button copies
  the text of the highlighted code it sits on, instead of a hidden second copy of that code;
  the cell collapsers, which the notebook stylesheet hides, are dropped; and the copy
  button's script (about 4 KB, inlined by nbconvert in every page) moves to one shared file.
  nbconvert's toolbar listing a cell's tags goes: tags here say how the page shows a cell, not
  what it holds.
"""

from __future__ import annotations

import hashlib
import re
from concurrent.futures import Future
from pathlib import Path

import tutorial_execution
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File
from mkdocs.utils import get_relative_url

NBCONVERT_MERMAID = re.compile(
    r'<script type="module">\s*document\.addEventListener\("DOMContentLoaded".*?</script>', re.S
)
INLINE_STYLE = re.compile(r"<style[^>]*>(.*?)</style>", re.S)
COPY_ICON = re.compile(r'(<svg aria-hidden="true" class="clipboard-copy-icon")[^>]*>(.*?)</svg>', re.S)
LIST_REPR_STYLE = re.compile(r"<style>\s*\['.*?'\]\s*</style>", re.S)
TAG_TOOLBAR = re.compile(
    r'<div class="celltoolbar">\s*<div class="[^"]*tags_button_container">.*?</div>\s*</div>', re.S
)
SOLUTION_CELL, PLOT_CELL, DEEPER_CELL = (  # the opening tag of a code cell with that tag
    re.compile(rf'<div class="jp-Cell jp-CodeCell jp-Notebook-cell[^"]*\bcelltag_{tag}\b[^"]*">')
    for tag in ("solution", "plot", "deeper")
)
INPUT_WRAPPER = re.compile(r'<div class="jp-Cell-inputWrapper"')
DIV_TAG = re.compile(r"<div\b|</div>")
# The code as highlighted, then the same code again as hidden text for the copy button.
HIDDEN_COPY = re.compile(
    r'(<div class="highlight-ipynb[^"]*"><pre)(>.*?</pre></div>\s*)<div class="clipboard-copy-txt" id="([^"]+)">[^<]*</div>',
    re.S,
)
HIDDEN_COLLAPSER = re.compile(r'<div class="jp-Collapser [^"]*">\s*</div>\s*')
INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.S)

executions: dict[str, Future] = {}  # a tutorial's src_uri -> its executed notebook, when ready
shared_files: dict[str, str] = {}  # site path -> CSS or script of every tutorial page


def is_tutorial(file: File) -> bool:
    return file.src_uri.startswith("tutorials/") and file.src_uri.endswith(".ipynb")


@event_priority(100)  # before mkdocs-jupyter picks the notebooks it renders
def on_files(files, config):
    root = Path(config.config_file_path).resolve().parent
    sources = [
        file for file in files if file.src_uri.startswith("tutorials/") and file.src_uri.endswith(".py")
    ]
    running = tutorial_execution.execute_all([Path(file.abs_src_path) for file in sources], root)
    digest = tutorial_execution.code_digest(root)
    for file in sources:
        source = Path(file.abs_src_path)
        executed = tutorial_execution.executed_notebook(source, root, digest)
        src_uri = f"tutorials/{executed.name}"
        executions[src_uri] = running[source]
        files.remove(file)
        files.append(File(src_uri, str(executed.parents[1]), config.site_dir, config.use_directory_urls))
    return files


@event_priority(100)  # mkdocs-jupyter reads the executed notebook in its own on_pre_page
def on_pre_page(page, config, files):
    running = executions.pop(page.file.src_uri, None)
    if running is not None:
        running.result()  # a failing cell stops the build, with the kernel's traceback
    return page


def on_page_content(html, page, config, files):
    if not is_tutorial(page.file):
        return html
    html = NBCONVERT_MERMAID.sub("", html)
    header, wrapper, cells = html.partition('<div class="jupyter-wrapper">')  # styles inside plots stay
    stylesheet = _shared("stylesheets/notebook", "css", "\n".join(INLINE_STYLE.findall(header)))
    script = _shared("javascripts/notebook", "js", "\n".join(INLINE_SCRIPT.findall(header)))
    cells = TAG_TOOLBAR.sub("", LIST_REPR_STYLE.sub("", cells))
    cells = HIDDEN_COLLAPSER.sub("", HIDDEN_COPY.sub(r'\1 id="\3"\2', cells))
    cells = _one_copy_icon(cells)
    cells = _in_details(
        cells, PLOT_CELL, '<details class="example"><summary>Plotting code</summary>', input_only=True
    )
    cells = _in_details(
        _deeper_in_details(cells), SOLUTION_CELL, '<details class="success"><summary>Solution</summary>'
    )
    html = INLINE_SCRIPT.sub("", INLINE_STYLE.sub("", header)) + wrapper + cells
    name = Path(page.file.abs_src_path).name
    link = (
        f'<link rel="stylesheet" href="{get_relative_url(stylesheet, page.url)}">'
        f'<script src="{get_relative_url(script, page.url)}"></script>'
    )
    button = (
        f'<p><a class="md-button md-button--primary" href="{name}" download>'
        f"Download this tutorial as a notebook ({name})</a></p>"
    )
    head, found, rest = html.partition("</h1>")  # the button goes under the tutorial's title
    return link + (head + found + button + rest if found else button + html)


def _shared(stem: str, suffix: str, text: str) -> str:
    """The site path of one content-hashed file holding ``text``, written after the build."""
    path = f"assets/{stem}-{hashlib.sha256(text.encode()).hexdigest()[:12]}.{suffix}"
    shared_files[path] = text
    return path


def _one_copy_icon(cells: str) -> str:
    icon = COPY_ICON.search(cells)
    if not icon:
        return cells
    symbol = f'<svg style="display: none"><symbol id="copy-icon" viewBox="0 0 16 16">{icon[2]}</symbol></svg>'
    return symbol + COPY_ICON.sub(r'\1 width="20" height="20"><use href="#copy-icon"></use></svg>', cells)


def _in_details(cells: str, tagged: re.Pattern, opening: str, input_only: bool = False) -> str:
    """Each cell that ``tagged`` finds (only its code, if ``input_only``) wrapped in ``opening`` ... </details>."""
    parts, done = [], 0
    for cell in tagged.finditer(cells):
        start = INPUT_WRAPPER.search(cells, cell.end()).start() if input_only else cell.start()
        end = _end_of_div(cells, start)
        parts += [cells[done:start], opening, cells[start:end], "</details>"]
        done = end
    return "".join([*parts, cells[done:]])


def _deeper_in_details(cells: str) -> str:
    """Each cell tagged ``deeper`` goes, in order, before the ``</details>`` that precedes it."""
    moved: dict[int, list[str]] = {}  # where a </details> starts -> the cells that go before it
    spans = []
    for cell in DEEPER_CELL.finditer(cells):
        start, end = cell.start(), _end_of_div(cells, cell.start())
        target = cells.rfind("</details>", 0, start)
        between = DEEPER_CELL.sub("", cells[target:start])
        if target < 0 or "jp-CodeCell" in between or "jp-MarkdownCell" in between:
            raise ValueError("a cell tagged deeper must follow a markdown cell that ends with <details>")
        moved.setdefault(target, []).append(cells[start:end])
        spans.append((start, end))
    cuts = sorted([(at, at, "".join(moved[at])) for at in moved] + [(start, end, "") for start, end in spans])
    parts, done = [], 0
    for start, end, text in cuts:
        parts += [cells[done:start], text]
        done = end
    return "".join([*parts, cells[done:]])


def _end_of_div(html: str, start: int) -> int:
    """Where the ``<div>`` that opens at ``start`` closes."""
    depth = 0
    for tag in DIV_TAG.finditer(html, start):
        depth += 1 if tag[0] == "<div" else -1
        if depth == 0:
            return tag.end()
    raise ValueError(f"no closing </div> for the <div> at {start}")


def on_post_build(config):
    site = Path(config["site_dir"])
    for path, text in shared_files.items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_text(text)
    root = Path(config.config_file_path).resolve().parent
    used = {
        tutorial_execution.cache_folder(source, root)
        for source in sorted((Path(config["docs_dir"]) / "tutorials").glob("*.py"))
    }
    tutorial_execution.prune(root, used)
