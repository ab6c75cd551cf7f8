# The three-token attention weights as a heatmap.
import torch

from attn_ref import scaled_dot_product_attention
from attn_ref.examples import THREE_TOKENS
from attn_ref.plotting import attention_heatmap

X = torch.tensor(THREE_TOKENS)  # (3 tokens, 4 features)
_, weights = scaled_dot_product_attention(X, X, X)
ax = attention_heatmap(weights, query_labels=["token 1", "token 2", "token 3"], title="Who attends to whom")
print("strongest key for each query:", weights.argmax(dim=-1).tolist())
