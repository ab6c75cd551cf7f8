# An embedding knows only its own token; attention mixes in the context.
import torch

from attn_ref import scaled_dot_product_attention

vocab = ["a", "cat", "mat", "on", "ran", "sat", "the"]
torch.manual_seed(0)
C, d_k = 4, 4
W_E = torch.randn(len(vocab), C)  # (V, C): the embedding table
# One shared mechanism: the same three (C, d_k) matrices for every token.
W_Q, W_K, W_V = (torch.randn(C, d_k) for _ in range(3))


def embed(words):
    ids = torch.tensor([vocab.index(word) for word in words])  # (T,)
    return W_E[ids]  # (T, C)


def self_attention(X):
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V  # (T, d_k) each
    output, _ = scaled_dot_product_attention(Q, K, V)  # (T, d_k)
    return output


first = ["the", "cat", "sat", "on", "the", "mat"]
second = ["a", "cat", "ran"]
X1, X2 = embed(first), embed(second)
Y1, Y2 = self_attention(X1), self_attention(X2)
print("inputs:", tuple(X1.shape), "and", tuple(X2.shape))
print("outputs:", tuple(Y1.shape), "and", tuple(Y2.shape))
print("'cat' has the same embedding in both:", torch.equal(X1[1], X2[1]))
print("'cat' has the same output in both:", torch.allclose(Y1[1], Y2[1]))
print("'cat' output in sentence 1:", Y1[1])
print("'cat' output in sentence 2:", Y2[1])
print("the two 'the' of sentence 1, same output:", torch.allclose(Y1[0], Y1[4]))
