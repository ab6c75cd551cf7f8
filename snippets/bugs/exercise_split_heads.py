# --8<-- [start:question]
# Exercise: heads split with a single view (reported in FuxiCTR #30).
import torch
import torch.nn.functional as F

torch.manual_seed(0)
B, T, C, H = 2, 5, 8, 2  # two heads of d_k = 4
W_Q, W_K, W_V = (torch.randn(C, C) / C**0.5 for _ in range(3))  # (C, C) each


def split_heads(x):  # (B, T, C) -> (B * H, T, d_k)
    B, T, C = x.shape
    return x.view(B * H, T, C // H)


def self_attention(x, split=split_heads):
    B, T, C = x.shape
    q, k, v = (split(x @ W) for W in (W_Q, W_K, W_V))  # (B * H, T, d_k) each
    out = F.scaled_dot_product_attention(q, k, v)  # (B * H, T, d_k)
    return out.view(B, H, T, C // H).transpose(1, 2).reshape(B, T, C)  # merged the right way


x = torch.randn(B, T, C)
print("q after the split:", tuple(split_heads(x @ W_Q).shape), "output:", tuple(self_attention(x).shape))
# --8<-- [end:question]


# --8<-- [start:solution]
def split_heads_fixed(x):
    B, T, C = x.shape
    return x.view(B, T, H, C // H).transpose(1, 2).reshape(B * H, T, C // H)  # (B, H, T, d_k) first


def largest_equivariance_error(split, trials=20):
    g = torch.Generator().manual_seed(1)
    worst = 0.0
    for _ in range(trials):
        T = int(torch.randint(2, 9, (), generator=g))
        x = torch.randn(2, T, C, generator=g)
        perm = torch.randperm(T, generator=g)
        moved = self_attention(x[:, perm], split) - self_attention(x, split)[:, perm]
        worst = max(worst, moved.abs().max().item())
    return worst


for split in (split_heads, split_heads_fixed):
    worst = largest_equivariance_error(split)
    verdict = "passes" if worst < 1e-5 else "FAILS"
    print(f"{split.__name__}: largest |f(shuffled x) - shuffled f(x)| {worst:.1e}, {verdict}")
# --8<-- [end:solution]
