"""What the induction and cross-attention tutorials claim about their trained models: the
measurements of one seed's models, and the checks of every claim.

Each tutorial trains its models for seeds 0 to 3 in its own execution and keeps them in its
variables (docs/tutorials/induction_heads.py: ``two_layer``, ``one_layer_models``,
``fixed_models``, ``untrained_models``, ``histories``; cross_attention.py: ``sorters``). The
tutorials' tests read them from there, measure them here with forward passes only, and check every
claim on every seed with `check_induction_claims` and `check_sorting_claims`: no model is trained
again. The measurements of what a head attends to and writes are written out in float64 NumPy
here (tests/support/reference.py), not read from attn_ref's scores. The thresholds are far from
what the runs give (the margins are in the docstrings and comments), so that a claim fails only
when it stops being true, not when a machine rounds differently.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch

from attn_ref.training import (
    next_token_losses,
    part_masks,
    prefix_matching_scores,
    previous_token_scores,
    repeated_tokens,
    sorting_batch,
    token_scores,
    without_heads,
)
from tests.support import reference
from tests.support.reference import as64, linear, multihead

LN_64 = math.log(64)
VOCAB, T = 64, 32
SEEDS = (0, 1, 2, 3)
ROLE = 0.3  # the tutorial's threshold for naming a head by where it attends
COPYING = 0.5  # and for copying, by its OV circuit's eigenvalues


def induction_models(values: dict, seed: int) -> dict:
    """The induction tutorial's models for one seed, as its execution kept them."""
    return {
        "two": values["two_layer"][seed],
        "untrained": values["untrained_models"][seed],
        "one": values["one_layer_models"][seed],
        "fixed": values["fixed_models"][seed],
        "history": values["histories"][seed],
    }


def ov_copying(model, layer: int) -> np.ndarray:
    """Elhage et al.'s eigenvalue statistic of each head's full V x V OV circuit W_E W_V W_O W_U,
    sum(eigenvalues) / sum(|eigenvalues|), in float64 NumPy: (H,)."""
    attention = model.layers[layer]
    H, d = attention.num_heads, attention.head_dim
    E, W_U = as64(model.token_embedding.weight), as64(model.unembedding.weight).T  # (V, C), (C, V)
    W_V, W_O = as64(attention.v_proj.weight).T, as64(attention.out_proj.weight).T  # (C, C) each
    shares = []
    for h in range(H):
        block = slice(h * d, (h + 1) * d)
        circuit = E @ W_V[:, block] @ W_O[block] @ W_U  # (V, V): a token to the logits it writes
        eigenvalues = np.linalg.eigvals(circuit)
        shares.append(eigenvalues.sum().real / np.abs(eigenvalues).sum())
    return np.array(shares)


def layer1_heads(model, tokens: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Layer 1's weights (B, H, T, T) and each head's direct logits (B, H, T, V), written out in
    float64 from the weights: head_h W_O^(h) W_U, its value bias included, the layer's output
    bias left out."""
    T_ = tokens.shape[1]
    x = as64(model.token_embedding.weight)[tokens.numpy()] + as64(model.position_embedding.weight)[:T_]
    out0, _ = multihead(x, x, model.layers[0], reference.causal(T_))
    x = x + out0  # the stream layer 1 reads
    layer = model.layers[1]
    H, d = layer.num_heads, layer.head_dim

    def split(projection):  # (B, T, C) -> (B, H, T, d)
        return np.moveaxis(linear(x, projection).reshape(*x.shape[:-1], H, d), -2, -3)

    heads, weights = reference.attention(
        split(layer.q_proj), split(layer.k_proj), split(layer.v_proj), reference.causal(T_)
    )
    W_O, W_U = as64(layer.out_proj.weight).T, as64(model.unembedding.weight).T  # (H * d, C), (C, V)
    logits = np.stack([heads[:, h] @ W_O[h * d : (h + 1) * d] @ W_U for h in range(H)], axis=1)
    return weights, logits


def perfect_one_token_losses(tokens: np.ndarray) -> np.ndarray:
    """(B, T - 1): -ln(share of the keys j <= i with x_{j-1} = x_i that hold x_{i+1}), by loops over
    queries; nan where no key matches."""
    B, T_ = tokens.shape
    out = np.full((B, T_ - 1), np.nan)
    for b in range(B):
        for i in range(T_ - 1):
            found = [tokens[b, j] for j in range(1, i + 1) if tokens[b, j - 1] == tokens[b, i]]
            if found:
                with np.errstate(divide="ignore"):
                    out[b, i] = -np.log(found.count(tokens[b, i + 1]) / len(found))
    return out


def _losses(model, tokens) -> torch.Tensor:
    with torch.no_grad():
        return next_token_losses(model(tokens)[0], tokens)


def induction_measurements(models: dict, seed: int) -> dict:
    """Every figure the induction tutorial's claims rest on, for one seed's kept models: forward
    passes on the seed's own batches (1000 + seed for the test batch, as the tutorial's table)."""
    model, untrained, one_layer, fixed = models["two"], models["untrained"], models["one"], models["fixed"]
    tokens, periods = repeated_tokens(256, T, VOCAB, (8, 16), torch.Generator().manual_seed(1000 + seed))
    first, repeated = part_masks(periods, T)
    in_repeat = torch.arange(T)[None, :] >= periods[:, None]
    uniform = (torch.ones(T, T).tril() / torch.arange(1.0, T + 1)[:, None]).expand(len(tokens), 1, T, T)
    m = {"history": models["history"]}
    with torch.no_grad():
        logits, weights = model(tokens)
        _, untrained_weights = untrained(tokens)
    losses = next_token_losses(logits, tokens)
    m["first_loss"], m["repeated_loss"] = losses[first].mean().item(), losses[repeated].mean().item()
    m["uniform"] = (
        previous_token_scores(uniform).item(),
        prefix_matching_scores(uniform, tokens, in_repeat).item(),
    )
    m["prev"] = [as64(previous_token_scores(w)) for w in weights]
    m["prefix"] = [as64(prefix_matching_scores(w, tokens, in_repeat)) for w in weights]
    m["untrained_prev"] = [as64(previous_token_scores(w)) for w in untrained_weights]
    m["untrained_prefix"] = [as64(prefix_matching_scores(w, tokens, in_repeat)) for w in untrained_weights]
    # Copying, by the weights and by the effect on the logits (the head's top key's token).
    m["copying"], m["untrained_copying"] = ov_copying(model, 1), ov_copying(untrained, 1)
    w1, head_logits = layer1_heads(model, tokens)
    attended = np.take_along_axis(tokens.numpy()[:, None, :], w1.argmax(-1), axis=2)  # (B, H, T)
    own = np.take_along_axis(head_logits, attended[..., None], axis=-1)[..., 0]  # (B, H, T)
    queries = in_repeat.numpy()[:, None, :].repeat(2, axis=1)  # (B, H, T)
    gain, top = own - head_logits.mean(-1), head_logits.argmax(-1) == attended
    m["gain"] = np.array([gain[:, h][queries[:, h]].mean() for h in range(2)])
    m["top_share"] = np.array([top[:, h][queries[:, h]].mean() for h in range(2)])
    floor = perfect_one_token_losses(tokens.numpy())[repeated.numpy()]
    m["floor"], m["ambiguous"] = floor.mean(), (floor > 0).mean()
    named = {
        "previous": [(0, h) for h in range(2) if m["prev"][0][h] > ROLE],
        "induction": [(1, h) for h in range(2) if m["prefix"][1][h] > ROLE and m["copying"][h] > COPYING],
    }
    ablations = {(layer, head): [(layer, head)] for layer in range(2) for head in range(2)}
    ablations.update(named)
    m["ablations"] = {
        name: _losses(without_heads(model, heads), tokens)[repeated].mean().item()
        for name, heads in ablations.items()
    }
    m["ablated_heads"] = named
    ind_head, prev_head = int(np.argmax(m["prefix"][1])), int(np.argmax(m["prev"][0]))
    m["diagonal_direct"] = _on_diagonal(token_scores(model, ind_head))
    m["diagonal_through"] = [_on_diagonal(token_scores(model, ind_head, through=h)) for h in range(2)]
    m["prev_head"] = prev_head
    # The pitfall: the strongest induction head's block of W_O negated.
    flipped = copy.deepcopy(model)
    d = model.layers[1].head_dim
    with torch.no_grad():
        flipped.layers[1].out_proj.weight[:, ind_head * d : (ind_head + 1) * d] *= -1
        flipped_logits, flipped_weights = flipped(tokens)
    m["flipped"] = {
        "head": ind_head,
        "prefix": prefix_matching_scores(flipped_weights[1], tokens, in_repeat)[ind_head].item(),
        "copying": ov_copying(flipped, 1)[ind_head],
        "loss": next_token_losses(flipped_logits, tokens)[repeated].mean().item(),
    }
    with torch.no_grad():
        one_logits, one_weights = one_layer(tokens)
    one_losses = next_token_losses(one_logits, tokens)
    m["one_layer_loss"] = one_losses[repeated].mean().item()
    m["one_layer_first"] = one_losses[first].mean().item()
    m["one_layer_prefix"] = as64(prefix_matching_scores(one_weights[0], tokens, in_repeat))
    g2 = torch.Generator().manual_seed(2000 + seed)
    distinct = torch.rand(256, VOCAB, generator=g2).argsort(dim=1)[:, :T]
    with torch.no_grad():
        distinct_logits, distinct_weights = model(distinct)
    m["distinct_loss"] = next_token_losses(distinct_logits, distinct).mean().item()
    w = distinct_weights[1]
    m["entropy"] = as64(-(w * w.clamp_min(1e-30).log()).sum(dim=-1)[:, :, 8:].mean(dim=(0, 2)))
    m["unseen"] = {}
    for period in (4, 24):
        seqs, seq_periods = repeated_tokens(256, T, VOCAB, (period, period), g2)
        m["unseen"][period] = _losses(model, seqs)[part_masks(seq_periods, T)[1]].mean().item()
    m["fixed"] = {}
    for name, (low, high) in {"period 16": (16, 16), "periods 8 to 16": (8, 16)}.items():
        seqs, seq_periods = repeated_tokens(256, T, VOCAB, (low, high), g2)
        m["fixed"][name] = _losses(fixed, seqs)[part_masks(seq_periods, T)[1]].mean().item()
    return m


def _on_diagonal(scores) -> float:
    return float((scores.argmax(dim=1) == torch.arange(len(scores))).float().mean())


def check_induction_claims(m: dict) -> None:
    """Every claim the induction tutorial makes about what its models learned.

    Margins, from seeds 0 to 3 on an AVX512 machine (seeds 0 to 7 on AVX2 for the older claims):
    the repeated part's loss ends at 0.56 to 0.72, the one-layer model's at 3.37 to 3.58;
    previous-token heads score 0.48 to 0.53 (the baseline 0.10), induction heads 0.87 to 0.97 (the
    baseline 0.08); zeroing the previous-token or the induction heads gives 4.05 to 4.31 on the
    repeated part. Copying: the layer-1 heads' OV statistic 0.99 to 1.00 (untrained: within 0.12 of
    0), each raises its attended token's logit by 3.0 to 3.7 above its mean and raises it most in
    0.98 to 0.99 of the queries. The perfect one-token head's loss is 0.13 to 0.14, with 14 to 16%
    of the predictions ambiguous.
    """
    history = m["history"]
    window = np.convolve(history.repeated, np.ones(10) / 10, mode="valid")
    # A slow start, then a steep drop, far below where it started. Seen on seeds 0 to 3: the
    # 10-step average first below 3.5 at steps 83 to 86, below 1.5 some 26 to 31 steps later.
    below = {level: int(np.flatnonzero(window < level)[0]) for level in (3.5, 1.5)}
    assert below[3.5] > 40 and below[1.5] - below[3.5] < 60 and window[-1] < LN_64 / 2
    # The first part's tokens are uniform and independent of all before them: no predictor beats
    # ln 64 in expectation; 256 sequences put thousands of predictions in the mean.
    assert m["first_loss"] > LN_64 - 0.1 and m["one_layer_first"] > LN_64 - 0.1
    assert m["repeated_loss"] < 1.2
    # The floor of a one-token match: a little above zero, some predictions ambiguous; the trained
    # loss between the floor and half of ln 64, most of the way down from ln 64 to the floor.
    assert 0.05 < m["floor"] < 0.3 and 0.05 < m["ambiguous"] < 0.3
    assert m["floor"] + 0.2 < m["repeated_loss"] < LN_64 / 2
    assert (LN_64 - m["repeated_loss"]) / (LN_64 - m["floor"]) > 0.75
    # Scores: untrained heads near the uniform baseline; trained, roles split between the layers.
    for untrained, baseline in (
        (m["untrained_prev"], m["uniform"][0]),
        (m["untrained_prefix"], m["uniform"][1]),
    ):
        assert np.abs(np.concatenate(untrained) - baseline).max() < 0.1
    assert m["prev"][0].max() > 0.35 and m["prev"][1].max() < 0.2
    assert m["prefix"][1].min() > 0.8 and m["prefix"][0].max() < 0.3
    # Copying: both layer-1 heads copy, by their OV circuits and by their effect on the logits;
    # untrained heads' eigenvalues spread around zero. So both are named induction heads.
    assert np.abs(m["untrained_copying"]).max() < 0.3
    assert m["copying"].min() > 0.9 and m["gain"].min() > 1.5 and m["top_share"].min() > 0.9
    assert m["ablated_heads"]["induction"] == [(1, 0), (1, 1)]
    # Ablations: the previous-token heads together, or the induction heads together, send the loss
    # back to about ln 64; a head with low scores leaves it about where it was; when layer 1 has two
    # induction heads, zeroing one raises the loss part of the way.
    ablations, base = m["ablations"], m["repeated_loss"]
    assert m["ablated_heads"]["previous"] and m["ablated_heads"]["induction"]
    assert ablations["previous"] > LN_64 - 0.7 and ablations["induction"] > LN_64 - 0.7
    for layer, head in np.ndindex(2, 2):
        if max(m["prev"][layer][head], m["prefix"][layer][head]) < 0.2:
            assert abs(ablations[layer, head] - base) < 0.25
    if len(m["ablated_heads"]["induction"]) == 2:
        for head in range(2):
            assert base + 0.3 < ablations[1, head] < ablations["induction"] - 0.5
    # The pitfall: a flipped induction head attends exactly as before (layer 1's W_O feeds no
    # attention pattern) but no longer copies, and the loss climbs to about ln 64 or beyond, far
    # above the loss with that head zeroed (seen: 4.21 to 5.10, against 1.8 zeroed).
    flipped = m["flipped"]
    assert abs(flipped["prefix"] - m["prefix"][1][flipped["head"]]) < 1e-5
    assert flipped["copying"] < -0.5
    assert flipped["loss"] > LN_64 - 0.5 and flipped["loss"] > ablations[1, flipped["head"]] + 1
    # One layer: far above the two-layer model on the repeated part, yet below ln 64; no prefix matching.
    assert m["one_layer_loss"] > 2.5 and m["one_layer_loss"] > base + 2 and m["one_layer_loss"] < LN_64 - 0.2
    assert m["one_layer_prefix"].max() < 0.3
    # K-composition: through a previous-token head the scores peak on the diagonal; directly, or through
    # a layer-0 head that is not a previous-token head, they do not.
    assert m["diagonal_through"][m["prev_head"]] > 0.8 and m["diagonal_direct"] < 0.2
    for head in range(2):
        if m["prev"][0][head] > ROLE:
            assert m["diagonal_through"][head] > 0.8
        elif m["prev"][0][head] < 0.2:
            assert m["diagonal_through"][head] < 0.3
    # Exercise 1: the loss depends more on the layer-0 head with the higher previous-token score.
    assert np.argmax([ablations[0, h] for h in range(2)]) == np.argmax(m["prev"][0])
    # Exercise 2: nothing to match: sharp attention anyway (uniform: 2.96 nats), loss above ln 64.
    assert m["distinct_loss"] > LN_64 + 0.3 and m["entropy"].max() < 1.5
    # Exercise 3: periods outside 8..16 still far below ln 64 (seen: 0.53 to 0.88).
    assert max(m["unseen"].values()) < 1.5
    # Exercise 4: one layer, one fixed period: solved by position (seen: 0.08 to 0.10), and wrong
    # on other periods (seen: 5.4 to 5.7).
    assert m["fixed"]["period 16"] < 0.5 and m["fixed"]["periods 8 to 16"] > LN_64


NUM_VALUES = 32
PAD, START, END = NUM_VALUES, NUM_VALUES + 1, NUM_VALUES + 2


def sort_greedily(model, source, lengths):
    written = torch.full((len(source), 1), START)
    with torch.no_grad():
        for _ in range(source.shape[1] + 1):
            logits, _ = model(source, lengths, written)
            written = torch.cat([written, logits[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
    return written[:, 1:]


def sorting_measurements(model, seed: int) -> dict:
    """The figures the cross-attention tutorial's claims rest on, for one seed's kept model: forward
    passes on the seed's own batches."""
    test = sorting_batch(512, NUM_VALUES, (5, 10), generator=torch.Generator().manual_seed(1000 + seed))
    with torch.no_grad():
        logits, weights = model(test.source, test.lengths, test.decoder_input)
        unmasked_logits, unmasked = model(test.source, torch.full_like(test.lengths, 10), test.decoder_input)
    cross, real, aligned = weights["cross"][:, 0], test.target != PAD, test.alignment >= 0
    padded = test.source == PAD
    m = {
        "correct": (logits.argmax(-1) == test.target)[real].float().mean().item(),
        "on_target": (cross.argmax(-1) == test.alignment)[aligned].float().mean().item(),
        "weight_on_target": cross.gather(-1, test.alignment.clamp(min=0)[..., None])[..., 0][aligned]
        .mean()
        .item(),
        "on_padding": cross.masked_select(padded[:, None, :]).max().item(),
        "unmasked_correct": (unmasked_logits.argmax(-1) == test.target)[real].float().mean().item(),
        "on_pads": (unmasked["cross"][:, 0] * padded[:, None, :]).sum(-1)[real].mean().item(),
    }
    written = sort_greedily(model, test.source, test.lengths)
    m["exact"] = ((written == test.target) | ~real).all(dim=1).float().mean().item()
    long = sorting_batch(512, NUM_VALUES, (14, 14), generator=torch.Generator().manual_seed(1400 + seed))
    m["long_exact"] = (
        (sort_greedily(model, long.source, long.lengths) == long.target).all(1).float().mean().item()
    )
    with torch.no_grad():
        long_logits, _ = model(long.source, long.lengths, long.decoder_input)
    m["by_position"] = as64((long_logits.argmax(-1) == long.target).float().mean(0))
    m["long_forced"] = float(m["by_position"].mean())  # no padding at length 14: every position counts
    m["ends_at_10"] = (long_logits[:, 10].argmax(-1) == END).float().mean().item()
    m["silenced"] = {}
    for name in ("encoder_attn", "decoder_attn", "cross_attn"):
        silent = copy.deepcopy(model)
        with torch.no_grad():
            getattr(silent, name).out_proj.weight.zero_()
            getattr(silent, name).out_proj.bias.zero_()
            silent_logits, _ = silent(test.source, test.lengths, test.decoder_input)
        m["silenced"][name] = (silent_logits.argmax(-1) == test.target)[real].float().mean().item()
    return m


def check_sorting_claims(m: dict) -> None:
    """Every claim the cross-attention tutorial makes about what its model learned.

    Margins, from seeds 0 to 3 on an AVX2 and an AVX512 machine: 0.998 to 1.000 right tokens; the
    largest weight on the right source position 0.966 to 0.983 of the time, 0.76 to 0.85 of the
    weight there; 0.986 to 0.998 of the sources sorted exactly; at length 14, 0.000 to 0.090, and
    the end token written at output 10 for 0.20 to 0.83 of them.
    """
    assert m["correct"] > 0.98 and m["exact"] > 0.9
    assert m["on_target"] > 0.9 and m["weight_on_target"] > 0.6  # "most of its weight"
    assert m["on_padding"] == 0.0  # exp(-inf), exactly
    # Exercise 1: most sources of 14 come out wrong; output 10, the end in training, goes wrong
    # often, and for a share of the sources (never none, never all) the model ends there.
    assert m["long_exact"] < 0.5 and m["by_position"][10] < 0.8 and 0.1 < m["ends_at_10"] < 0.95
    assert m["by_position"][:10].mean() < m["correct"] - 0.03
    # The pitfall: with teacher forcing most tokens of a long source are right (seen: 0.75 to 0.83),
    # writing alone almost none comes out sorted (0.000 to 0.090).
    assert m["long_forced"] > 0.6 and m["long_forced"] > m["long_exact"] + 0.5
    # Exercise 2: without the mask, weight goes to padding and the accuracy drops.
    assert m["on_pads"] > 0.02 and m["unmasked_correct"] < m["correct"] - 0.01
    # Exercise 3: cross-attention does the work; either self-attention barely matters.
    silenced = m["silenced"]
    assert silenced["cross_attn"] < 0.5
    assert min(silenced["encoder_attn"], silenced["decoder_attn"]) > max(0.85, silenced["cross_attn"] + 0.3)


def prefix_scores(weights: np.ndarray, tokens: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Olsson et al.'s prefix matching, per head: the weight on keys j <= i with x_{j-1} = x_i."""
    B, T = tokens.shape
    matches = np.zeros((B, T, T), dtype=bool)
    for j in range(1, T):  # key j's previous token against every query's token, queries i >= j
        matches[:, j:, j] = tokens[:, j - 1, None] == tokens[:, j:]
    on_target = (weights * matches[:, None]).sum(axis=-1)  # (B, H, T)
    return (on_target * queries[:, None]).sum(axis=(0, 2)) / queries.sum()
