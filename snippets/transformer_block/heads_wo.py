# W_O: each head writes into the whole stream, through its own rows of W_O.
import torch

from attn_ref import (
    MultiHeadAttention,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
)
from attn_ref.masks import causal_mask

torch.manual_seed(0)
B, T, C, H = 1, 5, 16, 4
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
print("one head:", tuple(heads[:, 0].shape), " all:", tuple(concat.shape))
print("W_O:", tuple(W_O.shape), " rows per head:", d_k)
print("output = heads' writes + b_O:", torch.allclose(out, total, atol=1e-6))
# The features each head's write reaches (non-zero at some token):
reached = [int((w != 0).any(dim=1).sum()) for w in writes]
print("features each head's write reaches:", reached, "of", C)
