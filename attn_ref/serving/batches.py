"""Two ways to batch requests of different lengths: padded to one length, or packed into one sequence.

`generate_padded` right-pads the prompts and reserves each request a slab of
cache for its longest possible length, as servers did before paging.
`generate_packed` concatenates the requests into one sequence (the *varlen*
layout) and keeps them apart with `attn_ref.masks.document_causal_mask`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from attn_ref.decoder import TinyDecoder
from attn_ref.masks import document_causal_mask
from attn_ref.serving.forward import Attend, attention, run_decoder
from attn_ref.serving.requests import Request, check_requests

__all__ = ["generate_packed", "generate_padded"]


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
    requests = check_requests(requests, model)
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
    requests = check_requests(requests, model)
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
