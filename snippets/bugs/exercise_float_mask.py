# --8<-- [start:question]
# Exercise: an additive causal mask (0 = attend, the lowest float = blocked) turned into a boolean one.
import torch
import torch.nn.functional as F

T = 4
lowest = torch.finfo(torch.float32).min
future = torch.ones(T, T).triu(diagonal=1).bool()  # keys after the query
additive = torch.zeros(T, T).masked_fill(future, lowest)  # (T, T): added to the scores


def to_sdpa_mask(additive):
    """The same mask as a boolean attn_mask for scaled_dot_product_attention."""
    return additive.bool()


mask = to_sdpa_mask(additive)
print("dtype and shape:", mask.dtype, tuple(mask.shape))
# --8<-- [end:question]

# --8<-- [start:solution]
print("the boolean mask, 1 = may attend for SDPA:")
print(mask.int().numpy())


def to_sdpa_mask_fixed(additive):
    return additive == 0  # True where the score is left alone


C, d_k = 16, 8
torch.manual_seed(0)
W_Q, W_K, W_V = (torch.randn(C, d_k) / C**0.5 for _ in range(3))


def largest_leak(convert, trials=20):
    """How far an output moves when a later token changes: zero for a causal layer."""
    g = torch.Generator().manual_seed(1)
    worst = 0.0
    for _ in range(trials):
        T = int(torch.randint(2, 9, (), generator=g))
        x = torch.randn(1, T, C, generator=g)
        j = int(torch.randint(1, T, (), generator=g))  # the token to change
        y = x.clone()
        y[:, j] = torch.randn(C, generator=g)
        future = torch.ones(T, T).triu(diagonal=1).bool()
        mask = convert(torch.zeros(T, T).masked_fill(future, lowest))
        out_x, out_y = (F.scaled_dot_product_attention(z @ W_Q, z @ W_K, z @ W_V, mask) for z in (x, y))
        worst = max(worst, (out_y[:, :j] - out_x[:, :j]).abs().max().item())
    return worst


for convert in (to_sdpa_mask, to_sdpa_mask_fixed):
    worst = largest_leak(convert)
    verdict = "passes" if worst < 1e-6 else "FAILS"
    print(f"{convert.__name__}: largest change before the changed token {worst:.1e}, {verdict}")
# --8<-- [end:solution]
