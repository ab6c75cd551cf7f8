r"""Fewer bytes per cached token: latent attention, quantized caches, windows, linear attention and the delta rule.

A key/value cache keeps $2 H_{kv} d_k$ numbers per token and per layer
(`attn_ref.KVCache`). Each module here keeps fewer, and gives something up for it:

- `attn_ref.compression.latent`: `MultiHeadLatentAttention` (DeepSeek-V2's multi-head
  latent attention, MLA) caches one compressed latent per token, plus a small key that
  carries the rotary positions, in a `LatentCache`. With ``absorbed=True`` it attends to
  the latents directly: the up-projections of the keys and values are folded into the
  query and output projections.
- `attn_ref.compression.quantized`: `quantize` stores a tensor in 8, 4 or 2 bits per
  number, with one scale and one zero point per token or per channel (`QuantizedTensor`);
  `QuantizedKVCache` keeps keys per channel and values per token, as KIVI does (Liu et
  al., 2024).
- `attn_ref.compression.sliding_window`: `SlidingWindowCache` keeps only the last
  ``window`` positions (attend with `attn_ref.masks.sliding_window_mask`).
- `attn_ref.compression.linear`: `linear_attention` replaces the softmax by a feature map
  (Katharopoulos et al., 2020); `linear_attention_recurrent` computes the same causal
  output token by token from a state of fixed size (`LinearAttentionState`).
- `attn_ref.compression.delta_rule`: `delta_rule_recurrent` and `delta_rule_chunked` write
  each token into a state of fixed size by the delta rule, correcting what the state returns
  for its key (DeltaNet), with an optional decay per token (Gated DeltaNet); the two forms give
  the same outputs; `delta_rule_multiply_adds` counts their work, `DeltaRuleState` holds the state.
- `attn_ref.compression.recall`: `AssociativeRecall` is a one-layer model that recalls a
  value from its key, with softmax or linear attention, to measure what the fixed state costs;
  `DeltaRecall` writes its pairs by the delta rule, `RecallStack` stacks layers into hybrids;
  `recall_batch`, `train_recall` and `recall_accuracy` are the task's data, training and score.

Everything listed here is also importable from `attn_ref.compression` itself.
"""

from attn_ref.compression.delta_rule import (
    DeltaRuleState,
    delta_rule_chunked,
    delta_rule_multiply_adds,
    delta_rule_recurrent,
)
from attn_ref.compression.latent import LatentCache, MultiHeadLatentAttention
from attn_ref.compression.linear import (
    LinearAttentionState,
    elu_feature_map,
    linear_attention,
    linear_attention_recurrent,
)
from attn_ref.compression.quantized import (
    QuantizedKVCache,
    QuantizedTensor,
    pack_codes,
    quantize,
    unpack_codes,
)
from attn_ref.compression.recall import (
    AssociativeRecall,
    DeltaRecall,
    RecallStack,
    recall_accuracy,
    recall_batch,
    train_recall,
)
from attn_ref.compression.sliding_window import SlidingWindowCache

__all__ = [
    "AssociativeRecall",
    "DeltaRecall",
    "DeltaRuleState",
    "LatentCache",
    "LinearAttentionState",
    "MultiHeadLatentAttention",
    "QuantizedKVCache",
    "QuantizedTensor",
    "RecallStack",
    "SlidingWindowCache",
    "delta_rule_chunked",
    "delta_rule_multiply_adds",
    "delta_rule_recurrent",
    "elu_feature_map",
    "linear_attention",
    "linear_attention_recurrent",
    "pack_codes",
    "quantize",
    "recall_accuracy",
    "recall_batch",
    "train_recall",
    "unpack_codes",
]
