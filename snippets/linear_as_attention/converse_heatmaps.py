# The mixing matrix A(X) of self-attention (Q = K = V = X) for X and for 2X.
import matplotlib.pyplot as plt
import torch

from attn_ref import scaled_dot_product_attention
from attn_ref.examples import THREE_TOKENS
from attn_ref.plotting import attention_heatmap

X = torch.tensor(THREE_TOKENS)  # (3 tokens, 4 features)
tokens = ["token 1", "token 2", "token 3"]
fig, axes = plt.subplots(1, 2, figsize=(8.0, 3.2), layout="constrained")
for ax, t in zip(axes, (1, 2), strict=True):
    label = "X" if t == 1 else f"{t}X"
    _, weights = scaled_dot_product_attention(t * X, t * X, t * X)
    attention_heatmap(weights, query_labels=tokens, ax=ax, title=f"A({label})")
    largest = [round(w, 4) for w in weights.max(dim=-1).values.tolist()]
    print(f"largest weight in each row of A({label}):", largest)
