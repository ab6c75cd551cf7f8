"""What a computation allocates: the shape of every tensor it creates, to show that no (..., L, S)
matrix is ever made (the tests of tiled and flash attention, forward and backward)."""

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
