# Our block against PyTorch's TransformerEncoderLayer, with the same weights.
# --8<-- [start:copy]
import torch
from torch import nn

from attn_ref import DecoderBlock, MultiHeadAttention
from attn_ref.masks import causal_mask

torch.manual_seed(0)
B, T, C, H = 2, 5, 16, 4
options = dict(dim_feedforward=4 * C, dropout=0.0, activation="gelu")
theirs = nn.TransformerEncoderLayer(
    C, H, batch_first=True, norm_first=True, dtype=torch.float64, **options
).eval()
ours = DecoderBlock(embed_dim=C, num_heads=H).double()
with torch.no_grad():  # copy every weight: two norms, attention, the MLP
    ours.norm1.load_state_dict(theirs.norm1.state_dict())
    # from_torch cuts PyTorch's stacked in_proj_weight into W_Q, W_K, W_V
    mha = MultiHeadAttention.from_torch(theirs.self_attn)
    ours.attn.load_state_dict(mha.state_dict())
    ours.norm2.load_state_dict(theirs.norm2.state_dict())
    ours.mlp[0].load_state_dict(theirs.linear1.state_dict())  # C -> 4C
    ours.mlp[2].load_state_dict(theirs.linear2.state_dict())  # 4C -> C
# --8<-- [end:copy]

# --8<-- [start:compare]
x = torch.randn(B, T, C, dtype=torch.float64)
mask = causal_mask(T)  # True: may attend
with torch.no_grad():
    out_ours = ours(x, mask)
    out_theirs = theirs(x, src_mask=~mask)  # PyTorch's: True means blocked
    out_unmasked = theirs(x)  # no mask: every token sees every token
    out_as_is = theirs(x, src_mask=mask)  # this site's mask, read as blocked
gap = (out_ours - out_theirs).abs().max().item()
same = torch.allclose(out_ours, out_unmasked)
nan_at = torch.isnan(out_as_is[0]).any(dim=-1).nonzero().flatten().tolist()
# --8<-- [end:compare]
# --8<-- [start:report]
print(f"largest |ours - PyTorch's|: {gap:.1e}")
print("same outputs:", torch.allclose(out_ours, out_theirs, rtol=0, atol=1e-9))
print("same as PyTorch's without a mask:", same)
print("this site's mask passed as is: NaN outputs at tokens", nan_at)
# --8<-- [end:report]
