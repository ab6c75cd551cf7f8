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
# --8<-- [end:bug]


# --8<-- [start:weights]
def attention_add(q, k, v, allowed):
    """Add a float mask of 0 and -inf, as the issue's example does; softmax."""
    bias = torch.zeros(allowed.shape).masked_fill(~allowed, float("-inf"))
    weights = (q @ k.transpose(-2, -1) / d_k**0.5 + bias).softmax(dim=-1)
    return weights @ v, weights


def attention_d2l(q, k, v, allowed):
    """Blocked scores set to -1e6, as in d2l's masked_softmax; softmax."""
    scores = (q @ k.transpose(-2, -1) / d_k**0.5).masked_fill(~allowed, -1e6)
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


query_2 = {}  # the weights of query 2, which sees no key
for attention in (attention_add, attention_d2l):
    name = attention.__name__
    query_2[name] = attention(q, k, v, allowed)[1][0, 2]
    print(f"{name}, weights of query 2:", query_2[name].numpy().round(3))
# --8<-- [end:weights]

# --8<-- [start:grad]
# As in the issue, the loss reads the real token only; the gradients are nan.
for t in (q, k, v):
    t.requires_grad_(True)
attention_add(q, k, v, allowed)[0][:, 0].sum().backward()
print("attention_add, tokens with a nan gradient:")
nan_grad = {}
for name, t in (("q", q), ("k", k), ("v", v)):
    nan_grad[name] = t.grad.isnan().any(dim=-1)[0].tolist()
    print(f"  {name}:", nan_grad[name])
# --8<-- [end:grad]

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
grads = [t.grad for t in (q, k, v)]
nan_in_grad = any(grad.isnan().any().item() for grad in grads)
print("fixed, weights of query 2:", weights[0, 2].detach().numpy())
print("fixed, nan in a gradient:", nan_in_grad)
theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
same = torch.allclose(out, theirs, atol=1e-6)
print("fixed, same output as PyTorch's SDPA:", same)
# --8<-- [end:fix]

# --8<-- [start:check]
# The check: no nan, no weight on a blocked key, rows summing to one (or to
# zero if they see nothing), on 20 random sequences with random masks.
g = torch.Generator().manual_seed(1)
qs, ks, vs = (torch.randn(20, 6, d_k, generator=g) for _ in range(3))
masks = torch.rand(20, 6, 6, generator=g) < 0.3  # some queries see nothing
sees = masks.any(dim=-1)  # (B, T): True for a query that sees a key
qs.requires_grad_(True)
tolerance, worst = 1e-6, {}
for attend in (attention_add, attention_d2l, attention_fixed):
    qs.grad = None
    outs, ws = attend(qs, ks, vs, masks)
    outs[sees].sum().backward()  # a loss on the queries that see something
    name = attend.__name__
    if outs.isnan().any() or qs.grad.isnan().any():
        worst[name] = float("inf")  # nan in the output or in the gradient
    else:
        blocked = (ws * ~masks).abs().max().item()  # on blocked keys
        off_sum = (ws.sum(dim=-1) - sees.float()).abs().max().item()
        worst[name] = max(blocked, off_sum)
# --8<-- [end:check]

# --8<-- [start:verdict]
for name, violation in worst.items():
    verdict = "passes" if violation < tolerance else "FAILS"
    print(f"{name}: largest violation {violation:.2g}, {verdict}")
# --8<-- [end:verdict]
