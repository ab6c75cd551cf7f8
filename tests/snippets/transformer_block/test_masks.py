"""What True means in a boolean mask, computed: F.scaled_dot_product_attention takes this site's
mask as it is (its documentation: "a value of True indicates that the element *should* take part in
attention"); nn.MultiheadAttention reads True as blocked ("a ``True`` value indicates that the
corresponding position is not allowed to attend"), so with the same mask each query sees only the
later keys and the last query none. Checked against attention written out in float64."""

import numpy as np

from tests.support.printed import assert_shows, printed_flags, rounded
from tests.support.reference import as64, attention, causal, multihead_attention

FLOAT32 = 1e-5  # float32 attention on a few numbers of size about 1: far below this


def test_the_function_takes_this_sites_mask_as_it_is(values, printed):
    T = values["T"]
    q, k, v = (as64(values[name]) for name in ("q", "k", "v"))
    expected, _ = attention(q, k, v, causal(T))
    for name in ("ours", "sdpa"):
        np.testing.assert_allclose(as64(values[name]), expected, atol=FLOAT32, err_msg=name)
    assert printed_flags(printed) == [True]


def test_the_module_reads_true_as_blocked(values, printed):
    T, H = values["T"], values["H"]
    x, state = as64(values["x"]), values["mha"].state_dict()
    as_is, inverted = as64(values["as_is"])[0], as64(values["inverted"])[0]
    # The module averages its heads' weights by default: the reference's, averaged.
    with np.errstate(invalid="ignore", divide="ignore"):
        blocked = multihead_attention(x, state, H, ~causal(T))["weights"][0].mean(axis=0)
    allowed = multihead_attention(x, state, H, causal(T))["weights"][0].mean(axis=0)
    np.testing.assert_allclose(inverted, allowed, atol=FLOAT32)
    assert np.isnan(as_is[-1]).all() and not np.isnan(as_is[:-1]).any()  # the last query sees nothing
    np.testing.assert_allclose(as_is[:-1], blocked[:-1], atol=FLOAT32)
    assert (np.tril(as_is[:-1]) == 0).all()  # no weight on itself or an earlier key
    assert_shows(printed, rounded(as_is, 2) + rounded(inverted, 2))
