# --8<-- [start:bug]
# is_causal=True with fewer queries than keys, as after a KV cache
# (pytorch/pytorch #108108).
import torch
import torch.nn.functional as F

from attn_ref.masks import causal_mask

torch.manual_seed(0)
S, d_k = 5, 4  # five tokens: four in the cache, then a new one
q, k, v = (torch.randn(1, S, d_k) for _ in range(3))  # (B, S, d_k)
full = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # all at once
new = F.scaled_dot_product_attention(
    q[:, -1:], k, v, is_causal=True
)  # new one
print("all at once, last token:", full[0, -1].numpy().round(3))
print("new query alone:        ", new[0, 0].numpy().round(3))
print("value of token 0:       ", v[0, 0].numpy().round(3))
# --8<-- [end:bug]

# --8<-- [start:fix]
L = 1  # new queries: the last L of the S positions
mask = causal_mask(L, S, lower_right=True)
fixed = F.scaled_dot_product_attention(q[:, -L:], k, v, attn_mask=mask)
print("with a bottom-right mask:", fixed[0, 0].numpy().round(3))
# --8<-- [end:fix]

# --8<-- [start:check]
# The check: the last L queries, against all S keys, give the last L rows of
# the pass over all S tokens at once (20 random sequences).
g = torch.Generator().manual_seed(1)
qs, ks, vs = (torch.randn(20, S, d_k, generator=g) for _ in range(3))
full_pass = F.scaled_dot_product_attention(qs, ks, vs, is_causal=True)
tolerance, worst = 1e-5, {}
for name in ("is_causal=True", "bottom-right mask"):
    worst[name] = 0.0
    for L in range(1, S):  # L new queries after S - L cached tokens
        if name == "is_causal=True":
            how = {"is_causal": True}
        else:
            how = {"attn_mask": causal_mask(L, S, lower_right=True)}
        last = F.scaled_dot_product_attention(qs[:, -L:], ks, vs, **how)
        worst[name] = max(
            worst[name], (last - full_pass[:, -L:]).abs().max().item()
        )
# --8<-- [end:check]

# --8<-- [start:verdict]
for name, violation in worst.items():
    verdict = "passes" if violation < tolerance else "FAILS"
    label = f"{name}: largest difference from the full pass"
    print(label, f"{violation:.1e}, {verdict}")
# --8<-- [end:verdict]
