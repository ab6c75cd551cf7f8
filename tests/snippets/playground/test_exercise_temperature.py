"""playground/exercise_temperature.py: from nearly one-hot weights to nearly uniform ones, at the
two ends of the playground's slider and far beyond its right end."""

import re

import numpy as np

from sitelook.project import ROOT
from tests.support.float32_attention_bounds import assert_within, float32_attention
from tests.support.printed import assert_shown
from tests.support.reference import as64

SCRIPT = ROOT / "docs" / "javascripts" / "playground.js"


def slider_ends() -> tuple[float, float]:
    """The smallest and largest tau of the playground's slider, read from its script."""
    steps = re.search(r"TAU_STEPS = \{ min: (-?\d+), max: (-?\d+), perOctave: (\d+) \}", SCRIPT.read_text())
    low, high, per_octave = (int(x) for x in steps.groups())
    return 2 ** (low / per_octave), 2 ** (high / per_octave)  # the slider holds per_octave log2(tau)


def test_weights_and_outputs_at_every_temperature(values):
    q, K, V = (as64(values[name]) for name in ("q", "K", "V"))
    dots = (q @ K.T)[0]
    for tau, (output, weights) in values["results"].items():
        exact = float32_attention(q, K, V, scale=1 / tau)
        assert_within(weights, exact.weights, exact.weights_error, f"weights at tau = {tau}")
        assert_within(output, exact.output, exact.output_error, f"output at tau = {tau}")
        # By hand: w_i / w_j = exp((q . k_i - q . k_j) / tau), so the largest over the smallest
        # weight is exp(spread of q . k / tau).
        w = exact.weights[0]
        np.testing.assert_allclose(w.max() / w.min(), np.exp(np.ptp(dots) / tau), rtol=1e-12)


def test_the_taus_are_the_slider_ends_sqrt_dk_and_far_beyond(values):
    """The answer calls the first and third taus the slider's ends; the second is sqrt(d_k), where
    the playground starts; the last is far beyond the right end."""
    taus = list(values["results"])
    assert (taus[0], taus[2]) == slider_ends()
    assert np.isclose(taus[1], np.sqrt(values["K"].shape[-1]), rtol=1e-15)
    assert taus[-1] > 10 * slider_ends()[1]


def test_low_temperature_picks_v0_and_high_temperature_averages(values):
    V = as64(values["V"])
    S = len(V)
    results = {
        tau: (as64(output)[0], as64(weights)[0]) for tau, (output, weights) in values["results"].items()
    }
    taus = list(results)
    lowest, highest = results[taus[0]][0], results[taus[-1]][0]
    # What the answer says: the ends of the slider approach v0 and the mean of the values.
    assert np.linalg.norm(V - lowest, axis=1).argmin() == 0  # nearest to v0 of all the values
    assert np.linalg.norm(highest - V.mean(axis=0)) < 0.01
    # At the right end the weights are still unequal; only far beyond it are they all close to 1/S.
    right_end, beyond = results[taus[2]][1], results[taus[-1]][1]
    assert right_end.max() / right_end.min() > 1.2
    assert np.abs(beyond - 1 / S).max() < 0.005
    # All the way, the output is a weighted average: inside the values' bounding box.
    for output, _ in results.values():
        assert (V.min(axis=0) <= output).all() and (output <= V.max(axis=0)).all()


def test_prints_the_weights_the_outputs_v0_and_the_mean(printed, values):
    rows = [row[0] for output, weights in values["results"].values() for row in (weights, output)]
    V = as64(values["V"])
    assert_shown(printed, *rows, V[0], V.mean(axis=0))
