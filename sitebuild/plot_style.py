"""The site's matplotlib settings (``sitebuild/matplotlibrc``), for the plots made while it builds:
`use` sets them in this process, for the Markdown pages' blocks; `sitebuild.execution` gives the
tutorials' kernels the file through MATPLOTLIBRC."""

from __future__ import annotations

import os
import sys
from pathlib import Path

RC_FILE = Path(__file__).resolve().parent / "matplotlibrc"


def use() -> None:
    os.environ["MATPLOTLIBRC"] = str(RC_FILE)  # for a later first import of matplotlib
    if "matplotlib" in sys.modules:  # imported already: read the file now
        import matplotlib

        matplotlib.rc_file(RC_FILE)
