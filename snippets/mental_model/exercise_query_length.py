# Exercise: one query times s = 0, 1 and 100, against the same five keys.
import torch

from attn_ref import scaled_dot_product_attention

torch.manual_seed(0)
q, K, V = (
    torch.randn(1, 4),
    torch.randn(5, 4),
    torch.randn(5, 4),
)  # (L, d_k), (S, d_k), (S, d_v)
results = {}  # s -> (output, weights)
for s in (0, 1, 100):
    results[s] = scaled_dot_product_attention(s * q, K, V)
    output, weights = results[s]  # (L, d_v), (L, S)
    print(
        f"s = {s:>3}: weights",
        weights[0].numpy().round(3),
        "output",
        output[0].numpy().round(3),
    )
print("mean of the values:", V.mean(dim=0).numpy().round(3))
top = (q @ K.T).argmax().item()  # the key with the top score
print(f"value of key {top}, the top score:", V[top].numpy().round(3))
