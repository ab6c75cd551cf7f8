"""mental_model/multihead.py: two heads commit to two tokens, one head splits its weight, against
PyTorch's own nn.MultiheadAttention and float64 NumPy."""

from __future__ import annotations

import numpy as np
import torch

from tests.support.float32_attention_bounds import assert_within, float32_attention, product_error
from tests.support.printed import assert_shown
from tests.support.reference import as64


def _torch_mha(values, num_heads: int) -> torch.nn.MultiheadAttention:
    """PyTorch's own module, in float64, with the snippet's matrices (x @ W convention)."""
    W_Q, W_K, W_V, W_O = (values[name].double() for name in ("W_Q", "W_K", "W_V", "W_O"))
    C = values["C"]
    mha = torch.nn.MultiheadAttention(C, num_heads, bias=False, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([W_Q.T, W_K.T, W_V.T]))  # nn.Linear stores W^T
        mha.out_proj.weight.copy_(W_O.T)
    return mha


def _exact(values, num_heads: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """PyTorch's float64 (output, weights) of the snippet's module, and bounds on the error of
    float32 ones: each head's attention bounded as in `float32_attention`, then the output projection."""
    X = as64(values["X"])[0]  # (T, C)
    W_Q, W_K, W_V, W_O = (as64(values[name]) for name in ("W_Q", "W_K", "W_V", "W_O"))
    C = X.shape[-1]
    d = C // num_heads
    sizes = [np.abs(X) @ np.abs(W) for W in (W_Q, W_K, W_V)]
    heads = [
        float32_attention(
            *(P[:, h * d : (h + 1) * d] for P in (X @ W_Q, X @ W_K, X @ W_V)),
            rounds=C,
            sizes=[size[:, h * d : (h + 1) * d] for size in sizes],
        )
        for h in range(num_heads)
    ]
    concat = np.concatenate([head.output for head in heads], axis=-1)
    concat_error = np.concatenate([head.output_error for head in heads], axis=-1)
    output_error = concat_error @ np.abs(W_O) + product_error(np.abs(concat) + concat_error, W_O)
    weights_error = np.stack([head.weights_error for head in heads])
    x = values["X"].double()
    with torch.no_grad():
        output, weights = _torch_mha(values, num_heads)(x, x, x, average_attn_weights=False)
    # Two independent float64 references agree: PyTorch's module and the heads written out here.
    np.testing.assert_allclose(output[0].numpy(), concat @ W_O, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(weights[0].numpy(), np.stack([head.weights for head in heads]), atol=1e-12)
    return output.numpy(), weights.numpy(), output_error[None], weights_error[None]


def test_shapes(values):
    T, C, H = len(values["tokens"]), values["C"], values["num_heads"]
    assert values["X"].shape == (1, T, C)
    assert values["weights"].shape == (1, H, T, T) and values["output"].shape == (1, T, C)
    assert values["weights_1"].shape == (1, 1, T, T) and values["output_1"].shape == (1, T, C)


def test_outputs_and_weights_are_pytorchs(values):
    for suffix, num_heads in [("", values["num_heads"]), ("_1", 1)]:
        output, weights, output_error, weights_error = _exact(values, num_heads)
        assert_within(values[f"weights{suffix}"], weights, weights_error, f"weights{suffix}")
        assert_within(values[f"output{suffix}"], output, output_error, f"output{suffix}")


def test_two_heads_commit_to_two_tokens_one_head_splits_its_weight(values):
    tokens = values["tokens"]
    she = tokens.index("she")
    _, weights, _, weights_error = _exact(values, values["num_heads"])
    _, weights_1, _, _ = _exact(values, 1)
    tops = []
    for h, row in enumerate(weights[0, :, she]):
        top = int(row.argmax())
        # The winner leads by more than rounding could undo, so the snippet names the same token.
        assert row[top] - np.delete(row, top).max() > 2 * weights_error[0, h, she].max()
        assert int(values["weights"][0, h, she].argmax()) == top
        tops.append(tokens[top])
    # What the page says: head 0 finds the female name, head 1 the verb; read off the features.
    X, col = as64(values["X"])[0], values["col"]
    (female_name,) = np.flatnonzero((X[:, col["name"]] == 1) & (X[:, col["female"]] == 1))
    (verb,) = np.flatnonzero(X[:, col["verb"]] == 1)
    assert tops == [tokens[female_name], tokens[verb]]
    # One head splits the weight of 'she' between Alice and met; two heads each commit to one.
    assert weights_1[0, 0, she, :2].max() < 0.5 < weights[0, :, she].max(axis=-1).min()


def test_prints_the_shapes_and_the_rows_of_she(printed, values):
    she = values["tokens"].index("she")
    weights, output = values["weights"][0], values["output"][0]
    assert_shown(printed, values["X"].shape, values["weights"].shape)
    assert_shown(
        printed,
        *(weights[h, she] for h in range(len(weights))),
        output[she],
        values["weights_1"][0, 0, she],
        values["output_1"][0, she],
        decimals=3,
    )


def test_multihead_leaves_a_figure_to_render(figure):
    assert all(ax.get_title() for ax in figure.axes if ax.get_images())
