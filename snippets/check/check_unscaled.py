# Check unscaled_attention.py, in this folder, as causal multi-head
# attention: one verdict per property, the lines the command prints.
from attn_ref.check import check

for result in check("causal-mha", "unscaled_attention.py"):
    print(result)
