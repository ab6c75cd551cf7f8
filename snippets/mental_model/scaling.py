# Why divide by sqrt(d_k): the softmax of random scores q · k, as d_k grows.
# --8<-- [start:experiment]
import numpy as np

from attn_ref.numpy_ref import softmax

rng = np.random.default_rng(0)
S, trials = 16, 400  # S keys per query, and this many queries per width
widths = [1, 4, 16, 64, 256, 1024]


def softmax_stats(z):
    """Means over the rows of z: largest weight, entropy, gradient size."""
    p = softmax(z)  # (trials, S)
    largest = p.max(axis=-1)  # (trials,)
    entropy = -(p * np.log(np.maximum(p, 1e-300))).sum(axis=-1)  # 0 log 0 = 0
    # Jacobian of the softmax, dp_i/dz_j = p_i (delta_ij - p_j): (trials, S, S)
    jacobian = p[:, :, None] * (np.eye(S) - p[:, None, :])
    gradient = np.linalg.norm(jacobian, axis=(1, 2))  # (trials,)
    return largest.mean(), entropy.mean(), gradient.mean()


# Per width: (variance of the scores, largest weight, entropy, gradient size)
results = {"plain": [], "scaled": []}
for d_k in widths:
    q = rng.standard_normal((trials, 1, d_k))  # components: mean 0, variance 1
    k = rng.standard_normal((trials, S, d_k))  # (trials, S, d_k)
    scores = (q @ k.transpose(0, 2, 1))[:, 0, :]  # (trials, 1, S) -> (trials, S)
    for name, z in [("plain", scores), ("scaled", scores / np.sqrt(d_k))]:
        results[name].append((z.var(), *softmax_stats(z)))

titles = ["score variance", "largest weight", "entropy (nats)", "gradient size"]
print(" " * 4 + "".join(f"  {title:^16}" for title in titles))
print(f"{'d_k':>4}" + f"  {'plain':>8}{'scaled':>8}" * 4)
for i, d_k in enumerate(widths):
    pairs = zip(results["plain"][i], results["scaled"][i], strict=True)
    print(f"{d_k:>4}" + "".join(f"  {p:>8.3f}{s:>8.3f}" for p, s in pairs))
print(f"uniform weights: largest weight 1/S = {1 / S:.4f}", end=", ")
print(f"entropy log S = {np.log(S):.3f}")
# --8<-- [end:experiment]

# --8<-- [start:plot]
import matplotlib.pyplot as plt

fig, axes = plt.subplots(1, 3, figsize=(10, 3.6), layout="constrained")
panels = [  # (index in results, y label, value for uniform weights)
    (1, "largest weight in a row", 1 / S),
    (2, "entropy of a row (nats)", np.log(S)),
    (3, "softmax gradient size", None),
]
styles = {
    "plain": dict(marker="o", linestyle="-", label="softmax(q·k)"),
    "scaled": dict(marker="s", linestyle="--", label="softmax(q·k / √d_k)"),
}
for ax, (index, ylabel, uniform) in zip(axes, panels, strict=True):
    for name, rows in results.items():
        ax.plot(widths, [row[index] for row in rows], **styles[name])
    if uniform is not None:
        ax.axhline(uniform, color="gray", linestyle=":", label="uniform weights")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("d_k (width of queries and keys)")
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
handles, labels = axes[0].get_legend_handles_labels()
fig.legend(handles, labels, loc="outside lower center", ncols=3)
fig.suptitle(f"Softmax over S = {S} keys, mean of {trials} queries per width")
# --8<-- [end:plot]
