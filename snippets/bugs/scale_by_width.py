# --8<-- [start:bug]
# One causal head scaled by the model width C instead of its own width (ng-video-lecture #6).
import torch
import torch.nn.functional as F

torch.manual_seed(0)
C, n_head = 32, 4  # model width, number of heads
head_size = C // n_head  # d_k = 8
# Unit-variance inputs and weights of variance 1/C: q and k get unit-variance components.
W_Q, W_K, W_V = (torch.randn(C, head_size) / C**0.5 for _ in range(3))  # (C, d_k) each


def head(x, fixed=False):
    """One head, (B, T, C) -> (B, T, head_size), as the lecture's gpt.py computed it."""
    _, T, C = x.shape  # C: the width of x
    q, k, v = x @ W_Q, x @ W_K, x @ W_V  # (B, T, head_size) each
    scale = k.shape[-1] ** -0.5 if fixed else C**-0.5  # the bug: C, not head_size
    wei = q @ k.transpose(-2, -1) * scale  # (B, T, T)
    tril = torch.tril(torch.ones(T, T))
    wei = wei.masked_fill(tril == 0, float("-inf")).softmax(dim=-1)
    return wei @ v, wei


x = torch.randn(1, 6, C)  # (B, T, C)
print("weights of the last token:")
for fixed in (False, True):
    _, wei = head(x, fixed)
    print(f"  {'fixed' if fixed else 'buggy'}:", wei[0, -1].numpy().round(3))
# --8<-- [end:bug]

# --8<-- [start:check]
# The check: agree with PyTorch's scaled_dot_product_attention, on 20 random sequences.
g = torch.Generator().manual_seed(1)
x = torch.randn(20, 8, C, generator=g)  # (B, T, C)
expected = F.scaled_dot_product_attention(x @ W_Q, x @ W_K, x @ W_V, is_causal=True)
for fixed in (False, True):
    worst = (head(x, fixed)[0] - expected).abs().max().item()
    verdict = "passes" if worst < 1e-5 else "FAILS"
    print(f"{'fixed' if fixed else 'buggy'}: largest difference from PyTorch {worst:.1e}, {verdict}")
# --8<-- [end:check]
