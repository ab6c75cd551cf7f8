# Zero entries in x: the blog post's steps give nan.
import math

import torch
import torch.nn.functional as F

from attn_ref.examples import LINEAR_SEED, LINEAR_SHAPE

torch.manual_seed(LINEAR_SEED)
B, d_in, d_out = LINEAR_SHAPE
x = torch.randn(B, d_in)
x[0, 2] = 0.0  # one zero feature in row 0
x[1] = 0.0  # row 1 is all zeros
W = torch.randn(d_out, d_in)

# The blog post's steps.
x_sum = x.abs().sum(dim=-1, keepdim=True)  # (B, 1)
attn_weights = (x.abs() / x_sum)[:, None]  # (B, 1, d_in); row 1 is 0 / 0 = nan
v = W.T[None] * (x_sum[..., None] * x.sign()[..., None])  # (B, d_in, d_out)
logits = torch.log(attn_weights)  # log(0) = -inf in row 0
k = torch.randn(B, d_in, d_in)
q = math.sqrt(d_in) * logits @ torch.linalg.inv(k.transpose(-2, -1))  # (B, 1, d_k)
y2 = F.scaled_dot_product_attention(q, k, v)[:, 0]  # (B, d_out)
print("blog post, logits of row 0:", [round(value, 2) for value in logits[0, 0].tolist()])
print("blog post, q of row 0:", q[0, 0].tolist())
print("blog post, rows of y2 with nan:", y2.isnan().any(dim=-1).nonzero().flatten().tolist())
