"""Input data of the site's worked examples, kept in one place.

Pages, tutorials, snippets and doctests all read their inputs from here, so
that a number shown on one page cannot drift from the same number elsewhere.
The data are plain nested lists: pass them to ``torch.tensor`` or
``numpy.array`` as the page needs. It ships in the wheel because the tutorials'
downloaded notebooks (and the examples in ``attn_ref``'s docstrings) import it.

Examples:
    The A·V worked example: each output row mixes the rows of ``AV_VALUES``
    with the weights in the same row of ``AV_WEIGHTS``.

    >>> import torch
    >>> torch.tensor(AV_WEIGHTS) @ torch.tensor(AV_VALUES)
    tensor([[0.6200, 0.7200, 0.8200, 0.9200],
            [0.5000, 0.6000, 0.7000, 0.8000],
            [0.5400, 0.6400, 0.7400, 0.8400]])

    The running example of the core path: the hand-set head makes *she* find
    *Alice* and take her identity, and *met* split its weight between the
    two names.

    >>> X = torch.tensor(SENTENCE)  # (T, C) = (4, 6)
    >>> Q, K, V = (X @ torch.tensor(W) for W in (
    ...     SENTENCE_W_Q, SENTENCE_W_K, SENTENCE_W_V))
    >>> weights = torch.softmax(Q @ K.T / 2**0.5, dim=-1)  # (T, T)
    >>> weights[3]  # she: Alice, met, Bob, she
    tensor([0.8915, 0.0031, 0.0527, 0.0527])
    >>> (weights @ V)[3]  # she's output: "is Alice", "is Bob"
    tensor([0.8915, 0.0527])
    >>> weights[1]  # met
    tensor([0.4721, 0.0279, 0.4721, 0.0279])

    Head 0 of the two heads is that head, with a third feature of zeros:

    >>> heads = [torch.tensor(W) for W in (
    ...     SENTENCE_HEADS_W_Q, SENTENCE_HEADS_W_K, SENTENCE_HEADS_W_V)]
    >>> ones = [torch.tensor(W) for W in (
    ...     SENTENCE_W_Q, SENTENCE_W_K, SENTENCE_W_V)]
    >>> all(torch.equal(W[:, :2], w) for W, w in zip(heads, ones))
    True
    >>> all(not W[:, 2].any() for W in heads)
    True
"""

from __future__ import annotations

__all__ = [
    "AV_VALUES",
    "AV_WEIGHTS",
    "BATCH_SEED",
    "BATCH_SHAPE",
    "HEAD_SIZE",
    "LINEAR_SEED",
    "LINEAR_SHAPE",
    "LINEAR_WEIGHT",
    "LINEAR_X",
    "LOOKUP_KEYS",
    "LOOKUP_QUERY",
    "LOOKUP_VALUES",
    "SENTENCE",
    "SENTENCE_FEATURES",
    "SENTENCE_HEADS_W_K",
    "SENTENCE_HEADS_W_O",
    "SENTENCE_HEADS_W_Q",
    "SENTENCE_HEADS_W_V",
    "SENTENCE_TOKENS",
    "SENTENCE_W_K",
    "SENTENCE_W_Q",
    "SENTENCE_W_V",
    "TEN_TOKENS",
    "THREE_TOKENS",
]

#: Three tokens with four features each: ``(seq_len=3, d_model=4)``.
THREE_TOKENS: list[list[float]] = [
    [1.0, 0.0, 1.0, 0.0],
    [0.0, 2.0, 0.0, 2.0],
    [1.0, 1.0, 1.0, 1.0],
]

#: A hand-picked ``(3, 3)`` attention-weight matrix (rows sum to one) ...
AV_WEIGHTS: list[list[float]] = [
    [0.2, 0.3, 0.5],
    [0.1, 0.8, 0.1],
    [0.4, 0.1, 0.5],
]

#: ... and the ``(3, 4)`` values it mixes, for the A·V worked example.
AV_VALUES: list[list[float]] = [
    [0.1, 0.2, 0.3, 0.4],
    [0.5, 0.6, 0.7, 0.8],
    [0.9, 1.0, 1.1, 1.2],
]

#: The sentence "Alice met Bob she" as hand-made features, one column per name in ``SENTENCE_FEATURES``:
#: ``(seq_len=4, d_model=6)``. Hand-made so that what each projection picks out can be read off.
SENTENCE: list[list[float]] = [
    [1.0, 0.0, 0.0, 1.0, 1.0, 0.0],  # Alice: a name, female, alice
    [0.0, 1.0, 0.0, 0.0, 0.0, 0.0],  # met: a verb
    [1.0, 0.0, 0.0, 0.0, 0.0, 1.0],  # Bob: a name, bob
    [0.0, 0.0, 1.0, 1.0, 0.0, 0.0],  # she: a pronoun, female
]

#: The tokens of ``SENTENCE``, one per row.
SENTENCE_TOKENS: list[str] = ["Alice", "met", "Bob", "she"]

#: What each column of ``SENTENCE`` means.
SENTENCE_FEATURES: list[str] = ["name", "verb", "pronoun", "female", "alice", "bob"]

# One head for the sentence, set by hand so that each projection does one visible job (the core
# path's pages 1 to 3). Rows are the features of SENTENCE_FEATURES, columns the head's d_k = 2
# features: for a key, "is a name" and "is female"; for a value, "is Alice" and "is Bob".

#: ``W_Q``, ``(C, d_k) = (6, 2)``: a pronoun asks for a female name, a verb for any name.
SENTENCE_W_Q: list[list[float]] = [
    [0.0, 0.0],  # name
    [4.0, 0.0],  # verb: asks "a name?"
    [4.0, 4.0],  # pronoun: asks "a name? female?"
    [0.0, 0.0],  # female
    [0.0, 0.0],  # alice
    [0.0, 0.0],  # bob
]

#: ``W_K``, ``(6, 2)``: a token is found as a name, and as female.
SENTENCE_W_K: list[list[float]] = [
    [1.0, 0.0],  # name
    [0.0, 0.0],
    [0.0, 0.0],
    [0.0, 1.0],  # female
    [0.0, 0.0],
    [0.0, 0.0],
]

#: ``W_V``, ``(6, 2)``: a token passes on who it is, Alice or Bob.
SENTENCE_W_V: list[list[float]] = [
    [0.0, 0.0],
    [0.0, 0.0],
    [0.0, 0.0],
    [0.0, 0.0],
    [1.0, 0.0],  # alice
    [0.0, 1.0],  # bob
]

# Two heads for the sentence (page 4), side by side in (C, C) = (6, 6) matrices: head h owns
# columns 3h to 3h + 2 (d_k = 3). Head 0 is the head above, with a third column of zeros; head 1
# lets a name or a pronoun look for the verb, and passes the verb on.

#: ``W_Q`` of both heads, ``(6, 6)``.
SENTENCE_HEADS_W_Q: list[list[float]] = [
    [0.0, 0.0, 0.0, 6.0, 0.0, 0.0],  # name: head 1 asks "the verb?"
    [4.0, 0.0, 0.0, 0.0, 0.0, 0.0],  # verb: head 0 asks "a name?"
    [4.0, 4.0, 0.0, 6.0, 0.0, 0.0],  # pronoun: both
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
]

#: ``W_K`` of both heads, ``(6, 6)``.
SENTENCE_HEADS_W_K: list[list[float]] = [
    [1.0, 0.0, 0.0, 0.0, 0.0, 0.0],  # name
    [0.0, 0.0, 0.0, 1.0, 0.0, 0.0],  # verb, for head 1
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 1.0, 0.0, 0.0, 0.0, 0.0],  # female
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
]

#: ``W_V`` of both heads, ``(6, 6)``.
SENTENCE_HEADS_W_V: list[list[float]] = [
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 1.0, 0.0, 0.0],  # verb, for head 1
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [1.0, 0.0, 0.0, 0.0, 0.0, 0.0],  # alice
    [0.0, 1.0, 0.0, 0.0, 0.0, 0.0],  # bob
]

#: ``W_O``, ``(6, 6)``: row i is feature i of the heads side by side, column j a feature of
#: SENTENCE_FEATURES. It writes head 0's "Alice" and "Bob" and head 1's "verb" back as the
#: sentence's own features, so the output reads as they do.
SENTENCE_HEADS_W_O: list[list[float]] = [
    [0.0, 0.0, 0.0, 0.0, 1.0, 0.0],  # head 0, "is Alice" -> alice
    [0.0, 0.0, 0.0, 0.0, 0.0, 1.0],  # head 0, "is Bob" -> bob
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 1.0, 0.0, 0.0, 0.0, 0.0],  # head 1, "the verb" -> verb
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
]

#: Batch, time and channels of the causal self-attention tutorial, ``(B, T, C)``.
BATCH_SHAPE: tuple[int, int, int] = (4, 8, 32)

#: Seed of that tutorial's random input and projections.
BATCH_SEED: int = 1337

#: Size of that tutorial's single attention head.
HEAD_SIZE: int = 16

#: Ten positional-encoded tokens with ten features each: ``(seq_len=10, d_model=10)``.
TEN_TOKENS: list[list[float]] = [
    [0.0171, 1.0654, 0.4616, 0.9196, 0.7193, -0.7430, 0.7120, 0.4198, 2.7427, 0.2844],
    [0.9161, -0.4999, 1.8302, 1.2182, 0.0651, 2.0396, 0.3780, 0.4085, 1.3560, -1.3176],
    [-0.3461, 0.2526, 0.4120, 0.0398, 1.6146, 2.6475, -0.1887, -0.6907, -0.4066, 1.2899],
    [-0.8345, -0.4657, -0.5635, 1.1514, 0.1762, 1.8148, -1.4084, 0.9153, -1.1734, 1.1989],
    [-0.3981, -0.7277, -1.2657, 1.9887, -0.2399, 0.0412, 1.9375, 0.6083, 0.2095, 1.5739],
    [-1.5240, 1.2359, 0.5596, -0.1529, -0.4064, -0.0906, -1.6746, 0.2480, -0.2364, 0.8417],
    [0.6992, -1.1193, 0.5642, 1.3861, -0.5185, 0.6701, -0.5353, 1.8013, 0.7900, -0.9430],
    [-0.3550, 2.1032, 1.8690, 0.7174, -1.7692, 0.8200, -0.9620, 1.8325, 0.3009, 1.0083],
    [1.5902, -0.8516, 3.2954, -0.5147, 0.1798, 1.8522, -1.0186, 0.6484, 0.9932, 0.4030],
    [-0.5990, -0.4916, 0.5419, -0.0293, -0.3465, 1.1548, -1.1130, -0.8118, 0.3455, 0.9474],
]

#: Two inputs with four features, ``(B=2, d_in=4)``: one with a negative and a
#: zero feature, one all zeros (the linear-layer-as-attention page).
LINEAR_X: list[list[float]] = [
    [2.0, -1.0, 0.0, 0.5],
    [0.0, 0.0, 0.0, 0.0],
]

#: A ``(d_out=3, d_in=4)`` weight for ``LINEAR_X``, laid out as in ``torch.nn.Linear``.
LINEAR_WEIGHT: list[list[float]] = [
    [1.0, 0.0, 3.0, -2.0],
    [0.0, 1.5, -1.0, 0.0],
    [2.0, -2.0, 1.0, 0.0],
]

#: Batch, input and output sizes of the linear layer rebuilt as attention, ``(B, d_in, d_out)``.
LINEAR_SHAPE: tuple[int, int, int] = (4, 8, 32)

#: Seed of that example's random input, weight and keys.
LINEAR_SEED: int = 0

#: Five keys in the plane, ``(S=5, d_k=2)``, for the playground's soft lookup: they point in
#: five different directions, so that a query's direction decides which key it matches best.
LOOKUP_KEYS: list[list[float]] = [
    [2.0, 0.5],
    [0.5, 2.0],
    [-1.5, 1.0],
    [-1.0, -1.5],
    [1.0, -1.5],
]

#: The values of those keys, ``(S=5, d_v=2)``: the corners of a convex pentagon that leaves out
#: the origin, so that every weighted average of them is a point inside it, and zero is not one.
LOOKUP_VALUES: list[list[float]] = [
    [3.0, 1.0],
    [1.5, 3.0],
    [-1.5, 2.5],
    [-1.0, 0.5],
    [2.0, -0.5],
]

#: The playground's first query, ``(L=1, d_k=2)``: closest in direction to the first two keys.
LOOKUP_QUERY: list[list[float]] = [[1.5, 1.0]]
