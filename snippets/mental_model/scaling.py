# Why divide by sqrt(d_k): the softmax of random scores q · k, as d_k grows.
import numpy as np

from attn_ref.numpy_ref import softmax

rng = np.random.default_rng(0)
S, trials = 16, 400  # S keys per query, and this many queries per width
widths = [1, 4, 16, 64, 256, 1024]
results = {
    "plain": [],
    "scaled": [],
}  # per width: variance, largest weight, entropy, gradient
samples = {}  # d_k -> the (trials, S) scores
for d_k in widths:
    q = rng.standard_normal((trials, 1, d_k))  # components: mean 0, variance 1
    k = rng.standard_normal((trials, S, d_k))  # (trials, S, d_k)
    samples[d_k] = scores = (q @ k.transpose(0, 2, 1))[
        :, 0, :
    ]  # (trials, 1, S) -> (trials, S)
    for name, z in [("plain", scores), ("scaled", scores / np.sqrt(d_k))]:
        p = softmax(z)  # (trials, S)
        entropy = -(p * np.log(np.maximum(p, 1e-300))).sum(
            axis=-1
        )  # 0 log 0 = 0
        jacobian = p[:, :, None] * (
            np.eye(S) - p[:, None, :]
        )  # dp_i/dz_j = p_i (delta_ij - p_j)
        gradient = np.linalg.norm(jacobian, axis=(1, 2))  # (trials,)
        results[name].append(
            [z.var(), p.max(axis=-1).mean(), entropy.mean(), gradient.mean()]
        )


titles = (
    "score variance",
    "largest weight",
    "entropy (nats)",
    "gradient size",
)
print("    " + "".join(f"{title:>18}" for title in titles))
print(" d_k" + "    plain   scaled" * 4)
for d_k, plain, scaled in zip(
    widths, results["plain"], results["scaled"], strict=True
):
    pairs = np.ravel(
        [plain, scaled], order="F"
    )  # plain, scaled, plain, scaled, ...
    print(f"{d_k:>4}", *[f"{x:8.3f}" for x in pairs])
print(
    "uniform weights: largest weight 1/S =",
    1 / S,
    " entropy log S =",
    np.log(S).round(3),
)
