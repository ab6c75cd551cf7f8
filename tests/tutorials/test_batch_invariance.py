"""The batch-invariance tutorial, as the build executed it, against references computed here.

Two kinds of claim, tested two ways. What holds by construction on every machine (a fixed split size,
keys written before attention, fixed-order layers, a deterministic replay, the exercise's invariant
server) is asserted outright, and recomputed where it can be. What the page measures (which bits a
split count changes, how many tokens flip) is chaotic: it is checked only for what it must satisfy
anywhere (each output within float32 rounding of float64 attention; a token flips only where the two
runs' logits moved by at least the gap between its best two) and for agreeing with what was printed.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from attn_ref.plotting import PLOT_MIME
from attn_ref.serving import split_bounds, split_kv_attention
from tests.support.fixed_order import halving_sum
from tests.support.float32_attention_bounds import assert_within, float32_attention
from tests.support.reference import EPS32
from tests.support.shown import assert_printed, displayed, half_unit, sci_rtol, verdicts


def test_the_non_associative_sums_are_the_ieee_sums_in_their_order(tutorial, values):
    assert_printed(tutorial, [1.0, 2.0], gaps=True)  # ((1e8 + 1) - 1e8) + 1, (1e8 - 1e8) + (1 + 1)
    numbers = values["numbers"].numpy()
    exact = float(numbers.astype(np.float64).sum())
    assert values["exact"] == exact
    for parts, total in values["part_sums"].items():
        # each part summed in halves, then the parts added left to right, all in float32
        pieces = [halving_sum(piece) for piece in np.array_split(numbers, parts)]
        expected = pieces[0]
        for piece in pieces[1:]:
            expected = np.float32(expected + piece)
        assert total.item() == expected
        assert abs(total.item() - exact) <= 4096 * EPS32 * np.abs(numbers).sum()
        assert f": {total.item():.9f}," in tutorial.printed()


def test_every_split_count_is_attention_within_float32_rounding(tutorial, values):
    q, k, v = values["q1"], values["keys"], values["values"]
    reference = float32_attention(q.numpy(), k.numpy(), v.numpy())
    rows = []
    for n, out in values["split_outs"].items():
        assert_within(out.numpy(), reference.output, reference.output_error, f"{n} splits")
        unlike = int((out != values["split_outs"][1]).sum())
        gap = (out - values["split_outs"][1]).abs().max().item()
        error = (out.double() - values["exact_out"]).abs().max().item()
        rows.append([n, unlike, 64, gap, error])
    assert_printed(tutorial, rows, rtol=[0, 0, 0, sci_rtol(1), sci_rtol(1)])
    # the float64 reference the page printed its errors against is PyTorch's, in float64
    expected = F.scaled_dot_product_attention(q.double(), k.double(), v.double())
    torch.testing.assert_close(values["exact_out"], expected, rtol=1e-12, atol=1e-14)


def test_a_fixed_split_size_gives_the_row_the_same_bits_in_every_batch(tutorial, values):
    q, k, v, sees = values["q_row"], values["k_row"], values["v_row"], values["sees_row"]
    again = split_kv_attention(q, k, v, sees, split_size=16)  # computed now, in this process
    for batch in range(1, 9):
        assert torch.equal(values["fixed"][batch], again)
        splits = max(1, 8 // batch)
        assert torch.equal(values["counted"][batch], split_kv_attention(q, k, v, sees, num_splits=splits))
    reference = float32_attention(q.numpy(), k.numpy(), v.numpy(), allowed=sees.numpy())
    for out in (*values["counted"].values(), again):
        assert_within(out.numpy(), reference.output, reference.output_error, "the decoding row")


def test_boundaries_by_count_move_and_by_size_stay(tutorial):
    for n_keys in (1000, 1001):
        by_count = split_bounds(n_keys, num_splits=4)[1:-1]
        by_size = split_bounds(n_keys, split_size=256)[1:-1]
        assert_printed(tutorial, [n_keys, 4, *by_count, 256, *by_size])
    assert split_bounds(1001, num_splits=4)[3] == 751  # by hand: round(1001 * 3 / 4)


def test_chunked_prefill_keeps_its_bits_on_the_grid_and_with_keys_written_first(tutorial, values):
    q, k, v = values["q_p"], values["k_p"], values["v_p"]
    causal = torch.ones(48, 48, dtype=torch.bool).tril()
    one_pass = split_kv_attention(q, k, v, causal, split_size=16)
    assert torch.equal(values["one_pass"], one_pass)
    rows = []
    for chunk in (8, 12, 16, 24, 32):
        apart, written = values["chunk_rows"][chunk, True], values["chunk_rows"][chunk, False]
        assert written == 48  # by construction: one sequence of keys, one grid
        if chunk % 16 == 0:
            assert apart == 48  # every chunk starts on the grid
        else:
            # the first chunk is never cut; its queries keep their bits whatever the chunk size
            assert apart >= chunk
        rows.append([chunk, apart, 48, written, 48])
    assert_printed(tutorial, rows)
    assert {16, 32, 48} <= set(values["keep_all"])  # exercise 2: the chunk sizes on the grid
    assert_printed(tutorial, values["keep_all"])
    reference = float32_attention(q.numpy(), k.numpy(), v.numpy(), allowed=causal.numpy())
    assert_within(one_pass.numpy(), reference.output, reference.output_error, "one pass")


def test_fixed_order_linear_layers_never_change_a_rows_bits(tutorial, values):
    rows = []
    for N, (library, ours) in values["linear_unlike"].items():
        assert ours == 0  # by construction
        assert 0 <= library <= 128
        rows.append([N, library, ours])
    assert values["linear_unlike"][1] == (0, 0)  # the row alone is itself
    assert_printed(tutorial, rows)
    layer, fixed_layer, x = values["layer"], values["fixed_layer"], values["rows_in"]
    torch.testing.assert_close(fixed_layer(x), layer(x), rtol=0, atol=1e-5)  # the same layer


def test_tokens_flip_only_where_the_logits_moved_as_much_as_the_gap(tutorial, values):
    """Greedy decoding picks the largest logit. Up to its first flip, a request's two runs have fed the
    same tokens; at the flip the best two swap order, so the logits of the two runs must differ there by
    at least the gap between the alone run's best two (half of it on each)."""
    stream, batched = values["stream"], values["by_batch"]
    alone_tokens, alone_logits = values["by_batch_tokens"], values["by_batch_logits"]
    flipped = {}
    for i in range(len(stream)):
        differ = (batched.tokens[i] != alone_tokens[i]).nonzero().flatten()
        if len(differ):
            flipped[i] = int(differ[0])
    assert flipped == values["flipped"]
    assert_printed(tutorial, [len(flipped), len(stream)])
    for i, step in flipped.items():
        a, b = alone_logits[i][step].float(), batched.logits[i][step].float()
        first, second = a.topk(2).values
        moved = (a - b).abs().max().item()
        assert 2 * moved >= (first - second).item()
        assert values["gaps"][i][step].item() == (first - second).item()
        assert torch.equal(batched.tokens[i][:step], alone_tokens[i][:step])
    assert values["flip_gaps"].tolist() == [values["gaps"][i][s].item() for i, s in flipped.items()]
    if flipped:
        shown = [values["all_gaps"].median().item(), values["flip_gaps"].max().item()]
        assert_printed(tutorial, shown, atol=half_unit(3))
    # the fixed split: what it printed is what its runs hold
    same_logits = sum(torch.equal(values["fixed_run"].logits[i], values["fixed_logits"][i]) for i in range(8))
    same_tokens = sum(torch.equal(values["fixed_run"].tokens[i], values["fixed_tokens"][i]) for i in range(8))
    assert_printed(tutorial, [16, same_logits, 8, same_tokens, 8])


def test_the_exercise_serves_every_request_with_the_same_bits_in_every_batch(values):
    runs = values["runs"]
    assert values["identical"] is True  # by construction: fixed-order layers and a fixed split size
    for i in range(len(values["short"])):
        assert torch.equal(runs["together"][i], runs["alone"][i])
        assert torch.equal(runs["reversed"][i], runs["alone"][i])


def test_the_pitfalls_show_what_they_say(tutorial, values):
    counted = values["counted"]
    # 1. allclose passes whatever the bits: both outputs are within float32 rounding of attention
    assert torch.allclose(counted[2], counted[1])
    # 2. a fixed count changes a query's bits between the prompt's pass and its decoding; a size does not
    prompt, decoded = [], []
    q, k, v = values["q_p"], values["k_p"], values["v_p"]
    causal = torch.ones(48, 48, dtype=torch.bool).tril()
    for p in range(48):
        decoded.append(
            split_kv_attention(
                q[:, :, p : p + 1],
                k[:, :, : p + 1],
                v[:, :, : p + 1],
                causal[p : p + 1, : p + 1],
                split_size=16,
            )
        )
    prompt = split_kv_attention(q, k, v, causal, split_size=16)
    assert torch.equal(torch.cat(decoded, dim=2), prompt)
    assert_printed(tutorial, [16, 48, 48])
    # with 4 splits, only the first and the last query split their visible keys the same way in
    # the prompt's pass (over 48 keys) and alone (over their own): the others agree by luck alone
    alike = [
        p
        for p in range(48)
        if [b for b in split_bounds(48, num_splits=4) if b <= p] + [p + 1]
        == split_bounds(p + 1, num_splits=min(4, p + 1))
    ]
    assert alike == [0, 47]
    # 3. the same batch twice: deterministic, on any machine
    assert torch.equal(values["first_run"].logits[0], values["second_run"].logits[0])


def test_every_verdict_is_the_truth(tutorial, values):
    """The True/False the page prints, in order, recomputed from what it kept."""
    counted, fixed = values["counted"], values["fixed"]
    table = []
    for batch in range(1, 9):
        table += [torch.equal(counted[batch], counted[1]), torch.equal(fixed[batch], fixed[1])]
    pitfall = [
        torch.allclose(counted[2], counted[1]),
        torch.equal(counted[2], counted[1]),
        torch.equal(values["first_run"].logits[0], values["second_run"].logits[0]),
        torch.equal(values["first_run"].logits[0], values["by_batch_logits"][0]),
    ]
    exercise = [True, True, True, values["identical"]]  # exercise 1's three sizes, exercise 4
    assert verdicts(tutorial) == table + pitfall + exercise


def test_the_picture_draws_the_splits_and_their_outputs(tutorial, values):
    (first, *_) = displayed(tutorial, PLOT_MIME)
    q, k, v = values["q_pic"], values["k_pic"], values["v_pic"]
    sees = torch.ones(1, 40, dtype=torch.bool)
    expected = [split_kv_attention(q, k, v, sees, num_splits=n)[0, 0, 0, 0].item() for n in (4, 2, 1)]
    expected.append(split_kv_attention(q, k, v, sees, split_size=16)[0, 0, 0, 0].item())
    for value in expected:
        assert f"{value:.9f}" in first
    for label in (
        "1 request: 4 splits",
        "2 requests: 2 splits",
        "4 requests: 1 split",
        "any batch: splits of 16",
    ):
        assert label in first
    reference = float32_attention(q.numpy(), k.numpy(), v.numpy())
    assert_within(
        np.array(expected), reference.output[0, 0, 0, 0], reference.output_error[0, 0, 0, 0], "picture"
    )


def test_the_gelu_count_is_what_the_kept_values_give(tutorial, values):
    """Which path a vectorised kernel takes for a value is the machine's; the count is only checked
    against the kept tensors, and each path's GELU against float64."""
    x = values["gelu_in"]
    unlike = int((values["alone_gelu"] != values["together_gelu"].flatten()).sum())
    assert unlike == values["gelu_unlike"]
    assert_printed(tutorial, [unlike, 512])
    exact = F.gelu(x.double()).flatten()
    for y in (values["alone_gelu"], values["together_gelu"].flatten()):
        # erf is within a few roundings of the exact one, and GELU multiplies it by x / 2
        assert ((y.double() - exact).abs() <= 4 * EPS32 * (x.double().abs().flatten() + exact.abs())).all()
