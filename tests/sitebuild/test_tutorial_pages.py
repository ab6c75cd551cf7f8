"""sitebuild.tutorial_pages: an executed notebook becomes a Markdown page, and that page renders
with the site's Markdown extensions into the blocks a reader sees (fast: no site build)."""

from __future__ import annotations

from html.parser import HTMLParser

import markdown
import nbformat
import pytest
import yaml
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
from properdocs.utils import meta

from sitebuild.page_html import elements
from sitebuild.tutorial_pages import markdown_page
from sitelook.project import ROOT

PLOT_SVG = '<svg role="img" aria-label="a plot"><rect/></svg>'


def _code(source: str, *outputs, tags=()) -> nbformat.NotebookNode:
    cell = new_code_cell(source, outputs=list(outputs))
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


def _printed(text: str) -> nbformat.NotebookNode:
    return new_output("stream", name="stdout", text=text)


NOTEBOOK = new_notebook(
    cells=[
        new_markdown_cell("# A tutorial\n\nSome prose with $x^2$."),
        _code("print(1 + 1)", _printed("2\n")),
        _code(
            "draw()",
            new_output("display_data", data={"text/html": PLOT_SVG, "text/plain": "<svg>"}),
            tags=["plot"],
        ),
        new_markdown_cell(
            'Prose.\n\n<details class="note">\n<summary>Going deeper: <code>peak_memory</code></summary>\n\n'
            "A side topic.\n\n</details>"
        ),
        _code("side = 3\nprint(side)", _printed("3\n"), tags=["deeper"]),
        _code("timed()", _printed("12 ms\n"), tags=["measured"]),
        new_markdown_cell("**Exercise.**"),
        _code(
            "answer = 42\nanswer",
            new_output("execute_result", data={"text/plain": "42"}, execution_count=6),
            tags=["solution"],
        ),
    ]
)


@pytest.fixture(scope="module")
def page() -> str:
    return markdown_page(NOTEBOOK, "tiny.ipynb")


@pytest.fixture(scope="module")
def html(page) -> str:
    """The page rendered with the site's own Markdown extensions, as MkDocs renders it."""
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)
    names, options = [], {}
    for entry in config["markdown_extensions"]:
        name, settings = next(iter(entry.items())) if isinstance(entry, dict) else (entry, {})
        if name.startswith("pymdownx.snippets") or name == "toc":
            continue  # snippets need files; the toc's permalinks do not matter here
        names.append(name)
        options[name] = {k: v == "true" if v in ("true", "false") else v for k, v in (settings or {}).items()}
    return markdown.markdown(page, extensions=names, extension_configs=options)


def test_the_page_starts_with_the_title_and_the_download_button(page):
    title, blank, button = page.splitlines()[:3]
    assert (title, blank) == ("# A tutorial", "")
    assert button.startswith("[Download this tutorial as a notebook (tiny.ipynb)](tiny.ipynb)")


def test_code_then_what_it_printed(html):
    blocks = [
        e for e in elements(html) if e.tag == "div" and e.classes & {"language-python", "language-text"}
    ]
    kinds = [("python" if "language-python" in e.classes else "text") for e in blocks]
    assert kinds[:2] == ["python", "text"]


def _text(fragment: str) -> str:
    """The text of an HTML fragment, tags dropped (code is highlighted token by token)."""
    parts = []
    parser = HTMLParser()
    parser.handle_data = parts.append
    parser.feed(fragment)
    return "".join(parts)


def _details(html: str) -> dict[str, tuple]:
    """Each collapsed block: its summary -> (its classes, its HTML, its text)."""
    found = elements(html)
    blocks = {}
    for e in found:
        if e.tag == "details":
            summary = next(s for s in found if s.tag == "summary" and s.parent is e)
            title = html[summary.start_end : summary.end]
            inside = [
                d for d in found if d.start > e.start and d.end_end is not None and d.end_end < e.end_end
            ]
            blocks[title] = (
                e.classes,
                [d.classes for d in inside if d.tag == "div"],
                _text(html[e.start : e.end_end]),
            )
    return blocks


def test_plotting_code_is_collapsed_and_its_plot_stays_in_view(html):
    classes, raw, text = _details(html)["Plotting code"]
    assert "example" in classes and "draw()" in text and "<svg" not in raw
    assert PLOT_SVG in html  # the plot itself, raw, for sitebuild.page_html to turn into a file


def test_a_deeper_cell_goes_into_the_side_topic_before_it(html):
    classes, _, text = _details(html)["Going deeper: <code>peak_memory</code>"]
    assert "note" in classes and "A side topic." in text and "side = 3" in text and "3\n" in text


def test_a_solution_is_collapsed_with_its_result(html):
    classes, _, text = _details(html)["Solution"]
    assert "success" in classes and "answer = 42" in text and text.rstrip().endswith("42")


def test_a_measured_cell_is_marked_for_make_measure(html):
    (measured,) = [e for e in elements(html) if e.tag == "div" and "measured" in e.classes]
    text = _text(html[measured.start : measured.end_end])
    assert "timed()" in text and "12 ms" in text


def test_a_deeper_cell_needs_a_side_topic_before_it():
    notebook = new_notebook(
        cells=[new_markdown_cell("# T\n\nNo side topic."), _code("x = 1", tags=["deeper"])]
    )
    with pytest.raises(ValueError, match="deeper must follow a markdown cell that ends with <details>"):
        markdown_page(notebook, "t.ipynb")


def test_a_failed_cell_or_an_output_it_cannot_show_is_refused():
    error = new_output("error", ename="ZeroDivisionError", evalue="division by zero", traceback=[])
    with pytest.raises(ValueError, match="ZeroDivisionError"):
        markdown_page(new_notebook(cells=[new_markdown_cell("# T"), _code("1/0", error)]), "t.ipynb")
    image = new_output("display_data", data={"image/png": "..."})
    with pytest.raises(ValueError, match="image/png"):
        markdown_page(new_notebook(cells=[new_markdown_cell("# T"), _code("show()", image)]), "t.ipynb")


def test_a_tutorial_must_start_with_its_title():
    with pytest.raises(ValueError, match="first line is its '# Title'"):
        markdown_page(new_notebook(cells=[new_markdown_cell("No title")]), "t.ipynb")


def test_code_with_backticks_gets_a_longer_fence():
    page = markdown_page(new_notebook(cells=[new_markdown_cell("# T"), _code('s = """```"""')]), "t.ipynb")
    assert '````python\ns = """```"""\n````' in page


def test_the_notebooks_search_setting_becomes_the_pages_front_matter():
    """A tutorial boosts its rank in search as a Markdown page does (jupytext's header carries it)."""
    notebook = new_notebook(cells=[new_markdown_cell("# Tiles\n\nProse.")], metadata={"search": {"boost": 2}})
    source, settings = meta.get_data(markdown_page(notebook, "tiles.ipynb"))
    assert settings == {"search": {"boost": 2}} and source.startswith("# Tiles\n\n[Download")
    assert meta.get_data(markdown_page(NOTEBOOK, "tiny.ipynb"))[1] == {}


def test_checking_code_is_collapsed_and_what_it_printed_stays_in_view():
    notebook = new_notebook(
        cells=[new_markdown_cell("# Checks"), _code("print(2 + 2 == 4)", _printed("True\n"), tags=["check"])]
    )
    page = markdown_page(notebook, "checks.ipynb")
    folded, shown = page.split("```text")
    assert '??? example "Checking code"' in folded and "    print(2 + 2 == 4)" in folded
    assert shown.lstrip("\n").startswith("True") and "print(" not in shown
