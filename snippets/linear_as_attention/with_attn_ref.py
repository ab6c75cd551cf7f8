# --8<-- [start:demo]
# attn_ref.linear_as_attention on a batch with negative entries, zeros and a
# zero row.
import torch
import torch.nn.functional as F

from attn_ref import scaled_dot_product_attention
from attn_ref.examples import LINEAR_SEED, LINEAR_SHAPE
from attn_ref.linear_as_attention import linear_as_attention

generator = torch.Generator().manual_seed(LINEAR_SEED)
B, d_in, d_out = LINEAR_SHAPE
x = torch.randn(B, d_in, generator=generator, dtype=torch.float64)
x[0, [1, 5]] = 0.0  # two zero features in row 0
x[3] = 0.0  # row 3 is all zeros
W = torch.randn(d_out, d_in, generator=generator, dtype=torch.float64)
y_exact = x @ W.T  # (B, d_out)

q, k, v, mask = linear_as_attention(x, W, generator=generator)
print("mask of row 0:", mask[0, 0].tolist())
_, weights = scaled_dot_product_attention(q, k, v, attn_mask=mask)
print("weights of row 0:", [round(w, 4) for w in weights[0, 0].tolist()])
share_0 = x[0].abs() / x[0].abs().sum()  # |x_0| / ||x_0||_1
print("|x_0| / ||x_0||_1:", [round(a, 4) for a in share_0.tolist()])
# --8<-- [end:demo]

# --8<-- [start:errors]
# The output against x W^T in float64, in units of eps ||x||_1 max|W|.

scale = (
    x.abs().sum(dim=-1, keepdim=True) * W.abs().max() + 1e-300
)  # (B, 1); row 3: 0 / 0
outputs, errors = {}, {}  # dtype: y, and its error
for dtype in (torch.float64, torch.float32):
    q, k, v, mask = linear_as_attention(
        x.to(dtype), W.to(dtype), generator=generator
    )
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)[
        :, 0
    ]  # (B, d_out)
    outputs[dtype] = y
    error = ((y.double() - y_exact).abs() / scale).max()
    errors[dtype] = error / torch.finfo(dtype).eps
# --8<-- [end:errors]

# --8<-- [start:errors_shown]
for dtype, error in errors.items():
    row_3 = bool((outputs[dtype][3] == 0).all())
    print(
        f"{dtype}: error {error:.1f} eps ||x||_1 max|W|; row 3 is 0: {row_3}"
    )
# --8<-- [end:errors_shown]
