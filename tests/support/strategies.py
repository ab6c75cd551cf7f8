"""Hypothesis strategies that draw attention's inputs, shared by the tests of attn_ref's functional,
tiled and backward attention, how a drawn block size reads, and the tiles it cuts."""

from __future__ import annotations

import torch
from hypothesis import strategies as st


@st.composite
def attention_inputs(draw, min_len: int = 1, max_len: int = 6, max_width: int = 8, dtype=torch.float64):
    """Random (query, key, value) with random batch dims, lengths from ``min_len`` to ``max_len``
    (L != S allowed) and widths up to ``max_width``, and the generator that drew them."""
    batch = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=2)))
    L, S = draw(st.integers(min_len, max_len)), draw(st.integers(min_len, max_len))
    d_k, d_v = draw(st.integers(1, max_width)), draw(st.integers(1, max_width))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    q = torch.randn(*batch, L, d_k, generator=g, dtype=dtype)
    k = torch.randn(*batch, S, d_k, generator=g, dtype=dtype)
    v = torch.randn(*batch, S, d_v, generator=g, dtype=dtype)
    return q, k, v, g


@st.composite
def non_finite_inputs(draw, **sizes):
    """Attention inputs (``attention_inputs(**sizes)``) with a few entries of query, key or value
    set to nan, inf or -inf, and a boolean mask that may block whole rows, or None."""
    q, k, v, g = draw(attention_inputs(**sizes))
    for _ in range(draw(st.integers(1, 3))):
        tensor = draw(st.sampled_from([q, k, v]))
        index = tuple(draw(st.integers(0, size - 1)) for size in tensor.shape)
        tensor[index] = draw(st.sampled_from([float("nan"), float("inf"), float("-inf")]))
    mask = draw(st.none() | st.just(torch.rand(q.shape[-2], k.shape[-2], generator=g) > 0.4))
    return q, k, v, mask


@st.composite
def block_sizes(draw, largest: int):
    """One int or a (block_q, block_k) pair, each from 1 to ``largest``."""
    size = st.integers(1, largest)
    return draw(size | st.tuples(size, size))


def pair(block_size):
    """A block size as (block_q, block_k)."""
    return block_size if isinstance(block_size, tuple) else (block_size, block_size)


def tiles(L, S, block_q, block_k):
    """Every tile's (rows, cols) as slices, in the order the tiled passes visit them."""
    return [
        (slice(i, min(i + block_q, L)), slice(j, min(j + block_k, S)))
        for i in range(0, L, block_q)
        for j in range(0, S, block_k)
    ]
