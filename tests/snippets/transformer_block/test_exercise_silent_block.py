"""A block whose W_O and last MLP layer are zero: each write is 0 times finite numbers plus a zero
bias, exactly 0, and x + 0 is x exactly, so the block, and six of them, return x bit for bit."""

import torch

from tests.support.printed import printed_flags


def test_the_block_passes_the_stream_through(values, printed):
    block = values["block"]
    for last in (block.attn.out_proj, block.mlp[2]):
        assert not last.weight.any() and not last.bias.any()
    # Everything else is as drawn: the zeros are only where the writes leave the sublayers.
    for other in (block.attn.q_proj, block.attn.v_proj, block.mlp[0], block.norm1):
        assert other.weight.any()
    assert torch.equal(values["out"], values["x"]) and torch.equal(values["deep"], values["x"])
    assert printed_flags(printed) == [True, True]
