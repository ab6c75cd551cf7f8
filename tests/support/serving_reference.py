"""Greedy decoding written out as a loop of full forward passes (no cache, no attn_ref attention):
what the serving code's tokens are checked against (tests of attn_ref.serving and the serving
tutorials)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F


def window_mask(T: int, window: int, sinks: int = 0) -> np.ndarray:
    """The (T, T) causal mask of a sliding window of ``window`` keys, plus the first ``sinks``."""
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    return (j <= i) & ((i - j < window) | (j < sinks))


@torch.no_grad()
def greedy(model, request) -> tuple[list[int], torch.Tensor]:
    """Each new token is the argmax of a full forward pass over the text so far: the new tokens,
    and the logits each was chosen from."""
    tokens, logits = list(request.prompt), []
    for _ in range(request.max_new_tokens):
        logits.append(model(torch.tensor([tokens]))[0, -1])
        tokens.append(int(logits[-1].argmax()))
    return tokens[len(request.prompt) :], torch.stack(logits)


@torch.no_grad()
def masked_greedy(model, request, window: int, sinks: int = 0) -> tuple[list[int], torch.Tensor]:
    """Greedy decoding by full forward passes of a TinyDecoder, its attention by PyTorch's SDPA
    under `window_mask`: the new tokens, and the logits each was chosen from."""
    tokens, logits = list(request.prompt), []
    for _ in range(request.max_new_tokens):
        T = len(tokens)
        allowed = torch.tensor(window_mask(T, window, sinks))
        x = model.token_embedding(torch.tensor([tokens])) + model.position_embedding(torch.arange(T))
        for block in model.blocks:
            a, h = block.attn, block.norm1(x)
            q, k, v = (
                p(h).view(1, T, -1, a.head_dim).transpose(1, 2) for p in (a.q_proj, a.k_proj, a.v_proj)
            )
            heads = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, enable_gqa=True)
            x = x + a.out_proj(heads.transpose(1, 2).reshape(1, T, -1))
            x = x + block.mlp(block.norm2(x))
        logits.append(model.head(model.norm(x))[0, -1])
        tokens.append(int(logits[-1].argmax()))
    return tokens[len(request.prompt) :], torch.stack(logits)
