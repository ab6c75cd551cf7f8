# RoPE turns pair i of a query at position m by the angle m θ_i, and
# pair i of a key at n by n θ_i. Query and key 2 positions apart meet at
# the same angle in every pair, wherever they sit.
import matplotlib.pyplot as plt
import torch
from matplotlib.patches import Circle

from attn_ref import apply_rotary

torch.manual_seed(0)
d_k = 8
q, k = torch.randn(1, d_k), torch.randn(1, d_k)  # as the next snippet draws
thetas = 10000 ** (-torch.arange(0, d_k, 2) / d_k)  # θ_i: 1, 0.1, 0.01...
settings = ((3, 1), (13, 11))  # (m, n): the query at m, the key at n
parts = {}  # (m, n, pair i): pair i's share of the score q·k
fig, axes = plt.subplots(2, d_k // 2, figsize=(4.6, 3.2), layout="constrained")
for row, (m, n) in enumerate(settings):
    trail = apply_rotary(q.expand(m + 1, d_k), torch.arange(m + 1))
    q_m, k_n = trail[-1], apply_rotary(k, torch.tensor([n]))[0]
    for i, ax in enumerate(axes[row]):
        pair = slice(2 * i, 2 * i + 2)  # features 2i and 2i + 1
        parts[m, n, i] = float(q_m[pair] @ k_n[pair])
        radius = 1.15 * max(q[0, pair].norm(), k[0, pair].norm()).item()
        ax.add_patch(Circle((0, 0), radius / 1.15, fill=False, color="0.7"))
        ax.plot(*trail[:, pair].T, ".", color="C0", alpha=0.35, ms=4)
        for vector, colour in ((q_m[pair], "C0"), (k_n[pair], "C1")):
            arrow = {"arrowstyle": "-|>", "color": colour, "lw": 1.8}
            ax.annotate("", vector.tolist(), (0, 0), arrowprops=arrow)
        ax.set(xlim=(-radius, radius), ylim=(-radius, radius), aspect=1)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_xlabel(f"{parts[m, n, i]:+.2f}")
        if row == 0:
            ax.set_title(f"θ{i} = {thetas[i]:g}")
    axes[row, 0].set_ylabel(f"m = {m}, n = {n}")
score = {
    (m, n): sum(parts[m, n, i] for i in range(d_k // 2)) for m, n in settings
}
