"""The induction-heads tutorial, as the build executed it, checked against references computed here.

What the tutorial computed is read from its kernel's variables (``values``): the losses are
recomputed from its logits with a float64 log-softmax, the head scores from its attention weights
with NumPy written out here, the uniform baselines by hand, the moment of the drop from its
training history, the copying figures from the weights with NumPy's eigenvalues and the heads'
logits written out in float64, the loss floor by loops over the queries. What it claims about what
the models learned is checked on every seed it trained (0 to 3), on the models its execution kept,
by `tests.support.training_claims.check_induction_claims`: forward passes only, no model is trained
here. What the cells printed is read as numbers, without the page's labels
(tests/support/shown.py). The training times depend on the machine; they are only checked to print
what was measured.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from attn_ref.training import model_from_playground_json, part_masks, repeated_tokens
from tests.support import reference
from tests.support.reference import as64, multihead
from tests.support.shown import assert_printed, half_unit, sci_rtol, verdicts
from tests.support.training_claims import (
    COPYING,
    LN_64,
    ROLE,
    SEEDS,
    check_induction_claims,
    induction_measurements,
    induction_models,
    layer1_heads,
    ov_copying,
    perfect_one_token_losses,
    prefix_scores,
)


@pytest.fixture(scope="module")
def measured(values) -> dict:
    """Each seed's measurements, from the models the execution kept (forward passes only)."""
    return {seed: induction_measurements(induction_models(values, seed), seed) for seed in SEEDS}


def nll(logits: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """-log softmax(logits)[next token] in float64: (B, T - 1)."""
    z = logits[:, :-1] - logits[:, :-1].max(axis=-1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    return -np.take_along_axis(log_p, tokens[:, 1:, None], axis=-1)[..., 0]


def test_the_example_repeats_its_period(tutorial, values):
    example, p = values["example"][0].numpy(), values["p"]
    assert 8 <= p <= 16 and all(example[t] == example[t % p] for t in range(len(example)))
    for start in range(0, len(example), p):
        assert_printed(tutorial, [start, min(start + p, len(example)) - 1, *example[start : start + p]])


def test_each_layer_matched_pytorch_before_training(tutorial, values):
    """The layers of the untrained model, on the example, against float64 NumPy; the last layer's
    comparison with PyTorch is kept, and printed. Outputs of a few units are sums of 64 products:
    float32 rounds each computation by a few units of 6e-8 times that, far below 1e-5."""
    untrained, example = values["untrained"], values["example"]
    T = example.shape[1]
    with torch.no_grad():
        x0 = as64(untrained.embed(example))
    out0, _ = multihead(x0, x0, untrained.layers[0], reference.causal(T))
    out1, weights1 = multihead(x0 + out0, x0 + out0, untrained.layers[1], reference.causal(T))
    np.testing.assert_allclose(as64(values["ours"]), out1, atol=1e-5)
    np.testing.assert_allclose(as64(values["ours_weights"]), weights1, atol=1e-6)
    np.testing.assert_allclose(as64(values["x"]), x0 + out0 + out1, atol=1e-5)
    output_error = (values["ours"] - values["theirs"]).abs().max().item()
    weight_error = (values["ours_weights"] - values["theirs_weights"]).abs().max().item()
    assert output_error < 1e-5 and weight_error < 1e-6
    assert_printed(tutorial, [1, output_error, weight_error], rtol=[0, sci_rtol(1), sci_rtol(1)], gaps=True)


def test_losses_over_training_and_the_drop(tutorial, values):
    history, V = values["history"], values["VOCAB"]
    assert len(history.first) == len(history.repeated) == 200
    window = np.ones(10) / 10
    smooth = [np.convolve(history.first, window, "valid"), np.convolve(history.repeated, window, "valid")]
    np.testing.assert_allclose(values["smooth_first"], smooth[0], rtol=1e-12)
    np.testing.assert_allclose(values["smooth_repeated"], smooth[1], rtol=1e-12)
    drop = next(i for i, loss in enumerate(smooth[1]) if loss < math.log(V) / 2) + 9  # the window's last step
    assert values["drop_step"] == drop
    rows = [[end - 10, end - 1, smooth[0][end - 10], smooth[1][end - 10]] for end in (10, 50, 100, 150, 200)]
    assert_printed(tutorial, rows, atol=[0, 0, half_unit(2), half_unit(2)])
    assert_printed(tutorial, [V, math.log(V)], atol=[0, half_unit(2)])
    assert_printed(tutorial, [V, 2, drop], gaps=True)


def test_losses_on_the_test_batch(tutorial, values):
    tokens, first, repeated = values["tokens"].numpy(), values["first"].numpy(), values["repeated"].numpy()
    periods = values["periods"].numpy()
    for b, p in enumerate(periods):  # the parts, by hand
        assert [bool(first[b, i]) for i in range(31)] == [i + 1 < p for i in range(31)]
        assert [bool(repeated[b, i]) for i in range(31)] == [i >= p for i in range(31)]
    shown = []
    for logits, losses in (("untrained_logits", "untrained_losses"), ("logits", "losses")):
        expected = nll(as64(values[logits]), tokens)
        np.testing.assert_allclose(as64(values[losses]), expected, atol=1e-5)  # float32 log-softmax
        shown.append([expected[first].mean(), expected[repeated].mean()])
    assert_printed(tutorial, shown, atol=half_unit(2) + 1e-5, gaps=True)


def test_scores_against_numpy_and_the_uniform_baseline(tutorial, values):
    tokens, in_repeat, T = values["tokens"].numpy(), values["in_repeat"].numpy(), values["T"]
    assert (in_repeat == (np.arange(T)[None] >= values["periods"].numpy()[:, None])).all()
    # Uniform attention: query i gives 1 / (i + 1) to each of its i + 1 keys.
    uniform_prev = np.mean([1 / (i + 1) for i in range(1, T)])
    earlier = np.tril(np.ones((T, T), dtype=bool), k=-1)  # (i, k): position k before query i
    counts = ((tokens[:, :, None] == tokens[:, None, :]) & earlier).sum(axis=-1)  # earlier copies of x_i
    uniform_prefix = (counts / np.arange(1, T + 1))[in_repeat].mean()
    assert_printed(tutorial, [uniform_prev, uniform_prefix], atol=half_unit(2), gaps=True)
    table = []
    for name, scores_name, prefix_name in (
        ("untrained_weights", "untrained_prev", "untrained_prefix"),
        ("weights", "prev_scores", "prefix_scores"),
    ):
        for layer, weights in enumerate(values[name]):
            w = as64(weights)
            prev = w[:, :, np.arange(1, T), np.arange(T - 1)].mean(axis=(0, 2))
            np.testing.assert_allclose(as64(values[scores_name][layer]), prev, atol=1e-6)
            np.testing.assert_allclose(
                as64(values[prefix_name][layer]), prefix_scores(w, tokens, in_repeat), atol=1e-6
            )
    for layer, head in np.ndindex(2, 2):
        row = [layer, head]
        for name in ("untrained_prev", "prev_scores", "untrained_prefix", "prefix_scores"):
            row.append(values[name][layer][head].item())
        table.append(row)
    assert_printed(tutorial, table, atol=[0, 0] + [half_unit(2) + 1e-6] * 4)


def test_copying_against_numpy_and_the_names(tutorial, values):
    """The OV statistic against NumPy's eigenvalues of the full 64 x 64 circuit; the logit gains and
    the share of queries where the attended token is raised most against the heads' logits written
    out in float64. Gains are means over thousands of queries of float32 logits of a few units: far
    within 1e-3 of the float64 ones, unless a near-tie moves a top key (the shares allow 1%)."""
    tokens, in_repeat = values["tokens"], values["in_repeat"].numpy()
    for name, model in (("copying", values["model"]), ("untrained_copying", values["untrained"])):
        np.testing.assert_allclose(as64(values[name]), ov_copying(model, 1), atol=1e-9)
    weights, logits = layer1_heads(values["model"], tokens)
    attended = np.take_along_axis(tokens.numpy()[:, None, :], weights.argmax(-1), axis=2)  # (B, H, T)
    own = np.take_along_axis(logits, attended[..., None], axis=-1)[..., 0]
    gain = np.moveaxis(own - logits.mean(-1), 1, 2)[in_repeat]  # (N, H)
    top = np.moveaxis(logits.argmax(-1) == attended, 1, 2)[in_repeat].mean(axis=0)
    np.testing.assert_allclose(as64(values["gain"]).mean(axis=0), gain.mean(axis=0), atol=1e-3)
    np.testing.assert_allclose(as64(values["top_share"]), top, atol=0.01)
    for h in range(2):
        row = [h, values["untrained_copying"][h].item(), values["copying"][h].item()]
        row += [values["gain"][:, h].mean().item(), values["top_share"][h].item()]
        assert_printed(tutorial, row, atol=[0] + [half_unit(2) + 1e-6] * 4)
    assert (values["ROLE"], values["COPYING"]) == (ROLE, COPYING)
    prev, prefix, copying = values["prev_scores"], values["prefix_scores"], values["copying"]
    assert values["previous_heads"] == [(0, h) for h in range(2) if prev[0][h] > ROLE]
    named = [(1, h) for h in range(2) if prefix[1][h] > ROLE and copying[h] > COPYING]
    assert values["induction_heads"] == named
    for heads in (values["previous_heads"], values["induction_heads"]):
        assert_printed(tutorial, heads)


def test_the_floor_of_a_perfect_one_token_head(tutorial, values):
    """attn_ref's losses against loops over the queries (nan where nothing matches, inf where no
    match holds the next token); the share of ambiguous predictions and the mean, as printed."""
    tokens, repeated = values["tokens"].numpy(), values["repeated"].numpy()
    expected = perfect_one_token_losses(tokens)
    np.testing.assert_allclose(as64(values["floor"]), expected, rtol=1e-6, atol=1e-7)
    on_repeat = expected[repeated]
    assert np.isfinite(on_repeat).all()  # the key i - p + 1 always matches, with the next token
    ambiguous, floor = (on_repeat > 0).mean(), on_repeat.mean()
    assert values["ambiguous"] == pytest.approx(ambiguous) and values["floor_loss"] == pytest.approx(floor)
    assert_printed(tutorial, [100 * ambiguous], atol=0.5 + 1e-6)
    assert_printed(tutorial, [floor, values["baseline_loss"]], atol=half_unit(2), gaps=True)


def test_the_circuit_pictures(values):
    """The picture's query repeats a token that occurs once per period, and its key is the token
    after the earlier copy; the trained picture shows the named heads' own weights there."""
    seq, p, query, key = values["seq"], values["p"], values["query"], values["key"]
    assert p + 3 <= query < len(seq) and seq[:p].count(seq[query]) == 1
    assert key == query - p + 1 and seq[key - 1] == seq[query] and seq[key] == seq[query + 1]
    assert values["ideal_previous"].argmax() == key - 1 and values["ideal_induction"].argmax() == key
    assert values["ind_head"] == max(
        (h for _, h in values["induction_heads"]), key=lambda h: values["prefix_scores"][1][h]
    )
    assert values["prev_head"] == int(np.argmax(as64(values["prev_scores"][0])))
    example_weights = values["example_weights"]
    np.testing.assert_array_equal(
        values["trained_previous"], example_weights[0][0, values["prev_head"], key].numpy()
    )
    np.testing.assert_array_equal(
        values["trained_induction"], example_weights[1][0, values["ind_head"], query].numpy()
    )
    # What the picture's text says of the trained heads on this example: the previous token and the
    # key after the earlier copy get most of the weight (the scores above average it over a batch).
    assert values["trained_previous"][key - 1] > 0.5 and values["trained_induction"][key] > 0.5


def test_ablation_table_is_what_was_measured(tutorial, values):
    losses, repeated = values["losses"], values["repeated"]
    assert values["baseline_loss"] == pytest.approx(losses[repeated].mean().item())
    ablation_losses = values["ablation_losses"]
    assert list(ablation_losses) == [
        *(f"layer {i} head {h}" for i, h in np.ndindex(2, 2)),
        *list(values["ablations"])[4:],
    ]
    shown = [values["baseline_loss"], *list(ablation_losses.values())]
    assert_printed(tutorial, shown, atol=half_unit(2), gaps=True)
    # Exercise 1 zeroes the same heads of layer 0 one by one: the same numbers.
    np.testing.assert_allclose(values["zeroed"], [ablation_losses[f"layer 0 head {h}"] for h in range(2)])
    assert verdicts(tutorial)[-1] == (int(np.argmax(values["zeroed"])) == values["predicted"])


def test_token_scores_and_their_diagonals(tutorial, values):
    def on_diagonal(scores):
        return float((as64(scores).argmax(axis=1) == np.arange(len(scores))).mean())

    shown = [values["ind_head"], values["prev_head"], on_diagonal(values["direct"])]
    for h, scores in enumerate(values["through"]):
        shown += [h, on_diagonal(scores)]
    assert_printed(tutorial, shown, atol=[0, 0, half_unit(2)] + [0, half_unit(2)] * 2, gaps=True)


def test_the_models_were_kept_for_every_seed(values):
    """Every model the claims need, for seeds 0 to 3, kept by the execution: seed 0's are the page's."""
    for name in ("two_layer", "one_layer_models", "fixed_models", "untrained_models", "histories"):
        assert list(values[name]) == list(SEEDS), name
    assert values["two_layer"][0] is values["model"] and values["one_layer_models"][0] is values["one_layer"]
    assert (
        values["untrained_models"][0] is values["untrained"] and values["histories"][0] is values["history"]
    )
    for seed in SEEDS:
        assert len(values["histories"][seed].repeated) == 200
        assert values["two_layer"][seed].training is False  # trained, in evaluation mode


@pytest.mark.parametrize("seed", SEEDS)
def test_the_claims_about_what_the_models_learned(measured, seed):
    """Every claim about what the models learned, on each seed's kept models (forward passes)."""
    check_induction_claims(measured[seed])


def test_the_page_model_measures_as_the_page_printed(values, measured):
    """Seed 0's measurements (tests/support/training_claims.py) are the page's own figures."""
    m = measured[0]
    ablation_losses = values["ablation_losses"]
    assert m["repeated_loss"] == pytest.approx(values["baseline_loss"], abs=1e-6)
    assert m["floor"] == pytest.approx(values["floor_loss"], abs=1e-6)
    np.testing.assert_allclose(m["prefix"][1], as64(values["prefix_scores"][1]), atol=1e-6)
    np.testing.assert_allclose(m["copying"], as64(values["copying"]), atol=1e-9)
    assert m["ablated_heads"] == {
        "previous": values["previous_heads"],
        "induction": values["induction_heads"],
    }
    assert m["ablations"]["induction"] == pytest.approx(ablation_losses["the induction heads"], abs=1e-6)
    assert m["one_layer_loss"] == pytest.approx(values["one_layer_loss"], abs=1e-6)
    assert m["fixed"]["period 16"] > 0 and values["fixed_losses"]["period 16"] < 0.5
    flipped = m["flipped"]
    assert flipped["head"] == values["ind_head"]
    assert flipped["loss"] == pytest.approx(values["flipped_loss"], abs=1e-6)


def test_the_pitfalls_print_what_they_computed(tutorial, values):
    """The flipped head: the same attention (its prefix-matching score to float32 rounding), the
    copying statistic against NumPy, the loss against a float64 log-softmax. PyTorch's mask read the
    wrong way round: query 0 sees only later keys (weight 1 on them), the last query none (nan)."""
    h = values["ind_head"]
    flipped_prefix = values["flipped_prefix"][h].item()
    assert flipped_prefix == pytest.approx(values["prefix_scores"][1][h].item(), abs=1e-6)
    copying = ov_copying(values["flipped"], 1)[h]
    assert values["flipped_copying"][h].item() == pytest.approx(copying, abs=1e-9)
    loss = nll(as64(values["flipped_logits"]), values["tokens"].numpy())[values["repeated"].numpy()].mean()
    assert values["flipped_loss"] == pytest.approx(loss, abs=1e-5)
    assert_printed(
        tutorial, [1, h, flipped_prefix, copying], atol=[0, 0, half_unit(2), half_unit(2)], gaps=True
    )
    assert_printed(tutorial, [loss, 64, LN_64], atol=[half_unit(2), 0, half_unit(2)])
    wrong = values["wrong"][0, 0].numpy()  # (T, T): head 0 of layer 0, the mask read as "may attend"
    T = wrong.shape[0]
    assert np.allclose(wrong[0, 1:].sum(), 1.0, atol=1e-6) and wrong[0, 0] == 0.0
    assert np.isnan(wrong[-1]).all() and not np.isnan(wrong[:-1]).any()
    assert_printed(tutorial, [0, values["future"][0].item()], atol=[0, half_unit(2)], gaps=True)
    assert_printed(tutorial, [T - 1, np.nan, np.nan, np.nan], gaps=True)


def test_one_layer_model_and_the_exercises_print_what_they_computed(tutorial, values):
    one_losses, repeated = values["one_losses"], values["repeated"]
    assert values["one_layer_loss"] == pytest.approx(one_losses[repeated].mean().item())
    assert_printed(
        tutorial, [values["one_layer_loss"], values["baseline_loss"]], atol=half_unit(2), gaps=True
    )
    assert_printed(tutorial, as64(values["one_prefix"]), atol=half_unit(2) + 1e-6)
    # Exercise 2: the loss on distinct tokens, and the entropies, recomputed.
    distinct = values["distinct"].numpy()
    assert all(len(set(row)) == len(row) for row in distinct.tolist())  # no token repeats
    loss = nll(as64(values["distinct_logits"]), distinct).mean()
    assert values["distinct_loss"] == pytest.approx(loss, abs=1e-5)
    w1 = as64(values["distinct_weights"][1])
    entropy = -(w1 * np.log(np.maximum(w1, 1e-30))).sum(axis=-1)[:, :, 8:].mean(axis=(0, 2))
    np.testing.assert_allclose(as64(values["entropy"]), entropy, atol=1e-5)
    uniform = np.mean(np.log(np.arange(9, 33)))  # query i: ln(i + 1), for i = 8 .. 31
    assert values["uniform_entropy"].item() == pytest.approx(uniform)
    assert_printed(tutorial, [loss, 64, LN_64], atol=[half_unit(2), 0, half_unit(2)])
    assert_printed(
        tutorial, [1, *entropy, uniform], atol=[0, half_unit(2), half_unit(2), half_unit(2)], gaps=True
    )
    assert_printed(
        tutorial,
        [p for period in (4, 24) for p in (period, values["unseen"][period])],
        atol=half_unit(2),
        gaps=True,
    )
    # Exercise 4: its batches replayed from the same generator (after exercises 2 and 3 drew theirs),
    # each seed's fixed-period model run on them, the losses against a float64 log-softmax.
    g2 = torch.Generator().manual_seed(2)
    torch.rand(256, 64, generator=g2)
    for period in (4, 24):
        repeated_tokens(256, 32, 64, (period, period), g2)
    for name, low in (("period 16", 16), ("periods 8 to 16", 8)):
        seqs, seq_periods = repeated_tokens(256, 32, 64, (low, 16), g2)
        on_repeat = part_masks(seq_periods, 32)[1].numpy()
        losses = []
        for seed in SEEDS:
            with torch.no_grad():
                logits = values["fixed_models"][seed](seqs)[0]
            losses.append(nll(as64(logits), seqs.numpy())[on_repeat].mean())
        assert values["fixed_losses"][name] == pytest.approx(losses[0], abs=1e-5)
        assert_printed(tutorial, [0, 3, *losses], atol=[0, 0] + [half_unit(2)] * 4, gaps=True)


def test_the_playground_file(tutorial, values):
    exported = values["exported"]
    assert len(exported.encode()) <= 50_000
    document = json.loads(exported)
    assert (document["vocab_size"], document["context_length"], document["num_heads"]) == (64, 32, 2)
    # The copying statistic of layer 1's heads, from the full-precision weights, for the page to name
    # induction heads by the tutorial's criterion.
    np.testing.assert_allclose(document["copying"], ov_copying(values["model"], 1), atol=1e-6)
    reloaded = model_from_playground_json(exported)
    with torch.no_grad():
        _, reloaded_weights = reloaded(values["tokens"])
    changes = np.concatenate(
        [as64(a - b).ravel() for a, b in zip(reloaded_weights, values["weights"], strict=True)]
    )
    assert np.abs(changes).max() == pytest.approx(values["changes"].max().item(), abs=1e-7)
    # 8-bit weights move each attention weight a little, on average far less than a percent, and
    # leave almost every query's most-attended key where it was (rows with near-ties may swap).
    assert np.abs(changes).mean() < 0.01
    for ours, original in zip(reloaded_weights, values["weights"], strict=True):
        assert (ours.argmax(-1) == original.argmax(-1)).float().mean() > 0.95
    assert_printed(tutorial, [len(exported.encode())])
    assert_printed(tutorial, [np.abs(changes).max()], atol=half_unit(3) + 1e-6)


def test_training_times_print_what_was_measured(tutorial, values):
    for name in ("train_seconds", "one_layer_seconds"):
        assert values[name] > 0
        assert_printed(tutorial, [200, values[name]], atol=[0, half_unit(1)])


def test_other_seeds_and_the_closing_figures(tutorial, values, measured):
    """Seed 0's row is the page's own model, as measured above; each seed's row is what
    `induction_measurements` finds on that seed's kept models (whose claims
    test_the_claims_about_what_the_models_learned checks); the table and the times print what was
    computed."""
    by_seed, seconds = values["by_seed"], values["seconds"]
    assert list(by_seed) == list(SEEDS) and list(seconds) == list(SEEDS)
    ablation_losses = values["ablation_losses"]
    named = [h for _, h in values["induction_heads"]]
    page = {
        "previous": values["prev_scores"][0].max().item(),
        "prefix": min(values["prefix_scores"][1][h].item() for h in named),
        "copying": min(values["copying"][h].item() for h in named),
        "floor": values["floor_loss"],
        "trained": values["baseline_loss"],
        "previous zeroed": ablation_losses["the previous-token heads"],
        "induction zeroed": ablation_losses["the induction heads"],
        "one layer": values["one_layer_loss"],
    }
    for name, expected in page.items():  # the same batch, the same models: float32 rounding apart
        assert by_seed[0][name] == pytest.approx(expected, abs=1e-5), name
    assert by_seed[0]["roles"] == {
        "previous": values["previous_heads"],
        "induction": values["induction_heads"],
    }
    assert seconds[0] == (values["train_seconds"], values["one_layer_seconds"])
    columns = list(page)
    for seed, f in by_seed.items():
        m = measured[seed]
        assert f["roles"] == m["ablated_heads"]
        heads = [h for _, h in m["ablated_heads"]["induction"]]
        figures = {
            "previous": m["prev"][0].max(),
            "prefix": min(m["prefix"][1][h] for h in heads),
            "copying": min(m["copying"][h] for h in heads),
            "floor": m["floor"],
            "trained": m["repeated_loss"],
            "previous zeroed": m["ablations"]["previous"],
            "induction zeroed": m["ablations"]["induction"],
            "one layer": m["one_layer_loss"],
        }
        for name, expected in figures.items():
            assert f[name] == pytest.approx(expected, abs=1e-5), (seed, name)
        assert all(s > 0 for s in seconds[seed])
        assert_printed(tutorial, [seed, *(f[c] for c in columns)], atol=[0] + [half_unit(2)] * 8)
        assert_printed(tutorial, [seed, *seconds[seed]], atol=[0, half_unit(1), half_unit(1)], gaps=True)
