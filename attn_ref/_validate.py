"""Every argument check of attn_ref, one rule each, so that every function refuses bad input alike.

A check raises at once, naming the argument, what it got and what it needs:

- ``TypeError`` when the kind is wrong (not a tensor, not a floating dtype, dtypes that differ);
- ``ValueError`` when the kind is right but the size or shape is not.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import Tensor

from attn_ref._numerics import compute_dtype


def count(name: str, value: object, minimum: int = 1, maximum: int | None = None) -> int:
    """An ``int`` (``bool`` is refused: ``True`` is not a size) in ``[minimum, maximum]``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int of at least {minimum}, got {value!r}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be an int in [{minimum}, {maximum}], got {value!r}")
    return value


def counts(**sizes: object) -> None:
    """Each keyword a `count` of at least 1, named by its keyword: ``counts(num_layers=2, T=8)``."""
    for name, value in sizes.items():
        count(name, value)


def probability(name: str, value: object) -> float:
    """A probability of dropping, a ``float`` (or ``int``) in ``[0, 1)``: 1 would drop everything."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be a number in [0, 1), got {value!r}")
    return float(value)


def number(name: str, value: object, minimum: float | None = None, *, above: bool = False) -> float:
    """A finite real number (``bool`` refused), at least ``minimum`` (above it, with ``above``)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if minimum is not None and (value < minimum or (above and value == minimum)):
        bound = "above" if above else "at least"
        raise ValueError(f"{name} must be {bound} {minimum:g}, got {value!r}")
    return float(value)


def band(low_name: str, low: object, high_name: str, high: object) -> tuple[float, float]:
    """The two ends of a band: positive numbers, ``low`` below ``high``."""
    low = number(low_name, low, 0.0, above=True)
    high = number(high_name, high, 0.0, above=True)
    if low >= high:
        raise ValueError(
            f"{low_name} must be below {high_name}, got {low_name}={low:g} and {high_name}={high:g}"
        )
    return low, high


def one_of(name: str, value: object, options: Sequence[object]) -> object:
    """``value`` is one of ``options`` (compared with ``==``; ``True`` is not taken for ``1``)."""
    if isinstance(value, bool) or value not in options:
        listed = ", ".join(repr(option) for option in options)
        raise ValueError(f"{name} must be one of {listed}, got {value!r}")
    return value


def divides(name: str, part: int, whole_name: str, whole: int, why: str = "") -> None:
    """``part`` divides ``whole``."""
    if whole % part:
        raise ValueError(f"{name}={part} must divide {whole_name}={whole}" + (f": {why}" if why else ""))


def tensor(
    name: str, x: object, *, min_ndim: int = 0, allow_bool: bool = False, any_dtype: bool = False
) -> Tensor:
    """A floating tensor (or a boolean one, with ``allow_bool``; of any dtype, with ``any_dtype``) of
    at least ``min_ndim`` dimensions."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not (any_dtype or x.dtype.is_floating_point or (allow_bool and x.dtype == torch.bool)):
        kinds = "a floating or boolean" if allow_bool else "a floating"
        raise TypeError(f"{name} must have {kinds} dtype, got {x.dtype}")
    return _dimensions(name, x, min_ndim)


def _dimensions(name: str, x: Tensor, min_ndim: int) -> Tensor:
    if x.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dimensions, got shape {tuple(x.shape)}")
    return x


def string(name: str, value: object) -> str:
    """A ``str`` (bytes are refused: a text is decoded first)."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__}")
    return value


def feature_pairs(name: str, value: object, minimum: int = 2) -> int:
    """An even `count` of features, at least ``minimum``: features taken two by two (RoPE, the
    sinusoidal encoding)."""
    count(name, value, minimum)
    if value % 2:
        raise ValueError(f"{name} must be even, to form pairs of features, got {value}")
    return value


def token_ids(name: str, x: object, min_length: int = 0) -> Tensor:
    """A ``(B, T)`` integer tensor of token ids with ``T >= min_length``."""
    if not isinstance(x, Tensor) or x.ndim != 2 or x.dtype.is_floating_point or x.dtype == torch.bool:
        got = f"shape {tuple(x.shape)} and dtype {x.dtype}" if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(f"{name} must be a (B, T) tensor of integer ids, got {got}")
    if x.shape[1] < min_length:
        raise ValueError(f"{name} must have T >= {min_length} tokens, got shape {tuple(x.shape)}")
    return x


def integer_vector(name: str, x: object) -> Tensor:
    """A ``(B,)`` integer tensor, such as one length or period per sequence."""
    if not isinstance(x, Tensor) or x.ndim != 1 or x.dtype.is_floating_point or x.dtype == torch.bool:
        got = f"shape {tuple(x.shape)} and dtype {x.dtype}" if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(f"{name} must be a (B,) tensor of integers, got {got}")
    return x


def shape(name: str, x: Tensor, expected: Sequence[int | None], described: str) -> None:
    """``x`` has the shape ``expected``, where ``None`` matches any size; ``described`` names the sizes."""
    if len(x.shape) != len(expected):
        raise ValueError(
            f"{name} has shape {tuple(x.shape)}, expected {len(expected)} dimensions: {described}"
        )
    if any(e is not None and s != e for s, e in zip(x.shape, expected, strict=True)):
        wanted = tuple(s if e is None else e for s, e in zip(x.shape, expected, strict=True))
        raise ValueError(f"{name} has shape {tuple(x.shape)}, expected {wanted}: {described}")


def frequencies(name: str, x: object, pairs: int | None = None) -> Tensor:
    """RoPE's frequencies: a ``(d/2,)`` floating tensor of finite, positive values, one per pair
    (``pairs`` of them, when given)."""
    tensor(name, x)
    if x.ndim != 1 or len(x) == 0 or (pairs is not None and len(x) != pairs):
        wanted = f"({pairs},)" if pairs is not None else "(d/2,) with d/2 >= 1"
        raise ValueError(
            f"{name} has shape {tuple(x.shape)}, expected {wanted}: one frequency per pair of features"
        )
    if not bool(torch.isfinite(x).all() and (x > 0).all()):
        raise ValueError(f"{name} must be finite and positive (radians per position), got {x.tolist()}")
    return x


def same_dtype(**tensors: Tensor) -> None:
    """All the named tensors share one dtype."""
    dtypes = {t.dtype for t in tensors.values()}
    if len(dtypes) > 1:
        listed = ", ".join(f"{name} {t.dtype}" for name, t in tensors.items())
        raise TypeError(f"{' and '.join(tensors)} must share a dtype; got {listed}")


def mask(attn_mask: object, scores_shape: Sequence[int]) -> Tensor:
    """A floating or boolean mask that broadcasts to the scores' ``(..., L, S)`` without enlarging them."""
    tensor("attn_mask", attn_mask, allow_bool=True)
    try:
        broadcast = torch.broadcast_shapes(attn_mask.shape, tuple(scores_shape))
    except RuntimeError:
        broadcast = None
    if broadcast != torch.Size(scores_shape):
        raise ValueError(
            f"attn_mask has shape {tuple(attn_mask.shape)}, which does not broadcast "
            f"to the scores' shape (..., L, S) = {tuple(scores_shape)}"
        )
    return attn_mask


def attention_inputs(
    query: object, key: object, value: object, attn_mask: object, is_causal: bool
) -> tuple[list[int], int, int, int]:
    """The arguments of an attention function; returns ``(batch, L, S, d_k)``."""
    for name, x in (("query", query), ("key", key), ("value", value)):
        tensor(name, x, min_ndim=2)
    same_dtype(query=query, key=key, value=value)
    *batch, L, d_k = query.shape
    S = key.shape[-2]
    shape("key", key, (*batch, S, d_k), "(..., S, d_k) with query's ... and d_k")
    shape("value", value, (*batch, S, None), "(..., S, d_v) with key's ... and S")
    if is_causal and attn_mask is not None:
        raise ValueError("pass either attn_mask or is_causal=True, not both; combine masks with &")
    if attn_mask is not None:
        mask(attn_mask, (*batch, L, S))
    return batch, L, S, d_k


class TiledPass(NamedTuple):
    """The checked arguments of a tiled pass (`attn_ref.tiled.tiled_attention`, and the backward
    pass's), and what follows from them."""

    batch: list[int]
    L: int
    S: int
    d_k: int
    d_v: int
    dropout_p: float
    dtype: torch.dtype  # the compute dtype
    scale: float
    attn_mask: Tensor | None  # a view with a dimension for each of the scores' (size 1 where it broadcasts)


def tiled_pass(
    query: object,
    key: object,
    value: object,
    attn_mask: object,
    is_causal: bool,
    scale: float | None,
    dropout_p: object,
) -> TiledPass:
    """`attention_inputs` and a dropout probability, read for a pass that slices them tile by tile."""
    batch, L, S, d_k = attention_inputs(query, key, value, attn_mask, is_causal)
    dropout_p = probability("dropout_p", dropout_p)
    scale = 1.0 / math.sqrt(d_k) if scale is None else scale
    if attn_mask is not None:
        attn_mask = attn_mask.reshape((1,) * (len(batch) + 2 - attn_mask.ndim) + tuple(attn_mask.shape))
    dtype = compute_dtype(query.dtype)
    return TiledPass(batch, L, S, d_k, value.shape[-1], dropout_p, dtype, scale, attn_mask)


def index_vector(name: str, x: object) -> Tensor:
    """A 1-D integer tensor (positions, request ids), shape ``(n,)``."""
    if not isinstance(x, Tensor) or x.ndim != 1 or x.dtype.is_floating_point or x.dtype == torch.bool:
        got = f"shape {tuple(x.shape)} and dtype {x.dtype}" if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(f"{name} must be a 1-D integer tensor of shape (n,), got {got}")
    return x


def same_length(**vectors: Tensor) -> None:
    """All the named 1-D tensors have one length."""
    if len({len(v) for v in vectors.values()}) > 1:
        listed = ", ".join(f"{name} {tuple(v.shape)}" for name, v in vectors.items())
        raise ValueError(f"{' and '.join(vectors)} must have the same length; got {listed}")


def log_decay(name: str, x: Tensor) -> Tensor:
    """A log-decay: finite and ``<= 0`` everywhere, so that its exponential lies in ``(0, 1]``."""
    bad = ~torch.isfinite(x) | (x > 0)
    if bool(bad.any()):
        raise ValueError(
            f"{name} must be finite and <= 0 (the log of a decay in (0, 1]), got {x[bad].flatten()[0].item()}"
        )
    return x


def boolean(name: str, x: object, *, min_ndim: int = 0) -> Tensor:
    """A boolean tensor (a selection, a mask) of at least ``min_ndim`` dimensions."""
    if not isinstance(x, Tensor) or x.dtype != torch.bool:
        got = f"dtype {x.dtype}" if isinstance(x, Tensor) else type(x).__name__
        raise TypeError(f"{name} must be a boolean torch.Tensor, got {got}")
    return _dimensions(name, x, min_ndim)


def fraction(name: str, value: object) -> float:
    """A fraction strictly between 0 and 1, such as the share of a text held out."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value < 1.0:
        raise ValueError(f"{name} must be a number in (0, 1), got {value!r}")
    return float(value)


def ids_below(name: str, x: Tensor, size: int) -> Tensor:
    """Integer ids in ``[0, size)``, such as characters of an alphabet of ``size``."""
    if x.numel() and (x.min() < 0 or x.max() >= size):
        raise ValueError(f"{name} must lie in [0, {size - 1}], got {x.min().item()} .. {x.max().item()}")
    return x
