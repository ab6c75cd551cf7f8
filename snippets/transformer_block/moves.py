# Which outputs move when one token changes? Attention moves information
# between positions; the MLP does not.
import torch

from attn_ref import DecoderBlock
from attn_ref.masks import causal_mask

torch.manual_seed(0)
B, T, C, H = 1, 5, 16, 4
block = DecoderBlock(embed_dim=C, num_heads=H)
x = torch.randn(B, T, C)
mask = causal_mask(T)


def mlp_write(s):
    return block.mlp(block.norm2(s))


def attention_write(s):
    h = block.norm1(s)
    return block.attn(h, h, h, attn_mask=mask)[0]


def whole_block(s):
    return block(s, mask)


parts = {"MLP": mlp_write, "attention": attention_write, "block": whole_block}
moved = {name: torch.zeros(T, T, dtype=torch.int64) for name in parts}
replaced = {}  # j: the stream with token j replaced by new random numbers
with torch.no_grad():
    for j in range(T):
        replaced[j] = x.clone()
        replaced[j][:, j] = torch.randn(C)
        for name, f in parts.items():
            changed = (f(replaced[j]) != f(x)).any(dim=-1)[
                0
            ]  # (T,): outputs that moved
            moved[name][j] = changed.long()
for name, table in moved.items():
    print(f"{name}: row j = the outputs that move when token j changes")
    print(table.numpy())
