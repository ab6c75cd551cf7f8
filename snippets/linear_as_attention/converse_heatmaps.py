# --8<-- [start:weights]
# The mixing matrix A(X) of self-attention (Q = K = V = X) for X and for 2X.
import torch

from attn_ref import scaled_dot_product_attention
from attn_ref.examples import THREE_TOKENS

X = torch.tensor(THREE_TOKENS)  # (3 tokens, 4 features)
weights = {}
for label, t in (("X", 1), ("2X", 2)):
    _, weights[label] = scaled_dot_product_attention(t * X, t * X, t * X)
    largest = [round(w, 4) for w in weights[label].max(dim=-1).values.tolist()]
    print(f"largest weight in each row of A({label}):", largest)
# --8<-- [end:weights]

# --8<-- [start:plot]
import matplotlib.pyplot as plt

from attn_ref.plotting import attention_heatmap

tokens = ["token 1", "token 2", "token 3"]
fig, axes = plt.subplots(
    2, 1, figsize=(4.2, 5.6), layout="constrained"
)  # stacked: legible on a phone
for ax, (label, w) in zip(axes, weights.items(), strict=True):
    attention_heatmap(
        w, query_labels=tokens, ax=ax, title=f"A({label})", vmax=1.0
    )
# --8<-- [end:plot]
