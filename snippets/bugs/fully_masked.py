# --8<-- [start:bug]
# A query with no key to see: nan (pytorch/pytorch #41508) or uniform
# weights (d2l-ai/d2l-en #2423).
import torch

torch.manual_seed(0)
T, d_k = 3, 4
q, k, v = (torch.randn(1, T, d_k) for _ in range(3))  # token 0, then padding
window = torch.tensor([[1, 0, 0], [1, 1, 0], [0, 1, 1]]).bool()  # self, last
allowed = window & torch.tensor([True, False, False])  # real keys only
print("True where query i may see key j:")
print(allowed.int().numpy())


def attention_add(q, k, v, allowed):
    """Add a float mask of 0 and -inf, as the issue's example does; softmax."""
    bias = torch.zeros(allowed.shape).masked_fill(~allowed, float("-inf"))
    weights = (q @ k.transpose(-2, -1) / d_k**0.5 + bias).softmax(dim=-1)
    return weights @ v, weights


def attention_d2l(q, k, v, allowed):
    """Replace blocked scores by -1e6, as d2l's masked_softmax does; softmax."""
    scores = (q @ k.transpose(-2, -1) / d_k**0.5).masked_fill(~allowed, -1e6)
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


for attention in (attention_add, attention_d2l):
    row = attention(q, k, v, allowed)[1][0, 2].numpy().round(3)
    print(f"{attention.__name__}, weights of query 2:", row)

# As in the issue, the loss reads the real token only; the gradients are nan.
for t in (q, k, v):
    t.requires_grad_(True)
attention_add(q, k, v, allowed)[0][:, 0].sum().backward()
print("attention_add, tokens with a nan gradient:")
for name, t in (("q", q), ("k", k), ("v", v)):
    print(f"  {name}:", t.grad.isnan().any(dim=-1)[0].tolist())
# --8<-- [end:bug]

# --8<-- [start:fix]
import torch.nn.functional as F


def attention_fixed(q, k, v, allowed):
    scores = q @ k.transpose(-2, -1) / d_k**0.5
    no_key = ~allowed.any(dim=-1, keepdim=True)  # a query that may see nothing
    scores = scores.masked_fill(~allowed, float("-inf"))
    scores = scores.masked_fill(no_key, 0.0)  # finite: no 0 / 0
    weights = scores.softmax(dim=-1).masked_fill(no_key, 0.0)  # then no weight
    return weights @ v, weights


for t in (q, k, v):
    t.grad = None
out, weights = attention_fixed(q, k, v, allowed)
out[:, 0].sum().backward()
print("fixed, weights of query 2:", weights[0, 2].detach().numpy())
print("fixed, nan in a gradient:", any(t.grad.isnan().any().item() for t in (q, k, v)))
theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
same = torch.allclose(out, theirs, atol=1e-6)
print("fixed, same output as PyTorch's SDPA:", same)
# --8<-- [end:fix]

# --8<-- [start:check]
# The check: no nan, no weight on a blocked key, rows summing to one (or to
# zero if they see nothing), on 20 random sequences with random masks.
g = torch.Generator().manual_seed(1)
q, k, v = (torch.randn(20, 6, d_k, generator=g) for _ in range(3))
allowed = torch.rand(20, 6, 6, generator=g) < 0.3  # some queries see nothing
sees = allowed.any(dim=-1)  # (B, T): True for a query that sees a key
q.requires_grad_(True)
for attend in (attention_add, attention_d2l, attention_fixed):
    q.grad = None
    out, weights = attend(q, k, v, allowed)
    out[sees].sum().backward()  # a loss on the queries that see something
    if out.isnan().any() or q.grad.isnan().any():
        worst = float("inf")  # nan in the output or in the gradient
    else:
        blocked = (weights * ~allowed).abs().max().item()  # on blocked keys
        off_sum = (weights.sum(dim=-1) - sees.float()).abs().max().item()
        worst = max(blocked, off_sum)
    verdict = "passes" if worst < 1e-6 else "FAILS"
    print(f"{attend.__name__}: largest violation {worst:.2g}, {verdict}")
# --8<-- [end:check]
