# --8<-- [start:bug]
# Merging heads with a reshape and no permute (transformer-from-scratch #4, fixed in #6).
import torch
import torch.nn.functional as F

B, H, T, d_k = 1, 2, 4, 1
# Each head's output for each token, labelled 10 * head + token: (B, H, T, d_k).
values = torch.tensor([[10.0 * h + t for t in range(T)] for h in range(H)]).reshape(B, H, T, d_k)
print("reshaped to (B, T, H * d_k) directly, the bug; row t is token t:")
print(values.reshape(B, T, H * d_k)[0].int().numpy())
print("permuted to (B, T, H, d_k) first, the fix:")
print(values.permute(0, 2, 1, 3).reshape(B, T, H * d_k)[0].int().numpy())
# --8<-- [end:bug]

# --8<-- [start:check]
# The check: shuffling the tokens shuffles the outputs the same way (no positions are added here).
torch.manual_seed(0)
C = 8  # two heads of d_k = 4
W_QKV, W_O = torch.randn(C, 3 * C) / C**0.5, torch.randn(C, C) / C**0.5


def multi_head_attention(x, fixed=False):
    B, T, C = x.shape
    qkv = (x @ W_QKV).reshape(B, T, H, 3 * (C // H))  # each head's q, k and v side by side
    q, k, v = (t.permute(0, 2, 1, 3) for t in qkv.chunk(3, dim=-1))  # (B, H, T, d_k) each
    values = F.scaled_dot_product_attention(q, k, v)  # (B, H, T, d_k)
    if fixed:
        values = values.permute(0, 2, 1, 3)  # (B, T, H, d_k)
    return values.reshape(B, T, C) @ W_O  # (B, T, C)


def largest_equivariance_error(fixed, trials=20):
    g = torch.Generator().manual_seed(1)
    worst = 0.0
    for _ in range(trials):
        T = int(torch.randint(2, 9, (), generator=g))  # a random length, 2 to 8
        x = torch.randn(2, T, C, generator=g)
        perm = torch.randperm(T, generator=g)
        moved = multi_head_attention(x[:, perm], fixed) - multi_head_attention(x, fixed)[:, perm]
        worst = max(worst, moved.abs().max().item())
    return worst


for fixed in (False, True):
    worst = largest_equivariance_error(fixed)
    verdict = "passes" if worst < 1e-5 else "FAILS"
    print(f"{'fixed' if fixed else 'buggy'}: largest |f(shuffled x) - shuffled f(x)| {worst:.1e}, {verdict}")
# --8<-- [end:check]
