# --8<-- [start:picture]
# She's query meets the four keys: the scores, the weights and the weighted
# sum of the values, drawn from the numbers attn_ref computes.
import torch

from attn_ref import scaled_dot_product_attention
from attn_ref.diagrams import arrow, canvas, grid, note
from attn_ref.examples import (
    SENTENCE,
    SENTENCE_TOKENS,
    SENTENCE_W_K,
    SENTENCE_W_Q,
    SENTENCE_W_V,
)

X = torch.tensor(SENTENCE)  # (T, C): the tokens' features (page 2)
Q, K, V = (
    X @ torch.tensor(W) for W in (SENTENCE_W_Q, SENTENCE_W_K, SENTENCE_W_V)
)
she = SENTENCE_TOKENS.index("she")
q = Q[she : she + 1]  # (1, d_k): she's query
S, d_k = K.shape
attended, a = scaled_dot_product_attention(q, K, V)  # (1, d_v), (1, S)
drawn = {
    "scores": (q @ K.T / d_k**0.5)[0],  # (S,)
    "weights": a[0],  # (S,)
    "weighted": a[0, :, None] * V,  # (S, d_v): row j is a_j v_j
    "output": attended[0],  # (d_v,)
}

lookup_fig, ax = canvas(12.1, 11.2, scale=0.375)  # fits a phone
top = 4.6  # the first key's row
x = {
    "keys": 1.6,
    "scores": 4.3,
    "weights": 6.0,
    "values": 7.5,
    "weighted": 9.9,
}
signed = float(max(q.abs().max(), K.abs().max()))  # one scale: q and the keys
spread = 1.0  # one scale: values, weighted values, output
grid(ax, q[0], x["keys"], 0.9, decimals=0, vmax=signed, label="she's query q")
arrow(ax, (x["keys"] + 1, 1.95), (x["keys"] + 1, top - 1.2))
note(ax, x["keys"] + 1.2, 2.2, "meets each key", ha="left")
columns = [
    (
        "keys",
        K,
        "keys kⱼ",
        {"decimals": 0, "vmax": signed, "column_names": ["name", "fem."]},
    ),
    (
        "scores",
        drawn["scores"][:, None],
        f"score\nq·kⱼ/√{d_k}",
        {"decimals": 2},
    ),
    (
        "weights",
        drawn["weights"][:, None],
        "weight\naⱼ",
        {"decimals": 2, "cmap": "viridis"},
    ),
    (
        "values",
        V,
        "values vⱼ",
        {"decimals": 0, "vmax": spread, "column_names": ["Alice", "Bob"]},
    ),
    (
        "weighted",
        drawn["weighted"],
        "weighted\naⱼ vⱼ",
        {"decimals": 2, "vmax": spread},
    ),
]
for name, values, label, options in columns:
    grid(ax, values, x[name], top, label=label, **options)
for j, token in enumerate(SENTENCE_TOKENS):
    y = top + j + 0.5
    note(ax, x["keys"] - 0.15, y, token, ha="right")
    note(ax, x["values"] - 0.25, y, "×")
    note(ax, x["weighted"] - 0.25, y, "=")
middle = top + S / 2
arrow(ax, (x["keys"] + 2.05, middle), (x["scores"] - 0.05, middle))
arrow(ax, (x["scores"] + 1.05, middle), (x["weights"] - 0.05, middle))
note(ax, x["weights"] - 0.35, top + S + 0.45, "softmax")
bottom = top + S + 1.4
arrow(
    ax, (x["weighted"] + 1, top + S + 0.05), (x["weighted"] + 1, bottom - 0.05)
)
note(ax, x["weighted"] + 0.85, top + S + 0.7, "sum", ha="right")
grid(ax, drawn["output"], x["weighted"], bottom, decimals=2, vmax=spread)
note(ax, x["weighted"] - 0.15, bottom + 0.5, "output", ha="right")
# --8<-- [end:picture]

# --8<-- [start:steps]
# One query meets the keys: scores, softmax, weighted sum.
import torch

# One row per token: Alice, met, Bob, she.
# A key says: a name? female? A value says: Alice? Bob?
K = torch.tensor([[1.0, 1.0], [0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
V = torch.tensor([[1.0, 0.0], [0.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
q = torch.tensor([4.0, 4.0])  # she asks: a name? female?
d_k = q.shape[-1]  # the width of a query and of a key
scores = K @ q / d_k**0.5  # (T,): q · k_j / sqrt(d_k)
weights = torch.softmax(scores, dim=-1)  # (T,): positive, sum to one
output = weights @ V  # (T,) @ (T, d_v) -> (d_v,)
print("scores: ", scores.numpy().round(2))
print("weights:", weights.numpy().round(3))
print("output: ", output.numpy().round(3))
# --8<-- [end:steps]

# --8<-- [start:every]
# Every query at once; continues the block above (K, V and d_k).
import torch.nn.functional as F

# Queries: Alice and Bob ask nothing; met asks for a name; she as above.
Q = torch.tensor([[0.0, 0.0], [4.0, 0.0], [0.0, 0.0], [4.0, 4.0]])
scores = Q @ K.T / d_k**0.5  # (T, d_k) @ (d_k, T) -> (T, T)
weights = torch.softmax(scores, dim=-1)  # (T, T): each row sums to one
output = weights @ V  # (T, T) @ (T, d_v) -> (T, d_v)
print("weights, a row per query:")
print(weights.numpy().round(2))
reference = F.scaled_dot_product_attention(Q, K, V)
print("same as PyTorch's:", torch.allclose(output, reference, atol=1e-6))
# --8<-- [end:every]

# --8<-- [start:every_picture]
# Every query at once, drawn from the numbers attn_ref computes: Q, Kᵀ and
# their scores, the weights, V and the output.
import torch

from attn_ref import scaled_dot_product_attention
from attn_ref.diagrams import arrow, canvas, grid, note
from attn_ref.examples import (
    SENTENCE,
    SENTENCE_TOKENS,
    SENTENCE_W_K,
    SENTENCE_W_Q,
    SENTENCE_W_V,
)

X = torch.tensor(SENTENCE)  # (T, C): the tokens' features (page 2)
Q, K, V = (
    X @ torch.tensor(W) for W in (SENTENCE_W_Q, SENTENCE_W_K, SENTENCE_W_V)
)
T, d_k = K.shape
output, weights = scaled_dot_product_attention(Q, K, V)  # (T, d_v), (T, T)
scores = Q @ K.T / d_k**0.5  # (T, T)
matrices_fig, ax = canvas(11.0, 12.6, scale=0.4)
left, top = 1.8, 3.0  # Q's left edge, and the top of the scores
signed = float(max(Q.abs().max(), K.abs().max()))  # one scale: Q and K
grid(ax, K.T, left + 2.5, 0.6, decimals=0, vmax=signed)
note(ax, left + 2.3, 1.6, "Kᵀ", ha="right")
grid(ax, Q, left, top, decimals=0, vmax=signed, label="Q")
grid(ax, scores, left + 2.5, top, decimals=2)
grid(ax, V, left + 7.2, top, decimals=0, vmax=1.0, label="V")
note(ax, left + 4.5, top + T + 0.45, f"scores Q Kᵀ / √{d_k}")
below = top + T + 1.7
arrow(ax, (left + 4.5, top + T + 0.8), (left + 4.5, below - 0.1))
note(ax, left + 4.3, top + T + 1.25, "softmax, row by row", ha="right")
grid(ax, weights, left + 2.5, below, cmap="viridis", decimals=2)
grid(ax, output, left + 7.2, below, decimals=2, vmax=1.0)
arrow(ax, (left + 8.2, top + T + 0.05), (left + 8.2, below - 0.05))
note(ax, left + 4.5, below + T + 0.45, "weights")
note(ax, left + 8.2, below + T + 0.45, "output")
for i, token in enumerate(SENTENCE_TOKENS):
    note(ax, left - 0.15, top + i + 0.5, token, ha="right", fontsize=10)
    note(ax, left + 2.35, below + i + 0.5, token, ha="right", fontsize=10)
    note(ax, left + 3 + i, 0.25, token, fontsize=9)
# --8<-- [end:every_picture]
