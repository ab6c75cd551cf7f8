"""MkDocs hooks that keep the site offline, light, reproducible, fresh and downloadable.

- MathJax is copied from the pinned ``django-static-mathjax`` package into the
  site, so that math renders with no request to another host.
- Notebook pages: the CDN MathJax 2 tag that nbconvert writes is dropped (the
  site's own MathJax typesets them); the ~580 KB of CSS inlined in each page
  moves to one shared, content-hashed stylesheet; nbconvert's random cell ids
  become sequential ones and a cell's printed text is shown as one block, so
  that two builds give the same bytes; and a button downloads the tutorial as an ``.ipynb`` notebook
  written next to the page.
- On every page, plots made at build become SVG files shown with their text
  alternative, and printed output is kept out of the search index.
- mkdocs-jupyter caches executed notebooks by their own text only; the cache
  folder is keyed here on the code they import too, so that a change to
  ``attn_ref`` or ``snippets`` re-executes them.
- ``attn_ref`` is re-imported on every build, and a change to the code
  rebuilds every page even under ``mkdocs serve --dirty`` (which otherwise
  rebuilds only the pages whose own file changed), so that the preview shows
  code changes without a restart.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import jupytext
import mathjax
from mkdocs.utils import get_relative_url
from mkdocs_jupyter import plugin as jupyter_plugin

ROOT = Path(__file__).resolve().parents[2]
CODE_DIRS = ("attn_ref", "snippets")
MATHJAX_FILES = ("tex-chtml.js", "output/chtml/fonts/woff-v2")
NBCONVERT_MATHJAX = re.compile(
    r'<script src="site-mathjax">\s*</script>\s*<!-- MathJax configuration -->.*?</script>', re.S
)
NBCONVERT_MERMAID = re.compile(
    r'<script type="module">\s*document\.addEventListener\("DOMContentLoaded".*?</script>', re.S
)
INLINE_STYLE = re.compile(r"<style[^>]*>(.*?)</style>", re.S)
CELL_ID = re.compile(r"cell-id=[0-9a-f]+")
NB2HTML_OPTIONS = (  # mkdocs-jupyter's options that its converter takes
    "execute", "kernel_name", "theme", "allow_errors", "show_input", "no_input", "no_prompt",
    "remove_tag_config", "highlight_extra_classes", "include_requirejs", "custom_mathjax_url",
)  # fmt: skip
# Printed output, kept out of the search index. The mark goes on the <pre>: Material's search
# stops excluding at the first closing tag of the marked element's kind, and a <div> nests divs.
PRINTED_OUTPUT = re.compile(
    r'(<div class="language-text highlight">|<div class="jp-RenderedText jp-OutputArea-output[^>]*>\s*)<pre>'
)
# Where the kernel flushed printed text in two messages: a timing accident that differs between builds.
SPLIT_PRINT = re.compile(
    r'</pre>\s*</div>\s*</div>\s*<div class="jp-OutputArea-child">\s*'
    r'<div class="jp-OutputPrompt jp-OutputArea-prompt"></div>\s*'
    r'<div class="jp-RenderedText jp-OutputArea-output" data-mime-type="text/plain" tabindex="0">\s*<pre>'
)

INLINE_PLOT = re.compile(r'<svg (?=[^>]*role="img")[^>]*aria-label="([^"]*)".*?</svg>', re.S)
# nbconvert passes notebook outputs through an HTML parser that lowercases SVG names; HTML pages
# forgive that, a standalone .svg file does not. These are the camelCase names matplotlib writes.
SVG_NAMES = {"viewbox=": "viewBox=", "<clippath": "<clipPath", "</clippath>": "</clipPath>"}
PLOT_SIZE = re.compile(r'\swidth="([\d.]+)pt" height="([\d.]+)pt"')

notebook_stylesheets: dict[str, str] = {}  # site path -> CSS, written after the build
plots: dict[str, str] = {}  # site path -> SVG, written after the build
executing: dict[str, Future] = {}  # notebook source path -> its execution in a worker process
last_built_digest: str | None = None  # this module lives as long as `mkdocs serve` does


def code_digest() -> str:
    """Hash of every file the pages and tutorials import or include."""
    digest = hashlib.sha256()
    for folder in CODE_DIRS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            digest.update(path.relative_to(ROOT).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def on_config(config):
    jupyter = config.plugins["mkdocs-jupyter"].config
    jupyter["cache_dir"] = str(ROOT / ".cache" / "mkdocs-jupyter" / code_digest())
    return config


def on_pre_build(config):
    for name in [name for name in sys.modules if name == "attn_ref" or name.startswith("attn_ref.")]:
        del sys.modules[name]


def on_files(files, config):
    global last_built_digest
    digest = code_digest()
    if last_built_digest not in (None, digest):
        for page in files.documentation_pages():  # no built page is up to date any more
            Path(page.abs_dest_path).unlink(missing_ok=True)
    last_built_digest = digest
    _execute_notebooks_in_parallel(files, config)
    return files


def _execute_notebooks_in_parallel(files, config):
    """Fill mkdocs-jupyter's cache for every uncached tutorial, two kernels at a time.

    mkdocs-jupyter executes notebooks one after the other when it renders
    them; here they start at once, beside the Markdown pages, and the plugin
    then finds each result in its cache (the same key, path and format).
    """
    plugin = config.plugins["mkdocs-jupyter"]
    jobs = {}
    for file in files.documentation_pages():
        if not plugin.should_include(file):
            continue
        key = jupyter_plugin._compute_cache_key(file.abs_src_path, plugin.config, plugin.config["execute"])
        cache_path = jupyter_plugin._get_cache_path(plugin.config["cache_dir"], key)
        if not cache_path.exists():
            jobs[file.abs_src_path] = cache_path
    if not jobs:
        return
    options = json.dumps({key: plugin.config[key] for key in (*NB2HTML_OPTIONS, "toc_depth")})
    pool = ThreadPoolExecutor(max_workers=2)
    for source, cache_path in jobs.items():
        command = [sys.executable, __file__, source, str(cache_path), options]
        executing[source] = pool.submit(subprocess.run, command, check=True, capture_output=True, text=True)
    pool.shutdown(wait=False)


def _execute_into_cache(source: str, cache_path: Path, options: dict) -> None:
    """What mkdocs-jupyter does on a cache miss, in a process of its own."""
    body = jupyter_plugin.convert.nb2html(source, **{key: options[key] for key in NB2HTML_OPTIONS})
    toc_tokens, title = jupyter_plugin._get_nb_toc_tokens(source, options["toc_depth"])
    cache_path.parent.mkdir(parents=True, exist_ok=True)
    cache_path.write_text(
        json.dumps({"content": body, "toc_tokens": toc_tokens, "title": title}), encoding="utf-8"
    )


def on_pre_page(page, config, files):
    running = executing.pop(page.file.abs_src_path, None)
    if running is not None:
        try:
            running.result()
        except subprocess.CalledProcessError as failed:  # a failing cell stops the build, as it would have
            raise RuntimeError(f"executing {page.file.src_uri} failed:\n{failed.stderr}") from None
    return page


def _is_notebook(page) -> bool:
    return page.file.src_uri.startswith("tutorials/") and page.file.src_uri.endswith(".py")


def _sequential_cell_ids(html: str) -> str:
    numbers: dict[str, str] = {}
    return CELL_ID.sub(lambda m: numbers.setdefault(m.group(0), f"cell-id={len(numbers)}"), html)


def _plots_to_files(html: str, page) -> str:
    """Move each plot made at build into a file of its own, shown with its text alternative.

    Pages stay small, and a plot shown twice is loaded once.
    """

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


def on_page_content(html, page, config, files):
    if _is_notebook(page):
        html = _notebook_content(html, page)
    html = _plots_to_files(html, page)
    return PRINTED_OUTPUT.sub(r"\1<pre data-search-exclude>", html)


def _notebook_content(html: str, page) -> str:
    html = NBCONVERT_MATHJAX.sub("", html)
    html = NBCONVERT_MERMAID.sub("", html)  # the tutorials draw no Mermaid diagrams
    header, wrapper, cells = html.partition('<div class="jupyter-wrapper">')  # styles inside plots stay
    css = "\n".join(INLINE_STYLE.findall(header))
    stylesheet = f"assets/stylesheets/notebook-{hashlib.sha256(css.encode()).hexdigest()[:12]}.css"
    notebook_stylesheets[stylesheet] = css
    html = INLINE_STYLE.sub("", header) + wrapper + cells
    html = _sequential_cell_ids(html)
    html = SPLIT_PRINT.sub("", html)
    name = Path(page.file.src_uri).with_suffix(".ipynb").name
    link = f'<link rel="stylesheet" href="{get_relative_url(stylesheet, page.url)}">'
    button = (
        f'<p><a class="md-button md-button--primary" href="{name}" download>'
        f"Download this tutorial as a notebook ({name})</a></p>"
    )
    head, found, rest = html.partition("</h1>")  # the button goes under the tutorial's title
    return link + (head + found + button + rest if found else button + html)


def on_post_page(output, page, config):
    if _is_notebook(page):
        notebook = jupytext.read(page.file.abs_src_path)
        for number, cell in enumerate(notebook.cells):
            cell.id = f"cell-{number}"  # stable ids: the download is the same file every build
        target = Path(page.file.abs_dest_path).with_name(Path(page.file.src_uri).stem + ".ipynb")
        target.parent.mkdir(parents=True, exist_ok=True)
        jupytext.write(notebook, target, fmt="ipynb")
    return output


def on_post_build(config):
    site = Path(config["site_dir"])
    for path, text in {**notebook_stylesheets, **plots}.items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_text(text)
    source = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    for item in MATHJAX_FILES:
        if (source / item).is_dir():
            shutil.copytree(source / item, site / "assets" / "mathjax" / item, dirs_exist_ok=True)
        else:
            (site / "assets" / "mathjax" / item).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / item, site / "assets" / "mathjax" / item)


if __name__ == "__main__":  # a worker of _execute_notebooks_in_parallel
    _execute_into_cache(sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3]))
