"""Every executed block that shows a snippet's code is titled with the snippet's path.

A reader who doubts a number opens that file and its test, which mirrors its path
(``tests/snippets/<topic>/test_<name>.py``). The path is written once, in the ``--8<--`` line;
`titled` copies it into the block's ``title`` before the page is rendered.
"""

from __future__ import annotations

import re

# Indented too: a block inside a collapsed "??? ..." block, such as an exercise's solution.
SNIPPET_BLOCK = re.compile(
    r'^( *)```python (exec="true" source="[^"]+"[^\n]*)\n\1--8<-- "(snippets/[^":]+)', re.M
)


def titled(markdown: str) -> str:
    """``markdown`` with a ``title="snippets/..."`` on each executed block that shows a snippet."""
    return SNIPPET_BLOCK.sub(r'\1```python \2 title="\3"\n\1--8<-- "\3', markdown)
