# --8<-- [start:bug]
# How far to rewind the drafter's cache after a speculative round
# (lablup/mlxcel #994). k guesses were drafted, the target kept a of them.
def rewind_bug(k, a):
    rejected = k - a
    return min(rejected + 1, k) if rejected else 0


def rewind_fix(k, a):
    # the drafter ran the last token and guesses 0 .. k-2: it keeps a + 1
    return k - 1 - a  # -1 when all k were kept: it still lacks the last guess


# --8<-- [end:bug]

# --8<-- [start:loop]
# Speculative decoding as the issue describes it: the drafter runs one token
# at a time and takes its positions from its cache's length.
import torch

from attn_ref.decoder import TinyDecoder
from attn_ref.serving import PagedKVCache, accept_greedy, verify_forward

threads = torch.get_num_threads()  # restored after the check
torch.set_num_threads(1)  # tiny products: one thread is faster
torch.manual_seed(0)
target = TinyDecoder(16, 200, embed_dim=32, num_layers=2, num_heads=4).eval()
drafter = TinyDecoder(16, 200, embed_dim=32, num_layers=2, num_heads=4).eval()
drafter.load_state_dict(target.state_dict())
with torch.no_grad():  # a drafter that mostly agrees: the target, plus noise
    for weight in drafter.parameters():
        weight.add_(0.02 * torch.randn_like(weight))


def pool():
    return PagedKVCache(2, 64, 4, num_kv_heads=4, head_dim=8)


def decode(rewind, prompt, n, k=4):
    """n tokens after prompt; the acceptance of each round, and after each
    round how many of the text's positions the drafter's cache lacks."""
    text, big, small = list(prompt), pool(), pool()
    verify_forward(target, big, "r", torch.tensor(text[:-1]))
    verify_forward(drafter, small, "r", torch.tensor(text[:-1]))
    kept, behind = [], []
    while len(text) < len(prompt) + n:
        missing = len(text) - 1 - small.lengths["r"]  # the fix runs these
        step = (
            text[-1 - max(missing, 0) :] if rewind is rewind_fix else text[-1:]
        )
        draft = []
        for _ in range(k):
            logits = verify_forward(drafter, small, "r", torch.tensor(step))
            draft.append(int(logits[-1].argmax()))
            step = draft[-1:]
        chunk = torch.tensor(text[-1:] + draft)
        a, token = accept_greedy(
            verify_forward(target, big, "r", chunk), torch.tensor(draft)
        )
        big.truncate("r", big.lengths["r"] - (k - a))
        small.truncate("r", max(small.lengths["r"] - max(rewind(k, a), 0), 0))
        text += [*draft[:a], token]
        kept.append(a / k)
        behind.append(len(text) - 1 - small.lengths["r"])
    return text[len(prompt) :], kept, behind


# --8<-- [end:loop]

# --8<-- [start:symptom]
prompt = [3, 1, 4, 1, 5]
runs = {
    rewind.__name__: decode(rewind, prompt, 60)
    for rewind in (rewind_bug, rewind_fix)
}
for name, (_, kept, behind) in runs.items():
    print(f"{name}: {sum(kept) / len(kept):.0%} of guesses kept;")
    print(
        "  positions the drafter lacks after rounds 1, 5, 10, 15:",
        [behind[i] for i in (0, 4, 9, 14)],
    )
print("same text either way:", runs["rewind_bug"][0] == runs["rewind_fix"][0])
# --8<-- [end:symptom]

# --8<-- [start:check]
# The check: after every round the drafter's cache holds the text but its
# last token, minus at most the last guess it never ran (5 prompts).
g = torch.Generator().manual_seed(1)
prompts = [torch.randint(0, 16, (5,), generator=g).tolist() for _ in range(5)]
worst = {}
for rewind in (rewind_bug, rewind_fix):
    worst[rewind.__name__] = max(
        max(decode(rewind, p, 20)[2]) for p in prompts
    )  # positions behind, at the worst round
# --8<-- [end:check]

# --8<-- [start:verdict]
for name, behind in worst.items():
    verdict = "passes" if behind <= 1 else "FAILS"
    print(f"{name}: the cache lags the text by at most {behind}, {verdict}")
torch.set_num_threads(threads)
# --8<-- [end:verdict]
