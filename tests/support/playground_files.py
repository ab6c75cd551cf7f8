"""The models of the playgrounds' files, as the browser computes them: float64 from the same int8
levels and scales (JavaScript's numbers), for tests/browser/test_playground_induction.py and
tests/browser/test_playground_text.py."""

from __future__ import annotations

import base64
import json

import numpy as np
import torch
from torch import nn


def float64_from_levels(model: nn.Module, model_text: str) -> nn.Module:
    """``model`` (read from ``model_text`` by attn_ref) in float64, with each tensor the file holds
    set to its int8 levels times its scale, multiplied in float64 as the page multiplies them."""
    model = model.double()
    state = model.state_dict()
    for name, stored in json.loads(model_text)["tensors"].items():
        levels = np.frombuffer(base64.b64decode(stored["int8"]), dtype=np.int8)
        state[name] = torch.from_numpy(levels.astype(np.float64) * stored["scale"]).reshape(stored["shape"])
    model.load_state_dict(state)
    return model
