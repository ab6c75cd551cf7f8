"""What the tests of snippets/mental_model/ share: the snippets' seeded data and the hand-made sentence.

Every printed number is compared with an independent float64 computation (NumPy by hand,
tests/reference.py, or PyTorch's own attention modules) on the same input data.
"""

from __future__ import annotations

import numpy as np
import torch


def seeded_randn(*shapes: tuple[int, ...]) -> list[np.ndarray]:
    """float64 copies of torch.randn draws after torch.manual_seed(0), in order."""
    torch.manual_seed(0)
    return [torch.randn(*shape).double().numpy() for shape in shapes]


def alice_tokens() -> np.ndarray:
    """Alice, met, Bob, she over the features name, verb, pronoun, female, alice, bob."""
    return np.array(
        [
            [1, 0, 0, 1, 1, 0],
            [0, 1, 0, 0, 0, 0],
            [1, 0, 0, 0, 0, 1],
            [0, 0, 1, 1, 0, 0],
        ],
        dtype=float,
    )
