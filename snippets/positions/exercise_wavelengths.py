# Exercise: which RoPE pairs turn a full circle within 2048 positions?
import math

d_k, context = 64, 2048
wavelengths = {}  # base: the wavelength of each pair
for base in (10000.0, 500000.0):
    # pair i turns once every 2 pi base^(2i/d_k) positions
    pairs = range(d_k // 2)
    wavelengths[base] = [2 * math.pi * base ** (2 * i / d_k) for i in pairs]
    full_turns = sum(w <= context for w in wavelengths[base])
    print(
        f"base {base:>8.0f}: {full_turns} of {d_k // 2} pairs turn fully;"
        f" slowest turns every {wavelengths[base][-1]:.3g} positions"
    )
