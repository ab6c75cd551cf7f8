r"""Where a token sits: sinusoidal encodings, rotary embeddings (RoPE) and ALiBi biases.

- `sinusoidal_positional_encoding`: a fixed vector added to each token's embedding
  (Vaswani et al., 2017, section 3.5).
- `apply_rotary`: queries and keys rotated pair by pair by an angle proportional to
  their position (Su et al., 2021, RoFormer, equations 15 and 34), at the frequencies of
  `rope_frequencies` or at any others (`attn_ref.rope_scaling` stretches them).
- `alibi_slopes`, `alibi_bias`: a per-head penalty, linear in the distance between
  query and key, added to the scores (Press et al., 2022, "Train Short, Test Long").
"""

from __future__ import annotations

import torch
from torch import Tensor

from attn_ref import _validate

__all__ = ["alibi_bias", "alibi_slopes", "apply_rotary", "rope_frequencies", "sinusoidal_positional_encoding"]


def sinusoidal_positional_encoding(num_positions: int, embed_dim: int, base: float = 10000.0) -> Tensor:
    r"""The fixed encoding that tells attention where each token sits.

    $$
    PE_{p,\,2i} = \sin\!\left(\frac{p}{b^{2i/d}}\right), \qquad
    PE_{p,\,2i+1} = \cos\!\left(\frac{p}{b^{2i/d}}\right)
    $$

    with $b = 10000$ and $d$ = ``embed_dim``. Each pair of columns is a sine
    and cosine of one frequency, from one turn every $2\pi$ positions down
    to one turn every $2\pi b$ positions.

    Args:
        num_positions: Number of positions $T$.
        embed_dim: Width of the encoding, the model's $C$; an odd width drops the last cosine.
        base: The constant $b$.

    Returns:
        A ``(num_positions, embed_dim)`` float32 tensor, to be added to the embeddings.

    Examples:
        >>> sinusoidal_positional_encoding(3, 4)
        tensor([[ 0.0000,  1.0000,  0.0000,  1.0000],
                [ 0.8415,  0.5403,  0.0100,  0.9999],
                [ 0.9093, -0.4161,  0.0200,  0.9998]])
    """
    _validate.count("num_positions", num_positions)
    _validate.count("embed_dim", embed_dim)
    positions = torch.arange(num_positions, dtype=torch.float64)[:, None]  # (T, 1)
    even = torch.arange(0, embed_dim, 2, dtype=torch.float64)  # (ceil(d/2),)
    angles = positions / base ** (even / embed_dim)  # (T, ceil(d/2))
    encoding = torch.empty(num_positions, embed_dim, dtype=torch.float64)
    encoding[:, 0::2] = torch.sin(angles)
    encoding[:, 1::2] = torch.cos(angles[:, : embed_dim // 2])
    return encoding.float()


def rope_frequencies(d: int, base: float = 10000.0) -> Tensor:
    r"""RoPE's frequency of each pair of features, in radians per position.

    $$
    \theta_i = b^{-2i/d}, \qquad i = 0, 1, \dots, \tfrac{d}{2} - 1,
    $$

    from $\theta_0 = 1$ (one turn every $2\pi$ positions) down to $b^{-(d-2)/d}$.

    Args:
        d: Features per query or key, even.
        base: The constant $b$, above 1.

    Returns:
        A ``(d/2,)`` float64 tensor, the fastest pair first.

    Raises:
        ValueError: ``d`` is not an even int of at least 2, or ``base`` is not a number above 1.

    Examples:
        >>> rope_frequencies(8, base=10000.0)
        tensor([1.0000, 0.1000, 0.0100, 0.0010], dtype=torch.float64)
    """
    _validate.feature_pairs("d", d, minimum=2)
    base = _validate.number("base", base, 1.0, above=True)
    return base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)


def apply_rotary(
    x: Tensor,
    positions: Tensor | None = None,
    *,
    base: float = 10000.0,
    frequencies: Tensor | None = None,
    interleaved: bool = True,
) -> Tensor:
    r"""Rotary position embedding (RoPE): rotate each pair of features by its position.

    Feature pair $i$ of the vector at position $p$ is rotated by the angle
    $p\,\theta_i$, with one frequency per pair,

    $$
    \theta_i = b^{-2i/d}, \qquad i = 0, 1, \dots, \tfrac{d}{2} - 1,
    $$

    $b$ = ``base``, $d$ the last dimension of ``x`` (`rope_frequencies`), or the
    ``frequencies`` given instead. A pair $(u, v)$ becomes

    $$
    (u, v) \;\mapsto\; (u \cos p\theta_i - v \sin p\theta_i,\;\; u \sin p\theta_i + v \cos p\theta_i).
    $$

    Applied to queries and keys, the score of a query at position $m$ and a key
    at position $n$ depends on the positions only through $n - m$, because the
    two rotations compose into one by the difference of their angles; and a
    rotation keeps every vector's norm.

    Which features form pair $i$ is a convention:

    - ``interleaved=True``: features $(2i, 2i+1)$, as in the paper (Su et al.,
      2021, equation 34) and in Meta's Llama reference code, which views those
      pairs as complex numbers.
    - ``interleaved=False``: features $(i, i + d/2)$, the "rotate half" layout of
      GPT-NeoX and Hugging Face Transformers.

    Both are RoPE, and they agree up to one fixed permutation of the features;
    weights trained with one layout give different scores under the other.

    Args:
        x: ``(..., T, d)`` queries or keys, floating, with an even ``d``.
        positions: Position of each of the ``T`` vectors: ``(T,)``, or any
            shape that broadcasts to ``x.shape[:-1]`` without enlarging it (such
            as ``(B, 1, T)`` for ``(B, H, T, d)`` inputs with one offset per
            sequence). Integer or floating. Defaults to ``0, 1, ..., T - 1``;
            pass ``torch.arange(start, start + T)`` for new tokens after a
            KV cache of ``start`` tokens.
        base: The constant $b$ of the frequencies, above 1.
        frequencies: ``(d/2,)`` positive frequencies $\theta_i$ to use instead of
            those of ``base``, such as the stretched ones of `attn_ref.rope_scaling`.
        interleaved: Pair features $(2i, 2i+1)$ when ``True``, $(i, i + d/2)$
            when ``False``.

    Returns:
        A tensor of the shape and dtype of ``x``. Angles are computed in float64;
        half-precision inputs are rotated in float32 and cast back.

    Raises:
        TypeError: ``x`` is not a floating tensor, or ``positions`` is not an
            integer or floating tensor.
        ValueError: ``d`` is odd, ``positions`` has a shape that does not fit,
            ``base`` is not above 1, or ``frequencies`` is not ``(d/2,)`` and positive.

    Examples:
        With $d = 2$ there is one pair and $\theta_0 = 1$: the vector $(1, 0)$
        at position $p$ turns by $p$ radians.

        >>> x = torch.tensor([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])  # T = 3, d = 2
        >>> apply_rotary(x)
        tensor([[ 1.0000,  0.0000],
                [ 0.5403,  0.8415],
                [-0.4161,  0.9093]])

        Norms are unchanged, and the two layouts differ by a permutation of the
        features: $(0, 1, 2, 3)$ pairs as $(0, 1), (2, 3)$ in one layout and as
        $(0, 2), (1, 3)$ in the other.

        >>> x = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
        >>> p = torch.tensor([5])
        >>> apply_rotary(x, p).norm(), x.norm()
        (tensor(5.4772), tensor(5.4772))
        >>> perm = torch.tensor([0, 2, 1, 3])
        >>> permuted = apply_rotary(x[..., perm], p, interleaved=False)
        >>> torch.allclose(apply_rotary(x, p)[..., perm], permuted)
        True

        Frequencies given directly: halving them turns position 10 as far as
        RoPE's own turn position 5.

        >>> half = rope_frequencies(4) / 2
        >>> at_10 = apply_rotary(x, torch.tensor([10]), frequencies=half)
        >>> torch.allclose(at_10, apply_rotary(x, torch.tensor([5])))
        True
    """
    _validate.tensor("x", x, min_ndim=2)
    d = x.shape[-1]
    if d % 2:
        raise ValueError(
            f"x has shape {tuple(x.shape)}: its last dimension d = {d} must be even, to form pairs"
        )
    positions = _check_positions(positions, x)
    if frequencies is None:
        theta = rope_frequencies(d, base)  # (d/2,)
    else:
        theta = _validate.frequencies("frequencies", frequencies, d // 2)  # (d/2,)
    theta = theta.to(device=x.device, dtype=torch.float64)
    angles = positions.to(torch.float64)[..., None] * theta  # (..., T, d/2)
    compute_dtype = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    cos, sin = angles.cos().to(compute_dtype), angles.sin().to(compute_dtype)  # (..., T, d/2) each
    xc = x.to(compute_dtype)
    if interleaved:
        pairs = xc.unflatten(-1, (d // 2, 2))  # (..., T, d) -> (..., T, d/2, 2)
        u, v = pairs[..., 0], pairs[..., 1]  # (..., T, d/2) each
        rotated = torch.stack((u * cos - v * sin, u * sin + v * cos), dim=-1)  # (..., T, d/2, 2)
        out = rotated.flatten(-2)  # (..., T, d/2, 2) -> (..., T, d)
    else:
        u, v = xc[..., : d // 2], xc[..., d // 2 :]  # (..., T, d/2) each
        out = torch.cat((u * cos - v * sin, u * sin + v * cos), dim=-1)  # (..., T, d)
    return out.to(x.dtype)


def alibi_slopes(num_heads: int) -> Tensor:
    r"""The fixed slope of each head's ALiBi penalty (Press et al., 2022, section 3).

    For $n$ heads, $n$ a power of two, the slopes are the geometric sequence
    that starts at $2^{-8/n}$ and has that same ratio:

    $$
    m_h = 2^{-8 (h + 1) / n}, \qquad h = 0, 1, \dots, n - 1,
    $$

    so 8 heads get $\tfrac{1}{2}, \tfrac{1}{4}, \dots, \tfrac{1}{256}$. The paper
    trains only such head counts. For other $n$ this follows the authors'
    reference code (``get_slopes`` in ``fairseq/models/transformer.py`` of
    ofirpress/attention_with_linear_biases): the slopes of the largest power
    of two $c < n$, then every other slope of the $2c$-head sequence (its 1st,
    3rd, 5th, ...) until there are $n$.

    Args:
        num_heads: Number of heads $n \ge 1$.

    Returns:
        A ``(num_heads,)`` float32 tensor, steepest slope first for a power of two.

    Raises:
        ValueError: ``num_heads`` is not an int of at least 1.

    Examples:
        >>> alibi_slopes(8)
        tensor([0.5000, 0.2500, 0.1250, 0.0625, 0.0312, 0.0156, 0.0078, 0.0039])
        >>> alibi_slopes(6)  # the 4-head slopes, then the 8-head ones' 1st and 3rd
        tensor([0.2500, 0.0625, 0.0156, 0.0039, 0.5000, 0.1250])
    """
    _validate.count("num_heads", num_heads)
    c = 1 << (num_heads.bit_length() - 1)  # the largest power of two <= num_heads
    slopes = [2.0 ** (-8.0 * (h + 1) / c) for h in range(c)]
    finer = [2.0 ** (-8.0 * (h + 1) / (2 * c)) for h in range(2 * c)]  # the 2c-head sequence
    slopes += finer[0::2][: num_heads - c]
    return torch.tensor(slopes, dtype=torch.float32)


def alibi_bias(num_heads: int, L: int, S: int | None = None) -> Tensor:
    r"""ALiBi's additive bias: each head penalises a key by its distance to the query.

    $$
    \text{bias}_{h, i, j} = -m_h \, \lvert i - j \rvert,
    $$

    with $m_h$ from `alibi_slopes`. Add it to the scaled scores, as a floating
    ``attn_mask``, so that the softmax sees $q_i \cdot k_j / \sqrt{d_k} - m_h |i - j|$.

    The paper trains causal language models, where query $i$ sees keys
    $j \le i$ only and the bias is $-m_h (i - j)$ (its equation for
    $\operatorname{softmax}(q_i K^\top + m \cdot [-(i-1), \dots, -1, 0])$).
    Keys after the query do not occur there: combine this bias with a causal
    mask, as in the example below. Without one, keys after the query get the
    mirror-image penalty $-m_h (j - i)$, the symmetric form the authors suggest
    for encoders (issue #5 of ofirpress/attention_with_linear_biases). The
    reference code adds $m_h \, j$ instead, which differs from $-m_h (i - j)$ by
    $m_h \, i$, a constant along each row, and the softmax ignores constants
    added to a row; so for the keys a causal mask leaves, both give the same
    weights.

    Query $i$ and key $j$ sit at positions $i$ and $j$, the alignment of
    `causal_mask`. For $L$ new queries that follow a cache (queries at
    positions $S - L, \dots, S - 1$), take ``alibi_bias(H, S)[:, -L:]``.

    Args:
        num_heads: Number of heads $H \ge 1$.
        L: Number of queries, at least 1.
        S: Number of keys, at least 1; defaults to ``L``.

    Returns:
        A ``(num_heads, L, S)`` float32 tensor, broadcastable to the
        ``(B, H, L, S)`` scores.

    Raises:
        ValueError: A size is not an int of at least 1.

    Examples:
        >>> bias = alibi_bias(2, 3)  # slopes 1/16 and 1/256
        >>> bias[0]
        tensor([[ 0.0000, -0.0625, -0.1250],
                [-0.0625,  0.0000, -0.0625],
                [-0.1250, -0.0625,  0.0000]])

        With a causal mask, as a model that predicts the next token uses it:

        >>> from attn_ref.masks import causal_mask
        >>> bias.masked_fill(~causal_mask(3), float("-inf"))[0]
        tensor([[ 0.0000,    -inf,    -inf],
                [-0.0625,  0.0000,    -inf],
                [-0.1250, -0.0625,  0.0000]])
    """
    _validate.count("L", L)
    S = _validate.count("S", L if S is None else S)
    slopes = alibi_slopes(num_heads)  # (H,)
    distance = (torch.arange(L)[:, None] - torch.arange(S)[None, :]).abs()  # (L, S)
    return slopes[:, None, None] * -distance  # (H, 1, 1) * (L, S) -> (H, L, S)


def _check_positions(positions: Tensor | None, x: Tensor) -> Tensor:
    """``positions`` as given, or ``0..T-1``, once it is checked to fit ``x`` of shape ``(..., T, d)``."""
    T = x.shape[-2]
    if positions is None:
        return torch.arange(T, device=x.device)  # (T,)
    if not isinstance(positions, Tensor):
        raise TypeError(f"positions must be a torch.Tensor or None, got {type(positions).__name__}")
    if positions.dtype == torch.bool or positions.dtype.is_complex:
        raise TypeError(f"positions must have an integer or floating dtype, got {positions.dtype}")
    try:
        fits = torch.broadcast_shapes(positions.shape, x.shape[:-1]) == x.shape[:-1]
    except RuntimeError:
        fits = False
    if positions.ndim == 0 or positions.shape[-1] != T or not fits:
        raise ValueError(
            f"positions has shape {tuple(positions.shape)}, expected (T,) = ({T},) or a shape ending in "
            f"T that broadcasts to x's (..., T) = {tuple(x.shape[:-1])}"
        )
    return positions
