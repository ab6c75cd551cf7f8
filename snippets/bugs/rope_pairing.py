# --8<-- [start:bug]
# RoPE with angles laid out for neighbouring pairs, but rotated in halves
# (raiyanyahya/how-to-train-your-gpt #6, #7).
import torch

d = 8  # head width: four pairs


def rope(x, positions, fixed=False):
    """Rotate each row of x, (T, d), by its position."""
    theta = 10000 ** (-torch.arange(0, d, 2) / d)  # (d/2,): one per pair
    angles = positions[:, None] * theta  # (T, d/2)
    angles = angles.repeat_interleave(2, dim=-1)  # θ0, θ0, θ1, θ1, ...
    if fixed:  # the fix: rotate neighbours, (x0, x1) -> (-x1, x0)
        rotated = torch.stack((-x[:, 1::2], x[:, 0::2]), dim=-1).flatten(-2)
    else:  # the bug: "rotate half" pairs feature i with feature i + d/2
        rotated = torch.cat((-x[:, d // 2 :], x[:, : d // 2]), dim=-1)
    return x * angles.cos() + rotated * angles.sin()


# --8<-- [end:bug]

# --8<-- [start:scores]
torch.manual_seed(0)
q, k = torch.randn(1, d).expand(3, d), torch.randn(1, d).expand(3, d)
positions = torch.tensor([1, 4, 9])  # the query's; the key's are one less
scores = {}
for fixed in (False, True):
    name = "fixed" if fixed else "buggy"
    turned_q, turned_k = (
        rope(q, positions, fixed),
        rope(k, positions - 1, fixed),
    )
    scores[name] = (turned_q * turned_k).sum(dim=-1)
    print(f"{name} scores:", scores[name].numpy().round(4))
# --8<-- [end:scores]

# --8<-- [start:check]
# The check: shifting a query and a key by the same amount keeps their score.
g = torch.Generator().manual_seed(1)
qs, ks = torch.randn(20, d, generator=g), torch.randn(20, d, generator=g)
m, n, shift = torch.randint(0, 50, (3, 20), generator=g)  # for 20 pairs
tolerance, worst = 1e-4, {}
for fixed in (False, True):
    before = (rope(qs, m, fixed) * rope(ks, n, fixed)).sum(dim=-1)  # 20 scores
    after = (rope(qs, m + shift, fixed) * rope(ks, n + shift, fixed)).sum(
        dim=-1
    )
    name = "fixed" if fixed else "buggy"
    worst[name] = (after - before).abs().max().item()
# --8<-- [end:check]

# --8<-- [start:verdict]
for name, violation in worst.items():
    verdict = "passes" if violation < tolerance else "FAILS"
    print(f"{name}: largest change of a score {violation:.1e}, {verdict}")
# --8<-- [end:verdict]
