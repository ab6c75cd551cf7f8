# --8<-- [start:bug]
# RoPE with angles laid out for neighbouring pairs, rotated in halves (how-to-train-your-gpt #6, #7).
import torch

from attn_ref import apply_rotary

d = 8  # head width: four pairs


def rope(x, positions, fixed=False):
    """Rotate each row of x, (T, d), by its position."""
    theta = 10000 ** (-torch.arange(0, d, 2) / d)  # (d/2,): one frequency per pair
    angles = positions[:, None] * theta  # (T, d/2)
    angles = angles.repeat_interleave(2, dim=-1)  # θ0, θ0, θ1, θ1, ...: pairs (0, 1), (2, 3), ...
    if fixed:  # the fix: rotate neighbours, (x0, x1) -> (-x1, x0)
        rotated = torch.stack((-x[:, 1::2], x[:, 0::2]), dim=-1).flatten(-2)
    else:  # the bug: "rotate half" pairs feature i with feature i + d/2
        rotated = torch.cat((-x[:, d // 2 :], x[:, : d // 2]), dim=-1)
    return x * angles.cos() + rotated * angles.sin()


torch.manual_seed(0)
q, k = torch.randn(1, d), torch.randn(1, d)


def score(m, n, fixed):
    """The score of the query at position m and the key at position n."""
    return (rope(q, torch.tensor([m]), fixed) @ rope(k, torch.tensor([n]), fixed).T).item()


for m, n in [(1, 0), (4, 3), (9, 8)]:  # the query one position after the key, each time
    print(f"m = {m}, n = {n}: buggy {score(m, n, False):7.4f}, fixed {score(m, n, True):7.4f}")
positions = torch.arange(5)
same = torch.allclose(rope(q.expand(5, d), positions, fixed=True), apply_rotary(q.expand(5, d)), atol=1e-6)
print("fixed == attn_ref.apply_rotary(interleaved=True):", same)
# --8<-- [end:bug]

# --8<-- [start:check]
# The check: shifting the query and the key by the same amount leaves their score alone.


def largest_shift_change(fixed, trials=20):
    g = torch.Generator().manual_seed(1)
    worst = 0.0
    for _ in range(trials):
        q, k = torch.randn(1, d, generator=g), torch.randn(1, d, generator=g)
        m, n, shift = (int(p) for p in torch.randint(0, 50, (3,), generator=g))
        before = rope(q, torch.tensor([m]), fixed) @ rope(k, torch.tensor([n]), fixed).T
        after = rope(q, torch.tensor([m + shift]), fixed) @ rope(k, torch.tensor([n + shift]), fixed).T
        worst = max(worst, (after - before).abs().item())
    return worst


for fixed in (False, True):
    worst = largest_shift_change(fixed)
    verdict = "passes" if worst < 1e-4 else "FAILS"
    print(f"{'fixed' if fixed else 'buggy'}: largest change of a score {worst:.1e}, {verdict}")
# --8<-- [end:check]
