# Exercise: the ALiBi row of one new query after a cache of 4 tokens.
from attn_ref import alibi_bias

H, S = 8, 5  # the new token is the 5th, at position 4
right = alibi_bias(H, S)[:, -1:]  # (H, 1, S): query at position 4
wrong = alibi_bias(H, 1, S)  # (H, 1, S): query taken to sit at 0
print("head 0, query at 4:", right[0, 0])
print("head 0, query at 0:", wrong[0, 0])
oldest_first = wrong[0, 0].argmax().item() == 0
print("the wrong row rewards the oldest key most:", oldest_first)
