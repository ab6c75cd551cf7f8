# --8<-- [start:heads]
# Two heads, two notions of relevance, with hand-set per-head projections.
import torch

from attn_ref import MultiHeadAttention
from attn_ref.examples import SENTENCE, SENTENCE_FEATURES, SENTENCE_TOKENS

tokens = SENTENCE_TOKENS
col = {
    name: i for i, name in enumerate(SENTENCE_FEATURES)
}  # feature name -> column
X = torch.tensor(SENTENCE)[None]  # (T, C) -> (B, T, C) with B = 1
C = X.shape[-1]

num_heads = 2
d_k = C // num_heads  # each head works in C / num_heads dimensions
# All heads side by side: head h owns columns h * d_k ... (h + 1) * d_k - 1.
W_Q, W_K, W_V = torch.zeros(C, C), torch.zeros(C, C), torch.zeros(C, C)
# Head 0: a pronoun looks for a female name, and takes who it is.
W_Q[col["pronoun"], 0:2] = 6.0
W_K[col["name"], 0] = W_K[col["female"], 1] = 1.0
W_V[col["alice"], 0] = W_V[col["bob"], 1] = 1.0
# Head 1: a pronoun looks for the verb, and takes it.
W_Q[col["pronoun"], d_k] = 12.0
W_K[col["verb"], d_k] = 1.0
W_V[col["verb"], d_k] = 1.0
W_O = torch.eye(
    C
)  # the output projection: the identity shows the heads as they are


def attention_with(num_heads):
    mha = MultiHeadAttention(
        embed_dim=C, num_heads=num_heads, bias=False
    ).requires_grad_(False)
    # nn.Linear stores weight = W.T, shape (out, in).
    for layer, W in [
        (mha.q_proj, W_Q),
        (mha.k_proj, W_K),
        (mha.v_proj, W_V),
        (mha.out_proj, W_O),
    ]:
        layer.weight.copy_(W.T)
    return mha


output, weights = attention_with(num_heads)(X, X, X)  # (B, T, C), (B, H, T, T)
print("X:", tuple(X.shape), " weights:", tuple(weights.shape))
for h in range(num_heads):
    row = weights[0, h, 3]  # (T,): the weights of 'she' in head h
    top = tokens[row.argmax()]
    print(f"head {h}: 'she' attends most to {top},", row.numpy().round(3))
print("output of 'she' [head 0 | head 1]:", output[0, 3].numpy().round(3))

# The same matrices as ONE head of width C: one row of weights for both jobs.
output_1, weights_1 = attention_with(1)(X, X, X)  # (B, T, C), (B, 1, T, T)
print("one head: weights of 'she':", weights_1[0, 0, 3].numpy().round(3))
print("one head: output of 'she':", output_1[0, 3].numpy().round(3))
# --8<-- [end:heads]

# --8<-- [start:plot]
import matplotlib.pyplot as plt

from attn_ref.plotting import attention_heatmap

fig, axes = plt.subplots(
    3, 1, figsize=(4.2, 8.4), layout="constrained"
)  # stacked: legible on a phone
panels = [(weights[0, 0], "head 0 of 2"), (weights[0, 1], "head 1 of 2")]
panels += [(weights_1[0, 0], "one head, same matrices")]
for ax, (w, title) in zip(axes, panels, strict=True):
    attention_heatmap(w, query_labels=tokens, ax=ax, title=title, vmax=1.0)
# --8<-- [end:plot]
