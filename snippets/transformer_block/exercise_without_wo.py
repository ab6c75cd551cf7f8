# Without W_O, a head can only write into its own slice of the features.
import copy

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
d_k = C // H
mha = MultiHeadAttention(embed_dim=C, num_heads=H)
x = torch.randn(B, T, C)
mask = causal_mask(T)


def both_outputs(mha):
    """The heads concatenated (no W_O), and the layer's output (with W_O)."""
    projections = (mha.q_proj, mha.k_proj, mha.v_proj)
    q, k, v = (split_heads(p(x), H) for p in projections)
    heads, _ = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return merge_heads(heads), mha(x, x, x, attn_mask=mask)[0]


silenced = copy.deepcopy(mha)  # the same layer, but head 1's values are zero
with torch.no_grad():
    silenced.v_proj.weight[d_k : 2 * d_k] = 0.0
    silenced.v_proj.bias[d_k : 2 * d_k] = 0.0
    concat, out = both_outputs(mha)
    concat_1, out_1 = both_outputs(silenced)
# Which of the C features moved, at any token:
changed = {
    "concatenation": (concat_1 != concat).any(dim=1)[0],
    "after W_O": (out_1 != out).any(dim=1)[0],
}
for name, features in changed.items():
    moved = features.nonzero().flatten().tolist()
    span = f"{moved[0]} to {moved[-1]}"
    print(f"{name}: {len(moved)} of {C} features change, {span}")
