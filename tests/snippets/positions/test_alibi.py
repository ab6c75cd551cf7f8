"""ALiBi's slopes and mask against the paper (Press et al., 2022, section 3), attention with that
mask against a float64 softmax and PyTorch's, and the bias-only weights against a float64 softmax."""

import numpy as np

from tests.support.positions_reference import dot_rounding
from tests.support.printed import assert_printed_in_order, decimals, exact, significant
from tests.support.reference import EPS32, as64, softmax


def papers_slopes(H: int) -> np.ndarray:
    """'the geometric sequence that starts at 2^(-8/n) and uses that same value as its ratio'."""
    return 2.0 ** (-8 * np.arange(1, H + 1) / H)


def causal_bias(H: int, T: int) -> np.ndarray:
    """-m_h (i - j) for key j <= query i, -inf after the query: (H, T, T)."""
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    bias = -papers_slopes(H)[:, None, None] * (i - j)
    return np.where(j <= i, bias, -np.inf)


def test_slopes_are_the_papers_for_8_heads(values):
    """'For our models with 8 heads, the slopes that we used are the geometric sequence:
    1/2^1, 1/2^2, ..., 1/2^8.'"""
    H = values["H"]
    assert H == 8
    np.testing.assert_array_equal(papers_slopes(H), [1 / 2**k for k in range(1, 9)])
    # Query 1 against key 0: minus the slope of each head, exactly (powers of two).
    np.testing.assert_array_equal(-values["mask"][:, 1, 0].numpy(), papers_slopes(H))


def test_mask_is_minus_the_slope_times_the_distance_below_the_diagonal(values):
    for mask in (values["mask"], values["flat"]):  # the attention example's, and the plot's
        H, T, _ = mask.shape
        np.testing.assert_array_equal(mask.numpy(), causal_bias(H, T))  # exact: powers of two times ints


def test_attn_ref_and_pytorch_agree_with_a_float64_softmax(values):
    q, k, v, mask = (as64(values[name]) for name in ("q", "k", "v", "mask"))
    d_k, T = q.shape[-1], q.shape[-2]
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(d_k) + mask
    weights = softmax(scores)
    expected = weights @ v
    # float32: each score off by its dot product's rounding, plus the addition of the bias; a
    # weight then moves by at most 2 delta of its size, and the output sums T weighted values.
    zero = np.zeros_like(q)
    delta = dot_rounding(q, k, zero, zero, EPS32) / np.sqrt(d_k) + EPS32 * np.abs(
        np.where(mask > -np.inf, scores, 0)
    )
    delta = delta.max(axis=-1, keepdims=True)  # per query
    weight_error = weights * (2 * delta + (T + 2) * EPS32)
    output_error = (2 * delta + (2 * T + 2) * EPS32) * (weights @ np.abs(v))
    np.testing.assert_array_less(np.abs(as64(values["w"]) - weights), weight_error + 1e-300)
    for name in ("out", "ref"):  # attn_ref's output, and PyTorch's
        assert (np.abs(as64(values[name]) - expected) <= 2 * output_error).all(), name


def test_bias_only_weights_of_the_last_query(values):
    flat, kept = values["flat"], values["kept"]  # head: the weight its last query keeps on itself
    H, T, _ = flat.shape
    assert sorted(kept) == [0, H - 1]
    for h, weight in kept.items():
        distance = np.arange(T - 1, -1, -1)  # from the last query to keys 0 .. T - 1
        expected = softmax(-papers_slopes(H)[h] * distance)[-1]
        assert abs(weight - expected) <= (T + 3) * EPS32


def test_prints_the_slopes_the_mask_the_agreement_and_the_weights(values, printed):
    mask, flat, kept = values["mask"], values["flat"], values["kept"]
    expected = [decimals(-s, 4) for s in mask[:, 1, 0].tolist()]  # the slopes
    expected += [exact(b) if b == -np.inf else decimals(b, 4) for b in mask[0].flatten().tolist()]
    expected += [significant((values["out"] - values["ref"]).abs().max().item(), 2)]
    for h, weight in kept.items():
        expected += [exact(h), significant(-flat[h, 1, 0].item(), 6), decimals(weight, 3)]
    assert_printed_in_order(printed, expected)
