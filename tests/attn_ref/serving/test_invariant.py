"""attn_ref.serving.invariant: fixed-order sums, attention split at fixed boundaries, a decoder whose
every row is computed in a fixed order, and `serve` with them.

Two kinds of claim. Correctness: each function computes what it should, against float64 references
written here (NumPy, and PyTorch's attention in float64) with bounds derived from float32 rounding
(tests/support/float32_attention_bounds.py). Invariance: a row's bits do not depend on the other rows,
the batch, the chunking or the padding; these are checked with torch.equal, and hold by construction
(elementwise IEEE operations, exponentials on tensors shaped by the row alone) under every kernel and
thread count, which CI's two passes exercise (native, then ATEN_CPU_CAPABILITY=default on one thread).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attn_ref.decoder import TinyDecoder
from attn_ref.serving import (
    FixedOrderLayerNorm,
    FixedOrderLinear,
    PagedKVCache,
    Request,
    RowwiseGELU,
    batch_invariant,
    fixed_order_sum,
    run_decoder,
    serve,
    split_bounds,
    split_kv_attention,
)
from tests.support.fixed_order import halving_sum
from tests.support.float32_attention_bounds import assert_within, float32_attention
from tests.support.reference import EPS32

SOME = settings(max_examples=20, deadline=None)
FEW = settings(max_examples=4, deadline=None)


@SOME
@given(n=st.integers(1, 70), seed=st.integers(0, 10_000))
def test_fixed_order_sum_adds_in_halves_bit_for_bit(n, seed):
    x = torch.randn(n, generator=torch.Generator().manual_seed(seed)) * 10 ** (seed % 7)
    ours = fixed_order_sum(x)
    assert ours.dtype == torch.float32
    assert ours.item() == halving_sum(x.numpy())  # the same IEEE additions in the same order
    # ... and within float32 rounding of the exact sum
    exact = x.double().sum().item()
    assert abs(ours.item() - exact) <= n * EPS32 * x.double().abs().sum().item()


@SOME
@given(n=st.integers(1, 40), pad=st.integers(1, 40), rows=st.integers(1, 6), seed=st.integers(0, 10_000))
def test_fixed_order_sum_ignores_trailing_zeros_and_other_rows(n, pad, rows, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, n, generator=g)
    alone = fixed_order_sum(x[:1])
    assert torch.equal(fixed_order_sum(torch.cat([x, torch.zeros(rows, pad)], dim=1))[:1], alone)
    assert torch.equal(fixed_order_sum(x)[:1], alone)  # rows beside it change nothing
    assert torch.equal(fixed_order_sum(x.T.contiguous(), dim=0)[:1], alone)  # nor the layout


def test_fixed_order_sum_differs_from_left_to_right_where_rounding_bites():
    x = torch.tensor([1e8, 1.0, -1e8, 1.0])
    assert fixed_order_sum(x).item() == 2.0  # (1e8 - 1e8) + (1 + 1)
    assert (((x[0] + x[1]) + x[2]) + x[3]).item() == 1.0
    assert fixed_order_sum(torch.zeros(0)).item() == 0.0


def test_split_bounds_by_hand():
    assert split_bounds(1000, split_size=256) == [0, 256, 512, 768, 1000]
    assert split_bounds(1000, num_splits=4) == [0, 250, 500, 750, 1000]
    assert split_bounds(1001, split_size=256)[:-1] == split_bounds(1000, split_size=256)[:-1]
    assert split_bounds(5, split_size=16) == [0, 5]
    assert split_bounds(5, num_splits=5) == [0, 1, 2, 3, 4, 5]


@st.composite
def split_attention_cases(draw):
    B, L, S = draw(st.integers(1, 2)), draw(st.integers(1, 6)), draw(st.integers(1, 70))
    H_kv = draw(st.sampled_from([1, 2]))
    H = H_kv * draw(st.sampled_from([1, 2]))
    d_k, d_v = draw(st.sampled_from([1, 4, 8])), draw(st.sampled_from([1, 5]))
    seed = draw(st.integers(0, 10_000))
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, L, d_k, generator=g) * draw(st.sampled_from([0.5, 3.0]))
    k = torch.randn(B, H_kv, S, d_k, generator=g)
    v = torch.randn(B, H_kv, S, d_v, generator=g)
    allowed = torch.rand(L, S, generator=g) < draw(st.sampled_from([0.3, 1.0]))
    if draw(st.booleans()):
        allowed[0] = False  # a query that sees nothing
    if draw(st.booleans()):
        split = {"split_size": draw(st.integers(1, 20))}
    else:
        split = {"num_splits": draw(st.integers(1, S))}
    cuts = tuple(draw(st.sets(st.integers(1, S - 1), max_size=3))) if S > 1 else ()
    return q, k, v, allowed, split, cuts


@SOME
@given(case=split_attention_cases())
def test_split_kv_attention_is_attention_within_float32_rounding(case):
    q, k, v, allowed, split, cuts = case
    out = split_kv_attention(q, k, v, allowed, cuts=cuts, **split)
    H = q.shape[1]
    k_full, v_full = (x.repeat_interleave(H // x.shape[1], dim=1) for x in (k, v))
    reference = float32_attention(q.numpy(), k_full.numpy(), v_full.numpy(), allowed=allowed.numpy())
    assert_within(out.numpy(), reference.output, reference.output_error, "split_kv_attention")
    # and in float64, to float64 rounding, against PyTorch's own attention (a query with no key: 0)
    out64 = split_kv_attention(q.double(), k.double(), v.double(), allowed, cuts=cuts, **split)
    sdpa = F.scaled_dot_product_attention(q.double(), k_full.double(), v_full.double(), attn_mask=allowed)
    expected = torch.where(allowed.any(-1)[:, None], sdpa, 0.0)
    torch.testing.assert_close(out64, expected, rtol=1e-10, atol=1e-12)


@FEW
@given(
    S=st.integers(1, 90),
    extra=st.integers(0, 40),
    others=st.integers(0, 3),
    size=st.sampled_from([1, 3, 8, 16]),
    seed=st.integers(0, 10_000),
)
def test_a_causal_row_with_a_fixed_split_size_has_the_same_bits_in_any_batch(S, extra, others, size, seed):
    """The query at position S-1: alone over its S keys (decoding), beside other queries of its
    prompt, in a batch with other sequences, and with keys after it that it may not see (a chunk)."""
    g = torch.Generator().manual_seed(seed)
    total = S + extra
    q = torch.randn(others + 1, 2, total, 8, generator=g)  # sequence 0 is ours; the rest are others
    k = torch.randn(others + 1, 1, total, 8, generator=g)
    v = torch.randn(others + 1, 1, total, 8, generator=g)
    causal = torch.ones(total, total, dtype=torch.bool).tril()
    p = S - 1
    decoding = split_kv_attention(
        q[:1, :, p : p + 1], k[:1, :, :S], v[:1, :, :S], causal[p : p + 1, :S], split_size=size
    )
    in_chunk = split_kv_attention(q, k, v, causal, split_size=size)[:1, :, p : p + 1]
    assert torch.equal(decoding, in_chunk)
    if 1 < size < S:  # a boundary that moves: a count from the sequence length, not a size
        counted = split_kv_attention(q[:1], k[:1], v[:1], causal, num_splits=2)[:, :, p : p + 1]
        assert torch.allclose(counted, decoding, atol=1e-5)  # the same attention, other bits allowed


def test_a_chunk_cut_off_the_grid_changes_only_the_order_not_the_result():
    """Cuts add boundaries; on the grid they change no bit, off it they change the order only."""
    g = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(3, 1, 2, 48, 8, generator=g)
    causal = torch.ones(48, 48, dtype=torch.bool).tril()
    one_grid = split_kv_attention(q, k, v, causal, split_size=16)
    assert torch.equal(split_kv_attention(q, k, v, causal, split_size=16, cuts=(16, 32)), one_grid)
    off_grid = split_kv_attention(q, k, v, causal, split_size=16, cuts=(8, 24, 40))
    reference = float32_attention(q.numpy(), k.numpy(), v.numpy(), allowed=causal.numpy())
    assert_within(off_grid.numpy(), reference.output, reference.output_error, "cut off the grid")


def test_bfloat16_inputs_give_bfloat16_within_bfloat16_rounding():
    """bfloat16 inputs: each split's output is stored in bfloat16 before the merge, and the merged
    output too. Each storing is off by at most 2^-8 of its size (bfloat16 keeps 8 bits), the merge is a
    convex combination, so the output is within 2 * 2^-8 max|v| of float64 attention on the same
    inputs, plus float32's rounding (far below)."""
    g = torch.Generator().manual_seed(1)
    q = torch.randn(1, 2, 3, 16, generator=g).bfloat16()
    k, v = torch.randn(2, 1, 2, 64, 16, generator=g).bfloat16()
    causal = torch.ones(64, 64, dtype=torch.bool).tril()[-3:]
    for split in ({"num_splits": 1}, {"num_splits": 5}, {"split_size": 16}):
        out = split_kv_attention(q, k, v, causal, **split)
        assert out.dtype == torch.bfloat16
        exact = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=causal)
        bound = 2 * 2.0**-8 * v.double().abs().max() + 1e-4
        assert (out.double() - exact).abs().max() <= bound


def test_split_kv_attention_refuses_bad_input():
    q, k, v = torch.zeros(1, 2, 3, 4), torch.zeros(1, 1, 5, 4), torch.zeros(1, 1, 5, 4)
    sees = torch.ones(3, 5, dtype=torch.bool)
    cases = [
        (lambda: split_kv_attention(q[0], k, v, sees, split_size=2), "query has shape"),
        (lambda: split_kv_attention(q, k[..., :3], v, sees, split_size=2), r"key has shape \(1, 1, 5, 3\)"),
        (lambda: split_kv_attention(q, k, v[:, :, :4], sees, split_size=2), "value has shape"),
        (lambda: split_kv_attention(q, k, v, sees[:, :4], split_size=2), r"allowed has shape \(3, 4\)"),
        (lambda: split_kv_attention(q, k, v, sees, split_size=2, num_splits=2), "exactly one"),
        (lambda: split_kv_attention(q, k, v, sees), "exactly one"),
        (lambda: split_kv_attention(q, k, v, sees, num_splits=6), "num_splits must be an int in"),
        (lambda: split_kv_attention(q, k, v, sees, split_size=2, cuts=(5,)), r"cuts must lie in \(0, S\)"),
        (lambda: split_bounds(0, split_size=2), "num_keys"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()
    with pytest.raises(TypeError, match="allowed"):
        split_kv_attention(q, k, v, sees.float(), split_size=2)


def test_fixed_order_layers_compute_the_modules_they_replace_in_float64():
    torch.manual_seed(0)
    x = torch.randn(7, 12, dtype=torch.float64)
    linear, norm = nn.Linear(12, 5).double(), nn.LayerNorm(12).double()
    torch.testing.assert_close(FixedOrderLinear(linear)(x), linear(x), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(FixedOrderLayerNorm(norm)(x), norm(x), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(RowwiseGELU()(x), F.gelu(x), rtol=1e-15, atol=0)
    no_bias = nn.Linear(12, 3, bias=False).double()
    torch.testing.assert_close(FixedOrderLinear(no_bias)(x), no_bias(x), rtol=1e-12, atol=1e-12)


@FEW
@given(rows=st.integers(2, 40), seed=st.integers(0, 10_000))
def test_fixed_order_layers_give_a_row_the_same_bits_in_any_batch(rows, seed):
    torch.manual_seed(seed)
    x = torch.randn(rows, 32)
    for layer in (FixedOrderLinear(nn.Linear(32, 96)), FixedOrderLayerNorm(nn.LayerNorm(32)), RowwiseGELU()):
        assert torch.equal(layer(x)[-1:], layer(x[-1:]))
        assert torch.equal(layer(x[None])[0, -1:], layer(x[-1:]))
    # rows of 1 and of 37 values: computed over every row at once, a row's values could take another
    # code path than alone (PyTorch computes a single value apart from a vectorised run); row by row
    # they cannot
    for width in (1, 37):
        odd = torch.randn(rows, width)
        assert torch.equal(RowwiseGELU()(odd)[-1:], RowwiseGELU()(odd[-1:]))


def test_batch_invariant_copies_the_model_and_keeps_its_function():
    torch.manual_seed(0)
    model = TinyDecoder(vocab_size=11, context_length=16, embed_dim=16, num_layers=2, num_heads=4).double()
    copy = batch_invariant(model)
    kinds = {type(m) for m in copy.modules()}
    assert {FixedOrderLinear, FixedOrderLayerNorm, RowwiseGELU} <= kinds
    assert not kinds & {nn.Linear, nn.LayerNorm, nn.GELU}
    assert nn.Linear in {type(m) for m in model.modules()}  # the original is left as it was
    tokens = torch.randint(0, 11, (2, 9))
    torch.testing.assert_close(copy(tokens), model(tokens), rtol=1e-10, atol=1e-10)
    with pytest.raises(TypeError, match=r"model must be a torch\.nn\.Module"):
        batch_invariant("model")
    with pytest.raises(ValueError, match="only the exact GELU"):
        batch_invariant(nn.Sequential(nn.GELU(approximate="tanh")))


def packed_logits(model, sequences):
    """Logits of several token sequences packed into one forward pass of run_decoder, each
    attending causally to its own tokens with splits of 16."""
    tokens = torch.cat([torch.tensor(s) for s in sequences])[None]  # (1, N)
    positions = torch.cat([torch.arange(len(s)) for s in sequences])[None]
    lengths = [len(s) for s in sequences]

    def attend(layer, q, k, v):
        outs, start = [], 0
        for n in lengths:
            rows = slice(start, start + n)
            causal = torch.ones(n, n, dtype=torch.bool).tril()
            outs.append(
                split_kv_attention(q[:, :, rows], k[:, :, rows], v[:, :, rows], causal, split_size=16)
            )
            start += n
        return torch.cat(outs, dim=2)

    out = run_decoder(model, tokens, positions, attend)[0]
    return torch.split(out, lengths)


@FEW
@given(others=st.lists(st.integers(1, 12), min_size=1, max_size=3), seed=st.integers(0, 10_000))
def test_a_batch_invariant_decoder_gives_a_sequence_the_same_bits_beside_any_others(others, seed):
    torch.manual_seed(seed)
    model = batch_invariant(
        TinyDecoder(vocab_size=20, context_length=40, embed_dim=16, num_layers=2, num_heads=4)
    )
    g = torch.Generator().manual_seed(seed)
    ours = torch.randint(0, 20, (18,), generator=g).tolist()
    crowd = [torch.randint(0, 20, (n,), generator=g).tolist() for n in others]
    (alone,) = packed_logits(model, [ours])
    assert torch.equal(packed_logits(model, [*crowd, ours])[-1], alone)
    assert torch.equal(packed_logits(model, [ours, *crowd])[0], alone)


def stream_of(seed, n=3, new=6):
    g = torch.Generator().manual_seed(seed)
    return [
        Request(
            tuple(torch.randint(0, 20, (int(torch.randint(3, 14, (), generator=g)),), generator=g).tolist()),
            new,
            arrival=2 * i,
        )
        for i in range(n)
    ]


def pool(model, blocks=64, dtype=torch.float32):
    attn = model.blocks[0].attn
    return PagedKVCache(model.num_layers, blocks, 4, attn.num_kv_heads, attn.head_dim, dtype=dtype)


@pytest.mark.parametrize(("seed", "dtype"), [(0, torch.float32), (1, torch.float32), (2, torch.bfloat16)])
def test_serve_batch_invariant_gives_every_request_the_same_logits_in_any_batch(seed, dtype):
    """The exercise of the batch-invariance page: the batch-invariant copy of the model and a fixed
    split size give each request the same logits, bit for bit, served together (chunks of 16), alone,
    and in reverse order of arrival with chunks of 5."""
    torch.manual_seed(seed)
    model = TinyDecoder(
        vocab_size=20, context_length=32, embed_dim=16, num_layers=2, num_heads=4, num_kv_heads=2
    )
    engine = batch_invariant(model.to(dtype))
    stream = stream_of(seed)
    reverse = [
        Request(r.prompt, r.max_new_tokens, arrival=2 * (len(stream) - 1 - i)) for i, r in enumerate(stream)
    ]
    together = serve(engine, stream, pool(model, dtype=dtype), chunk_size=16, split_size=4)
    backwards = serve(engine, reverse, pool(model, dtype=dtype), chunk_size=5, split_size=4)
    for i, r in enumerate(stream):
        alone = serve(engine, [r], pool(model, dtype=dtype), split_size=4)
        assert torch.equal(together.logits[i], alone.logits[0])
        assert torch.equal(backwards.logits[i], alone.logits[0])
        assert torch.equal(together.tokens[i], alone.tokens[0])


def test_serve_with_splits_computes_the_same_tokens_as_without():
    """Split attention is attention: with a float32 model far from ties, serve's tokens with splits of any
    kind are those of one-pass attention, and the logits agree to float32 rounding."""
    torch.manual_seed(3)
    model = TinyDecoder(vocab_size=20, context_length=32, embed_dim=16, num_layers=2, num_heads=4)
    stream = stream_of(3, new=4)
    plain = serve(model, stream, pool(model), chunk_size=7)
    for split in ({"split_size": 4}, {"num_splits": 3}, {"num_splits": lambda batch: max(1, 4 // batch)}):
        run = serve(model, stream, pool(model), chunk_size=7, **split)
        for i in range(len(stream)):
            torch.testing.assert_close(run.logits[i], plain.logits[i], rtol=0, atol=1e-5)


def test_invariance_holds_when_pytorch_splits_the_work_across_threads():
    """Tensors large enough for PyTorch to share an elementwise operation among threads (more than its
    32,768-element grain): the bits of a row still do not depend on the rows beside it."""
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        torch.manual_seed(0)
        layer = FixedOrderLinear(nn.Linear(64, 256))
        x = torch.randn(40, 64)  # 40 * 256 * 64 products
        assert torch.equal(layer(x)[-1:], layer(x[-1:]))
        g = torch.Generator().manual_seed(1)
        q = torch.randn(3, 4, 1, 64, generator=g)
        k, v = torch.randn(2, 3, 4, 3000, 64, generator=g)
        sees = torch.ones(1, 3000, dtype=torch.bool)
        batch = split_kv_attention(q, k, v, sees, split_size=16)  # (4, 188, 16, 64) per row
        assert torch.equal(batch[1:2], split_kv_attention(q[1:2], k[1:2], v[1:2], sees, split_size=16))
    finally:
        torch.set_num_threads(previous)


def test_serve_refuses_two_ways_to_split():
    torch.manual_seed(0)
    model = TinyDecoder(vocab_size=20, context_length=48, embed_dim=16, num_layers=1, num_heads=4)
    stream = stream_of(0, n=1)
    with pytest.raises(ValueError, match="at most one of split_size and num_splits"):
        serve(model, stream, pool(model), split_size=4, num_splits=2)
    with pytest.raises(ValueError, match="split_size must be an int"):
        serve(model, stream, pool(model), split_size=0)
    with pytest.raises(ValueError, match=r"num_splits\(batch size\) must be an int"):
        serve(model, stream, pool(model), num_splits=lambda batch: 0)
