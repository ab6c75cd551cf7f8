# Exercise: the distance from PE[t] to PE[t + k] does not depend on t.
from attn_ref import sinusoidal_positional_encoding

T, d = 200, 16
PE = sinusoidal_positional_encoding(T, d).double()  # (T, d)
for k in (1, 5, 50):
    dist = (PE[k:] - PE[:-k]).norm(dim=-1)  # one distance per t
    low, high = dist.min().item(), dist.max().item()
    print(f"k = {k:2}: min {low:.6f}, max {high:.6f}")
# PE[t + k] = PE[t] M_k with M_k a rotation, so
# |PE[t + k] - PE[t]| = |PE[t] (M_k - I)|, the same for every t
# because each pair of PE[t] is a unit vector (sin, cos).
