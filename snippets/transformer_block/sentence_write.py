# How the heads write into the stream: page 4's two heads on "she", each
# head's output times its own rows of W_O, added to the token.
# --8<-- [start:compute]
import math

import torch

from attn_ref.examples import (
    SENTENCE,
    SENTENCE_HEADS_W_K,
    SENTENCE_HEADS_W_O,
    SENTENCE_HEADS_W_Q,
    SENTENCE_HEADS_W_V,
)

x = torch.tensor(SENTENCE)[None]  # (B, T, C) = (1, 4, 6): Alice met Bob she
W_Q, W_K, W_V, W_O = (
    torch.tensor(M)
    for M in (
        SENTENCE_HEADS_W_Q,
        SENTENCE_HEADS_W_K,
        SENTENCE_HEADS_W_V,
        SENTENCE_HEADS_W_O,
    )
)
B, T, C = x.shape
H, d_k = 2, 3
q, k, v = (
    (x @ W).view(B, T, H, d_k).transpose(1, 2) for W in (W_Q, W_K, W_V)
)  # (B, H, T, d_k)
allowed = torch.tril(torch.ones(T, T, dtype=torch.bool))
scores = (q @ k.transpose(-2, -1) / math.sqrt(d_k)).masked_fill(
    ~allowed, -math.inf
)
heads = torch.softmax(scores, dim=-1) @ v  # (B, H, T, d_k)
# Head h writes its output times its d_k rows of W_O: a (B, T, C) update.
writes = [heads[:, h] @ W_O[h * d_k : (h + 1) * d_k] for h in range(H)]
merged = heads.transpose(1, 2).reshape(B, T, C)  # the heads side by side
stream = x + writes[0] + writes[1]  # the residual stream after attention
# --8<-- [end:compute]
# --8<-- [start:report]
same = torch.allclose(merged @ W_O, writes[0] + writes[1])
print("merged @ W_O = sum of the heads' writes:", same)
print("she before:", x[0, 3].numpy())
print("she after: ", stream[0, 3].numpy().round(2))
# --8<-- [end:report]

# --8<-- [start:picture]
from attn_ref.diagrams import canvas, grid, note

short = ["name", "verb", "pron.", "fem.", "alice", "bob"]  # the features
rows = [
    (x[0, 3], "she, in the stream"),
    (writes[0][0, 3], "+ head 0's write"),
    (writes[1][0, 3], "+ head 1's write"),
    (stream[0, 3], "= she, after attention"),
]
fig, ax = canvas(10.6, 6.5, scale=0.41)
for n, (values, label) in enumerate(rows):
    top = 1.0 + 1.3 * n + (0.35 if n == 3 else 0.0)
    grid(
        ax,
        values,
        4.4,
        top,
        decimals=2,
        vmax=1.0,
        column_names=short if n == 0 else None,
    )
    note(ax, 4.2, top + 0.5, label, ha="right", fontsize=11)
ax.plot([4.4, 10.4], [5.2, 5.2], color="black", lw=1.5)  # the sum's line
# --8<-- [end:picture]
