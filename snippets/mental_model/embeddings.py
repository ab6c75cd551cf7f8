# From words to vectors: one-hot raw vectors of one size, then a linear
# projection.
import torch

vocab = ["a", "cat", "mat", "on", "ran", "sat", "the"]
sentence = ["the", "cat", "sat", "on", "the", "mat"]
ids = torch.tensor([vocab.index(word) for word in sentence])  # (T,)
raw = torch.nn.functional.one_hot(
    ids, len(vocab)
).float()  # (T, D) with D = len(vocab)
torch.manual_seed(0)
C = 4
W_E = torch.randn(len(vocab), C)  # (D, C), learned in a real model
X = raw @ W_E  # (T, D) @ (D, C) -> (T, C)
embedding = torch.nn.Embedding.from_pretrained(W_E)  # PyTorch's lookup table
print("one-hot @ W_E == nn.Embedding lookup:", torch.equal(X, embedding(ids)))
print("both 'the' get the same vector:", torch.equal(X[0], X[4]))

# One self-attention layer: the same three (C, C) matrices for every token.
from attn_ref import scaled_dot_product_attention

W_Q, W_K, W_V = (torch.randn(C, C) for _ in range(3))


def self_attention(words):
    X = embedding(
        torch.tensor([vocab.index(word) for word in words])
    )  # (T, C)
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V  # (T, C) each
    return scaled_dot_product_attention(Q, K, V)[0]  # (T, C)


def close(a, b):
    return torch.allclose(a, b, atol=1e-6)


sentence_2 = ["a", "cat", "ran"]
Y1, Y2 = self_attention(sentence), self_attention(sentence_2)

print("'cat' in sentence 1:", Y1[1])
print("'cat' in sentence 2:", Y2[1])
print("the two 'the' of sentence 1, same output:", close(Y1[0], Y1[4]))
