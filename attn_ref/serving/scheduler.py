"""Continuous batching: a scheduler that admits and retires requests at every step, over a paged cache.

`serve` runs a stream of requests through one forward pass per step, with
chunked prefill, preemption when the blocks run out, static batching for
comparison, and shared prompt prefixes; `ServeResult` holds its tokens and a
log of every step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from attn_ref import _validate
from attn_ref.decoder import TinyDecoder
from attn_ref.serving.forward import attention, run_decoder
from attn_ref.serving.paged import PagedKVCache
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

    With ``static=True`` it admits only when no request is running (static
    batching): a finished request still gives its blocks back at once, but
    the requests waiting to start wait for the batch's longest request. With
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
    requests = check_requests(requests, model)
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
