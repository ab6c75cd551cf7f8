r"""How a server runs attention: many requests of different lengths at once, in paged memory.

A server feeds a `attn_ref.decoder.TinyDecoder` tokens from many requests in one
forward pass, each request with its own positions and its own keys. Its modules:

- `attn_ref.serving.forward`: that one forward pass (`run_decoder`), with the
  attention left to the engine, and the `attention` every engine calls;
- `attn_ref.serving.requests`: a `Request` (prompt, tokens to generate, arrival)
  and the check every engine starts with (`check_requests`);
- `attn_ref.serving.batches`: ragged requests padded to one length
  (`generate_padded`) or packed into one sequence with a document mask
  (`generate_packed`);
- `attn_ref.serving.paged`: the paged cache, blocks handed out from a free list
  and found through block tables (`PagedKVCache`);
- `attn_ref.serving.scheduler`: continuous batching over the paged cache, with a
  scheduler that admits and retires requests at every step (`serve`, `ServeResult`);
- `attn_ref.serving.rolling_buffer`: long contexts at bounded memory, a rolling
  buffer for a sliding window with attention sinks (`generate_windowed`);
- `attn_ref.serving.flex`: masks as functions, in FlexAttention's interface, with a
  block mask that lets a tiled loop skip empty tiles (`create_block_mask`,
  `flex_attention`);
- `attn_ref.serving.cost`: the cost of decoding, arithmetic intensity
  (`attention_intensity`), and split-K decoding (`split_k_attention`, `merge_partials`);
- `attn_ref.serving.speculative`: speculative decoding, a drafter's guesses checked in one
  pass of the target over the paged cache, a chain or a tree (`verify_forward`,
  `tree_ancestor_mask`), accepted greedily or by rejection sampling (`accept_greedy`,
  `accept_sampled`), and rolled back (`keep_path`); `speculative_generate` runs the loop;
- `attn_ref.serving.invariant`: batch invariance, every reduction in an order fixed by the
  request's own positions: sums (`fixed_order_sum`), attention split at a fixed size
  (`split_bounds`, `split_kv_attention`) and a decoder's linear layers (`batch_invariant`);
- `attn_ref.serving.prefix_cache`: blocks kept across requests and found by their tokens, in a
  radix tree (`RadixCache`) or a table of chained block hashes (`BlockHashCache`), evicted by
  a policy (`POLICIES`); attention to a prefix shared by many requests
  (`shared_prefix_attention`);
- `attn_ref.serving.eviction`: a cache over budget, entries kept by position, at random or by
  attention (`sink_window_keep`, `random_keep`, `h2o_keep`, `snapkv_keep`, `tova_keep`), or
  read page by page (`quest_keep`), and the mask that decodes with what was kept (`decode_mask`).

The masks they use, for packed requests and bounded contexts, are built in `attn_ref.masks`.
Everything listed here is also importable from `attn_ref.serving` itself.

Every engine decodes greedily and gives, for each request, the tokens that decoding it alone
gives, up to float rounding of the logits; `serve` with `batch_invariant` and a fixed
``split_size`` gives the same bits. It is a reference: plain loops over requests and
tiles, written to be read, not to be fast.
"""

from attn_ref.serving.batches import generate_packed, generate_padded
from attn_ref.serving.cost import attention_intensity, merge_partials, split_k_attention
from attn_ref.serving.eviction import (
    decode_mask,
    h2o_keep,
    keep_top,
    quest_keep,
    quest_page_scores,
    random_keep,
    sink_window_keep,
    snapkv_keep,
    tova_keep,
)
from attn_ref.serving.flex import BlockMask, FlexState, create_block_mask, flex_attention
from attn_ref.serving.forward import attention, run_decoder
from attn_ref.serving.invariant import (
    FixedOrderLayerNorm,
    FixedOrderLinear,
    RowwiseGELU,
    batch_invariant,
    fixed_order_sum,
    split_bounds,
    split_kv_attention,
)
from attn_ref.serving.paged import PagedKVCache
from attn_ref.serving.prefix_cache import (
    POLICIES,
    BlockHashCache,
    Entry,
    PrefixCache,
    RadixCache,
    lfu,
    lru,
    shared_prefix_attention,
    slru,
)
from attn_ref.serving.requests import Request, check_requests
from attn_ref.serving.rolling_buffer import generate_windowed
from attn_ref.serving.scheduler import ServeResult, serve
from attn_ref.serving.speculative import (
    ModelDrafter,
    NGramDrafter,
    SpeculativeResult,
    accept_greedy,
    accept_sampled,
    accept_tree_greedy,
    draft_tree,
    keep_path,
    residual_distribution,
    speculative_generate,
    tree_ancestor_mask,
    tree_depths,
    verify_forward,
)

__all__ = [
    "POLICIES",
    "BlockHashCache",
    "BlockMask",
    "Entry",
    "FixedOrderLayerNorm",
    "FixedOrderLinear",
    "FlexState",
    "ModelDrafter",
    "NGramDrafter",
    "PagedKVCache",
    "PrefixCache",
    "RadixCache",
    "Request",
    "RowwiseGELU",
    "ServeResult",
    "SpeculativeResult",
    "accept_greedy",
    "accept_sampled",
    "accept_tree_greedy",
    "attention",
    "attention_intensity",
    "batch_invariant",
    "check_requests",
    "create_block_mask",
    "decode_mask",
    "draft_tree",
    "fixed_order_sum",
    "flex_attention",
    "generate_packed",
    "generate_padded",
    "generate_windowed",
    "h2o_keep",
    "keep_path",
    "keep_top",
    "lfu",
    "lru",
    "merge_partials",
    "quest_keep",
    "quest_page_scores",
    "random_keep",
    "residual_distribution",
    "run_decoder",
    "serve",
    "shared_prefix_attention",
    "sink_window_keep",
    "slru",
    "snapkv_keep",
    "speculative_generate",
    "split_bounds",
    "split_k_attention",
    "split_kv_attention",
    "tova_keep",
    "tree_ancestor_mask",
    "tree_depths",
    "verify_forward",
]
