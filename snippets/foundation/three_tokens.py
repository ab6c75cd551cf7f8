# Self-attention on three tokens, with Q = K = V = X (identity projections).
import torch

from attn_ref import scaled_dot_product_attention
from attn_ref.examples import THREE_TOKENS

X = torch.tensor(THREE_TOKENS)  # (3 tokens, 4 features)
output, weights = scaled_dot_product_attention(X, X, X)
print("weights, one row per query:")
print(weights)
print("output = weights @ X:")
print(output)

# PyTorch's own attention gives the same output.
reference = torch.nn.functional.scaled_dot_product_attention(X, X, X)
print(
    "same as torch.nn.functional.scaled_dot_product_attention:",
    torch.allclose(output, reference, atol=1e-6),
)
