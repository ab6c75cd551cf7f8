"""bugs/merge_heads.py: where each merged row comes from, worked out by hand from row-major order;
and the two-head attention recomputed exactly in float64 from the snippet's own inputs and weights,
each float32 result within its rounding bound (tests/support/worst_case_rounding.py)."""

import numpy as np

from tests.support.printed import assert_shows, rounded_significant
from tests.support.worst_case_rounding import assert_largest_difference, attention, exact, matmul


def test_the_merged_rows(printed, values):
    labels, H, T, d_k = values["labels"], values["H"], values["T"], values["d_k"]
    assert len({label for head in labels for label in head}) == H * T  # each (head, token) its own label
    np.testing.assert_array_equal(values["values"][0, :, :, 0], labels)  # (B, H, T, d_k), d_k = 1
    # The bug: a (H, T, d_k) array read in row-major order, entry n is head n // (T d_k), token
    # (n // d_k) % T. Reshaped to (T, H d_k), row t holds entries t H d_k to (t + 1) H d_k - 1.
    buggy = [
        [labels[n // (T * d_k)][(n // d_k) % T] for n in range(t * H * d_k, (t + 1) * H * d_k)]
        for t in range(T)
    ]
    # The fix: row t holds token t of every head, head by head.
    fixed = [[labels[c // d_k][t] for c in range(H * d_k)] for t in range(T)]
    np.testing.assert_array_equal(values["merged"][0], buggy)
    np.testing.assert_array_equal(values["permuted"][0], fixed)


def test_the_picture_names_and_colours_each_output_by_its_token(figure):
    """The cells, read in the order they are drawn (the bug's rows, then the fix's), name the head and
    token each merged number came from, worked out above by hand; the colour is the token's."""
    T, H = 4, 2
    buggy = [[f"h{n // (T)} t{n % T}" for n in range(t * H, (t + 1) * H)] for t in range(T)]
    fixed = [[f"h{h} t{t}" for h in range(H)] for t in range(T)]
    (ax,) = figure.axes
    words = [t.get_text() for t in ax.texts if t.get_text().startswith("h")]
    assert words == [w for row in buggy + fixed for w in row]
    colours = [image.get_array().ravel().tolist() for image in ax.images]
    assert colours == [[int(w[-1]) + 0.5 for row in rows for w in row] for rows in (buggy, fixed)]


def _multi_head(x, values, fixed: bool):
    """Two-head self-attention of x (B, T, C) in exact arithmetic, the heads merged with or
    without moving the head axis back after the tokens; float32 rounding bounded."""
    B, T, C = x.value.shape
    H = values["H"]
    d = C // H  # head h reads features h d to (h + 1) d of each token: (B, T, C) -> (B, H, T, d)
    q, k, v = (
        matmul(x, exact(values[name])).map(lambda a: a.reshape(B, T, H, d).transpose(0, 2, 1, 3))
        for name in ("W_Q", "W_K", "W_V")
    )
    out, _ = attention(q, k, v)  # (B, H, T, d)
    if fixed:
        out = out.map(lambda a: a.transpose(0, 2, 1, 3))
    return out.map(lambda a: a.reshape(B, T, C))


def test_the_check_fails_on_the_bug_and_passes_on_the_fix(printed, values):
    x, perm, tolerance = values["x"].numpy(), values["perm"].numpy(), values["tolerance"]
    assert sorted(perm) == list(range(x.shape[1]))  # a shuffle of the tokens
    buggy, fixed = values["worst"].values()
    ranges = []
    for worst, permute in ((buggy, False), (fixed, True)):
        shuffled_first = _multi_head(exact(x[:, perm]), values, fixed=permute)
        shuffled_after = _multi_head(exact(x), values, fixed=permute).map(lambda a: a[:, perm])
        ranges.append(assert_largest_difference(worst, (shuffled_first, shuffled_after)))
        if permute:  # self-attention without positions is permutation-equivariant
            np.testing.assert_allclose(shuffled_first.value, shuffled_after.value, rtol=0, atol=1e-12)
    assert ranges[0][0] > tolerance and buggy > tolerance  # fails on every machine
    assert fixed < tolerance  # rounding alone, which the page promises stays below it
    assert_shows(printed, rounded_significant([buggy, fixed], 2))
