"""Long contexts at bounded memory: sliding-window decoding with a rolling buffer as its cache.

`generate_windowed` keeps ``num_sinks + window`` slots per layer, whatever the
length of the text: each new position overwrites the one ``window`` before it,
which no later query may see (`attn_ref.masks.sliding_window_mask`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from attn_ref import _validate
from attn_ref.decoder import TinyDecoder
from attn_ref.masks import sliding_window_mask
from attn_ref.serving.forward import Attend, attention, run_decoder
from attn_ref.serving.requests import Request, check_requests

__all__ = ["generate_windowed"]


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
    (request,) = check_requests([request], model)
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
