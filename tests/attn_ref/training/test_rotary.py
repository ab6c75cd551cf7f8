"""attn_ref.training.rotary (`RotaryDecoder`, `with_frequencies`) against a RoPE decoder written out
in float64 NumPy (tests/support/rope_scaling_reference.py), and the properties the "longer than
trained" page relies on: no position table, so any length is read; the only positional signal is
RoPE, so shifting every position changes nothing; a copy at other frequencies leaves the original
and shares no weights with it; `train_induction` trains it.

Tolerances: the model computes in float32 (unit roundoff 6e-8). Its logits are sums of a few
hundred products of values of order 1 through two layers: errors of a few 1e-6; 1e-5 for the
logits and 1e-6 for the weights (each below 1) are far above that and far below any real
difference.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attn_ref.positional import rope_frequencies
from attn_ref.rope_scaling import interpolated_frequencies, yarn_attention_scale, yarn_frequencies
from attn_ref.training import RotaryDecoder, train_induction, with_frequencies
from tests.support.rope_scaling_reference import rotary_decoder, state64

SETTINGS = settings(max_examples=20, deadline=None)


@SETTINGS
@given(
    st.integers(1, 3),  # batch
    st.integers(1, 24),  # tokens: longer than context_length too
    st.sampled_from([(8, 2), (8, 1), (12, 3), (16, 2)]),  # (embed_dim, num_heads), even d_k
    st.integers(1, 3),  # layers
    st.floats(1.0, 16.0),  # factor
)
def test_against_numpy(B, T, shape, num_layers, factor):
    embed_dim, num_heads = shape
    torch.manual_seed(T)
    model = RotaryDecoder(10, 6, embed_dim, num_layers, num_heads, base=100.0)
    theta = yarn_frequencies(model.frequencies, factor, 6) if model.frequencies.numel() > 1 else None
    if theta is not None:
        model = with_frequencies(model, theta, yarn_attention_scale(factor))
    tokens = torch.randint(0, 10, (B, T), generator=torch.Generator().manual_seed(B))
    with torch.no_grad():
        logits, weights = model(tokens)
    expected, expected_weights = rotary_decoder(
        state64(model), tokens.numpy(), model.frequencies.numpy(), model.attention_scale, num_heads
    )
    np.testing.assert_allclose(logits.double().numpy(), expected, atol=1e-5)
    for ours, theirs in zip(weights, expected_weights, strict=True):
        np.testing.assert_allclose(ours.double().numpy(), theirs, atol=1e-6)


def test_frequencies_are_ropes_own():
    model = RotaryDecoder(8, 6, embed_dim=32, num_layers=1, num_heads=2, base=100.0)
    assert torch.equal(model.frequencies, rope_frequencies(16, 100.0)) and model.attention_scale == 1.0


def test_no_position_table_and_any_length():
    """Nothing bounds the length: a sequence far past ``context_length`` is read, causally (its first
    positions give the logits of its prefix alone)."""
    torch.manual_seed(0)
    model = RotaryDecoder(8, 6, embed_dim=8, num_layers=2, num_heads=2)
    assert not any("position" in name for name, _ in model.named_parameters())
    tokens = torch.randint(0, 8, (2, 40), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits, weights = model(tokens)
        prefix, _ = model(tokens[:, :6])
    assert logits.shape == (2, 40, 8) and weights[1].shape == (2, 2, 40, 40)
    torch.testing.assert_close(logits[:, :6], prefix)


def test_with_frequencies_copies_and_leaves_the_original():
    torch.manual_seed(0)
    model = RotaryDecoder(10, 6, embed_dim=8, num_layers=1, num_heads=2, base=100.0)
    before = model.frequencies.clone()
    changed = with_frequencies(
        model, interpolated_frequencies(model.frequencies, 2.0), 1.5, context_length=12
    )
    assert (
        torch.equal(model.frequencies, before) and model.attention_scale == 1.0 and model.context_length == 6
    )
    assert changed.attention_scale == 1.5 and changed.context_length == 12
    np.testing.assert_allclose(changed.frequencies.numpy(), before.numpy() / 2, rtol=1e-15)
    with torch.no_grad():
        changed.token_embedding.weight.add_(1.0)
    assert not torch.equal(changed.token_embedding.weight, model.token_embedding.weight)


def test_train_induction_trains_it():
    torch.manual_seed(0)
    model = RotaryDecoder(16, 12, embed_dim=16, num_layers=2, num_heads=2, base=100.0)
    before = [p.detach().clone() for p in model.parameters()]
    history = train_induction(model, steps=5, batch_size=4, periods=(3, 6))
    assert len(history.total) == 5 and not model.training
    assert all(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda: RotaryDecoder(8, 6, embed_dim=6, num_layers=1, num_heads=2), "must be even"),
        (lambda: RotaryDecoder(8, 6, embed_dim=8, num_layers=1, num_heads=3), "num_heads=3 must divide"),
        (lambda: RotaryDecoder(0, 6, embed_dim=8, num_layers=1, num_heads=2), "vocab_size"),
        (lambda: RotaryDecoder(8, 6, embed_dim=8, num_layers=0, num_heads=2), "num_layers"),
        (lambda: RotaryDecoder(8, 6, 8, 1, 2, base=0.5), "base must be above 1"),
        (lambda: RotaryDecoder(8, 6, 8, 1, 2)(torch.tensor([[1, 9]])), "tokens must lie in"),
        (lambda: RotaryDecoder(8, 6, 8, 1, 2)(torch.tensor([1, 2])), r"tokens must be a \(B, T\)"),
        (lambda: with_frequencies(RotaryDecoder(8, 6, 8, 1, 2), torch.ones(3)), r"expected \(2,\)"),
        (lambda: with_frequencies(RotaryDecoder(8, 6, 8, 1, 2), -torch.ones(2)), "positive"),
        (lambda: with_frequencies(RotaryDecoder(8, 6, 8, 1, 2), torch.ones(2), 0.0), "attention_scale"),
        (
            lambda: with_frequencies(RotaryDecoder(8, 6, 8, 1, 2), torch.ones(2), context_length=0),
            "context_length",
        ),
    ],
)
def test_bad_arguments_are_named(call, words):
    with pytest.raises(ValueError, match=words):
        call()
