"""attn_ref.modern's decoder written out in float64 NumPy, from the formulas, for the tests of the
pages that train it (layer_schedules, attention_sinks): learned positions, full causal layers, and
the optional sink logit, head gate, softcap and QK-norm. The model's parameters are read; nothing
of attn_ref computes here."""

from __future__ import annotations

import math

import numpy as np

from tests.support.reference import as64, causal, softmax


def _rms(x: np.ndarray, gain: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    return x / np.sqrt((x**2).mean(axis=-1, keepdims=True) + eps) * gain


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def layer_np(layer, x: np.ndarray) -> dict:
    """One ModernAttention layer on (B, T, C) float64 input, full causal (no window, no rotary):
    its output, weights (B, H, T, T), gates (B, T, H) if any, the raw scores (B, H, T, T) before
    any cap or mask, and the largest raw |score|."""
    B, T, C = x.shape
    H, d = layer.num_heads, layer.head_dim
    assert layer.window is None and layer.rope_base is None and layer.num_kv_heads == H

    def heads(module):  # (B, T, C) -> (B, H, T, d)
        return (x @ as64(module.weight).T).reshape(B, T, H, d).transpose(0, 2, 1, 3)

    q, k, v = heads(layer.q_proj), heads(layer.k_proj), heads(layer.v_proj)
    if layer.q_norm is not None:
        q, k = _rms(q, as64(layer.q_norm.weight)), _rms(k, as64(layer.k_norm.weight))
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d)  # (B, H, T, T)
    out = {"max_logit": float(np.abs(scores).max()), "raw_scores": scores}
    if layer.softcap is not None:
        scores = layer.softcap * np.tanh(scores / layer.softcap)
    scores = np.where(causal(T), scores, -np.inf)
    if layer.sink is None:
        weights = softmax(scores)
    else:  # the sink as one more column, dropped after the softmax
        column = np.broadcast_to(as64(layer.sink)[None, :, None, None], (B, H, T, 1))
        weights = softmax(np.concatenate([scores, column], axis=-1))[..., :-1]
    o = weights @ v  # (B, H, T, d)
    if layer.gate_proj is not None:
        gates = _sigmoid(x @ as64(layer.gate_proj.weight).T + as64(layer.gate_proj.bias))  # (B, T, H)
        out["gates"] = gates
        o = o * gates.transpose(0, 2, 1)[..., None]
    out["output"] = o.transpose(0, 2, 1, 3).reshape(B, T, C) @ as64(layer.out_proj.weight).T
    out["weights"] = weights
    return out


def decoder_np(model, tokens) -> dict:
    """The decoder on (B, T) tokens: logits (B, T, V), each layer's dict (`layer_np`), each
    layer's input, and the next-token losses (B, T - 1) in nats."""
    ids = np.asarray(tokens)
    T = ids.shape[1]
    x = as64(model.token_embedding.weight)[ids] + as64(model.position_embedding.weight)[:T]
    layers, inputs = [], []
    for layer in model.layers:
        inputs.append(x)
        result = layer_np(layer, x)
        layers.append(result)
        x = x + result["output"]
    logits = x @ as64(model.unembedding.weight).T  # (B, T, V)
    z = logits[:, :-1]
    log_probs = z - z.max(-1, keepdims=True)
    log_probs = log_probs - np.log(np.exp(log_probs).sum(-1, keepdims=True))
    losses = -np.take_along_axis(log_probs, ids[:, 1:, None], axis=-1)[..., 0]
    return {"logits": logits, "layers": layers, "inputs": inputs, "losses": losses}


# The published configurations, typed here from their sources (not read from attn_ref):
# (name, layers, num_key_value_heads, head_dim, window, which layers are full, context).
# Gemma: google/gemma_pytorch gemma/config.py at 014acb7 (attn_types, sliding_window_size,
# num_key_value_heads, head_dim; the 4B's context from the Gemma 3 report, 128K);
# gpt-oss: openai/gpt-oss gpt_oss/torch/model.py at 7b58334 ("layer_idx % 2 == 0" slides);
# nanochat: karpathy/nanochat nanochat/gpt.py at 92d63d4 ("SSSL", final layer L, a left
# window of 512, so 513 keys with the query itself).
def _gemma2(n: int) -> list[bool]:
    return [i % 2 == 1 for i in range(n)]


def _gemma3(n: int) -> list[bool]:
    return [i % 6 == 5 for i in range(n)]


def _nanochat(n: int) -> list[bool]:
    return [i % 4 == 3 or i == n - 1 for i in range(n)]


QUOTED = [
    ("Gemma 2 2B", 26, 4, 256, 4096, _gemma2, 8192),
    ("Gemma 2 9B", 42, 8, 256, 4096, _gemma2, 8192),
    ("Gemma 2 27B", 46, 16, 128, 4096, _gemma2, 8192),
    ("Gemma 3 1B", 26, 1, 256, 512, _gemma3, 32768),
    ("Gemma 3 4B", 34, 4, 256, 1024, _gemma3, 131072),
    ("Gemma 3 12B", 48, 8, 256, 1024, _gemma3, 131072),
    ("Gemma 3 27B", 62, 16, 128, 1024, _gemma3, 131072),
    ("gpt-oss-20b", 24, 8, 64, 128, _gemma2, 131072),
    ("gpt-oss-120b", 36, 8, 64, 128, _gemma2, 131072),
    ("nanochat d20", 20, 10, 128, 513, _nanochat, 2048),
]


def bill_by_hand(name: str, T: int, all_full: bool = False, b: int = 2) -> int:
    """Bytes of one sequence's cache after T tokens, by the formula, from `QUOTED`."""
    _, n, kv, d, w, full, _ = next(row for row in QUOTED if row[0] == name)
    return sum(2 * kv * d * b * (T if all_full or f else min(T, w)) for f in full(n))
