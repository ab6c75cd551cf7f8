# --8<-- [start:bug]
# Merging heads with a reshape and no permute
# (jsbaan/transformer-from-scratch #4, fixed in #6).
import torch
import torch.nn.functional as F

B, H, T, d_k = 1, 2, 4, 1
# Each head's output for each token, labelled 10 * head + token:
# (B, H, T, d_k).
labels = [[10.0 * h + t for t in range(T)] for h in range(H)]
values = torch.tensor(labels).reshape(B, H, T, d_k)
merged = values.reshape(B, T, H * d_k)  # the bug: straight to (B, T, C)
permuted = values.permute(0, 2, 1, 3).reshape(B, T, H * d_k)  # the fix
# --8<-- [end:bug]

# --8<-- [start:plot]
from attn_ref.diagrams import canvas, grid, note

fig, ax = canvas(10, 6.6)
panels = {"reshape only (bug)": merged, "permute first (fix)": permuted}
for x, (title, rows) in zip((0.5, 5.5), panels.items(), strict=True):
    outputs = rows[0]  # (T, H * d_k): 10 * head + token
    token = outputs % 10  # the token each number came from
    words = [
        [f"h{int(n) // 10} t{int(n) % 10}" for n in row] for row in outputs
    ]
    note(ax, x + 2.2, 0.5, title)
    grid(ax, token + 0.5, x + 1.2, 1.2, cmap="tab10", vmax=10, labels=words)
    for t in range(T):
        note(ax, x + 1, 1.7 + t, f"token {t}", ha="right", fontsize=10)
note(ax, 5, 6.0, "colour: the token an output belongs to", fontsize=10)
# --8<-- [end:plot]

# --8<-- [start:check]
# The check: shuffling the tokens shuffles the outputs the same way.
from attn_ref import split_heads

torch.manual_seed(0)
C = 8  # two heads of d_k = 4
W_Q, W_K, W_V = (torch.randn(C, C) / C**0.5 for _ in range(3))  # (C, C) each


def multi_head_attention(x, fixed=False):
    B, T, C = x.shape
    q, k, v = (
        split_heads(x @ W, H) for W in (W_Q, W_K, W_V)
    )  # (B, H, T, d_k)
    values = F.scaled_dot_product_attention(q, k, v)  # (B, H, T, d_k)
    if fixed:
        values = values.permute(0, 2, 1, 3)  # (B, T, H, d_k)
    return values.reshape(B, T, C)


g = torch.Generator().manual_seed(1)
x = torch.randn(20, 8, C, generator=g)  # 20 random sequences, no positions
perm = torch.randperm(8, generator=g)  # a random shuffle of the 8 tokens
tolerance, worst = 1e-5, {}
for fixed in (False, True):
    shuffled_first = multi_head_attention(x[:, perm], fixed)
    shuffled_after = multi_head_attention(x, fixed)[:, perm]
    name = "fixed" if fixed else "buggy"
    worst[name] = (shuffled_first - shuffled_after).abs().max().item()
# --8<-- [end:check]

# --8<-- [start:verdict]
for name, violation in worst.items():
    verdict = "passes" if violation < tolerance else "FAILS"
    label = f"{name}: largest |f(shuffled x) - shuffled f(x)|"
    print(label, f"{violation:.1e}, {verdict}")
# --8<-- [end:verdict]
