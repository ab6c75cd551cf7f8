# %% [markdown]
# # The pipeline in a notebook
#
# This tutorial is a plain Python file in jupytext's percent format. The site
# executes it in a fresh kernel at every build, and the button above downloads
# it as a notebook that runs top to bottom. The page
# [How this site computes](../../foundations/pipeline/) says what is checked and
# when; symbols follow the [notation table](../../notation/).
#
# Attention weighs the values $V$ by how well each query matches each key:
#
# $$
# \operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}}\right) V
# $$

# %%
import torch

from attn_ref import scaled_dot_product_attention
from attn_ref.examples import THREE_TOKENS

X = torch.tensor(THREE_TOKENS)  # (3 tokens, 4 features)
output, weights = scaled_dot_product_attention(X, X, X)
weights

# %% [markdown]
# Every row of the weights sums to one, and the output agrees with PyTorch's
# `torch.nn.functional.scaled_dot_product_attention`:

# %%
print("row sums:", weights.sum(dim=-1))
print("matches PyTorch:", torch.allclose(output, torch.nn.functional.scaled_dot_product_attention(X, X, X)))

# %% [markdown]
# The weights as a heatmap, one row per query. `figure_to_svg` renders the
# figure with a text alternative, for readers who cannot see it:

# %%
from attn_ref.plotting import attention_heatmap, figure_to_svg

ax = attention_heatmap(weights, query_labels=["token 1", "token 2", "token 3"])
figure_to_svg(ax.figure, alt="Heatmap of the 3 by 3 attention weights of the three-token example")
