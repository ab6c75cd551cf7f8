"""Independent references for speculative decoding: greedy decoding by full forward passes, a
tree's ancestors by walking up its parents, the exact output distribution of a sampling rule on
small Markov chains, and the chi-square test with its power.

Nothing here calls attn_ref.serving.speculative: each is written from the definitions (Leviathan
et al. 2023, Algorithm 1; Chen et al. 2023, Algorithm 2), so that a test compares the module with
something it did not compute.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np
import torch

MARGIN64 = 1e-9  # a float64 top-2 gap below this is a tie: float64 logits move ~1e-14 between layouts


@torch.no_grad()
def greedy_by_full_passes(model, prompt: torch.Tensor, n: int) -> tuple[list[int], torch.Tensor]:
    """Greedy decoding as n full forward passes of ``model`` (no cache): the tokens and each
    step's logits ``(n, V)``."""
    tokens, rows = prompt.tolist(), []
    for _ in range(n):
        out = model(torch.tensor([tokens]))
        logits = out[0] if isinstance(out, tuple) else out  # CharTransformer returns weights too
        rows.append(logits[0, -1])
        tokens.append(int(rows[-1].argmax()))
    return tokens[len(prompt) :], torch.stack(rows)


def top2_gaps(logits: torch.Tensor) -> torch.Tensor:
    """``(n, V)`` -> ``(n,)``: best minus second-best logit of each row."""
    top = logits.topk(2, dim=-1).values
    return top[:, 0] - top[:, 1]


def agree_but_for_ties(tokens: list[int], reference: list[int], gaps: torch.Tensor, margin: float) -> bool:
    """``tokens`` equal ``reference``, or first differ at a step whose reference gap is below
    ``margin`` (a near tie that rounding may break either way; after it the texts differ)."""
    for i, (a, b) in enumerate(zip(tokens, reference, strict=True)):
        if a != b:
            return float(gaps[i]) < margin
    return True


def ancestors(parents: list[int]) -> np.ndarray:
    """``(N, N)``: row i marks i and every node reached by following parents from i."""
    N = len(parents)
    out = np.zeros((N, N), dtype=bool)
    for i in range(N):
        j = i
        while j >= 0:
            out[i, j] = True
            j = parents[j]
    return out


def residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """(p - q)_+ normalized (Leviathan et al.'s norm(max(0, p - q)))."""
    r = np.maximum(p - q, 0.0)
    return r / r.sum()


def sampled_distribution(
    P: np.ndarray, Q: np.ndarray, k: int, length: int, start: int, replacement: Callable = residual
) -> np.ndarray:
    """The exact distribution of the first ``length`` tokens after ``start`` that speculative
    sampling emits with ``k`` guesses per round, for a target and a drafter that are Markov chains
    (``P[a, b]``: the chance of b after a). ``replacement(p, q)`` is the distribution drawn from after
    a rejection. Every round is enumerated: each guess drawn from Q, kept with min(1, p/q), else
    replaced; a bonus token from P after k kept guesses."""
    V = P.shape[0]
    out = np.zeros((V,) * length)

    def rounds(text: list[int], chance: float) -> None:
        if len(text) - 1 >= length:
            out[tuple(text[1 : length + 1])] += chance
            return

        def guess(prev: int, emitted: list[int], c: float) -> None:
            if len(emitted) == k:
                for x in range(V):
                    rounds([*text, *emitted, x], c * P[prev, x])
                return
            r = replacement(P[prev], Q[prev])
            for x in range(V):
                if Q[prev, x] == 0:
                    continue
                keep = min(1.0, P[prev, x] / Q[prev, x])
                guess(x, [*emitted, x], c * Q[prev, x] * keep)
                for y in range(V):
                    if r[y] > 0:
                        rounds([*text, *emitted, y], c * Q[prev, x] * (1 - keep) * r[y])

        guess(text[-1], [], chance)

    rounds([start], 1.0)
    return out


def chain_distribution(P: np.ndarray, length: int, start: int) -> np.ndarray:
    """The target's own distribution of its first ``length`` tokens after ``start``."""
    V = P.shape[0]
    out = np.zeros((V,) * length)
    for text in itertools.product(range(V), repeat=length):
        chance, prev = 1.0, start
        for x in text:
            chance, prev = chance * P[prev, x], x
        out[text] = chance
    return out


def chi2_sf_even(x: float, df: int) -> float:
    """P(chi-square(df) > x) for an even df: e^{-x/2} sum_{j < df/2} (x/2)^j / j!."""
    assert df % 2 == 0
    term, total = 1.0, 1.0
    for j in range(1, df // 2):
        term *= (x / 2) / j
        total += term
    return math.exp(-x / 2) * total


def chi2_p_value(counts: np.ndarray, probabilities: np.ndarray) -> float:
    expected = counts.sum() * probabilities.ravel()
    statistic = float((((counts.ravel() - expected) ** 2) / expected).sum())
    return chi2_sf_even(statistic, counts.size - 1)


def power(true: np.ndarray, claimed: np.ndarray, n: int, alpha: float, runs: int, seed: int) -> float:
    """Share of ``runs`` chi-square tests of ``n`` samples from ``true`` against ``claimed`` that
    reject at ``alpha``."""
    rng = np.random.default_rng(seed)
    samples = rng.multinomial(n, true.ravel(), size=runs)
    return float(np.mean([chi2_p_value(s, claimed) < alpha for s in samples]))
