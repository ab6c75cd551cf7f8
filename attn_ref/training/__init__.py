r"""Tiny attention models that learn in seconds, and the measurements that show what they learned.

Every other page runs attention with random weights. The two models here are trained, on a CPU,
in a few seconds each, so that a page can show what trained heads do. Its modules:

- `attn_ref.training.induction`: `AttentionOnlyDecoder` learns to continue sequences that
  repeat (`repeated_tokens`, `train_induction`), which it does with *induction heads*
  (named by Elhage et al., 2021; defined by what they do by Olsson et al., 2022);
  `one_token_induction_losses` is the loss a perfect one of them would get.
- `attn_ref.training.heads`: what those heads do. A previous-token head in one layer
  (`previous_token_scores`) lets a head of the next layer find the token that followed an
  earlier copy of the current token (`prefix_matching_scores`) and copy it (`head_logits`,
  `copying_scores`); `without_heads` zeroes heads to see which ones the loss depends on, and
  `token_scores` reads the mechanism off the weights.
- `attn_ref.training.rotary`: `RotaryDecoder`, the induction model with RoPE in every layer and
  no position table, which reads sequences of any length; `with_frequencies` copies it with other
  RoPE frequencies (`attn_ref.rope_scaling`).
- `attn_ref.training.sorting`: `TinyEncoderDecoder` learns to sort (`sorting_batch`,
  `train_sorting`). Its cross-attention takes its queries from the output written so far and
  its keys and values from the input, as in the encoder-decoder of Vaswani et al. (2017), with
  inputs of different lengths padded in one batch.
- `attn_ref.training.corpus`: Python's own documentation as text in 96 characters (`load_corpus`,
  which drops the topics that repeat others; `encode`, `decode`, `windows`).
- `attn_ref.training.text`: `CharTransformer`, a two-block decoder of
  `attn_ref.decoder.DecoderBlock` s over those characters (`train_char_model`), and what
  measures it: `window_losses`, `context_losses`, the n-gram baselines, `ablated_losses`.
- `attn_ref.training.text_heads`: `target_scores` reads what its heads attend to (the previous
  character, a word's start, the bracket or quote still open, an earlier copy), and
  `closing_predictions` and `copy_predictions` mark where the loss should show it.
- `attn_ref.training.to_torch`: `to_torch_multihead` copies an
  `attn_ref.multihead.MultiHeadAttention` into `torch.nn.MultiheadAttention`, to check the
  models against PyTorch.
- `attn_ref.training.playground`: `playground_json` writes the trained induction model's
  attention weights to a small JSON file for a page that runs the model in the browser, and
  `model_from_playground_json` reads it back; `char_playground_json` and
  `char_model_from_playground_json` do the same for the character model.

`train_induction` and `train_sorting` are seeded and deterministic on a given machine.
Everything listed here is also importable from `attn_ref.training` itself.
"""

from attn_ref.training.corpus import (
    ALPHABET,
    Corpus,
    corpus_documents,
    decode,
    encode,
    load_corpus,
    repeated_documents,
    split_documents,
    to_alphabet,
    verbatim_windows,
    windows,
)
from attn_ref.training.heads import (
    copying_scores,
    head_logits,
    prefix_matching_scores,
    previous_token_scores,
    token_scores,
    without_heads,
)
from attn_ref.training.induction import (
    AttentionOnlyDecoder,
    InductionHistory,
    next_token_losses,
    one_token_induction_losses,
    part_masks,
    repeated_tokens,
    train_induction,
)
from attn_ref.training.playground import (
    char_model_from_playground_json,
    char_playground_json,
    model_from_playground_json,
    playground_json,
)
from attn_ref.training.rotary import RotaryDecoder, with_frequencies
from attn_ref.training.sorting import SortingBatch, TinyEncoderDecoder, sorting_batch, train_sorting
from attn_ref.training.text import (
    CharTransformer,
    ablated_losses,
    bigram_window_bits,
    context_losses,
    ngram_bits,
    sample,
    train_char_model,
    window_losses,
)
from attn_ref.training.text_heads import (
    closing_predictions,
    copy_predictions,
    induction_targets,
    open_spans,
    opener_targets,
    previous_char_targets,
    target_scores,
    word_start_targets,
)
from attn_ref.training.to_torch import to_torch_multihead

__all__ = [
    "ALPHABET",
    "AttentionOnlyDecoder",
    "CharTransformer",
    "Corpus",
    "InductionHistory",
    "RotaryDecoder",
    "SortingBatch",
    "TinyEncoderDecoder",
    "ablated_losses",
    "bigram_window_bits",
    "char_model_from_playground_json",
    "char_playground_json",
    "closing_predictions",
    "context_losses",
    "copy_predictions",
    "copying_scores",
    "corpus_documents",
    "decode",
    "encode",
    "head_logits",
    "induction_targets",
    "load_corpus",
    "model_from_playground_json",
    "next_token_losses",
    "ngram_bits",
    "one_token_induction_losses",
    "open_spans",
    "opener_targets",
    "part_masks",
    "playground_json",
    "prefix_matching_scores",
    "previous_char_targets",
    "previous_token_scores",
    "repeated_documents",
    "repeated_tokens",
    "sample",
    "sorting_batch",
    "split_documents",
    "target_scores",
    "to_alphabet",
    "to_torch_multihead",
    "token_scores",
    "train_char_model",
    "train_induction",
    "train_sorting",
    "verbatim_windows",
    "window_losses",
    "windows",
    "with_frequencies",
    "without_heads",
    "word_start_targets",
]
