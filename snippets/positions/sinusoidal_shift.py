# Moving r positions on is the same rotation for every t.
import math

import torch

from attn_ref import sinusoidal_positional_encoding

T, C, r = 50, 8, 5
PE = sinusoidal_positional_encoding(T + r, C).double()  # (T + r, C)

# R_r: one 2x2 rotation per (sin, cos) pair, built from r alone.
R = torch.zeros(C, C, dtype=torch.float64)
for i in range(0, C, 2):  # i: the first feature of a pair
    angle = r * 10000 ** (-i / C)  # r times the pair's frequency
    c, s = math.cos(angle), math.sin(angle)
    R[i : i + 2, i : i + 2] = torch.tensor([[c, -s], [s, c]])

predicted = PE[:T] @ R  # row t: PE[t] R_r, for all t at once
error = (PE[r:] - predicted).abs().max().item()
print(f"max |PE[t + r] - PE[t] R_r| over all t: {error:.1e}")
identity = torch.eye(C, dtype=R.dtype)
print("R_r is a rotation:", torch.allclose(R @ R.T, identity))
print("block of the fastest pair:")
print(R[:2, :2])
