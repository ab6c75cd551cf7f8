"""attn_ref.rope_scaling against its sources written out in float64 NumPy
(tests/support/rope_scaling_reference.py), on the page's model and four shipped configurations,
and against properties the methods must have: at factor 1 every method is plain RoPE; none speeds a
pair up; stretched frequencies keep RoPE relative; position interpolation is dividing the positions.

The functions compute in float64, so rtol 1e-12 (reference.RTOL) is far above their rounding.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attn_ref.positional import apply_rotary, rope_frequencies
from attn_ref.rope_scaling import (
    interpolated_frequencies,
    llama3_frequencies,
    ntk_aware_base,
    ntk_aware_frequencies,
    ramp,
    rotations,
    wavelengths,
    yarn_attention_scale,
    yarn_frequencies,
)
from tests.support import rope_scaling_reference as ref
from tests.support.rope_scaling_reference import CONFIGS, RTOL

SETTINGS = settings(max_examples=40, deadline=None)
EVERY = pytest.mark.parametrize(("d", "base", "L", "s"), list(CONFIGS.values()), ids=list(CONFIGS))


@EVERY
def test_wavelengths_and_rotations(d, base, L, s):
    theta = ref.rope_theta(d, base)
    np.testing.assert_allclose(wavelengths(rope_frequencies(d, base)).numpy(), 2 * np.pi / theta, rtol=RTOL)
    np.testing.assert_allclose(
        rotations(rope_frequencies(d, base), L).numpy(), L * theta / (2 * np.pi), rtol=RTOL
    )


@EVERY
def test_position_interpolation(d, base, L, s):
    theta = rope_frequencies(d, base)
    expected = ref.interpolation(ref.rope_theta(d, base), s)
    np.testing.assert_allclose(interpolated_frequencies(theta, s).numpy(), expected, rtol=RTOL)


@SETTINGS
@given(
    st.integers(1, 8).map(lambda pairs: 2 * pairs),
    st.floats(1.0, 64.0),
    st.lists(st.integers(0, 5000), min_size=1, max_size=6),
)
def test_position_interpolation_is_dividing_the_positions(d, s, positions):
    """Chen et al.'s f(x, m L / L'): turning at theta / s at m is turning at theta at m / s."""
    g = torch.Generator().manual_seed(d)
    x = torch.randn(2, len(positions), d, dtype=torch.float64, generator=g)
    theta = rope_frequencies(d, 100.0)
    p = torch.tensor(positions)
    slow = apply_rotary(x, p, frequencies=interpolated_frequencies(theta, s))
    torch.testing.assert_close(slow, apply_rotary(x, p.double() / s, frequencies=theta), rtol=0, atol=1e-9)


@EVERY
def test_ntk_aware(d, base, L, s):
    assert ntk_aware_base(d, s, base) == pytest.approx(base * s ** (d / (d - 2)), rel=RTOL)
    ours = ntk_aware_frequencies(d, s, base).numpy()
    np.testing.assert_allclose(ours, ref.ntk_aware(d, base, s), rtol=RTOL)
    ratio = ours / ref.rope_theta(d, base)
    assert ratio[0] == 1.0  # the highest frequency, b'^0, left exactly as it was
    assert ratio[-1] == pytest.approx(1 / s, rel=RTOL)  # the lowest slowed by s, as in PI
    i = np.arange(d // 2)
    np.testing.assert_allclose(ratio, s ** (-2.0 * i / (d - 2)), rtol=RTOL)  # s^(2i/(d-2)), by hand


def test_ramp_by_hand():
    r = torch.tensor([0.0, 0.999, 1.0, 16.5, 32.0, 32.001, 1e6], dtype=torch.float64)
    gamma = ramp(r, 1.0, 32.0)
    assert gamma.tolist()[:3] == [0.0, 0.0, 0.0] and gamma.tolist()[4:] == [1.0, 1.0, 1.0]
    assert gamma[3].item() == pytest.approx(15.5 / 31, rel=RTOL)


@EVERY
@pytest.mark.parametrize(("alpha", "beta"), [(1.0, 32.0), (1.0, 4.0), (0.5, 2.0)])
def test_yarn_by_rotations_is_the_papers_equation_20(d, base, L, s, alpha, beta):
    theta = rope_frequencies(d, base)
    ours = yarn_frequencies(theta, s, L, alpha=alpha, beta=beta, by="rotations").numpy()
    np.testing.assert_allclose(ours, ref.yarn_paper(ref.rope_theta(d, base), L, s, alpha, beta), rtol=RTOL)
    r = rotations(theta, L).numpy()
    assert (ours[r > beta] == theta.numpy()[r > beta]).all()  # kept exactly


@EVERY
@pytest.mark.parametrize("truncate", [True, False])
def test_yarn_by_pairs_is_the_authors_code(d, base, L, s, truncate):
    ours = yarn_frequencies(rope_frequencies(d, base), s, L, truncate=truncate).numpy()
    np.testing.assert_allclose(ours, ref.yarn_authors(d, base, L, s, truncate=truncate), rtol=RTOL)


def test_yarn_rounds_by_default_as_the_authors_code():
    theta = rope_frequencies(128, 10000.0)
    assert torch.equal(yarn_frequencies(theta, 16, 4096), yarn_frequencies(theta, 16, 4096, truncate=True))
    assert not torch.equal(
        yarn_frequencies(theta, 16, 4096), yarn_frequencies(theta, 16, 4096, truncate=False)
    )


def test_yarn_paper_and_code_agree_outside_the_ramp_and_differ_inside():
    d, base, L, s = CONFIGS["Llama 2 7B"]
    paper, code = ref.yarn_paper(ref.rope_theta(d, base), L, s), ref.yarn_authors(d, base, L, s)
    theta = rope_frequencies(d, base)
    r = rotations(theta, L).numpy()
    outside = (r > 32) | (r < 1)
    np.testing.assert_allclose(paper[outside], code[outside], rtol=RTOL)
    assert np.max(code / paper) > 1.5  # inside, the code keeps more of some pairs
    ours_paper = yarn_frequencies(theta, s, L, by="rotations").numpy()
    ours_code = yarn_frequencies(theta, s, L).numpy()
    np.testing.assert_allclose(ours_code / ours_paper, code / paper, rtol=1e-11)


@EVERY
@pytest.mark.parametrize(("low", "high"), [(1.0, 4.0), (2.0, 8.0)])
def test_llama3_is_metas_apply_scaling(d, base, L, s, low, high):
    ours = llama3_frequencies(rope_frequencies(d, base), s, L, low_freq_factor=low, high_freq_factor=high)
    expected = ref.llama3_apply_scaling(ref.rope_theta(d, base), s, low, high, L)
    np.testing.assert_allclose(ours.numpy(), expected, rtol=RTOL)


def test_llama31_bands_by_wavelength():
    """Llama 3.1 8B: head size 128, base 500000, 8192 positions, factor 8 (the defaults)."""
    theta = rope_frequencies(128, 500000.0)
    lam = 2 * np.pi / ref.rope_theta(128, 500000.0)
    ratio = (llama3_frequencies(theta) / theta).numpy()
    assert ((ratio == 1.0) == (lam < 8192 / 4)).all()
    assert ((ratio == 1 / 8) == (lam > 8192)).all()
    middle = (lam >= 2048) & (lam <= 8192)
    assert middle.sum() > 0 and ((ratio[middle] > 1 / 8) & (ratio[middle] < 1)).all()


def test_yarn_attention_scale():
    for s in (1.0, 2.0, 8.0, 32.0):
        assert yarn_attention_scale(s) == pytest.approx(0.1 * math.log(s) + 1.0, rel=1e-15)
    assert yarn_attention_scale(8.0) == pytest.approx(1.208, abs=5e-4)  # the paper's equation 25


@SETTINGS
@given(st.integers(2, 64).map(lambda pairs: 2 * pairs), st.floats(1.5, 1e6), st.integers(4, 100_000))
def test_at_factor_1_every_method_is_plain_rope(d, base, L):
    theta = rope_frequencies(d, base)
    for stretched in (
        interpolated_frequencies(theta, 1),
        ntk_aware_frequencies(d, 1, base),
        yarn_frequencies(theta, 1, L),
        yarn_frequencies(theta, 1, L, by="rotations"),
        llama3_frequencies(theta, 1, L),
    ):
        np.testing.assert_allclose(stretched.numpy(), theta.numpy(), rtol=RTOL)
    assert yarn_attention_scale(1) == 1.0


@SETTINGS
@given(
    st.integers(2, 64).map(lambda pairs: 2 * pairs),
    st.floats(1.5, 1e6),
    st.integers(4, 100_000),
    st.floats(1.0, 64.0),
)
def test_no_method_speeds_a_pair_up_or_slows_it_past_the_factor(d, base, L, s):
    theta = rope_frequencies(d, base)
    for stretched in (
        interpolated_frequencies(theta, s),
        ntk_aware_frequencies(d, s, base),
        yarn_frequencies(theta, s, L),
        yarn_frequencies(theta, s, L, truncate=False),
        yarn_frequencies(theta, s, L, by="rotations"),
        llama3_frequencies(theta, s, L),
    ):
        ratio = (stretched / theta).numpy()
        assert (ratio <= 1 + RTOL).all() and (ratio >= 1 / s - RTOL).all()


@SETTINGS
@given(st.integers(2, 16).map(lambda pairs: 2 * pairs), st.floats(1.0, 32.0), st.integers(0, 10_000))
def test_stretched_frequencies_keep_rope_relative(d, s, shift):
    """The score of a query at m and a key at n depends on m - n only, whatever the frequencies."""
    g = torch.Generator().manual_seed(d)
    q, k = torch.randn(2, 1, d, dtype=torch.float64, generator=g)
    theta = yarn_frequencies(rope_frequencies(d, 100.0), s, 32)

    def score(m, n):
        qm = apply_rotary(q, torch.tensor([m]), frequencies=theta)
        kn = apply_rotary(k, torch.tensor([n]), frequencies=theta)
        return (qm @ kn.T).item()

    assert score(7 + shift, 3 + shift) == pytest.approx(score(7, 3), abs=1e-9)


THETA = rope_frequencies(16, 100.0)


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda: interpolated_frequencies(THETA, 0.5), "factor must be at least 1"),
        (lambda: ntk_aware_frequencies(16, 0.99, 100.0), "factor must be at least 1"),
        (lambda: yarn_frequencies(THETA, 0.5, 32), "factor must be at least 1"),
        (lambda: llama3_frequencies(THETA, 0.0, 32), "factor must be at least 1"),
        (lambda: yarn_attention_scale(0.25), "factor must be at least 1"),
        (lambda: interpolated_frequencies(THETA, float("nan")), "factor must be a finite number"),
        (lambda: interpolated_frequencies(THETA, True), "factor must be a finite number"),
        (lambda: yarn_frequencies(THETA, 4, 32, alpha=32, beta=1), "alpha must be below beta"),
        (lambda: yarn_frequencies(THETA, 4, 32, alpha=2, beta=2), "alpha must be below beta"),
        (
            lambda: llama3_frequencies(THETA, 8, 32, low_freq_factor=4, high_freq_factor=1),
            "low_freq_factor must be below high_freq_factor",
        ),
        (lambda: ramp(torch.ones(3), 4.0, 1.0), "low must be below high"),
        (lambda: yarn_frequencies(THETA, 4, 32, alpha=-1.0), "alpha must be above 0"),
        (lambda: yarn_frequencies(THETA, 4, 0), "length must be above 0"),
        (lambda: rotations(THETA, -3), "length must be above 0"),
        (lambda: yarn_frequencies(THETA, 4, 32, by="index"), "by must be one of"),
        (lambda: yarn_frequencies(THETA, 4, 32, by="rotations", truncate=True), "truncate"),
        (lambda: yarn_frequencies(torch.tensor([1.0, 0.5, 0.1]), 4, 32), "geometric"),
        (lambda: yarn_frequencies(torch.tensor([1.0]), 4, 32), "geometric"),
        (lambda: ntk_aware_base(2, 2.0), "d must be an int of at least 4"),
        (lambda: ntk_aware_base(7, 2.0), "d must be even"),
        (lambda: ntk_aware_base(8, 2.0, base=1.0), "base must be above 1"),
        (lambda: interpolated_frequencies(torch.ones(2, 3), 2), r"frequencies has shape \(2, 3\)"),
        (lambda: interpolated_frequencies(-THETA, 2), "frequencies must be finite and positive"),
        (lambda: wavelengths(torch.tensor([1.0, float("inf")])), "frequencies must be finite and positive"),
    ],
)
def test_bad_arguments_are_named(call, words):
    with pytest.raises(ValueError, match=words):
        call()


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda: interpolated_frequencies([1.0, 0.1], 2), r"frequencies must be a torch\.Tensor"),
        (lambda: wavelengths(torch.tensor([1, 2])), "frequencies must have a floating dtype"),
    ],
)
def test_bad_kinds_are_named(call, words):
    with pytest.raises(TypeError, match=words):
        call()
