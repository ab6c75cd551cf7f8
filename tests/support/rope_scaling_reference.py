"""RoPE's stretched frequencies as their sources write them, in float64 NumPy, and a RoPE decoder
written out (the tests of attn_ref.rope_scaling, attn_ref.training.rotary and the "longer than
trained" tutorial).

Each formula is transcribed from its source, not from attn_ref:

- position interpolation: theta / s (Chen et al., 2023, as YaRN's paper restates it: g(m) = m / s);
- NTK-aware: the base b s^(d / (d - 2)) (bloc97's ``base = base * a ** (dim / (dim-2))``; YaRN's
  paper, equation 16);
- YaRN by its paper: the ramp linear in r = L / lambda (equations 17, 18 and 20);
- YaRN as its authors' code computes it (jquesnelle/yarn, ``find_correction_dim``,
  ``find_correction_range``, ``linear_ramp_mask`` in scaled_rope/LlamaYaRNScaledRotaryEmbedding.py):
  the pair indices where r = beta_fast and r = beta_slow, rounded outwards, clamped to [0, d - 1],
  and a ramp linear in the pair index between them (gpt-oss's ``RotaryEmbedding`` without rounding);
- Llama 3.1: Meta's ``apply_scaling`` (meta-llama/llama-models,
  models/llama3/reference_impl/model.py), as a loop over the frequencies.

Tolerances: in float64 each formula is a handful of operations, a power b ** x loses at most about
|x ln b| ~ 14 units of 2 ** -52 for the bases here; rtol 1e-12 is far above that and far below any
real difference.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from tests.support.positions_reference import rotate

RTOL = 1e-12
# name: (d_k, base, original length L, factor s): the page's model and four shipped models
CONFIGS = {
    "the page's model": (32, 100.0, 32, 8.0),
    "Llama 2 7B": (128, 10000.0, 4096, 16.0),
    "Llama 3.1 8B": (128, 500000.0, 8192, 8.0),
    "gpt-oss": (64, 150000.0, 4096, 32.0),
    "Qwen3 8B": (128, 1000000.0, 32768, 4.0),
}


def rope_theta(d: int, base: float) -> np.ndarray:
    """theta_i = base ** (-2i / d), i = 0 .. d/2 - 1."""
    return base ** (-2.0 * np.arange(d // 2) / d)


def interpolation(theta: np.ndarray, s: float) -> np.ndarray:
    """Position interpolation: position m turned as m / s, i.e. every frequency over s."""
    return theta / s


def ntk_aware(d: int, base: float, s: float) -> np.ndarray:
    """RoPE's frequencies with bloc97's base, base * s ** (d / (d - 2))."""
    return rope_theta(d, base * s ** (d / (d - 2)))


def yarn_paper(theta: np.ndarray, L: float, s: float, alpha: float = 1.0, beta: float = 32.0) -> np.ndarray:
    """YaRN's equation 20 with the ramp of equation 18, r = L / lambda (equation 17)."""
    r = L / (2 * np.pi / theta)
    gamma = np.where(r < alpha, 0.0, np.where(r > beta, 1.0, (r - alpha) / (beta - alpha)))
    return (1 - gamma) * theta / s + gamma * theta


def yarn_authors(
    d: int, base: float, L: float, s: float, beta_fast: float = 32.0, beta_slow: float = 1.0, truncate=True
) -> np.ndarray:
    """YaRN's frequencies as the authors' code computes them (and gpt-oss's, ``truncate=False``)."""

    def correction_dim(turns: float) -> float:
        return d * math.log(L / (turns * 2 * math.pi)) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d - 1)
    if low == high:
        high += 0.001
    extrapolation = 1 - np.clip((np.arange(d // 2) - low) / (high - low), 0, 1)
    theta = rope_theta(d, base)
    return theta / s * (1 - extrapolation) + theta * extrapolation


def llama3_apply_scaling(
    freqs: np.ndarray, scale_factor: float, low_freq_factor: float, high_freq_factor: float, old_context_len
) -> np.ndarray:
    """Meta's apply_scaling, as a loop."""
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    new = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_freq_wavelen:
            new.append(freq)
        elif wavelen > low_freq_wavelen:
            new.append(freq / scale_factor)
        else:
            smooth = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
            new.append((1 - smooth) * freq / scale_factor + smooth * freq)
    return np.array(new)


def product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` in float64, through PyTorch's matmul: NumPy's OpenBLAS spins its threads on a busy
    machine and takes fifty times longer on the test batches' stacked products."""
    return (torch.from_numpy(np.ascontiguousarray(a)) @ torch.from_numpy(np.ascontiguousarray(b))).numpy()


def rotary_decoder(
    weights: dict[str, np.ndarray], tokens: np.ndarray, theta: np.ndarray, scale: float, num_heads: int
) -> tuple[np.ndarray, list[np.ndarray]]:
    """A RoPE attention-only decoder in float64: ``weights`` by the module's state_dict names,
    ``tokens`` (B, T). Returns the logits (B, T, V) and each layer's weights (B, H, T, T)."""
    x = weights["token_embedding.weight"][tokens]  # (B, T, C)
    B, T, C = x.shape
    d_k = C // num_heads
    future = np.triu(np.ones((T, T), dtype=bool), k=1)
    layers = sorted({int(name.split(".")[1]) for name in weights if name.startswith("layers.")})
    all_weights = []
    for layer in layers:

        def project(name, inputs, layer=layer):
            out = (
                product(inputs, weights[f"layers.{layer}.{name}.weight"].T)
                + weights[f"layers.{layer}.{name}.bias"]
            )
            return out.reshape(B, T, num_heads, d_k).transpose(0, 2, 1, 3)  # (B, H, T, d_k)

        q = rotate(project("q_proj", x), np.arange(T), theta=theta) * scale
        k = rotate(project("k_proj", x), np.arange(T), theta=theta) * scale
        v = project("v_proj", x)
        scores = product(q, k.transpose(0, 1, 3, 2)) / math.sqrt(d_k)  # (B, H, T, T)
        scores[..., future] = -np.inf
        w = np.exp(scores - scores.max(axis=-1, keepdims=True))
        w /= w.sum(axis=-1, keepdims=True)
        heads = product(w, v).transpose(0, 2, 1, 3).reshape(B, T, C)  # (B, H, T, d_k) -> (B, T, C)
        out = (
            product(heads, weights[f"layers.{layer}.out_proj.weight"].T)
            + weights[f"layers.{layer}.out_proj.bias"]
        )
        x = x + out
        all_weights.append(w)
    return product(x, weights["unembedding.weight"].T), all_weights


def state64(model) -> dict[str, np.ndarray]:
    """A module's parameters in float64 NumPy, by their state_dict names."""
    return {name: p.detach().double().numpy() for name, p in model.state_dict().items()}


def next_token_nll(logits: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """-log softmax(logits)[next token] in float64: (B, T - 1)."""
    z = logits[:, :-1] - logits[:, :-1].max(axis=-1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    return -np.take_along_axis(log_p, tokens[:, 1:, None], axis=-1)[..., 0]
