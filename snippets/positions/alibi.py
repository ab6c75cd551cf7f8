# --8<-- [start:bias]
# ALiBi: each head subtracts slope x distance from the scores.
import torch
import torch.nn.functional as F

from attn_ref import alibi_bias, alibi_slopes, scaled_dot_product_attention
from attn_ref.masks import causal_mask

H, T, d_k = 8, 5, 4
print("slopes:", alibi_slopes(H))
mask = alibi_bias(H, T)  # (H, T, T)
mask = mask.masked_fill(~causal_mask(T), float("-inf"))
print("mask of head 0:")
print(mask[0])

torch.manual_seed(0)
q, k, v = (torch.randn(1, H, T, d_k) for _ in range(3))  # (B, H, T, d_k)
out, w = scaled_dot_product_attention(q, k, v, attn_mask=mask)
ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
print(f"max |attn_ref - PyTorch|: {(out - ref).abs().max().item():.1e}")
# --8<-- [end:bias]

# --8<-- [start:plot]
import matplotlib.pyplot as plt

from attn_ref.plotting import attention_heatmap

# With q . k = 0 for every pair, the weights come from the bias alone.
T = 8
flat = alibi_bias(H, T).masked_fill(~causal_mask(T), float("-inf"))
fig, axes = plt.subplots(
    2, 1, figsize=(4.2, 7.0), layout="constrained"
)  # stacked for phones
kept = {}  # head: the weight the last query keeps on itself
for ax, h in zip(axes, (0, H - 1), strict=True):
    weights = flat[h].softmax(dim=-1)  # (T, T)
    title = f"head {h}, slope {alibi_slopes(H)[h].item():g}"
    attention_heatmap(
        weights, ax=ax, title=title, vmax=1.0, mask=causal_mask(T)
    )
    kept[h] = weights[-1, -1].item()
    print(f"{title}: last query keeps {kept[h]:.3f} on itself")
# --8<-- [end:plot]
