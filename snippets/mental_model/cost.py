# What attention costs: FLOPs, and MiB of the float32 weights, counted on
# shapes alone.
import torch
from torch.utils.flop_counter import FlopCounterMode


def cost(T, H, d_k):
    """GFLOP, and MiB of the float32 weights, of attention over T tokens in H
    heads of width d_k."""
    q = k = v = torch.empty(H, T, d_k, device="meta")  # shapes, no data
    with FlopCounterMode(display=False) as counter:
        weights = torch.softmax(q @ k.mT / d_k**0.5, dim=-1)  # (H, T, T)
        weights @ v  # (H, T, d_k): the output
    return counter.get_total_flops() / 1e9, weights.nbytes / 2**20


lengths = (1024, 2048, 4096, 8192, 16384)
costs = {(T, 1, 64): cost(T, 1, 64) for T in lengths}  # one head, d_k = 64

print("one head, d_k = 64:\n     T   GFLOP    MiB")
for T in lengths:
    gflop, mib = costs[T, 1, 64]
    print(f"{T:>6} {gflop:>7.2f} {mib:>6.0f}")
