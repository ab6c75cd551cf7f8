# The MLP: widen each token to 4C features, bend them with a GELU, project
# back.
# --8<-- [start:compute]
import torch

from attn_ref import DecoderBlock

torch.manual_seed(0)
C, H = 16, 4
block = DecoderBlock(embed_dim=C, num_heads=H)


def count(*modules):
    return sum(p.numel() for module in modules for p in module.parameters())


counts = {  # name: (counted, by formula)
    # W_Q, W_K, W_V, W_O and their biases
    "attention": (count(block.attn), 4 * C**2 + 4 * C),
    # a (C, 4C) and a (4C, C) matrix, and their biases
    "MLP": (count(block.mlp), 8 * C**2 + 5 * C),
    # gamma and beta of each norm
    "norms": (count(block.norm1, block.norm2), 4 * C),
}
# --8<-- [end:compute]
# --8<-- [start:report]
print(block.mlp)  # C -> 4C, the GELU, 4C -> C
for name, (counted, formula) in counts.items():
    print(f"{name}: {counted} parameters, by formula {formula}")
# --8<-- [end:report]
