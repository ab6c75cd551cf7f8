# --8<-- [start:bug]
# A "True = blocked" causal mask passed to PyTorch's SDPA
# (rasbt/LLMs-from-scratch #1061, fixed in #1062).
import torch
import torch.nn.functional as F

import attn_ref

torch.manual_seed(0)
T, d_k = 4, 8
q, k, v = (torch.randn(1, T, d_k) for _ in range(3))  # (B, T, d_k)
mask = torch.triu(torch.ones(T, T), diagonal=1).bool()  # True above diagonal
print("mask, True where the key comes after the query:")
print(mask.int().numpy())

buggy = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # True: attend
out, weights = attn_ref.scaled_dot_product_attention(q, k, v, attn_mask=mask)
same = torch.allclose(out, buggy, atol=1e-6)
print("attn_ref's output is SDPA's:", same)
print("buggy output of the last query:", buggy[0, -1, :4].numpy(), "...")
# --8<-- [end:bug]

# --8<-- [start:fix]
fixed = F.scaled_dot_product_attention(q, k, v, attn_mask=~mask)  # the fix
causal = F.scaled_dot_product_attention(q, k, v, is_causal=True)
fixed_is_causal = torch.allclose(fixed, causal, atol=1e-6)
print("fixed, same as is_causal=True:", fixed_is_causal)
# --8<-- [end:fix]

# --8<-- [start:plot]
import matplotlib.pyplot as plt

from attn_ref.plotting import attention_heatmap

_, causal_weights = attn_ref.scaled_dot_product_attention(
    q, k, v, attn_mask=~mask
)
fig, axes = plt.subplots(2, 1, figsize=(4.4, 6.4), layout="constrained")
panels = {
    "the triu mask as attn_mask (bug)": (weights[0], mask),
    "~mask, the causal mask (fix)": (causal_weights[0], ~mask),
}
for ax, (title, (w, seen)) in zip(axes, panels.items(), strict=True):
    attention_heatmap(w, ax=ax, title=title, vmax=1.0, mask=seen)
# --8<-- [end:plot]

# --8<-- [start:check]
# The check: changing a token changes no earlier output (20 random sequences).
C, T = 16, 6
W_Q, W_K, W_V = (torch.randn(C, d_k) / C**0.5 for _ in range(3))  # (C, d_k)
mha = torch.nn.MultiheadAttention(C, num_heads=2, batch_first=True)
future = torch.triu(torch.ones(T, T), diagonal=1).bool()  # the same triu mask


def sdpa(x, mask):
    return F.scaled_dot_product_attention(x @ W_Q, x @ W_K, x @ W_V, mask)


def mha_layer(x):  # nn.MultiheadAttention reads True as "blocked"
    return mha(x, x, x, attn_mask=future, need_weights=False)[0]


layers = {
    "SDPA, the triu mask (buggy)": lambda x: sdpa(x, future),
    "SDPA, ~mask (fixed)": lambda x: sdpa(x, ~future),
    "nn.MultiheadAttention, the triu mask": mha_layer,
}
g = torch.Generator().manual_seed(1)
x = torch.randn(20, T, C, generator=g)
changed = {}  # (layer, j): x with token j changed
tolerance, worst = 1e-6, {}
with torch.no_grad():
    for name, layer in layers.items():
        worst[name] = 0.0
        for j in range(1, T):  # change token j: outputs 0 to j - 1 must stay
            y = x.clone()
            y[:, j] = torch.randn(20, C, generator=g)
            changed[name, j] = y
            moved = layer(y)[:, :j] - layer(x)[:, :j]
            worst[name] = max(worst[name], moved.abs().max().item())
# --8<-- [end:check]

# --8<-- [start:verdict]
for name, violation in worst.items():
    verdict = "passes" if violation < tolerance else "FAILS"
    print(f"{name}: earlier outputs moved by {violation:.1e}, {verdict}")
# --8<-- [end:verdict]
