"""The tutorial "From nn.Linear to self-attention, in depth", as the build executed it.

What the tutorial computed is read from its kernel's variables (``values``), and checked against
float64 NumPy written out independently (plain sums, a softmax with no max shift), against
``tests/support/reference.py``, against PyTorch, or against a hand calculation. Its random parameters are
inputs, not results: they are read from the kernel's variables too, and everything that follows
from them is recomputed here. The claims the page makes about those numbers are asserted on the
independent computation. That the page shows the computed values is checked without its labels
(tests/support/shown.py): the numbers, token names and verdicts its cells printed, in order, and
the numbers its pictures drew in their cells.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

from attn_ref.examples import THREE_TOKENS
from tests.support import reference
from tests.support.float32_attention_bounds import assert_within, float32_attention
from tests.support.reference import as64
from tests.support.shown import (
    assert_printed,
    displayed,
    drawn,
    half_unit,
    printed_by_cell,
    sci_rtol,
    verdicts,
)

TOKENS = ["t0", "t1", "t2"]  # counted from 0, as in the notation table
FOUR, TWO = half_unit(4), half_unit(2)  # the cells print four decimals, the pictures two
X = np.array(THREE_TOKENS, dtype=np.float64)  # (T, C) = (3, 4)
U = 2.0**-24  # float32's unit roundoff


def _softmax_rows(z: np.ndarray) -> np.ndarray:
    """exp(z) / sum(exp(z)) per row, with no max shift: fine for these small scores."""
    return np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)


def _hand_attention(Q: np.ndarray, K: np.ndarray, V: np.ndarray, scale: float) -> dict[str, np.ndarray]:
    scores = np.array([[sum(q * k for q, k in zip(qi, kj, strict=True)) for kj in K] for qi in Q])
    weights = _softmax_rows(scores * scale)
    return {"scores": scores, "scaled": scores * scale, "weights": weights, "output": weights @ V}


IDENTITY = _hand_attention(X, X, X, scale=1 / math.sqrt(4))  # W_Q = W_K = W_V = I, d_k = 4


@pytest.fixture(scope="module")
def head(values) -> dict[str, np.ndarray]:
    """The random head, d_k = 2, from the layers' own weights (nn.Linear stores W^T)."""
    Wq, Wk, Wv = (as64(values[name].weight).T for name in ("rand_q", "rand_k", "rand_v"))
    hand = _hand_attention(X @ Wq, X @ Wk, X @ Wv, scale=1 / math.sqrt(2))
    return hand | {"Q": X @ Wq, "K": X @ Wk, "V": X @ Wv, "W_Q": Wq, "W_K": Wk, "W_V": Wv}


@pytest.fixture(scope="module")
def linear(values) -> dict[str, np.ndarray]:
    """The first layer's y = x W + b, written out as sums in float64, from its own weight and bias."""
    weight, b = as64(values["layer"].weight), as64(values["layer"].bias)
    x = [1.0, 2.0, 3.0]
    y = np.array([sum(x[i] * weight[j, i] for i in range(3)) + b[j] for j in range(2)])
    terms = np.array([sum(abs(x[i] * weight[j, i]) for i in range(3)) + abs(b[j]) for j in range(2)])
    return {"weight": weight, "b": b, "x": np.array(x), "y": y, "terms": terms}


@pytest.fixture(scope="module")
def pictures(tutorial) -> list[str]:
    found = drawn(tutorial)
    assert len(found) == 4  # one token attending, the linear layer, the projections, the two heads
    return found


def test_the_notebook_ran_cleanly(tutorial):
    assert "".join(printed_by_cell(tutorial, "stderr")) == ""


def test_one_head_without_bias(values):
    for name in ("proj_q", "proj_k", "proj_v", "rand_q", "rand_k", "rand_v"):  # the page's layers: no bias
        assert values[name].bias is None


def test_linear_layer_is_its_formula(tutorial, values, linear):
    assert linear["weight"].shape == (2, 3) and linear["b"].shape == (2,)  # weight is W^T: (out, in)
    np.testing.assert_array_equal(as64(values["W"]), linear["weight"].T)  # W: (in_features, out_features)
    np.testing.assert_array_equal(as64(values["x"]), linear["x"])
    # A float32 sum of three products and a bias is within 4 roundings of its terms' size.
    for name in ("y", "y_manual"):
        assert tuple(values[name].shape) == (2,)
        assert (np.abs(as64(values[name]) - linear["y"]) <= 5 * U * linear["terms"]).all(), name
    # What the cell prints: the weight's rows, the bias, y by the layer and by the formula.
    assert_printed(tutorial, [*linear["weight"].ravel(), *linear["b"]], atol=FOUR, gaps=True)
    assert_printed(tutorial, [*linear["y"], *linear["y"]], atol=FOUR, gaps=True)


def test_comparing_floating_point_results(tutorial, values, linear):
    # IEEE-754 doubles: 0.1 + 0.2 rounds up, 0.2 + 0.3 is exactly 0.5.
    assert (0.1 + 0.2) + 0.3 == 0.6000000000000001 and 0.1 + (0.2 + 0.3) == 0.6
    assert_printed(tutorial, [0.1, 0.2, 0.3, 0.6000000000000001, 0.1, 0.2, 0.3, 0.6])
    np.testing.assert_allclose(as64(values["y_float64"]), linear["y"], rtol=1e-15, atol=1e-16)
    step = np.finfo(np.float32).eps * np.abs(linear["y"])
    np.testing.assert_allclose(as64(values["step"]), step, rtol=1e-12)
    # "A few rounding steps at most": within the sum's rounding bound, in steps of float32's spacing.
    shown = []
    for name in ("y", "y_manual"):
        steps = (as64(values[name]) - linear["y"]) / step
        assert (np.abs(steps) <= 5 * U * linear["terms"] / step + 1e-9).all()
        assert (np.abs(steps) < 4).all()
        shown += steps.tolist()
    assert_printed(tutorial, shown, atol=FOUR, gaps=True)
    assert torch.allclose(values["y"], values["y_manual"])  # both within a few roundings of y


def test_attention_steps_match_float64_hand_computation(tutorial, values):
    np.testing.assert_array_equal(values["X_np"], X)
    for name in ("Q_np", "K_np", "V_np"):  # X @ I: exact
        np.testing.assert_array_equal(values[name], X)
    steps = {"scores_np": "scores", "scaled_np": "scaled", "weights_np": "weights", "output_np": "output"}
    for name, step in steps.items():
        np.testing.assert_allclose(values[name], IDENTITY[step], rtol=1e-13, atol=1e-15, err_msg=name)
    np.testing.assert_allclose(values["weights_np"].sum(axis=-1), 1.0, atol=1e-15)
    for step in ("scores", "scaled", "weights", "output"):
        assert_printed(tutorial, IDENTITY[step], atol=FOUR)
    assert_printed(tutorial, [4, *IDENTITY["scaled"].ravel()], atol=FOUR, gaps=True)  # d_k = 4
    assert_printed(tutorial, np.ones(3), atol=FOUR)  # the row sums


def test_what_the_weights_say(values):
    """The page: token 1 keeps most of its attention for itself; tokens 0 and 2 give two keys
    equal weights, each less than half of the row, and the third key keeps a share."""
    weights = IDENTITY["weights"]
    assert values["tokens"] == TOKENS
    assert weights[1, 1] > 0.5 and weights[1, 1] == weights[1].max()
    for row, tied, other in ((0, (0, 2), 1), (2, (1, 2), 0)):
        # The ties are exact (x_0 . x_0 = x_0 . x_2 = 2, x_2 . x_1 = x_2 . x_2 = 4), the rest far apart.
        assert IDENTITY["scores"][row, tied[0]] == IDENTITY["scores"][row, tied[1]]
        assert IDENTITY["scores"][row, tied[0]] > IDENTITY["scores"][row, other] + 1
        assert weights[row, tied[0]] < 0.5 and weights[row, other] > 0.1


def test_pytorch_agrees_with_the_float64_computation(tutorial, values):
    for name, truth in (
        ("weights_pt", IDENTITY["weights"]),
        ("output_pt", IDENTITY["output"]),
        ("weights_ref", IDENTITY["weights"]),
        ("output_ref", IDENTITY["output"]),
        ("output_sdpa", IDENTITY["output"]),
    ):
        np.testing.assert_allclose(as64(values[name]), truth, atol=1e-6, err_msg=name)
    sdpa64 = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(X),) * 3)
    np.testing.assert_allclose(as64(values["output_sdpa"]), sdpa64.numpy(), atol=1e-6)

    def gap(a, b):
        return float(np.abs(as64(a) - as64(b)).max())

    gaps = [
        gap(values["weights_np"], values["weights_pt"]),
        gap(values["output_np"], values["output_pt"]),
        gap(values["output_sdpa"], values["output_pt"]),
        gap(values["weights_ref"], values["weights_pt"]),
        gap(values["output_ref"], values["output_pt"]),
        gap(values["output_sdpa"], values["prescaled"]),
    ]
    assert all(0 <= g < 1e-6 for g in gaps)  # "all four agree": float32 rounding
    # NumPy computes in float64: its weights are not float32 numbers, so the gaps are not zero.
    assert gaps[0] > 0 and gaps[1] > 0
    assert values["agree"] is True  # "all four agree", as the gaps above show
    assert_printed(tutorial, gaps, rtol=sci_rtol(1))  # in the Going deeper block
    # F.sdpa's order: its math path, Q and K each scaled by d_k^(-1/4) before the product. The same
    # operations in the same order give the same bits, on any machine.
    X32 = torch.tensor(THREE_TOKENS)
    with torch.profiler.profile() as profiler:
        torch.nn.functional.scaled_dot_product_attention(X32, X32, X32)
    assert "aten::_scaled_dot_product_attention_math" in {event.name for event in profiler.events()}
    assert torch.equal(values["output_sdpa"], values["prescaled"])
    assert values["f"] == 4**-0.25


def test_random_projections_match_float64_hand_computation(tutorial, values, head):
    assert head["W_Q"].shape == (4, 2)  # (C, d_k)
    assert values["d_k"] == 2  # the last axis of Q, not C
    for name, step in (("Q_r", "Q"), ("K_r", "K"), ("V_r", "V")):
        np.testing.assert_allclose(as64(values[name]), head[step], atol=1e-6, err_msg=name)
    for name, step in (("scores_r", "scores"), ("weights_r", "weights"), ("output_r", "output")):
        np.testing.assert_allclose(as64(values[name]), head[step], atol=1e-6, err_msg=name)
    np.testing.assert_allclose(as64(values["sdpa_r"]), head["output"], atol=1e-6)
    w = head["weights"]
    assert values["low"] == pytest.approx(w.min(), abs=1e-6)
    assert values["high"] == pytest.approx(w.max(), abs=1e-6)
    assert_printed(tutorial, [values["low"], values["high"], 1 / 3], atol=FOUR)
    assert np.abs(w - 1 / 3).max() < 0.1  # the page: "close to uniform"
    assert np.abs(head["scores"]).max() < 1.5  # the page: "the scores are small"
    # Symmetry: the identity's scores exactly, nothing else by far more than rounding.
    S = IDENTITY["scores"]
    np.testing.assert_allclose(S, S.T, atol=1e-12)
    for matrix in (head["scores"], IDENTITY["weights"], w):
        assert np.abs(matrix - matrix.T).max() > 1e-3


def test_every_picture_is_drawn_from_the_computed_numbers(tutorial, pictures, linear, head):
    one, layer, projections, heads = pictures
    # One token attending: t1's query, the keys, its scores, the values, its weights, its output.
    t1 = X[1]
    assert_printed(tutorial, [*t1, *X.ravel(), *(X @ t1)], texts=[one])
    assert_printed(tutorial, [*X.ravel(), *IDENTITY["weights"][1]], atol=TWO, texts=[one])
    assert_printed(tutorial, IDENTITY["output"][1], atol=TWO, texts=[one])
    np.testing.assert_allclose(X @ t1, [0, 8, 4])  # the dot products the alt text names
    # The linear layer: x, the rows of its weight, the bias, y.
    shown = [*linear["x"], *linear["weight"].ravel(), *linear["b"], *linear["y"]]
    assert_printed(tutorial, shown, atol=[0] * 3 + [TWO] * 10, gaps=True, texts=[layer])  # row names between
    # The projections: X, then W_Q and Q, W_K and K, W_V and V, as the picture pairs them.
    shown = [*X.ravel()]
    for name in ("Q", "K", "V"):
        shown += [*head[f"W_{name}"].ravel(), *head[name].ravel()]
    assert_printed(tutorial, shown, atol=[0] * 12 + [TWO] * 42, texts=[projections])
    # The framed entry is t1's row of X times column 1 of W_Q.
    assert head["Q"][1, 1] == pytest.approx(X[1] @ head["W_Q"][:, 1])
    # The two heads: scores and weights, identity then random.
    shown = [*IDENTITY["scores"].ravel(), *IDENTITY["weights"].ravel(), *head["scores"].ravel()]
    shown += [*head["weights"].ravel()]
    assert_printed(tutorial, shown, atol=[0] * 9 + [TWO] * 27, texts=[heads])


def test_pictures_fold_their_code_and_fit_a_phone(tutorial):
    cells = [c for c in tutorial.code_cells if any("image/svg+xml" in o.get("data", {}) for o in c.outputs)]
    assert len(cells) == 4 and all("plot" in c.metadata.get("tags", []) for c in cells)
    for svg in displayed(tutorial, "image/svg+xml"):
        width = float(re.search(r'width="([\d.]+)pt"', svg)[1])
        assert width / 72 <= 4.75  # inches: at 75 % of its size it fits a 343 px column


def test_pitfalls_are_shown_with_the_computed_truth(tutorial, values, head, linear):
    # Unseeded layers draw different weights; seeding with 0 again draws the first layer again.
    assert not torch.equal(values["first"].weight, values["second"].weight)
    assert torch.equal(values["again"].weight, values["layer"].weight)
    assert torch.equal(values["again"].bias, values["layer"].bias)
    # Another input than the code's gives another y: x W + b for (3, 4, 5) and for (1, 2, 3).
    shown = []
    for x in ((3.0, 4.0, 5.0), (1.0, 2.0, 3.0)):
        by_hand = np.array(x) @ linear["weight"].T + linear["b"]
        shown += [*x, *by_hand]
    assert np.abs(shown[3:5] - linear["y"]).max() > 0.1 and np.abs(shown[8:10] - linear["y"]).max() < 1e-6
    assert_printed(tutorial, shown, atol=[0, 0, 0, FOUR, FOUR] * 2, gaps=True)

    # An exact == between tensors gives a tensor; with two elements assert cannot read it.
    assert isinstance(values["y"] == values["y_manual"], torch.Tensor)
    with pytest.raises(RuntimeError):
        assert values["y"] == values["y_manual"]
    torch.testing.assert_close(values["y"], values["y_manual"])

    # The scale 1/sqrt(C) = 1/2 differs from 1/sqrt(d_k) = 1/sqrt(2) on the random head.
    by_width = _softmax_rows(head["scores"] / 2.0) @ head["V"]
    np.testing.assert_allclose(as64(values["by_width"]), by_width, atol=1e-6)
    off = np.abs(by_width - head["output"]).max()
    assert off > 1e-3  # far beyond torch.allclose's tolerance on these outputs
    assert_printed(tutorial, [off], atol=FOUR + 2e-6)
    assert values["ratio"] == math.sqrt(8)
    assert_printed(tutorial, [512, 64, math.sqrt(8)], atol=[0, 0, FOUR], gaps=True)


def test_every_solution_ran_and_printed(tutorial):
    solutions = [c for c in tutorial.code_cells if "solution" in c.metadata.get("tags", [])]
    assert solutions and all(any(o.output_type == "stream" for o in c.outputs) for c in solutions)


def test_exercise_1_every_score_doubled(tutorial, values):
    doubled = reference.softmax(2 * IDENTITY["scaled"])
    np.testing.assert_allclose(values["doubled"], doubled, rtol=1e-13)
    squared = IDENTITY["weights"] ** 2 / (IDENTITY["weights"] ** 2).sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(doubled, squared, rtol=1e-12)  # softmax(2z) = softmax(z)^2, renormalised
    assert_printed(tutorial, doubled, atol=FOUR)
    assert_printed(tutorial, [IDENTITY["weights"][1, 1], doubled[1, 1]], atol=FOUR, gaps=True)
    # Doubling undoes the division by sqrt(d_k) = sqrt(4) = 2: exact in binary floating point.
    assert values["root"] == 2.0 and np.array_equal(2 * values["scaled_np"], values["scores_np"])
    assert_printed(tutorial, [2], gaps=True)


def test_exercise_2_overflow(tutorial, values):
    # float32's largest value is (2 - 2^-23) * 2^127, about e^88.72; the row's exponents pass 100.
    largest = (2 - 2**-23) * 2.0**127
    assert math.log(largest) < 100 and values["largest"] == largest
    assert_printed(tutorial, [math.log(largest)], atol=half_unit(2))
    row = values["row"]
    np.testing.assert_allclose(as64(row), IDENTITY["scaled"][0] + 100, atol=1e-5)
    assert torch.isinf(row.exp()).all()
    assert torch.isnan(row.exp() / row.exp().sum()).all()  # inf / inf
    stable = as64(values["shifted"] / values["shifted"].sum())
    e = math.e
    np.testing.assert_allclose(stable, [e / (2 * e + 1), 1 / (2 * e + 1), e / (2 * e + 1)], atol=1e-6)
    np.testing.assert_allclose(stable, IDENTITY["weights"][0], atol=1e-6)  # the first row of weights
    assert_printed(tutorial, [np.inf] * 3 + [np.nan] * 3 + stable.tolist(), atol=FOUR)


def test_exercise_3_the_transposition(values):
    square, X32 = values["square"], values["X_pt"]
    W = as64(square.weight)
    np.testing.assert_allclose(as64(square(X32)), X @ W.T, atol=1e-6)  # nn.Linear computes X @ weight.T
    assert np.abs(X @ W.T - X @ W).max() > 1e-3  # the wrong orientation gives other numbers
    assert values["right"] is True and values["wrong"] is False
    with pytest.raises(RuntimeError):
        X32 @ values["narrow"].weight  # (3, 4) @ (2, 4)


def test_exercise_4_reversing_the_tokens(values):
    order = [2, 1, 0]
    assert values["order"] == order
    output_rev, weights_rev = reference.attention(X[order], X[order], X[order])
    np.testing.assert_allclose(values["weights_rev"], weights_rev, rtol=1e-12)
    np.testing.assert_allclose(values["output_rev"], output_rev, rtol=1e-12)
    np.testing.assert_allclose(output_rev, IDENTITY["output"][order], rtol=1e-12)
    np.testing.assert_allclose(weights_rev, IDENTITY["weights"][order][:, order], rtol=1e-12)


def test_every_verdict_the_tutorial_prints_is_the_truth(tutorial):
    """The True/False the page prints, in order, are what the tests above establish independently.

    ``None`` marks the one verdict that is a float comparison's exact outcome (``y == y_manual``,
    printed as a tensor of two): whether nn.Linear and the formula agree to the last bit depends on
    the machine, as the page says.
    """
    expected = [
        True,  # torch.allclose(y, y_manual)
        True,  # Q, K and V all equal X
        True,  # all four computations agree
        True,  # plain scores X X^T symmetric
        False,  # their weights are not
        True,  # each top key is the query or a longer vector
        True,  # the random head matches F.sdpa
        True,  # identity: scores symmetric
        False,  # random: scores not symmetric
        False,  # identity: weights not symmetric
        False,  # random: weights not symmetric
        False,  # two unseeded layers: different weights
        True,  # seeding with 0 again: the first layer
        False,  # x = (3, 4, 5) does not give the printed y
        True,  # x = (1, 2, 3) does
        None,  # y == y_manual, first output, bit for bit: machine-dependent
        None,  # y == y_manual, second output
        False,  # 1/sqrt(C) does not match F.sdpa
        True,  # one-hot @ W_E is the lookup
        True,  # both 'the' get the same row
        True,  # the two 'the' of sentence 1 get the same output
        True,  # output = A @ V
        True,  # every output feature within its range over V
        True,  # exercise 1: the squared weights, renormalised
        True,  # exercise 1: 2 * scaled_np is the unscaled scores
        True,  # exercise 3: proj(X) == X @ weight.T
        False,  # exercise 3: proj(X) != X @ weight
        True,  # exercise 4: the outputs reversed
        True,  # exercise 4: the weights reversed
    ]
    shown = verdicts(tutorial)
    assert len(shown) == len(expected)
    assert [s for s, e in zip(shown, expected, strict=True) if e is not None] == [
        e for e in expected if e is not None
    ]


def _float32_layer(X, W_Q, W_K, W_V):
    """Self-attention of X with the given float32 projections, in float64, and float32's bounds."""
    X = as64(X)
    Ws = [as64(W) for W in (W_Q, W_K, W_V)]
    sizes = [np.abs(X) @ np.abs(W) for W in Ws]
    return float32_attention(*(X @ W for W in Ws), rounds=X.shape[-1], sizes=sizes)


def test_pitfall_context_comes_from_attention_not_a_cls_token(tutorial, values):
    """One-hot rows times W_E are a row lookup, so the same word gets the same row; one attention
    layer gives 'cat' different outputs in two sentences, and the two 'the' of one sentence the same."""
    vocab, words, other = values["vocab"], values["words"], values["other_words"]
    ids = [vocab.index(word) for word in words]
    W_E = as64(values["W_E"])
    np.testing.assert_array_equal(as64(values["X_words"]), W_E[ids])  # one 1 per row: exact
    np.testing.assert_array_equal(as64(values["X_words"])[0], as64(values["X_words"])[4])
    W = values["W_context"]
    one = _float32_layer(W_E[ids], *W)
    two = _float32_layer(W_E[[vocab.index(word) for word in other]], *W)
    assert_within(values["Y1"], one.output, one.output_error, "Y1")
    assert_within(values["Y2"], two.output, two.output_error, "Y2")
    i, j = words.index("cat"), other.index("cat")
    assert np.abs(one.output[i] - two.output[j]).max() > (one.output_error[i] + two.output_error[j]).max()
    np.testing.assert_allclose(one.output[0], one.output[4], rtol=1e-12, atol=1e-12)
    assert_printed(tutorial, [*as64(values["Y1"])[i], *as64(values["Y2"])[j]], atol=half_unit(4), gaps=True)


def test_pitfall_attention_mixes_but_is_not_linear(tutorial, values):
    X_mix, W_mix = as64(values["X_mix"]), values["W_mix"]
    once, twice = _float32_layer(X_mix, *W_mix), _float32_layer(2 * X_mix, *W_mix)
    assert_within(values["out_mix"], once.output, once.output_error, "output")
    V = X_mix @ as64(W_mix[2])
    # A convex combination cannot leave the values' range, feature by feature, with room to spare.
    margin = np.minimum(once.output - V.min(axis=0), V.max(axis=0) - once.output)
    assert (margin > once.output_error + 1e-5 * np.abs(V).max()).all()
    difference = np.abs(twice.output - 2 * once.output).max()
    assert difference > 0.1
    error = twice.output_error.max() + 2 * once.output_error.max() + 1e-6
    assert abs(values["difference"] - difference) <= error
    assert_printed(tutorial, [values["difference"]], atol=TWO)


def test_going_deeper_plain_dot_products(tutorial, values):
    """X X^T is symmetric, its softmax is not; each query's top key is itself or a longer vector
    (Cauchy-Schwarz); a louder token 2 gains weight where its score is positive."""
    X_plain = as64(values["X_plain"])
    scores = X_plain @ X_plain.T
    np.testing.assert_allclose(as64(values["scores_plain"]), scores, rtol=1e-5, atol=1e-5)
    norms = np.linalg.norm(X_plain, axis=1)
    top = scores.argmax(axis=1)
    assert values["top"].tolist() == top.tolist()
    assert all(j == i or norms[j] > norms[i] for i, j in enumerate(top))
    positive = [i for i in range(5) if i != 2 and scores[i, 2] > 0]
    assert values["others"] == positive
    previous = None
    for s, weights in values["loud"].items():
        X_s = X_plain.copy()
        X_s[2] *= s
        expected = reference.softmax(X_s @ X_s.T / np.sqrt(8))
        np.testing.assert_allclose(as64(weights), expected, atol=1e-5)
        if previous is not None:
            for i in range(5):
                if i != 2:
                    assert (expected[i, 2] > previous[i, 2]) == (i in positive)
        previous = expected
    assert_printed(tutorial, scores, atol=TWO + 1e-4)


def test_links_inside_the_page_land(built_site):
    html = (built_site.path / "tutorials" / "linear_in_depth" / "index.html").read_text()
    article = re.search(r"<article.*?</article>", html, re.S)[0]
    targets = set(re.findall(r'href="#([^"]+)"', article))
    assert targets and [t for t in targets if f'id="{t}"' not in article] == []
    # "Next:" comes last: after the exercises and the references.
    assert article.rindex("Next:") > article.index('id="references"') > article.index('id="exercises"')
