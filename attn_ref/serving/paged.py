"""The paged key/value cache: fixed-size blocks, a free list, and a block table per request.

`PagedKVCache` keeps every layer's keys and values in one pool of blocks, as
vLLM's PagedAttention does; requests can share blocks (reference counts,
copy on write). `attn_ref.serving.scheduler.serve` runs a batch on it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from attn_ref import _validate

__all__ = ["PagedKVCache"]


@dataclass
class PagedKVCache:
    """Keys and values in fixed-size blocks, handed out from a free list, found through block tables.

    Every layer holds one pool of ``num_blocks`` blocks, each of
    ``block_size`` positions: ``keys[layer]`` of shape
    ``(num_blocks, H_kv, block_size, d_k)``. A request owns a *block table*,
    the list of its blocks in order: its position ``p`` lives in block
    ``table[p // block_size]``, slot ``p % block_size``. Blocks carry a
    reference count, so that requests can share the blocks of a common prompt
    (`fork`, then `truncate` to the prompt's length, or `share` of a list of
    blocks); writing into a shared block copies it first (copy on write). A
    holder other than a request, such as a prefix cache
    (`attn_ref.serving.RadixCache`), takes and gives back references with
    `retain` and `drop`. Only its methods change its fields.

    Attributes:
        num_layers: Attention layers.
        num_blocks: Blocks in the pool.
        block_size: Positions per block.
        num_kv_heads: Key/value heads ``H_kv``.
        head_dim: ``d_k``.
        dtype: The pool's floating dtype (float32 by default; float64 for exact checks).
        keys: One ``(num_blocks, H_kv, block_size, d_k)`` pool per layer.
        values: Same as ``keys``.
        tables: Request id -> its block table.
        lengths: Request id -> positions it holds.
        ref_counts: Requests using each block; 0 for a free block.
        free: The free list: blocks no request uses, next one last.

    Examples:
        >>> cache = PagedKVCache(
        ...     num_layers=1, num_blocks=4, block_size=2, num_kv_heads=1, head_dim=3
        ... )
        >>> cache.reserve("a", 3)  # 3 positions: 2 blocks
        range(0, 3)
        >>> cache.tables["a"], cache.num_free
        ([0, 1], 2)
        >>> cache.fork("a", "b")  # "b" shares "a"'s blocks
        >>> cache.reserve("b", 1)  # position 3 lands in shared block 2: copied first
        range(3, 4)
        >>> cache.tables["b"], cache.ref_counts
        ([0, 2], [2, 1, 1, 0])
        >>> cache.release("a"); cache.release("b"); cache.num_free
        4
    """

    num_layers: int
    num_blocks: int
    block_size: int
    num_kv_heads: int
    head_dim: int
    dtype: torch.dtype = torch.float32
    keys: list[Tensor] = field(default_factory=list, repr=False)
    values: list[Tensor] = field(default_factory=list, repr=False)
    tables: dict = field(default_factory=dict)
    lengths: dict = field(default_factory=dict)
    ref_counts: list[int] = field(default_factory=list)
    free: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        for name in ("num_layers", "num_blocks", "block_size", "num_kv_heads", "head_dim"):
            _validate.count(name, getattr(self, name))
        shape = (self.num_blocks, self.num_kv_heads, self.block_size, self.head_dim)
        if not (isinstance(self.dtype, torch.dtype) and self.dtype.is_floating_point):
            raise TypeError(f"dtype must be a floating torch.dtype, got {self.dtype!r}")
        self.keys = [torch.zeros(shape, dtype=self.dtype) for _ in range(self.num_layers)]
        self.values = [torch.zeros(shape, dtype=self.dtype) for _ in range(self.num_layers)]
        self.ref_counts = [0] * self.num_blocks
        self.free = list(range(self.num_blocks))[::-1]  # block 0 is handed out first

    @property
    def num_free(self) -> int:
        """Blocks on the free list."""
        return len(self.free)

    @property
    def capacity(self) -> int:
        """Positions the whole pool holds."""
        return self.num_blocks * self.block_size

    @property
    def block_nbytes(self) -> int:
        """Bytes of one block, keys and values of every layer."""
        return 2 * self.num_layers * self.keys[0][0].nbytes

    def blocks_for(self, num_positions: int) -> int:
        """Blocks that ``num_positions`` positions take: $\\lceil n / \\text{block\\_size} \\rceil$."""
        return -(-num_positions // self.block_size)

    def blocks_needed(self, request: object, num_new: int) -> int:
        """Blocks taken from the free list if ``request`` grows by ``num_new`` positions."""
        length = self.lengths.get(request, 0)
        table = self.tables.get(request, [])
        extra = self.blocks_for(length + num_new) - len(table)
        last_shared = length % self.block_size and num_new and self.ref_counts[table[-1]] > 1
        return max(extra, 0) + bool(last_shared)

    def _take(self) -> int:
        block = self.free.pop()
        self.ref_counts[block] = 1
        return block

    def reserve(self, request: object, num_new: int) -> range:
        """Make room for ``num_new`` more positions of ``request``; return their positions.

        Raises:
            ValueError: The request would hold more positions than the whole
                pool, or the free list has too few blocks now.
        """
        _validate.count("num_new", num_new, minimum=0)
        length = self.lengths.get(request, 0)
        if length + num_new > self.capacity:
            raise ValueError(
                f"request {request!r} needs {length + num_new} positions, more than the whole cache "
                f"holds: {self.num_blocks} blocks of {self.block_size} = {self.capacity}"
            )
        needed = self.blocks_needed(request, num_new)
        if needed > self.num_free:
            raise ValueError(
                f"request {request!r} needs {needed} more blocks for {num_new} positions; "
                f"only {self.num_free} of {self.num_blocks} are free"
            )
        table = self.tables.setdefault(request, [])
        if length % self.block_size and num_new and self.ref_counts[table[-1]] > 1:
            shared, table[-1] = table[-1], self._take()  # copy on write: the last block is shared
            self.ref_counts[shared] -= 1
            for pool in (*self.keys, *self.values):
                pool[table[-1]] = pool[shared]
        while len(table) < self.blocks_for(length + num_new):
            table.append(self._take())
        self.lengths[request] = length + num_new
        return range(length, length + num_new)

    def fork(self, parent: object, child: object) -> None:
        """Let ``child`` start with ``parent``'s positions, sharing its blocks instead of copying them."""
        self._check_table(parent)
        if child in self.tables:
            raise ValueError(f"request {child!r} already holds blocks; fork needs a new request id")
        self.tables[child] = list(self.tables[parent])
        self.lengths[child] = self.lengths[parent]
        for block in self.tables[child]:
            self.ref_counts[block] += 1

    def truncate(self, request: object, length: int) -> None:
        """Keep the first ``length`` positions of ``request`` and give back its blocks after them.

        A block given back returns to the free list when no request uses it.
        The last block kept may be shared and partly filled: the next `reserve`
        that writes into it copies it first.

        Examples:
            >>> cache = PagedKVCache(
            ...     num_layers=1, num_blocks=4, block_size=2, num_kv_heads=1, head_dim=3
            ... )
            >>> cache.reserve("a", 5)  # 3 blocks
            range(0, 5)
            >>> cache.fork("a", "b")
            >>> cache.truncate("b", 3)  # "b" keeps 3 positions: 2 blocks, both shared
            >>> cache.tables["b"], cache.lengths["b"], cache.ref_counts
            ([0, 1], 3, [2, 2, 1, 0])
        """
        table = self._check_table(request)
        _validate.count("length", length, minimum=0, maximum=self.lengths[request])
        kept = self.blocks_for(length)
        self.drop(reversed(table[kept:]))
        del table[kept:]
        self.lengths[request] = length

    def share(self, request: object, blocks: Sequence[int]) -> None:
        """Let a new ``request`` start with ``blocks``, full blocks that others hold, sharing them.

        The request holds ``len(blocks) * block_size`` positions; each block's
        count grows by one. A prefix cache hands a request the blocks of its
        cached prefix this way.

        Examples:
            >>> cache = PagedKVCache(
            ...     num_layers=1, num_blocks=4, block_size=2, num_kv_heads=1, head_dim=3
            ... )
            >>> cache.reserve("a", 4)
            range(0, 4)
            >>> cache.share("b", [0])  # b starts with a's first block: 2 positions
            >>> cache.lengths["b"], cache.ref_counts
            (2, [2, 1, 0, 0])
        """
        if request in self.tables:
            raise ValueError(f"request {request!r} already holds blocks; share needs a new request id")
        blocks = list(blocks)
        self._check_held("blocks", blocks)
        for block in blocks:
            self.ref_counts[block] += 1
        self.tables[request] = blocks
        self.lengths[request] = len(blocks) * self.block_size

    def retain(self, blocks: Iterable[int]) -> None:
        """Take one more reference to each of ``blocks``, for a holder that is not a request."""
        blocks = list(blocks)
        self._check_held("blocks", blocks)
        for block in blocks:
            self.ref_counts[block] += 1

    def drop(self, blocks: Iterable[int]) -> None:
        """Give back one reference to each of ``blocks``; a block no one holds returns to the free list."""
        blocks = list(blocks)
        self._check_held("blocks", blocks)
        for block in blocks:
            self.ref_counts[block] -= 1
            if self.ref_counts[block] == 0:
                self.free.append(block)

    def _check_held(self, name: str, blocks: list[int]) -> None:
        for i, block in enumerate(blocks):
            if not (isinstance(block, int) and 0 <= block < self.num_blocks):
                raise ValueError(f"{name}[{i}] = {block!r} is not a block of the pool [0, {self.num_blocks})")
            if self.ref_counts[block] == 0:
                raise ValueError(f"{name}[{i}] = block {block} is free: no one holds it")

    def release(self, request: object) -> None:
        """Give back ``request``'s blocks: each returns to the free list when no request uses it."""
        self.truncate(request, 0)
        del self.tables[request], self.lengths[request]

    def _check_table(self, request: object) -> list[int]:
        if request not in self.tables:
            raise ValueError(
                f"request {request!r} holds no blocks: it was never admitted, or it was released"
            )
        table = self.tables[request]
        for i, block in enumerate(table):
            if not (isinstance(block, int) and 0 <= block < self.num_blocks):
                raise ValueError(
                    f"block table of request {request!r} has entry {i} = {block!r}, "
                    f"not a block of the pool [0, {self.num_blocks})"
                )
            if self.ref_counts[block] == 0:
                raise ValueError(
                    f"block table of request {request!r} points at block {block} (entry {i}), "
                    "which is free: it was released, and may be handed to another request"
                )
        if len(table) < self.blocks_for(self.lengths[request]):
            raise ValueError(
                f"block table of request {request!r} has {len(table)} blocks for "
                f"{self.lengths[request]} positions; it needs {self.blocks_for(self.lengths[request])}"
            )
        return table

    def write(self, layer: int, request: object, positions: range, key: Tensor, value: Tensor) -> None:
        """Store ``key`` and ``value`` ``(H_kv, len(positions), d_k)`` at ``positions`` of ``request``."""
        table = self._check_table(request)
        expected = (self.num_kv_heads, len(positions), self.head_dim)
        _validate.shape("key", key, expected, "(H_kv, len(positions), d_k)")
        _validate.shape("value", value, expected, "(H_kv, len(positions), d_k)")
        if positions.stop > self.lengths[request]:
            raise ValueError(
                f"positions {positions} of request {request!r} were not reserved "
                f"(it holds {self.lengths[request]}); call reserve first"
            )
        for i, p in enumerate(positions):
            block, slot = table[p // self.block_size], p % self.block_size
            self.keys[layer][block, :, slot] = key[:, i]  # (H_kv, d_k)
            self.values[layer][block, :, slot] = value[:, i]

    def gather(self, layer: int, request: object) -> tuple[Tensor, Tensor]:
        """Read ``request``'s keys and values through its block table: ``(H_kv, length, d_k)`` each."""
        table = self._check_table(request)
        length = self.lengths[request]
        index = torch.tensor(table, dtype=torch.long)  # (blocks,)
        H_kv, d_k = self.num_kv_heads, self.head_dim
        k = (
            self.keys[layer][index].transpose(0, 1).reshape(H_kv, -1, d_k)
        )  # (blocks, H_kv, bs, d_k) -> (H_kv, blocks * bs, d_k)
        v = (
            self.values[layer][index].transpose(0, 1).reshape(H_kv, -1, d_k)
        )  # (blocks, H_kv, bs, d_k) -> (H_kv, blocks * bs, d_k)
        return k[:, :length], v[:, :length]
