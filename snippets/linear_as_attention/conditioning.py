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
scale = (
    x.abs().sum(dim=-1, keepdim=True) * W.abs().max()
)  # (B, 1), size of the values


def random_orthogonal():
    gaussian = torch.randn(
        d_in, d_in, generator=generator, dtype=torch.float64
    )
    return torch.linalg.qr(gaussian).Q


def key_with_condition_number(kappa):
    """A random key U diag(sigma) V^T, with sigma from 1 down to 1/kappa."""
    sigma = torch.logspace(0, -math.log10(kappa), d_in, dtype=torch.float64)
    return (
        random_orthogonal() * sigma
    ) @ random_orthogonal().T  # (d_in, d_in)


results = {
    torch.float32: [],
    torch.float64: [],
}  # (condition number, error) pairs
rows = []  # the table's rows, one per condition number
for exponent in range(0, 15, 2):
    kappa = 10.0**exponent
    row = [f"$10^{{{exponent}}}$"]
    for dtype, points in results.items():
        eps = torch.finfo(dtype).eps
        if (
            kappa * eps > 1
        ):  # an error of eps cond(k) would leave no correct digit
            row.append("")
            continue
        errors = []  # relative to the size of the values, for ten keys
        for _ in range(10):
            key = key_with_condition_number(kappa).to(dtype)
            q, k, v, mask = linear_as_attention(x.to(dtype), W.to(dtype), key)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)[
                :, 0
            ]  # (B, d_out)
            errors.append(((y.double() - y_exact).abs() / scale).max().item())
        points.extend((kappa, e) for e in errors)
        row.append(f"{max(errors) / eps:.1g}")
    rows.append("| " + " | ".join(row) + " |")
# --8<-- [end:measure]

# --8<-- [start:table]
print("| cond(k) | float32: error / eps | float64: error / eps |")
print("|---:|---:|---:|")
print("\n".join(rows))
# --8<-- [end:table]

# --8<-- [start:plot]
fig, ax = plt.subplots(
    figsize=(4.6, 3.6), layout="constrained"
)  # narrow: legible on a phone
for dtype, points in results.items():
    conds, errors = zip(*points, strict=True)
    eps, name = torch.finfo(dtype).eps, str(dtype).removeprefix("torch.")
    ax.loglog(conds, errors, ".", label=f"{name}, measured")
    ax.loglog(
        [1, max(conds)],
        [eps, eps * max(conds)],
        "--",
        label=f"{name}, eps cond(k)",
    )
ax.set(xlabel="cond(k)", ylabel="error / (||x||_1 max|W|)")
ax.legend()
# --8<-- [end:plot]
