"""'dog bites man' against 'man bites dog', recomputed in float64 NumPy (tests/reference.py) with
the encoding written out from Vaswani et al. (2017), section 3.5."""

import numpy as np
import torch

from tests.printed import flag, number_after
from tests.reference import attention

C = 8
DOG_BITES_MAN, MAN_BITES_DOG = [0, 1, 2], [2, 1, 0]  # ids of dog, bites, man


def _data():
    """The snippet's table and projections: its torch.randn draws after torch.manual_seed(0)."""
    torch.manual_seed(0)
    E = torch.randn(3, C).double().numpy()
    W_Q, W_K, W_V = (torch.randn(C, C).double().numpy() for _ in range(3))
    return E, W_Q, W_K, W_V


def _encoding(T: int, d: int) -> np.ndarray:
    pe = np.zeros((T, d))
    for t in range(T):
        for i in range(0, d, 2):
            pe[t, i] = np.sin(t / 10000 ** (i / d))
            pe[t, i + 1] = np.cos(t / 10000 ** (i / d))
    return pe


def _outputs(with_positions: bool):
    E, W_Q, W_K, W_V = _data()
    pe = _encoding(3, C) if with_positions else 0.0
    outs = []
    for ids in (DOG_BITES_MAN, MAN_BITES_DOG):
        X = E[ids] + pe
        out, _ = attention(X @ W_Q, X @ W_K, X @ W_V)
        outs.append(out)
    return outs


def test_without_positions_the_swap_only_reorders_the_outputs(printed):
    a, b = _outputs(with_positions=False)
    np.testing.assert_allclose(a[0], b[2], atol=1e-12)  # dog, wherever it is
    assert flag(printed, "no positions, 'dog' has the same output:") is True
    assert flag(printed, "no positions, same mean over the sentence:") is True


def test_with_positions_dog_depends_on_where_it_sits(printed):
    a, b = _outputs(with_positions=True)
    gap = np.abs(a[0] - b[2]).max()
    assert gap > 0.1
    assert flag(printed, "with positions, 'dog' has the same output:") is False
    assert abs(number_after(printed, "largest difference:") - gap) < 5e-3  # two decimals
