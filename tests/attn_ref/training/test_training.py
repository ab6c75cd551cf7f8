"""attn_ref.training against independent references: its building blocks, on small random models.

The building blocks are checked against float64 NumPy written out here (attention from
tests/support/reference.py, losses from a log-softmax, the scores and the one-token induction
losses as plain loops over queries and keys, the OV circuit's eigenvalues from NumPy's on the full
vocabulary-square matrix, each head's logits from its weights), against PyTorch's own
`nn.MultiheadAttention` with its masks, and against hand-made inputs whose answer is known. No
model is trained here: what the tutorials' trained models learn is checked by the tutorials' tests
(tests/tutorials/test_induction_heads.py and test_cross_attention.py), on every seed the tutorials
train, from the models their executions kept (tests/support/training_claims.py).
"""

from __future__ import annotations

import base64
import copy
import json
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attn_ref.masks import causal_mask
from attn_ref.multihead import MultiHeadAttention
from attn_ref.training import (
    AttentionOnlyDecoder,
    TinyEncoderDecoder,
    copying_scores,
    head_logits,
    model_from_playground_json,
    next_token_losses,
    one_token_induction_losses,
    part_masks,
    playground_json,
    prefix_matching_scores,
    previous_token_scores,
    repeated_tokens,
    sorting_batch,
    to_torch_multihead,
    token_scores,
    without_heads,
)
from tests.support import reference
from tests.support.reference import as64, linear, multihead
from tests.support.training_claims import ov_copying, perfect_one_token_losses

SETTINGS = settings(max_examples=25, deadline=None)


def log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


# --- the induction task ----------------------------------------------------------------------


@SETTINGS
@given(
    st.integers(1, 4),
    st.integers(2, 40),
    st.integers(1, 100),
    st.data(),
    st.integers(0, 2**31 - 1),
)
def test_repeated_tokens_repeat_their_first_period(B, T, V, data, seed):
    shortest = data.draw(st.integers(2, T))
    longest = data.draw(st.integers(shortest, T))
    tokens, periods = repeated_tokens(B, T, V, (shortest, longest), torch.Generator().manual_seed(seed))
    assert tokens.shape == (B, T) and periods.shape == (B,)
    assert ((shortest <= periods) & (periods <= longest)).all()
    assert ((tokens >= 0) & (tokens < V)).all()
    for b in range(B):
        p = int(periods[b])
        for t in range(T):
            assert tokens[b, t] == tokens[b, t % p]
    again = repeated_tokens(B, T, V, (shortest, longest), torch.Generator().manual_seed(seed))
    assert torch.equal(again[0], tokens) and torch.equal(again[1], periods)


def test_repeated_tokens_draws_uniform_tokens_and_periods():
    """Counts over many draws: each token and each period about equally often (8 standard
    deviations of a multinomial count allowed)."""
    tokens, periods = repeated_tokens(4000, 16, 8, (3, 6), torch.Generator().manual_seed(0))
    first = torch.cat([tokens[b, : int(periods[b])] for b in range(4000)])  # the drawn tokens
    for counts, n, k in (
        (torch.bincount(first, minlength=8), len(first), 8),
        (torch.bincount(periods)[3:], 4000, 4),
    ):
        expected = n / k
        assert (counts.double() - expected).abs().max() < 8 * math.sqrt(expected)


@pytest.mark.parametrize("period, T", [(3, 7), (5, 5), (2, 9)])
def test_part_masks_by_hand(period, T):
    first, repeated = part_masks(torch.tensor([period]), T)
    for i in range(T - 1):  # the prediction made at position i, of token i + 1
        assert bool(first[0, i]) == (i + 1 <= period - 1)  # a new random token
        assert bool(repeated[0, i]) == (i >= period)  # the current token occurred p back
    assert not (first & repeated).any()


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match=r"periods must be a \(B,\) tensor of integers, got shape \(1, 1\)"):
        part_masks(torch.tensor([[3]]), 7)
    with pytest.raises(ValueError, match=r"periods\[0\] must be an int of at least 2, got 1"):
        repeated_tokens(1, 8, 10, (1, 4))
    with pytest.raises(ValueError, match=r"queries must be a \(1, 3\) boolean mask, got \(1, 2\)"):
        prefix_matching_scores(
            torch.ones(1, 1, 3, 3), torch.tensor([[1, 2, 1]]), torch.ones(1, 2, dtype=torch.bool)
        )
    model = AttentionOnlyDecoder(8, 4, embed_dim=4, num_layers=1, num_heads=2)
    with pytest.raises(ValueError, match=r"head must be an int in \[0, 1\], got 2"):
        without_heads(model, [(0, 2)])
    with pytest.raises(ValueError, match="model must have at least 2 layers"):
        token_scores(model, 0)
    with pytest.raises(ValueError, match=r"layer must be an int in \[0, 0\], got 1"):
        copying_scores(model, 1)
    with pytest.raises(ValueError, match=r"layer must be an int in \[0, 0\], got 1"):
        head_logits(model, torch.tensor([[1, 2]]), 1)
    with pytest.raises(ValueError, match=r"tokens must be a \(B, T\) tensor of integer ids"):
        one_token_induction_losses(torch.tensor([1, 2, 1]))


@SETTINGS
@given(st.integers(1, 3), st.integers(2, 8), st.integers(2, 6), st.integers(0, 2**31 - 1))
def test_next_token_losses_are_minus_log_probabilities(B, T, V, seed):
    g = torch.Generator().manual_seed(seed)
    logits = 3 * torch.randn(B, T, V, generator=g, dtype=torch.float64)
    tokens = torch.randint(0, V, (B, T), generator=g)
    expected = -np.take_along_axis(log_softmax(as64(logits))[:, :-1], tokens[:, 1:, None].numpy(), -1)[..., 0]
    np.testing.assert_allclose(as64(next_token_losses(logits, tokens)), expected, rtol=1e-12, atol=1e-12)


@SETTINGS
@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 2), st.integers(1, 6), st.integers(0, 2**31 - 1))
def test_attention_only_decoder_is_embeddings_plus_causal_attention_layers(layers, heads, B, T, seed):
    torch.manual_seed(seed)
    model = AttentionOnlyDecoder(11, 6, embed_dim=2 * heads, num_layers=layers, num_heads=heads).double()
    tokens = torch.randint(0, 11, (B, T), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        logits, weights = model(tokens)
    x = as64(model.token_embedding.weight)[tokens.numpy()] + as64(model.position_embedding.weight)[:T]
    for layer, layer_weights in zip(model.layers, weights, strict=True):
        out, expected_weights = multihead(x, x, layer, reference.causal(T))
        np.testing.assert_allclose(as64(layer_weights), expected_weights, rtol=1e-10, atol=1e-12)
        x = x + out  # the residual stream
    np.testing.assert_allclose(as64(logits), linear(x, model.unembedding), rtol=1e-10, atol=1e-10)


def test_attention_only_decoder_refuses_bad_tokens():
    model = AttentionOnlyDecoder(8, 4, embed_dim=4, num_layers=1, num_heads=2)
    with pytest.raises(ValueError, match="T=5 positions, more than context_length=4"):
        model(torch.zeros(1, 5, dtype=torch.long))
    with pytest.raises(ValueError, match=r"tokens must lie in \[0, 7\]"):
        model(torch.tensor([[1, 8]]))
    with pytest.raises(ValueError, match="tokens must be a \\(B, T\\) tensor of integer ids"):
        model(torch.zeros(2, 3))


# --- the scores ------------------------------------------------------------------------------


def test_previous_token_scores_by_hand():
    weights = torch.zeros(1, 2, 3, 3)
    weights[0, 0] = torch.tensor([[1.0, 0, 0], [1.0, 0, 0], [0, 1.0, 0]])  # always the previous token
    weights[0, 1] = torch.tensor([[1.0, 0, 0], [0.25, 0.75, 0], [0.5, 0.25, 0.25]])
    np.testing.assert_allclose(as64(previous_token_scores(weights)), [1.0, (0.25 + 0.25) / 2])


@SETTINGS
@given(st.integers(1, 3), st.integers(2, 7), st.integers(1, 3), st.integers(0, 2**31 - 1), st.booleans())
def test_prefix_matching_scores_against_loops(B, T, H, seed, default_queries):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, 3, (B, T), generator=g)  # three tokens: many repeats
    weights = torch.rand(B, H, T, T, generator=g, dtype=torch.float64)
    queries = torch.rand(B, T, generator=g) > 0.3
    targets = {
        (b, i): [j for j in range(1, i + 1) if tokens[b, j - 1] == tokens[b, i]]
        for b in range(B)
        for i in range(T)
    }
    if default_queries:
        queries = torch.tensor([[bool(targets[b, i]) for i in range(T)] for b in range(B)])
    chosen = [(b, i) for b in range(B) for i in range(T) if queries[b, i]]
    if not chosen:
        return
    expected = [
        np.mean([sum(float(weights[b, h, i, j]) for j in targets[b, i]) for b, i in chosen]) for h in range(H)
    ]
    scores = prefix_matching_scores(weights, tokens, None if default_queries else queries)
    np.testing.assert_allclose(as64(scores), expected, rtol=1e-12, atol=1e-15)


def test_scores_of_ideal_heads_on_a_repeat():
    """A head that does exactly what its name says scores 1; on period 5, an induction head's key is
    the query minus 4, once the repeat has started."""
    tokens, periods = repeated_tokens(1, 15, 1000, (5, 5), torch.Generator().manual_seed(0))
    assert len(set(tokens[0, :5].tolist())) == 5  # no chance repeats among the five drawn
    previous = torch.eye(15).roll(-1, dims=1).tril()
    previous[0, 0] = 1.0
    induction = torch.zeros(15, 15)
    induction[torch.arange(5, 15), torch.arange(1, 11)] = 1.0
    induction[torch.arange(5), 0] = 1.0  # before the repeat: anywhere
    in_repeat = torch.arange(15)[None] >= periods[:, None]
    assert previous_token_scores(previous[None, None]).item() == 1.0
    assert prefix_matching_scores(induction[None, None], tokens, in_repeat).item() == 1.0
    assert prefix_matching_scores(previous[None, None], tokens, in_repeat).item() == 0.0


@SETTINGS
@given(st.integers(1, 2), st.integers(1, 3), st.integers(2, 6), st.data(), st.integers(0, 2**31 - 1))
def test_without_heads_removes_exactly_those_heads_terms(layers, H, T, data, seed):
    torch.manual_seed(seed)
    model = AttentionOnlyDecoder(9, 6, embed_dim=2 * H, num_layers=layers, num_heads=H).double()
    pairs = [(layer, head) for layer in range(layers) for head in range(H)]
    silenced = data.draw(st.lists(st.sampled_from(pairs), unique=True))
    tokens = torch.randint(0, 9, (1, T), generator=torch.Generator().manual_seed(seed))
    ablated = without_heads(model, silenced)
    with torch.no_grad():
        logits, _ = ablated(tokens)
        original, _ = model(tokens)
    x = as64(model.token_embedding.weight)[tokens.numpy()] + as64(model.position_embedding.weight)[:T]
    for number, layer in enumerate(model.layers):  # each head's term written out, the silenced left out
        q, k, v = (
            np.moveaxis(linear(x, p).reshape(1, T, H, -1), -2, -3)
            for p in (layer.q_proj, layer.k_proj, layer.v_proj)
        )
        heads, _ = reference.attention(q, k, v, reference.causal(T))  # (1, H, T, d_k)
        W_O, d_k = as64(layer.out_proj.weight).T, layer.head_dim  # (H * d_k, C)
        terms = [heads[:, h] @ W_O[h * d_k : (h + 1) * d_k] for h in range(H) if (number, h) not in silenced]
        x = x + sum(terms, np.zeros_like(x)) + as64(layer.out_proj.bias)
    np.testing.assert_allclose(as64(logits), linear(x, model.unembedding), rtol=1e-10, atol=1e-10)
    with torch.no_grad():
        assert torch.equal(model(tokens)[0], original)  # the model itself is untouched


def test_token_scores_are_the_layers_scores_on_token_streams():
    """Row a, column b: layer 1's score from a query stream E_a to a key stream E_b (direct), or to
    head h0's output when it attends to b (through), up to the key bias's term, which is the same
    along a row."""
    torch.manual_seed(0)
    model = AttentionOnlyDecoder(7, 4, embed_dim=6, num_layers=2, num_heads=2).double()
    E = as64(model.token_embedding.weight)  # (V, C)
    first, second = model.layers
    d_k = second.head_dim
    for head in range(2):
        rows = slice(head * d_k, (head + 1) * d_k)
        q = linear(E, second.q_proj)[:, rows]  # (V, d_k)
        for through in (None, 0, 1):
            if through is None:
                stream = E
            else:  # head `through` of layer 0, attending with weight 1 to a position holding b
                block = slice(through * d_k, (through + 1) * d_k)
                stream = linear(E, first.v_proj)[:, block] @ as64(first.out_proj.weight)[:, block].T
            k = linear(stream, second.k_proj)[:, rows]  # (V, d_k), with the key bias
            full = q @ k.T / math.sqrt(d_k)
            difference = full - as64(token_scores(model, head, through))
            np.testing.assert_allclose(difference, difference[:, :1].repeat(7, axis=1), atol=1e-12)
            np.testing.assert_allclose(difference[:, 0], q @ as64(second.k_proj.bias)[rows] / math.sqrt(d_k))


@SETTINGS
@given(st.integers(1, 3), st.integers(2, 12), st.integers(2, 5), st.integers(0, 2**31 - 1))
def test_one_token_induction_losses_against_loops(B, T, V, seed):
    tokens = torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))  # few tokens
    expected = perfect_one_token_losses(tokens.numpy())
    np.testing.assert_allclose(as64(one_token_induction_losses(tokens)), expected, rtol=1e-6)


def test_one_token_induction_losses_on_a_repeat():
    """By hand. In the repeated part the next token is always among the matches, so the loss is
    finite: zero where the current token occurs once in the period, above zero where it occurs
    twice, followed by different tokens (the share of its matches that hold the right one)."""
    tokens = torch.tensor([[5, 1, 5, 2, 5, 1, 5, 2, 5, 1]])  # period 4: 5 is followed by 1 and by 2
    losses = one_token_induction_losses(tokens)[0]
    assert losses[[0, 1, 3]].isnan().all()  # 5 at 0, 1 at 1, 2 at 3: no earlier copy
    assert losses[2] == float("inf")  # 5 at 2: its one match holds 1, the next token is 2
    # From position 4 (the repeat): 5 (1 of 2 matches), 1 (1 of 1), 5 (1 of 3), 2 (1 of 1), 5 (2 of 4)
    np.testing.assert_allclose(as64(losses[4:]), [math.log(2), 0.0, math.log(3), 0.0, math.log(2)], rtol=1e-6)


@SETTINGS
@given(st.integers(1, 2), st.integers(1, 3), st.integers(1, 3), st.integers(0, 2**31 - 1))
def test_copying_scores_against_the_full_ov_circuits_eigenvalues(layers, H, d_k, seed):
    """The d_k x d_k product has the nonzero eigenvalues of the V x V circuit: the statistic against
    NumPy's eigenvalues of the full circuit, and against 1 and -1 for circuits built to be +-I."""
    torch.manual_seed(seed)
    model = AttentionOnlyDecoder(7, 4, embed_dim=H * d_k, num_layers=layers, num_heads=H)
    for layer in range(layers):
        np.testing.assert_allclose(as64(copying_scores(model, layer)), ov_copying(model, layer), atol=1e-9)


def test_copying_scores_of_circuits_built_to_copy_or_not():
    """W_E = W_U^T = I and a head whose W_V W_O is +I (copies), -I (suppresses), a rotation by a
    quarter turn in each plane (eigenvalues +-i: neither), for two heads side by side."""
    model = AttentionOnlyDecoder(4, 3, embed_dim=4, num_layers=1, num_heads=2)
    quarter = torch.tensor([[0.0, -1.0], [1.0, 0.0]])
    with torch.no_grad():
        model.token_embedding.weight.copy_(torch.eye(4))
        model.unembedding.weight.copy_(torch.eye(4))
        attention = model.layers[0]
        attention.v_proj.weight.copy_(torch.eye(4))
        attention.out_proj.weight.copy_(torch.block_diag(-torch.eye(2), quarter).T)  # nn.Linear: W_O^T
    np.testing.assert_allclose(as64(copying_scores(model, 0)), [-1.0, 0.0], atol=1e-12)
    with torch.no_grad():
        attention.out_proj.weight.copy_(torch.eye(4))
    np.testing.assert_allclose(as64(copying_scores(model, 0)), [1.0, 1.0], atol=1e-12)


@SETTINGS
@given(st.integers(1, 2), st.integers(1, 3), st.integers(1, 2), st.integers(1, 6), st.integers(0, 2**31 - 1))
def test_head_logits_are_each_heads_term_and_sum_to_the_logits(layers, H, B, T, seed):
    """Each head's term written out in float64 (its attention, values with their bias, its block of
    W_O, W_U); for the last layer, the heads' terms, the stream before it and the output bias add
    up to the model's logits."""
    torch.manual_seed(seed)
    model = AttentionOnlyDecoder(9, 6, embed_dim=2 * H, num_layers=layers, num_heads=H).double()
    tokens = torch.randint(0, 9, (B, T), generator=torch.Generator().manual_seed(seed))
    x = as64(model.token_embedding.weight)[tokens.numpy()] + as64(model.position_embedding.weight)[:T]
    W_U = as64(model.unembedding.weight).T  # (C, V)
    for number, layer in enumerate(model.layers):
        out, _ = multihead(x, x, layer, reference.causal(T))
        q, k, v = (
            np.moveaxis(linear(x, p).reshape(B, T, H, -1), -2, -3)
            for p in (layer.q_proj, layer.k_proj, layer.v_proj)
        )
        heads, _ = reference.attention(q, k, v, reference.causal(T))  # (B, H, T, d_k)
        W_O, d_k = as64(layer.out_proj.weight).T, layer.head_dim  # (H * d_k, C)
        expected = np.stack([heads[:, h] @ W_O[h * d_k : (h + 1) * d_k] @ W_U for h in range(H)], axis=1)
        per_head = as64(head_logits(model, tokens, number))
        np.testing.assert_allclose(per_head, expected, rtol=1e-10, atol=1e-12)
        if number == layers - 1:
            with torch.no_grad():
                logits = as64(model(tokens)[0])
            rest = (x + as64(layer.out_proj.bias)) @ W_U
            np.testing.assert_allclose(per_head.sum(axis=1) + rest, logits, rtol=1e-10, atol=1e-10)
        x = x + out


# --- PyTorch's module ---------------------------------------------------------------------


@SETTINGS
@given(
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(1, 5),
    st.integers(1, 5),
    st.booleans(),
    st.sampled_from(["none", "padding", "causal"]),
    st.integers(0, 2**31 - 1),
)
def test_to_torch_multihead_computes_what_attn_ref_computes(H, B, L, S, bias, masking, seed):
    torch.manual_seed(seed)
    ours = MultiHeadAttention(2 * H, H, bias=bias).double()
    if bias:
        for projection in (ours.q_proj, ours.k_proj, ours.v_proj, ours.out_proj):
            nn.init.normal_(projection.bias)
    theirs = to_torch_multihead(ours)
    assert theirs.batch_first and theirs.in_proj_weight.dtype == torch.float64
    g = torch.Generator().manual_seed(seed)
    query = torch.randn(B, L, 2 * H, generator=g, dtype=torch.float64)
    key, value = torch.randn(2, B, S, 2 * H, generator=g, dtype=torch.float64)
    ours_masks, theirs_masks = {}, {}
    if masking == "padding":
        lengths = torch.randint(1, S + 1, (B,), generator=g)
        keep = torch.arange(S)[None, :] < lengths[:, None]  # (B, S)
        ours_masks, theirs_masks = {"attn_mask": keep[:, None, None]}, {"key_padding_mask": ~keep}
    elif masking == "causal":
        mask = causal_mask(L, S)
        ours_masks, theirs_masks = {"attn_mask": mask}, {"attn_mask": ~mask}
    with torch.no_grad():
        output, weights = ours(query, key, value, **ours_masks)
        expected, expected_weights = theirs(query, key, value, **theirs_masks, average_attn_weights=False)
    torch.testing.assert_close(output, expected)
    torch.testing.assert_close(weights, expected_weights)
    back = MultiHeadAttention.from_torch(theirs)
    for name, tensor in ours.state_dict().items():
        assert torch.equal(back.state_dict()[name], tensor)


def test_to_torch_multihead_refuses_grouped_query_attention():
    with pytest.raises(ValueError, match="num_kv_heads == num_heads"):
        to_torch_multihead(MultiHeadAttention(8, 4, num_kv_heads=2))


# --- the sorting task and the encoder-decoder ---------------------------------------------


@SETTINGS
@given(st.integers(1, 5), st.integers(1, 20), st.data(), st.integers(0, 2**31 - 1))
def test_sorting_batch_holds_sorted_targets_and_their_alignment(B, num_values, data, seed):
    shortest = data.draw(st.integers(1, num_values))
    longest = data.draw(st.integers(shortest, num_values))
    batch = sorting_batch(B, num_values, (shortest, longest), torch.Generator().manual_seed(seed))
    pad, start, end = num_values, num_values + 1, num_values + 2
    S = longest
    assert batch.source.shape == (B, S) and batch.target.shape == batch.decoder_input.shape == (B, S + 1)
    for b in range(B):
        n = int(batch.lengths[b])
        numbers = batch.source[b, :n].tolist()
        assert shortest <= n <= longest and len(set(numbers)) == n and max(numbers) < num_values
        assert batch.source[b, n:].eq(pad).all()
        assert batch.target[b].tolist() == [*sorted(numbers), end] + [pad] * (S - n)
        assert batch.decoder_input[b].tolist() == [start, *sorted(numbers)] + [pad] * (S - n)
        assert batch.alignment[b].tolist()[n:] == [-1] * (S + 1 - n)
        assert [numbers[j] for j in batch.alignment[b, :n].tolist()] == sorted(numbers)


def _encoder_decoder_reference(model, batch):
    """The encoder-decoder written out with PyTorch's nn.MultiheadAttention (its own masks)."""
    S, L = batch.source.shape[1], batch.decoder_input.shape[1]
    pads = torch.arange(S)[None, :] >= batch.lengths[:, None]  # (B, S): True on padding
    x = model.token_embedding(batch.source) + model.source_positions.weight[:S]
    y = model.token_embedding(batch.decoder_input) + model.output_positions.weight[:L]
    x = x + to_torch_multihead(model.encoder_attn)(x, x, x, key_padding_mask=pads)[0]
    future = torch.ones(L, L, dtype=torch.bool).triu(diagonal=1)  # True where a key comes later
    y = y + to_torch_multihead(model.decoder_attn)(y, y, y, attn_mask=future)[0]
    crossed, weights = to_torch_multihead(model.cross_attn)(
        y, x, x, key_padding_mask=pads, average_attn_weights=False
    )
    return model.unembedding(y + crossed), weights


@pytest.mark.parametrize("heads", [1, 2])
def test_encoder_decoder_matches_pytorchs_attention_with_its_masks(heads):
    torch.manual_seed(heads)
    model = TinyEncoderDecoder(13, 12, embed_dim=8, num_heads=heads).double()
    batch = sorting_batch(6, 10, (2, 7), torch.Generator().manual_seed(heads))
    with torch.no_grad():
        logits, weights = model(batch.source, batch.lengths, batch.decoder_input)
        expected, expected_cross = _encoder_decoder_reference(model, batch)
    torch.testing.assert_close(logits, expected)
    torch.testing.assert_close(weights["cross"], expected_cross)
    padded = batch.source == 10  # (B, S)
    assert weights["cross"].masked_select(padded[:, None, None]).eq(0).all()  # exactly zero
    assert weights["encoder"].masked_select(padded[:, None, None]).eq(0).all()


def test_a_padded_source_gives_what_it_gives_alone():
    torch.manual_seed(0)
    model = TinyEncoderDecoder(13, 12, embed_dim=8, num_heads=2).double()
    batch = sorting_batch(8, 10, (2, 7), torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits, _ = model(batch.source, batch.lengths, batch.decoder_input)
        for b in range(8):
            n = int(batch.lengths[b])
            alone, _ = model(batch.source[b : b + 1, :n], [n], batch.decoder_input[b : b + 1, : n + 1])
            torch.testing.assert_close(alone[0], logits[b, : n + 1])


def test_encoder_decoder_refuses_bad_input():
    model = TinyEncoderDecoder(13, 4, embed_dim=8, num_heads=2)
    with pytest.raises(ValueError, match="source has 5 positions, more than context_length=4"):
        model(torch.zeros(1, 5, dtype=torch.long), [5], torch.zeros(1, 2, dtype=torch.long))
    with pytest.raises(ValueError, match=r"decoder_input must lie in \[0, 12\]"):
        model(torch.zeros(1, 3, dtype=torch.long), [3], torch.tensor([[13]]))
    with pytest.raises(ValueError, match="lengths has 2 entries, expected source's B=1"):
        model(torch.zeros(1, 3, dtype=torch.long), [3, 3], torch.zeros(1, 2, dtype=torch.long))


# --- the playground's file -----------------------------------------------------------------


def test_playground_json_is_small_and_decodes_by_its_documented_format():
    torch.manual_seed(0)
    model = AttentionOnlyDecoder(64, 32, embed_dim=64, num_layers=2, num_heads=2)  # the tutorial's shape
    text = playground_json(model)
    assert len(text.encode()) <= 50_000
    document = json.loads(text)
    assert document["format"] == "attn_ref induction model, attention only, int8" and document["version"] == 2
    sizes = {
        key: document[key] for key in ("vocab_size", "context_length", "embed_dim", "num_layers", "num_heads")
    }
    assert sizes == {"vocab_size": 64, "context_length": 32, "embed_dim": 64, "num_layers": 2, "num_heads": 2}
    # Layer 1's copying statistic, from the full-precision weights, 6 decimals kept.
    np.testing.assert_allclose(document["copying"], ov_copying(model, 1), atol=5e-7 + 1e-12)
    expected = ["token_embedding.weight", "position_embedding.weight"]
    expected += [f"layers.0.{p}_proj.{kind}" for p in ("q", "k", "v", "out") for kind in ("weight", "bias")]
    expected += [f"layers.1.{p}_proj.{kind}" for p in ("q", "k") for kind in ("weight", "bias")]
    assert sorted(document["tensors"]) == sorted(expected)
    state = model.state_dict()
    reloaded = model_from_playground_json(text).state_dict()
    for name, stored in document["tensors"].items():
        levels = np.frombuffer(base64.b64decode(stored["int8"]), dtype=np.int8)
        decoded = (levels.astype(np.float64) * stored["scale"]).reshape(
            stored["shape"]
        )  # the documented rule
        original = as64(state[name])
        # One scale per tensor: the largest entry over 127 (6 digits kept); each entry rounds to
        # the nearest level, so it moves by at most half a step (and a float32 hair).
        assert stored["scale"] == pytest.approx(np.abs(original).max() / 127, rel=1e-5)
        assert np.abs(decoded - original).max() <= stored["scale"] * (0.5 + 1e-4)
        np.testing.assert_allclose(as64(reloaded[name]), decoded, rtol=1e-6, atol=0)
    for name in ("layers.1.v_proj.weight", "layers.1.out_proj.bias", "unembedding.weight"):
        assert reloaded[name].eq(0).all()  # not in the file


def test_playground_model_computes_the_attention_of_its_weights():
    """The reloaded model's attention weights: those of the original model with the decoded
    weights put in, which is what a browser reading the file computes."""
    torch.manual_seed(1)
    model = AttentionOnlyDecoder(16, 8, embed_dim=8, num_layers=2, num_heads=2)
    text = playground_json(model)
    decoded = copy.deepcopy(model)
    with torch.no_grad():
        for name, stored in json.loads(text)["tensors"].items():
            levels = torch.tensor(
                np.frombuffer(base64.b64decode(stored["int8"]), dtype=np.int8).astype(np.int64)
            )
            decoded.get_parameter(name).copy_((levels * stored["scale"]).reshape(stored["shape"]))
        tokens = torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6]])
        for ours, expected in zip(
            model_from_playground_json(text)(tokens)[1], decoded(tokens)[1], strict=True
        ):
            torch.testing.assert_close(ours, expected)
