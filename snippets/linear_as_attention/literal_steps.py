# Steps 2 to 5 written literally, as they are often written: a logarithm, a
# random square key inverted, float32 checks with allclose.
# --8<-- [start:build]
import math

import torch
import torch.nn.functional as F

from attn_ref.examples import LINEAR_SEED, LINEAR_SHAPE


def literal_construction(x, fc_weight, k):
    """Steps 2 to 5, literally; k is a random key, (B, d_in, d_k),
    d_k = d_in."""
    x_abs = x.abs()
    x_sum = x_abs.sum(dim=-1, keepdim=True)  # (B, 1), the L1 norm of each row
    attn_weights = (x_abs / x_sum)[:, None]  # (B, d_in) -> (B, 1, d_in)
    v = fc_weight.T[None] * (
        x_sum[..., None] * x.sign()[..., None]
    )  # (B, d_in, d_out)
    _y = (attn_weights @ v)[:, 0]  # (B, 1, d_out) -> (B, d_out)
    logits = torch.log(attn_weights) - torch.randn(1)  # (B, 1, d_in)
    d_k = k.shape[-1]
    s = logits * math.sqrt(d_k)
    q = s @ torch.linalg.inv(
        k.transpose(-2, -1)
    )  # (B, 1, d_in) @ (B, d_in, d_k)
    logits_rec = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (B, 1, d_in)
    y2 = F.scaled_dot_product_attention(q, k, v)[
        :, 0
    ]  # (B, 1, d_out) -> (B, d_out)
    return attn_weights, _y, logits, logits_rec, y2


torch.manual_seed(LINEAR_SEED)
B, d_in, d_out = LINEAR_SHAPE
x = torch.randn(B, d_in)
fc_weight = torch.randn(d_out, d_in)
y1 = x @ fc_weight.T  # (B, d_out)
k = torch.randn(B, d_in, d_in)  # the inverse needs a square key: d_k = d_in
attn_weights, _y, logits, logits_rec, y2 = literal_construction(
    x, fc_weight, k
)

y_exact = x.double() @ fc_weight.double().T  # x W^T, in float64
# --8<-- [end:build]
# --8<-- [start:checks]
# Four checks, as such code usually asserts them:
print("allclose(_y, y1):", torch.allclose(_y, y1))
print(
    "allclose(softmax(logits), attn_weights):",
    torch.allclose(torch.softmax(logits, dim=-1), attn_weights),
)
print(
    "allclose(logits_rec, logits, atol=1e-3):",
    torch.allclose(logits_rec, logits, atol=1e-3),
)
print("allclose(y2, y1, atol=1e-3):", torch.allclose(y2, y1, atol=1e-3))
# The largest errors, measured in float64:
for name, y in (("y1", y1), ("_y", _y), ("y2", y2)):
    print(f"max |{name} - x W^T| = {(y.double() - y_exact).abs().max():.1e}")
print("cond(k), per row:", torch.linalg.cond(k).round().int().tolist())


# --8<-- [end:checks]
# --8<-- [start:many]
# The same for many seeds: how often do the checks fail, and where?
def run_seed(seed):
    """cond(k) of the worst of the B keys, max |y2 - x W^T|, and the outcomes
    of two of the checks."""
    torch.manual_seed(seed)
    x = torch.randn(B, d_in)
    fc_weight = torch.randn(d_out, d_in)
    k = torch.randn(B, d_in, d_in)
    _, _y, _, _, y2 = literal_construction(x, fc_weight, k)
    y1 = x @ fc_weight.T
    error = (
        (y2.double() - x.double() @ fc_weight.double().T).abs().max().item()
    )
    return (
        torch.linalg.cond(k).max().item(),
        error,
        torch.allclose(_y, y1),
        torch.allclose(y2, y1, atol=1e-3),
    )


n_seeds = 1000
conds, errors, exact_passes, atol_passes = zip(
    *(run_seed(seed) for seed in range(n_seeds)), strict=True
)
conds, errors = torch.tensor(conds), torch.tensor(errors)
atol_fails = ~torch.tensor(atol_passes)
exact_fails = n_seeds - sum(exact_passes)
rank = conds.argsort().argsort() / (n_seeds - 1)  # 0: best cond(k), 1: worst
# --8<-- [end:many]
# --8<-- [start:many_shown]
print(f"allclose(_y, y1) fails for {exact_fails} of {n_seeds} seeds")
print(f"allclose(y2, y1, atol=1e-3) fails for {atol_fails.sum()} of {n_seeds}")
print(f"largest |y2 - x W^T| = {errors.max():.1e}, at seed {errors.argmax()}")
print(
    f"cond(k) over all seeds: median {conds.median():.0f},",
    f"largest {conds.max():.0f}",
)
# Where the failing seeds' keys rank among all the seeds' keys:
# 0 (0 %) for the best-conditioned key, 1 (100 %) for the worst.
if atol_fails.any():
    worst_tenth = (rank[atol_fails] >= 0.9).float().mean()
    print(
        f"where atol=1e-3 fails: median rank {rank[atol_fails].median():.0%}, "
        f"{worst_tenth:.0%} in the worst 10 %"
    )
# --8<-- [end:many_shown]
