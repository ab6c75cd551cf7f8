# --8<-- [start:encoding]
# The sinusoidal encoding, a sine and a cosine per frequency.
import math

from attn_ref import sinusoidal_positional_encoding

T, C = 64, 32
PE = sinusoidal_positional_encoding(T, C)  # (T, C)
print("PE:", tuple(PE.shape))
print("position 1, first four features:", PE[1, :4])
wavelengths = {}  # pair: positions per turn
for i in (0, C // 2 - 1):  # the fastest and the slowest pair
    wavelengths[i] = 2 * math.pi * 10000 ** (2 * i / C)
    print(f"pair {i}: one turn every {wavelengths[i]:.1f} positions")
# --8<-- [end:encoding]

# --8<-- [start:plot]
import matplotlib.pyplot as plt

fig, ax = plt.subplots(
    figsize=(4.6, 3.6), layout="constrained"
)  # narrow: legible on a phone
values = PE.T.numpy()  # (C, T): one column per position
image = ax.imshow(values, aspect="auto", cmap="RdBu", vmin=-1, vmax=1)
fig.colorbar(image, ax=ax, label="value")
ax.set_xlabel("position t")
ax.set_ylabel("feature (sin, cos, sin, ...)")
ax.set_title("PE[t]: fast pairs at the top")
# --8<-- [end:plot]
