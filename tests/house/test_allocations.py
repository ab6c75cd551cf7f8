"""tests/support/allocations.py leans on PyTorch internals (its docstring lists them): each is still
where it was, and the recorder built on them still sees what a computation allocates. A PyTorch
upgrade that moves one fails here, by name, rather than as an import error in the tiled and
backward tests or, worse, as a recorder that sees nothing and lets them pass."""

from __future__ import annotations

import importlib

import pytest
import torch

INTERNALS = [  # (module, attribute): what tests/support/allocations.py uses
    ("torch.utils._python_dispatch", "TorchDispatchMode"),
    ("torch.utils._pytree", "tree_leaves"),
]


@pytest.mark.parametrize(("module", "name"), INTERNALS, ids=[f"{m}.{n}" for m, n in INTERNALS])
def test_the_internals_it_imports_are_still_there(module, name):
    try:
        found = getattr(importlib.import_module(module), name, None)
    except ImportError:
        found = None
    assert found is not None, (
        f"PyTorch {torch.__version__} has no {module}.{name}: tests/support/allocations.py needs "
        "another way to see what an operation allocates (its docstring says what it relies on)"
    )


def test_an_operator_still_says_whether_it_makes_a_view():
    assert torch.ops.aten.t.default.is_view and not torch.ops.aten.mm.default.is_view, (
        f"PyTorch {torch.__version__}: OpOverload.is_view no longer tells a view from an allocation; "
        "tests/support/allocations.py reads it to leave views out"
    )


def test_the_recorder_sees_a_products_result_and_not_a_transpose():
    from tests.support.allocations import AllocationRecorder

    a, b = torch.ones(2, 3), torch.ones(4, 3)
    with AllocationRecorder() as recorder:
        b_t = b.t()  # a view of b's memory
        product = a @ b_t
    assert product.shape == (2, 4)
    assert recorder.shapes == [(2, 4)], (
        f"PyTorch {torch.__version__}: the recorder saw {recorder.shapes} for one (2, 3) @ (3, 4) "
        "product and one transpose, not [(2, 4)]; TorchDispatchMode or is_view changed "
        "(tests/support/allocations.py)"
    )
