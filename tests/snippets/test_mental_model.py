"""The snippets of the page "Attention, from first principles", each run in a fresh interpreter.

Every printed number is compared with an independent float64 computation written out here
(NumPy by hand, or PyTorch's own attention modules), on the same input data.
"""

from __future__ import annotations

import re
import runpy

import numpy as np
import pytest
import torch

from tests.conftest import SNIPPETS, run_snippet

NUMBER = re.compile(r"-?\d+(?:\.\d*)?(?:e[-+]?\d+)?")


def _line(out: str, label: str) -> str:
    """The text after ``label`` on the one printed line that starts with it."""
    lines = [line for line in out.splitlines() if line.startswith(label)]
    assert len(lines) == 1, f"expected one line starting with {label!r}, got {lines}"
    return lines[0][len(label) :]


def _numbers(text: str) -> np.ndarray:
    return np.array([float(n) for n in NUMBER.findall(text)])


def _block(out: str, label: str, rows: int) -> np.ndarray:
    """The ``rows`` printed lines under the line ``label``, as a matrix."""
    lines = out.splitlines()
    start = lines.index(label) + 1
    return np.array([_numbers(line) for line in lines[start : start + rows]])


def _flag(out: str, label: str) -> bool:
    value = _line(out, label).strip()
    assert value in {"True", "False"}, value
    return value == "True"


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _attention(Q, K, V):
    """softmax(Q K^T / sqrt(d_k)) V in float64, returning output and weights."""
    weights = _softmax(Q @ K.T / np.sqrt(K.shape[-1]))
    return weights @ V, weights


def _seeded_randn(*shapes):
    """float64 copies of torch.randn draws after torch.manual_seed(0), in order."""
    torch.manual_seed(0)
    return [torch.randn(*shape).double().numpy() for shape in shapes]


# Section 1 -----------------------------------------------------------------------------------


def test_embeddings_shapes_and_lookup():
    out = run_snippet("mental_model/embeddings.py")
    sentence_length, vocab_size, width = 6, 7, 4  # the sentence, the vocabulary, C
    assert _line(out, "raw:").split() == [
        f"({sentence_length},",
        f"{vocab_size})",
        "W_E:",
        f"({vocab_size},",
        f"{width})",
        "X:",
        f"({sentence_length},",
        f"{width})",
    ]
    assert _flag(out, "one-hot @ W_E is the row lookup W_E[ids]:")
    assert _flag(out, "nn.Embedding with the same table agrees:")
    assert _flag(out, "both 'the' tokens get the same vector:")


# Section 2 -----------------------------------------------------------------------------------


def test_context_changes_the_same_word_in_two_sentences():
    out = run_snippet("mental_model/context.py")
    vocab = ["a", "cat", "mat", "on", "ran", "sat", "the"]
    W_E, W_Q, W_K, W_V = _seeded_randn((7, 4), (4, 4), (4, 4), (4, 4))

    def layer(words):
        X = W_E[[vocab.index(w) for w in words]]
        return _attention(X @ W_Q, X @ W_K, X @ W_V)[0]

    Y1 = layer(["the", "cat", "sat", "on", "the", "mat"])
    Y2 = layer(["a", "cat", "ran"])
    assert _line(out, "inputs:").strip() == "(6, 4) and (3, 4)"
    assert _line(out, "outputs:").strip() == "(6, 4) and (3, 4)"
    np.testing.assert_allclose(_numbers(_line(out, "'cat' output in sentence 1:")), Y1[1], atol=1e-4)
    np.testing.assert_allclose(_numbers(_line(out, "'cat' output in sentence 2:")), Y2[1], atol=1e-4)
    assert _flag(out, "'cat' has the same embedding in both:")
    assert _flag(out, "'cat' has the same output in both:") == bool(np.allclose(Y1[1], Y2[1]))
    assert not np.allclose(Y1[1], Y2[1])
    assert _flag(out, "the two 'the' of sentence 1, same output:") == bool(np.allclose(Y1[0], Y1[4]))


# Section 3 -----------------------------------------------------------------------------------


def test_plain_scores_are_symmetric_self_preferring_and_length_driven():
    out = run_snippet("mental_model/plain_scores.py")
    (X,) = _seeded_randn((5, 8))
    S = X @ X.T
    np.testing.assert_allclose(_block(out, "plain scores S = X X^T:", 5), S, atol=0.006)
    assert _flag(out, "S is symmetric (i -> j scores as j -> i):")
    weights = _softmax(S / np.sqrt(8))
    assert _flag(out, "the weights are symmetric:") == bool(np.allclose(weights, weights.T))
    assert not np.allclose(weights, weights.T)

    top = S.argmax(axis=1)
    norms = np.linalg.norm(X, axis=1)
    assert _line(out, "each query's top key:").strip() == str(top.tolist())
    np.testing.assert_allclose(_numbers(_line(out, "vector lengths:")), norms, atol=0.006)
    # Cauchy-Schwarz, checked on the float64 data: the winner is the query or a longer vector.
    assert all(j == i or norms[j] > norms[i] for i, j in enumerate(top))
    assert _flag(out, "each top key is the query or a longer vector:")

    positive = [i for i in range(5) if S[i, 2] > 0]
    assert _line(out, "queries with a positive score for token 2:").strip() == str(positive)
    previous = None
    for s in (1, 2, 4):
        X_loud = X.copy()
        X_loud[2] *= s
        expected = _softmax(X_loud @ X_loud.T / np.sqrt(8))[:, 2]
        printed = _numbers(_line(out, f"token 2 scaled by {s}, weight on it:"))
        np.testing.assert_allclose(printed, expected, atol=6e-4)
        if previous is not None:  # louder: more weight where the score is positive, less elsewhere
            for i in range(5):
                if i != 2:
                    assert (expected[i] > previous[i]) == (i in positive)
        previous = expected


def _alice_tokens() -> np.ndarray:
    """Alice, met, Bob, she over the features name, verb, pronoun, female, alice, bob."""
    return np.array(
        [
            [1, 0, 0, 1, 1, 0],
            [0, 1, 0, 0, 0, 0],
            [1, 0, 0, 0, 0, 1],
            [0, 0, 1, 1, 0, 0],
        ],
        dtype=float,
    )


def test_qkv_roles_make_she_find_alice():
    out = run_snippet("mental_model/qkv_roles.py")
    X = torch.tensor(_alice_tokens())
    W_Q = torch.zeros(6, 2, dtype=torch.float64)
    W_Q[2] = 4.0  # pronoun -> (a name, female)
    W_K = torch.zeros(6, 2, dtype=torch.float64)
    W_K[0, 0] = W_K[3, 1] = 1.0  # name, female
    W_V = torch.zeros(6, 2, dtype=torch.float64)
    W_V[4, 0] = W_V[5, 1] = 1.0  # alice, bob
    sdpa = torch.nn.functional.scaled_dot_product_attention

    plain = torch.softmax(X @ X.T / 6**0.5, dim=-1)
    np.testing.assert_allclose(_numbers(_line(out, "plain weights of 'she':")), plain[3], atol=6e-4)
    names = ["Alice", "met", "Bob", "she"]
    assert _line(out, "plain: 'she' attends most to").strip() == names[int(plain[3].argmax())]

    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    np.testing.assert_allclose(_block(out, "scores Q K^T:", 4), Q @ K.T)
    assert not _flag(out, "symmetric:")
    assert _numbers(_line(out, "Alice -> she:")).tolist() == [(Q @ K.T)[0, 3].item(), (Q @ K.T)[3, 0].item()]
    weights = torch.softmax(Q @ K.T / 2**0.5, dim=-1)
    output = sdpa(Q, K, V)
    np.testing.assert_allclose(_numbers(_line(out, "projected weights of 'she':")), weights[3], atol=6e-4)
    np.testing.assert_allclose(_numbers(_line(out, "output of 'she' (alice, bob):")), output[3], atol=6e-4)
    assert (
        _line(out, "projected: 'she' attends most to").strip() == names[int(weights[3].argmax())] == "Alice"
    )
    np.testing.assert_allclose(_numbers(_line(out, "key of 'met' (W_K ignores 'verb'):")), K[1])


# Section 4 -----------------------------------------------------------------------------------


def test_qkv_shapes_prints_every_shape():
    out = run_snippet("mental_model/qkv_shapes.py")
    T, C, d_k, d_v = 5, 8, 4, 6
    expected = {
        "X": (T, C),
        "W_Q": (C, d_k),
        "W_K": (C, d_k),
        "W_V": (C, d_v),
        "Q": (T, d_k),
        "K": (T, d_k),
        "V": (T, d_v),
        "Q K^T / sqrt(d_k)": (T, T),
        "weights": (T, T),
        "output": (T, d_v),
    }
    printed = dict(line.strip().split(": ", 1) for line in out.splitlines()[: len(expected)])
    assert printed == {name: str(shape) for name, shape in expected.items()}
    assert _line(out, "d_k, the width of queries and keys:").strip() == str(d_k)
    assert _flag(out, "same as PyTorch:")


# Section 5 -----------------------------------------------------------------------------------


def _scaling_reference():
    """Per width: (variance, largest weight, entropy, gradient norm) for plain and scaled scores."""
    rng = np.random.default_rng(0)
    S, trials = 16, 400
    rows = {"plain": [], "scaled": []}
    for d_k in [1, 4, 16, 64, 256, 1024]:
        q = rng.standard_normal((trials, 1, d_k))
        k = rng.standard_normal((trials, S, d_k))
        scores = np.einsum("td,tsd->ts", q[:, 0], k)
        for name, z in [("plain", scores), ("scaled", scores / np.sqrt(d_k))]:
            shifted = z - z.max(axis=1, keepdims=True)
            log_total = np.log(np.exp(shifted).sum(axis=1))
            p = np.exp(shifted - log_total[:, None])
            entropy = log_total - (p * shifted).sum(axis=1)  # H = logsumexp(z) - sum p z
            # ||diag(p) - p p^T||_F^2 = sum p^2 - 2 sum p^3 + (sum p^2)^2
            p2, p3 = (p**2).sum(axis=1), (p**3).sum(axis=1)
            gradient = np.sqrt(np.maximum(p2 - 2 * p3 + p2**2, 0.0))
            rows[name].append((z.var(), p.max(axis=1).mean(), entropy.mean(), gradient.mean()))
    return rows


def test_scaling_table_matches_an_independent_computation_and_the_theory():
    out = run_snippet("mental_model/scaling.py")
    reference = _scaling_reference()
    widths = [1, 4, 16, 64, 256, 1024]
    table = {int(_numbers(line)[0]): _numbers(line)[1:] for line in out.splitlines()[2:8]}
    assert list(table) == widths
    for i, d_k in enumerate(widths):
        expected = np.ravel(list(zip(reference["plain"][i], reference["scaled"][i], strict=True)))
        np.testing.assert_allclose(table[d_k], expected, atol=6e-4, rtol=1e-6)
        plain_var, scaled_var = table[d_k][0], table[d_k][1]
        assert abs(plain_var / d_k - 1) < 0.1  # Var(q · k) = d_k
        assert abs(scaled_var - 1) < 0.1  # Var(q · k / sqrt(d_k)) = 1
    plain_max = [table[d][2] for d in widths]
    scaled_max = [table[d][3] for d in widths]
    assert plain_max == sorted(plain_max) and plain_max[-1] > 0.9  # towards one-hot
    assert max(scaled_max) - min(scaled_max) < 0.1  # flat with the scaling
    plain_gradient = [table[d][6] for d in widths]
    assert plain_gradient[-1] < plain_gradient[0] / 4  # the saturated softmax passes little gradient
    uniform = _numbers(_line(out, "uniform weights:"))
    np.testing.assert_allclose(uniform[[1, 2]], [1 / 16, np.log(16)], atol=6e-4)


def test_scaling_plot_is_legible_without_colour():
    namespace = runpy.run_path(str(SNIPPETS / "mental_model" / "scaling.py"))
    fig = namespace["fig"]
    axes = fig.axes
    assert len(axes) == 3
    for ax in axes:
        assert ax.get_xscale() == "log" and ax.get_xlabel() and ax.get_ylabel()
        curves = [line for line in ax.get_lines() if len(line.get_xdata()) > 2]
        assert {(line.get_marker(), line.get_linestyle()) for line in curves} == {("o", "-"), ("s", "--")}
    assert fig.legends and len(fig.legends[0].get_texts()) == 3
    import matplotlib.pyplot as plt

    plt.close(fig)


# Section 6 -----------------------------------------------------------------------------------


def test_convex_mix_outputs_are_averages_of_values_but_not_linear_in_x():
    out = run_snippet("mental_model/convex_mix.py")
    X, W_Q, W_K, W_V = _seeded_randn((5, 8), (8, 4), (8, 4), (8, 4))

    def layer(X):
        return _attention(X @ W_Q, X @ W_K, X @ W_V)

    output, _ = layer(X)
    V = X @ W_V
    assert _flag(out, "weights >= 0:") and _flag(out, "rows sum to one:")
    assert _flag(out, "output = weights @ V:")
    inside = (output >= V.min(axis=0) - 1e-9) & (output <= V.max(axis=0) + 1e-9)
    assert _flag(out, "every output feature within its range over V:") == bool(inside.all())
    difference = np.abs(layer(2 * X)[0] - 2 * output).max()
    assert difference > 1e-3
    assert not _flag(out, "attention(2 X) == 2 attention(X):")
    np.testing.assert_allclose(_numbers(_line(out, "largest difference:")), [difference], atol=2e-4)


# Section 7 -----------------------------------------------------------------------------------


def _torch_mha(num_heads: int) -> torch.nn.MultiheadAttention:
    """PyTorch's own module with the page's hand-set matrices (x @ W convention)."""
    W_Q, W_K, W_V = (torch.zeros(6, 6, dtype=torch.float64) for _ in range(3))
    W_Q[2, 0] = W_Q[2, 1] = 6.0  # head 0: pronoun -> (a name, female)
    W_K[0, 0] = W_K[3, 1] = 1.0
    W_V[4, 0] = W_V[5, 1] = 1.0  # alice, bob
    W_Q[2, 3] = 12.0  # head 1 (columns 3..5): pronoun -> the verb
    W_K[1, 3] = 1.0
    W_V[1, 3] = 1.0
    mha = torch.nn.MultiheadAttention(6, num_heads, bias=False, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([W_Q.T, W_K.T, W_V.T]))
        mha.out_proj.weight.copy_(torch.eye(6))
    return mha


def test_multihead_heads_differ_and_one_head_splits_its_weight():
    out = run_snippet("mental_model/multihead.py")
    x = torch.tensor(_alice_tokens())[None]
    names = ["Alice", "met", "Bob", "she"]
    with torch.no_grad():
        output, weights = _torch_mha(2)(x, x, x, average_attn_weights=False)
        output_1, weights_1 = _torch_mha(1)(x, x, x, average_attn_weights=False)
    assert _line(out, "X:").split() == ["(1,", "4,", "6)", "weights:", "(1,", "2,", "4,", "4)"]
    assert _line(out, "W_Q, all heads side by side:").strip() == "(6, 6)"  # (C, C)
    assert _line(out, "W_Q[:, :d_k], the columns of head 0:").strip() == "(6, 3)"  # (C, C / H)
    for h in range(2):
        line = _line(out, f"head {h}: 'she' attends most to ")
        assert line.split(",")[0] == names[int(weights[0, h, 3].argmax())]
        np.testing.assert_allclose(_numbers(line.split(",", 1)[1]), weights[0, h, 3], atol=6e-4)
    assert names[int(weights[0, 0, 3].argmax())] != names[int(weights[0, 1, 3].argmax())]
    np.testing.assert_allclose(
        _numbers(_line(out, "output of 'she' [head 0 | head 1]:")), output[0, 3], atol=6e-4
    )
    np.testing.assert_allclose(
        _numbers(_line(out, "one head: weights of 'she':")), weights_1[0, 0, 3], atol=6e-4
    )
    np.testing.assert_allclose(_numbers(_line(out, "one head: output of 'she':")), output_1[0, 3], atol=6e-4)
    # One head splits the weight of 'she' between Alice and met; two heads each commit to one.
    assert weights_1[0, 0, 3, :2].max() < 0.5 < weights[0, :, 3].max(dim=-1).values.min()


# Section 8 -----------------------------------------------------------------------------------


def test_permutation_equivariance_and_how_positions_break_it():
    out = run_snippet("mental_model/permutation.py")
    X, W_Q, W_K, W_V = _seeded_randn((5, 8), (8, 8), (8, 8), (8, 8))
    perm = [2, 0, 4, 1, 3]

    def layer(X):
        return _attention(X @ W_Q, X @ W_K, X @ W_V)[0]

    out_x, out_px = layer(X), layer(X[perm])
    assert _flag(out, "f(P X) == P f(X), equivariant:") == bool(np.allclose(out_px, out_x[perm]))
    assert np.allclose(out_px, out_x[perm])
    assert not np.allclose(out_px, out_x)
    assert not _flag(out, "f(P X) == f(X), invariant:")
    assert _flag(out, "A(P X) == P A(X) P^T:")
    assert _flag(out, "mean over tokens unchanged:")

    # Sinusoidal encoding by hand: PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(...).
    positions = np.arange(5)[:, None]
    angles = positions / 10000 ** (np.arange(0, 8, 2) / 8)
    PE = np.zeros((5, 8))
    PE[:, 0::2], PE[:, 1::2] = np.sin(angles), np.cos(angles)
    difference = np.abs(layer(X[perm] + PE) - layer(X + PE)[perm]).max()
    assert difference > 1e-3
    assert not _flag(out, "with positions, f(P X + PE) == P f(X + PE):")
    np.testing.assert_allclose(_numbers(_line(out, "largest difference:")), [difference], atol=2e-3)


# Section 9 -----------------------------------------------------------------------------------


def test_from_memory_numpy_matches_pytorch():
    out = run_snippet("mental_model/from_memory_numpy.py")
    rng = np.random.default_rng(0)
    X = torch.tensor(rng.standard_normal((4, 6)))
    W_Q, W_K, W_V = (torch.tensor(rng.standard_normal((6, 3))) for _ in range(3))
    expected = torch.nn.functional.scaled_dot_product_attention(X @ W_Q, X @ W_K, X @ W_V)
    printed = np.array([_numbers(line) for line in out.splitlines()[:4]])
    np.testing.assert_allclose(printed, expected, atol=6e-5)
    assert _flag(out, "same as attn_ref.numpy_ref:")


def test_from_memory_torch_matches_numpy():
    out = run_snippet("mental_model/from_memory_torch.py")
    X, W_Q, W_K, W_V = _seeded_randn((4, 6), (6, 3), (6, 3), (6, 3))
    expected, _ = _attention(X @ W_Q, X @ W_K, X @ W_V)
    printed = np.array([_numbers(line) for line in out.splitlines()[:4]])
    np.testing.assert_allclose(printed, expected, atol=6e-5)
    assert _flag(out, "same as PyTorch:")


@pytest.mark.parametrize(
    "name",
    ["qkv_roles.py", "multihead.py"],
)
def test_heatmap_snippets_leave_a_figure_to_render(name):
    import matplotlib.pyplot as plt

    namespace = runpy.run_path(str(SNIPPETS / "mental_model" / name))
    fig = namespace["fig"]
    assert all(ax.get_title() for ax in fig.axes if ax.get_images())
    plt.close(fig)
