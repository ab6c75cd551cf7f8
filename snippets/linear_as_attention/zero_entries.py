# --8<-- [start:setup]
# Zero entries in x: steps 2 to 4 taken literally give nan.
import math

import torch

from attn_ref.examples import LINEAR_SEED, LINEAR_SHAPE

torch.manual_seed(LINEAR_SEED)
B, d_in, _ = LINEAR_SHAPE
x = torch.randn(B, d_in)
x[0, 2] = 0.0  # one zero feature in row 0
x[1] = 0.0  # row 1 is all zeros

# --8<-- [end:setup]

# --8<-- [start:scores]
# Steps 2 to 4, literally, up to the scores.
attn_weights = (x.abs() / x.abs().sum(dim=-1, keepdim=True))[
    :, None
]  # row 1: 0 / 0 = nan
logits = torch.log(attn_weights)  # (B, 1, d_in); log(0) = -inf in row 0
k = torch.randn(B, d_in, d_in)
q = (
    math.sqrt(d_in) * logits @ torch.linalg.inv(k.transpose(-2, -1))
)  # (B, 1, d_k)
scores = q @ k.transpose(-2, -1)  # (B, 1, d_in)
print("logits of row 0:", [round(value, 2) for value in logits[0, 0].tolist()])
print("q of row 0:", q[0, 0].tolist())
print(
    "nan in the scores, per row:",
    scores.isnan().any(dim=-1).flatten().tolist(),
)
# --8<-- [end:scores]
