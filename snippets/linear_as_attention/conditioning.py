# --8<-- [start:measure]
# The error of the construction grows with the condition number of the key k.
import math

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from attn_ref.examples import LINEAR_SEED, LINEAR_SHAPE
from attn_ref.linear_as_attention import linear_as_attention

generator = torch.Generator().manual_seed(LINEAR_SEED)
B, d_in, d_out = LINEAR_SHAPE
x = torch.randn(B, d_in, generator=generator, dtype=torch.float64)
W = torch.randn(d_out, d_in, generator=generator, dtype=torch.float64)
y_exact = x @ W.T  # (B, d_out)
scale = x.abs().sum(dim=-1, keepdim=True) * W.abs().max()  # (B, 1), size of the values


def random_orthogonal():
    gaussian = torch.randn(d_in, d_in, generator=generator, dtype=torch.float64)
    return torch.linalg.qr(gaussian).Q


def key_with_condition_number(kappa):
    """A random (d_in, d_in) key whose singular values run from 1 down to 1 / kappa."""
    singular_values = torch.logspace(0, -math.log10(kappa), d_in, dtype=torch.float64)
    return (random_orthogonal() * singular_values) @ random_orthogonal().T  # U diag V^T


def relative_error(key, dtype):
    q, k, v, mask = linear_as_attention(x.to(dtype), W.to(dtype), key.to(dtype))
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)[:, 0]  # (B, d_out)
    return ((y.double() - y_exact).abs() / scale).max().item()


trials = 10
results = {torch.float32: [], torch.float64: []}  # (condition number, error) pairs
largest_exponent = {torch.float32: 7, torch.float64: 14}
print("| cond(k) | float32: largest error / eps | float64: largest error / eps |")
print("|---:|---:|---:|")
for exponent in range(0, 15):
    kappa = 10.0**exponent
    row = [f"$10^{{{exponent}}}$"]
    for dtype, points in results.items():
        if exponent > largest_exponent[dtype]:
            row.append("")
            continue
        keys = [key_with_condition_number(kappa) for _ in range(trials)]
        errors = [relative_error(key, dtype) for key in keys]
        points.extend((kappa, e) for e in errors)
        row.append(f"{max(errors) / torch.finfo(dtype).eps:.3g}")
    print("| " + " | ".join(row) + " |")

# --8<-- [end:measure]

# --8<-- [start:plot]
fig, ax = plt.subplots(figsize=(6.4, 4.0), layout="constrained")
for (dtype, points), marker in zip(results.items(), ("o", "s"), strict=True):
    conds, errors = zip(*points, strict=True)
    eps, name = torch.finfo(dtype).eps, str(dtype).removeprefix("torch.")
    ax.scatter(conds, errors, marker=marker, s=14, alpha=0.6, label=f"{name}: measured")
    line = [eps, eps * max(conds)]
    ax.plot([1, max(conds)], line, linestyle="--", label=f"{name}: eps times cond(k)")
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("condition number of k")
ax.set_ylabel("max |y - x W^T| / (||x||_1 max |W|)")
ax.legend(fontsize=8)
# --8<-- [end:plot]
