# --8<-- [start:bug]
# A learned sink left out of the softmax's denominator (modular/modular
# #6198; a fix proposed in #6591): zero scores, values of 1, a positive sink
# per head.
import math

import torch

torch.set_printoptions(precision=4)  # whatever an earlier block set
H, S = 4, 10
sink = torch.tensor([0.5, 1.0, 1.5, 2.0])  # one logit per head
scores = torch.zeros(1, H, 1, S)  # (B, H, L, S)
values = torch.ones(1, H, S, 1)  # (B, H, S, d_v)


def attention_dropped(scores, values, sink):
    """The sink is never used: a plain softmax."""
    return scores.softmax(dim=-1) @ values


print("sink dropped:", attention_dropped(scores, values, sink).flatten())
# --8<-- [end:bug]

# --8<-- [start:fix]
from attn_ref.modern import sink_softmax


def attention_with_sink(scores, values, sink):
    """e^s / (e^sink + sum e^s): the sink in the denominator, no value."""
    return sink_softmax(scores, sink) @ values


print("with the sink:", attention_with_sink(scores, values, sink).flatten())
print("S / (S + e^sink):", S / (S + sink.exp()))
# --8<-- [end:fix]

# --8<-- [start:check]
# The check: a sink is one more key whose score is the sink and whose value
# is zero. PyTorch's SDPA over [K; 0] and [V; 0], with the sink as a bias on
# that column, must give the same output, on 20 random batches.
import torch.nn.functional as F

g = torch.Generator().manual_seed(1)
worst = {attention_dropped: 0.0, attention_with_sink: 0.0}
for _ in range(20):
    q, k, v = (torch.randn(2, H, 5, 8, generator=g) for _ in range(3))
    random_sink = 2 * torch.randn(H, generator=g)
    bias = torch.zeros(2, H, 5, 6)
    bias[..., -1] = random_sink.view(1, H, 1)  # the extra column's score
    zero = torch.zeros(2, H, 1, 8)
    expected = F.scaled_dot_product_attention(
        q, torch.cat([k, zero], 2), torch.cat([v, zero], 2), attn_mask=bias
    )
    s = q @ k.transpose(-1, -2) / math.sqrt(8)  # (B, H, L, S)
    for attend in worst:
        error = (attend(s, v, random_sink) - expected).abs().max().item()
        worst[attend] = max(worst[attend], error)
# --8<-- [end:check]

# --8<-- [start:verdict]
for attend, error in worst.items():
    verdict = "passes" if error < 1e-5 else "FAILS"
    print(f"{attend.__name__}: largest difference {error:.2g}, {verdict}")
# --8<-- [end:verdict]
