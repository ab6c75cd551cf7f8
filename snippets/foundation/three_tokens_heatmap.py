# The three-token attention weights as a heatmap.
import torch

from attn_ref import scaled_dot_product_attention
from attn_ref.examples import THREE_TOKENS
from attn_ref.plotting import attention_heatmap

X = torch.tensor(THREE_TOKENS)  # (3 tokens, 4 features)
_, weights = scaled_dot_product_attention(X, X, X)
ax = attention_heatmap(
    weights, query_labels=["t0", "t1", "t2"], title="Who attends to whom"
)
strongest = [
    torch.nonzero(torch.isclose(row, row.max())).flatten().tolist()
    for row in weights
]
for t, keys in enumerate(strongest):
    print(f"query {t}: largest weight on key(s) {keys}")
scores = X @ X.T  # (3, 3): scores[i, j] = x_i . x_j
print(
    "scores x_0 . x_2 and x_0 . x_0:", scores[0, 2].item(), scores[0, 0].item()
)
