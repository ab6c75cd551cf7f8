# From words to vectors: a fixed-size raw vector, then a linear projection.
import torch

vocab = ["a", "cat", "mat", "on", "ran", "sat", "the"]
sentence = ["the", "cat", "sat", "on", "the", "mat"]
ids = torch.tensor([vocab.index(word) for word in sentence])  # (T,)

# Raw vectors: one-hot, so every token has the same size V = len(vocab).
raw = torch.nn.functional.one_hot(ids, num_classes=len(vocab)).float()  # (T, V)

# The projection to C features: a (V, C) matrix, learned in a real model.
torch.manual_seed(0)
C = 4
W_E = torch.randn(len(vocab), C)  # (V, C)
X = raw @ W_E  # (T, V) @ (V, C) -> (T, C)

print("raw:", tuple(raw.shape), " W_E:", tuple(W_E.shape), " X:", tuple(X.shape))
print("one-hot @ W_E is the row lookup W_E[ids]:", torch.equal(X, W_E[ids]))
embedding = torch.nn.Embedding.from_pretrained(W_E)  # PyTorch's lookup layer
print("nn.Embedding with the same table agrees:", torch.equal(X, embedding(ids)))
print("both 'the' tokens get the same vector:", torch.equal(X[0], X[4]))
