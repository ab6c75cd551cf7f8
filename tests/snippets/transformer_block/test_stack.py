"""Two blocks of a TinyDecoder, written out: every write checked from the stream it read (kept by the
snippet), the stream as the embedding plus every write (Elhage et al., 2021: "the sum of the output
of all the previous layers and the original embedding"), and what block 1 reads from block 0."""

import copy

import numpy as np
import torch

from tests.support.printed import allclose_decided, assert_printed_in_order, decimals, printed_flags
from tests.support.reference import U32, U64, as64, causal
from tests.support.transformer_block_reference import (
    add,
    allclose_guaranteed,
    allclose_refuted,
    held,
    layer_norm,
    linear,
    mlp,
    multi_head,
    pre_norm_block,
    state_of,
)


def block_state(state: dict, layer: int) -> dict:
    prefix = f"blocks.{layer}."
    return {k.removeprefix(prefix): v for k, v in state.items() if k.startswith(prefix)}


def attention_of(values, layer: int, stream) -> dict:
    state = block_state(state_of(values["model"]), layer)
    h = layer_norm(held(stream), state["norm1.weight"], state["norm1.bias"], U32)
    return multi_head(h, state, values["model"].blocks[0].attn.num_heads, causal(values["T"]), U32, "attn.")


def test_every_write_from_the_stream_it_read(values):
    state, tokens, T = state_of(values["model"]), values["tokens"].numpy(), values["T"]
    embedding = add(
        held(state["token_embedding.weight"][tokens]), held(state["position_embedding.weight"][:T]), U32
    )
    streams, writes = values["streams"], list(values["writes"].values())
    assert (np.abs(as64(streams[0]) - embedding[0]) <= embedding[1]).all()
    assert len(streams) == len(writes) + 1 == 5
    for i, (kept, write) in enumerate(zip(streams[:-1], writes, strict=True)):
        layer, sublayer = divmod(i, 2)
        if sublayer == 0:
            reference = attention_of(values, layer, kept)
            value, bound = reference["out"]
            w, dw = reference["weights"]
            assert (np.abs(as64(values["weights"][layer]) - w) <= dw).all(), layer
        else:
            s = block_state(state, layer)
            h = layer_norm(held(kept), s["norm2.weight"], s["norm2.bias"], U32)
            value, bound = mlp(h, s, U32)["out"]
        assert (np.abs(as64(write) - value) <= bound).all(), i
        value, bound = add(held(kept), held(write), U32)
        assert (np.abs(as64(streams[i + 1]) - value) <= bound).all(), i


def test_logits_and_the_models_own_forward(values, printed):
    state = state_of(values["model"])
    h = layer_norm(held(values["x"]), state["norm.weight"], state["norm.bias"], U32)
    value, bound = linear(h, state["head.weight"], None, U32)
    assert (np.abs(as64(values["logits"]) - value) <= bound).all()
    # forward() is the same formula (embedding, two pre-norm blocks, norm, head): checked in float64,
    # on a float64 copy of the model, where a bound carried through every step stays small.
    model = copy.deepcopy(values["model"]).double()
    state, T = state_of(model), values["T"]
    with torch.no_grad():
        from_model = as64(model(values["tokens"]))
    x = add(
        held(state["token_embedding.weight"][values["tokens"].numpy()]),
        held(state["position_embedding.weight"][:T]),
        U64,
    )
    for layer in range(model.num_layers):
        x = pre_norm_block(x, block_state(state, layer), model.blocks[layer].attn.num_heads, causal(T), U64)[
            "out"
        ]
    h = layer_norm(x, state["norm.weight"], state["norm.bias"], U64)
    model_value, model_bound = linear(h, state["head.weight"], None, U64)
    assert (np.abs(from_model - model_value) <= 2 * model_bound).all()  # 2: the reference rounds too
    same = printed_flags(printed)[0]
    assert allclose_decided(as64(values["logits"]), as64(values["from_model"]), atol=1e-6) in (
        None,
        same,
    )


def test_the_stream_is_the_embedding_plus_every_write(values, printed):
    """The loop adds the writes one by one; the check adds them up first, then to the embedding.
    Five terms summed in two orders: each within 4 u of their sizes' sum from the exact sum."""
    terms = [as64(values["embedding"])] + [as64(w) for w in values["writes"].values()]
    exact_sum = sum(terms)
    apart = 2 * 1.01 * 4 * U32 * sum(np.abs(t) for t in terms)
    for name in ("x", "total"):
        assert (np.abs(as64(values[name]) - exact_sum) <= apart / 2).all(), name
    _, same = printed_flags(printed)
    if allclose_guaranteed(apart, exact_sum, apart / 2, atol=1e-6):
        assert same
    assert allclose_decided(as64(values["x"]), as64(values["total"]), atol=1e-6) in (None, same)


def test_block_1_reads_what_block_0_wrote(values, printed):
    w1, dw1 = attention_of(values, 1, values["streams"][2])["weights"]
    w0, dw0 = attention_of(values, 1, values["embedding"])["weights"]
    assert (np.abs(as64(values["weights_unwritten"]) - w0) <= dw0).all()
    # The weights differ beyond rounding: block 1 attends otherwise without block 0's writes.
    assert allclose_refuted((w1, dw1), (w0, dw0), atol=1e-3, rtol=0)
    gap = np.abs(w1 - w0).max()
    assert abs(values["gap"] - gap) <= (dw1 + dw0).max() + U32
    assert_printed_in_order(printed, [decimals(values["gap"], 2)])
