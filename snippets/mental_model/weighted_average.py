# --8<-- [start:picture]
# The values of the first picture as points, and the output among them: their
# average, each value weighted by the weight its key got.
import matplotlib.pyplot as plt
import torch
from matplotlib.patches import Polygon

from attn_ref import scaled_dot_product_attention
from attn_ref.examples import LOOKUP_KEYS, LOOKUP_QUERY, LOOKUP_VALUES

q, K, V = (torch.tensor(x) for x in (LOOKUP_QUERY, LOOKUP_KEYS, LOOKUP_VALUES))
output, weights = scaled_dot_product_attention(q, K, V)  # (1, d_v), (1, S)
a, out = weights[0].tolist(), output[0].tolist()  # S weights, d_v features

fig, ax = plt.subplots(figsize=(4.2, 3.0), layout="constrained")
ax.set(xlim=(-2.1, 3.7), ylim=(-1.0, 3.5), aspect="equal")
ax.set(xlabel="feature 0", ylabel="feature 1")
# The values are the corners of a convex pentagon, in order: their region.
region = Polygon(V.numpy(), facecolor="0.9", edgecolor="0.6", zorder=0)
ax.add_patch(region)
for j, v in enumerate(V.tolist()):
    # A line from the output to each value, as thick as its weight.
    line = zip(out, v, strict=True)
    ax.plot(*line, color=f"C{j}", lw=0.5 + 6 * a[j], zorder=1)
    ax.plot(*v, "o", color=f"C{j}", zorder=2)
    ax.annotate(
        f"v{j}: {a[j]:.2f}", v, xytext=(5, 5), textcoords="offset points",
        color=f"C{j}",
    )  # fmt: skip
ax.plot(*out, "D", color="black", mfc="black", mec="black", ms=9, zorder=3)
ax.annotate("output", out, xytext=(9, 4), textcoords="offset points")
# --8<-- [end:picture]
