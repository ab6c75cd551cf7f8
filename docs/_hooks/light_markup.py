"""Code blocks weigh less and look the same: syntax spans that cannot change the look are dropped.

Pygments wraps every token of highlighted code in a ``<span class="...">``. Two kinds carry
no look of their own, and there are thousands of them on a page with much code:

- ``n``, plain names: Material colours them with ``--md-code-hl-name-color``, which its
  palettes set to the code's own colour, and the notebook stylesheet does not colour them;
- ``w``, whitespace: there is nothing to colour.

Their text stays; only the wrapper goes.
"""

from __future__ import annotations

import re

LOOKLESS_SPAN = re.compile(r'<span class="[nw]">([^<]*)</span>')


def on_page_content(html, page, config, files):
    return LOOKLESS_SPAN.sub(r"\1", html)
