"""The cross-attention tutorial, as the build executed it, checked against references computed here.

What the tutorial computed is read from its kernel's variables (``values``): the batches against
sorting done by hand, the untrained layers against float64 NumPy attention with the padding and
causal masks (tests/support/reference.py), the accuracies and alignment statistics recomputed from
the kept logits and weights, greedy decoding against a loop of full forward passes. What it claims
about what the trained model learned is checked by
`tests.support.training_claims.check_sorting_claims`, the same checks that seeds 1 to 3 pass in
tests/test_training.py. Printed numbers are read without the page's labels
(tests/support/shown.py); the training time is only checked to print what was measured.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.support import reference
from tests.support.reference import as64, multihead
from tests.support.shown import assert_printed, half_unit, sci_rtol
from tests.support.training_claims import END, PAD, START, check_sorting_claims


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


def test_the_claims_about_what_the_model_learned(values):
    m = {
        name: values[name]
        for name in (
            "correct",
            "on_target",
            "weight_on_target",
            "on_padding",
            "exact",
            "long_exact",
            "ends_at_10",
        )
    }
    m["by_position"] = as64(values["by_position"])
    m["unmasked_correct"] = values["unmasked_correct"].item()
    real = values["real"]
    m["on_pads"] = values["on_pads"][real].mean().item()
    m["silenced"] = values["silenced"]
    check_sorting_claims(m)


def test_exercises_print_what_they_computed(tutorial, values):
    long = values["long"]
    by_position = (values["long_logits"].argmax(-1) == long.target).float().mean(0)
    np.testing.assert_allclose(as64(values["by_position"]), as64(by_position))
    ends = (values["long_logits"][:, 10].argmax(-1) == END).float().mean().item()
    assert values["ends_at_10"] == pytest.approx(ends)
    assert_printed(
        tutorial, [values["long_exact"], 5, 10, values["exact"]], atol=[half_unit(3), 0, 0, half_unit(3)]
    )
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
