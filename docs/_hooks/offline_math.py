"""Math renders with no request to another host.

MathJax 3 is copied from the pinned ``django-static-mathjax`` package into the site, and
``mkdocs.yml`` loads it from there. nbconvert writes its own MathJax 2 tag into notebook pages
(pointed at the placeholder ``site-mathjax`` by ``custom_mathjax_url``, so that it never names
a CDN): that tag and its configuration are removed, and the site's MathJax typesets notebook
math too (``docs/javascripts/mathjax-config.js``).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import mathjax

FILES = ("tex-chtml.js", "output/chtml/fonts/woff-v2")
NBCONVERT_MATHJAX = re.compile(
    r'<script src="site-mathjax">\s*</script>\s*<!-- MathJax configuration -->.*?</script>', re.S
)


def on_page_content(html, page, config, files):
    return NBCONVERT_MATHJAX.sub("", html)


def on_post_build(config):
    source = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    target = Path(config["site_dir"]) / "assets" / "mathjax"
    for item in FILES:
        if (source / item).is_dir():
            shutil.copytree(source / item, target / item, dirs_exist_ok=True)
        else:
            (target / item).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / item, target / item)
