# The same rotation as a complex product, as Llama's code writes it.
import torch

from attn_ref import apply_rotary

torch.manual_seed(0)
T, d_k = 6, 8
x = torch.randn(T, d_k)

# Features (2i, 2i+1) become one complex number,
# turned by e^(i t theta_i).
inv_freq = 1.0 / 10000 ** (torch.arange(0, d_k, 2) / d_k)  # (d_k/2,)
angles = torch.outer(torch.arange(T).float(), inv_freq)  # (T, d_k/2)
freqs_cis = torch.polar(torch.ones_like(angles), angles)  # (T, d_k/2)
x_c = torch.view_as_complex(x.reshape(T, d_k // 2, 2))  # (T, d_k/2)
x_rot = torch.view_as_real(x_c * freqs_cis).flatten(1)  # (T, d_k)

rotated = apply_rotary(x)  # (T, d_k)
print("position 1, complex form:", x_rot[1, :4])
print("position 1, apply_rotary:", rotated[1, :4])
diff = (x_rot - rotated).abs().max().item()
print(f"largest difference: {diff:.1e}")
