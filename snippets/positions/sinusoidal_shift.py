# Moving k positions on is the same rotation for every t.
import math

import torch

from attn_ref import sinusoidal_positional_encoding

T, d, k = 50, 8, 5
PE = sinusoidal_positional_encoding(T + k, d).double()

# M_k: one 2x2 rotation per (sin, cos) pair, built from k alone.
M = torch.zeros(d, d, dtype=torch.float64)
for i in range(0, d, 2):
    angle = k * 10000 ** (-i / d)  # k times the pair's frequency
    c, s = math.cos(angle), math.sin(angle)
    M[i : i + 2, i : i + 2] = torch.tensor([[c, -s], [s, c]])

predicted = PE[:T] @ M  # row t: PE[t] M_k, for all t at once
error = (PE[k:] - predicted).abs().max().item()
print(f"max |PE[t + k] - PE[t] M_k| over all t: {error:.1e}")
identity = torch.eye(d, dtype=M.dtype)
print("M_k is a rotation:", torch.allclose(M @ M.T, identity))
print("block of the fastest pair:")
print(M[:2, :2])
