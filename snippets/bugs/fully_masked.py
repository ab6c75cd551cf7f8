# --8<-- [start:bug]
# A query with no key to see: nan (pytorch/pytorch #41508) or uniform weights (d2l-ai/d2l-en #2423).
import torch

from attn_ref import padding_mask

torch.manual_seed(0)
B, T, d_k = 2, 3, 4
q, k, v = (torch.randn(B, T, d_k) for _ in range(3))
window = torch.tensor([[1, 0, 0], [1, 1, 0], [0, 1, 1]]).bool()  # a query sees itself and the one before
allowed = window & padding_mask([3, 1], T)  # (B, T, T): sequence 1 has one real token
print("sequence 1, True where query i may see key j:")
print(allowed[1].int().numpy())


def attention_add(q, k, v, allowed):
    """Add a float mask of 0 and -inf to the scores, as the issue's example passes one, then softmax."""
    bias = torch.zeros(allowed.shape).masked_fill(~allowed, float("-inf"))  # (B, T, T)
    weights = (q @ k.transpose(-2, -1) / d_k**0.5 + bias).softmax(dim=-1)
    return weights @ v, weights


def attention_d2l(q, k, v, allowed):
    """Replace the blocked scores by -1e6, as d2l's masked_softmax does, then softmax."""
    scores = (q @ k.transpose(-2, -1) / d_k**0.5).masked_fill(~allowed, -1e6)  # (B, T, T)
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


for attention in (attention_add, attention_d2l):
    _, weights = attention(q, k, v, allowed)
    print(f"{attention.__name__}, weights of sequence 1, query 2:", weights[1, 2].numpy().round(3))

# As in the issue, the loss reads only real tokens; the gradient is nan all the same.
q.requires_grad_(True)
out, _ = attention_add(q, k, v, allowed)
real = padding_mask([3, 1], T)[:, 0]  # (B, T): True on real tokens
out[real].sum().backward()
print("attention_add, nan in the gradient of q:", q.grad.isnan().any().item())
# --8<-- [end:bug]

# --8<-- [start:fix]
import torch.nn.functional as F


def attention_fixed(q, k, v, allowed):
    scores = q @ k.transpose(-2, -1) / d_k**0.5  # (B, T, T)
    no_key = ~allowed.any(dim=-1, keepdim=True)  # (B, T, 1): a query that may see nothing
    scores = scores.masked_fill(~allowed, float("-inf")).masked_fill(no_key, 0.0)  # no -inf-only row
    weights = scores.softmax(dim=-1).masked_fill(no_key, 0.0)  # that query gets no weight at all
    return weights @ v, weights


q.grad = None
out, weights = attention_fixed(q, k, v, allowed)
out[real].sum().backward()
print("fixed, weights of sequence 1, query 2:", weights[1, 2].detach().numpy())
print("fixed, nan in the gradient of q:", q.grad.isnan().any().item())
same = torch.allclose(out, F.scaled_dot_product_attention(q, k, v, attn_mask=allowed), atol=1e-6)
print("fixed, same output as PyTorch's SDPA:", same)
# --8<-- [end:fix]

# --8<-- [start:check]
# The check: no nan, no weight on a blocked key, each row summing to one (or zero if it sees nothing).


def largest_mask_violation(attend, trials=20):
    g = torch.Generator().manual_seed(1)
    worst = 0.0
    for _ in range(trials):
        T = int(torch.randint(2, 7, (), generator=g))  # a random length, 2 to 6
        q, k, v = (torch.randn(2, T, d_k, generator=g) for _ in range(3))
        q.requires_grad_(True)
        allowed = torch.rand(2, T, T, generator=g) < 0.4  # random masks: some rows see nothing
        out, weights = attend(q, k, v, allowed)
        out[allowed.any(dim=-1)].sum().backward()  # a loss on the queries that see something
        if out.isnan().any() or q.grad.isnan().any():
            return float("inf")  # nan in the output or in the gradient
        sums = allowed.any(dim=-1).float()  # each row should sum to 1 if it sees a key, else to 0
        on_blocked = (weights * ~allowed).abs().max().item()  # weight on a blocked key
        off_sum = (weights.sum(dim=-1) - sums).abs().max().item()
        worst = max(worst, on_blocked, off_sum)
    return worst


for attend in (attention_add, attention_d2l, attention_fixed):
    worst = largest_mask_violation(attend)
    verdict = "passes" if worst < 1e-6 else "FAILS"
    print(f"{attend.__name__}: largest violation {worst:.2g}, {verdict}")
# --8<-- [end:check]
