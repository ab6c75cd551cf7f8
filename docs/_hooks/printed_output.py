"""Printed output stays out of the search index.

A reader searching for "softmax" wants the page that teaches it, not every page that printed
a tensor. The code itself stays searchable. The mark goes on the ``<pre>``: Material's search
stops excluding at the first closing tag of the marked element's kind, and a ``<div>`` nests
divs.
"""

from __future__ import annotations

import re

PRINTED_OUTPUT = re.compile(
    r'(<div class="language-text highlight">|<div class="jp-RenderedText jp-OutputArea-output[^>]*>\s*)<pre>'
)


def on_page_content(html, page, config, files):
    return PRINTED_OUTPUT.sub(r"\1<pre data-search-exclude>", html)
