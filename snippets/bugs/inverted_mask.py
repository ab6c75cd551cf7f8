# --8<-- [start:bug]
# A "True = blocked" causal mask passed to PyTorch's SDPA (LLMs-from-scratch #1061, fixed in #1062).
import torch
import torch.nn.functional as F

import attn_ref

torch.manual_seed(0)
T, d_k = 4, 8
q, k, v = (torch.randn(1, T, d_k) for _ in range(3))  # (B, T, d_k)
mask = torch.triu(torch.ones(T, T), diagonal=1).bool()  # True above the diagonal: the future
print("mask, True where the key comes after the query:")
print(mask.int().numpy())

buggy = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # SDPA reads True as "may attend"
out, weights = attn_ref.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # the same, with weights
print("attn_ref's output is SDPA's:", torch.allclose(out, buggy, atol=1e-6))
print("buggy weights, row i = query i:")
print(weights[0].numpy().round(3))
print("buggy output of the last query:", buggy[0, -1, :4].numpy(), "...")
# --8<-- [end:bug]

# --8<-- [start:fix]
fixed = F.scaled_dot_product_attention(q, k, v, attn_mask=~mask)  # the fix: True where allowed
causal = F.scaled_dot_product_attention(q, k, v, is_causal=True)
print("fixed, same as is_causal=True:", torch.allclose(fixed, causal))
# --8<-- [end:fix]

# --8<-- [start:check]
# The check: changing a token changes no earlier output, on random inputs.
C = 16
W_Q, W_K, W_V = (torch.randn(C, d_k) / C**0.5 for _ in range(3))  # (C, d_k) each


def sdpa_layer(blocked_is_true):
    def layer(x):  # (1, T, C) -> (1, T, d_k)
        T = x.shape[1]
        future = torch.triu(torch.ones(T, T), diagonal=1).bool()  # True = blocked
        mask = future if blocked_is_true else ~future
        return F.scaled_dot_product_attention(x @ W_Q, x @ W_K, x @ W_V, attn_mask=mask)

    return layer


mha = torch.nn.MultiheadAttention(C, num_heads=2, batch_first=True)


def mha_layer(x):  # (1, T, C) -> (1, T, C); nn.MultiheadAttention reads True as "blocked"
    T = x.shape[1]
    future = torch.triu(torch.ones(T, T), diagonal=1).bool()
    return mha(x, x, x, attn_mask=future, need_weights=False)[0]


def largest_leak(layer, trials=20):
    """How far an output moves when a later token changes: zero for a causal layer."""
    g = torch.Generator().manual_seed(1)
    worst = 0.0
    for _ in range(trials):
        T = int(torch.randint(2, 9, (), generator=g))  # a random length, 2 to 8
        x = torch.randn(1, T, C, generator=g)
        j = int(torch.randint(1, T, (), generator=g))  # the token to change
        y = x.clone()
        y[:, j] = torch.randn(C, generator=g)
        worst = max(worst, (layer(y)[:, :j] - layer(x)[:, :j]).abs().max().item())
    return worst


layers = {
    "SDPA, the triu mask (buggy)": sdpa_layer(blocked_is_true=True),
    "SDPA, ~mask (fixed)": sdpa_layer(blocked_is_true=False),
    "nn.MultiheadAttention, the triu mask": mha_layer,
}
with torch.no_grad():
    for name, layer in layers.items():
        worst = largest_leak(layer)
        verdict = "passes" if worst < 1e-6 else "FAILS"
        print(f"{name}: largest change before the changed token {worst:.1e}, {verdict}")
# --8<-- [end:check]
