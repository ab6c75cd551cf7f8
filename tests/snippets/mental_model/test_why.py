"""mental_model/why.py: the opening picture's arrows are she's weights, as the page's head computes
them (float64 reference), each labelled with its weight and drawn thicker for a larger one."""

from __future__ import annotations

import numpy as np
from matplotlib.patches import FancyArrowPatch

from tests.support.float32_attention_bounds import assert_within, float32_attention
from tests.support.sentence import ALICE, SHE, K, Q, V

EXACT = float32_attention(Q, K, V)


def test_the_arrows_are_shes_weights(pictures):
    assert_within(pictures["to"], EXACT.weights[SHE], EXACT.weights_error[SHE], "she's weights")
    (ax,) = pictures["fig"].axes
    arrows = [p for p in ax.patches if isinstance(p, FancyArrowPatch)]
    assert len(arrows) == SHE  # one to each token before she
    widths = [a.get_linewidth() for a in arrows]
    assert np.argsort(widths).tolist() == np.argsort(EXACT.weights[SHE, :SHE]).tolist()
    assert int(np.argmax(widths)) == ALICE
    written = [float(t.get_text()) for t in ax.texts if t.get_text().replace(".", "").isdigit()]
    np.testing.assert_allclose(written, EXACT.weights[SHE, :SHE], atol=0.005 + EXACT.weights_error[SHE].max())
