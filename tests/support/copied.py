"""A built page's Python blocks as a reader copies them: the code, the blocks its label says it
continues, and what the page shows under it; and a run of them as a reader would run them.

Read from the page's HTML (what the reader sees), not from the Markdown or the notebook:

- a block is a ``div.language-python.highlight`` of the article (not an API page's signature or
  docstring, whose examples are doctests);
- the blocks it continues are the ``#code-<n>`` links of the ``p.code-continues`` line just above it;
- what it shows is the printed text (``div.language-text``) and tables that follow it, or follow the
  collapsed block it ends (a ``check`` or folded block's output sits under the fold), up to the
  first thing that is not an output.

`run_page` runs a page's blocks in one fresh process (forked from a server that has imported
torch, NumPy and matplotlib), each in a fresh namespace: a block that continues others runs
after them, in page order, and only its own printing is kept.
"""

from __future__ import annotations

import ast
import contextlib
import html as html_text
import io
import multiprocessing
import os
import re
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from sitebuild.code_blocks import fresh_printing
from sitebuild.page_html import Element, ancestors, elements
from tests.support.forked import PRELOADED

OUTPUT_CLASSES = {"language-text", "output-html"}  # printed text, and a tutorial's plot or table


@dataclass
class CopiedBlock:
    anchor: str  # code-<n>
    code: str
    continues: list[str]  # anchors of the blocks its label names
    shown: list[str] = field(default_factory=list)  # the printed text under it, block by block
    tables: list[list[list[str]]] = field(default_factory=list)  # the tables under it: rows of cells
    measured: bool = False  # inside div.measured: its output changes from build to build


def text(fragment: str) -> str:
    return html_text.unescape(re.sub(r"<[^>]+>", "", fragment))


def article(page_html: str) -> str:
    return page_html[page_html.index("<article") : page_html.index("</article>")]


def blocks(page_html: str) -> tuple[list[CopiedBlock], list[str], list[str]]:
    """The page's Python blocks; every printed text it shows; the printed texts shown under a block."""
    content = article(page_html)
    found = elements(content)
    children: dict[int, list[Element]] = {}
    for element in found:
        children.setdefault(id(element.parent), []).append(element)
    result, claimed = [], []
    for element in found:
        if element.tag != "div" or not {"language-python", "highlight"} <= element.classes:
            continue
        if any(a.classes & {"doc-contents", "doc-signature"} for a in [element, *ancestors(element)]):
            continue
        code = next(e for e in found if e.tag == "code" and element in ancestors(e))
        siblings = children[id(element.parent)]
        before = siblings[siblings.index(element) - 1] if siblings.index(element) else None
        continues = []
        if before is not None and before.tag == "p" and "code-continues" in before.classes:
            continues = re.findall(r'href="#(code-\d+)"', content[before.start_end : before.end])
        block = CopiedBlock(
            element.attrs.get("id") or "",
            text(content[code.start_end : code.end]),
            continues,
            measured=any("measured" in a.classes for a in ancestors(element)),
        )
        for output in _outputs_under(element, children):
            if "language-text" in output.classes:
                inner = next(e for e in found if e.tag == "code" and output in ancestors(e))
                block.shown.append(text(content[inner.start_end : inner.end]))
            elif output.tag == "table":
                block.tables.append(_table(content, found, output))
        claimed += block.shown
        result.append(block)
    every_text = [
        text(content[e.start_end : e.end])
        for e in found
        if e.tag == "code"
        and e.parent is not None
        and e.parent.tag == "pre"
        and e.parent.parent is not None
        and "language-text" in e.parent.parent.classes
    ]
    return result, every_text, claimed


def _outputs_under(block: Element, children: dict[int, list[Element]]) -> list[Element]:
    """The outputs that follow ``block``, or the fold it is the last element of."""
    anchor = block
    siblings = children[id(block.parent)]
    if block.parent is not None and block.parent.tag == "details" and siblings[-1] is block:
        anchor = block.parent
        siblings = children[id(anchor.parent)]
    outputs = []
    for element in siblings[siblings.index(anchor) + 1 :]:
        if element.tag != "table" and not element.classes & OUTPUT_CLASSES:
            break
        outputs.append(element)
    return outputs


def _table(content: str, found: list[Element], table: Element) -> list[list[str]]:
    """A table's rows of cells as text; a cell of math as ``MATH`` (its MathML reads as no text)."""
    rows = [e for e in found if e.tag == "tr" and table in ancestors(e)]
    cells = [[c for c in found if c.tag in ("td", "th") and c.parent is row] for row in rows]
    return [[_cell(content[c.start_end : c.end]) for c in row] for row in cells]


def _cell(inner: str) -> str:
    return "MATH" if "<math" in inner else text(inner).strip()


def markdown_table(printed: str) -> list[list[str]]:
    """The rows of cells of a Markdown table as a block prints it (its |---| line left out), each cell
    as a reader sees it: without Markdown's backticks and emphasis, and a cell of math as ``MATH``."""
    rows = []
    for line in printed.strip().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if all(re.fullmatch(r":?-+:?", cell) for cell in cells):
            continue
        rows.append(["MATH" if "$" in cell else re.sub(r"[`*]", "", cell) for cell in cells])
    return rows


Job = tuple[list[int], int, list[str], str]


def run_page(jobs: list[Job], cwd: Path, notebook: bool, timeout: float = 300) -> list[str]:
    """Each job run in one new process in ``cwd``: what each printed, or ``"Traceback..."`` if it
    failed. A job is (the numbers of the blocks it continues, its own number, their codes, its
    code): in a fresh namespace, the blocks it continues run first, silently; unless the job before
    ran after exactly those, and then its namespace goes on, as a reader's would. ``notebook``: a
    block's last expression is shown, as a notebook cell shows it.

    The process is not a pool's daemonic worker: a block may start processes of its own (a
    tutorial's ranks), as it may in a reader's interpreter."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOADED)
    receiving, sending = context.Pipe(duplex=False)
    process = context.Process(target=_send_all, args=(sending, jobs, str(cwd), notebook))
    process.start()
    sending.close()
    with receiving:
        finished = receiving.poll(timeout)
        printed = receiving.recv() if finished else None
    if not finished:
        process.kill()
    process.join()
    if printed is None:
        raise TimeoutError(f"the page's blocks ran for more than {timeout} s")
    return printed


def _send_all(sending, jobs: list[Job], cwd: str, notebook: bool) -> None:
    sending.send(_run_all(jobs, cwd, notebook))
    sending.close()


def _run_all(jobs: list[Job], cwd: str, notebook: bool) -> list[str]:
    os.chdir(cwd)
    import matplotlib.pyplot as plt
    import torch

    printed, ran, namespace = [], None, {}
    for continued, number, codes, code in jobs:
        captured = io.StringIO()
        try:
            if continued != ran or not continued:  # a fresh interpreter
                plt.close("all")
                torch.set_default_dtype(torch.float32)
                fresh_printing()
                namespace = {"__name__": "__main__"}
                for earlier in codes:
                    with contextlib.redirect_stdout(io.StringIO()):
                        _run(earlier, namespace, notebook)
            with contextlib.redirect_stdout(captured):
                _run(code, namespace, notebook)
            printed.append(captured.getvalue())
            ran = [*continued, number]
        except BaseException:
            printed.append("Traceback" + traceback.format_exc())
            ran = None
    return printed


def _run(code: str, namespace: dict, notebook: bool) -> None:
    tree = ast.parse(code)
    last = tree.body[-1] if notebook and tree.body and isinstance(tree.body[-1], ast.Expr) else None
    if last is not None:
        tree.body.pop()
    exec(compile(tree, "<copied block>", "exec"), namespace)
    if last is not None:
        value = eval(compile(ast.Expression(last.value), "<copied block>", "eval"), namespace)
        rich = any(hasattr(value, name) for name in ("_repr_mimebundle_", "_repr_html_", "_repr_svg_"))
        if value is not None and not rich:  # a figure or a table is shown as such, not as text
            from IPython.lib.pretty import pretty

            print(pretty(value))
