r"""Attention as today's open models change it: layer schedules, sinks, gates, caps and QK-norm.

Each piece changes one step of scaled dot-product attention:

- `attn_ref.modern.schedules`: which layers see a window and which see everything
  (`tile_layer_types`), the published configurations (`AttentionConfig`, `PUBLISHED`),
  their cache bill (`kv_bytes`, built on `attn_ref.kv_cache_bytes`) and a cache per
  layer by its kind (`ScheduleCache`).
- `attn_ref.modern.sinks`: a sink logit per head in the softmax's denominator
  (`sink_softmax`, `sink_attention`; gpt-oss) and a gate on each head's output
  (`output_gate`; Qiu et al., 2025).
- `attn_ref.modern.logits`: a smooth cap on the logits (`softcap`, and
  `softcap_score_mod` for FlexAttention; Gemma 2) and normalized queries and keys
  (`qk_norm`; Gemma 3).
- `attn_ref.modern.model`: `ModernAttention` and `ModernDecoder` with any of these;
  `generate`, `train_repeats`, `no_match_queries` and `first_position_mass` train and
  measure them.

Everything listed here is also importable from `attn_ref.modern` itself.
"""

from attn_ref.modern.logits import qk_norm, softcap, softcap_score_mod
from attn_ref.modern.model import (
    GATES,
    History,
    ModernAttention,
    ModernDecoder,
    first_position_mass,
    generate,
    no_match_queries,
    train_repeats,
)
from attn_ref.modern.schedules import (
    FULL,
    PUBLISHED,
    SLIDING,
    AttentionConfig,
    ScheduleCache,
    kv_bytes,
    tile_layer_types,
)
from attn_ref.modern.sinks import output_gate, sink_attention, sink_softmax

__all__ = [
    "FULL",
    "GATES",
    "PUBLISHED",
    "SLIDING",
    "AttentionConfig",
    "History",
    "ModernAttention",
    "ModernDecoder",
    "ScheduleCache",
    "first_position_mass",
    "generate",
    "kv_bytes",
    "no_match_queries",
    "output_gate",
    "qk_norm",
    "sink_attention",
    "sink_softmax",
    "softcap",
    "softcap_score_mod",
    "tile_layer_types",
    "train_repeats",
]
