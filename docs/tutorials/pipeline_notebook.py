# %% [markdown]
# # The pipeline in a notebook
#
# This page shows how the site's tutorials are made, on the smallest example the
# site uses: three tokens with four features each. It is a demonstration, not a
# lesson; the lessons start with [the mental model](../concepts/mental_model.md).
# [How this site computes](../foundations/pipeline.md) says what is checked and
# when; symbols follow the [notation table](../notation.md).
#
# A tutorial is a plain Python file in jupytext's percent format. The site runs it
# top to bottom in a fresh kernel, again whenever it or the code it uses changes,
# and the button above downloads that run as a notebook. The tests then check the
# numbers it printed against their own computation.
#
# The code computes scaled dot-product attention,
#
# $$
# \operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}}\right) V ,
# $$
#
# with $Q = K = V = X$: each token's query, key and value are the token itself.

# %%
import torch

from attn_ref import scaled_dot_product_attention
from attn_ref.examples import THREE_TOKENS

X = torch.tensor(THREE_TOKENS)  # (3 tokens, 4 features)
output, weights = scaled_dot_product_attention(X, X, X)
weights

# %% [markdown]
# A cell's last expression is shown under it, as `weights` is above: one row per
# query, tokens counted from 0. Every row sums to one, and the output agrees with
# PyTorch's `torch.nn.functional.scaled_dot_product_attention`:

# %%
print("row sums:", weights.sum(dim=-1))
print(
    "matches PyTorch:",
    torch.allclose(
        output, torch.nn.functional.scaled_dot_product_attention(X, X, X)
    ),
)

# %% [markdown]
# A plot is made the same way. `figure_to_svg` renders the figure with a text
# alternative, for readers who cannot see it; its code is folded away under the
# plot's "Plotting code" bar.

# %% tags=["plot"]
from attn_ref.plotting import attention_heatmap, figure_to_svg

ax = attention_heatmap(weights, query_labels=["t0", "t1", "t2"])
figure_to_svg(
    ax.figure,
    alt="Heatmap of the 3 by 3 attention weights of the three-token example",
)

# %% [markdown]
# ## References
#
# - Vaswani, A., et al. (2017). [Attention Is All You Need](https://arxiv.org/abs/1706.03762).
#   Section 3.2.1 defines scaled dot-product attention.
# - [jupytext's percent format](https://jupytext.readthedocs.io/en/latest/formats-scripts.html),
#   in which the tutorials are written.
