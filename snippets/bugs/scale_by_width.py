# --8<-- [start:bug]
# One causal head, scaled by the model width C instead of its own width
# (karpathy/ng-video-lecture #6).
import torch
import torch.nn.functional as F

torch.manual_seed(0)
C, n_head = 32, 4  # model width, number of heads
head_size = C // n_head  # d_k = 8
# Inputs of unit variance, weights of variance 1/C: q and k get parts of
# unit variance.
W_Q, W_K, W_V = (torch.randn(C, head_size) / C**0.5 for _ in range(3))


def head(x, fixed=False):
    """One head as the lecture's gpt.py had it: (B, T, C) -> (B, T, d_k)"""
    _, T, C = x.shape  # C: the width of x
    q, k, v = x @ W_Q, x @ W_K, x @ W_V  # (B, T, head_size) each
    scale = k.shape[-1] ** -0.5 if fixed else C**-0.5  # the bug: C
    wei = q @ k.transpose(-2, -1) * scale  # (B, T, T)
    tril = torch.tril(torch.ones(T, T))
    wei = wei.masked_fill(tril == 0, float("-inf")).softmax(dim=-1)
    return wei @ v, wei


# --8<-- [end:bug]

# --8<-- [start:weights]
x = torch.randn(1, 6, C)  # (B, T, C)
weights = {}  # (B, T, T), buggy and fixed
print("weights of the last token:")
for fixed in (False, True):
    name = "fixed" if fixed else "buggy"
    weights[name] = head(x, fixed)[1]
    print(f"  {name}:", weights[name][0, -1].numpy().round(3))
# --8<-- [end:weights]

# --8<-- [start:plot]
import matplotlib.pyplot as plt

from attn_ref.plotting import attention_heatmap

causal = torch.tril(torch.ones(6, 6, dtype=torch.bool))  # hatched above
fig, axes = plt.subplots(2, 1, figsize=(4.4, 7.0), layout="constrained")
titles = {"buggy": "divided by sqrt(C)", "fixed": "divided by sqrt(d_k)"}
for ax, (name, w) in zip(axes, weights.items(), strict=True):
    attention_heatmap(w[0], ax=ax, title=titles[name], vmax=1.0, mask=causal)
# --8<-- [end:plot]

# --8<-- [start:check]
# The check: agree with PyTorch's function, on 20 random sequences.
g = torch.Generator().manual_seed(1)
xs = torch.randn(20, 8, C, generator=g)  # (B, T, C): 20 sequences
q, k, v = xs @ W_Q, xs @ W_K, xs @ W_V
expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
tolerance, worst = 1e-5, {}
for fixed in (False, True):
    name = "fixed" if fixed else "buggy"
    worst[name] = (head(xs, fixed)[0] - expected).abs().max().item()
# --8<-- [end:check]

# --8<-- [start:verdict]
for name, violation in worst.items():
    verdict = "passes" if violation < tolerance else "FAILS"
    print(
        f"{name}: largest difference from PyTorch {violation:.1e}, {verdict}"
    )
# --8<-- [end:verdict]
