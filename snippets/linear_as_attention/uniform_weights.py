# Another choice: q = 0 gives every key the weight 1 / d_in; then v = d_in x_i w_i.
import torch
import torch.nn.functional as F

from attn_ref.examples import LINEAR_SEED, LINEAR_SHAPE

generator = torch.Generator().manual_seed(LINEAR_SEED)
B, d_in, d_out = LINEAR_SHAPE
x = torch.randn(B, d_in, generator=generator, dtype=torch.float64)
x[0, 2] = 0.0  # zeros need no special care here
W = torch.randn(d_out, d_in, generator=generator, dtype=torch.float64)
key = torch.randn(d_in, d_in, generator=generator, dtype=torch.float64)  # any key


def uniform_attention_parts(x):
    q = torch.zeros(x.shape[0], 1, d_in, dtype=x.dtype)  # (B, 1, d_k): all scores 0
    k = key.expand(x.shape[0], d_in, d_in)  # (d_in, d_k) -> (B, d_in, d_k)
    v = d_in * x[..., None] * W.T  # (B, d_in, 1) * (d_in, d_out) -> (B, d_in, d_out)
    return q, k, v


q, k, v = uniform_attention_parts(x)
y = F.scaled_dot_product_attention(q, k, v)[:, 0]  # (B, d_out)
print(f"max |y - x W^T| = {(y - x @ W.T).abs().max().item():.1e}")

x2 = torch.randn(B, d_in, generator=generator, dtype=torch.float64)
v_of_sum = uniform_attention_parts(x + x2)[2]
v2 = uniform_attention_parts(x2)[2]
print("v(x + x2) = v(x) + v(x2):", torch.allclose(v_of_sum, v + v2))
