# Exercise: the distance from PE[t] to PE[t + r] does not depend on t.
from attn_ref import sinusoidal_positional_encoding

T, C = 200, 16
PE = sinusoidal_positional_encoding(T, C).double()  # (T, C)
distances = {}  # r: |PE[t + r] - PE[t]| for every t
for r in (1, 5, 50):
    dist = (PE[r:] - PE[:-r]).norm(dim=-1)  # one distance per t
    distances[r] = dist
    low, high = dist.min().item(), dist.max().item()
    print(f"r = {r:2}: min {low:.6f}, max {high:.6f}")
# PE[t + r] = PE[t] R_r with R_r a rotation, so
# |PE[t + r] - PE[t]| = |PE[t] (R_r - I)|, the same for every t
# because each pair of PE[t] is a unit vector (sin, cos).
