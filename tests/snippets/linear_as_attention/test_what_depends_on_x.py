"""linear_as_attention/what_depends_on_x.py: which of q, k, v are fixed, homogeneous or additive in x."""

from tests.printed import flag, line_after


def test_what_depends_on_x_matches_the_algebra(printed):
    table = {name: line_after(printed, f"{name} ").split() for name in ("q", "k", "v")}
    # k is a constant; v(x) = ||x||_1 sign(x) W^T is homogeneous, not additive; q(2x) = q(x).
    assert table == {
        "q": ["False", "False", "False"],
        "k": ["True", "False", "False"],
        "v": ["False", "True", "False"],
    }
    assert flag(printed, "q(2 x1) = q(x1):")
