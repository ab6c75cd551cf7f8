# The construction on one input row: its attention weights, its values, and
# their weighted sum, which is x W^T.
import torch

from attn_ref import scaled_dot_product_attention
from attn_ref.diagrams import arrow, canvas, grid, note
from attn_ref.linear_as_attention import linear_as_attention

x = torch.tensor([[2.0, -1.0, 0.5, 1.5]], dtype=torch.float64)  # (B=1, d_in)
W = torch.tensor(
    [[1.0, 0.0, -1.0, 2.0], [0.0, 1.0, 1.0, -1.0]], dtype=torch.float64
)  # (d_out, d_in), as in torch.nn.Linear
q, k, v, mask = linear_as_attention(
    x, W, generator=torch.Generator().manual_seed(0)
)
y, weights = scaled_dot_product_attention(q, k, v, attn_mask=mask)
print("weights a:", weights[0, 0].numpy().round(3))
print("attention output:", y[0, 0].numpy().round(3))
print("x W^T:           ", (x @ W.T)[0].numpy().round(3))

fig, ax = canvas(10, 9.4)
top = grid(ax, x[0], 1, 1, decimals=1, label="one input row x")
a = grid(ax, weights[0, 0][:, None], 1, 3.6, cmap="viridis", decimals=2)
values = grid(ax, v[0] + 0.0, 3.2, 3.6, decimals=1)  # + 0.0: no "-0.0"
note(ax, 0.7, 5.6, "a", ha="right", fontsize=11)
note(ax, 4.2, 3.25, "values v", fontsize=11)
arrow(ax, (1.5, 2.05), a.top)
arrow(ax, (3.5, 2.05), (4.2, 2.85))
note(ax, 5.6, 4.1, "a_i = |x_i| / ‖x‖₁,\nweights that\nsum to one", ha="left")
note(ax, 5.6, 6.5, "v_i = ‖x‖₁ sign(x_i) w_i,\nw_i: row i of Wᵀ", ha="left")
out = grid(ax, y[0, 0], 3.2, 8.4, decimals=1)
arrow(ax, values.bottom, out.top)
note(ax, 5.6, 8.9, "Σ a_i v_i = x Wᵀ", ha="left")
