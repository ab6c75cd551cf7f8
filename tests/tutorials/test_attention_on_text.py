"""The character-model tutorial, as the build executed it, checked against references computed here.

The baselines are counted here with `collections.Counter` and float64 logarithms; the losses are
recomputed from the kept models' logits with a float64 log-softmax written out here; the head
scores from their attention weights with NumPy (the targets come from `attn_ref.training`, whose
masks tests/test_training_text.py checks against regular expressions and backward scans); a head
is zeroed here by zeroing its block of ``W_O`` in a copy, not with ``without_heads``. Every claim
the page makes about what the models learned is checked on every seed the tutorial trained
(0, 1, 2), with thresholds far from what the runs give (see the report of issue #35): forward
passes only, no model is trained here.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
from collections import Counter

import numpy as np
import pytest
import torch

from attn_ref.training import (
    ALPHABET,
    closing_predictions,
    induction_targets,
    opener_targets,
)

TRAINED_SEEDS = (0, 1, 2)  # the tutorial's seeds: every claim holds for each
LN2 = math.log(2)


def log_softmax64(logits: torch.Tensor) -> np.ndarray:
    z = logits.double().numpy()
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


@torch.no_grad()
def forward(model, windows: torch.Tensor) -> tuple[np.ndarray, list[np.ndarray]]:
    """Per-prediction bits ``(n, T - 1)`` in float64, and each layer's ``(n, H, T, T)`` weights."""
    bits, weights = [], []
    for rows in windows.split(256):
        logits, ws = model(rows)
        log_p = log_softmax64(logits[:, :-1])
        nats = -np.take_along_axis(log_p, rows[:, 1:, None].numpy(), axis=-1)[..., 0]
        bits.append(nats / LN2)
        weights.append([w.double().numpy() for w in ws])
    return np.concatenate(bits), [np.concatenate(layer) for layer in zip(*weights, strict=True)]


def zeroed(model, heads):
    """A copy of ``model`` whose given heads' blocks of W_O (columns of out_proj.weight) are zero."""
    silent = copy.deepcopy(model)
    with torch.no_grad():
        for layer, head in heads:
            attn = silent.blocks[layer].attn
            d_k = attn.embed_dim // attn.num_heads
            attn.out_proj.weight[:, head * d_k : (head + 1) * d_k] = 0.0
    return silent


def scores64(weights: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Per head, the mean over queries with a target of the weight on the targets."""
    has = targets.any(axis=-1)  # (n, T)
    on = (weights * targets[:, None]).sum(axis=-1)  # (n, H, T)
    return on.transpose(1, 0, 2)[:, has].mean(axis=-1)


def uniform_score(targets: np.ndarray) -> float:
    """The score of causal uniform weights: query i gives each of its i + 1 keys 1 / (i + 1)."""
    T = targets.shape[-1]
    has = targets.any(axis=-1)
    return float((targets.sum(axis=-1) / np.arange(1, T + 1))[has].mean())


def previous_targets(n: int, T: int) -> np.ndarray:
    return np.broadcast_to(np.eye(T, k=-1, dtype=bool), (n, T, T))


@pytest.fixture(scope="module")
def counted(values) -> dict:
    """The three baselines counted here: uniform, add-one unigram and bigram, in bits."""
    train, held = values["corpus"].train, values["corpus"].held_out
    V = len(ALPHABET)
    ones = Counter(train)
    unigram = -np.mean([math.log2((ones[c] + 1) / (len(train) + V)) for c in held])
    pairs, firsts = Counter(itertools.pairwise(train)), Counter(train[:-1])
    bigram = -np.mean([math.log2((pairs[a, b] + 1) / (firsts[a] + V)) for a, b in itertools.pairwise(held)])
    return {"uniform": math.log2(V), "unigram": unigram, "bigram": bigram}


@pytest.fixture(scope="module")
def measured(values) -> dict:
    """Each seed's figures, from the model the execution kept (forward passes only)."""
    held, held_ids = values["held"], values["held_ids"]
    n, T = held.shape
    closing = closing_predictions(held_ids, T, '"').numpy()
    targets = {
        "previous": previous_targets(n, T),
        "quote": opener_targets(held_ids, T, '"').numpy(),
        "copy": induction_targets(held, k=3).numpy(),
    }
    out = {}
    for seed in TRAINED_SEEDS:
        model = values["models"][seed]
        bits, weights = forward(model, held)
        scores = {name: np.stack([scores64(w, t) for w in weights]) for name, t in targets.items()}
        best_previous = int(scores["previous"][0].argmax())
        quote_heads = [(1, h) for h in range(4) if scores["quote"][1, h] > values["ROLE"]]
        change = {
            pair: forward(zeroed(model, [pair]), held)[0] - bits
            for pair in [(0, best_previous), *((1, h) for h in range(4))]
        }
        together = forward(zeroed(model, quote_heads), held)[0] - bits
        no_layer0 = forward(zeroed(model, [(0, h) for h in range(4)]), held)[0]
        out[seed] = {
            "bits": bits,
            "scores": scores,
            "uniform": {name: uniform_score(t) for name, t in targets.items()},
            "best_previous": best_previous,
            "quote_heads": quote_heads,
            "change": change,
            "closing": closing,
            "together": together,
            "no_layer0": no_layer0.mean(),
        }
    return out


def test_the_corpus_and_the_baselines(values, counted):
    corpus = values["corpus"]
    assert set(corpus.train + corpus.held_out) <= set(ALPHABET)
    for name, bits in counted.items():
        assert values["baselines"][name] == pytest.approx(bits, rel=1e-9)
    assert counted["uniform"] > counted["unigram"] > counted["bigram"]


def test_the_page_shows_the_models_it_trained(values, measured):
    assert sorted(values["models"]) == list(TRAINED_SEEDS)
    for seed in TRAINED_SEEDS:
        assert values["by_seed"][seed]["bpc"] == pytest.approx(measured[seed]["bits"].mean(), abs=1e-4)
    assert values["bpc"] == pytest.approx(measured[0]["bits"].mean(), abs=1e-4)


def test_the_playground_file_holds_seed_0_and_the_heads_named_here(values, measured):
    """The file the playground reads: seed 0's tensors (their shapes and scales), and the heads
    this page names, by the scores measured here with NumPy."""
    document = json.loads(values["exported"])
    f = measured[0]
    expected = [("previous character", (0, f["best_previous"]), f["scores"]["previous"])]
    expected += [("open quote", pair, f["scores"]["quote"]) for pair in f["quote_heads"]]
    assert [(h["role"], (h["layer"], h["head"])) for h in document["heads"]] == sorted(
        ((role, pair) for role, pair, _ in expected), key=lambda named: named[1]
    )
    for h in document["heads"]:
        scores = next(s for role, _, s in expected if role == h["role"])
        assert h["score"] == pytest.approx(scores[h["layer"], h["head"]], abs=1e-5)
    state = values["models"][0].state_dict()
    for name, stored in document["tensors"].items():
        assert stored["shape"] == list(state[name].shape)
        assert stored["scale"] == pytest.approx(state[name].abs().max().item() / 127, rel=1e-5)


@pytest.mark.parametrize("seed", TRAINED_SEEDS)
def test_about_a_bit_below_the_bigram(measured, counted, seed):
    # Runs: 0.86 to 0.92 bits below (issue-35 research: 0.86 at worst over seeds 0-5).
    assert measured[seed]["bits"].mean() < counted["bigram"] - 0.6


@pytest.mark.parametrize("seed", TRAINED_SEEDS)
def test_layer_0_reads_the_previous_character(measured, seed):
    f = measured[seed]
    previous = f["scores"]["previous"]
    # Every layer-0 head above every layer-1 head (runs: a gap of 0.11 to 0.19) ...
    assert previous[0].min() > previous[1].max() + 0.05
    # ... the strongest several times uniform attention's (runs: 4.3x to 9x).
    assert previous[0].max() > 3 * f["uniform"]["previous"]
    # Zeroing it costs more than any layer-1 head, several times over (runs: 8x to 40x).
    layer1 = max(f["change"][1, h].mean() for h in range(4))
    assert f["change"][0, f["best_previous"]].mean() > 4 * layer1


@pytest.mark.parametrize("seed", TRAINED_SEEDS)
def test_layer_1_has_quote_heads_that_closing_quotes_need(measured, seed):
    f = measured[seed]
    quote, closing = f["scores"]["quote"], f["closing"]
    # A layer-1 head on the open quote, several times uniform's score (runs: 6.6x to 9x).
    assert quote[1].max() > quote[0].max()
    assert quote[1].max() > 5 * f["uniform"]["quote"]
    # Zeroed together: more than a bit per closing quote (runs: 2.1 to 2.6), little elsewhere.
    assert f["quote_heads"]
    assert f["together"][closing].mean() > 1.2
    assert f["together"][~closing].mean() < 0.15


@pytest.mark.parametrize("seed", TRAINED_SEEDS)
def test_no_induction_head(measured, seed):
    f = measured[seed]
    # Every earlier-copy score close to uniform attention's (runs: at most 1.08x; 1.34x on seed 3).
    assert f["scores"]["copy"].max() < 1.5 * f["uniform"]["copy"]


@pytest.mark.parametrize("seed", TRAINED_SEEDS)
def test_zeroing_layer_0_leaves_less_than_a_bigram(measured, counted, seed):
    assert measured[seed]["no_layer0"] > counted["bigram"] + 0.3


def test_the_quote_head_matters_only_on_closing_quotes(values, measured):
    # The page's model (seed 0): the previous-character head costs bits everywhere; the best
    # quote head alone many times more on closing quotes than elsewhere (pitfall 2, exercise 1).
    f = measured[0]
    closing = f["closing"]
    prev = f["change"][0, f["best_previous"]]
    quote = f["change"][1, int(f["scores"]["quote"][1].argmax())]
    assert prev[~closing].mean() > 0.3
    assert quote[closing].mean() > 10 * max(quote[~closing].mean(), 1e-3)
    assert prev[closing].mean() / prev[~closing].mean() < 10


def test_a_few_characters_of_context_bring_most_of_the_gain(measured):
    by_position = measured[0]["bits"].mean(axis=0)
    assert by_position[7] - by_position[-1] < 0.5 * (by_position[0] - by_position[-1])


def test_the_context_exercise(values):
    cut, bpc = values["cut"], values["bpc"]
    everything, far = cut["all text"], cut["far closing quotes"]
    assert abs(float(everything[1] - everything[0])) < 0.15
    assert float(far[1] - far[0]) > 0.8
    assert 0.1 < float(values["windowed"]) - bpc < 0.5


def test_the_training_text_gap_is_mostly_the_text(values, counted):
    train_bpc, bpc = values["train_bpc"], values["bpc"]
    assert train_bpc < bpc
    assert values["train_bigram"] < counted["bigram"]
    assert counted["bigram"] - values["train_bigram"] > 0.5 * (bpc - train_bpc)


def test_samples_know_fewer_words_when_hotter(values):
    shares = values["shares"]
    assert shares[0.5] > 0.5
    assert shares[0.5] > shares[1.0] + 0.2
    assert shares[1.0] > shares[1.5] + 0.1
