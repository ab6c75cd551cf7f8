"""playground/exercise_temperature.py: from nearly one-hot weights to nearly uniform ones, at the
two ends of the playground's slider and far beyond its right end."""

import re

import numpy as np

from attn_ref.examples import LOOKUP_KEYS, LOOKUP_QUERY, LOOKUP_VALUES
from tests.conftest import ROOT
from tests.printed import line_after, numbers
from tests.reference import attention

TAUS = (0.25, 2**0.5, 16.0, 1000.0)
SCRIPT = ROOT / "docs" / "javascripts" / "playground.js"


def slider_ends() -> tuple[float, float]:
    """The smallest and largest tau of the playground's slider, read from its script."""
    steps = re.search(r"TAU_STEPS = \{ min: (-?\d+), max: (-?\d+), perOctave: (\d+) \}", SCRIPT.read_text())
    low, high, per_octave = (int(x) for x in steps.groups())
    return 2 ** (low / per_octave), 2 ** (high / per_octave)  # the slider holds per_octave log2(tau)


def test_low_temperature_picks_v0_and_high_temperature_averages(printed):
    q, K, V = (np.array(x) for x in (LOOKUP_QUERY, LOOKUP_KEYS, LOOKUP_VALUES))
    for tau in TAUS:
        output, weights = attention(q, K, V, scale=1 / tau)
        np.testing.assert_allclose(
            numbers(line_after(printed, f"tau = {tau:.2f}, weights:")), weights[0], atol=6e-5
        )
        np.testing.assert_allclose(
            numbers(line_after(printed, f"tau = {tau:.2f}, output:")), output[0], atol=6e-5
        )
    np.testing.assert_allclose(numbers(line_after(printed, "v0:")), V[0])
    np.testing.assert_allclose(numbers(line_after(printed, "mean of the values:")), V.mean(axis=0), atol=6e-5)
    # What the answer says: the ends of the slider approach v0 and the mean of the values.
    lowest = numbers(line_after(printed, "tau = 0.25, output:"))
    highest = numbers(line_after(printed, "tau = 1000.00, output:"))
    assert np.linalg.norm(V - lowest, axis=1).argmin() == 0  # nearest to v0 of all the values
    assert np.linalg.norm(highest - V.mean(axis=0)) < 0.01


def test_the_first_and_third_taus_are_the_ends_of_the_slider(printed):
    """The answer calls them the slider's ends; at the right end the weights are still unequal,
    and only far beyond it are they all close to 1/S."""
    assert (TAUS[0], TAUS[2]) == slider_ends()
    # The snippet printed these taus, in this order; its last one is far beyond the right end.
    printed_taus = [float(t) for t in re.findall(r"^tau = (\S+), weights:", printed, flags=re.M)]
    assert printed_taus == [round(tau, 2) for tau in TAUS]
    assert printed_taus[-1] > 10 * slider_ends()[1]
    right_end = numbers(line_after(printed, "tau = 16.00, weights:"))
    beyond = numbers(line_after(printed, "tau = 1000.00, weights:"))
    S = len(LOOKUP_KEYS)
    assert right_end.max() / right_end.min() > 1.2  # still unequal
    assert np.abs(beyond - 1 / S).max() < 0.005  # close to 1/S
