"""mental_model/qkv_shapes.py: the shape of every step in one head, and its check against PyTorch."""

from tests.printed import flag, line_after


def test_qkv_shapes_prints_every_shape(printed):
    T, d_k, d_v = 5, 4, 6
    assert line_after(printed, "Q, K, V:").strip() == f"{(T, d_k)} {(T, d_k)} {(T, d_v)}"
    assert line_after(printed, "scores, weights:").strip() == f"{(T, T)} {(T, T)}"
    assert line_after(printed, "output:").strip() == str((T, d_v))
    assert flag(printed, "same as PyTorch:")
