# Swap two words. Without positions, attention sees the same tokens.
import torch

from attn_ref import (
    scaled_dot_product_attention,
    sinusoidal_positional_encoding,
)

torch.manual_seed(0)
vocab = {"dog": 0, "bites": 1, "man": 2}
C = 8
E = torch.randn(len(vocab), C)  # (vocabulary size, C) embedding table
W_Q, W_K, W_V = (torch.randn(C, C) for _ in range(3))


def embed(words):
    ids = torch.tensor([vocab[w] for w in words])
    return E[ids]  # (T, C)


def attend(X):
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V  # (T, C) each
    out, _ = scaled_dot_product_attention(Q, K, V)
    return out  # (T, C)


a = ["dog", "bites", "man"]
b = ["man", "bites", "dog"]

# "dog" is word 0 of a and word 2 of b.
out_a, out_b = attend(embed(a)), attend(embed(b))
same = torch.allclose(out_a[0], out_b[2], atol=1e-6)
print("no positions, 'dog' has the same output:", same)
mean_a, mean_b = out_a.mean(dim=0), out_b.mean(dim=0)
same = torch.allclose(mean_a, mean_b, atol=1e-6)
print("no positions, same mean over the sentence:", same)

# Add where each word sits: PE[t] for the word at position t.
PE = sinusoidal_positional_encoding(3, C)  # (T, C)
out_a = attend(embed(a) + PE)
out_b = attend(embed(b) + PE)
same = torch.allclose(out_a[0], out_b[2], atol=1e-6)
print("with positions, 'dog' has the same output:", same)
gap = (out_a[0] - out_b[2]).abs().max().item()
print(f"largest difference: {gap:.2f}")
