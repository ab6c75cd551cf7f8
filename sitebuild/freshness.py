"""The preview never shows a page built from old code.

``attn_ref`` is imported afresh at every build, so that the Markdown pages' code runs against the
current package. ``make serve`` rebuilds only the pages whose own file changed (``--dirty``); when
the code they import or include changed, `stale_pages` names every page, so that all are built
again. (Tutorials need nothing more: their executions are keyed on the code, see
`sitebuild.execution`.)

This module is imported normally, so it lives as long as the ``make serve`` process, across
rebuilds; the digest of the code last built is kept here.
"""

from __future__ import annotations

import sys
from pathlib import Path

from sitebuild import execution

last_built_digest: str | None = None


def forget_imported_code() -> None:
    """Drop ``attn_ref`` from the imported modules, so that the next import reads its files again."""
    for name in [name for name in sys.modules if name == "attn_ref" or name.startswith("attn_ref.")]:
        del sys.modules[name]


def code_changed(root: Path) -> bool:
    """Whether the code the pages import or include changed since the last build of this process."""
    global last_built_digest
    digest = execution.code_digest(root)
    changed = last_built_digest not in (None, digest)
    last_built_digest = digest
    return changed
