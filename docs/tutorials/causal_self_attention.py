# %% [markdown]
# # Self-attention from scratch, with a causal mask
#
# Placeholder: this tutorial is being written.
