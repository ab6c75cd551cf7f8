# my_attention.py, as a reader might write it from memory, with one mistake.
import torch
from torch import nn


class CausalMultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x):  # (B, T, C) -> (B, T, C)
        B, T, C = x.shape
        H, d_k = self.n_heads, C // self.n_heads

        def split(t):  # (B, T, C) -> (B, H, T, d_k)
            return t.view(B, T, H, d_k).transpose(1, 2)

        q, k, v = split(self.W_q(x)), split(self.W_k(x)), split(self.W_v(x))
        scores = q @ k.transpose(-2, -1)  # (B, H, T, T)
        future = torch.ones(T, T, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
        heads = scores.softmax(dim=-1) @ v  # (B, H, T, d_k)
        merged = heads.transpose(1, 2).reshape(B, T, C)
        return self.W_o(merged)
