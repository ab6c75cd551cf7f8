# Exercise: the lecture's model has n_embd = 384 and n_head = 6.
# What did scaling by C do?
import math

import torch

C, n_head = 384, 6
head_size = C // n_head  # 64
factor = math.sqrt(C / head_size)
print(
    f"divided by sqrt({C}) instead of sqrt({head_size}),",
    f"the scores are {factor:.3f} times smaller",
)

torch.manual_seed(0)
T = 16
x = torch.randn(T, C)
W_Q, W_K = (torch.randn(C, head_size) / C**0.5 for _ in range(2))
scores = (x @ W_Q) @ (x @ W_K).T  # (T, T), not yet scaled; no mask
right = (scores / math.sqrt(head_size)).softmax(dim=-1)
buggy = (scores / math.sqrt(C)).softmax(dim=-1)  # gpt.py's scale
tempered = (scores / math.sqrt(head_size) / factor).softmax(dim=-1)
same = torch.allclose(buggy, tempered, atol=1e-6)
print("buggy == right scores at temperature sqrt(n_head):", same)
largest = [w.max(dim=-1).values.mean().item() for w in (right, buggy)]
print(
    f"average largest weight: right {largest[0]:.3f}, buggy {largest[1]:.3f}"
)
print(f"uniform over {T} keys: {1 / T:.3f}")
