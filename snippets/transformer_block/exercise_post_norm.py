# Post-norm, the original Transformer's order: LayerNorm(x + sublayer(x)).
import torch
from torch import nn

from attn_ref import DecoderBlock, MultiHeadAttention
from attn_ref.masks import causal_mask

torch.manual_seed(0)
B, T, C, H = 2, 5, 16, 4
options = dict(dim_feedforward=4 * C, dropout=0.0, activation="gelu")
theirs = nn.TransformerEncoderLayer(
    C, H, batch_first=True, norm_first=False, dtype=torch.float64, **options
).eval()
parts = DecoderBlock(embed_dim=C, num_heads=H).double()  # the same modules
with torch.no_grad():
    mha = MultiHeadAttention.from_torch(theirs.self_attn)
    parts.attn.load_state_dict(mha.state_dict())
    parts.norm1.load_state_dict(theirs.norm1.state_dict())
    parts.norm2.load_state_dict(theirs.norm2.state_dict())
    parts.mlp[0].load_state_dict(theirs.linear1.state_dict())
    parts.mlp[2].load_state_dict(theirs.linear2.state_dict())


def post_norm(x, mask):
    x = parts.norm1(x + parts.attn(x, x, x, attn_mask=mask)[0])
    return parts.norm2(x + parts.mlp(x))


x = 3 * torch.randn(B, T, C, dtype=torch.float64)  # features of size about 3
mask = causal_mask(T)
with torch.no_grad():
    post, pre = post_norm(x, mask), parts(x, mask)
    out_theirs = theirs(x, src_mask=~mask)  # True: blocked
    same = torch.allclose(post, out_theirs, rtol=0, atol=1e-9)
print("post_norm(x) = PyTorch's post-norm layer:", same)
for name, out in (("post-norm", post), ("pre-norm", pre)):
    spread = out[0].std(dim=-1, unbiased=False).numpy().round(2)
    print(f"std of each token, {name}:".ljust(29), spread)
