# --8<-- [start:shifts]
# Adding one number c to every logit leaves the softmax unchanged, up to
# rounding.
import torch

from attn_ref.examples import LINEAR_SEED, LINEAR_SHAPE

torch.manual_seed(LINEAR_SEED)
_, d_in, _ = LINEAR_SHAPE
x = torch.randn(d_in)
weights = (
    x.abs() / x.abs().sum()
)  # (d_in,), the attention weights |x| / ||x||_1 of one row
logits = weights.log()

shift = -torch.randn(1)  # "noise": ONE random number, the same for every logit
print("the shift:", shift)
print("   c         max |softmax(logits + c) - weights|")
changes = {}  # c: the largest change of a weight
for c in [0.0, shift.item(), 10.0, 1e3, 1e5]:
    changes[c] = (
        (torch.softmax(logits + c, dim=-1) - weights).abs().max().item()
    )
    print(f"{c:9.3g}   {changes[c]:.1e}")
# --8<-- [end:shifts]

# --8<-- [start:noise]
noise = torch.randn(
    d_in
)  # by contrast, a different random number for each logit
change = (torch.softmax(logits + noise, dim=-1) - weights).abs().max().item()
print(f"one random number per logit: max change {change:.1e}")
# --8<-- [end:noise]
