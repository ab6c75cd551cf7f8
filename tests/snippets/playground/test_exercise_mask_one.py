"""playground/exercise_mask_one.py: masking one key rescales the others by one common factor."""

import numpy as np

from attn_ref.examples import LOOKUP_KEYS, LOOKUP_QUERY, LOOKUP_VALUES
from tests.printed import flag, line_after, numbers
from tests.reference import attention


def test_masking_key_0_renormalises_the_others(printed):
    q, K, V = (np.array(x) for x in (LOOKUP_QUERY, LOOKUP_KEYS, LOOKUP_VALUES))
    allowed = np.array([[False, True, True, True, True]])
    _, before = attention(q, K, V)
    _, after = attention(q, K, V, allowed=allowed)
    np.testing.assert_allclose(numbers(line_after(printed, "weights, every key:")), before[0], atol=6e-5)
    np.testing.assert_allclose(numbers(line_after(printed, "weights, key 0 masked:")), after[0], atol=6e-5)
    np.testing.assert_allclose(
        numbers(line_after(printed, "other weights / (1 - weight of key 0):")), after[0, 1:], atol=6e-5
    )
    assert flag(printed, "same as masking:")
