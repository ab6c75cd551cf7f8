# --8<-- [start:compute]
# How a score changes with distance, for q = k = all ones.
import torch

from attn_ref import apply_rotary

d_k = 128
r = torch.arange(1001)  # relative distance n - m
ones = torch.ones(len(r), d_k, dtype=torch.float64)
# The query sits at 0, the key at r; any m and m + r give the same.
scores = (ones * apply_rotary(ones, r)).sum(dim=-1)  # (len(r),)

# The paper's S_j = sum_{l<j} e^(i r theta_l), for j = 1 .. d_k/2.
theta = 10000.0 ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)
angles = r[:, None] * theta  # (len(r), d_k/2)
turns = torch.polar(torch.ones_like(angles), angles)
sizes = turns.cumsum(dim=-1).abs()  # (len(r), d_k/2): |S_1|, ..., |S_{d_k/2}|
mean_size = sizes.mean(dim=-1)  # (len(r),): the paper's "relative upper bound"
# Its bound: |score| <= max_i |h_{i+1} - h_i| * sum_j |S_j|,
# with h_i = z_q,i conj(z_k,i) and h_{d_k/2} = 0.
# the pairs of q = k as complex numbers: (d_k/2,)
z = torch.complex(ones[0, 0::2], ones[0, 1::2])
h = torch.cat([z * z.conj(), torch.zeros(1, dtype=z.dtype)])  # (d_k/2 + 1,)
bound = (h[1:] - h[:-1]).abs().max() * sizes.sum(dim=-1)  # (len(r),)

# A random q, k pair, for comparison.
g = torch.Generator().manual_seed(0)
q, k = torch.randn(2, d_k, generator=g, dtype=torch.float64)
rand = (q * apply_rotary(k.expand(len(r), d_k), r)).sum(dim=-1)
rand = rand / (q.norm() * k.norm())  # cosine of the angle
# --8<-- [end:compute]

# --8<-- [start:decay]
for dist in (0, 10, 100, 1000):
    print(
        f"r = {dist:4}: score {scores[dist].item():7.2f}"
        f"  bound {bound[dist].item():5.0f}"
        f"  mean |S_j| {mean_size[dist].item():5.2f}"
        f"  random cos {rand[dist].item():5.2f}"
    )
print("|score| <= bound at every r:", bool((scores.abs() <= bound).all()))
# --8<-- [end:decay]

# --8<-- [start:plot]
import matplotlib.pyplot as plt

fig, ax = plt.subplots(
    figsize=(4.6, 3.8), layout="constrained"
)  # narrow: legible on a phone
ax.plot(r, scores / scores[0], label="q = k = ones: score / d_k")
ax.plot(r, mean_size / mean_size[0], label="mean |S_j|, scaled")
ax.plot(r, rand, color="gray", lw=0.6, label="random q, k: cosine")
ax.axhline(0, color="black", lw=0.5)
ax.set_xlabel("distance r")
ax.set_ylabel("relative to distance 0")
ax.legend(loc="upper right")
ax.set_title(f"RoPE, d_k = {d_k}, base 10000")
# --8<-- [end:plot]
