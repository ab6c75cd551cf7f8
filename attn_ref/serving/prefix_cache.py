r"""Prefix caching across requests: blocks of keys and values kept after their request finishes.

A request's keys and values at position $p$ depend on its tokens up to $p$ and on nothing
else, so a later request that starts with the same tokens can use them instead of computing
them again. The blocks of a `attn_ref.serving.PagedKVCache` are the unit: a *full* block is
identified by its own tokens and every token before it. Two indexes find them:

- `RadixCache`: a radix tree over token sequences, one edge per run of blocks, split where two
  prompts part (SGLang's RadixAttention, Zheng et al., 2024);
- `BlockHashCache`: a table of block hashes, each block's hash made from its parent's hash and
  its own tokens (vLLM's automatic prefix caching).

Both hold one reference to each cached block, so a block lives while the cache or a request
uses it, and both evict, when the pool runs short, the least valuable entry that no request
uses and that no longer prefix leads on from (a leaf), by a policy (`POLICIES`): least
recently used, least frequently used, or segmented LRU. `shared_prefix_attention` attends many
requests' queries to one shared prefix at once and merges the result with each request's own
suffix (Hydragen; FlashInfer's cascade inference).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from attn_ref import _validate
from attn_ref.multihead import repeat_kv_heads
from attn_ref.serving.cost import merge_partials
from attn_ref.serving.paged import PagedKVCache

__all__ = [
    "POLICIES",
    "BlockHashCache",
    "Entry",
    "PrefixCache",
    "RadixCache",
    "lfu",
    "lru",
    "shared_prefix_attention",
    "slru",
]


@dataclass(eq=False)
class Entry:
    """One cached run of full blocks: a radix tree's node, or one block of the hash table.

    Attributes:
        tokens: The tokens the blocks hold, ``block_size`` per block.
        blocks: The pool's blocks, in order.
        parent: The entry before it (``None`` at the root).
        children: The entries that continue it, by key.
        key: Its key in its parent's ``children``.
        last_access: The cache's clock when a request last used it.
        hits: Requests that used it: the one that stored it, and each one that found it.
    """

    tokens: tuple[int, ...]
    blocks: list[int]
    parent: Entry | None = None
    children: dict = field(default_factory=dict)
    key: object = None
    last_access: int = 0
    hits: int = 0


def lru(entry: Entry) -> tuple:
    """Least recently used first."""
    return (entry.last_access,)


def lfu(entry: Entry) -> tuple:
    """Fewest hits first; among equals, least recently used (SGLang's ``LFUStrategy``)."""
    return (entry.hits, entry.last_access)


def slru(entry: Entry) -> tuple:
    """Segmented LRU: entries used once (probation) before those used twice or more (protected),
    least recently used first within each (SGLang's ``SLRUStrategy``, threshold 2)."""
    return (entry.hits >= 2, entry.last_access)


POLICIES: dict[str, Callable[[Entry], tuple]] = {"lru": lru, "lfu": lfu, "slru": slru}
"""Eviction policies by name: each maps an entry to a key, and the smallest key is evicted first."""


class PrefixCache:
    """Full blocks of finished (and running) requests, found again by the tokens they hold.

    The cache holds one reference to each block it stores (`PagedKVCache.retain`),
    so a request that finishes leaves its cached blocks in the pool. `match`
    finds the longest cached prefix of a token sequence, in whole blocks;
    `insert` stores a request's full blocks; `evict` gives blocks back to the
    pool, leaves first, by the ``policy``. Subclasses say how entries are
    found: `RadixCache` and `BlockHashCache`.

    Args:
        pool: The paged cache whose blocks are kept.
        policy: A name in `POLICIES`.

    Attributes:
        clock: Counts the calls to `match` and `insert`: the time of an access.
    """

    def __init__(self, pool: PagedKVCache, policy: str = "lru") -> None:
        if not isinstance(pool, PagedKVCache):
            raise TypeError(f"pool must be a PagedKVCache, got {type(pool).__name__}")
        self.pool = pool
        self.policy = _validate.one_of("policy", policy, list(POLICIES))
        self.root = Entry(tokens=(), blocks=[])
        self.clock = 0

    # --- what a subclass provides ------------------------------------------------------------

    def _path(self, tokens: Sequence[int]) -> list[Entry]:
        """The entries that hold the longest cached prefix of ``tokens``, whole blocks only."""
        raise NotImplementedError

    def _add(self, parent: Entry, tokens: tuple[int, ...], blocks: list[int]) -> None:
        """Store ``blocks`` (holding ``tokens``) after ``parent``."""
        raise NotImplementedError

    # --- the cache -----------------------------------------------------------------------------

    def match(self, tokens: Sequence[int], record: bool = True) -> list[int]:
        """The blocks of the longest cached prefix of ``tokens``, in whole blocks.

        Args:
            tokens: Token ids. A caller that needs logits after them passes all but
                the last, so that one token is left to compute (vLLM caps a hit at the
                prompt's length minus one).
            record: Count this as a use: each entry found gets a hit and the time.

        Returns:
            The blocks, in order; empty when not even the first block is cached.
        """
        self.clock += 1
        path = self._path(list(tokens))
        if record:
            for entry in path:
                self._touch(entry)
        return [b for entry in path for b in entry.blocks]

    def _touch(self, entry: Entry) -> None:
        """A request found ``entry``: it is used now, once more."""
        entry.last_access = self.clock
        entry.hits += 1

    def insert(self, tokens: Sequence[int], blocks: Sequence[int]) -> int:
        """Store the full ``blocks`` that hold ``tokens``; return how many were not cached yet.

        Blocks already cached for the same tokens (by this request or another)
        are kept as they are, only marked used now; the new ones are stored
        after them, each with one hit, and the cache takes a reference to them.
        """
        bs = self.pool.block_size
        blocks = list(blocks)
        if len(tokens) < len(blocks) * bs:
            raise ValueError(
                f"{len(blocks)} blocks of {bs} need {len(blocks) * bs} tokens, got {len(tokens)}"
            )
        tokens = list(tokens[: len(blocks) * bs])
        self.clock += 1
        path = self._path(tokens)
        for entry in path:
            entry.last_access = self.clock
        known = sum(len(entry.blocks) for entry in path)
        if known == len(blocks):
            return 0
        self.pool.retain(blocks[known:])
        self._add(path[-1] if path else self.root, tuple(tokens[known * bs :]), blocks[known:])
        return len(blocks) - known

    def entries(self) -> Iterator[Entry]:
        """Every entry, parents before children."""
        stack = list(self.root.children.values())
        while stack:
            entry = stack.pop()
            yield entry
            stack.extend(entry.children.values())

    @property
    def num_blocks(self) -> int:
        """Blocks the cache holds (a running request may use some of them too)."""
        return sum(len(entry.blocks) for entry in self.entries())

    def evictable(self) -> list[Entry]:
        """Leaves whose blocks only the cache holds: no request uses them, nothing continues them."""
        return [
            entry
            for entry in self.entries()
            if not entry.children and all(self.pool.ref_counts[b] == 1 for b in entry.blocks)
        ]

    def evict(self, num_blocks: int) -> int:
        """Give back at least ``num_blocks`` blocks, if the cache can; return how many it gave back.

        Each round evicts the evictable leaf with the smallest policy key and
        drops its blocks; its parent may become a leaf, and evictable, in turn.
        """
        _validate.count("num_blocks", num_blocks, minimum=0)
        freed = 0
        while freed < num_blocks:
            candidates = self.evictable()
            if not candidates:
                break
            victim = min(candidates, key=POLICIES[self.policy])
            self._forget(victim)
            self.pool.drop(victim.blocks)
            freed += len(victim.blocks)
        return freed

    def _forget(self, entry: Entry) -> None:
        """Take the leaf ``entry`` out of the index."""
        del entry.parent.children[entry.key]


class RadixCache(PrefixCache):
    """A radix tree of cached blocks (SGLang's RadixAttention).

    Each node holds a run of whole blocks, and its children are keyed by the
    tokens of their first block. A prompt walks down from the root as long as
    its blocks match; where a match ends inside a node, the node is split in
    two, so that the part shared becomes a node of its own. A new request's
    blocks after the match become one new leaf. Eviction removes a whole leaf.

    Examples:
        Two prompts of blocks ``AB`` then ``AC`` (blocks of 2 tokens) share ``A``:

        >>> pool = PagedKVCache(
        ...     num_layers=1, num_blocks=8, block_size=2, num_kv_heads=1, head_dim=2
        ... )
        >>> tree = RadixCache(pool)
        >>> pool.reserve("r1", 4)
        range(0, 4)
        >>> tree.insert([1, 2, 3, 4], pool.tables["r1"])  # A = (1, 2), B = (3, 4)
        2
        >>> pool.release("r1")  # finished: its blocks stay, held by the tree
        >>> tree.match([1, 2, 5, 6, 7])  # A C...: only A is cached
        [0]
        >>> [(e.tokens, e.blocks) for e in tree.entries()]  # split at the match
        [((1, 2), [0]), ((3, 4), [1])]
        >>> tree.evict(1), pool.num_free  # B is the only leaf; A continues into it
        (1, 7)
    """

    def _path(self, tokens: Sequence[int]) -> list[Entry]:
        bs = self.pool.block_size
        blocks = [tuple(tokens[i : i + bs]) for i in range(0, len(tokens) // bs * bs, bs)]
        node, path, i = self.root, [], 0
        while i < len(blocks) and blocks[i] in node.children:
            child = node.children[blocks[i]]
            own = [tuple(child.tokens[j : j + bs]) for j in range(0, len(child.tokens), bs)]
            k = 0
            while k < len(own) and i + k < len(blocks) and own[k] == blocks[i + k]:
                k += 1
            if k < len(own):
                child = self._split(child, k)
            path.append(child)
            node, i = child, i + k
        return path

    def _split(self, node: Entry, k: int) -> Entry:
        """Cut ``node`` after its ``k``-th block; return the first part, which takes its place."""
        bs = self.pool.block_size
        head = Entry(
            tokens=node.tokens[: k * bs],
            blocks=node.blocks[:k],
            parent=node.parent,
            key=node.key,
            last_access=node.last_access,
            hits=node.hits,
        )
        node.parent.children[node.key] = head
        node.tokens, node.blocks, node.parent = node.tokens[k * bs :], node.blocks[k:], head
        node.key = node.tokens[:bs]
        head.children[node.key] = node
        return head

    def _add(self, parent: Entry, tokens: tuple[int, ...], blocks: list[int]) -> None:
        key = tokens[: self.pool.block_size]
        parent.children[key] = Entry(
            tokens=tokens, blocks=blocks, parent=parent, key=key, last_access=self.clock, hits=1
        )


class BlockHashCache(PrefixCache):
    """A table of cached blocks by hash, each hash chained to its parent's (vLLM's prefix caching).

    Block $i$ of a prompt has the hash $h_i = \\operatorname{hash}(h_{i-1}, \\text{its tokens})$,
    so it names the block's tokens and every token before them. A prompt looks
    up $h_0, h_1, \\dots$ until one is missing. A hash can collide: an entry
    keeps its tokens and its parent, and a lookup that finds other ones stops
    there. Every entry is one block; eviction removes one block.

    Attributes:
        table: Block hash -> its `Entry`.

    Examples:
        >>> pool = PagedKVCache(
        ...     num_layers=1, num_blocks=8, block_size=2, num_kv_heads=1, head_dim=2
        ... )
        >>> table = BlockHashCache(pool)
        >>> pool.reserve("r1", 4)
        range(0, 4)
        >>> table.insert([1, 2, 3, 4], pool.tables["r1"])
        2
        >>> pool.release("r1")
        >>> table.match([1, 2, 3, 4, 9])
        [0, 1]
        >>> table.match([3, 4])  # as a first block, (3, 4) has another hash
        []
    """

    def __init__(self, pool: PagedKVCache, policy: str = "lru") -> None:
        super().__init__(pool, policy)
        self.root.key = 0  # the parent hash of a prompt's first block
        self.table: dict[int, Entry] = {}

    def _path(self, tokens: Sequence[int]) -> list[Entry]:
        bs = self.pool.block_size
        parent, path = self.root, []
        for i in range(0, len(tokens) // bs * bs, bs):
            block = tuple(tokens[i : i + bs])
            entry = self.table.get(hash((parent.key, block)))
            if entry is None or entry.tokens != block or entry.parent is not parent:
                break
            path.append(entry)
            parent = entry
        return path

    def _add(self, parent: Entry, tokens: tuple[int, ...], blocks: list[int]) -> None:
        bs = self.pool.block_size
        for i, block in enumerate(blocks):
            own = tokens[i * bs : (i + 1) * bs]
            key = hash((parent.key, own))
            if key in self.table:  # a collision: the slot is taken by other tokens; store no further
                self.pool.drop(blocks[i:])
                return
            entry = Entry(tokens=own, blocks=[block], parent=parent, key=key, last_access=self.clock, hits=1)
            self.table[key] = parent.children[key] = entry
            parent = entry

    def _forget(self, entry: Entry) -> None:
        super()._forget(entry)
        del self.table[entry.key]


def shared_prefix_attention(
    query: Tensor,
    prefix_key: Tensor,
    prefix_value: Tensor,
    suffix_keys: Sequence[Tensor],
    suffix_values: Sequence[Tensor],
) -> Tensor:
    r"""Decoding attention of ``B`` requests that share a prefix: the prefix attended once for all.

    Each request's keys are the shared prefix $P$ and its own suffix. Attention
    over both is the merge of attention over each part (`merge_partials`):

    $$
    O = \frac{e^{\lambda_P} O_P + e^{\lambda_S} O_S}{e^{\lambda_P} + e^{\lambda_S}},
    $$

    with $O_P, \lambda_P$ the output and log-sum-exp over the prefix and $O_S,
    \lambda_S$ over the suffix. The prefix part stacks the ``B`` queries into
    one matrix and reads the prefix's keys and values once, a matrix-matrix
    product instead of ``B`` matrix-vector ones (Hydragen; FlashInfer's cascade
    inference).

    Args:
        query: ``(B, H, 1, d_k)``: one decoding step of each request.
        prefix_key: ``(H_kv, P, d_k)``, the shared prefix.
        prefix_value: ``(H_kv, P, d_v)``.
        suffix_keys: ``B`` tensors ``(H_kv, S_b, d_k)``, each request's own keys (``S_b >= 1``).
        suffix_values: ``B`` tensors ``(H_kv, S_b, d_v)``.

    Returns:
        ``(B, H, 1, d_v)``.

    Examples:
        >>> g = torch.Generator().manual_seed(0)
        >>> q = torch.randn(3, 2, 1, 4, generator=g)
        >>> pk, pv = torch.randn(2, 2, 6, 4, generator=g)
        >>> sk = [torch.randn(2, n, 4, generator=g) for n in (1, 2, 3)]
        >>> out = shared_prefix_attention(q, pk, pv, sk, sk)
        >>> from attn_ref.functional import scaled_dot_product_attention
        >>> full = [
        ...     scaled_dot_product_attention(
        ...         q[b], torch.cat([pk, sk[b]], 1), torch.cat([pv, sk[b]], 1)
        ...     )[0]
        ...     for b in range(3)
        ... ]
        >>> torch.allclose(out, torch.stack(full), atol=1e-6)
        True
    """
    _validate.tensor("query", query)
    _validate.shape("query", query, (None, None, 1, None), "(B, H, 1, d_k): one decoding step each")
    B, _, _, d_k = query.shape
    _validate.shape("prefix_key", prefix_key, (None, None, d_k), "(H_kv, P, d_k)")
    H_kv, P = prefix_key.shape[:2]
    _validate.shape("prefix_value", prefix_value, (H_kv, P, None), "(H_kv, P, d_v)")
    if len(suffix_keys) != B or len(suffix_values) != B:
        raise ValueError(
            f"suffix_keys and suffix_values need one tensor per request, B={B}; "
            f"got {len(suffix_keys)} and {len(suffix_values)}"
        )
    # The prefix, once for all: the B queries of each head as one (B, d_k) matrix.
    stacked = query[:, :, 0].transpose(0, 1)[None]  # (B, H, d_k) -> (1, H, B, d_k)
    prefix_out, prefix_state = _attend(stacked, prefix_key[None], prefix_value[None])
    outputs = []
    for b, (k, v) in enumerate(zip(suffix_keys, suffix_values, strict=True)):
        _validate.shape(f"suffix_keys[{b}]", k, (H_kv, None, d_k), "(H_kv, S_b, d_k)")
        _validate.shape(f"suffix_values[{b}]", v, (H_kv, k.shape[1], None), "(H_kv, S_b, d_v)")
        own_out, own_state = _attend(query[b : b + 1], k[None], v[None])  # (1, H, 1, d_v), (1, H, 1)
        parts = torch.stack([prefix_out[:, :, b : b + 1], own_out])  # (2, 1, H, 1, d_v)
        lses = torch.stack([prefix_state[:, :, b : b + 1], own_state])  # (2, 1, H, 1)
        outputs.append(merge_partials(parts, lses)[0][0])  # (H, 1, d_v)
    return torch.stack(outputs)  # (B, H, 1, d_v)


def _attend(q: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
    """Attention of ``q`` (1, H, L, d_k) over every key of ``k``, ``v`` (1, H_kv, S, d): the output and
    the log-sum-exp of each query's scores, (1, H, L)."""
    k, v = repeat_kv_heads(k, q.shape[1]), repeat_kv_heads(v, q.shape[1])  # (1, H, S, d)
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5  # (1, H, L, S)
    lse = scores.logsumexp(dim=-1)  # (1, H, L)
    return (scores - lse[..., None]).exp() @ v, lse  # (1, H, L, d_v), (1, H, L)
