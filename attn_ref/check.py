r"""Check your own attention, written from memory in a file, with the tests the site's solution passes.

From a terminal, with the site's package installed:

```bash
python -m attn_ref.check causal-mha my_attention.py
python -m attn_ref.check --list
```

The check builds what your file defines, gives it weights and inputs chosen so that each
property of attention can be seen on its own, and prints one line per property: ``passed``, or
``FAILED`` with what it saw (``causality: FAILED: changing token 5 changed the output at position
2``). The exit status is 0 only when every property passed. A property that needs another one to
hold first (the scaling is measured through the heads) says ``not checked`` until that one passes.

The properties, for causal multi-head attention (``causal-mha``):

- ``shape``: ``(B, T, d_model)`` in, ``(B, T, d_model)`` out, for any sizes.
- ``projections``: a single token comes out as ``W_o(W_v(x))``, and the output depends on each of
  ``W_q``, ``W_k``, ``W_v`` and ``W_o``.
- ``softmax``: each query's weights sum to 1 over the keys.
- ``causality``: changing a token changes the outputs at its position and later, never earlier.
- ``heads``: each head works on its own slice of the features of every token, and the merge puts
  each head's output back in that slice of the same token.
- ``scaling``: the scores are divided by $\sqrt{d_k}$, the width of one head.
- ``agreement with PyTorch``: the output is `torch.nn.MultiheadAttention`'s, with the same weights
  and the causal mask, to float32's rounding.

When the output disagrees with PyTorch, the check also runs a list of known mistakes (no scaling,
the mask the wrong way, softmax over the wrong axis, a split or merge without its transpose...) and
names the one whose output yours matches.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import itertools
import math
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from types import ModuleType

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["EXERCISES", "Exercise", "Result", "UnusableFileError", "check", "main"]

PROJECTIONS = ("W_q", "W_k", "W_v", "W_o")
# float32 rounds each product and sum to 6e-8 of its size; these probes chain a few dot products of
# at most 12 terms on values below 2, so rounding stays under 1e-5. A mistake moves an output by 1e-2
# or more (each probe is built so that it does).
TOLERANCE = 1e-4


class UnusableFileError(Exception):
    """The file cannot be checked: it does not run, or does not define what the exercise asks for."""


class _PropertyError(Exception):
    """A property does not hold; the message says what was seen."""


class _NotMeasurableError(Exception):
    """A property cannot be measured on this file; the message says why."""


@dataclass(frozen=True)
class Result:
    """One property's verdict: ``passed``, ``FAILED`` (with what was seen) or ``not checked`` (why)."""

    name: str
    verdict: str
    detail: str = ""

    @property
    def passed(self) -> bool:
        return self.verdict == "passed"

    def __str__(self) -> str:
        if self.verdict == "passed":
            return f"{self.name}: passed"
        return f"{self.name}: {self.verdict}: {self.detail}"


@dataclass(frozen=True)
class _Check:
    name: str
    run: Callable  # (candidate, results so far) -> None, or raises _PropertyError / _NotMeasurableError
    needs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Exercise:
    """An exercise the check knows: what the reader's file defines, and the properties it must have."""

    name: str
    summary: str
    defines: str  # what the file must define, as a reader would write it
    load: Callable[[ModuleType, Path], Callable]
    checks: tuple[_Check, ...] = field(repr=False)


# ---------------------------------------------------------------------------------------------------
# The mistakes the check can name: one attention, written once, with each of them switched on or off.


@dataclass(frozen=True)
class _Way:
    """How an attention is computed: the right way, or with some of the known mistakes."""

    divide_by: str = "sqrt(d_k)"  # or "1", "sqrt(d_model)", "d_k"
    mask: str = "causal"  # or "none", "future" (the mask the wrong way: each token sees itself and later)
    softmax_dim: int = -1  # -2: over the queries
    split: str = "view, transpose"  # or "view": straight to (B, n_heads, T, d_k)
    merge: str = "transpose, reshape"  # or "reshape": straight back to (B, T, C)
    w_o: bool = True
    transposed_weights: bool = False  # x @ W.weight instead of W(x) = x @ W.weight.T


MISTAKES = {  # (setting, value): what it is, in words
    ("divide_by", "1"): "no scaling (scores not divided by sqrt(d_k))",
    (
        "divide_by",
        "sqrt(d_model)",
    ): "scores divided by sqrt(d_model) instead of sqrt(d_k), the width of one head",
    ("divide_by", "d_k"): "scores divided by d_k instead of its square root",
    ("mask", "none"): "no causal mask",
    ("mask", "future"): "the mask the wrong way round (each token sees itself and the tokens after it)",
    ("softmax_dim", -2): "softmax over the queries (dim=-2) instead of over the keys (dim=-1)",
    (
        "split",
        "view",
    ): "heads split by reshaping (B, T, C) straight to (B, n_heads, T, d_k), without the transpose",
    (
        "merge",
        "reshape",
    ): "heads merged by reshaping (B, n_heads, T, d_k) straight to (B, T, C), without transposing back",
    ("w_o", False): "no output projection W_o",
    ("transposed_weights", True): "the weights used as x @ W.weight instead of W(x), which is x @ W.weight.T",
}
SPLIT_MERGE = [("split", "view"), ("merge", "reshape")]


def _attend(q: Tensor, k: Tensor, v: Tensor, way: _Way, d_model: int) -> Tensor:
    """One head's attention (or each head's, along the leading dimensions), computed ``way``."""
    T, d_k = q.shape[-2:]
    divisor = {"1": 1.0, "sqrt(d_k)": math.sqrt(d_k), "sqrt(d_model)": math.sqrt(d_model), "d_k": float(d_k)}
    scores = q @ k.transpose(-2, -1) / divisor[way.divide_by]
    if way.mask != "none":
        below = torch.ones(T, T, dtype=torch.bool).tril()
        allowed = below if way.mask == "causal" else below.T
        scores = scores.masked_fill(~allowed, float("-inf"))
    return scores.softmax(dim=way.softmax_dim) @ v


def _reference(x: Tensor, weights: dict[str, Tensor], n_heads: int, way: _Way = _Way()) -> Tensor:
    """Causal multi-head attention of ``x`` ``(B, T, C)``, computed ``way``. Used to name a mistake,
    never as the truth (that is PyTorch's)."""
    B, T, C = x.shape
    d_k = C // n_heads

    def project(name: str, inputs: Tensor) -> Tensor:
        weight = weights[name]
        return inputs @ (weight if way.transposed_weights else weight.T)

    def split(t: Tensor) -> Tensor:
        if way.split == "view":
            return t.reshape(B, n_heads, T, d_k)
        return t.view(B, T, n_heads, d_k).transpose(1, 2)

    q, k, v = (split(project(name, x)) for name in ("W_q", "W_k", "W_v"))
    heads = _attend(q, k, v, way, C)
    merged = heads.reshape(B, T, C) if way.merge == "reshape" else heads.transpose(1, 2).reshape(B, T, C)
    return project("W_o", merged) if way.w_o else merged


def _matching_mistake(
    output: Tensor, compute: Callable[[_Way], Tensor], candidates: list
) -> tuple[str, tuple] | None:
    """The known mistake among ``candidates``, or pair of them, whose output is ``output``, if one is:
    what it is, in words, and the mistakes chosen."""
    for count in (1, 2):
        for chosen in itertools.combinations(candidates, count):
            settings = dict(chosen)
            if len(settings) < count:  # two values of one setting are not a pair
                continue
            expected = compute(_Way(**settings))
            if expected.shape == output.shape and _close(output, expected):
                return " and ".join(MISTAKES[mistake] for mistake in chosen), chosen
    return None


# ---------------------------------------------------------------------------------------------------
# Running the reader's code


def _close(a: Tensor, b: Tensor, tolerance: float = TOLERANCE) -> bool:
    return bool(torch.isfinite(a).all()) and float((a - b).abs().max()) <= tolerance


def _where(error: BaseException, path: Path) -> str:
    """``(my_attention.py, line 12)``: the last line of the reader's file the error went through."""
    lines = [f.lineno for f in traceback.extract_tb(error.__traceback__) if Path(f.filename) == path]
    return f" ({path.name}, line {lines[-1]})" if lines else ""


def _load_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise UnusableFileError(f"no file {path}")
    spec = importlib.util.spec_from_file_location(f"attn_ref_check_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as error:
        raise UnusableFileError(f"{path.name}, line {error.lineno}: {error.msg}") from None
    except Exception as error:
        raise UnusableFileError(
            f"running {path.name} raised {type(error).__name__}: {error}{_where(error, path)}"
        ) from None
    return module


def _defined(module: ModuleType, path: Path, name: str, kind: str, expected: str) -> object:
    found = getattr(module, name, None)
    if found is None:
        defined = sorted(n for n, v in vars(module).items() if inspect.isclass(v) or inspect.isfunction(v))
        others = f" (it defines {', '.join(defined)})" if defined else ""
        raise UnusableFileError(f"{path.name} defines no {kind} {name}{others}; expected:\n{expected}")
    return found


class _ReaderModule:
    """The reader's class, built for each size the probes use, with the probes' weights copied in."""

    def __init__(self, cls: type, path: Path):
        self.cls, self.path = cls, path
        self.built: dict[tuple[int, int], nn.Module] = {}

    def build(self, d_model: int, n_heads: int) -> nn.Module:
        if (d_model, n_heads) in self.built:
            return self.built[d_model, n_heads]
        name = self.cls.__name__
        try:
            module = self.cls(d_model, n_heads)
        except Exception as error:
            raise UnusableFileError(
                f"{name}({d_model}, {n_heads}) raised {type(error).__name__}: {error}{_where(error, self.path)}; "
                f"expected __init__(self, d_model, n_heads)"
            ) from None
        if not isinstance(module, nn.Module):
            raise UnusableFileError(f"{name} is not an nn.Module; expected class {name}(nn.Module)")
        for layer_name in PROJECTIONS:
            layer = getattr(module, layer_name, None)
            wanted = f"self.{layer_name} = nn.Linear(d_model, d_model, bias=False)"
            if not isinstance(layer, nn.Linear):
                what = "has no" if layer is None else f"has a {type(layer).__name__} as"
                raise UnusableFileError(
                    f"{name}({d_model}, {n_heads}) {what} {layer_name}; expected {wanted}"
                )
            if (layer.in_features, layer.out_features) != (d_model, d_model):
                raise UnusableFileError(
                    f"{name}({d_model}, {n_heads}).{layer_name} maps {layer.in_features} features to "
                    f"{layer.out_features}; expected {wanted}: one layer for all the heads, split after it"
                )
            if layer.bias is not None:
                raise UnusableFileError(
                    f"{name}({d_model}, {n_heads}).{layer_name} has a bias; expected {wanted} (the check "
                    "compares with PyTorch's attention without biases)"
                )
        self.built[d_model, n_heads] = module
        return module

    def __call__(self, x: Tensor, weights: dict[str, Tensor], n_heads: int) -> Tensor:
        module = self.build(x.shape[-1], n_heads)
        with torch.no_grad():
            for layer_name, weight in weights.items():
                getattr(module, layer_name).weight.copy_(weight)
            try:
                output = module(x)
            except Exception as error:
                raise _PropertyError(
                    f"forward raised {type(error).__name__}: {error}{_where(error, self.path)}"
                ) from None
        if not isinstance(output, Tensor):
            raise _PropertyError(
                f"forward returned a {type(output).__name__}; expected one tensor (B, T, d_model)"
            )
        return output.detach().float()


class _ReaderFunction:
    """The reader's function of ``(q, k, v)``."""

    def __init__(self, function: Callable, path: Path):
        self.function, self.path = function, path

    def __call__(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        with torch.no_grad():
            try:
                output = self.function(q, k, v)
            except Exception as error:
                raise _PropertyError(
                    f"{self.function.__name__} raised {type(error).__name__}: {error}{_where(error, self.path)}"
                ) from None
        if not isinstance(output, Tensor):
            raise _PropertyError(
                f"{self.function.__name__} returned a {type(output).__name__}; expected one tensor (B, T, d_k)"
            )
        return output.detach().float()


def _load_module(module: ModuleType, path: Path) -> _ReaderModule:
    cls = _defined(module, path, "CausalMultiHeadAttention", "class", EXERCISES["causal-mha"].defines)
    if not inspect.isclass(cls):
        raise UnusableFileError(f"CausalMultiHeadAttention in {path.name} is not a class")
    try:
        inspect.signature(cls).bind(16, 4)
    except TypeError:
        raise UnusableFileError(
            f"CausalMultiHeadAttention{inspect.signature(cls)} cannot be called as "
            "CausalMultiHeadAttention(d_model, n_heads); expected __init__(self, d_model, n_heads)"
        ) from None
    reader = _ReaderModule(cls, path)
    reader.build(16, 4)  # the layers, checked before any property
    return reader


def _function_loader(name: str) -> Callable[[ModuleType, Path], _ReaderFunction]:
    def load(module: ModuleType, path: Path) -> _ReaderFunction:
        function = _defined(module, path, name, "function", EXERCISES[name.replace("_", "-")].defines)
        if not callable(function):
            raise UnusableFileError(f"{name} in {path.name} is not a function")
        try:
            inspect.signature(function).bind(1, 2, 3)
        except TypeError:
            raise UnusableFileError(
                f"{name}{inspect.signature(function)} cannot be called as {name}(q, k, v)"
            ) from None
        except ValueError:  # no signature to read (a builtin): calling it will tell
            pass
        return _ReaderFunction(function, path)

    return load


# ---------------------------------------------------------------------------------------------------
# Inputs the probes share


def _random(*shape: int, seed: int, scale: float = 1.0) -> Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator) * scale


def _layer_weights(d_model: int, seed: int) -> dict[str, Tensor]:
    """Weights as nn.Linear draws them (uniform within 1/sqrt(d_model)), for the four projections."""
    generator = torch.Generator().manual_seed(seed)
    bound = 1 / math.sqrt(d_model)
    return {name: (torch.rand(d_model, d_model, generator=generator) * 2 - 1) * bound for name in PROJECTIONS}


def _shape_text(shape) -> str:
    return "(" + ", ".join(str(n) for n in shape) + ")"


def _positions(indices: list[int]) -> str:
    if len(indices) == 1:
        return f"position {indices[0]}"
    return "positions " + ", ".join(map(str, indices[:-1])) + f" and {indices[-1]}"


# ---------------------------------------------------------------------------------------------------
# The properties of causal multi-head attention


def _mha_shape(attend: _ReaderModule, results: dict) -> None:
    for B, T, d_model, n_heads in ((2, 7, 12, 3), (1, 5, 8, 2)):
        x = _random(B, T, d_model, seed=1)
        output = attend(x, _layer_weights(d_model, seed=2), n_heads)
        if output.shape != x.shape:
            raise _PropertyError(
                f"for x of shape {_shape_text(x.shape)} and n_heads={n_heads}, forward returned "
                f"{_shape_text(output.shape)}; expected {_shape_text(x.shape)}, which is (B, T, d_model)"
            )


def _mha_softmax(attend: _ReaderModule, results: dict) -> None:
    """Every value is the same vector: W_v keeps feature 0 of head 0 and feature 0 of head 1, which
    are 1 in every token, and drops the rest (a diagonal W_v, the same read either way round). So
    each output's features 0 and d_k are the sums of a query's weights in each head, 1 whatever
    the scores, the mask or the heads' reshapes, and its other features are 0."""
    B, T, d_model, n_heads = 1, 5, 8, 2
    d_k = d_model // n_heads
    x = _random(B, T, d_model, seed=3)
    x[..., [0, d_k]] = 1.0
    weights = _layer_weights(d_model, seed=4)
    weights["W_q"] = weights["W_q"] * 6  # scores that differ, so that a wrong axis shows
    weights["W_v"] = torch.zeros(d_model, d_model)
    weights["W_v"][[0, d_k], [0, d_k]] = 1.0
    weights["W_o"] = torch.eye(d_model)
    output = attend(x, weights, n_heads)
    expected = torch.zeros_like(output)
    expected[..., [0, d_k]] = 1.0
    if _close(output, expected):
        return
    if not torch.isfinite(output).all():
        raise _PropertyError(
            "with every value the same, the output holds NaN or infinity: a row of scores with no key allowed?"
        )
    sums = output[0][:, [0, d_k]]  # (T, 2): each position's sum of weights in each head
    position, head = divmod(int((sums - 1).abs().argmax()), n_heads)
    found = _matching_mistake(output, partial(_reference, x, weights, n_heads), [("softmax_dim", -2)])
    hint = f": {found[0]}" if found else ""
    raise _PropertyError(
        f"each query's weights must sum to 1 over the keys; at position {position} (head {head}) they "
        f"sum to {float(sums[position, head]):.2f}{hint}"
    )


def _changed_positions(before: Tensor, after: Tensor) -> list[int]:
    change = (after - before).abs().amax(dim=(0, 2))
    return [t for t in range(change.shape[0]) if float(change[t]) > TOLERANCE * 0.1]


def _causality(outputs: Callable[[Tensor], Tensor], x: Tensor, token: int) -> None:
    """Change ``token`` of ``x``: the outputs before it must stay, and its own must change."""
    before = outputs(x)
    changed_x = x.clone()
    changed_x[:, token] = _random(*changed_x[:, token].shape, seed=5)
    changed = _changed_positions(before, outputs(changed_x))
    earlier = [t for t in changed if t < token]
    if earlier:
        raise _PropertyError(f"changing token {token} changed the output at {_positions(earlier)}")
    if token not in changed:
        raise _PropertyError(
            f"changing token {token} left the output at position {token} as it was: a token must see itself"
        )


def _mha_causality(attend: _ReaderModule, results: dict) -> None:
    B, T, d_model, n_heads = 2, 7, 12, 3
    weights = _layer_weights(d_model, seed=6)
    _causality(lambda x: attend(x, weights, n_heads), _random(B, T, d_model, seed=7), token=5)


HEADS_SIZE = (4, 8, 2)  # T, d_model, n_heads of the heads' probe: 4 tokens, 2 heads of 4 features
SHARPNESS = 8.0  # W_q = W_k = 8 I: a slice scores 64 with itself and 0 or -64 with any other


def _heads_tokens() -> Tensor:
    """Four tokens of two slices each (one per head); the eight slices are the eight vectors ±e_i
    of width 4, so any two have a dot product of 0 or -1, and each has 1 with itself. The slices of
    head 0 alone are independent, so are the tokens."""
    e = torch.eye(4)
    head0 = torch.stack([e[2], -e[0], e[3], -e[1]])
    head1 = torch.stack([-e[3], e[1], e[0], -e[2]])
    return torch.cat([head0, head1], dim=-1)[None]


CONSEQUENCES = {  # what a wrong reshape does, said after the mistake
    (("split", "view"),): "each head then attends over pieces of several tokens",
    (("merge", "reshape"),): "each position's output then holds pieces of other positions' results",
    (("split", "view"), ("merge", "reshape")): (
        "the merge undoes the split's reshape, so the shapes come out right, but each head attends over "
        "pieces of several tokens"
    ),
}


def _mha_heads(attend: _ReaderModule, results: dict) -> None:
    """Two probes, with W_v = W_o = I so that the output is what the heads bring back.

    First each slice of each token matches only itself: a head that attends within its own slice, to
    its own token, returns that slice, and the merge puts it back where it came from: the output is x
    itself, whatever the mask. Then (once softmax and causality hold) head 1 looks for token 0 from
    every position, and head 0 still for each token itself: a split and a merge that undo each other
    show there, as head 1 brings back something else than token 0's slice."""
    T, d_model, n_heads = HEADS_SIZE
    d_k = d_model // n_heads
    x = _heads_tokens()
    eye = torch.eye(d_model)
    own = {"W_q": SHARPNESS * eye, "W_k": SHARPNESS * eye, "W_v": eye, "W_o": eye}
    first = own["W_q"].clone()
    wanted = SHARPNESS * x[0, 0, d_k:].expand(T, d_k)  # (T, d_k): every query of head 1 is token 0's key
    first[d_k:] = wanted.T @ torch.linalg.pinv(x[0].T)  # head 1's rows of W_q: each token to that query
    probes = [
        (own, x, "with each head attending only to its own token, the output should be x itself"),
        (
            {**own, "W_q": first},
            torch.cat([x[..., :d_k], x[:, :1, d_k:].expand(1, T, d_k)], dim=-1),
            "with head 1 looking for token 0 from every position, head 1's slice of each output should be token 0's",
        ),
    ]
    if not (results["softmax"].passed and results["causality"].passed):
        probes = probes[:1]  # the second needs every query to see token 0, and weights that sum to 1
    for weights, expected, should in probes:
        output = attend(x, weights, n_heads)
        if _close(output, expected):
            continue
        if not torch.isfinite(output).all():
            raise _NotMeasurableError("the output holds NaN or infinity (a query with no key it may see?)")
        candidates = [*SPLIT_MERGE, ("transposed_weights", True)]
        found = _matching_mistake(output, partial(_reference, x, weights, n_heads), candidates)
        if found:
            description, chosen = found
            consequence = f": {CONSEQUENCES[chosen]}" if chosen in CONSEQUENCES else ""
            raise _PropertyError(f"{description}{consequence}")
        largest = float((output - expected).abs().max())
        raise _PropertyError(
            f"{should}; it differs by up to {largest:.2f}: features move between tokens or heads"
        )


def _inferred_divisor(output_mix: Tensor) -> float:
    """The number the scores were divided by, read from the weight ``w`` given to token 0 by the last
    query: its scores for tokens 0 and 1 differ by -2, so w = sigmoid(-2 / divisor)."""
    w = float(output_mix)
    if not 1e-6 < w < 1 - 1e-6:
        raise _NotMeasurableError(
            f"the last query gave token 0 a weight of {w:.2f}, not a mix (see causality)"
        )
    return -2.0 / math.log(w / (1 - w))


def _divisor_verdict(divisor: float, d_k: int, d_model: int | None) -> None:
    right = math.sqrt(d_k)
    if abs(divisor - right) <= 1e-3 * right:
        return
    known = {"no scaling": 1.0, "d_k instead of its square root": float(d_k)}
    if d_model is not None:
        known["sqrt(d_model) instead of sqrt(d_k), the width of one head"] = math.sqrt(d_model)
    named = [name for name, value in known.items() if abs(divisor - value) <= 1e-3 * value]
    hint = f" ({named[0]})" if named else ""
    raise _PropertyError(
        f"scores are divided by {divisor:.2f}{hint}; expected sqrt(d_k) = sqrt({d_k}) = {right:.2f}"
    )


def _two_token_mix(d_k: int) -> tuple[Tensor, Tensor]:
    """Two tokens of width ``d_k``: token 1 scores 2 with itself and 0 with token 0; token 0 is e_1
    and token 1 is sqrt(2) e_0, so that feature 1 of the last output is the weight given to token 0."""
    token0, token1 = torch.zeros(d_k), torch.zeros(d_k)
    token0[1], token1[0] = 1.0, math.sqrt(2.0)
    return token0, token1


def _mha_scaling(attend: _ReaderModule, results: dict) -> None:
    d_model, n_heads = 8, 2  # two tokens
    d_k = d_model // n_heads
    token0, token1 = _two_token_mix(d_k)
    x = torch.stack([token0.repeat(n_heads), token1.repeat(n_heads)])[None]  # both heads alike
    eye = torch.eye(d_model)
    output = attend(x, dict.fromkeys(PROJECTIONS, eye), n_heads)
    divisor = _inferred_divisor(output[0, -1, 1])
    _divisor_verdict(divisor, d_k, d_model)


def _mha_projections(attend: _ReaderModule, results: dict) -> None:
    """With one token, attention gives it all its weight, whatever the scores, the mask or the
    heads' reshapes: the output is W_o(W_v(x)), which is x @ W_v.T @ W_o.T. Then, over five tokens,
    changing any of the four layers' weights changes the output."""
    d_model, n_heads = 12, 3
    weights = _layer_weights(d_model, seed=9)
    x = _random(2, 1, d_model, seed=10)
    output = attend(x, weights, n_heads)
    expected = x @ weights["W_v"].T @ weights["W_o"].T
    if not _close(output, expected):
        found = _matching_mistake(
            output, partial(_reference, x, weights, n_heads), [("w_o", False), ("transposed_weights", True)]
        )
        what = found[0] if found else "something else"
        raise _PropertyError(f"with a single token, the output should be W_o(W_v(x)); it is {what}")
    x = _random(1, 5, d_model, seed=11)
    before = attend(x, weights, n_heads)
    unused = []
    for name in PROJECTIONS:
        changed = {**weights, name: weights[name] + _random(d_model, d_model, seed=12, scale=0.5)}
        if _close(attend(x, changed, n_heads), before):
            unused.append(f"self.{name}")
    if unused:
        raise _PropertyError(
            f"changing the weights of {' and '.join(unused)} left the output as it was: forward never uses it"
        )


def _mha_agreement(attend: _ReaderModule, results: dict) -> None:
    B, T, d_model, n_heads = 2, 7, 12, 3
    x = _random(B, T, d_model, seed=12)
    weights = _layer_weights(d_model, seed=13)
    output = attend(x, weights, n_heads)
    torch_attention = nn.MultiheadAttention(d_model, n_heads, bias=False, batch_first=True)
    with torch.no_grad():
        torch_attention.in_proj_weight.copy_(torch.cat([weights["W_q"], weights["W_k"], weights["W_v"]]))
        torch_attention.out_proj.weight.copy_(weights["W_o"])
        future = torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)  # PyTorch's True: may NOT attend
        expected, _ = torch_attention(x, x, x, attn_mask=future, need_weights=False)
    _agreement_verdict(output, expected, lambda w: _reference(x, weights, n_heads, w), list(MISTAKES))


def _agreement_verdict(
    output: Tensor, expected: Tensor, compute: Callable[[_Way], Tensor], candidates
) -> None:
    if output.shape != expected.shape:
        raise _PropertyError(
            f"the output has shape {_shape_text(output.shape)}, PyTorch's {_shape_text(expected.shape)}"
        )
    if _close(output, expected):
        return
    if not torch.isfinite(output).all():
        raise _PropertyError("the output holds NaN or infinity")
    difference = (output - expected).abs()
    position = int(difference.amax(dim=(0, 2)).argmax())
    found = _matching_mistake(output, compute, candidates)
    matched = f"; it matches attention with {found[0]}" if found else ""
    raise _PropertyError(
        f"differs from PyTorch's by up to {float(difference.max()):.3f} (at position {position}){matched}"
    )


# ---------------------------------------------------------------------------------------------------
# The properties of one head's attention of q, k and v (a function)


def _function_shape(attend: _ReaderFunction, results: dict) -> None:
    for B, T, d_k in ((2, 7, 4), (3, 5, 8)):
        q, k, v = (_random(B, T, d_k, seed=seed) for seed in (14, 15, 16))
        output = attend(q, k, v)
        if output.shape != q.shape:
            raise _PropertyError(
                f"for q, k and v of shape {_shape_text(q.shape)}, it returned {_shape_text(output.shape)}; "
                f"expected {_shape_text(q.shape)}, which is (B, T, d_k)"
            )


def _function_softmax(attend: _ReaderFunction, results: dict) -> None:
    q, k = _random(1, 5, 4, seed=17, scale=3.0), _random(1, 5, 4, seed=18)
    output = attend(q, k, torch.ones(1, 5, 4))
    if _close(output, torch.ones_like(output)):
        return
    if not torch.isfinite(output).all():
        raise _PropertyError(
            "with every value 1, the output holds NaN or infinity: a row of scores with no key allowed?"
        )
    sums = output.mean(dim=-1)[0]
    worst = int((sums - 1).abs().argmax())
    axis = ": softmax over the queries (dim=-2) instead of over the keys (dim=-1)?"
    raise _PropertyError(
        f"each query's weights must sum to 1 over the keys; with every value 1, the output at position "
        f"{worst} is {float(sums[worst]):.2f}{axis}"
    )


def _function_causality(attend: _ReaderFunction, results: dict) -> None:
    q, k, v = (_random(2, 7, 4, seed=seed) for seed in (19, 20, 21))

    def outputs(tokens: Tensor) -> Tensor:  # token t's query, key and value side by side
        return attend(tokens[..., :4], tokens[..., 4:8], tokens[..., 8:])

    _causality(outputs, torch.cat([q, k, v], dim=-1), token=5)


def _function_sees_every_key(attend: _ReaderFunction, results: dict) -> None:
    q, k, v = (_random(2, 7, 4, seed=seed) for seed in (19, 20, 21))
    before = attend(q, k, v)
    k2, v2 = k.clone(), v.clone()
    k2[:, -1], v2[:, -1] = _random(2, 4, seed=22), _random(2, 4, seed=23)
    changed = _changed_positions(before, attend(q, k2, v2))
    unseen = [t for t in range(7) if t not in changed]
    if unseen:
        raise _PropertyError(
            f"changing the last key and value left the output at {_positions(unseen)} as it was: "
            "every query sees every key here (no mask)"
        )


def _function_scaling(attend: _ReaderFunction, results: dict) -> None:
    d_k = 4
    token0, token1 = _two_token_mix(d_k)
    keys = torch.stack([token0, token1])[None]
    values = torch.stack([torch.eye(d_k)[1], torch.eye(d_k)[0]])[None]
    output = attend(keys, keys, values)
    _divisor_verdict(_inferred_divisor(output[0, -1, 1]), d_k, None)


def _function_agreement(causal: bool) -> Callable:
    def agreement(attend: _ReaderFunction, results: dict) -> None:
        q, k, v = (_random(2, 7, 4, seed=seed) for seed in (24, 25, 26))
        output = attend(q, k, v)
        expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        candidates = [("divide_by", "1"), ("divide_by", "d_k"), ("softmax_dim", -2)]
        candidates += [("mask", "none"), ("mask", "future")] if causal else []

        def compute(way: _Way) -> Tensor:  # the mask's absence, for attention, is not a mistake
            return _attend(q, k, v, way if causal else replace(way, mask="none"), d_model=4)

        _agreement_verdict(output, expected, compute, candidates)

    return agreement


# ---------------------------------------------------------------------------------------------------
# The exercises


EXERCISES: dict[str, Exercise] = {
    exercise.name: exercise
    for exercise in (
        Exercise(
            "causal-mha",
            "causal multi-head self-attention, as a module",
            "    class CausalMultiHeadAttention(nn.Module):\n"
            "        def __init__(self, d_model: int, n_heads: int):\n"
            "            # self.W_q, self.W_k, self.W_v, self.W_o: nn.Linear(d_model, d_model, bias=False)\n"
            "        def forward(self, x):  # (B, T, d_model) -> (B, T, d_model), causal",
            _load_module,
            (
                _Check("shape", _mha_shape),
                _Check("projections", _mha_projections, ("shape",)),
                _Check("softmax", _mha_softmax, ("shape",)),
                _Check("causality", _mha_causality, ("shape",)),
                _Check("heads", _mha_heads, ("projections",)),
                _Check("scaling", _mha_scaling, ("softmax", "heads")),
                _Check("agreement with PyTorch", _mha_agreement, ("shape",)),
            ),
        ),
        Exercise(
            "causal-attention",
            "one head of causal attention, given its queries, keys and values",
            "    def causal_attention(q, k, v):  # each (B, T, d_k) -> (B, T, d_k), causal",
            _function_loader("causal_attention"),
            (
                _Check("shape", _function_shape),
                _Check("softmax", _function_softmax, ("shape",)),
                _Check("causality", _function_causality, ("shape",)),
                _Check("scaling", _function_scaling, ("softmax",)),
                _Check("agreement with PyTorch", _function_agreement(causal=True), ("shape",)),
            ),
        ),
        Exercise(
            "attention",
            "one head of scaled dot-product attention, every key visible",
            "    def attention(q, k, v):  # each (B, T, d_k) -> (B, T, d_k), no mask",
            _function_loader("attention"),
            (
                _Check("shape", _function_shape),
                _Check("softmax", _function_softmax, ("shape",)),
                _Check("every key seen", _function_sees_every_key, ("shape",)),
                _Check("scaling", _function_scaling, ("softmax",)),
                _Check("agreement with PyTorch", _function_agreement(causal=False), ("shape",)),
            ),
        ),
    )
}


def check(exercise: str, path: str | Path) -> list[Result]:
    """Check the file at ``path`` against ``exercise``: one `Result` per property, in order.

    Args:
        exercise: A name in `EXERCISES` (``"causal-mha"``, ``"causal-attention"``, ``"attention"``).
        path: The reader's Python file.

    Returns:
        The verdicts, in the order printed.

    Raises:
        UnusableFileError: The file does not run, or does not define what the exercise asks for.

    Examples:
        >>> import tempfile, textwrap
        >>> solution = textwrap.dedent('''
        ...     import torch
        ...     def attention(q, k, v):
        ...         scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
        ...         return scores.softmax(dim=-1) @ v
        ... ''')
        >>> with tempfile.NamedTemporaryFile("w", suffix=".py") as file:
        ...     _ = file.write(solution); file.flush()
        ...     for result in check("attention", file.name):
        ...         print(result)
        shape: passed
        softmax: passed
        every key seen: passed
        scaling: passed
        agreement with PyTorch: passed
    """
    if exercise not in EXERCISES:
        raise ValueError(f"exercise must be one of {', '.join(EXERCISES)}, got {exercise!r}")
    chosen, path = EXERCISES[exercise], Path(path).resolve()
    attend = chosen.load(_load_file(path), path)
    results: dict[str, Result] = {}
    for step in chosen.checks:
        waiting = [name for name in step.needs if not results[name].passed]
        if waiting:
            results[step.name] = Result(step.name, "not checked", f"needs {' and '.join(waiting)} first")
            continue
        try:
            step.run(attend, results)
            results[step.name] = Result(step.name, "passed")
        except _PropertyError as failure:
            results[step.name] = Result(step.name, "FAILED", str(failure))
        except UnusableFileError as failure:  # built at another size, the class refused
            results[step.name] = Result(step.name, "FAILED", str(failure))
        except _NotMeasurableError as reason:
            results[step.name] = Result(step.name, "not checked", str(reason))
    return list(results.values())


def main(argv: list[str] | None = None) -> int:
    """``python -m attn_ref.check EXERCISE FILE``: print each property's verdict; 0 when all passed."""
    parser = argparse.ArgumentParser(
        prog="python -m attn_ref.check",
        description="Check your own attention, written in a file, with the tests the site's solution passes.",
    )
    parser.add_argument("exercise", nargs="?", choices=list(EXERCISES), help="what the file writes")
    parser.add_argument("file", nargs="?", help="your Python file")
    parser.add_argument("--list", action="store_true", help="list the exercises and what each file defines")
    arguments = parser.parse_args(argv)
    if arguments.list:
        for exercise in EXERCISES.values():
            print(f"{exercise.name}: {exercise.summary}; the file defines\n{exercise.defines}\n")
        return 0
    if not (arguments.exercise and arguments.file):
        parser.error("give an exercise and a file, or --list")
    try:
        results = check(arguments.exercise, arguments.file)
    except UnusableFileError as problem:
        print(f"cannot check {arguments.file}: {problem}")
        return 1
    for result in results:
        print(result)
    failed = [r for r in results if not r.passed]
    print(
        f"{len(results) - len(failed)} of {len(results)} passed" if failed else f"all {len(results)} passed"
    )
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
