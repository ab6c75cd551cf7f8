# --8<-- [start:build]
# Which of q, k, v are fixed, and which depend on x (and how)?
import torch

from attn_ref.examples import LINEAR_SEED, LINEAR_SHAPE
from attn_ref.linear_as_attention import linear_as_attention

generator = torch.Generator().manual_seed(LINEAR_SEED)
_, d_in, d_out = LINEAR_SHAPE
W = torch.randn(d_out, d_in, generator=generator, dtype=torch.float64)
x1 = torch.randn(1, d_in, generator=generator, dtype=torch.float64)
x2 = torch.randn(1, d_in, generator=generator, dtype=torch.float64)


def build(x):
    """q, k, v for x, always with the same random key (same generator seed)."""
    q, k, v, _ = linear_as_attention(
        x, W, generator=torch.Generator().manual_seed(1)
    )
    return {"q": q, "k": k, "v": v}


a, b, both, double = build(x1), build(x2), build(x1 + x2), build(2 * x1)
# --8<-- [end:build]

# --8<-- [start:compare]
print("    same for x1, x2   f(2 x1) = 2 f(x1)   f(x1 + x2) = f(x1) + f(x2)")
for n in ("q", "k", "v"):
    same, scales = (
        torch.allclose(a[n], b[n]),
        torch.allclose(double[n], 2 * a[n]),
    )
    adds = torch.allclose(both[n], a[n] + b[n])
    print(f"{n}   {same!s:18}{scales!s:20}{adds}")
print("q(2 x1) = q(x1):", torch.allclose(double["q"], a["q"]))
# --8<-- [end:compare]
