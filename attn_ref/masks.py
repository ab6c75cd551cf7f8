r"""Boolean attention masks: which key each query may see. ``True`` means *may attend*.

Every mask the pages and the rest of ``attn_ref`` use is built here:

- `causal_mask`: each query sees its own position and the ones before it,
  aligned top-left (as ``is_causal=True``) or bottom-right (new tokens after a cache);
- `padding_mask`: the real keys of sequences padded to one length;
- `document_causal_mask`: causal within each request of several packed into one
  sequence (the *varlen* layout of `attn_ref.serving`);
- `sliding_window_mask`: causal over the last ``window`` positions, optionally with
  attention sinks; it takes the queries' and keys' positions, so that it serves a
  cache's last ``L`` of ``S`` positions and a rolling buffer's slots alike.

`attn_ref.serving.flex` writes masks as functions of index tensors instead
(FlexAttention's ``mask_mod``); these build the whole boolean matrix.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attn_ref import _validate

__all__ = ["causal_mask", "document_causal_mask", "padding_mask", "sliding_window_mask"]


def causal_mask(
    L: int,
    S: int | None = None,
    device: torch.device | str | None = None,
    lower_right: bool = False,
) -> Tensor:
    """Boolean mask that lets each query attend to its own position and the ones before it.

    When there are as many queries as keys, query ``i`` sees keys ``0..i``.
    When there are fewer queries than keys, an alignment has to be chosen:

    - ``lower_right=False`` (the default, and what ``is_causal=True`` does in
      PyTorch and here): query ``i`` still sees keys ``0..i``; the mask is
      aligned to the top-left corner.
    - ``lower_right=True``: the ``L`` queries are the *last* ``L`` of the
      ``S`` positions, so query ``i`` sees keys ``0..S - L + i``; the mask is
      aligned to the bottom-right corner, as
      `torch.nn.attention.bias.causal_lower_right` aligns it. This is the
      mask for new tokens that attend to a cache of earlier ones.

    Args:
        L: Number of queries.
        S: Number of keys; defaults to ``L``.
        device: Where to create the mask.
        lower_right: Align the last query with the last key.

    Returns:
        A ``(L, S)`` boolean tensor, ``True`` where attending is allowed.

    Examples:
        >>> causal_mask(3)
        tensor([[ True, False, False],
                [ True,  True, False],
                [ True,  True,  True]])
        >>> causal_mask(2, 4)  # top-left: the first query sees only key 0
        tensor([[ True, False, False, False],
                [ True,  True, False, False]])
        >>> causal_mask(2, 4, lower_right=True)  # two new tokens after two cached ones
        tensor([[ True,  True,  True, False],
                [ True,  True,  True,  True]])
    """
    _validate.count("L", L)
    S = _validate.count("S", L if S is None else S)
    if lower_right and L > S:
        raise ValueError(f"lower_right=True needs L <= S (the queries are the last L keys), got L={L}, S={S}")
    offset = S - L if lower_right else 0
    return torch.ones(L, S, dtype=torch.bool, device=device).tril(diagonal=offset)


def padding_mask(lengths: Tensor | list[int], S: int | None = None) -> Tensor:
    """Boolean key mask for a batch of sequences padded to a common length.

    Args:
        lengths: ``(B,)`` true length of each sequence.
        S: Padded length; defaults to the longest sequence.

    Returns:
        A ``(B, 1, S)`` boolean tensor, ``True`` on real tokens. The middle
        dimension of one broadcasts over the queries, so the result can be
        passed as ``attn_mask`` for inputs of shape ``(B, L, d)``; for
        ``(B, H, L, d_k)`` inputs use ``mask[:, None]``.

    Examples:
        >>> padding_mask([3, 1])
        tensor([[[ True,  True,  True]],
        <BLANKLINE>
                [[ True, False, False]]])
    """
    lengths = torch.as_tensor(lengths)
    if lengths.ndim != 1 or lengths.dtype.is_floating_point or lengths.dtype == torch.bool:
        raise ValueError(
            f"lengths must be a 1-D integer sequence of shape (B,), got shape "
            f"{tuple(lengths.shape)} and dtype {lengths.dtype}"
        )
    longest = int(lengths.max())
    S = longest if S is None else _validate.count("S", S, minimum=0)
    if (lengths < 0).any() or longest > S:
        raise ValueError(f"lengths must lie in [0, S={S}], got {lengths.tolist()}")
    positions = torch.arange(S, device=lengths.device)  # (S,)
    return (positions[None, :] < lengths[:, None])[:, None, :]  # (B, S) -> (B, 1, S)


def document_causal_mask(
    q_seq: Tensor, q_pos: Tensor, k_seq: Tensor | None = None, k_pos: Tensor | None = None
) -> Tensor:
    """Causal attention within each request of a packed sequence.

    Requests packed one after another into one sequence (the *varlen* layout)
    must not see each other. A query of request $r$ at position $p$ may see a
    key of the same request at a position $\\le p$, and nothing else.

    Args:
        q_seq: ``(L,)`` the request of each query.
        q_pos: ``(L,)`` each query's position within its request.
        k_seq: ``(S,)`` the request of each key; defaults to ``q_seq``.
        k_pos: ``(S,)`` each key's position; defaults to ``q_pos``.

    Returns:
        ``(L, S)`` boolean, ``True`` where a query may see a key.

    Examples:
        Two requests of lengths 2 and 3 packed into one sequence of 5:

        >>> seq, pos = torch.tensor([0, 0, 1, 1, 1]), torch.tensor([0, 1, 0, 1, 2])
        >>> document_causal_mask(seq, pos).int()
        tensor([[1, 0, 0, 0, 0],
                [1, 1, 0, 0, 0],
                [0, 0, 1, 0, 0],
                [0, 0, 1, 1, 0],
                [0, 0, 1, 1, 1]], dtype=torch.int32)
    """
    k_seq = q_seq if k_seq is None else k_seq
    k_pos = q_pos if k_pos is None else k_pos
    for name, x in (("q_seq", q_seq), ("q_pos", q_pos), ("k_seq", k_seq), ("k_pos", k_pos)):
        _validate.index_vector(name, x)
    _validate.same_length(q_seq=q_seq, q_pos=q_pos)
    _validate.same_length(k_seq=k_seq, k_pos=k_pos)
    same = q_seq[:, None] == k_seq[None, :]  # (L, S)
    return same & (k_pos[None, :] <= q_pos[:, None])  # (L, S)


def sliding_window_mask(q_pos: Tensor, k_pos: Tensor, window: int, num_sinks: int = 0) -> Tensor:
    r"""Causal attention to the last ``window`` positions, and to the first ``num_sinks``.

    A query at position $i$ sees the keys at positions $j$ with
    $i - W < j \le i$ (itself and the $W - 1$ before it), and, with attention
    sinks, also those with $j <$ ``num_sinks`` (Mistral 7B's sliding window,
    with sinks beside it). It reads positions, not indices, so one function
    serves every layout: new tokens after a cache are the last ``L`` of ``S``
    positions, ``torch.arange(S - L, S)`` against ``torch.arange(S)``; a
    rolling buffer passes the position each slot holds, in any order. With
    ``window >= S`` and no sinks, the first gives `causal_mask` with
    ``lower_right=True``.

    Args:
        q_pos: ``(L,)`` the queries' positions.
        k_pos: ``(S,)`` the keys' positions.
        window: $W \ge 1$: positions each query sees, itself included.
        num_sinks: First positions every query keeps seeing.

    Returns:
        ``(L, S)`` boolean, ``True`` where a query may see a key.

    Examples:
        Six tokens, a window of 3 and one sink:

        >>> positions = torch.arange(6)
        >>> sliding_window_mask(positions, positions, window=3, num_sinks=1).int()
        tensor([[1, 0, 0, 0, 0, 0],
                [1, 1, 0, 0, 0, 0],
                [1, 1, 1, 0, 0, 0],
                [1, 1, 1, 1, 0, 0],
                [1, 0, 1, 1, 1, 0],
                [1, 0, 0, 1, 1, 1]], dtype=torch.int32)

        Three new tokens after two cached ones (the last 3 of 5), a window of 2:

        >>> sliding_window_mask(torch.arange(2, 5), torch.arange(5), window=2).int()
        tensor([[0, 1, 1, 0, 0],
                [0, 0, 1, 1, 0],
                [0, 0, 0, 1, 1]], dtype=torch.int32)
    """
    _validate.index_vector("q_pos", q_pos)
    _validate.index_vector("k_pos", k_pos)
    _validate.count("window", window)
    _validate.count("num_sinks", num_sinks, minimum=0)
    distance = q_pos[:, None] - k_pos[None, :]  # (L, S)
    return (distance >= 0) & ((distance < window) | (k_pos[None, :] < num_sinks))
