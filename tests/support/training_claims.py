"""What the induction and cross-attention tutorials claim about their trained models: each
tutorial's recipe and measurements for one seed, and the checks of every claim.

The tutorials' own run (seed 0) is checked by their tests (tests/tutorials/test_induction_heads.py,
test_cross_attention.py) and seeds 1, 2 and 3 by tests/test_training.py, with the same functions,
`check_induction_claims` and `check_sorting_claims`. The thresholds are far from what the runs
give (the margins are in the docstrings and comments), so that a claim fails only when it stops
being true, not when a machine rounds differently.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch

from attn_ref.masks import causal_mask
from attn_ref.training import (
    AttentionOnlyDecoder,
    TinyEncoderDecoder,
    next_token_losses,
    part_masks,
    prefix_matching_scores,
    previous_token_scores,
    repeated_tokens,
    sorting_batch,
    token_scores,
    train_induction,
    train_sorting,
    without_heads,
)
from tests.support.reference import as64

LN_64 = math.log(64)
VOCAB, T = 64, 32
ROLE = 0.3  # the tutorial's threshold for naming a head


def induction_measurements(seed: int) -> dict:
    """The induction tutorial's recipe and measurements, for one seed."""
    torch.manual_seed(seed)
    model = AttentionOnlyDecoder(VOCAB, T, embed_dim=64, num_layers=2, num_heads=2)
    untrained = copy.deepcopy(model)
    history = train_induction(model, steps=200, batch_size=32, lr=1e-2, seed=seed)
    tokens, periods = repeated_tokens(256, T, VOCAB, (8, 16), torch.Generator().manual_seed(1000 + seed))
    first, repeated = part_masks(periods, T)
    in_repeat = torch.arange(T)[None, :] >= periods[:, None]
    uniform = (causal_mask(T) / torch.arange(1.0, T + 1)[:, None]).expand(len(tokens), 1, T, T)
    m = {"history": history}
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
    ablations = {(layer, head): [(layer, head)] for layer in range(2) for head in range(2)}
    ablations["previous"] = [(0, h) for h in range(2) if m["prev"][0][h] > ROLE]
    ablations["induction"] = [(1, h) for h in range(2) if m["prefix"][1][h] > ROLE]
    m["ablations"] = {}
    for name, heads in ablations.items():
        with torch.no_grad():
            ablated = next_token_losses(without_heads(model, heads)(tokens)[0], tokens)
        m["ablations"][name] = ablated[repeated].mean().item()
    m["ablated_heads"] = ablations
    ind_head, prev_head = int(np.argmax(m["prefix"][1])), int(np.argmax(m["prev"][0]))
    m["diagonal_direct"] = _on_diagonal(token_scores(model, ind_head))
    m["diagonal_through"] = [_on_diagonal(token_scores(model, ind_head, through=h)) for h in range(2)]
    m["prev_head"] = prev_head
    torch.manual_seed(seed)
    one_layer = AttentionOnlyDecoder(VOCAB, T, embed_dim=64, num_layers=1, num_heads=4)
    train_induction(one_layer, steps=200, batch_size=32, lr=1e-2, seed=seed)
    with torch.no_grad():
        one_logits, one_weights = one_layer(tokens)
    one_losses = next_token_losses(one_logits, tokens)
    m["one_layer_loss"], m["one_layer_first"] = (
        one_losses[repeated].mean().item(),
        one_losses[first].mean().item(),
    )
    m["one_layer_prefix"] = as64(prefix_matching_scores(one_weights[0], tokens, in_repeat))
    g2 = torch.Generator().manual_seed(2000 + seed)
    distinct = torch.rand(256, VOCAB, generator=g2).argsort(dim=1)[:, :T]
    with torch.no_grad():
        distinct_logits, distinct_weights = model(distinct)
    m["distinct_loss"] = next_token_losses(distinct_logits, distinct).mean().item()
    w1 = distinct_weights[1]
    m["entropy"] = as64(-(w1 * w1.clamp_min(1e-30).log()).sum(dim=-1)[:, :, 8:].mean(dim=(0, 2)))
    m["unseen"] = {}
    for period in (4, 24):
        seqs, seq_periods = repeated_tokens(256, T, VOCAB, (period, period), g2)
        with torch.no_grad():
            seq_losses = next_token_losses(model(seqs)[0], seqs)
        m["unseen"][period] = seq_losses[part_masks(seq_periods, T)[1]].mean().item()
    torch.manual_seed(seed)
    fixed = AttentionOnlyDecoder(VOCAB, T, embed_dim=64, num_layers=1, num_heads=4)
    train_induction(fixed, steps=200, batch_size=32, lr=1e-2, periods=(16, 16), seed=seed)
    m["fixed"] = {}
    for name, (low, high) in {"period 16": (16, 16), "periods 8 to 16": (8, 16)}.items():
        seqs, seq_periods = repeated_tokens(256, T, VOCAB, (low, high), g2)
        with torch.no_grad():
            seq_losses = next_token_losses(fixed(seqs)[0], seqs)
        m["fixed"][name] = seq_losses[part_masks(seq_periods, T)[1]].mean().item()
    return m


def _on_diagonal(scores) -> float:
    return float((scores.argmax(dim=1) == torch.arange(len(scores))).float().mean())


def check_induction_claims(m: dict) -> None:
    """Every claim the induction tutorial makes about what its models learned.

    Margins, from seeds 0 to 7 on an AVX2 machine: the repeated part's loss ends at 0.56 to 0.72,
    the one-layer model's at 3.37 to 3.57; previous-token heads score 0.48 to 0.52 (the
    baseline 0.10), induction heads 0.91 to 0.97 (the baseline 0.08); zeroing the previous-token
    or the induction heads gives 4.05 to 4.31 on the repeated part.
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
    # Scores: untrained heads near the uniform baseline; trained, roles split between the layers.
    for untrained, baseline in (
        (m["untrained_prev"], m["uniform"][0]),
        (m["untrained_prefix"], m["uniform"][1]),
    ):
        assert np.abs(np.concatenate(untrained) - baseline).max() < 0.1
    assert m["prev"][0].max() > 0.35 and m["prev"][1].max() < 0.2
    assert m["prefix"][1].min() > 0.8 and m["prefix"][0].max() < 0.3
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
    # on other periods (seen: 5.5 to 5.7).
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


def sorting_measurements(seed: int) -> dict:
    """The cross-attention tutorial's recipe and measurements, for one seed."""
    torch.manual_seed(seed)
    model = TinyEncoderDecoder(NUM_VALUES + 3, context_length=16, embed_dim=64, num_heads=1)
    train_sorting(model, steps=300, batch_size=32, lr=1e-2, seed=seed)
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

    Margins, from seeds 0 to 3 on an AVX2 machine: 0.998 to 1.000 right tokens; the largest
    weight on the right source position 0.968 to 0.983 of the time, 0.76 to 0.85 of the weight
    there; 0.986 to 0.996 of the sources sorted exactly; at length 14, 0.000 to 0.090.
    """
    assert m["correct"] > 0.98 and m["exact"] > 0.9
    assert m["on_target"] > 0.9 and m["weight_on_target"] > 0.6  # "most of its weight"
    assert m["on_padding"] == 0.0  # exp(-inf), exactly
    # Exercise 1: most sources of 14 come out wrong; output 10, the end in training, goes wrong often.
    assert m["long_exact"] < 0.5 and m["by_position"][10] < 0.8 and m["ends_at_10"] > 0.1
    assert m["by_position"][:10].mean() < m["correct"] - 0.03
    # Exercise 2: without the mask, weight goes to padding and the accuracy drops.
    assert m["on_pads"] > 0.02 and m["unmasked_correct"] < m["correct"] - 0.01
    # Exercise 3: cross-attention does the work; either self-attention barely matters.
    silenced = m["silenced"]
    assert silenced["cross_attn"] < 0.5
    assert min(silenced["encoder_attn"], silenced["decoder_attn"]) > max(0.85, silenced["cross_attn"] + 0.3)
