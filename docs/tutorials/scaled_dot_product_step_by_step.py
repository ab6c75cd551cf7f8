# %% [markdown]
# # Scaled dot-product attention, step by step
#
# Placeholder: this tutorial is being written.
