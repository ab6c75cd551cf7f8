# Exercise: the mean and variance of q · k when every component has mean mu, not 0.
import numpy as np

rng = np.random.default_rng(0)
mu, sigma, n = (
    0.5,
    1.0,
    10_000,
)  # components: mean mu, variance sigma^2; n pairs per width
samples, rows = {}, {}  # d_k -> the n scores; d_k -> the row printed for them
print(" d_k     mean  derived variance  derived  var / d_k")
for d_k in (16, 64, 256):
    q, k = rng.normal(
        mu, sigma, size=(2, n, d_k)
    )  # n queries and n keys, (n, d_k) each
    samples[d_k] = scores = (q * k).sum(axis=1)  # (n,): q · k for each pair
    derived = (
        d_k * mu**2,
        d_k * (sigma**4 + 2 * sigma**2 * mu**2),
    )  # mean, variance
    rows[d_k] = row = (
        scores.mean(),
        derived[0],
        scores.var(),
        derived[1],
        scores.var() / d_k,
    )
    print(f"{d_k:>4}", *[f"{x:8.2f}" for x in row])
