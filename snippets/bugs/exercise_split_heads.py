# Exercise: heads split with a single view (reported in reczoo/FuxiCTR #30).
import torch
import torch.nn.functional as F

from attn_ref import merge_heads

torch.manual_seed(0)
B, T, C, H = 2, 5, 8, 2  # two heads of d_k = 4
W_Q, W_K, W_V = (torch.randn(C, C) / C**0.5 for _ in range(3))  # (C, C) each


def split_heads(x):  # (B, T, C) -> (B * H, T, d_k): the shapes are right
    B, T, C = x.shape
    return x.view(B * H, T, C // H)


def split_heads_fixed(x):
    B, T, C = x.shape
    x = x.view(B, T, H, C // H).transpose(1, 2)  # (B, H, T, d_k)
    return x.reshape(B * H, T, C // H)


def self_attention(x, split):
    q, k, v = (split(x @ W) for W in (W_Q, W_K, W_V))  # (B * H, T, d_k) each
    out = F.scaled_dot_product_attention(q, k, v)  # (B * H, T, d_k)
    return merge_heads(out.view(len(x), H, *out.shape[1:]))  # (B, T, C)


x = torch.randn(B, T, C)
perm = torch.randperm(T)  # shuffle the tokens
worst = {}
for split in (split_heads, split_heads_fixed):
    shuffled_in = self_attention(x[:, perm], split)
    shuffled_out = self_attention(x, split)[:, perm]
    worst[split.__name__] = (shuffled_in - shuffled_out).abs().max().item()
    label = f"{split.__name__}: largest |f(shuffled x) - shuffled f(x)|"
    print(label, f"{worst[split.__name__]:.1e}")
