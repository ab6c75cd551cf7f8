"""What the tests of snippets/linear_as_attention/ share: the page's shapes, its data and its error bound.

Each test re-creates its snippet's random data from the same seeds (torch's generator is
only the data source) and checks what the snippet printed against float64 NumPy
computations, hand reasoning, or the error bound derived on the page,
``gamma eps cond(k) ||x||_1 max|W|``, with gamma = 16 (1 + spread of the logits).
"""

from __future__ import annotations

import numpy as np
import torch

from attn_ref.examples import LINEAR_SEED, LINEAR_SHAPE

B, D_IN, D_OUT = LINEAR_SHAPE
EPS32 = float(np.finfo(np.float32).eps)
EPS64 = float(np.finfo(np.float64).eps)


def bound(x: np.ndarray, W: np.ndarray, eps: float, cond: float = 1.0) -> np.ndarray:
    """Per-row error estimate gamma eps cond ||x||_1 max|W|, gamma = 16 (1 + max|centred log|x||)."""
    nonzero = x != 0
    logs = np.where(nonzero, np.log(np.abs(np.where(nonzero, x, 1.0))), 0.0)
    centred = np.where(
        nonzero, logs - logs.sum(-1, keepdims=True) / np.maximum(nonzero.sum(-1, keepdims=True), 1), 0
    )
    spread = np.abs(centred).max(-1)
    return 16 * eps * cond * np.abs(x).sum(-1) * np.abs(W).max() * (1 + spread)


def post_data(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x (B, d_in), W (d_out, d_in) and the post's key k (B, d_in, d_in), drawn in float32 as
    the post draws them after ``torch.manual_seed(seed)``, as float64 arrays."""
    torch.manual_seed(seed)
    x = torch.randn(B, D_IN)
    W = torch.randn(D_OUT, D_IN)
    k = torch.randn(B, D_IN, D_IN)
    return x.double().numpy(), W.double().numpy(), k.double().numpy()


def float64_data() -> tuple[torch.Generator, np.ndarray, np.ndarray]:
    """The generator seeded with LINEAR_SEED, and x (B, d_in) and W (d_out, d_in) drawn from it in
    float64, as the float64 snippets draw them; the generator goes on to what they draw next."""
    generator = torch.Generator().manual_seed(LINEAR_SEED)
    x = torch.randn(B, D_IN, generator=generator, dtype=torch.float64).numpy()
    W = torch.randn(D_OUT, D_IN, generator=generator, dtype=torch.float64).numpy()
    return generator, x, W
