# Two blocks stacked: the stream is the embedding plus every write.
# --8<-- [start:compute]
import torch

from attn_ref import TinyDecoder
from attn_ref.masks import causal_mask

torch.manual_seed(0)
model = TinyDecoder(
    vocab_size=10, context_length=8, embed_dim=16, num_layers=2, num_heads=4
)
tokens = torch.tensor([[3, 1, 4, 1, 5]])  # (B, T)
T = tokens.shape[1]
mask = causal_mask(T)

with torch.no_grad():
    positions = model.position_embedding(torch.arange(T))  # (T, C)
    embedding = model.token_embedding(tokens) + positions  # (B, T, C)
    streams = [embedding]  # the stream after each write, each (B, T, C)
    writes, weights = {}, {}
    for layer, block in enumerate(model.blocks):
        h = block.norm1(streams[-1])
        writes[f"attention {layer}"], weights[layer] = block.attn(
            h, h, h, attn_mask=mask
        )
        streams.append(streams[-1] + writes[f"attention {layer}"])
        writes[f"MLP {layer}"] = block.mlp(block.norm2(streams[-1]))
        streams.append(streams[-1] + writes[f"MLP {layer}"])
    x = streams[-1]
    logits = model.head(model.norm(x))  # (B, T, vocab_size)
    from_model = model(tokens)  # the same model, run by its forward()
    same = torch.allclose(logits, from_model, atol=1e-6)
    total = embedding + sum(writes.values())
    # Block 1 reads what block 0 wrote. Had block 0 written nothing:
    h = model.blocks[1].norm1(embedding)
    _, weights_unwritten = model.blocks[1].attn(h, h, h, attn_mask=mask)
# --8<-- [end:compute]
# --8<-- [start:report]
print("the loop computes model(tokens):", same)
print("writes added to the stream:", list(writes))
print("stream = embedding + every write:", torch.allclose(x, total, atol=1e-6))
gap = (weights[1] - weights_unwritten).abs().max().item()
print(f"block 1's weights, if block 0 wrote nothing: largest change {gap:.2f}")
# --8<-- [end:report]
