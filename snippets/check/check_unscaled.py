# Check unscaled_attention.py, in this folder, as causal multi-head
# attention: one verdict per property, the lines the command prints
# (wrapped to the page's width).
import textwrap

from attn_ref.check import check

for result in check("causal-mha", "unscaled_attention.py"):
    print(textwrap.fill(str(result), 79, subsequent_indent="    "))
