"""The preview never shows a page built from old code.

``attn_ref`` is imported afresh at every build, so that the Markdown pages' code runs
against the current package. ``make serve`` passes ``--dirty``, which rebuilds only the
pages whose own file changed; when the code they import or include changed, every built
page is removed first, so that every page is rebuilt. (Tutorials need nothing more: their
executions are keyed on the code, see ``tutorial_execution``.)
"""

from __future__ import annotations

import sys
from pathlib import Path

import tutorial_execution

last_built_digest: str | None = None  # this module lives as long as `make serve` does


def on_pre_build(config):
    for name in [name for name in sys.modules if name == "attn_ref" or name.startswith("attn_ref.")]:
        del sys.modules[name]


def on_files(files, config):
    global last_built_digest
    digest = tutorial_execution.code_digest(Path(config.config_file_path).resolve().parent)
    if last_built_digest not in (None, digest):
        for file in files:
            if file.is_documentation_page():
                Path(file.abs_dest_path).unlink(missing_ok=True)
    last_built_digest = digest
    return files
