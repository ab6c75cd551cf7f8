"""W_O split into one block of rows per head: the layer's output is the sum of the heads' writes
(Elhage et al., 2021, "Attention Heads are Independent and Additive"), checked in float64 and on
the snippet's float32 tensors; every head's write reaches every feature of the stream."""

import numpy as np

from tests.support.printed import allclose_decided, assert_printed_in_order, exact, printed_flags
from tests.support.reference import U32, as64, causal
from tests.support.transformer_block_reference import add, held, linear, multi_head, state_of


def head_writes(values, heads) -> list:
    """Each head's output times its d_k rows of W_O (nn.Linear keeps W_O^T: its columns)."""
    W_O_T, d_k = as64(values["mha"].out_proj.weight), values["d_k"]
    return [
        linear(held(heads[:, h]), W_O_T[:, h * d_k : (h + 1) * d_k], None, U32) for h in range(values["H"])
    ]


def test_the_layer_and_its_heads_are_the_formula(values):
    state, H, T = state_of(values["mha"]), values["H"], values["T"]
    reference = multi_head(held(values["x"]), state, H, causal(T), U32)
    for name, key in (("out", "out"), ("heads", "heads"), ("concat", "concat")):
        value, bound = reference[key]
        assert (np.abs(as64(values[name]) - value) <= bound).all(), name
    # In exact arithmetic, the output is the heads' writes summed, plus the bias.
    exact_writes = head_writes(values, reference["heads"][0])
    total = sum(w for w, _ in exact_writes) + state["out_proj.bias"]
    np.testing.assert_allclose(total, reference["out"][0], rtol=0, atol=1e-12)


def test_the_snippets_writes_and_their_sum(values, printed):
    heads = as64(values["heads"])
    writes = head_writes(values, heads)
    for kept, (value, bound) in zip(values["writes"], writes, strict=True):
        assert (np.abs(as64(kept) - value) <= bound).all()
    # sum(writes) + bias: H additions (sum() starts from 0), each rounded.
    summed = (np.zeros_like(writes[0][0]), np.zeros_like(writes[0][0]))
    for kept in values["writes"]:
        summed = add(summed, held(kept), U32)
    value, bound = add(summed, held(values["bias"]), U32)
    assert (np.abs(as64(values["total"]) - value) <= bound).all()
    (same,) = printed_flags(printed)
    assert allclose_decided(as64(values["out"]), as64(values["total"]), atol=1e-6) in (None, same)
    # Every head's write is non-zero, beyond rounding, in every feature at some token.
    C = values["C"]
    for (value, bound), reached in zip(writes, values["reached"], strict=True):
        assert (np.abs(value) > bound).any(axis=1)[0].sum() == C == reached
    B, T, d_k, H = 1, values["T"], values["d_k"], values["H"]
    shapes = [B, T, d_k, B, T, C, C, C, d_k]
    assert_printed_in_order(printed, [exact(n) for n in shapes + values["reached"] + [C]])
    assert values["reached"] == [C] * H
