r"""How a server runs attention: many requests of different lengths at once, in paged memory.

A server feeds a `attn_ref.decoder.TinyDecoder` tokens from many requests in one forward pass
(`run_decoder`), each request with its own positions and its own keys. Around that one pass:

- three ways to batch ragged requests: padded (`generate_padded`), packed into one sequence with
  a document mask (`generate_packed`), and paged, with a scheduler that admits and retires
  requests at every step (`PagedKVCache`, `serve`);
- long contexts at bounded memory: a rolling buffer for a sliding window with attention sinks
  (`generate_windowed`);
- masks as functions, in FlexAttention's interface, with a block mask that lets a tiled loop
  skip empty tiles (`create_block_mask`, `flex_attention`);
- the cost of decoding: arithmetic intensity (`attention_intensity`) and split-K decoding
  (`split_k_attention`, `merge_partials`).

The masks they use, for packed requests (`attn_ref.masks.document_causal_mask`) and
bounded contexts (`attn_ref.masks.sliding_window_mask`), are built in `attn_ref.masks`.

Every engine decodes greedily and gives, for each request, the tokens that decoding it alone
gives, up to float rounding of the logits. It is a reference: plain loops over requests and
tiles, written to be read, not to be fast.
"""

from __future__ import annotations

import inspect
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from attn_ref import _validate
from attn_ref._numerics import additive_mask, compute_dtype, finite_or_zero
from attn_ref.decoder import TinyDecoder
from attn_ref.functional import scaled_dot_product_attention
from attn_ref.masks import document_causal_mask, sliding_window_mask
from attn_ref.multihead import merge_heads, repeat_kv_heads, split_heads
from attn_ref.tiled import block_sizes, tiled_attention

__all__ = [
    "BlockMask",
    "PagedKVCache",
    "Request",
    "ServeResult",
    "attention_intensity",
    "create_block_mask",
    "flex_attention",
    "generate_packed",
    "generate_padded",
    "generate_windowed",
    "merge_partials",
    "run_decoder",
    "serve",
    "split_k_attention",
]

Attend = Callable[[int, Tensor, Tensor, Tensor], Tensor]

EMPTY, PARTIAL, FULL = 0, 1, 2  # the kinds of tile in a BlockMask


# --- one forward pass over many requests ------------------------------------------------------


def run_decoder(model: TinyDecoder, tokens: Tensor, positions: Tensor, attend: Attend) -> Tensor:
    """The forward pass of ``model`` with the attention left to ``attend``.

    It computes what `TinyDecoder.forward` computes, layer by layer, but each
    token brings its own position, and ``attend`` decides which keys each
    query sees: the cached keys of its own request, in whatever memory
    layout. That is all a server changes in a model.

    Args:
        model: The decoder whose weights are used.
        tokens: ``(B, T)`` integer ids.
        positions: ``(B, T)`` integer positions, each below ``model.context_length``.
        attend: ``attend(layer, q, k, v)`` gets the new queries ``(B, H, T, d_k)``
            and the new keys and values ``(B, H_kv, T, d_k)`` of one layer,
            stores the keys and values where it keeps them, and returns the
            attention output ``(B, H, T, d_k)``.

    Returns:
        ``(B, T, vocab_size)`` logits.

    Examples:
        Attending to the tokens passed, with a causal mask, is the model's own forward pass:

        >>> from attn_ref.masks import causal_mask
        >>> _ = torch.manual_seed(0)
        >>> model = TinyDecoder(
        ...     vocab_size=10, context_length=8, embed_dim=16,
        ...     num_layers=2, num_heads=4,
        ... )
        >>> tokens = torch.tensor([[1, 2, 3]])
        >>> def attend(layer, q, k, v):
        ...     return attention(q, k, v, causal_mask(3))
        >>> logits = run_decoder(model, tokens, torch.arange(3)[None], attend)
        >>> torch.allclose(logits, model(tokens), atol=1e-6)
        True
    """
    _validate.token_ids("tokens", tokens)
    _validate.token_ids("positions", positions)
    if positions.shape != tokens.shape:
        raise ValueError(
            f"positions has shape {tuple(positions.shape)}, expected tokens' shape {tuple(tokens.shape)}"
        )
    if positions.numel() and (positions.min() < 0 or positions.max() >= model.context_length):
        raise ValueError(
            f"positions must lie in [0, {model.context_length}) (the model's context_length), "
            f"got {positions.min().item()}..{positions.max().item()}"
        )
    x = model.token_embedding(tokens) + model.position_embedding(positions)  # (B, T, C)
    for layer, block in enumerate(model.blocks):
        attn, h = block.attn, block.norm1(x)  # (B, T, C)
        q = split_heads(attn.q_proj(h), attn.num_heads)  # (B, T, C) -> (B, H, T, d_k)
        k = split_heads(attn.k_proj(h), attn.num_kv_heads)  # (B, T, H_kv * d_k) -> (B, H_kv, T, d_k)
        v = split_heads(attn.v_proj(h), attn.num_kv_heads)  # (B, T, H_kv * d_k) -> (B, H_kv, T, d_k)
        heads = attend(layer, q, k, v)  # (B, H, T, d_k)
        x = x + attn.out_proj(merge_heads(heads))  # (B, H, T, d_k) -> (B, T, C)
        x = x + block.mlp(block.norm2(x))  # (B, T, C)
    return model.head(model.norm(x))  # (B, T, C) -> (B, T, vocab_size)


def attention(q: Tensor, k: Tensor, v: Tensor, allowed: Tensor) -> Tensor:
    """``attn_ref``'s attention of ``q`` ``(..., H, L, d_k)`` over ``k``, ``v`` ``(..., H_kv, S, d_k)``.

    Key/value heads are repeated for their groups of query heads; ``allowed``
    is a boolean mask broadcastable to ``(..., H, L, S)``.

    Examples:
        >>> q = k = v = torch.ones(1, 2, 1, 4)
        >>> attention(q, k, v, torch.ones(1, 1, dtype=torch.bool)).shape
        torch.Size([1, 2, 1, 4])
    """
    num_heads = q.shape[-3]
    k = repeat_kv_heads(k, num_heads)  # (..., H_kv, S, d_k) -> (..., H, S, d_k)
    v = repeat_kv_heads(v, num_heads)  # (..., H_kv, S, d_k) -> (..., H, S, d_k)
    return scaled_dot_product_attention(q, k, v, attn_mask=allowed)[0]  # (..., H, L, d_k)


# --- requests and their results -----------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """One request to a server: a prompt, how many tokens to generate, and when it arrives.

    Attributes:
        prompt: The prompt's token ids, at least one.
        max_new_tokens: Tokens to generate greedily, at least one.
        arrival: The step at which the request reaches the server.
    """

    prompt: tuple[int, ...]
    max_new_tokens: int
    arrival: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "prompt", tuple(self.prompt))
        if not self.prompt or not all(isinstance(t, int) and t >= 0 for t in self.prompt):
            raise ValueError(f"prompt must be a non-empty sequence of token ids >= 0, got {self.prompt!r}")
        _validate.count("max_new_tokens", self.max_new_tokens)
        _validate.count("arrival", self.arrival, minimum=0)

    @property
    def max_length(self) -> int:
        """Positions the request can occupy: the prompt and every new token but the last."""
        return len(self.prompt) + self.max_new_tokens - 1


def _as_requests(requests: Sequence[Request], model: TinyDecoder) -> list[Request]:
    requests = list(requests)
    if not requests or not all(isinstance(r, Request) for r in requests):
        raise TypeError(f"requests must be a non-empty sequence of Request, got {requests!r}")
    vocab = model.head.out_features
    for i, r in enumerate(requests):
        if r.max_length > model.context_length:
            raise ValueError(
                f"request {i} needs {r.max_length} positions (prompt of {len(r.prompt)}, "
                f"{r.max_new_tokens} new tokens), more than the model's context_length={model.context_length}"
            )
        if max(r.prompt) >= vocab:
            raise ValueError(f"request {i}'s prompt has token id {max(r.prompt)}, vocab_size is {vocab}")
    return requests


# --- padded and packed batches ------------------------------------------------------------------


@torch.no_grad()
def generate_padded(model: TinyDecoder, requests: Sequence[Request]) -> list[Tensor]:
    """Decode a batch of requests padded to one length, with a cache of one reserved slab each.

    The prompts are right-padded to the longest, and each request reserves
    cache slots for its longest possible length (``Request.max_length``), as
    servers before paging did: one ``(B, H_kv, S_max, d_k)`` tensor per layer.
    A query sees the keys of its own row at positions up to its own; padding
    is never seen. Every step computes every row, finished or not.

    Args:
        model: The decoder.
        requests: The batch; ``arrival`` is ignored (all start together).

    Returns:
        The new tokens of each request, ``(max_new_tokens,)`` each.

    Examples:
        >>> from attn_ref.decoder import generate
        >>> _ = torch.manual_seed(0)
        >>> model = TinyDecoder(
        ...     vocab_size=10, context_length=8, embed_dim=16,
        ...     num_layers=2, num_heads=4,
        ... )
        >>> batch = [Request((1, 2, 3), 3), Request((4,), 5)]
        >>> new = generate_padded(model, batch)
        >>> def alone(r):  # r's new tokens, decoded by itself
        ...     tokens, _ = generate(model, torch.tensor([r.prompt]), r.max_new_tokens)
        ...     return tokens[0, len(r.prompt):]
        >>> [t.tolist() == alone(r).tolist() for t, r in zip(new, batch)]
        [True, True]
    """
    requests = _as_requests(requests, model)
    B = len(requests)
    lengths = torch.tensor([len(r.prompt) for r in requests])  # (B,)
    T, S_max = int(lengths.max()), max(r.max_length for r in requests)
    tokens = torch.zeros(B, T, dtype=torch.long)  # (B, T): padded with token 0
    for b, r in enumerate(requests):
        tokens[b, : len(r.prompt)] = torch.tensor(r.prompt)
    attn = model.blocks[0].attn
    shape = (B, attn.num_kv_heads, S_max, attn.head_dim)
    keys = [torch.zeros(shape) for _ in model.blocks]  # one reserved slab per layer
    values = [torch.zeros(shape) for _ in model.blocks]
    slots = torch.arange(S_max)  # (S_max,)

    def attend_at(start: Tensor) -> Attend:  # start: (B,) the position of each row's first new token
        def attend(layer: int, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
            T_new = q.shape[-2]
            q_pos = start[:, None] + torch.arange(T_new)  # (B, T_new)
            for b in range(B):
                keys[layer][b][:, q_pos[b]] = k[b]  # (H_kv, T_new, d_k) into row b's slab
                values[layer][b][:, q_pos[b]] = v[b]
            visible = (slots[None, None, :] <= q_pos[:, :, None]) & (slots < lengths_now[:, None])[:, None]
            return attention(q, keys[layer], values[layer], visible[:, None])  # (B, H, T_new, d_k)

        return attend

    lengths_now = lengths.clone()  # (B,): positions each row holds after this step's tokens
    positions = torch.arange(T).expand(B, T)  # (B, T): padding gets positions too, never seen
    logits = run_decoder(model, tokens, positions, attend_at(torch.zeros(B, dtype=torch.long)))
    last = logits[torch.arange(B), lengths - 1]  # (B, vocab): after each prompt's last token
    new = [last.argmax(dim=-1)]  # one (B,) tensor per step
    for _ in range(max(r.max_new_tokens for r in requests) - 1):
        start = lengths_now.clamp(max=S_max - 1)  # a finished row keeps computing in its last slot
        lengths_now = (lengths_now + 1).clamp(max=S_max)
        logits = run_decoder(model, new[-1][:, None], start[:, None], attend_at(start))  # (B, 1, vocab)
        new.append(logits[:, -1].argmax(dim=-1))
    steps = torch.stack(new, dim=1)  # (B, steps)
    return [steps[b, : r.max_new_tokens] for b, r in enumerate(requests)]


@torch.no_grad()
def generate_packed(model: TinyDecoder, requests: Sequence[Request]) -> list[Tensor]:
    """Decode a batch of requests packed into one sequence, with a document mask (the varlen layout).

    No padding: the prompts are concatenated into one sequence of
    ``sum(len(prompt))`` tokens, each with its request and its position,
    and `document_causal_mask` keeps requests apart. Each later step appends
    one token per request still running; a finished request drops out.

    Args:
        model: The decoder.
        requests: The batch; ``arrival`` is ignored.

    Returns:
        The new tokens of each request.

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> model = TinyDecoder(
        ...     vocab_size=10, context_length=8, embed_dim=16,
        ...     num_layers=2, num_heads=4,
        ... )
        >>> batch = [Request((1, 2, 3), 3), Request((4,), 5)]
        >>> packed = generate_packed(model, batch)
        >>> padded = generate_padded(model, batch)
        >>> [a.tolist() == b.tolist() for a, b in zip(packed, padded)]
        [True, True]
    """
    requests = _as_requests(requests, model)
    seq = torch.cat([torch.full((len(r.prompt),), i) for i, r in enumerate(requests)])  # (N,)
    pos = torch.cat([torch.arange(len(r.prompt)) for r in requests])  # (N,)
    tokens = torch.tensor([t for r in requests for t in r.prompt])  # (N,)
    keys: list[Tensor | None] = [None] * model.num_layers  # (1, H_kv, N_cached, d_k) each
    values: list[Tensor | None] = [None] * model.num_layers
    k_seq, k_pos = seq[:0], pos[:0]  # the request and position of every cached key

    def attend(layer: int, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        if keys[layer] is not None:
            k = torch.cat([keys[layer], k], dim=-2)  # (1, H_kv, N_cached + N, d_k)
            v = torch.cat([values[layer], v], dim=-2)
        keys[layer], values[layer] = k, v
        allowed = document_causal_mask(seq, pos, torch.cat([k_seq, seq]), torch.cat([k_pos, pos]))
        return attention(q, k, v, allowed)  # (1, H, N, d_k)

    new: list[list[int]] = [[] for _ in requests]
    while True:
        logits = run_decoder(model, tokens[None], pos[None], attend)[0]  # (N, vocab)
        k_seq, k_pos = torch.cat([k_seq, seq]), torch.cat([k_pos, pos])
        last = torch.cat([seq[1:] != seq[:-1], torch.tensor([True])])  # (N,): each request's last token
        for i, row in zip(seq[last].tolist(), logits[last], strict=True):
            new[i].append(int(row.argmax()))
        running = [i for i, r in enumerate(requests) if len(new[i]) < r.max_new_tokens]
        if not running:
            return [torch.tensor(n) for n in new]
        seq = torch.tensor(running)  # (N,): one token per running request
        pos = torch.tensor([len(requests[i].prompt) + len(new[i]) - 1 for i in running])
        tokens = torch.tensor([new[i][-1] for i in running])


# --- the paged cache ----------------------------------------------------------------------------


@dataclass
class PagedKVCache:
    """Keys and values in fixed-size blocks, handed out from a free list, found through block tables.

    Every layer holds one pool of ``num_blocks`` blocks, each of
    ``block_size`` positions: ``keys[layer]`` of shape
    ``(num_blocks, H_kv, block_size, d_k)``. A request owns a *block table*,
    the list of its blocks in order: its position ``p`` lives in block
    ``table[p // block_size]``, slot ``p % block_size``. Blocks carry a
    reference count, so that requests can share the blocks of a common prompt
    (`fork`, then `truncate` to the prompt's length); writing into a shared
    block copies it first (copy on write). Only its methods change its fields.

    Attributes:
        num_layers: Attention layers.
        num_blocks: Blocks in the pool.
        block_size: Positions per block.
        num_kv_heads: Key/value heads ``H_kv``.
        head_dim: ``d_k``.
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
        self.keys = [torch.zeros(shape) for _ in range(self.num_layers)]
        self.values = [torch.zeros(shape) for _ in range(self.num_layers)]
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
        for block in reversed(table[kept:]):
            self.ref_counts[block] -= 1
            if self.ref_counts[block] == 0:
                self.free.append(block)
        del table[kept:]
        self.lengths[request] = length

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


# --- continuous batching ------------------------------------------------------------------------


@dataclass
class ServeResult:
    """What `serve` produced, and a log of every step.

    Attributes:
        tokens: Request index -> its new tokens.
        logits: Request index -> the ``(max_new_tokens, vocab_size)`` logits its tokens were chosen from.
        steps: One dict per forward pass: ``running`` (request indices in the
            batch), ``tokens`` (tokens fed), ``stored`` (positions the running
            requests hold), ``lengths`` (request index -> positions it holds),
            ``blocks`` (blocks in use), ``admitted``,
            ``finished`` and ``preempted`` (request indices).
        finished_at: Request index -> the step at which it finished.
    """

    tokens: dict[int, Tensor]
    logits: dict[int, Tensor]
    steps: list[dict]
    finished_at: dict[int, int]


@torch.no_grad()
def serve(
    model: TinyDecoder,
    requests: Sequence[Request],
    cache: PagedKVCache,
    chunk_size: int | None = None,
    max_running: int | None = None,
    static: bool = False,
    share_prefix: int = 0,
) -> ServeResult:
    """Serve a stream of requests with continuous batching over a paged cache.

    Each step is one forward pass of every running request together, packed
    into one sequence. A request's step feeds the next chunk of its prompt
    (at most ``chunk_size`` tokens: chunked prefill) or, once the prompt is
    in, its last token. Between steps the scheduler:

    1. retires every request that has all its tokens, releasing its blocks;
    2. admits waiting requests that have arrived, first come first served,
       while the free list has the blocks of their whole prompt and one block
       to spare for each running request, and at most ``max_running`` run;
    3. reserves each running request's new positions; when the free list runs
       dry, it *preempts* the request admitted last: releases its blocks and
       puts it back at the front of the queue, to recompute its tokens later.

    With ``static=True`` it admits only when no request is running: the whole
    batch waits for its longest request (static batching). With
    ``share_prefix=n``, a request whose first ``n`` prompt tokens equal an
    earlier running request's starts by sharing that request's blocks
    (`PagedKVCache.fork`) and feeds only the rest of its prompt.

    Args:
        model: The decoder.
        requests: The stream, each with its arrival step.
        cache: An empty `PagedKVCache` shaped for ``model``.
        chunk_size: Most prompt tokens a request feeds per step; ``None`` feeds the whole prompt.
        max_running: Most requests in one batch; ``None`` for no limit but the blocks.
        static: Admit new requests only when the batch is empty.
        share_prefix: Length of a prompt prefix that requests may share.

    Returns:
        A `ServeResult`.

    Raises:
        ValueError: A request needs more positions than the cache or the
            model's context holds, or the cache does not fit the model.

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> model = TinyDecoder(
        ...     vocab_size=10, context_length=16, embed_dim=16,
        ...     num_layers=2, num_heads=4,
        ... )
        >>> cache = PagedKVCache(
        ...     num_layers=2, num_blocks=4, block_size=4, num_kv_heads=4, head_dim=4
        ... )
        >>> stream = [Request((1, 2, 3), 3), Request((4,), 5, arrival=1)]
        >>> result = serve(model, stream, cache, chunk_size=2)
        >>> padded = generate_padded(model, stream)
        >>> [result.tokens[i].tolist() == t.tolist() for i, t in enumerate(padded)]
        [True, True]

        Request 1 joins the running batch at step 1:

        >>> [(s["running"], s["tokens"]) for s in result.steps[:3]]
        [([0], 2), ([0, 1], 2), ([0, 1], 2)]
    """
    requests = _as_requests(requests, model)
    attn = model.blocks[0].attn
    expected = (model.num_layers, attn.num_kv_heads, attn.head_dim)
    if (cache.num_layers, cache.num_kv_heads, cache.head_dim) != expected:
        raise ValueError(
            f"cache has (num_layers, num_kv_heads, head_dim) = "
            f"{(cache.num_layers, cache.num_kv_heads, cache.head_dim)}, the model needs {expected}"
        )
    if cache.tables:
        raise ValueError(f"cache must be empty, but requests {list(cache.tables)} hold blocks")
    for i, r in enumerate(requests):
        if r.max_length > cache.capacity:
            raise ValueError(
                f"request {i} needs {r.max_length} positions, more than the whole cache holds: "
                f"{cache.num_blocks} blocks of {cache.block_size} = {cache.capacity}"
            )
    if chunk_size is not None:
        _validate.count("chunk_size", chunk_size)
    _validate.count("share_prefix", share_prefix, minimum=0)
    chunk = chunk_size or model.context_length
    waiting = sorted(range(len(requests)), key=lambda i: requests[i].arrival)  # stable: FCFS
    running: list[int] = []  # in order of admission
    known = {i: list(r.prompt) for i, r in enumerate(requests)}  # tokens whose keys a request needs
    fed: dict[int, int] = {}  # tokens fed so far (their keys are cached)
    new: dict[int, list[int]] = {i: [] for i in range(len(requests))}
    logits_of: dict[int, list[Tensor]] = {i: [] for i in range(len(requests))}
    steps: list[dict] = []
    finished_at: dict[int, int] = {}
    step = 0
    while waiting or running:
        admitted, preempted = [], []
        batch_open = not (static and running)  # static batching waits for an empty batch
        while batch_open and waiting and requests[waiting[0]].arrival <= step:
            i = waiting[0]
            if max_running is not None and len(running) >= max_running:
                break
            donor = next(
                (
                    j
                    for j in running
                    if share_prefix
                    and fed[j] >= share_prefix
                    and len(known[i]) > share_prefix
                    and known[j][:share_prefix] == known[i][:share_prefix]
                ),
                None,
            )
            first = min(chunk, len(known[i]) - (share_prefix if donor is not None else 0))
            # A block in hand for each request's next token, when others run. Alone, a request
            # needs only its own blocks: it fits the pool, so an empty batch always admits it.
            spare = len(running) + 1 if running else 0
            if donor is None and cache.blocks_for(len(known[i])) + spare > cache.num_free:
                break
            copied = bool(share_prefix % cache.block_size)  # a shared, partly filled block is copied
            grown = cache.blocks_for(share_prefix + first) - cache.blocks_for(share_prefix)
            if donor is not None and grown + copied + spare > cache.num_free:
                break
            waiting.pop(0)
            if donor is not None:  # share the donor's blocks of the prefix
                cache.fork(donor, i)
                cache.truncate(i, share_prefix)
                fed[i] = share_prefix
            else:
                fed[i] = 0
            running.append(i)
            admitted.append(i)
        if not running:
            step += 1
            continue
        batch: list[tuple[int, range]] = []  # (request, positions fed this step)
        for i in list(running):
            if i not in running:  # preempted while this step was being planned
                continue
            n = min(chunk, len(known[i]) - fed[i])
            while cache.blocks_needed(i, n) > cache.num_free:
                victim = running[-1]
                running.remove(victim)
                batch = [(j, p) for j, p in batch if j != victim]
                if victim in cache.tables:  # admitted this step, it may hold no block yet
                    cache.release(victim)
                del fed[victim]  # its prompt and new tokens are fed again when it is readmitted
                waiting.insert(0, victim)
                preempted.append(victim)
                if victim == i:
                    break
            if i in running:
                batch.append((i, cache.reserve(i, n)))
        seq = torch.cat([torch.full((len(p),), i) for i, p in batch])  # (N,)
        pos = torch.cat([torch.tensor(list(p)) for _, p in batch])  # (N,)
        tokens = torch.tensor([known[i][p] for i, ps in batch for p in ps])  # (N,)

        def attend(layer: int, q: Tensor, k: Tensor, v: Tensor, batch=batch, seq=seq) -> Tensor:
            outputs = []
            for i, p in batch:
                rows = seq == i  # this request's tokens in the packed sequence
                cache.write(layer, i, p, k[0][:, rows], v[0][:, rows])
                keys, values = cache.gather(layer, i)  # (H_kv, p.stop, d_k)
                allowed = torch.arange(p.stop)[None, :] <= torch.tensor(list(p))[:, None]  # (len(p), p.stop)
                outputs.append(
                    attention(q[:, :, rows], keys[None], values[None], allowed)
                )  # (1, H, len(p), d_k)
            return torch.cat(outputs, dim=-2)  # (1, H, N, d_k)

        logits = run_decoder(model, tokens[None], pos[None], attend)[0]  # (N, vocab)
        finished = []
        for i, p in batch:
            fed[i] = p.stop
            if fed[i] == len(known[i]):  # the last known token went in: choose the next one
                row = logits[(seq == i).nonzero()[-1, 0]]  # (vocab,)
                new[i].append(int(row.argmax()))
                logits_of[i].append(row)
                known[i].append(new[i][-1])
                if len(new[i]) == requests[i].max_new_tokens:
                    finished.append(i)
        steps.append(
            {
                "step": step,
                "running": [i for i, _ in batch],
                "tokens": len(seq),
                "stored": sum(cache.lengths[i] for i, _ in batch),
                "lengths": {i: cache.lengths[i] for i, _ in batch},
                "blocks": cache.num_blocks - cache.num_free,
                "admitted": admitted,
                "finished": finished,
                "preempted": preempted,
            }
        )
        for i in finished:
            running.remove(i)
            cache.release(i)
            finished_at[i] = step
        step += 1
    return ServeResult(
        {i: torch.tensor(t) for i, t in new.items()},
        {i: torch.stack(rows) for i, rows in logits_of.items()},
        steps,
        finished_at,
    )


# --- a sliding window in a rolling buffer -------------------------------------------------------


@torch.no_grad()
def generate_windowed(
    model: TinyDecoder, request: Request, window: int, num_sinks: int = 0, chunk_size: int = 1
) -> tuple[Tensor, Tensor, int]:
    """Decode one request with sliding-window attention, its cache a rolling buffer of fixed size.

    Each layer keeps ``num_sinks + window`` slots. Position $p$ goes to
    slot $p$ if $p <$ ``num_sinks``, else to slot
    ``num_sinks + (p - num_sinks) % window``, overwriting the position
    ``window`` before it, which no later query may see. New tokens attend to
    the buffer and to each other under `sliding_window_mask`, then are
    written in.

    Args:
        model: The decoder.
        request: The prompt and how many tokens to generate.
        window: Positions each query sees, itself included.
        num_sinks: First positions kept beside the window (attention sinks).
        chunk_size: Prompt tokens fed per step.

    Returns:
        ``(tokens, logits, slots)``: the new tokens ``(max_new_tokens,)``, their
        logits ``(max_new_tokens, vocab_size)``, and the slots each layer's buffer has.

    Examples:
        With a window as long as the text, it is plain causal decoding:

        >>> from attn_ref.decoder import generate
        >>> _ = torch.manual_seed(0)
        >>> model = TinyDecoder(
        ...     vocab_size=10, context_length=8, embed_dim=16,
        ...     num_layers=2, num_heads=4,
        ... )
        >>> request = Request((1, 2, 3), 5)
        >>> tokens, _, slots = generate_windowed(model, request, window=8)
        >>> plain, _ = generate(model, torch.tensor([[1, 2, 3]]), 5)
        >>> tokens.tolist() == plain[0, 3:].tolist()
        True
        >>> slots
        8
    """
    (request,) = _as_requests([request], model)
    _validate.count("window", window)
    _validate.count("num_sinks", num_sinks, minimum=0)
    _validate.count("chunk_size", chunk_size)
    attn = model.blocks[0].attn
    slots = num_sinks + window
    shape = (1, attn.num_kv_heads, slots, attn.head_dim)
    keys = [torch.zeros(shape) for _ in model.blocks]  # (1, H_kv, slots, d_k) per layer
    values = [torch.zeros(shape) for _ in model.blocks]
    slot_pos = torch.full((slots,), -1)  # the position each slot holds; -1: empty

    def slot_of(p: Tensor) -> Tensor:
        return torch.where(p < num_sinks, p, num_sinks + (p - num_sinks) % window)

    def last_in_slot(pos: Tensor) -> Tensor:  # the positions no later one in pos overwrites
        return (pos > pos[-1] - window) | (pos < num_sinks)

    def attend_at(pos: Tensor) -> Attend:
        def attend(layer: int, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
            held = slot_pos >= 0  # (slots,)
            k_all = torch.cat([keys[layer][:, :, held], k], dim=-2)  # (1, H_kv, held + T_new, d_k)
            v_all = torch.cat([values[layer][:, :, held], v], dim=-2)
            allowed = sliding_window_mask(pos, torch.cat([slot_pos[held], pos]), window, num_sinks)
            out = attention(q, k_all, v_all, allowed)  # (1, H, T_new, d_k)
            kept = last_in_slot(pos)  # (T_new,): a chunk longer than the window overwrites itself
            keys[layer][0][:, slot_of(pos[kept])] = k[0][:, kept]
            values[layer][0][:, slot_of(pos[kept])] = v[0][:, kept]
            return out

        return attend

    prompt = torch.tensor(request.prompt)
    new, logits_of = [], []
    feed, start = prompt, 0
    while len(new) < request.max_new_tokens:
        for c in range(0, len(feed), chunk_size):
            pos = torch.arange(start + c, start + min(c + chunk_size, len(feed)))  # (T_new,)
            logits = run_decoder(model, feed[c : c + chunk_size][None], pos[None], attend_at(pos))
            slot_pos[slot_of(pos[last_in_slot(pos)])] = pos[last_in_slot(pos)]
        start += len(feed)
        logits_of.append(logits[0, -1])
        new.append(int(logits[0, -1].argmax()))
        feed = torch.tensor(new[-1:])
    return torch.tensor(new), torch.stack(logits_of), slots


# --- masks as functions -------------------------------------------------------------------------


@dataclass(frozen=True)
class BlockMask:
    """Which tiles of the ``(L, S)`` scores a mask leaves empty, partial or full.

    Attributes:
        kinds: ``(B, H, ceil(L / block_q), ceil(S / block_k))`` int8: 0 empty
            (every entry masked: skip the tile), 1 partial (apply the mask),
            2 full (nothing masked: no mask needed).
        block_size: ``(block_q, block_k)``.
        shape: ``(B, H, L, S)``.
        mask_mod: The function the mask came from.
    """

    kinds: Tensor
    block_size: tuple[int, int]
    shape: tuple[int, int, int, int]
    mask_mod: Callable = field(repr=False)

    def fraction(self, kind: int) -> float:
        """Share of the tiles of kind ``EMPTY`` (0), ``PARTIAL`` (1) or ``FULL`` (2)."""
        return (self.kinds == kind).float().mean().item()


def _check_signature(name: str, fn: object, arguments: tuple[str, ...]) -> None:
    if not callable(fn):
        raise TypeError(f"{name} must be a function {name}({', '.join(arguments)}), got {type(fn).__name__}")
    try:
        inspect.signature(fn).bind(*arguments)
    except TypeError:
        raise TypeError(
            f"{name} must take {len(arguments)} positional arguments ({', '.join(arguments)}), "
            f"got a function with signature {inspect.signature(fn)}"
        ) from None
    except ValueError:  # a builtin without a signature: let the call tell
        pass


def _indices(B: int, H: int, rows: range, cols: range) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``b, h, q_idx, kv_idx`` shaped to broadcast to ``(B, H, len(rows), len(cols))``."""
    return (
        torch.arange(B).view(B, 1, 1, 1),
        torch.arange(H).view(1, H, 1, 1),
        torch.arange(rows.start, rows.stop).view(1, 1, -1, 1),
        torch.arange(cols.start, cols.stop).view(1, 1, 1, -1),
    )


def _apply_mask_mod(mask_mod: Callable, B: int, H: int, rows: range, cols: range) -> Tensor:
    allowed = mask_mod(*_indices(B, H, rows, cols))
    if not isinstance(allowed, Tensor) or allowed.dtype != torch.bool:
        got = allowed.dtype if isinstance(allowed, Tensor) else type(allowed).__name__
        raise TypeError(f"mask_mod must return a boolean tensor, got {got}")
    return _broadcast("mask_mod", allowed, (B, H, len(rows), len(cols)))  # (B, H, bq, bk)


def _broadcast(name: str, x: Tensor, shape: tuple[int, ...]) -> Tensor:
    try:
        return x.expand(shape)
    except RuntimeError:
        raise ValueError(
            f"{name} returned shape {tuple(x.shape)}, which does not broadcast to the tile's "
            f"(B, H, block_q, block_k) = {shape}: compute it from the index tensors it is given"
        ) from None


def create_block_mask(
    mask_mod: Callable, B: int, H: int, L: int, S: int, block_size: int | tuple[int, int] = 128
) -> BlockMask:
    """Evaluate ``mask_mod(b, h, q_idx, kv_idx)`` everywhere and classify every tile.

    ``mask_mod`` returns ``True`` where query ``q_idx`` may see key
    ``kv_idx`` in batch ``b``, head ``h``. It is called once per tile with
    index tensors that broadcast to ``(B, H, block_q, block_k)``, so it must
    be written with tensor operations (``&``, ``|``, ``torch.where``), as
    FlexAttention's are. A tile is empty if no entry is ``True``, full if
    every entry is, partial otherwise.

    Args:
        mask_mod: The mask as a function of four index tensors.
        B: Batch size (1 when the mask is the same for every sequence).
        H: Heads (1 when it is the same for every head).
        L: Queries.
        S: Keys.
        block_size: The tile's shape: one int, or ``(block_q, block_k)``.

    Returns:
        A `BlockMask`.

    Raises:
        TypeError: ``mask_mod`` does not take four arguments, or does not return booleans.

    Examples:
        Causal, 6 by 6 in tiles of 2 by 2: 3 tiles empty, 3 partial (the diagonal), 3 full.

        >>> causal = lambda b, h, q_idx, kv_idx: q_idx >= kv_idx
        >>> create_block_mask(causal, 1, 1, 6, 6, block_size=2).kinds[0, 0]
        tensor([[1, 0, 0],
                [2, 1, 0],
                [2, 2, 1]], dtype=torch.int8)
    """
    _check_signature("mask_mod", mask_mod, ("b", "h", "q_idx", "kv_idx"))
    for name, size in (("B", B), ("H", H), ("L", L), ("S", S)):
        _validate.count(name, size)
    block_q, block_k = block_sizes(block_size)
    n_q, n_k = -(-L // block_q), -(-S // block_k)
    kinds = torch.empty(B, H, n_q, n_k, dtype=torch.int8)  # (B, H, n_q, n_k)
    for i in range(n_q):
        rows = range(i * block_q, min((i + 1) * block_q, L))
        for j in range(n_k):
            cols = range(j * block_k, min((j + 1) * block_k, S))
            allowed = _apply_mask_mod(mask_mod, B, H, rows, cols)  # (B, H, bq, bk)
            kinds[:, :, i, j] = torch.where(
                allowed.all(dim=(-2, -1)), FULL, torch.where(allowed.any(dim=(-2, -1)), PARTIAL, EMPTY)
            ).to(torch.int8)
    return BlockMask(kinds, (block_q, block_k), (B, H, L, S), mask_mod)


@dataclass(frozen=True)
class FlexState:
    """What `flex_attention` computed and skipped.

    Attributes:
        logsumexp: ``(B, H, L)``: $\\log \\sum_j e^{s_j}$ over the keys a query sees; ``-inf`` for none.
        tiles_computed: Tiles computed (for any sequence or head).
        tiles_skipped: Tiles skipped: empty for every sequence and head.
    """

    logsumexp: Tensor
    tiles_computed: int
    tiles_skipped: int


def flex_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    score_mod: Callable | None = None,
    block_mask: BlockMask | None = None,
    scale: float | None = None,
) -> tuple[Tensor, FlexState]:
    r"""Attention with the scores changed by a function and masked by a block mask, tile by tile.

    A CPU reference of the interface of `torch.nn.attention.flex_attention`.
    Each tile of scores $s = Q_i K_j^\top \cdot \text{scale}$ becomes
    ``score_mod(s, b, h, q_idx, kv_idx)``, is masked by the block mask's
    ``mask_mod`` where the tile is partial; `attn_ref.tiled.tiled_attention`
    runs the tiles (its ``mod_tile``), skipping the empty ones (its
    ``skip_tile``); full tiles need no mask. A query that sees no key gets an
    output of zero.

    Args:
        query: ``(B, H, L, d_k)``.
        key: ``(B, H, S, d_k)``.
        value: ``(B, H, S, d_v)``.
        score_mod: ``score_mod(score, b, h, q_idx, kv_idx)``, elementwise on
            index tensors that broadcast to ``(B, H, block_q, block_k)``; ``None``
            leaves the scores as they are.
        block_mask: From `create_block_mask` for ``(B or 1, H or 1, L, S)``;
            ``None`` lets every query see every key, in tiles of 128.
        scale: Multiplier of the scores; defaults to $1/\sqrt{d_k}$.

    Returns:
        ``(output, state)``: ``(B, H, L, d_v)`` and a `FlexState`.

    Examples:
        A causal mask as a function gives causal attention:

        >>> g = torch.Generator().manual_seed(0)
        >>> q, k, v = torch.randn(3, 1, 2, 5, 4, generator=g)
        >>> causal = lambda b, h, q_idx, kv_idx: q_idx >= kv_idx
        >>> mask = create_block_mask(causal, 1, 1, 5, 5, block_size=2)
        >>> out, state = flex_attention(q, k, v, block_mask=mask)
        >>> expected, _ = scaled_dot_product_attention(q, k, v, is_causal=True)
        >>> torch.allclose(out, expected, atol=1e-6)
        True
        >>> state.tiles_computed, state.tiles_skipped
        (6, 3)
    """
    for name, x in (("query", query), ("key", key), ("value", value)):
        _validate.tensor(name, x)
        _validate.shape(name, x, (None, None, None, None), "(B, H, T, d)")
    _validate.same_dtype(query=query, key=key, value=value)
    B, H, L, d_k = query.shape
    S = key.shape[-2]
    _validate.shape("key", key, (B, H, S, d_k), "(B, H, S, d_k) with query's B, H and d_k")
    _validate.shape("value", value, (B, H, S, None), "(B, H, S, d_v) with key's B, H and S")
    if score_mod is not None:
        _check_signature("score_mod", score_mod, ("score", "b", "h", "q_idx", "kv_idx"))
    if block_mask is None:
        block_mask = create_block_mask(lambda b, h, q_idx, kv_idx: q_idx >= 0, 1, 1, L, S)
    if not isinstance(block_mask, BlockMask):
        raise TypeError(
            f"block_mask must be a BlockMask from create_block_mask, got {type(block_mask).__name__}"
        )
    mB, mH, mL, mS = block_mask.shape
    if mL != L or mS != S or mB not in (1, B) or mH not in (1, H):
        raise ValueError(
            f"block_mask was made for (B, H, L, S) = {block_mask.shape}; the inputs need "
            f"({B} or 1, {H} or 1, {L}, {S})"
        )
    block_q, block_k = block_mask.block_size
    kinds = block_mask.kinds.expand(B, H, -1, -1)  # (B, H, n_q, n_k)

    def kind(rows: range, cols: range) -> Tensor:  # (B, H): the tile's kind per sequence and head
        return kinds[:, :, rows.start // block_q, cols.start // block_k]

    def empty(rows: range, cols: range) -> bool:
        return bool((kind(rows, cols) == EMPTY).all())

    def modified(scores: Tensor, rows: range, cols: range) -> Tensor:  # (B, H, bq, bk)
        if score_mod is not None:
            scores = score_mod(scores, *_indices(B, H, rows, cols))
            if not isinstance(scores, Tensor) or not scores.dtype.is_floating_point:
                got = scores.dtype if isinstance(scores, Tensor) else type(scores).__name__
                raise TypeError(f"score_mod must return a floating tensor of scores, got {got}")
            scores = _broadcast("score_mod", scores, (B, H, len(rows), len(cols)))
        if (kind(rows, cols) != FULL).any():  # some sequence or head needs the mask here
            allowed = _apply_mask_mod(block_mask.mask_mod, B, H, rows, cols)
            scores = scores + additive_mask(allowed, scores)
        return scores

    output, state = tiled_attention(
        query, key, value, scale=scale, block_size=(block_q, block_k), skip_tile=empty, mod_tile=modified
    )
    return output, FlexState(state.logsumexp, state.tiles_computed, state.tiles_skipped)


# --- the cost of decoding -----------------------------------------------------------------------


def attention_intensity(
    L: int, S: int, num_heads: int, num_kv_heads: int, head_dim: int, bytes_per_number: int = 2
) -> float:
    r"""Multiply-adds per byte read, for one sequence's attention of ``L`` queries over ``S`` keys.

    $Q K^\top$ and $A V$ take $2 H L S d_k$ multiply-adds. The bytes read are
    those of $Q$ (``H L d_k`` numbers) and of $K$ and $V$ (``2 H_kv S d_k``).

    $$
    I = \frac{2 H L S d_k}{b\,(H L d_k + 2 H_{kv} S d_k)}
    $$

    For one decoding step ($L = 1$) and $S \gg H / H_{kv}$ this is about
    $H / (H_{kv}\, b)$: every key read is used once per query head in its group.
    For a prefill of $T$ tokens ($L = S = T$) it grows like $T$.

    Args:
        L: Queries.
        S: Keys.
        num_heads: ``H``.
        num_kv_heads: ``H_kv``.
        head_dim: ``d_k``.
        bytes_per_number: ``b``: 2 for 16-bit numbers.

    Returns:
        Multiply-adds per byte.

    Examples:
        >>> heads = dict(num_heads=32, num_kv_heads=32, head_dim=128)
        >>> attention_intensity(1, 4096, **heads)  # about 1/2
        0.4999389722934212
        >>> attention_intensity(4096, 4096, **heads)  # T / 3
        1365.3333333333333
    """
    for name, n in (("L", L), ("S", S), ("num_heads", num_heads), ("num_kv_heads", num_kv_heads)):
        _validate.count(name, n)
    _validate.count("head_dim", head_dim)
    _validate.count("bytes_per_number", bytes_per_number)
    _validate.divides("num_kv_heads", num_kv_heads, "num_heads", num_heads)
    macs = 2 * num_heads * L * S * head_dim
    read = bytes_per_number * (num_heads * L * head_dim + 2 * num_kv_heads * S * head_dim)
    return macs / read


def merge_partials(outputs: Tensor, logsumexps: Tensor) -> tuple[Tensor, Tensor]:
    r"""Merge attention computed over disjoint parts of the keys into attention over all of them.

    Part $i$ gives its normalised output $O_i$ and its log-sum-exp $\lambda_i$.
    With $\lambda = \log \sum_i e^{\lambda_i}$, the merged output is
    $O = \sum_i e^{\lambda_i - \lambda} O_i$: each part weighted by its share of
    the softmax's denominator. A part with no key ($\lambda_i = -\infty$) weighs nothing.

    Args:
        outputs: ``(parts, ..., L, d_v)``.
        logsumexps: ``(parts, ..., L)``.

    Returns:
        ``(output, logsumexp)``: ``(..., L, d_v)`` and ``(..., L)``.

    Examples:
        Two halves of the keys of one query:

        >>> g = torch.Generator().manual_seed(0)
        >>> q = torch.randn(1, 4, generator=g)
        >>> k, v = torch.randn(6, 4, generator=g), torch.randn(6, 4, generator=g)
        >>> halves = (slice(0, 2), slice(2, 6))
        >>> parts = [(q @ k[s].T / 2, v[s]) for s in halves]  # scores, d_k = 4
        >>> outputs = torch.stack([s.softmax(-1) @ p for s, p in parts])  # (2, 1, 4)
        >>> lses = torch.stack([s.logsumexp(-1) for s, _ in parts])  # (2, 1)
        >>> out, _ = merge_partials(outputs, lses)
        >>> torch.allclose(out, scaled_dot_product_attention(q, k, v)[0], atol=1e-6)
        True
    """
    _validate.tensor("outputs", outputs, min_ndim=3)
    _validate.tensor("logsumexps", logsumexps, min_ndim=2)
    _validate.shape(
        "logsumexps", logsumexps, outputs.shape[:-1], "(parts, ..., L): outputs' shape without d_v"
    )
    total = torch.logsumexp(logsumexps, dim=0)  # (..., L)
    weights = (logsumexps - finite_or_zero(total)).exp()  # (parts, ..., L); 0 for an empty part
    return (weights[..., None] * outputs).sum(dim=0), total  # (..., L, d_v)


def split_k_attention(query: Tensor, key: Tensor, value: Tensor, num_splits: int) -> tuple[Tensor, Tensor]:
    """Decoding attention with the keys split across ``num_splits`` workers, merged at the end.

    Each worker attends the queries to its contiguous share of the keys and
    returns its output and log-sum-exp; `merge_partials` combines them. This
    is Flash-Decoding's split-K: with one query per sequence, the work is
    spread along the keys instead of the queries.

    Args:
        query: ``(..., L, d_k)``, usually ``L = 1``.
        key: ``(..., S, d_k)``.
        value: ``(..., S, d_v)``.
        num_splits: Workers, ``1 <= num_splits <= S``.

    Returns:
        ``(output, partial_outputs)``: ``(..., L, d_v)``, and the workers'
        ``(num_splits, ..., L, d_v)`` before the merge.

    Examples:
        >>> q, k, v = (
        ...     torch.randn(2, 1, n, 8, generator=torch.Generator().manual_seed(n))
        ...     for n in (1, 9, 9)
        ... )
        >>> out, partial = split_k_attention(q, k, v, num_splits=3)
        >>> expected, _ = scaled_dot_product_attention(q, k, v)
        >>> torch.allclose(out, expected, atol=1e-6), tuple(partial.shape)
        (True, (3, 2, 1, 1, 8))
    """
    _validate.attention_inputs(query, key, value, None, False)
    S = key.shape[-2]
    _validate.count("num_splits", num_splits, maximum=S)
    bounds = [round(S * i / num_splits) for i in range(num_splits + 1)]
    outputs, lses = [], []
    q = query.to(compute_dtype(query.dtype))
    for start, stop in itertools.pairwise(bounds):
        scores = q @ key[..., start:stop, :].to(q.dtype).transpose(-2, -1) / math.sqrt(query.shape[-1])
        lse = torch.logsumexp(scores, dim=-1)  # (..., L)
        outputs.append((scores - lse[..., None]).exp() @ value[..., start:stop, :].to(q.dtype))
        lses.append(lse)
    partial = torch.stack(outputs)  # (num_splits, ..., L, d_v)
    output, _ = merge_partials(partial, torch.stack(lses))
    return output.to(query.dtype), partial
