"""playground/exercise_all_masked.py: NaN from a plain softmax, zeros from attn_ref and PyTorch."""

import numpy as np

from attn_ref.examples import LOOKUP_KEYS, LOOKUP_QUERY, LOOKUP_VALUES
from tests.printed import line_after, numbers
from tests.reference import attention


def test_every_key_masked(printed):
    q, K, V = (np.array(x) for x in (LOOKUP_QUERY, LOOKUP_KEYS, LOOKUP_VALUES))
    output, weights = attention(q, K, V, allowed=np.zeros((1, len(K)), dtype=bool))
    with np.errstate(invalid="ignore"):  # exp(-inf - (-inf)): what a plain softmax computes
        plain = np.exp(np.full(len(K), -np.inf) - np.max(np.full(len(K), -np.inf)))
    assert np.isnan(plain).all()
    assert np.isnan(numbers(line_after(printed, "plain softmax:"))).all()
    np.testing.assert_array_equal(numbers(line_after(printed, "attn_ref weights:")), weights[0])
    np.testing.assert_array_equal(numbers(line_after(printed, "attn_ref output:")), output[0])
    np.testing.assert_array_equal(numbers(line_after(printed, "PyTorch's output:")), output[0])
    assert not output.any()
