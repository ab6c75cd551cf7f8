# --8<-- [start:picture]
# One query meets five keys: the scores, the weights and the weighted sum of
# the values, drawn from the numbers attn_ref computes.
import torch

from attn_ref import scaled_dot_product_attention
from attn_ref.diagrams import arrow, canvas, grid, note
from attn_ref.examples import LOOKUP_KEYS, LOOKUP_QUERY, LOOKUP_VALUES

q = torch.tensor(LOOKUP_QUERY)  # (1, d_k): one query
K = torch.tensor(LOOKUP_KEYS)  # (S, d_k): five keys
V = torch.tensor(LOOKUP_VALUES)  # (S, d_v): their values
S, d_k = K.shape
attended, a = scaled_dot_product_attention(q, K, V)  # (1, d_v), (1, S)
drawn = {
    "scores": (q @ K.T / d_k**0.5)[0],  # (S,)
    "weights": a[0],  # (S,)
    "weighted": a[0, :, None] * V,  # (S, d_v): row j is a_j v_j
    "output": attended[0],  # (d_v,)
}

lookup_fig, ax = canvas(10.9, 11.4, scale=0.4)
top = 4.0  # the first key's row
x = {
    "keys": 0.6,
    "scores": 3.3,
    "weights": 5.0,
    "values": 6.5,
    "weighted": 8.9,
}
signed = float(max(q.abs().max(), K.abs().max()))  # one scale: q and the keys
spread = float(V.abs().max())  # one scale: values, weighted values, output
grid(ax, q[0], x["keys"], 0.9, decimals=1, vmax=signed, label="query q")
arrow(ax, (x["keys"] + 1, 1.95), (x["keys"] + 1, top - 1.45))
note(ax, x["keys"] + 1.2, 2.2, "meets each key", ha="left")
columns = [
    ("keys", K, "keys\nkⱼ", {"decimals": 1, "vmax": signed}),
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
    ("values", V, "values\nvⱼ", {"decimals": 1, "vmax": spread}),
    (
        "weighted",
        drawn["weighted"],
        "weighted\naⱼ vⱼ",
        {"decimals": 2, "vmax": spread},
    ),
]
for name, values, label, options in columns:
    grid(ax, values, x[name], top, label=label, **options)
for j in range(S):
    y = top + j + 0.5
    note(ax, x["keys"] - 0.15, y, str(j), ha="right")
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
# One query, written out: scores, softmax, weighted sum.
import torch

from attn_ref.examples import LOOKUP_KEYS, LOOKUP_QUERY, LOOKUP_VALUES

q = torch.tensor(LOOKUP_QUERY)  # (1, d_k): one query, d_k = 2
K = torch.tensor(LOOKUP_KEYS)  # (S, d_k): five keys
V = torch.tensor(LOOKUP_VALUES)  # (S, d_v): their values
scores = q @ K.T / K.shape[-1] ** 0.5  # (1, S): how well q matches each key
weights = torch.softmax(scores, dim=-1)  # (1, S): positive, sum to one
output = weights @ V  # (1, S) @ (S, d_v) -> (1, d_v): weighted sum
print("scores: ", scores[0].numpy().round(2))
print("weights:", weights[0].numpy().round(3), f"sum {weights.sum():.4f}")
print("output: ", output[0].numpy().round(3))
# --8<-- [end:steps]

# --8<-- [start:every]
# Every query at once: one row per token. Checked against PyTorch's own.
import torch.nn.functional as F

others = [[-1.0, 1.5], [0.0, 0.0], [-0.5, -2.0], [2.0, -1.0]]
Q = torch.cat([q, torch.tensor(others)])  # (T, d_k): query 0 is q above
scores = Q @ K.T / K.shape[-1] ** 0.5  # (T, d_k) @ (d_k, T) -> (T, T)
weights = torch.softmax(scores, dim=-1)  # (T, T): each row sums to one
output = weights @ V  # (T, T) @ (T, d_v) -> (T, d_v)
print("scores, weights:", tuple(scores.shape), tuple(weights.shape))
print("outputs:", tuple(output.shape))
reference = F.scaled_dot_product_attention(Q, K, V)
print("same as PyTorch's:", torch.allclose(output, reference, atol=1e-6))
# --8<-- [end:every]

# --8<-- [start:every_picture]
# The matrices above, drawn: Q, Kᵀ and their scores, the weights, V and the
# output.
from attn_ref.diagrams import arrow, canvas, grid, note

T, d_k = K.shape
matrices_fig, ax = canvas(11.0, 15.0, scale=0.4)
left, top = 1.0, 3.3  # Q's left edge, and the top of the scores
signed = float(max(Q.abs().max(), K.abs().max()))  # one scale: Q and K
spread = float(V.abs().max())  # one scale: V and the output
grid(ax, K.T, left + 2.5, 0.8, decimals=1, vmax=signed)
note(ax, left + 2.3, 1.8, "Kᵀ", ha="right")
grid(ax, Q, left, top, decimals=1, vmax=signed, label="Q")
grid(ax, scores, left + 2.5, top, decimals=2)
grid(ax, V, left + 7.9, top, decimals=1, vmax=spread, label="V")
note(ax, left + 5, top + T + 0.45, f"scores Q Kᵀ / √{d_k}")
below = top + T + 1.7
arrow(ax, (left + 5, top + T + 0.8), (left + 5, below - 0.1))
note(ax, left + 4.8, top + T + 1.25, "softmax, row by row", ha="right")
grid(ax, weights, left + 2.5, below, cmap="viridis", decimals=2)
grid(ax, output, left + 7.9, below, decimals=2, vmax=spread)
arrow(ax, (left + 8.9, top + T + 0.05), (left + 8.9, below - 0.05))
note(ax, left + 5, below + T + 0.45, "weights")
note(ax, left + 8.9, below + T + 0.45, "output")
note(ax, left - 0.1, top - 0.35, "token", ha="right", va="bottom")
for i in range(T):
    note(ax, left - 0.2, top + i + 0.5, str(i), ha="right")
    note(ax, left + 2.3, below + i + 0.5, str(i), ha="right")
    note(ax, left + 3 + i, 0.45, str(i))
# --8<-- [end:every_picture]
