# --8<-- [start:setup]
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
PE = sinusoidal_positional_encoding(3, C)  # (T, C): PE[t] for position t


def embed(words):
    ids = torch.tensor([vocab[w] for w in words])
    return E[ids]  # (T, C)


def attend(X):
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V  # (T, C) each
    out, _ = scaled_dot_product_attention(Q, K, V)
    return out  # (T, C)


a = ["dog", "bites", "man"]
b = ["man", "bites", "dog"]
# --8<-- [end:setup]

# --8<-- [start:picture]
from attn_ref.diagrams import Box, canvas, grid, note, outline

fig, ax = canvas(10, 6.6)
largest = 0.0  # one colour scale for the four grids
shown = {}  # (with positions, sentence): its outputs, (T, C)
for with_pe in (False, True):
    for words in (a, b):
        X = embed(words) + (PE if with_pe else 0)
        shown[with_pe, " ".join(words)] = attend(X)
        largest = max(
            largest, shown[with_pe, " ".join(words)].abs().max().item()
        )
for row, with_pe in enumerate((False, True)):
    y = 0.9 + 3.0 * row
    title = "with positions: X + PE" if with_pe else "no positions: X"
    note(ax, 5, y - 0.55, title)
    for column, words in enumerate((a, b)):
        x = 1.2 + 5.1 * column
        out = shown[with_pe, " ".join(words)]
        box = grid(ax, out, x, y + 0.3, cell=0.45, vmax=largest)
        for t, word in enumerate(words):
            note(ax, x - 0.1, y + 0.3 + 0.45 * (t + 0.5), word, ha="right")
        dog = words.index("dog")
        outline(ax, Box(x, y + 0.3 + 0.45 * dog, box.width, 0.45))
note(ax, 5, 6.3, "framed: the output of 'dog', 8 numbers")
# --8<-- [end:picture]

# --8<-- [start:check]
import torch

# "dog" is word 0 of a and word 2 of b.
out_a, out_b = attend(embed(a)), attend(embed(b))
same = torch.allclose(out_a[0], out_b[2], atol=1e-6)
print("no positions, 'dog' has the same output:", same)
mean_a, mean_b = out_a.mean(dim=0), out_b.mean(dim=0)
same = torch.allclose(mean_a, mean_b, atol=1e-6)
print("no positions, same mean over the sentence:", same)

# Add where each word sits: PE[t] for the word at position t.
out_a = attend(embed(a) + PE)
out_b = attend(embed(b) + PE)
same = torch.allclose(out_a[0], out_b[2], atol=1e-6)
print("with positions, 'dog' has the same output:", same)
gap = (out_a[0] - out_b[2]).abs().max().item()
print(f"largest difference: {gap:.2f}")
# --8<-- [end:check]
