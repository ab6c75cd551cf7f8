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
    H = values["H"]
    assert_printed_in_order(printed, [exact(n) for n in values["reached"] + [C]])
    assert values["reached"] == [C] * H


RANK_RTOL = 1e-5  # the snippet's cut-off: singular values below it, relative to the largest, are rounding


def test_each_head_writes_into_a_subspace_of_rank_d_k(values, printed):
    """A head's write is its (T, d_k) output times its (d_k, C) rows of W_O: of rank at most d_k in
    exact arithmetic. The snippet's float32 write lies within the product's rounding bound E of the
    exact product of the float32 tensors it kept, so its singular values lie within |E|_F of that
    product's (Weyl): far below the cut-off past the d_k-th, far above it up to the d_k-th."""
    H, C, d_k = values["H"], values["C"], values["d_k"]
    heads = as64(values["heads"])
    for h, (value, bound) in enumerate(head_writes(values, heads)):
        s = np.linalg.svd(value[0], compute_uv=False)
        assert s[d_k] <= 1e-12 * s[0]  # rank d_k, exactly but for float64 rounding
        error = np.linalg.norm(bound[0])
        assert error < 0.1 * RANK_RTOL * s[0], h
        assert s[d_k - 1] - error > 10 * RANK_RTOL * (s[0] + error), h
    assert values["ranks"] == [d_k] * H
    # All the heads together: the layer's output less its bias, exactly (float64 from the inputs),
    # spans all C directions; the snippet's float32 one lies within the reference's bound of it.
    state, T = state_of(values["mha"]), values["T"]
    out, out_bound = multi_head(held(values["x"]), state, H, causal(T), U32)["out"]
    summed = out[0] - state["out_proj.bias"]
    s = np.linalg.svd(summed, compute_uv=False)
    error = np.linalg.norm(out_bound[0]) + U32 * np.linalg.norm(summed)  # and the subtraction
    assert s[C - 1] - error > 10 * RANK_RTOL * (s[0] + error)
    kept = np.abs(as64(values["summed"])[0] - summed)
    assert (kept <= out_bound[0] + U32 * (np.abs(summed) + out_bound[0])).all()
    assert values["all_heads"] == C
    assert_printed_in_order(printed, [exact(n) for n in [*values["ranks"], d_k, C, C]])
