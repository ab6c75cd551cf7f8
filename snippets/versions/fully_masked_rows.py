# What PyTorch returns for a query that may see no key ("a fully masked row"):
# one line "case: value" per case, for the torch installed.
# Runs on torch 1.13 and later.
import torch
import torch.nn.functional as F
from torch.profiler import profile

results = {"torch": torch.__version__}  # case -> value, printed at the end
torch.manual_seed(0)


def kind(out):
    """nan, zeros, or the numbers themselves."""
    if out is None:
        return "None"
    if torch.isnan(out).all():
        return "nan"
    if (out == 0).all():
        return "zeros"
    return "other " + str([round(x, 4) for x in out.flatten().tolist()])


def run(fn):
    """fn's result, and the attention kernels that computed it, per the profiler."""
    with profile() as prof:
        result = fn()
    names = []
    for event in prof.events():
        name = event.name.replace("aten::", "")
        if (
            any(
                w in name
                for w in ("multi_head", "scaled_dot_product", "softmax")
            )
            and name not in names
        ):
            names.append(name)
    return result, " > ".join(names)


# SDPA: (B, H, L, E) queries, S keys;
# a boolean mask is True where a query MAY see a key.
B, H, L, S, E = 2, 2, 3, 4, 8
q, k, v = (
    torch.randn(B, H, L, E),
    torch.randn(B, H, S, E),
    torch.randn(B, H, S, E),
)
allowed = torch.ones(L, S, dtype=torch.bool)
allowed[1] = False  # query 1 may see no key
allowed[2, 3] = False

try:  # torch 2.3 and later
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backends = {
        "math": lambda: sdpa_kernel(SDPBackend.MATH),
        "flash": lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION),
    }
except ImportError:  # torch 2.0 to 2.2
    flags = {
        "enable_math": False,
        "enable_flash": False,
        "enable_mem_efficient": False,
    }
    backends = {
        "math": lambda: torch.backends.cuda.sdp_kernel(
            **{**flags, "enable_math": True}
        ),
        "flash": lambda: torch.backends.cuda.sdp_kernel(
            **{**flags, "enable_flash": True}
        ),
    }


def sdpa():
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)


for backend in ("default", "math", "flash"):
    if not hasattr(F, "scaled_dot_product_attention"):  # torch 1.13
        results[f"sdpa_{backend}"] = results[f"sdpa_{backend}_kernel"] = (
            "absent"
        )
        continue
    try:
        if backend == "default":
            out, kernels = run(sdpa)
        else:
            with backends[backend]():
                out, kernels = run(sdpa)
        results[f"sdpa_{backend}"] = kind(out[:, :, 1])
        results[f"sdpa_{backend}_kernel"] = kernels
    except RuntimeError:  # no kernel of this backend takes these inputs
        results[f"sdpa_{backend}"] = results[f"sdpa_{backend}_kernel"] = (
            "error"
        )

# nn.MultiheadAttention: a boolean mask is True where a query may NOT see a key.
T, C = 3, 4
mha = torch.nn.MultiheadAttention(
    C, num_heads=2, batch_first=True
).eval()  # biases start at 0
x = torch.randn(B, T, C)
attn_mask = torch.zeros(T, T, dtype=torch.bool)
attn_mask[1] = True  # query 1 of every sequence may see no key
key_padding_mask = torch.zeros(B, T, dtype=torch.bool)
key_padding_mask[0, 2] = True
key_padding_mask[1] = True  # sequence 1: every key is padding
cases = {
    "attn_mask": ({"attn_mask": attn_mask}, lambda t: t[:, 1]),
    "key_padding_mask": (
        {"key_padding_mask": key_padding_mask},
        lambda t: t[1],
    ),
}
for mask_name, (mask, masked_rows) in cases.items():
    for path in (
        "grad",
        "no_grad",
    ):  # under no_grad, eval mode may take the fast path
        for need_weights in (True, False):
            with torch.set_grad_enabled(path == "grad"):
                (out, w), kernels = run(
                    lambda: mha(x, x, x, need_weights=need_weights, **mask)  # noqa:B023
                )
            name = f"mha_{mask_name}_{path}_{'weights' if need_weights else 'no_weights'}"
            results[f"{name}_output"] = kind(masked_rows(out.detach()))
            rows = None if w is None else masked_rows(w.detach())
            results[f"{name}_weights"] = kind(rows)
            results[f"{name}_kernel"] = kernels

for case, value in results.items():
    print(f"{case}: {value}")
