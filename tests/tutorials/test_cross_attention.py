"""The cross-attention tutorial, as the build executed it, checked against references computed here.

What the tutorial computed is read from its kernel's variables (``values``): the batches against
sorting done by hand, the untrained layers against float64 NumPy attention with the padding and
causal masks (tests/support/reference.py), the accuracies and alignment statistics recomputed from
the kept logits and weights, greedy decoding against a loop of full forward passes. What it claims
about what the trained model learned is checked by
`tests.support.training_claims.check_sorting_claims`, the same checks that seeds 1 to 3 pass in
tests/attn_ref/training/test_training.py. Printed numbers are read without the page's labels
(tests/support/shown.py); the training time is only checked to print what was measured.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.support import reference
from tests.support.reference import as64, multihead
from tests.support.shown import assert_printed, half_unit, sci_rtol
from tests.support.training_claims import (
    END,
    PAD,
    SEEDS,
    START,
    check_sorting_claims,
    sort_greedily,
    sorting_measurements,
)


@pytest.fixture(scope="module")
def measured(values) -> dict:
    """Each seed's measurements, from the models the execution kept (forward passes only)."""
    return {seed: sorting_measurements(values["sorters"][seed], seed) for seed in SEEDS}


def check_batch(batch) -> None:
    """A sorting batch, by hand: distinct numbers, padded; sorted targets ending with END."""
    S = batch.source.shape[1]
    for b in range(len(batch.source)):
        n = int(batch.lengths[b])
        numbers = batch.source[b, :n].tolist()
        assert len(set(numbers)) == n and max(numbers) < PAD and batch.source[b, n:].eq(PAD).all()
        assert batch.target[b].tolist() == [*sorted(numbers), END] + [PAD] * (S - n)
        assert batch.decoder_input[b].tolist() == [START, *sorted(numbers)] + [PAD] * (S - n)
        assert [numbers[j] for j in batch.alignment[b, :n].tolist()] == sorted(numbers)
        assert batch.alignment[b, n:].eq(-1).all()


def test_the_opening_picture_is_the_alignment(values):
    """The picture's source is the batch's shortest; each row has weight 1 on the position of the
    number it writes next, the padded columns are hatched (masked), the rows are its real outputs."""
    batch, b, n = values["batch"], values["pictured"], values["n_pictured"]
    assert n == int(batch.lengths.min()) == int(batch.lengths[b]) and n < values["S"]
    ideal = values["ideal"]
    assert ideal.shape == (n, values["S"]) and (ideal.sum(axis=1) == 1).all()
    for i in range(n):
        assert batch.source[b, int(ideal[i].argmax())] == batch.target[b, i]  # the number it writes
    assert values["next_words"] == [str(v) for v in sorted(batch.source[b, :n].tolist())]
    assert values["query_words"] == ["<s>", *values["next_words"][:-1]]


def test_the_batches_are_sorting_problems(tutorial, values):
    for name in ("batch", "test", "long"):
        check_batch(values[name])
    batch = values["batch"]
    assert (values["S"], values["L"]) == (10, 11)
    for b in range(3):
        n = int(batch.lengths[b])
        numbers = batch.source[b, :n].tolist()
        assert_printed(tutorial, [n, *numbers, *sorted(numbers), *batch.alignment[b].tolist()], gaps=True)
    np.testing.assert_array_equal(
        values["keep"][:, 0].numpy(), np.arange(10)[None] < batch.lengths.numpy()[:, None]
    )
    assert_printed(tutorial, values["keep"].int().numpy())


def test_the_untrained_layers_are_attention_with_their_masks(tutorial, values):
    """Each layer against float64 NumPy with the same masks; PyTorch's printed agreement is read back
    from the last layer's kept tensors (float32 rounding of sums of 64 products: far below 1e-5)."""
    model, batch = values["model"], values["batch"]
    S, L = values["S"], values["L"]
    x, y = as64(values["x"]), as64(values["y"])
    keep = values["keep"].numpy()[:, None]  # (B, 1, 1, S)
    torch.manual_seed(0)  # the untrained weights: rebuilt as the tutorial built them
    untrained = type(model)(model.vocab_size, 16, embed_dim=64, num_heads=1)
    with torch.no_grad():
        np.testing.assert_allclose(x, as64(untrained.embed_source(batch.source)), atol=1e-6)
        np.testing.assert_allclose(y, as64(untrained.embed_output(batch.decoder_input)), atol=1e-6)
    cross, cross_weights = multihead(y, x, untrained.cross_attn, keep)
    np.testing.assert_allclose(as64(values["ours"]), cross, atol=1e-5)
    np.testing.assert_allclose(as64(values["ours_weights"]), cross_weights, atol=1e-6)
    assert values["ours_weights"].shape == (3, 1, L, S)
    _, encoder_weights = multihead(x, x, untrained.encoder_attn, keep)
    _, decoder_weights = multihead(y, y, untrained.decoder_attn, reference.causal(L))
    assert encoder_weights.shape == (3, 1, S, S) and decoder_weights.shape == (3, 1, L, L)
    assert_printed(tutorial, [3, 1, S, S, 3, 1, L, L, 3, 1, L, S], gaps=True)
    output_error = (values["ours"] - values["theirs"]).abs().max().item()
    weight_error = (values["ours_weights"] - values["theirs_weights"]).abs().max().item()
    assert output_error < 1e-5 and weight_error < 1e-6
    assert_printed(
        tutorial, [L, S, output_error, weight_error], rtol=[0, 0, sci_rtol(1), sci_rtol(1)], gaps=True
    )


def test_the_loss_table(tutorial, values):
    history = values["history"]
    assert len(history) == 300
    rows = [[end - 10, end - 1, np.mean(history[end - 10 : end])] for end in (10, 50, 100, 200, 300)]
    assert_printed(tutorial, rows, atol=[0, 0, half_unit(3)])


def test_accuracy_and_alignment_recomputed(tutorial, values):
    test, logits = values["test"], as64(values["logits"])
    cross = as64(values["weights"]["cross"][:, 0])  # (B, L, S)
    real, aligned = (test.target != PAD).numpy(), (test.alignment >= 0).numpy()
    target, alignment = test.target.numpy(), test.alignment.numpy()
    correct = (logits.argmax(-1) == target)[real].mean()
    on_target = (cross.argmax(-1) == alignment)[aligned].mean()
    weight_on_target = np.take_along_axis(cross, np.maximum(alignment, 0)[..., None], -1)[..., 0][
        aligned
    ].mean()
    padded = (test.source == PAD).numpy()
    on_padding = cross[np.broadcast_to(padded[:, None, :], cross.shape)].max()
    for name, expected in (
        ("correct", correct),
        ("on_target", on_target),
        ("weight_on_target", weight_on_target),
    ):
        assert values[name] == pytest.approx(expected, abs=1e-6)
    assert on_padding == 0.0 and values["on_padding"] == 0.0
    assert_printed(tutorial, [correct, on_target, weight_on_target, 0.0], atol=half_unit(3), gaps=True)


def test_the_example_map_is_the_first_full_source(tutorial, values):
    test, b, n = values["test"], values["b"], values["n"]
    assert n == 10 and int(test.lengths[b]) == 10 and (test.lengths[:b] < 10).all()
    np.testing.assert_array_equal(
        as64(values["example_weights"]), as64(values["weights"]["cross"][b, 0, : n + 1, :n])
    )
    inside = int((values["example_weights"][:n].argmax(-1) == test.alignment[b, :n]).sum())
    assert values["inside"] == inside
    assert_printed(tutorial, [*test.source[b, :n].tolist(), *test.alignment[b, :n].tolist()], gaps=True)


def test_padding_is_invisible(tutorial, values):
    test, short, n = values["test"], values["short"], values["n_short"]
    assert n == int(test.lengths.min()) == int(test.lengths[short])
    effect = (values["alone"][0] - values["logits"][short, : n + 1]).abs().max().item()
    assert values["padding_effect"] == effect
    # Float32 rounding of logits of tens of units, computed through products of another shape.
    assert effect < 1e-4
    assert_printed(tutorial, [n, 10 - n, 1, n + 1, 35], gaps=True)
    assert_printed(tutorial, [effect], rtol=sci_rtol(1))


def test_greedy_decoding_against_full_passes(tutorial, values):
    model, test = values["model"], values["test"]
    written = torch.full((len(test.source), 1), START)
    with torch.no_grad():
        for _ in range(test.source.shape[1] + 1):  # one full forward pass per written token
            logits, _ = model(test.source, test.lengths, written)
            written = torch.cat([written, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(values["written"], written[:, 1:])
    real = test.target != PAD
    exact = ((written[:, 1:] == test.target) | ~real).all(1).float().mean().item()
    assert values["exact"] == pytest.approx(exact)
    assert_printed(tutorial, [exact], atol=half_unit(3))


def test_the_models_were_kept_for_every_seed(values):
    assert list(values["sorters"]) == list(SEEDS) and values["sorters"][0] is values["model"]
    assert all(not sorter.training for sorter in values["sorters"].values())  # trained, in eval mode


@pytest.mark.parametrize("seed", SEEDS)
def test_the_claims_about_what_the_model_learned(measured, seed):
    """Every claim about what the model learned, on each seed's kept model (forward passes)."""
    check_sorting_claims(measured[seed])


def test_the_page_model_measures_as_the_page_printed(values, measured):
    """Seed 0's measurements are the page's own figures on the same test batch (its batch of 14 is
    drawn from another generator, so only the page's claims about it are compared)."""
    m = measured[0]
    for name in ("correct", "on_target", "weight_on_target", "on_padding", "exact"):
        assert m[name] == pytest.approx(values[name], abs=1e-6), name
    assert m["unmasked_correct"] == pytest.approx(values["unmasked_correct"].item(), abs=1e-6)
    assert m["on_pads"] == pytest.approx(values["on_pads"][values["real"]].mean().item(), abs=1e-6)
    assert m["silenced"] == pytest.approx(values["silenced"], abs=1e-6)
    # On the page's own batch of 14, the claims the page makes about it.
    long_forced, long_exact = values["long_right"].mean().item(), values["long_exact"]
    assert long_forced > 0.6 and long_forced > long_exact + 0.5 and long_exact < 0.5
    assert values["by_position"][10] < 0.8 and 0.1 < values["ends_at_10"] < 0.95


def test_other_seeds_table_is_what_the_models_give(tutorial, values, measured):
    """Each seed's row against the measurements of its kept model on the same batch (seed 0's is
    the page's own); the times print what was measured."""
    by_seed, seconds = values["by_seed"], values["seconds"]
    assert list(by_seed) == list(SEEDS) and list(seconds) == list(SEEDS)
    assert seconds[0] == values["train_seconds"]
    for seed, row in by_seed.items():
        m = measured[seed]
        expected = [m["correct"], m["on_target"], m["weight_on_target"], m["exact"]]
        np.testing.assert_allclose(row, expected, atol=1e-6)
        assert_printed(tutorial, [seed, *expected], atol=[0] + [half_unit(3)] * 4)
        assert seconds[seed] > 0
        assert_printed(tutorial, [seed, seconds[seed]], atol=[0, half_unit(1)], gaps=True)


def test_the_pitfalls_print_what_they_computed(tutorial, values):
    """The mask the wrong way round: every query of every source puts all its weight on padding
    (recomputed with NumPy from the kept weights' shapes and the lengths). Teacher forcing against
    writing alone on sources of 14: recomputed from the kept logits and by greedy decoding."""
    batch, wrong = values["batch"], values["wrong"][:, 0].numpy()  # (B, L, S)
    pads = np.arange(values["S"])[None] >= batch.lengths.numpy()[:, None]  # (B, S)
    on_pads = (wrong * pads[:, None, :]).sum(-1)  # (B, L)
    np.testing.assert_allclose(on_pads, 1.0, atol=1e-6)
    for b in range(len(batch.lengths)):
        n = int(batch.lengths[b])
        assert_printed(tutorial, [n, 10 - n, on_pads[b].min()], atol=[0, 0, half_unit(2)], gaps=True)
    long, model = values["long"], values["model"]
    right = (values["long_logits"].argmax(-1) == long.target).float()
    written = sort_greedily(model, long.source, long.lengths)
    exact = (written == long.target).all(1).float().mean().item()
    assert values["long_exact"] == pytest.approx(exact) and torch.equal(values["long_written"], written)
    assert_printed(tutorial, [right.mean().item(), exact], atol=half_unit(3), gaps=True)


def test_exercises_print_what_they_computed(tutorial, values):
    long = values["long"]
    by_position = (values["long_logits"].argmax(-1) == long.target).float().mean(0)
    np.testing.assert_allclose(as64(values["by_position"]), as64(by_position))
    ends = (values["long_logits"][:, 10].argmax(-1) == END).float().mean().item()
    assert values["ends_at_10"] == pytest.approx(ends)
    assert_printed(tutorial, as64(by_position), atol=half_unit(2))
    assert_printed(tutorial, [10, ends], atol=[0, half_unit(2)])
    padded = values["padded_keys"]
    on_pads = (values["unmasked_weights"]["cross"][:, 0] * padded[:, None, :]).sum(-1)[values["real"]].mean()
    assert_printed(
        tutorial, [values["unmasked_correct"].item(), values["correct"], on_pads.item()], atol=half_unit(3)
    )
    assert_printed(tutorial, list(values["silenced"].values()), atol=half_unit(3), gaps=True)


def test_training_time_prints_what_was_measured(tutorial, values):
    assert values["train_seconds"] > 0
    assert_printed(tutorial, [300, values["train_seconds"]], atol=[0, half_unit(1)])
