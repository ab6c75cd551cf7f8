"""Continuous batching: a scheduler that admits and retires requests at every step, over a paged cache.

`serve` runs a stream of requests through one forward pass per step, with
chunked prefill, preemption when the blocks run out, static batching for
comparison, shared prompt prefixes, a prefix cache across requests, and
attention split along the keys; `ServeResult` holds its tokens and a log of
every step.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from attn_ref import _validate
from attn_ref.decoder import TinyDecoder
from attn_ref.masks import causal_mask
from attn_ref.serving.forward import attention, run_decoder
from attn_ref.serving.invariant import split_kv_attention
from attn_ref.serving.paged import PagedKVCache
from attn_ref.serving.prefix_cache import PrefixCache
from attn_ref.serving.requests import Request, check_requests

__all__ = ["ServeResult", "serve"]


@dataclass
class ServeResult:
    """What `serve` produced, and a log of every step.

    Attributes:
        tokens: Request index -> its new tokens.
        logits: Request index -> the ``(max_new_tokens, vocab_size)`` logits its tokens were chosen from.
        steps: One dict per forward pass: ``running`` (request indices in the
            batch), ``tokens`` (tokens fed), ``stored`` (positions the running
            requests hold), ``lengths`` (request index -> positions it holds),
            ``blocks`` (blocks in use), ``cache_only`` (blocks in use that only
            the prefix cache holds), ``admitted``,
            ``finished`` and ``preempted`` (request indices).
        finished_at: Request index -> the step at which it finished.
        cached: Request index -> prompt tokens it found in the prefix cache when
            first admitted, and so did not compute (empty without a prefix cache).
    """

    tokens: dict[int, Tensor]
    logits: dict[int, Tensor]
    steps: list[dict]
    finished_at: dict[int, int]
    cached: dict[int, int] = field(default_factory=dict)


@torch.no_grad()
def serve(
    model: TinyDecoder,
    requests: Sequence[Request],
    cache: PagedKVCache,
    chunk_size: int | None = None,
    max_running: int | None = None,
    static: bool = False,
    share_prefix: int = 0,
    prefix_cache: PrefixCache | None = None,
    split_size: int | None = None,
    num_splits: int | Callable[[int], int] | None = None,
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

    With ``static=True`` it admits only when no request is running (static
    batching): a finished request still gives its blocks back at once, but
    the requests waiting to start wait for the batch's longest request. With
    ``share_prefix=n``, a request whose first ``n`` prompt tokens equal an
    earlier running request's starts by sharing that request's blocks
    (`PagedKVCache.fork`) and feeds only the rest of its prompt.

    With a ``prefix_cache`` (`attn_ref.serving.RadixCache` or
    `attn_ref.serving.BlockHashCache` on the same pool), every full block a
    request has computed is stored in it, and a request starts with the
    longest cached prefix of its prompt but its last token (which must be fed
    for its logits) and feeds only the rest. Cached blocks stay in the pool
    after their requests finish, across calls to `serve`; when the free list
    runs dry the cache evicts before a request is preempted.

    Attention is `attention` over each request's keys, or, with
    ``split_size`` or ``num_splits``, `split_kv_attention`: keys split at
    multiples of ``split_size``, or into ``num_splits`` even splits, where
    ``num_splits`` may be a function of the number of requests in the step (a
    GPU kernel's choice, which makes a request's bits depend on its batch).

    Args:
        model: The decoder.
        requests: The stream, each with its arrival step.
        cache: An empty `PagedKVCache` shaped for ``model``.
        chunk_size: Most prompt tokens a request feeds per step; ``None`` feeds the whole prompt.
        max_running: Most requests in one batch; ``None`` for no limit but the blocks.
        static: Admit new requests only when the batch is empty.
        share_prefix: Length of a prompt prefix that requests may share.
        prefix_cache: A cache of blocks kept across requests, on ``cache``.
        split_size: Keys per split of a fixed-size split attention.
        num_splits: Splits of the keys, or a function from the number of requests
            in a step to the number of splits. Give at most one of the two.

    Returns:
        A `ServeResult`.

    Raises:
        ValueError: A request needs more positions than the cache or the
            model's context holds, or the cache does not fit the model.

    Examples:
        >>> from attn_ref.serving import generate_padded
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
    batcher = _Batcher(
        model,
        check_requests(requests, model),
        cache,
        chunk_size,
        share_prefix,
        prefix_cache,
        _Splits(split_size, num_splits),
    )
    steps: list[dict] = []
    step = 0
    while batcher.waiting or batcher.running:
        admitted = batcher.admit(step, max_running, batch_open=not (static and batcher.running))
        if batcher.running:
            batch, preempted = batcher.reserve()
            finished = batcher.choose_next(batch, batcher.forward(batch))
            batcher.remember(batch)
            steps.append(batcher.log(step, batch, admitted, finished, preempted))
            batcher.retire(finished, step)
        step += 1
    return ServeResult(
        {i: torch.tensor(t) for i, t in batcher.new.items()},
        {i: torch.stack(rows) for i, rows in batcher.logits_of.items()},
        steps,
        batcher.finished_at,
        batcher.cached,
    )


@dataclass(frozen=True)
class _Splits:
    """How attention splits a request's keys: a fixed size, a count (or a count from the batch's
    size), or not at all."""

    size: int | None
    count: int | Callable[[int], int] | None

    def __post_init__(self) -> None:
        if self.size is not None and self.count is not None:
            raise ValueError(
                f"give at most one of split_size and num_splits, got split_size={self.size!r}, "
                f"num_splits={self.count!r}"
            )
        if self.size is not None:
            _validate.count("split_size", self.size)
        if self.count is not None and not callable(self.count):
            _validate.count("num_splits", self.count)

    def attend(self, batch_size: int, q: Tensor, keys: Tensor, values: Tensor, allowed: Tensor) -> Tensor:
        """One request's attention, ``q`` (1, H, L, d_k) over ``keys`` (1, H_kv, S, d_k)."""
        if self.size is None and self.count is None:
            return attention(q, keys, values, allowed)
        count = self.count(batch_size) if callable(self.count) else self.count
        if count is not None:
            count = min(_validate.count("num_splits(batch size)", count), keys.shape[2])
        return split_kv_attention(q, keys, values, allowed, split_size=self.size, num_splits=count)


def _check_cache(
    model: TinyDecoder, requests: list[Request], cache: PagedKVCache, prefix_cache: PrefixCache | None
) -> None:
    """Refuse a cache that does not fit ``model``, holds blocks of requests (or of a prefix cache not
    given), or cannot hold a request."""
    attn = model.blocks[0].attn
    expected = (model.num_layers, attn.num_kv_heads, attn.head_dim)
    if (cache.num_layers, cache.num_kv_heads, cache.head_dim) != expected:
        raise ValueError(
            f"cache has (num_layers, num_kv_heads, head_dim) = "
            f"{(cache.num_layers, cache.num_kv_heads, cache.head_dim)}, the model needs {expected}"
        )
    if cache.tables:
        raise ValueError(f"cache must be empty, but requests {list(cache.tables)} hold blocks")
    kept = 0 if prefix_cache is None else prefix_cache.num_blocks
    if cache.num_free + kept != cache.num_blocks:
        raise ValueError(
            f"cache holds {cache.num_blocks - cache.num_free - kept} blocks of no request "
            "and of no prefix cache given"
        )
    if prefix_cache is not None and prefix_cache.pool is not cache:
        raise ValueError("prefix_cache must be built on the same PagedKVCache as cache")
    for i, r in enumerate(requests):
        if r.max_length > cache.capacity:
            raise ValueError(
                f"request {i} needs {r.max_length} positions, more than the whole cache holds: "
                f"{cache.num_blocks} blocks of {cache.block_size} = {cache.capacity}"
            )


class _Batcher:
    """The state `serve` keeps between steps, and the four things it does at each step."""

    def __init__(
        self,
        model: TinyDecoder,
        requests: list[Request],
        cache: PagedKVCache,
        chunk_size: int | None,
        share_prefix: int,
        prefix_cache: PrefixCache | None,
        splits: _Splits,
    ) -> None:
        _check_cache(model, requests, cache, prefix_cache)
        if chunk_size is not None:
            _validate.count("chunk_size", chunk_size)
        self.share_prefix = _validate.count("share_prefix", share_prefix, minimum=0)
        if share_prefix and prefix_cache is not None:
            raise ValueError("give share_prefix or prefix_cache, not both: the cache shares prefixes itself")
        self.model, self.requests, self.cache = model, requests, cache
        self.prefix_cache, self.splits = prefix_cache, splits
        self.cached: dict[int, int] = {}  # request -> prompt tokens found in the prefix cache
        self.chunk = chunk_size or model.context_length
        self.waiting = sorted(range(len(requests)), key=lambda i: requests[i].arrival)  # stable: FCFS
        self.running: list[int] = []  # in order of admission
        self.known = {i: list(r.prompt) for i, r in enumerate(requests)}  # tokens whose keys it needs
        self.fed: dict[int, int] = {}  # tokens fed so far (their keys are cached)
        self.new: dict[int, list[int]] = {i: [] for i in range(len(requests))}
        self.logits_of: dict[int, list[Tensor]] = {i: [] for i in range(len(requests))}
        self.finished_at: dict[int, int] = {}

    def _donor(self, i: int) -> int | None:
        """A running request whose cached prompt starts with request ``i``'s shared prefix."""
        n = self.share_prefix
        if not n or len(self.known[i]) <= n:
            return None
        prefix = self.known[i][:n]
        return next((j for j in self.running if self.fed[j] >= n and self.known[j][:n] == prefix), None)

    def admit(self, step: int, max_running: int | None, batch_open: bool) -> list[int]:
        """Admit arrived requests, first come first served, while the free blocks allow."""
        cache, admitted = self.cache, []
        while batch_open and self.waiting and self.requests[self.waiting[0]].arrival <= step:
            i = self.waiting[0]
            if max_running is not None and len(self.running) >= max_running:
                break
            donor = self._donor(i)
            shared = self.share_prefix if donor is not None else 0
            first = min(self.chunk, len(self.known[i]) - shared)
            # A block in hand for each request's next token, when others run. Alone, a request
            # needs only its own blocks: it fits the pool, so an empty batch always admits it.
            spare = len(self.running) + 1 if self.running else 0
            if self.prefix_cache is not None:
                if not self._admit_from_cache(i, spare):
                    break
                self.running.append(i)
                admitted.append(i)
                continue
            if donor is None:
                needed = cache.blocks_for(len(self.known[i]))
            else:  # the blocks its first chunk adds, and a shared, partly filled block copied
                copied = bool(shared % cache.block_size)
                needed = cache.blocks_for(shared + first) - cache.blocks_for(shared) + copied
            if needed + spare > cache.num_free:
                break
            self.waiting.pop(0)
            if donor is not None:  # share the donor's blocks of the prefix
                cache.fork(donor, i)
                cache.truncate(i, shared)
            self.fed[i] = shared
            self.running.append(i)
            admitted.append(i)
        return admitted

    def _admit_from_cache(self, i: int, spare: int) -> bool:
        """Admit request ``i`` with the cached blocks of its prompt, evicting to make room; or not."""
        cache, known = self.cache, self.known[i]
        hit = self.prefix_cache.match(known[:-1], record=False)  # one token left to compute
        if hit:
            cache.share(i, hit)  # the request holds them now: no eviction can take them
        needed = cache.blocks_for(len(known)) - len(hit) + spare
        if needed > cache.num_free:
            self.prefix_cache.evict(needed - cache.num_free)
        if needed > cache.num_free:
            if hit:
                cache.release(i)
            return False
        self.prefix_cache.match(known[:-1])  # admitted: the hit counts
        self.waiting.pop(0)
        self.fed[i] = len(hit) * cache.block_size
        self.cached.setdefault(i, self.fed[i])
        return True

    def reserve(self) -> tuple[list[tuple[int, range]], list[int]]:
        """Each running request's positions this step; preempt the latest admitted when blocks run out."""
        batch: list[tuple[int, range]] = []  # (request, positions fed this step)
        preempted: list[int] = []
        for i in list(self.running):
            if i not in self.running:  # preempted while this step was being planned
                continue
            n = min(self.chunk, len(self.known[i]) - self.fed[i])
            while self.cache.blocks_needed(i, n) > self.cache.num_free:
                short = self.cache.blocks_needed(i, n) - self.cache.num_free
                if self.prefix_cache is not None and self.prefix_cache.evict(short):
                    continue
                victim = self.running.pop()
                batch = [(j, p) for j, p in batch if j != victim]
                if victim in self.cache.tables:  # admitted this step, it may hold no block yet
                    self.cache.release(victim)
                del self.fed[victim]  # its prompt and new tokens are fed again when readmitted
                self.waiting.insert(0, victim)
                preempted.append(victim)
                if victim == i:
                    break
            if i in self.running:
                batch.append((i, self.cache.reserve(i, n)))
        return batch, preempted

    def forward(self, batch: list[tuple[int, range]]) -> Tensor:
        """One forward pass of the whole batch, packed into one sequence: ``(N, vocab)`` logits."""
        cache = self.cache
        tokens = torch.tensor([self.known[i][p] for i, ps in batch for p in ps])  # (N,)
        pos = torch.cat([torch.tensor(list(p)) for _, p in batch])  # (N,)
        starts = list(itertools.accumulate((len(p) for _, p in batch), initial=0))  # each one's first row

        def attend(layer: int, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
            outputs = []
            for (i, p), start in zip(batch, starts, strict=False):
                rows = slice(start, start + len(p))  # this request's rows of the packed sequence
                cache.write(layer, i, p, k[0][:, rows], v[0][:, rows])
                keys, values = cache.gather(layer, i)  # (H_kv, p.stop, d_k)
                allowed = causal_mask(
                    len(p), p.stop, lower_right=True
                )  # its new tokens after its cached ones
                outputs.append(
                    self.splits.attend(len(batch), q[:, :, rows], keys[None], values[None], allowed)
                )  # (1, H, len(p), d_k)
            return torch.cat(outputs, dim=-2)  # (1, H, N, d_k)

        return run_decoder(self.model, tokens[None], pos[None], attend)[0]  # (N, vocab)

    def choose_next(self, batch: list[tuple[int, range]], logits: Tensor) -> list[int]:
        """A greedy token for each request whose last known token went in; the requests now done."""
        finished, end = [], 0
        for i, p in batch:
            end += len(p)
            self.fed[i] = p.stop
            if self.fed[i] == len(self.known[i]):
                row = logits[end - 1]  # (vocab,): the request's last row of the packed sequence
                self.new[i].append(int(row.argmax()))
                self.logits_of[i].append(row)
                self.known[i].append(self.new[i][-1])
                if len(self.new[i]) == self.requests[i].max_new_tokens:
                    finished.append(i)
        return finished

    def remember(self, batch: list[tuple[int, range]]) -> None:
        """Store in the prefix cache every full block whose keys the step's requests have written."""
        if self.prefix_cache is None:
            return
        bs = self.cache.block_size
        for i, _ in batch:
            full = self.fed[i] // bs
            self.prefix_cache.insert(self.known[i][: full * bs], self.cache.tables[i][:full])

    def log(
        self,
        step: int,
        batch: list[tuple[int, range]],
        admitted: list[int],
        finished: list[int],
        preempted: list[int],
    ) -> dict:
        lengths = {i: self.cache.lengths[i] for i, _ in batch}
        return {
            "step": step,
            "running": [i for i, _ in batch],
            "tokens": sum(len(p) for _, p in batch),
            "stored": sum(lengths.values()),
            "lengths": lengths,
            "blocks": self.cache.num_blocks - self.cache.num_free,
            "cache_only": self._cache_only(),
            "admitted": admitted,
            "finished": finished,
            "preempted": preempted,
        }

    def _cache_only(self) -> int:
        if self.prefix_cache is None:
            return 0
        return sum(
            self.cache.ref_counts[b] == 1 for entry in self.prefix_cache.entries() for b in entry.blocks
        )

    def retire(self, finished: list[int], step: int) -> None:
        """Give the finished requests' blocks back."""
        for i in finished:
            self.running.remove(i)
            self.cache.release(i)
            self.finished_at[i] = step
