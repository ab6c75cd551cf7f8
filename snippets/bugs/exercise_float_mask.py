# Exercise: an additive causal mask (0 = attend, the lowest float = blocked),
# turned into a boolean attn_mask with .bool().
import torch
import torch.nn.functional as F

T = 4
lowest = torch.finfo(torch.float32).min
future = torch.ones(T, T).triu(diagonal=1).bool()  # keys after the query
additive = torch.zeros(T, T).masked_fill(future, lowest)  # added to the scores


def to_sdpa_mask(additive):
    return additive.bool()  # the bug: True wherever the entry is non-zero


def to_sdpa_mask_fixed(additive):
    return additive == 0  # True where the score is left alone


mask = to_sdpa_mask(additive)
print("the boolean mask, 1 = may attend for SDPA:")
print(mask.int().numpy())
torch.manual_seed(0)
q, k, v = (torch.randn(1, T, 8) for _ in range(3))
causal = F.scaled_dot_product_attention(q, k, v, is_causal=True)
same = {}
for convert in (to_sdpa_mask, to_sdpa_mask_fixed):
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=convert(additive))
    same[convert.__name__] = torch.allclose(out, causal, atol=1e-6)
    print(
        f"{convert.__name__}, same as is_causal=True:", same[convert.__name__]
    )
