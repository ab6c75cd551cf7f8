# Layer norm: each token's features shifted to mean 0, scaled to variance 1.
# --8<-- [start:compute]
import torch
from torch import nn

torch.manual_seed(0)
T, C = 5, 16
x = 3 * torch.randn(T, C) + 1  # a stream that has grown, and drifted off zero
norm = nn.LayerNorm(C)  # learns gamma (norm.weight) and beta (norm.bias)
with torch.no_grad():  # as if trained: gamma and beta away from 1 and 0
    norm.weight.uniform_(0.5, 1.5)
    norm.bias.uniform_(-0.5, 0.5)

mean = x.mean(dim=-1, keepdim=True)  # (T, 1): one mean per token
var = x.var(dim=-1, unbiased=False, keepdim=True)  # (T, 1): divides by C
z = (x - mean) / torch.sqrt(var + norm.eps)  # (T, C): mean 0, variance 1
by_hand = z * norm.weight + norm.bias  # gamma and beta act per feature
with torch.no_grad():
    ours, theirs, tenfold = by_hand, norm(x), norm(10 * x)
change = (tenfold - theirs).abs().max().item()
# --8<-- [end:compute]
# --8<-- [start:report]
print("by hand = nn.LayerNorm:", torch.allclose(ours, theirs, atol=1e-6))
print("mean of each token, before:", mean.flatten().numpy().round(2))
print("after, z:", z.mean(dim=-1).numpy().round(2) + 0.0)  # + 0.0: no -0.
print("std of each token, before:", var.sqrt().flatten().numpy().round(2))
print("after, z:", z.std(dim=-1, unbiased=False).numpy().round(2))
print(f"LayerNorm(10 x) against LayerNorm(x): largest change {change:.1e}")
# --8<-- [end:report]
