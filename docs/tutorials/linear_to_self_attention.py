# %% [markdown]
# # From nn.Linear to self-attention
#
# Placeholder: this tutorial is being written.
