"""bugs/sink_dropped.py: a sink left out of the softmax's denominator. The symptom and the fix
against S / (S + e^sigma) by hand; the random check recomputed here in float64 NumPy, with the sink
written out as one more column of the softmax."""

import math

import numpy as np
import torch

from tests.support.printed import assert_shows, rounded
from tests.support.reference import softmax


def test_the_symptom_and_the_fix(printed):
    sink = np.array([0.5, 1.0, 1.5, 2.0])
    right = 10 / (10 + np.exp(sink))
    assert (right < 0.9).all()  # far from the dropped sink's 1
    assert_shows(printed, [(1.0, 5e-4)] * 4 + rounded(right, 4) + rounded(right, 4))


def test_the_check_recomputed_in_float64(printed):
    g = torch.Generator().manual_seed(1)
    worst_dropped = 0.0
    for _ in range(20):
        q, k, v = (torch.randn(2, 4, 5, 8, generator=g).double().numpy() for _ in range(3))
        sink = (2 * torch.randn(4, generator=g)).double().numpy()
        s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(8)
        column = np.broadcast_to(sink[None, :, None, None], (2, 4, 5, 1))
        with_sink = softmax(np.concatenate([s, column], -1))[..., :-1] @ v
        worst_dropped = max(worst_dropped, np.abs(softmax(s) @ v - with_sink).max())
    assert worst_dropped > 0.01  # the dropped sink is caught, far above float32's rounding
    lines = printed.splitlines()
    dropped = next(line for line in lines if line.startswith("attention_dropped:"))
    fixed = next(line for line in lines if line.startswith("attention_with_sink:"))
    assert dropped.endswith("FAILS") and fixed.endswith("passes")
    shown = float(dropped.split("difference ")[1].split(",")[0])
    assert abs(shown - worst_dropped) <= 0.05 * worst_dropped  # printed to 2 significant digits
    assert float(fixed.split("difference ")[1].split(",")[0]) < 1e-5
