r"""The playgrounds' files: a trained model, as a small JSON document for a page that runs it.

`playground_json` writes the induction model's attention weights for the induction playground,
and `model_from_playground_json` reads it back; `char_playground_json` writes the character model
(`attn_ref.training.text.CharTransformer`) and the heads a reader named for the text playground,
and `char_model_from_playground_json` reads it back. `int8_entry` and `from_int8_entry` store and
read one tensor as signed bytes and a scale, in both files. They serve the site, and ship in the
wheel because the tutorials' downloaded notebooks call them.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping

import torch
from torch import Tensor

from attn_ref import _validate
from attn_ref.training.corpus import ALPHABET
from attn_ref.training.heads import copying_scores
from attn_ref.training.induction import AttentionOnlyDecoder
from attn_ref.training.text import CharTransformer

__all__ = [
    "char_model_from_playground_json",
    "char_playground_json",
    "model_from_playground_json",
    "playground_json",
]

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


CHAR_PLAYGROUND_FORMAT = "attn_ref character model, int8"


def char_playground_json(model: CharTransformer, heads: Mapping[tuple[int, int], tuple[str, float]]) -> str:
    r"""The trained character model, as a small JSON document for a browser to run.

    It holds every parameter, so that a page can compute what `CharTransformer.forward` computes:
    the next-character logits and every layer's attention weights. Each tensor is stored as
    signed bytes times one scale, as `attn_ref.training.playground_json` stores the induction
    model's.

    Format (version 1), a JSON object:

    - ``"format"``: ``"attn_ref character model, int8"``; ``"version"``: ``1``;
    - ``"alphabet"``: `ALPHABET`, character ``i`` being id ``i``;
    - ``"context_length"``, ``"embed_dim"``, ``"num_layers"``, ``"num_heads"``: the model's sizes
      (``head_dim`` is ``embed_dim / num_heads``; the MLP is ``4 embed_dim`` wide);
    - ``"heads"``: the heads a reader measured, in (layer, head) order, each
      ``{"layer": l, "head": h, "role": "...", "score": s}`` (the score to 6 decimals);
    - ``"tensors"``: by PyTorch's ``state_dict`` names, for example
      ``"blocks.0.attn.q_proj.weight"``, each ``{"shape": [...], "scale": s, "int8": base64}``: its
      entries in row-major order as signed bytes $n$, each standing for $n \cdot s$. Linear layers
      are stored as ``nn.Linear`` stores them: ``y = x @ weight.T + bias``.

    Args:
        model: The `CharTransformer`.
        heads: ``(layer, head) -> (role, score)``: what each named head does, and the score that
            says so (a `target_scores` value, say).

    Returns:
        The JSON text.

    Raises:
        TypeError: ``model`` is not a `CharTransformer`, or ``heads`` not a mapping.
        ValueError: A key of ``heads`` is not a head of ``model``, or a role is empty, or a score
            not a finite number.

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> model = CharTransformer(
        ...     context_length=16, embed_dim=8, num_layers=2, num_heads=2
        ... )
        >>> text = char_playground_json(model, {(1, 0): ("open quote", 0.4)})
        >>> json.loads(text)["heads"]
        [{'layer': 1, 'head': 0, 'role': 'open quote', 'score': 0.4}]
        >>> char_playground_json(model, {(2, 0): ("open quote", 0.4)})
        Traceback (most recent call last):
        ...
        ValueError: heads' key (2, 0): model has layers 0-1, heads 0-1
    """
    if not isinstance(model, CharTransformer):
        raise TypeError(f"model must be a CharTransformer, got {type(model).__name__}")
    if not isinstance(heads, Mapping):
        raise TypeError(f"heads must be a mapping (layer, head) -> (role, score), got {type(heads).__name__}")
    layers, per_layer = len(model.blocks), model.num_heads
    named = []
    for key in sorted(heads):
        if (
            not isinstance(key, tuple)
            or len(key) != 2
            or not all(isinstance(k, int) and not isinstance(k, bool) for k in key)
            or not (0 <= key[0] < layers and 0 <= key[1] < per_layer)
        ):
            raise ValueError(f"heads' key {key!r}: model has layers 0-{layers - 1}, heads 0-{per_layer - 1}")
        value = heads[key]
        if not isinstance(value, tuple) or len(value) != 2 or not isinstance(value[0], str) or not value[0]:
            raise ValueError(f"heads[{key!r}] must be (role, score) with a non-empty role, got {value!r}")
        score = _validate.number(f"heads[{key!r}]'s score", value[1])
        named.append({"layer": key[0], "head": key[1], "role": value[0], "score": round(score, 6)})
    document = {
        "format": CHAR_PLAYGROUND_FORMAT,
        "version": 1,
        "alphabet": ALPHABET,
        "context_length": model.context_length,
        "embed_dim": model.token_embedding.embedding_dim,
        "num_layers": layers,
        "num_heads": per_layer,
        "heads": named,
        "tensors": {name: int8_entry(tensor) for name, tensor in model.state_dict().items()},
    }
    return json.dumps(document, separators=(",", ":"))


def char_model_from_playground_json(text: str) -> CharTransformer:
    """The model `char_playground_json` wrote, with each parameter decoded from its levels.

    Args:
        text: The JSON text.

    Returns:
        A `CharTransformer` in evaluation mode, in float32.

    Raises:
        TypeError: ``text`` is not a string.
        ValueError: ``text`` is not version 1 of the format, or its alphabet is not `ALPHABET`.

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> model = CharTransformer(
        ...     context_length=16, embed_dim=8, num_layers=2, num_heads=2
        ... )
        >>> copy = char_model_from_playground_json(char_playground_json(model, {}))
        >>> from attn_ref.training import encode
        >>> tokens = encode('print("hi")')[None]
        >>> probabilities = [m(tokens)[0].softmax(-1) for m in (model, copy)]
        >>> difference = probabilities[0] - probabilities[1]
        >>> bool(difference.abs().max() < 0.01)  # int8 weights: close
        True
        >>> char_model_from_playground_json('{"format": "something else"}')
        Traceback (most recent call last):
        ...
        ValueError: text is not version 1 of 'attn_ref character model, int8'
    """
    _validate.string("text", text)
    document = json.loads(text)
    if document.get("format") != CHAR_PLAYGROUND_FORMAT or document.get("version") != 1:
        raise ValueError(f"text is not version 1 of {CHAR_PLAYGROUND_FORMAT!r}")
    if document["alphabet"] != ALPHABET:
        raise ValueError("text's alphabet is not ALPHABET: the ids would mean other characters")
    model = CharTransformer(
        document["context_length"], document["embed_dim"], document["num_layers"], document["num_heads"]
    )
    model.load_state_dict({name: from_int8_entry(stored) for name, stored in document["tensors"].items()})
    return model.eval()
