# The three-token attention weights as a heatmap.
import torch

from attn_ref import scaled_dot_product_attention
from attn_ref.examples import THREE_TOKENS
from attn_ref.plotting import attention_heatmap

X = torch.tensor(THREE_TOKENS)  # (3 tokens, 4 features)
_, weights = scaled_dot_product_attention(X, X, X)
ax = attention_heatmap(weights, query_labels=["t0", "t1", "t2"], title="Who attends to whom")
for t, row in enumerate(weights):
    strongest = torch.nonzero(torch.isclose(row, row.max())).flatten().tolist()
    print(f"query {t}: largest weight on key(s) {strongest}")
print("scores x_0 . x_2 and x_0 . x_0:", (X[0] @ X[2]).item(), (X[0] @ X[0]).item())
