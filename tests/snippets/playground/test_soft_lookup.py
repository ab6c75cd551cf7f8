"""playground/soft_lookup.py: the playground's first state, against float64 NumPy."""

import numpy as np

from attn_ref.examples import LOOKUP_KEYS, LOOKUP_QUERY, LOOKUP_VALUES
from tests.printed import block_after
from tests.reference import attention


def test_soft_lookup_prints_the_first_state(printed):
    q, K, V = (np.array(x) for x in (LOOKUP_QUERY, LOOKUP_KEYS, LOOKUP_VALUES))
    tau = np.sqrt(K.shape[-1])
    output, weights = attention(q, K, V, scale=1 / tau)
    np.testing.assert_allclose(block_after(printed, "q . k, one per key:"), (q @ K.T).ravel(), atol=6e-5)
    np.testing.assert_allclose(
        block_after(printed, "scores (q . k) / tau:"), (q @ K.T / tau).ravel(), atol=6e-5
    )
    np.testing.assert_allclose(block_after(printed, "weights:"), weights.ravel(), atol=6e-5)
    np.testing.assert_allclose(block_after(printed, "output = weights @ V:"), output.ravel(), atol=6e-5)
