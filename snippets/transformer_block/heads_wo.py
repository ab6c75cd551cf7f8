# W_O: each head writes into the stream through its own d_k rows of W_O.
# --8<-- [start:writes]
import torch

from attn_ref import (
    MultiHeadAttention,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
)
from attn_ref.masks import causal_mask

torch.manual_seed(0)
B, T, C, H = 1, 24, 16, 4  # more tokens than features, to count directions
d_k = C // H  # each head's width
mha = MultiHeadAttention(embed_dim=C, num_heads=H)
x = torch.randn(B, T, C)
mask = causal_mask(T)

with torch.no_grad():
    out, _ = mha(x, x, x, attn_mask=mask)  # (B, T, C)
    projections = (mha.q_proj, mha.k_proj, mha.v_proj)
    q, k, v = (split_heads(p(x), H) for p in projections)
    heads, _ = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    concat = merge_heads(heads)  # (B, T, C): head h fills features h d_k on
    W_O = mha.out_proj.weight.T  # (C, C): nn.Linear stores W_O^T
    bias = mha.out_proj.bias  # (C,)
    # Head h's write: its output times its d_k rows of W_O, (B, T, C).
    writes = [heads[:, h] @ W_O[h * d_k : (h + 1) * d_k] for h in range(H)]
    total = sum(writes) + bias
    summed = out - bias  # (B, T, C): the heads' writes, added up
# --8<-- [end:writes]
# --8<-- [start:rank]
print("output = heads' writes + b_O:", torch.allclose(out, total, atol=1e-6))
# Features a head's write touches (non-zero at some token), and its rank:
# how many directions of the stream its writes span, over all T tokens.
reached = [int((w != 0).any(dim=1).sum()) for w in writes]
print("features each head's write touches:", reached, "of", C)
# Singular values under 1e-5 of the largest are rounding, not directions.
ranks = [int(torch.linalg.matrix_rank(w[0], rtol=1e-5)) for w in writes]
print("rank of each head's write:", ranks, " d_k =", d_k)
all_heads = int(torch.linalg.matrix_rank(summed[0], rtol=1e-5))
print("rank of all the heads' writes, summed:", all_heads, "of", C)
# --8<-- [end:rank]

# --8<-- [start:picture]
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(4.4, 3.4), layout="constrained")
index = torch.arange(1, C + 1)
for h, w in enumerate(writes):
    s = torch.linalg.svdvals(w[0])  # (C,), largest first
    ax.plot(index, s / s[0], "o-", markersize=4, label=f"head {h}")
s = torch.linalg.svdvals(summed[0])
ax.plot(index, s / s[0], "s--", markersize=4, label="all heads")
ax.axhline(1e-5, color="gray", linestyle=":", label="rounding cut-off")
ax.set(yscale="log", xlabel="direction $i$", ylabel=r"$\sigma_i / \sigma_1$")
ax.set_xticks([1, 4, 8, 12, 16])
ax.legend(fontsize=9, ncols=2)
# --8<-- [end:picture]
