# --8<-- [start:bug]
# Attention in a diffusion U-Net, softmax over the wrong axis
# (labml.ai annotated implementations #146).
import torch

torch.manual_seed(0)
B, T, H, d_k = 1, 4, 2, 8  # the U-Net keeps the heads after the sequence
q, k, v = (torch.randn(B, T, H, d_k) for _ in range(3))  # (B, T, H, d_k)


def attention(q, k, v, fixed=False):
    scores = torch.einsum("bihd,bjhd->bijh", q, k) * d_k**-0.5  # (B, i, j, H)
    attn = scores.softmax(dim=2 if fixed else 1)  # bug: dim 1 is i, the query
    return torch.einsum("bijh,bjhd->bihd", attn, v), attn  # (B, T, H, d_k)


# head 0; row i: query i, column j: key j
w = attention(q, k, v)[1][0, :, :, 0]
print("buggy weights of head 0:")
print(w.numpy().round(3))
print("row sums:   ", w.sum(dim=1).numpy().round(3))
print("column sums:", w.sum(dim=0).numpy().round(3))
# --8<-- [end:bug]

# --8<-- [start:check]
# The check: each query's weights sum to one, on 20 random sequences.
g = torch.Generator().manual_seed(1)
qs, ks, vs = (torch.randn(20, 8, H, d_k, generator=g) for _ in range(3))
tolerance, worst = 1e-5, {}
for fixed in (False, True):
    attn = attention(qs, ks, vs, fixed)[1]  # (B, T, T, H)
    name = "fixed" if fixed else "buggy"
    # sum over the keys j
    worst[name] = (attn.sum(dim=2) - 1).abs().max().item()
# --8<-- [end:check]

# --8<-- [start:verdict]
for name, violation in worst.items():
    verdict = "passes" if violation < tolerance else "FAILS"
    print(f"{name}: largest |row sum - 1| {violation:.1e}, {verdict}")
# --8<-- [end:verdict]

# --8<-- [start:plot]
import matplotlib.pyplot as plt

from attn_ref.plotting import attention_heatmap

w_fixed = attention(q, k, v, fixed=True)[1][0, :, :, 0]  # head 0, fixed
fig, axes = plt.subplots(2, 1, figsize=(4.2, 6.4), layout="constrained")
panels = {
    "softmax over the queries (bug):\neach column sums to 1": w,
    "softmax over the keys (fix):\neach row sums to 1": w_fixed,
}
for ax, (title, weights) in zip(axes, panels.items(), strict=True):
    attention_heatmap(weights, ax=ax, title=title, vmax=1.0)
# --8<-- [end:plot]
