"""The variables of a finished script or notebook that a test may read: data, not code.

A tutorial's kernel and a snippet's process both end by saving their variables with `save`, so
that a test compares what the code computed with its own reference instead of reading the
numbers back from printed text. Kept: values of builtin, torch, NumPy and ``attn_ref`` types
(tensors, arrays, numbers, strings, lists, modules such as a trained model) that pickle; left
out: dunder names, functions, classes, figures and IPython's own names (``_``, ``_i3``, ``Out``...).

This file is also run by path (``runpy.run_path``) inside a notebook kernel, where the project is
not importable: it imports nothing of the project.
"""

from __future__ import annotations

import pickle
import re
import sys
from pathlib import Path

KEPT_PACKAGES = {"builtins", "torch", "numpy", "attn_ref"}
IPYTHON_NAMES = re.compile(r"_+|_i+\d*|_\d+|_[odi]h|__\w+__|In|Out|exit|quit|get_ipython")


def kept(namespace: dict) -> dict:
    """The entries of ``namespace`` worth saving (see the module's docstring)."""
    torch = sys.modules.get("torch")
    chosen = {}
    for name, value in namespace.items():
        if IPYTHON_NAMES.fullmatch(name):
            continue
        if callable(value) and not (torch and isinstance(value, torch.nn.Module)):
            continue  # functions and classes
        if type(value).__module__.partition(".")[0] not in KEPT_PACKAGES:
            continue  # figures, and the script's own classes
        try:
            pickle.dumps(value)
        except Exception:
            continue
        chosen[name] = value
    return chosen


def save(namespace: dict, path: str | Path) -> None:
    """Pickle the kept entries of ``namespace`` to ``path``."""
    with open(path, "wb") as file:
        pickle.dump(kept(namespace), file)


def load(path: str | Path) -> dict:
    with open(path, "rb") as file:
        return pickle.load(file)
