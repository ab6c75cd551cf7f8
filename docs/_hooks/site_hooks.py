"""MkDocs hooks that keep the site offline, fresh and downloadable.

- MathJax is copied from the pinned ``django-static-mathjax`` package into the
  site, so that math renders with no request to another host.
- Notebook pages lose the CDN MathJax 2 tag that nbconvert writes (the site's
  own MathJax typesets them), and gain a button to download the tutorial as
  an ``.ipynb`` notebook, written next to the page.
- mkdocs-jupyter caches executed notebooks by their own text only; the cache
  folder is keyed here on the code they import too, so that a change to
  ``attn_ref`` or ``snippets`` re-executes them.
- ``attn_ref`` is re-imported on every build, so that ``mkdocs serve`` shows
  code changes without a restart.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import sys
from pathlib import Path

import jupytext
import mathjax

ROOT = Path(__file__).resolve().parents[2]
CODE_DIRS = ("attn_ref", "snippets")
MATHJAX_FILES = ("tex-chtml.js", "output/chtml/fonts/woff-v2")
NBCONVERT_MATHJAX = re.compile(r'<script src="site-mathjax">\s*</script>')


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


def _is_notebook(page) -> bool:
    return page.file.src_uri.startswith("tutorials/") and page.file.src_uri.endswith(".py")


def on_page_content(html, page, config, files):
    if not _is_notebook(page):
        return html
    html = NBCONVERT_MATHJAX.sub("", html)
    name = Path(page.file.src_uri).with_suffix(".ipynb").name
    button = (
        f'<p><a class="md-button md-button--primary" href="{name}" download>'
        f"Download this tutorial as a notebook ({name})</a></p>"
    )
    head, found, rest = html.partition("</h1>")  # the button goes under the tutorial's title
    return head + found + button + rest if found else button + html


def on_post_page(output, page, config):
    if _is_notebook(page):
        notebook = jupytext.read(page.file.abs_src_path)
        target = Path(page.file.abs_dest_path).with_name(Path(page.file.src_uri).stem + ".ipynb")
        target.parent.mkdir(parents=True, exist_ok=True)
        jupytext.write(notebook, target, fmt="ipynb")
    return output


def on_post_build(config):
    source = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    target = Path(config["site_dir"]) / "assets" / "mathjax"
    for item in MATHJAX_FILES:
        if (source / item).is_dir():
            shutil.copytree(source / item, target / item, dirs_exist_ok=True)
        else:
            (target / item).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / item, target / item)
