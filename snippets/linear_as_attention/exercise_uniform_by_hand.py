# Exercise: uniform weights (q = 0) and the values v_i = d_in x_i w_i, by hand.
import torch
import torch.nn.functional as F

x = torch.tensor([1.0, -2.0, 0.0])  # (d_in,) = (3,)
W = torch.tensor(
    [[1.0, 0.0, 2.0], [0.0, 1.0, -1.0]]
)  # (d_out, d_in) = (2, 3), as nn.Linear stores it
d_in = x.shape[0]
v = (
    d_in * x[:, None] * W.T + 0.0
)  # (d_in, d_out): row i is d_in x_i w_i; + 0.0 turns -0 into 0
q = torch.zeros(1, 2)  # any key width; every score is 0
k = torch.randn(d_in, 2, generator=torch.Generator().manual_seed(0))  # any key
y = F.scaled_dot_product_attention(q, k, v)  # (1, d_out)
print("values, one row per input feature:")
print(v)
print("attention output:", y[0].tolist())
print("x W^T:           ", (x @ W.T).tolist())
