r"""The induction playground's file: the trained model's attention weights, as a small JSON document.

`playground_json` writes it for the page that runs the model in the browser, and
`model_from_playground_json` reads it back. `int8_entry` and `from_int8_entry` store and read one
tensor as signed bytes and a scale, in this file and in the text playground's
(`attn_ref.training.text.char_playground_json`). They serve the site, and ship in the wheel
because the tutorials' downloaded notebooks call them.
"""

from __future__ import annotations

import base64
import json

import torch
from torch import Tensor

from attn_ref.training.heads import copying_scores
from attn_ref.training.induction import AttentionOnlyDecoder

__all__ = ["model_from_playground_json", "playground_json"]

PLAYGROUND_FORMAT = "attn_ref induction model, attention only, int8"
_EMBEDDINGS = ("token_embedding.weight", "position_embedding.weight")
_PROJECTIONS = {0: ("q_proj", "k_proj", "v_proj", "out_proj"), 1: ("q_proj", "k_proj")}


def int8_entry(tensor: Tensor) -> dict:
    """One tensor as a playground file stores it: ``{"shape", "scale", "int8"}``.

    The scale is the largest entry's size over 127 (6 digits kept), the step between two levels;
    each entry rounds to the nearest level and is stored as a signed byte, row after row, in base64.
    """
    values = tensor.detach().float().cpu()
    scale = float(f"{values.abs().max().item() / 127:.6g}") or 1.0  # an all-zero tensor: any step
    levels = (values / scale).round().clamp(-127, 127).to(torch.int8)
    encoded = base64.b64encode(levels.numpy().tobytes()).decode("ascii")
    return {"shape": list(values.shape), "scale": scale, "int8": encoded}


def from_int8_entry(stored: dict) -> Tensor:
    """The float32 tensor an `int8_entry` stands for: each level times the scale."""
    levels = torch.frombuffer(bytearray(base64.b64decode(stored["int8"])), dtype=torch.int8)
    return (levels.float() * stored["scale"]).reshape(stored["shape"])  # rows, one after the other


def _playground_tensors(model: AttentionOnlyDecoder) -> dict[str, Tensor]:
    """The tensors the attention weights of both layers depend on, by their state_dict names."""
    state = model.state_dict()
    names = list(_EMBEDDINGS)
    for layer, projections in _PROJECTIONS.items():
        names += [f"layers.{layer}.{p}.{kind}" for p in projections for kind in ("weight", "bias")]
    return {name: state[name] for name in names}


def playground_json(model: AttentionOnlyDecoder) -> str:
    r"""The trained induction model's attention, as a small JSON document for a browser to run.

    It holds what the attention weights of both layers depend on: the token and position
    embeddings, all four projections of layer 0 (its output feeds layer 1), and the query and
    key projections of layer 1. The logits are not computable from it; what layer 1's heads do
    to them is summed up in one number per head, computed from the full-precision weights:
    whether it copies (`copying_scores`).

    Format (version 2), a JSON object:

    - ``"format"``: ``"attn_ref induction model, attention only, int8"``; ``"version"``: ``2``;
    - ``"vocab_size"``, ``"context_length"``, ``"embed_dim"``, ``"num_layers"``,
      ``"num_heads"``: the model's sizes (``head_dim`` is ``embed_dim / num_heads``);
    - ``"copying"``: `copying_scores` of layer 1, one number per head (version 2 added it);
    - ``"tensors"``: by PyTorch's ``state_dict`` names, for example
      ``"layers.0.q_proj.weight"``, each ``{"shape": [...], "scale": s, "int8": base64}``: its
      entries in row-major order as signed bytes $n$, each standing for $n \cdot s$. Linear
      layers are stored as ``nn.Linear`` stores them, $W^\top$: ``y = x @ weight.T + bias``.

    The browser's forward pass, for tokens $t_0 \dots t_{T-1}$: $x = E[t] + P[0..T-1]$; per
    layer and head $h$ (rows $h d_k \dots (h+1) d_k - 1$ of each projection), causal scaled
    dot-product attention; layer 0's heads concatenated, multiplied by ``out_proj`` and added
    to $x$ before layer 1. `model_from_playground_json` reads the file back into a model whose
    attention weights are the ones the browser should compute.

    Args:
        model: A two-layer `AttentionOnlyDecoder`.

    Returns:
        The JSON text.
    """
    if len(model.layers) != 2:
        raise ValueError(f"model must have 2 layers, got {len(model.layers)}")
    tensors = {name: int8_entry(tensor) for name, tensor in _playground_tensors(model).items()}
    document = {
        "format": PLAYGROUND_FORMAT,
        "version": 2,
        "vocab_size": model.vocab_size,
        "context_length": model.context_length,
        "embed_dim": model.token_embedding.embedding_dim,
        "num_layers": len(model.layers),
        "num_heads": model.num_heads,
        "copying": [round(float(s), 6) for s in copying_scores(model, layer=1)],
        "tensors": tensors,
    }
    return json.dumps(document, separators=(",", ":"))


def model_from_playground_json(text: str) -> AttentionOnlyDecoder:
    """The model `playground_json` wrote: its attention weights are the ones the file defines.

    Parameters the file does not hold (layer 1's value and output projections, and the
    unembedding) are zero, so its logits mean nothing.

    Args:
        text: The JSON text.

    Returns:
        An `AttentionOnlyDecoder` in evaluation mode.

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> model = AttentionOnlyDecoder(16, 8, embed_dim=8, num_layers=2, num_heads=2)
        >>> copy = model_from_playground_json(playground_json(model))
        >>> tokens = torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6]])
        >>> gap = (model(tokens)[1][1] - copy(tokens)[1][1]).abs().max()
        >>> gap < 0.05  # int8 weights: close
        tensor(True)
    """
    document = json.loads(text)
    if document.get("format") != PLAYGROUND_FORMAT or document.get("version") != 2:
        raise ValueError(f"text is not version 2 of {PLAYGROUND_FORMAT!r}")
    model = AttentionOnlyDecoder(
        document["vocab_size"],
        document["context_length"],
        document["embed_dim"],
        document["num_layers"],
        document["num_heads"],
    )
    state = {name: torch.zeros_like(tensor) for name, tensor in model.state_dict().items()}
    for name, stored in document["tensors"].items():
        state[name] = from_int8_entry(stored)
    model.load_state_dict(state)
    return model.eval()
