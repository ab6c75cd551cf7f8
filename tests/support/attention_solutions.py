"""Solutions of the check command's exercises (``python -m attn_ref.check``), written for the tests
as a reader would write them from memory, not copied from a page. tests/attn_ref/test_check.py checks this
file as it is, then each wrong solution it makes from it by one edit."""

import math

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

    def forward(self, x):
        B, T, C = x.shape
        d_k = C // self.n_heads
        q = self.W_q(x).view(B, T, self.n_heads, d_k).transpose(1, 2)
        k = self.W_k(x).view(B, T, self.n_heads, d_k).transpose(1, 2)
        v = self.W_v(x).view(B, T, self.n_heads, d_k).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
        future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        scores = scores.masked_fill(future, float("-inf"))
        heads = torch.softmax(scores, dim=-1) @ v
        merged = heads.transpose(1, 2).reshape(B, T, C)
        return self.W_o(merged)


def causal_attention(q, k, v):
    T, d_k = q.shape[-2:]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    scores = scores.masked_fill(future, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def attention(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(scores, dim=-1) @ v
