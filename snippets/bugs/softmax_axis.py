# --8<-- [start:bug]
# Attention in a diffusion U-Net, softmax over the wrong axis
# (labml.ai annotated implementations #146).
import torch

torch.manual_seed(0)
B, T, H, d_k = 1, 4, 2, 8  # the U-Net keeps the heads after the sequence
q, k, v = (torch.randn(B, T, H, d_k) for _ in range(3))  # (B, T, H, d_k)


def attention(q, k, v, fixed=False):
    scores = torch.einsum("bihd,bjhd->bijh", q, k) * d_k**-0.5  # (B, i, j, H)
    attn = scores.softmax(dim=2 if fixed else 1)  # bug: dim 1 is i, the query
    return torch.einsum("bijh,bjhd->bihd", attn, v), attn  # (B, T, H, d_k)


w = attention(q, k, v)[1][
    0, :, :, 0
]  # head 0; row i: query i, column j: key j
print("buggy weights of head 0:")
print(w.numpy().round(3))
print("row sums:   ", w.sum(dim=1).numpy().round(3))
print("column sums:", w.sum(dim=0).numpy().round(3))
# --8<-- [end:bug]

# --8<-- [start:check]
# The check: each query's weights sum to one, on 20 random sequences.
g = torch.Generator().manual_seed(1)
qs, ks, vs = (torch.randn(20, 8, H, d_k, generator=g) for _ in range(3))
tolerance, worst = 1e-5, {}
for fixed in (False, True):
    attn = attention(qs, ks, vs, fixed)[1]  # (B, T, T, H)
    name = "fixed" if fixed else "buggy"
    worst[name] = (
        (attn.sum(dim=2) - 1).abs().max().item()
    )  # sum over the keys j
    verdict = "passes" if worst[name] < tolerance else "FAILS"
    print(f"{name}: largest |row sum - 1| {worst[name]:.1e}, {verdict}")
# --8<-- [end:check]
