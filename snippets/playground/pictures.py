# --8<-- [start:lookup]
# The soft lookup's first state: the query meets the five keys, the scores,
# the weights, and the values summed with those weights.
import math

import torch

from attn_ref import scaled_dot_product_attention
from attn_ref.diagrams import arrow, canvas, grid, note
from attn_ref.examples import LOOKUP_KEYS, LOOKUP_QUERY, LOOKUP_VALUES

q, K, V = (torch.tensor(x) for x in (LOOKUP_QUERY, LOOKUP_KEYS, LOOKUP_VALUES))
S, d_k = K.shape
tau = math.sqrt(d_k)  # the temperature the view starts at
output, weights = scaled_dot_product_attention(q, K, V, scale=1 / tau)
scores = (q @ K.T / tau)[0]  # (S,)

lookup_fig, ax = canvas(13.2, 7.8, scale=0.34)
top = 2.5  # the first key's row
x = {"keys": 1.0, "scores": 3.7, "weights": 6.4, "values": 8.0, "out": 11.1}
signed = float(max(q.abs().max(), K.abs().max()))  # one scale: q and keys
spread = float(V.abs().max())  # one scale: the values and the output
grid(ax, q[0], x["keys"], 0.3, decimals=1, vmax=signed, row_names=["q"])
arrow(ax, (x["keys"] + 1, 1.35), (x["keys"] + 1, top - 0.05))
columns = [
    ("keys", K, {"decimals": 1, "vmax": signed}),
    ("scores", scores[:, None], {"decimals": 2}),
    ("weights", weights[0][:, None], {"decimals": 2, "cmap": "viridis"}),
    ("values", V, {"decimals": 1, "vmax": spread}),
]
for name, values, options in columns:
    grid(ax, values, x[name], top, **options)
for j in range(S):
    y = top + j + 0.5
    note(ax, x["keys"] - 0.15, y, f"k{j}", ha="right", fontsize=10)
    note(ax, x["values"] - 0.3, y, "×")
middle, above = top + S / 2, top - 0.1
note(ax, x["scores"] + 0.5, above, f"score\nq·kⱼ/√{d_k}", va="bottom")
note(ax, x["weights"] + 0.5, above, "weight\naⱼ", va="bottom")
note(ax, x["values"] + 1, above, "value\nvⱼ", va="bottom")
arrow(ax, (x["keys"] + 2.05, middle), (x["scores"] - 0.05, middle))
arrow(ax, (x["scores"] + 1.05, middle), (x["weights"] - 0.05, middle))
note(ax, x["scores"] + 1.85, middle - 0.45, "softmax", fontsize=9)
arrow(ax, (x["values"] + 2.05, middle), (x["out"] - 0.05, middle))
note(ax, x["values"] + 2.6, middle - 0.45, "sum", fontsize=10)
grid(ax, output[0], x["out"], middle - 0.5, decimals=2, vmax=spread)
note(ax, x["out"] + 1, middle + 0.95, "output")
# --8<-- [end:lookup]

# --8<-- [start:self_attention]
# Self-attention on the three tokens with the causal mask: every query
# meets every key, a token sees only itself and the tokens before it, and
# each row of weights sums the values.
import torch

from attn_ref import scaled_dot_product_attention
from attn_ref.diagrams import arrow, canvas, grid, note
from attn_ref.examples import THREE_TOKENS

X = torch.tensor([token[:2] for token in THREE_TOKENS])  # (T, C): the view's
Q = K = V = X  # the view's first state: W_Q and W_K are the identity
T, d_k = K.shape
causal = torch.ones(T, T).tril().bool()  # (T, T): True where a key is seen
output, weights = scaled_dot_product_attention(Q, K, V, attn_mask=causal)
scores = Q @ K.T / d_k**0.5  # (T, T), before the mask
spread = float(V.abs().max())  # one scale: the values and the output

matrices_fig, ax = canvas(13.5, 7.7, scale=0.33)
top = 3.5  # the first query's row
x = {"Q": 0.9, "scores": 3.3, "weights": 8.0, "out": 11.4}
names = [f"x{i}" for i in range(T)]
grid(ax, K.T, x["scores"], top - 2.6, decimals=0, column_names=names)
note(ax, x["scores"] - 0.2, top - 1.6, "Kᵀ", ha="right")
grid(ax, Q, x["Q"], top, decimals=0, label="Q", row_names=names)
grid(ax, scores, x["scores"], top, decimals=2, mask=causal)
grid(ax, V, x["out"], top - 3.4, decimals=0, vmax=spread)
note(ax, x["out"] - 0.2, top - 1.9, "V", ha="right")
grid(ax, weights, x["weights"], top, cmap="viridis", decimals=2, mask=causal)
grid(ax, output, x["out"], top, decimals=2, vmax=spread)
middle, below = top + T / 2, top + T + 0.5
arrow(ax, (x["scores"] + 3.1, middle), (x["weights"] - 0.05, middle))
note(ax, x["scores"] + 3.85, middle - 0.45, "softmax", fontsize=9)
masked = f"scores Q Kᵀ/√{d_k}\nfuture masked"
note(ax, x["scores"] + 1.5, below, masked, va="top")
note(ax, x["weights"] + 1.5, below, "weights", va="top")
note(ax, x["out"] + 1, below, "output\nweights V", va="top")
# --8<-- [end:self_attention]
