"""Code blocks a reader can copy: each runs alone, or says which block it continues.

A reader copies one block into a fresh interpreter. So every Python block a page shows either
runs alone (it imports and defines all it uses) or carries a line above it, written by the build
from the code itself, that names and links the block it continues. And no printed result is shown
without the code that printed it.

On a Markdown page (`markdown`, before it is rendered):

- ``source="folded"`` on an executed block: its code in a collapsed block (titled by ``fold=``,
  "The code" by default), what it printed in view under it; the code a reader unfolds is the code
  that ran. It is what a tutorial's ``check`` tag does, for a Markdown page.
- A block that shows a snippet (``--8<-- "snippets/<topic>/<name>.py..."``) is titled with the
  script's name; the title links to the whole script, which `publish` writes beside the page (the
  script runs on its own; its section markers are left out). A block run in a folder of its own
  (``workdir="snippets/<topic>"``) reads data there: its JSON files are published beside the page too.
- An executed block whose code is not shown may write the page's own markup (``html="true"``: a
  figure, whose plotting code is shown, or the playground's controls) or repeat a block shown on the
  page; one that prints a result (text, or Markdown such as a table) fails the build.

On every page, tutorials too (`html`, once rendered): each Python block gets an anchor
(``code-<n>``); a block that uses names it does not define gets the line "Continues ..." linking the
block(s) above that last defined or used them (a block that used ``model`` may have trained it, a
block that used ``q`` may have set its ``requires_grad``), leaving out those that these continue
themselves; a name that no block shown above defines fails the build.
"""

from __future__ import annotations

import ast
import builtins
import html as html_text
import re
import symtable
import sys
from dataclasses import dataclass, field
from pathlib import Path

from sitebuild.page_html import Element, ancestors, apply, elements

# An executed (or plain) Python block of a Markdown page, at any indentation: indent, options, body.
FENCE = re.compile(r"^( *)```python( [^\n]*)?\n(.*?)^\1```[ \t]*$", re.M | re.S)
INCLUDE = re.compile(r'^ *--8<-- "(snippets/[^":]+)(?::[\w-]+)?"[ \t]*$', re.M)
OPTION = re.compile(r'(\w+)="([^"]*)"')
SECTION_MARKER = re.compile(r"^[ \t]*# --8<-- \[(start|end):[\w-]+\][ \t]*\n", re.M)
KNOWN = set(dir(builtins)) | {"__name__", "__doc__"}
MOST_NAMES_SHOWN = 4


# The Markdown stage


@dataclass
class MarkdownPage:
    """A Markdown page's text after `markdown`, and the scripts its titles link to: {name: path}."""

    text: str
    scripts: dict[str, str] = field(default_factory=dict)


def markdown(text: str, page: str, root: Path) -> MarkdownPage:
    """``text`` (the Markdown of ``page``, such as ``practice/bugs.md``, in the project at ``root``) with
    folded blocks written out and snippet blocks titled; fails on an executed block that hides the
    code of what it prints."""
    scripts: dict[str, str] = {}
    shown_bodies = {_dedent(body, indent) for indent, options, body in FENCE.findall(text) if _shown(options)}

    def rewrite(match: re.Match) -> str:
        indent, options, body = match[1], match[2] or "", match[3]
        settings = dict(OPTION.findall(options))
        if settings.get("exec") != "true":
            return match[0]
        for data in sorted((root / settings.get("workdir", "-")).glob("*.json")):  # what it reads
            scripts[data.name] = data.relative_to(root).as_posix()
        if settings.get("source") == "folded":
            return _folded(indent, options, body, settings, scripts)
        if _shown(options):
            title = "" if "title=" in options else _title(body, scripts)
            return f"{indent}```python{options}{title}\n{body}{indent}```"
        if not (settings.get("html") == "true" or _dedent(body, indent) in shown_bodies):
            first = body.strip().splitlines()[0] if body.strip() else ""
            raise ValueError(
                f"{page}: an executed block shows what it prints but not its code ({first}): show it "
                f'(source="above") or fold it (source="folded" fold="Checking code")'
            )
        return match[0]

    return MarkdownPage(FENCE.sub(rewrite, text), scripts)


def _shown(options: str | None) -> bool:
    return bool(options) and re.search(r'\bsource="(?!folded")', options) is not None


def _dedent(body: str, indent: str) -> str:
    return "".join(line.removeprefix(indent) for line in body.splitlines(keepends=True))


def _title(body: str, scripts: dict[str, str]) -> str:
    """`` title="<name>.py"`` for a block that shows snippets (every script it shows, by name)."""
    paths = list(dict.fromkeys(INCLUDE.findall(body)))
    for path in paths:
        name = Path(path).name
        if scripts.setdefault(name, path) != path:
            raise ValueError(f"two scripts named {name} on one page: {scripts[name]} and {path}")
    return f' title="{", ".join(Path(path).name for path in paths)}"' if paths else ""


def _folded(indent: str, options: str, body: str, settings: dict[str, str], scripts: dict[str, str]) -> str:
    """The code in a collapsed block, then the same code executed with only its output shown."""
    summary = settings.get("fold", "The code")
    executed = re.sub(r'\s(source|fold)="[^"]*"', "", options)
    inner = indent + " " * 4
    code = "".join(inner + line.removeprefix(indent) for line in body.splitlines(keepends=True))
    return (
        f'{indent}??? example "{summary}"\n\n'
        f"{inner}```python{_title(body, scripts)}\n{code}{inner}```\n\n"
        f"{indent}```python{executed}\n{body}{indent}```"
    )


def publish(scripts: dict[str, str], root: Path, page_folder: Path) -> None:
    """Each script a page's titles link to, written beside the page, without its section markers (and
    the data a block run in a ``workdir`` reads there)."""
    for name, path in scripts.items():
        page_folder.mkdir(parents=True, exist_ok=True)
        (page_folder / name).write_text(SECTION_MARKER.sub("", (root / path).read_text()))


# What a block prints at build, as it prints for a reader


def print_as_python() -> None:
    """markdown-exec's ``print`` (which writes a block's output into the page) as Python's own.

    markdown-exec 1.12 drops ``sep=``: ``print("weights", w, sep="\n")`` would show on the page on
    one line, and on two lines for the reader who copies it.
    """
    from markdown_exec._internal.formatters import python as formatter

    def printed(buffer, *values, sep=" ", end="\n", file=None, flush=False):
        print(*values, sep=sep, end=end, file=buffer if file in (None, sys.stdout) else file, flush=flush)

    formatter._buffer_print = printed


NUMPY_PRINTING = {  # NumPy's defaults (numpy.set_printoptions)
    "precision": 8,
    "threshold": 1000,
    "edgeitems": 3,
    "linewidth": 75,
    "suppress": False,
    "nanstr": "nan",
    "infstr": "inf",
    "formatter": None,
    "sign": "-",
    "floatmode": "maxprec",
    "legacy": False,
}


def fresh_printing() -> None:
    """PyTorch's and NumPy's print options as a fresh interpreter has them: every page's blocks run in
    the build's one process, and one that calls ``torch.set_printoptions(precision=2)`` would
    otherwise round what every later page prints, which a reader's interpreter would not."""
    import numpy
    import torch

    torch.set_printoptions(profile="default")
    numpy.set_printoptions(**NUMPY_PRINTING)


# What a block uses and defines


def names(code: str) -> tuple[list[str], set[str], set[str]]:
    """The names ``code`` uses before (or without) defining them, in order; the names it defines or
    changes (``x = ...``, ``import x``, ``def x``, ``x[0] = ...``, ``x.a = ...``); and those of the
    first that only its functions, classes and comprehensions read.

    Module-level code is read in the order it runs; names read inside functions, classes and
    comprehensions are needed unless the block defines them anywhere.
    """
    tree = ast.parse(code)
    reader = _InOrder()
    reader.visit(tree)
    later = set()  # read when a function runs: defined anywhere in the block is enough
    bound = reader.bound | reader.changed
    for table in _nested(symtable.symtable(code, "<block>", "exec")):
        for symbol in table.get_symbols():
            if symbol.is_global() and symbol.is_assigned():
                bound.add(symbol.get_name())  # `global x; x = ...` inside a function
            elif symbol.is_global() and symbol.is_referenced():
                later.add(symbol.get_name())
    needed = reader.needed + sorted(later - bound - KNOWN - set(reader.needed))
    return needed, bound, later


def _nested(table: symtable.SymbolTable):
    for child in table.get_children():
        yield child
        yield from _nested(child)


class _InOrder(ast.NodeVisitor):
    """Module-level names in the order the code runs: a value before the name it is assigned to."""

    def __init__(self) -> None:
        self.bound: set[str] = set()
        self.changed: set[str] = set()
        self.needed: list[str] = []

    def use(self, name: str) -> None:
        if name not in self.bound and name not in KNOWN and name not in self.needed:
            self.needed.append(name)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.use(node.id)
        else:
            self.bound.add(node.id)

    def _store_into(self, node: ast.AST) -> None:
        """``x[0] = ...`` and ``x.a = ...`` read x and change it."""
        self.visit(node)
        base = node
        while isinstance(base, ast.Subscript | ast.Attribute):
            base = base.value
        if isinstance(base, ast.Name) and base is not node:
            self.changed.add(base.id)

    def _targets(self, targets: list[ast.AST]) -> None:
        for target in targets:
            if isinstance(target, ast.Subscript | ast.Attribute):
                self._store_into(target)
            elif isinstance(target, ast.Tuple | ast.List | ast.Starred):
                self._targets(getattr(target, "elts", None) or [target.value])
            else:
                self.visit(target)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        self._targets(node.targets)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
        self._targets([node.target])

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name):
            self.use(node.target.id)
        self.visit(node.value)
        self._targets([node.target])

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self.visit(node.target)

    def visit_For(self, node: ast.For) -> None:
        self.visit(node.iter)
        self._targets([node.target])
        for statement in [*node.body, *node.orelse]:
            self.visit(statement)

    def visit_With(self, node: ast.With) -> None:
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                self._targets([item.optional_vars])
        for statement in node.body:
            self.visit(statement)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.type is not None:
            self.visit(node.type)
        if node.name:
            self.bound.add(node.name)
        for statement in node.body:
            self.visit(statement)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.bound.add(alias.asname or alias.name.split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            self.bound.add(alias.asname or alias.name)

    def _definition(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        for decorator in node.decorator_list:
            self.visit(decorator)
        if isinstance(node, ast.ClassDef):
            for base in [*node.bases, *(keyword.value for keyword in node.keywords)]:
                self.visit(base)
        else:
            for default in [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]:
                self.visit(default)
        self.bound.add(node.name)  # its body runs later: `names` reads it from the symbol table

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._definition(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._definition(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._definition(node)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for default in [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]:
            self.visit(default)

    def _comprehension(self, node: ast.AST) -> None:
        self.visit(node.generators[0].iter)  # the rest runs in the comprehension's own scope

    def visit_ListComp(self, node: ast.ListComp) -> None:
        self._comprehension(node)

    def visit_SetComp(self, node: ast.SetComp) -> None:
        self._comprehension(node)

    def visit_DictComp(self, node: ast.DictComp) -> None:
        self._comprehension(node)

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> None:
        self._comprehension(node)


# The HTML stage


@dataclass
class Block:
    """A Python block of a rendered page."""

    element: Element
    code: str
    heading: str
    fold: str | None  # the summary of the collapsed block it sits in, if any
    needed: list[str] = field(default_factory=list)
    bound: set[str] = field(default_factory=set)
    later: set[str] = field(default_factory=set)  # needed names read only when a function runs
    used: set[str] = field(default_factory=set)  # needed names it reads as it runs: it may change them
    continues: list[int] = field(default_factory=list)  # indices of the blocks it continues


def html(content: str, page: str, scripts: dict[str, str]) -> str:
    """``content`` (a page's rendered HTML) with each Python block anchored, labelled with the blocks it
    continues, and its title linked to the script it shows (``scripts``, from `markdown`)."""
    found = elements(content)
    blocks = _python_blocks(content, found)
    for number, block in enumerate(blocks):
        try:
            block.needed, block.bound, block.later = names(block.code)
            block.used = set(block.needed) - block.later
        except SyntaxError as error:
            raise ValueError(f"{page}: a Python block that is not Python ({error}):\n{block.code}") from None
        providers: dict[str, int] = {}
        for name in block.needed:  # the last block that defined it, or used it (and may have changed it)
            earlier = [i for i in range(number) if name in blocks[i].bound | blocks[i].used]
            if not earlier and name in block.later:
                continue  # read when a function defined here runs: a later block may define it first
            if not earlier:
                raise ValueError(
                    f"{page}: the code block {_where(block)} uses {name}, which no block shown above it "
                    f"defines (a reader copies only what is shown):\n{block.code}"
                )
            providers[name] = earlier[-1]
        direct = set(providers.values())
        further = set().union(*(_all_continued(blocks, i) for i in direct)) if direct else set()
        block.continues = sorted(direct - further)
    edits = []
    for number, block in enumerate(blocks):
        at = block.element.start + len("<div")
        edits.append((at, at, f' id="code-{number + 1}"'))
        if block.continues:
            edits.append((block.element.start, block.element.start, _label(blocks, number)))
    edits += _linked_titles(content, found, scripts)
    return apply(content, edits)


def _python_blocks(content: str, found: list[Element]) -> list[Block]:
    blocks, heading = [], ""
    for element in found:
        if element.tag == "h1":  # the page's title
            heading = ""
        elif re.fullmatch(r"h[2-6]", element.tag):
            heading = _text(content[element.start_end : element.end]).removesuffix("¶").strip()
        if element.tag != "div" or not {"language-python", "highlight"} <= element.classes:
            continue
        if any(
            "doc-contents" in a.classes or "doc-signature" in a.classes
            for a in [element, *ancestors(element)]
        ):
            continue  # an API page's signatures and docstrings: their examples are doctests
        code = next(e for e in found if e.tag == "code" and element in ancestors(e))
        folds = [a for a in ancestors(element) if a.tag == "details"]
        summary = None
        if folds:
            tag = next(e for e in found if e.tag == "summary" and e.parent is folds[0])
            summary = _text(content[tag.start_end : tag.end]).strip()
        blocks.append(Block(element, _text(content[code.start_end : code.end]), heading, summary))
    return blocks


def _text(fragment: str) -> str:
    return html_text.unescape(re.sub(r"<[^>]+>", "", fragment))


def _all_continued(blocks: list[Block], index: int) -> set[int]:
    found, todo = set(), list(blocks[index].continues)
    while todo:
        i = todo.pop()
        if i not in found:
            found.add(i)
            todo += blocks[i].continues
    return found


def _where(block: Block) -> str:
    under = f"under “{block.heading}”" if block.heading else "at the top of the page"
    return f"in “{block.fold}” {under}" if block.fold else under


def _label(blocks: list[Block], number: int) -> str:
    block = blocks[number]
    names = [f'<a href="#code-{i + 1}">{_name_of(blocks, i, number)}</a>' for i in block.continues]
    used = [f"<code>{html_text.escape(name)}</code>" for name in block.needed[:MOST_NAMES_SHOWN]]
    more = len(block.needed) - len(used)
    uses = ", ".join(used) + (f" and {more} more" if more > 0 else "")
    return f'<p class="code-continues">Continues {" and ".join(names)}: uses {uses}.</p>\n'


def _name_of(blocks: list[Block], index: int, reader: int) -> str:
    """How the block ``reader`` names block ``index`` in its label."""
    block, here = blocks[index], blocks[reader]
    if index == reader - 1:
        return "the block above"
    under = ""
    if block.heading != here.heading:
        under = f" under “{html_text.escape(block.heading)}”" if block.heading else " at the top of the page"
    if block.fold:
        return f"“{html_text.escape(block.fold)}”{under}"
    return f"the block{under}" if under else "an earlier block of this section"


def _linked_titles(content: str, found: list[Element], scripts: dict[str, str]) -> list:
    """Each ``<span class="filename">a.py, b.py</span>`` of a shown snippet: its names, each a link to the
    script published beside the page."""
    edits = []
    for element in found:
        if element.tag != "span" or "filename" not in element.classes or element.end is None:
            continue
        shown = [name.strip() for name in _text(content[element.start_end : element.end]).split(",")]
        if shown and all(name in scripts for name in shown):
            links = ", ".join(
                f'<a href="{name}" title="The whole script: it runs on its own">{name}</a>' for name in shown
            )
            edits.append((element.start_end, element.end, links))
    return edits
