"""What a computation allocates: the shape of every tensor it creates, to show that no (..., L, S)
matrix is ever made (the tests of tiled and flash attention, forward and backward).

It rests on three parts of PyTorch that are not public API and may change in any release:
``torch.utils._python_dispatch.TorchDispatchMode`` (the mode that sees every ATen call),
``torch.utils._pytree.tree_leaves`` (the tensors in an operation's result) and ``OpOverload.is_view``
(which calls make a view, not memory). After an upgrade that moves one, this module fails to
import, or fails at its first operation; worse, a mode that no longer sees some calls would record
nothing, and "no (L, S) matrix" would pass without looking. tests/house/test_allocations.py checks all
three by name, and that the recorder still sees a product's result and leaves a transpose out.
"""

from __future__ import annotations

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode


class AllocationRecorder(TorchDispatchMode):
    """Records the shape of every tensor an operation creates while the mode is active.

    Views (slices, transposes, reshapes of existing memory) are left out: they allocate nothing.
    """

    def __init__(self):
        super().__init__()
        self.shapes: list[tuple[int, ...]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if not func.is_view:
            self.shapes += [tuple(t.shape) for t in pytree.tree_leaves(result) if isinstance(t, torch.Tensor)]
        return result
