"""mental_model/qkv_shapes.py: the shape of every matrix in one head."""

from tests.printed import flag, line_after


def test_qkv_shapes_prints_every_shape(printed):
    T, C, d_k, d_v = 5, 8, 4, 6
    expected = {
        "X": (T, C),
        "W_Q": (C, d_k),
        "W_K": (C, d_k),
        "W_V": (C, d_v),
        "Q": (T, d_k),
        "K": (T, d_k),
        "V": (T, d_v),
        "Q K^T / sqrt(d_k)": (T, T),
        "weights": (T, T),
        "output": (T, d_v),
    }
    # The names are printed right-aligned, 17 characters wide.
    shown = {name: line_after(printed, f"{name:>17}: ") for name in expected}
    assert shown == {name: str(shape) for name, shape in expected.items()}
    assert line_after(printed, "d_k, the width of queries and keys:").strip() == str(d_k)
    assert flag(printed, "same as PyTorch:")
