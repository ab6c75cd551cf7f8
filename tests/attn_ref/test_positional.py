"""Positions against independent formulations.

- The sinusoidal encoding against the formula of Vaswani et al. (2017), written as loops, and
  its shift property: PE(t + k) is PE(t) times a block-diagonal rotation that depends on k only.
- RoPE (``apply_rotary``) against the paper's rotation matrix (Su et al., 2021, equation 15),
  against the complex multiplication of Meta's Llama reference code and against the "rotate
  half" formula of GPT-NeoX and Hugging Face, each written out here; and its properties:
  scores depend on positions only through their difference, norms are preserved, the two
  feature layouts agree up to a fixed permutation (and Hugging Face's permutation of Meta's
  weights), mixing the layouts changes the scores.
- RoPE at given frequencies (``frequencies=``) against the same rotation written out with them,
  and at RoPE's own frequencies (`rope_frequencies`, against the paper's) equal to RoPE.
- ALiBi against the paper's slopes (computed here from its text), the paper's causal bias, the
  authors' reference code's form of it, and PyTorch's attention given the bias as a mask.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attn_ref import (
    alibi_bias,
    alibi_slopes,
    apply_rotary,
    scaled_dot_product_attention,
    sinusoidal_positional_encoding,
)
from attn_ref.masks import causal_mask
from attn_ref.positional import rope_frequencies
from tests.support import positions_reference

SETTINGS = settings(max_examples=40, deadline=None)


# Sinusoidal ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("T", "d"), [(1, 2), (7, 10), (50, 16), (5, 7)])
def test_matches_the_papers_formula(T, d):
    expected = torch.zeros(T, d)
    for pos in range(T):
        for i in range(0, d, 2):
            expected[pos, i] = math.sin(pos / 10000 ** (i / d))
            if i + 1 < d:
                expected[pos, i + 1] = math.cos(pos / 10000 ** (i / d))
    torch.testing.assert_close(sinusoidal_positional_encoding(T, d), expected)


def test_every_position_is_distinct():
    encoding = sinusoidal_positional_encoding(100, 16)
    distances = torch.cdist(encoding, encoding) + torch.eye(100)
    assert distances.min() > 0.1


@pytest.mark.parametrize(("T", "d"), [(0, 4), (4, 0), (2.5, 4)])
def test_rejects_bad_sizes(T, d):
    with pytest.raises(ValueError, match="must be an int of at least 1"):
        sinusoidal_positional_encoding(T, d)


def _shift_matrix(k: int, d: int) -> np.ndarray:
    """The (d, d) block-diagonal M_k with [sin a, cos a] M_k = [sin(a + kw), cos(a + kw)] per pair,
    from the angle-addition formulas; it depends on k and d only."""
    M = np.zeros((d, d))
    for i in range(0, d, 2):
        b = k / 10000 ** (i / d)
        M[i : i + 2, i : i + 2] = [[math.cos(b), -math.sin(b)], [math.sin(b), math.cos(b)]]
    return M


@SETTINGS
@given(st.integers(1, 40), st.sampled_from([2, 4, 8, 16, 32]), st.integers(0, 200))
def test_sinusoidal_shift_is_a_fixed_rotation(T, d, k):
    encoding = sinusoidal_positional_encoding(T + k, d).double().numpy()  # (T + k, d)
    M = _shift_matrix(k, d)
    np.testing.assert_allclose(encoding[k:], encoding[:T] @ M, atol=1e-6)  # every t, one M_k
    np.testing.assert_allclose(M @ M.T, np.eye(d), atol=1e-12)  # a rotation


# RoPE ----------------------------------------------------------------------------------------


@st.composite
def rope_inputs(draw, min_d: int = 2, min_T: int = 1):
    """Random (q, k) of shape (*batch, T, d) with an even d, in float64, and random positions."""
    batch = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=2)))
    T = draw(st.integers(min_T, 6))
    d = 2 * draw(st.integers(min_d // 2, 8))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    q = torch.randn(*batch, T, d, generator=g, dtype=torch.float64)
    k = torch.randn(*batch, T, d, generator=g, dtype=torch.float64)
    positions = torch.randint(0, 5000, (T,), generator=g)
    return q, k, positions


def _rotation_matrix(m: float, d: int, base: float = 10000.0) -> np.ndarray:
    """R^d_{Theta,m} of the paper's equation 15, with theta_i = base^(-2(i-1)/d), i = 1..d/2."""
    R = np.zeros((d, d))
    for i in range(1, d // 2 + 1):
        a = m * base ** (-2 * (i - 1) / d)
        j = 2 * (i - 1)
        R[j : j + 2, j : j + 2] = [[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]]
    return R


@pytest.mark.parametrize("base", [10000.0, 500000.0, 10.0])
def test_rope_is_the_papers_rotation_matrix(base):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 8, generator=g, dtype=torch.float64)
    positions = torch.tensor([0, 1, 7, 100, 4095])
    rotated = apply_rotary(x, positions, base=base)
    for t, m in enumerate(positions.tolist()):
        expected = _rotation_matrix(m, 8, base) @ x[t].numpy()  # R x, x a column vector
        np.testing.assert_allclose(rotated[t].numpy(), expected, rtol=1e-12, atol=1e-12)


@SETTINGS
@given(rope_inputs(), st.integers(-1000, 1000), st.booleans())
def test_rope_scores_depend_only_on_the_offset(inputs, shift, interleaved):
    q, k, positions = inputs
    positions = positions + 1000  # non-negative after any shift

    def scores(p):
        return apply_rotary(q, p, interleaved=interleaved) @ apply_rotary(k, p, interleaved=interleaved).mT

    torch.testing.assert_close(scores(positions + shift), scores(positions))


@SETTINGS
@given(rope_inputs(), st.integers(0, 3000), st.integers(0, 3000))
def test_rope_score_is_the_unrotated_query_against_a_key_turned_by_n_minus_m(inputs, m, n):
    q, k, _ = inputs
    T = q.shape[-2]
    at_m = apply_rotary(q, torch.full((T,), m))
    at_n = apply_rotary(k, torch.full((T,), n))
    only_offset = apply_rotary(k, torch.full((T,), n - m))
    torch.testing.assert_close((at_m * at_n).sum(-1), (q * only_offset).sum(-1))


@SETTINGS
@given(rope_inputs(), st.booleans())
def test_rope_preserves_norms(inputs, interleaved):
    q, _, positions = inputs
    rotated = apply_rotary(q, positions, interleaved=interleaved)
    torch.testing.assert_close(rotated.norm(dim=-1), q.norm(dim=-1))


def _llama_rotary(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """RoPE as Meta's Llama reference code writes it: features (2i, 2i+1) as one complex number,
    multiplied by e^{i p theta_i} (precompute_freqs_cis and apply_rotary_emb, llama/model.py)."""
    d = x.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64) / d))  # (d/2,)
    freqs = torch.outer(positions.to(torch.float64), inv_freq)  # (T, d/2)
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)  # (T, d/2) complex128
    x_complex = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())  # (..., T, d/2)
    return torch.view_as_real(x_complex * freqs_cis).flatten(-2)  # (..., T, d)


@SETTINGS
@given(rope_inputs())
def test_rope_equals_llamas_complex_multiplication(inputs):
    q, _, positions = inputs
    torch.testing.assert_close(apply_rotary(q, positions, interleaved=True), _llama_rotary(q, positions))


def _rotate_half_rotary(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """RoPE as GPT-NeoX and Hugging Face write it: x cos + rotate_half(x) sin, with the d/2
    frequencies repeated twice, so that feature i turns with feature i + d/2."""
    d = x.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64) / d))  # (d/2,)
    freqs = torch.outer(positions.to(torch.float64), inv_freq)  # (T, d/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (T, d)
    first, second = x[..., : d // 2], x[..., d // 2 :]
    rotate_half = torch.cat((-second, first), dim=-1)  # (..., T, d)
    return x * emb.cos() + rotate_half * emb.sin()


@SETTINGS
@given(rope_inputs())
def test_half_split_rope_equals_the_rotate_half_formula(inputs):
    q, _, positions = inputs
    torch.testing.assert_close(
        apply_rotary(q, positions, interleaved=False), _rotate_half_rotary(q, positions)
    )


def _interleaved_to_half_split(d: int) -> torch.Tensor:
    """Feature order that puts the first member of each interleaved pair in the first half:
    0, 2, 4, ..., d - 2, then 1, 3, ..., d - 1."""
    return torch.tensor([*range(0, d, 2), *range(1, d, 2)])


@SETTINGS
@given(rope_inputs())
def test_the_two_layouts_agree_up_to_a_fixed_permutation(inputs):
    q, _, positions = inputs
    perm = _interleaved_to_half_split(q.shape[-1])
    interleaved = apply_rotary(q, positions, interleaved=True)
    half_split = apply_rotary(q[..., perm], positions, interleaved=False)
    torch.testing.assert_close(half_split, interleaved[..., perm])


@SETTINGS
@given(st.integers(1, 3), st.integers(1, 4), st.integers(1, 5), st.integers(0, 2**31 - 1))
def test_hugging_faces_weight_permutation_turns_meta_weights_into_half_split_ones(n_heads, half, T, seed):
    """Hugging Face converts Meta's Llama checkpoints by permuting the rows of each head's
    q and k projection weights (nn.Linear stores W^T, one row per output feature); with those
    weights, half-split RoPE gives the scores that interleaved RoPE gives with Meta's."""
    g = torch.Generator().manual_seed(seed)
    d_head = 2 * half
    C = n_heads * d_head
    x = torch.randn(T, C, generator=g, dtype=torch.float64)
    w_q, w_k = (torch.randn(C, C, generator=g, dtype=torch.float64) for _ in range(2))  # (out, in)

    def hf_permute(w):  # within each head, output rows (2i, 2i+1) go to rows (i, i + d_head/2)
        return w.view(n_heads, half, 2, C).transpose(1, 2).reshape(C, C)

    def scores(w_q, w_k, interleaved):
        q = (x @ w_q.T).view(T, n_heads, d_head).transpose(0, 1)  # (T, C) -> (H, T, d_head)
        k = (x @ w_k.T).view(T, n_heads, d_head).transpose(0, 1)
        return apply_rotary(q, interleaved=interleaved) @ apply_rotary(k, interleaved=interleaved).mT

    meta = scores(w_q, w_k, interleaved=True)
    torch.testing.assert_close(scores(hf_permute(w_q), hf_permute(w_k), interleaved=False), meta)


@SETTINGS
@given(rope_inputs(min_d=4, min_T=2))
def test_mixing_the_layouts_changes_the_scores_of_tokens_at_different_positions(inputs):
    q, k, _ = inputs
    T = q.shape[-2]
    positions = torch.arange(T)
    right = apply_rotary(q, positions) @ apply_rotary(k, positions).mT
    wrong = apply_rotary(q, positions, interleaved=False) @ apply_rotary(k, positions, interleaved=False).mT
    same_position = torch.eye(T, dtype=torch.bool)
    # a query and a key at one position turn by the same angles: q . k in either layout
    torch.testing.assert_close(wrong[..., same_position], right[..., same_position])
    assert (right - wrong)[..., ~same_position].abs().max() > 1e-6 * right.abs().max()


def test_positions_default_to_arange_and_an_offset_continues_the_sequence():
    """A KV cache rotates new tokens at positions start, start + 1, ...: the same result as
    rotating the whole sequence and keeping its last rows."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 3, 10, 8, generator=g, dtype=torch.float64)  # (B, H, T, d)
    torch.testing.assert_close(apply_rotary(x), apply_rotary(x, torch.arange(10)))
    start = 7
    torch.testing.assert_close(
        apply_rotary(x[..., start:, :], torch.arange(start, 10)), apply_rotary(x)[..., start:, :]
    )


def test_one_offset_per_sequence_broadcasts_over_heads():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 3, 4, 6, generator=g, dtype=torch.float64)  # (B, H, T, d)
    offsets = torch.tensor([0, 5])
    positions = offsets[:, None, None] + torch.arange(4)  # (B, 1, T)
    rotated = apply_rotary(x, positions)
    for b in range(2):
        torch.testing.assert_close(rotated[b], apply_rotary(x[b], torch.arange(4) + offsets[b]))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_rope_keeps_the_dtype_and_is_close_to_float64(dtype):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(6, 16, generator=g, dtype=torch.float64)
    positions = torch.arange(1000, 1006)
    rotated = apply_rotary(x.to(dtype), positions)
    assert rotated.dtype == dtype
    tolerance = {torch.float16: 1e-2, torch.bfloat16: 3e-2, torch.float32: 1e-5}[dtype]
    torch.testing.assert_close(rotated.double(), apply_rotary(x, positions), atol=tolerance, rtol=tolerance)


@pytest.mark.parametrize(
    ("x", "positions", "error", "message"),
    [
        (torch.zeros(3, 5), None, ValueError, r"last dimension d = 5 must be even"),
        (torch.zeros(4), None, ValueError, r"x must have at least 2 dimensions, got shape \(4,\)"),
        (torch.zeros(3, 4, dtype=torch.int64), None, TypeError, "x must have a floating dtype"),
        ([[1.0, 2.0]], None, TypeError, "x must be a torch.Tensor"),
        (
            torch.zeros(3, 4),
            torch.arange(4),
            ValueError,
            r"positions has shape \(4,\), expected \(T,\) = \(3,\)",
        ),
        (torch.zeros(3, 4), torch.arange(3)[:, None], ValueError, r"positions has shape \(3, 1\)"),
        (torch.zeros(3, 4), torch.tensor(2), ValueError, r"positions has shape \(\)"),
        (
            torch.zeros(2, 3, 4),
            torch.zeros(5, 3, dtype=torch.int64),
            ValueError,
            r"broadcasts to x's \(\.\.\., T\)",
        ),
        (
            torch.zeros(3, 4),
            torch.ones(3, dtype=torch.bool),
            TypeError,
            "positions must have an integer or floating",
        ),
        (torch.zeros(3, 4), [0, 1, 2], TypeError, "positions must be a torch.Tensor or None"),
    ],
)
def test_rope_rejects_bad_input_naming_the_argument(x, positions, error, message):
    with pytest.raises(error, match=message):
        apply_rotary(x, positions)


# ALiBi ---------------------------------------------------------------------------------------


def test_slopes_for_8_heads_are_the_papers_sequence():
    """'For our models with 8 heads, the slopes that we used are the geometric sequence:
    1/2^1, 1/2^2, ..., 1/2^8.' (Press et al., 2022, section 3)"""
    expected = torch.tensor([1 / 2**1, 1 / 2**2, 1 / 2**3, 1 / 2**4, 1 / 2**5, 1 / 2**6, 1 / 2**7, 1 / 2**8])
    torch.testing.assert_close(alibi_slopes(8), expected, rtol=0, atol=0)


def test_slopes_for_16_heads_interpolate_the_8_head_ones():
    """'... we interpolate those 8 slopes by geometrically averaging every consecutive pair,
    resulting in ... 1/2^0.5, 1/2^1, 1/2^1.5, ..., 1/2^8.'"""
    eight = [1 / 2**k for k in range(1, 9)]
    between = [math.sqrt(1 / 2**k * 1 / 2 ** (k - 1)) for k in range(1, 9)]  # 1/2^0 = 1 before the first
    expected = [value for pair in zip(between, eight, strict=True) for value in pair]
    torch.testing.assert_close(alibi_slopes(16), torch.tensor(expected, dtype=torch.float32))


@pytest.mark.parametrize("n", [1, 2, 4, 32, 64])
def test_slopes_for_a_power_of_two_start_at_and_step_by_2_to_the_minus_8_over_n(n):
    """'In general, for n heads, our set of slopes is the geometric sequence that starts at
    2^(-8/n) and uses that same value as its ratio.'"""
    start = 2 ** (-8 / n)
    expected = torch.tensor([start * start**h for h in range(n)], dtype=torch.float32)
    torch.testing.assert_close(alibi_slopes(n), expected)


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        # the 4-head slopes, then the 1st and 3rd of the 8-head slopes
        (6, [1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2, 1 / 8]),
        # the 8-head slopes, then the 1st, 3rd, 5th and 7th of the 16-head slopes
        (12, [*(1 / 2**k for k in range(1, 9)), 2**-0.5, 2**-1.5, 2**-2.5, 2**-3.5]),
        (3, [1 / 16, 1 / 256, 1 / 4]),
    ],
)
def test_slopes_for_other_head_counts_follow_the_reference_code(n, expected):
    torch.testing.assert_close(alibi_slopes(n), torch.tensor(expected, dtype=torch.float32))


@pytest.mark.parametrize(("H", "L", "S"), [(1, 1, 1), (4, 5, 5), (3, 2, 7), (8, 6, 3)])
def test_bias_is_minus_slope_times_distance(H, L, S):
    slopes = alibi_slopes(H)
    bias = alibi_bias(H, L, S)
    assert bias.shape == (H, L, S) and bias.dtype == torch.float32
    for h in range(H):
        for i in range(L):
            for j in range(S):
                assert bias[h, i, j].item() == pytest.approx(-slopes[h].item() * abs(i - j), abs=1e-7)


def test_causal_rows_are_the_papers_bias():
    """Query i (1-based) sees keys 1..i with the bias m * [-(i-1), ..., -2, -1, 0]."""
    H, T = 4, 6
    bias = alibi_bias(H, T)
    slopes = alibi_slopes(H)
    for h in range(H):
        for i in range(1, T + 1):
            paper = slopes[h] * torch.tensor([-(i - j) for j in range(1, i + 1)], dtype=torch.float32)
            torch.testing.assert_close(bias[h, i - 1, :i], paper)


def test_causal_weights_equal_those_of_the_reference_codes_bias():
    """The authors' code adds m * j (the key's position) to every row, then the causal mask;
    that differs from -m (i - j) by m * i along each row, which the softmax ignores."""
    H, T, d = 8, 7, 4
    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(H, T, d, generator=g, dtype=torch.float64) for _ in range(3))
    future = torch.triu(torch.full((T, T), float("-inf"), dtype=torch.float64), diagonal=1)
    reference_code = alibi_slopes(H).double()[:, None, None] * torch.arange(T, dtype=torch.float64) + future
    ours = alibi_bias(H, T).double().masked_fill(~causal_mask(T), float("-inf"))
    _, expected = scaled_dot_product_attention(q, k, v, attn_mask=reference_code)
    _, weights = scaled_dot_product_attention(q, k, v, attn_mask=ours)
    torch.testing.assert_close(weights, expected)


@SETTINGS
@given(
    st.integers(1, 3),
    st.integers(1, 9),
    st.integers(1, 6),
    st.integers(1, 6),
    st.integers(1, 8),
    st.booleans(),
    st.integers(0, 2**31 - 1),
)
def test_alibi_as_mask_matches_pytorch(B, H, L, S, d, causal, seed):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, L, d, generator=g, dtype=torch.float64)
    k = torch.randn(B, H, S, d, generator=g, dtype=torch.float64)
    v = torch.randn(B, H, S, d, generator=g, dtype=torch.float64)
    mask = alibi_bias(H, L, S).double()  # (H, L, S), broadcast over B
    if causal:
        mask = mask.masked_fill(~causal_mask(L, S), float("-inf"))
    output, _ = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(output, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


def test_the_last_rows_are_the_bias_of_queries_after_a_cache():
    """Queries at positions S - L .. S - 1 against keys 0 .. S - 1."""
    H, L, S = 4, 2, 9
    slopes = alibi_slopes(H)
    rows = alibi_bias(H, S)[:, -L:]
    for i, position in enumerate(range(S - L, S)):
        expected = -slopes[:, None] * (position - torch.arange(S)).abs()
        torch.testing.assert_close(rows[:, i], expected)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0, 4), "num_heads must be an int of at least 1, got 0"),
        ((True, 4), "num_heads must be an int of at least 1, got True"),
        ((2.0, 4), "num_heads must be an int of at least 1, got 2.0"),
        ((2, 0), "L must be an int of at least 1, got 0"),
        ((2, 3, -1), "S must be an int of at least 1, got -1"),
    ],
)
def test_alibi_rejects_bad_sizes_naming_the_argument(args, message):
    with pytest.raises(ValueError, match=message):
        alibi_bias(*args)
    if len(args) == 2 and "num_heads" in message:
        with pytest.raises(ValueError, match=message):
            alibi_slopes(args[0])


# RoPE at given frequencies -------------------------------------------------------------------


@SETTINGS
@given(rope_inputs(), st.booleans())
def test_rope_at_its_own_frequencies_is_rope(inputs, interleaved):
    q, _, positions = inputs
    theta = rope_frequencies(q.shape[-1], 500.0)
    torch.testing.assert_close(
        apply_rotary(q, positions, frequencies=theta, interleaved=interleaved),
        apply_rotary(q, positions, base=500.0, interleaved=interleaved),
        rtol=0,
        atol=0,
    )


@pytest.mark.parametrize("interleaved", [True, False])
def test_rope_at_any_frequencies_against_numpy(interleaved):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 5, 8, dtype=torch.float64, generator=g)
    theta = torch.tensor([0.9, 0.31, 0.05, 0.0007], dtype=torch.float64)  # not RoPE's
    positions = torch.tensor([0.0, 0.5, 2.0, 17.25, 300.0])
    expected = positions_reference.rotate(x.numpy(), positions.numpy(), interleaved, theta=theta.numpy())
    np.testing.assert_allclose(
        apply_rotary(x, positions, frequencies=theta, interleaved=interleaved).numpy(), expected, atol=1e-12
    )


def test_rope_frequencies_are_the_papers():
    for d, base in ((2, 10000.0), (8, 10.0), (128, 500000.0)):
        np.testing.assert_allclose(
            rope_frequencies(d, base).numpy(), positions_reference.frequencies(d, base), rtol=1e-13
        )


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: apply_rotary(torch.ones(3, 4), frequencies=torch.ones(3)), ValueError, r"expected \(2,\)"),
        (lambda: apply_rotary(torch.ones(3, 4), frequencies=torch.zeros(2)), ValueError, "positive"),
        (lambda: apply_rotary(torch.ones(3, 4), frequencies=[1.0, 0.1]), TypeError, "frequencies"),
        (lambda: apply_rotary(torch.ones(3, 4), base=1.0), ValueError, "base must be above 1"),
        (lambda: rope_frequencies(7), ValueError, "d must be even"),
        (lambda: rope_frequencies(0), ValueError, "d must be an int of at least 2"),
        (lambda: rope_frequencies(8, base=float("inf")), ValueError, "base must be a finite number"),
    ],
)
def test_bad_frequencies_are_named(call, error, words):
    with pytest.raises(error, match=words):
        call()
