"""mental_model/multihead.py: two heads commit to two tokens, one head splits its weight, against
PyTorch's own nn.MultiheadAttention."""

from __future__ import annotations

import numpy as np
import torch

from tests.printed import line_after, numbers
from tests.snippets.mental_model.helpers import alice_tokens


def _torch_mha(num_heads: int) -> torch.nn.MultiheadAttention:
    """PyTorch's own module with the page's hand-set matrices (x @ W convention)."""
    W_Q, W_K, W_V = (torch.zeros(6, 6, dtype=torch.float64) for _ in range(3))
    W_Q[2, 0] = W_Q[2, 1] = 6.0  # head 0: pronoun -> (a name, female)
    W_K[0, 0] = W_K[3, 1] = 1.0
    W_V[4, 0] = W_V[5, 1] = 1.0  # alice, bob
    W_Q[2, 3] = 12.0  # head 1 (columns 3..5): pronoun -> the verb
    W_K[1, 3] = 1.0
    W_V[1, 3] = 1.0
    mha = torch.nn.MultiheadAttention(6, num_heads, bias=False, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([W_Q.T, W_K.T, W_V.T]))
        mha.out_proj.weight.copy_(torch.eye(6))
    return mha


def test_multihead_heads_differ_and_one_head_splits_its_weight(printed):
    x = torch.tensor(alice_tokens())[None]
    names = ["Alice", "met", "Bob", "she"]
    with torch.no_grad():
        output, weights = _torch_mha(2)(x, x, x, average_attn_weights=False)
        output_1, weights_1 = _torch_mha(1)(x, x, x, average_attn_weights=False)
    assert line_after(printed, "X:").split() == ["(1,", "4,", "6)", "weights:", "(1,", "2,", "4,", "4)"]
    for h in range(2):
        line = line_after(printed, f"head {h}: 'she' attends most to ")
        assert line.split(",")[0] == names[int(weights[0, h, 3].argmax())]
        np.testing.assert_allclose(numbers(line.split(",", 1)[1]), weights[0, h, 3], atol=6e-4)
    assert names[int(weights[0, 0, 3].argmax())] != names[int(weights[0, 1, 3].argmax())]
    np.testing.assert_allclose(
        numbers(line_after(printed, "output of 'she' [head 0 | head 1]:")), output[0, 3], atol=6e-4
    )
    np.testing.assert_allclose(
        numbers(line_after(printed, "one head: weights of 'she':")), weights_1[0, 0, 3], atol=6e-4
    )
    np.testing.assert_allclose(
        numbers(line_after(printed, "one head: output of 'she':")), output_1[0, 3], atol=6e-4
    )
    # One head splits the weight of 'she' between Alice and met; two heads each commit to one.
    assert weights_1[0, 0, 3, :2].max() < 0.5 < weights[0, :, 3].max(dim=-1).values.min()


def test_multihead_leaves_a_figure_to_render(figure):
    assert all(ax.get_title() for ax in figure.axes if ax.get_images())
