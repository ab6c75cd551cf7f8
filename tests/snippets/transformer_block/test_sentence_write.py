"""transformer_block/sentence_write.py: page 4's two hand-set heads on the sentence write into the
stream through their own rows of W_O; the writes add up to merged @ W_O, and she leaves attention
carrying alice and verb. Against the heads written out in float64 with float32's bounds."""

import numpy as np

from tests.support.printed import assert_shown, line_after, printed_flags
from tests.support.reference import U32, as64, causal
from tests.support.sentence import HEADS_W_K as W_K
from tests.support.sentence import HEADS_W_O as W_O
from tests.support.sentence import HEADS_W_Q as W_Q
from tests.support.sentence import HEADS_W_V as W_V
from tests.support.sentence import SHE, X
from tests.support.transformer_block_reference import add, attention, held, linear, split

H, d_k = 2, 3
FEATURES = ["name", "verb", "pronoun", "female", "alice", "bob"]


def reference():
    """The heads' outputs and each head's write, exactly, with their float32 rounding bounds. The
    projections of the sentence's small integers are exact in float32."""
    q, k, v = (split(held(X[None] @ W), H) for W in (W_Q, W_K, W_V))
    heads = attention(q, k, v, causal(len(X)), U32)["out"]
    writes = [
        linear((heads[0][:, h], heads[1][:, h]), W_O[h * d_k : (h + 1) * d_k].T, None, U32) for h in range(H)
    ]
    return heads, writes


def test_the_writes_and_the_stream(values):
    heads, writes = reference()
    assert (np.abs(as64(values["heads"]) - heads[0]) <= heads[1]).all()
    for kept, (value, bound) in zip(values["writes"], writes, strict=True):
        assert (np.abs(as64(kept) - value) <= bound).all()
    stream = add(add(held(X[None]), writes[0], U32), writes[1], U32)
    assert (np.abs(as64(values["stream"]) - stream[0]) <= stream[1]).all()


def test_she_leaves_attention_carrying_alice_and_verb(printed):
    _, writes = reference()
    after = X[SHE] + writes[0][0][0, SHE] + writes[1][0][0, SHE]
    bound = writes[0][1][0, SHE] + writes[1][1][0, SHE]
    col = {name: i for i, name in enumerate(FEATURES)}
    assert after[col["alice"]] - bound.max() > 0.8 and after[col["verb"]] - bound.max() > 0.85
    assert after[col["bob"]] + bound.max() < 0.1
    np.testing.assert_array_equal(after[[col["pronoun"], col["female"]]], [1.0, 1.0])  # kept
    assert_shown(line_after(printed, "she before:"), X[SHE], decimals=0)
    assert_shown(line_after(printed, "she after: "), after, decimals=2)
    assert printed_flags(printed) == [True]  # merged @ W_O is the sum of the writes
