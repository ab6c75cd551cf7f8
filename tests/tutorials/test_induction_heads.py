"""The induction-heads tutorial, as the build executed it, checked against references computed here.

What the tutorial computed is read from its kernel's variables (``values``): the losses are
recomputed from its logits with a float64 log-softmax, the head scores from its attention weights
with NumPy written out here, the uniform baselines by hand, the moment of the drop from its
training history. What it claims about what the models learned is checked by
`tests.support.training_claims.check_induction_claims`, the same checks that seeds 1 to 3 pass in
tests/test_training.py. What the cells printed is read as numbers, without the page's labels
(tests/support/shown.py). The training times depend on the machine; they are only checked to print
what was measured.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from attn_ref.training import model_from_playground_json
from tests.support import reference
from tests.support.reference import as64, multihead
from tests.support.shown import assert_printed, half_unit, sci_rtol, verdicts
from tests.support.training_claims import LN_64, check_induction_claims


def nll(logits: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """-log softmax(logits)[next token] in float64: (B, T - 1)."""
    z = logits[:, :-1] - logits[:, :-1].max(axis=-1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    return -np.take_along_axis(log_p, tokens[:, 1:, None], axis=-1)[..., 0]


def prefix_scores(weights: np.ndarray, tokens: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Olsson et al.'s prefix matching, per head: the weight on keys j <= i with x_{j-1} = x_i."""
    B, T = tokens.shape
    matches = np.zeros((B, T, T), dtype=bool)
    for j in range(1, T):  # key j's previous token against every query's token, queries i >= j
        matches[:, j:, j] = tokens[:, j - 1, None] == tokens[:, j:]
    on_target = (weights * matches[:, None]).sum(axis=-1)  # (B, H, T)
    return (on_target * queries[:, None]).sum(axis=(0, 2)) / queries.sum()


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
    ROLE = values["ROLE"]
    assert values["previous_heads"] == [(0, h) for h in range(2) if values["prev_scores"][0][h] > ROLE]
    assert values["induction_heads"] == [(1, h) for h in range(2) if values["prefix_scores"][1][h] > ROLE]
    for heads in (values["previous_heads"], values["induction_heads"]):
        assert_printed(tutorial, heads)


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

    assert values["ind_head"] == int(np.argmax(as64(values["prefix_scores"][1])))
    assert values["prev_head"] == int(np.argmax(as64(values["prev_scores"][0])))
    shown = [values["ind_head"], values["prev_head"], on_diagonal(values["direct"])]
    for h, scores in enumerate(values["through"]):
        shown += [h, on_diagonal(scores)]
    assert_printed(tutorial, shown, atol=[0, 0, half_unit(2)] + [0, half_unit(2)] * 2, gaps=True)


def test_the_claims_about_what_the_models_learned(values):
    def on_diagonal(scores):
        return float((as64(scores).argmax(axis=1) == np.arange(len(scores))).mean())

    losses, one_losses = values["losses"], values["one_losses"]
    first, repeated = values["first"], values["repeated"]
    names = {(i, h): f"layer {i} head {h}" for i, h in np.ndindex(2, 2)}
    ablation_losses = values["ablation_losses"]
    m = {
        "history": values["history"],
        "first_loss": losses[first].mean().item(),
        "repeated_loss": losses[repeated].mean().item(),
        "one_layer_first": one_losses[first].mean().item(),
        "uniform": (
            np.mean([1 / (i + 1) for i in range(1, values["T"])]),  # by hand, as above
            float(
                prefix_scores(
                    as64(values["uniform"]), values["tokens"].numpy(), values["in_repeat"].numpy()
                ).item()
            ),
        ),
        "prev": [as64(s) for s in values["prev_scores"]],
        "prefix": [as64(s) for s in values["prefix_scores"]],
        "untrained_prev": [as64(s) for s in values["untrained_prev"]],
        "untrained_prefix": [as64(s) for s in values["untrained_prefix"]],
        "ablations": {
            **{key: ablation_losses[name] for key, name in names.items()},
            "previous": ablation_losses["the previous-token heads"],
            "induction": ablation_losses["the induction heads"],
        },
        "ablated_heads": {"previous": values["previous_heads"], "induction": values["induction_heads"]},
        "diagonal_direct": on_diagonal(values["direct"]),
        "diagonal_through": [on_diagonal(s) for s in values["through"]],
        "prev_head": values["prev_head"],
        "one_layer_loss": values["one_layer_loss"],
        "one_layer_prefix": as64(values["one_prefix"]),
        "distinct_loss": values["distinct_loss"],
        "entropy": as64(values["entropy"]),
        "unseen": values["unseen"],
        "fixed": values["fixed_losses"],
    }
    check_induction_claims(m)


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
    fixed = values["fixed_losses"]
    assert_printed(
        tutorial, [16, fixed["period 16"], 8, 16, fixed["periods 8 to 16"]], atol=half_unit(2), gaps=True
    )


def test_the_playground_file(tutorial, values):
    exported = values["exported"]
    assert len(exported.encode()) <= 50_000
    document = json.loads(exported)
    assert (document["vocab_size"], document["context_length"], document["num_heads"]) == (64, 32, 2)
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


def test_other_seeds_and_the_closing_figures(tutorial, values):
    """Seed 0's row is the page's own model, as measured above; seeds 1 to 3 pass the thresholds of
    `check_induction_claims` on the figures the table shows (the full claims are checked for them
    by tests/test_training.py); the table and the closing note print what was computed."""
    by_seed, seconds = values["by_seed"], values["seconds"]
    assert list(by_seed) == [0, 1, 2, 3] and list(seconds) == list(by_seed)
    ablation_losses = values["ablation_losses"]
    page = {
        "previous": values["prev_scores"][0].max().item(),
        "prefix": values["prefix_scores"][1].max().item(),
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
    columns = ["previous", "prefix", "trained", "previous zeroed", "induction zeroed", "one layer"]
    for seed, f in by_seed.items():
        assert f["roles"]["previous"] and f["roles"]["induction"]
        assert f["previous"] > 0.35 and f["prefix"] > 0.8 and f["trained"] < 1.2
        assert min(f["previous zeroed"], f["induction zeroed"]) > LN_64 - 0.7
        assert f["one layer"] > max(2.5, f["trained"] + 2) and f["one layer"] < LN_64 - 0.2
        assert all(s > 0 for s in seconds[seed])
        assert_printed(tutorial, [seed, *(f[c] for c in columns)], atol=[0] + [half_unit(2)] * 6)
        closing = [seed, *seconds[seed], f["previous"], f["prefix"], f["trained"], f["one layer"]]
        closing += [f["previous zeroed"], f["induction zeroed"]]
        assert_printed(
            tutorial, closing, atol=[0, half_unit(1), half_unit(1)] + [half_unit(2)] * 6, gaps=True
        )
