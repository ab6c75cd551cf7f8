r"""Longer than trained: RoPE's frequencies stretched so that a model reads past its training length.

RoPE turns pair $i$ of a query or key at position $p$ by the angle $p\,\theta_i$
(`attn_ref.positional.apply_rotary`, with $\theta_i$ from `attn_ref.positional.rope_frequencies`).
A model trained on $L$ positions has met the angles $0 \le p\,\theta_i < L\,\theta_i$ only.
`wavelengths` and `rotations` say which pairs went all the way round in training. Each method
below returns new frequencies, so that a sequence $s$ times longer (a *factor* $s$) turns the
pairs through angles closer to the ones the model met; pass them to ``apply_rotary(x,
frequencies=...)``:

- `interpolated_frequencies`: position interpolation (Chen et al., 2023), $\theta_i / s$ for
  every pair, the same as dividing the positions by $s$;
- `ntk_aware_frequencies` (`ntk_aware_base`): "NTK-aware" scaling (bloc97, 2023), a larger
  base $b' = b\, s^{d/(d-2)}$ that leaves the fastest pair alone and slows the slowest by $s$;
- `yarn_frequencies` (with its `ramp`) and `yarn_attention_scale`: YaRN (Peng et al., 2023),
  which interpolates by frequency band ("NTK-by-parts") and sharpens the softmax;
- `llama3_frequencies`: the bands of Llama 3.1's ``rope_scaling``: YaRN's rule with other
  bounds and no change to the softmax.

Every function computes in float64.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from attn_ref import _validate
from attn_ref.positional import rope_frequencies

__all__ = [
    "interpolated_frequencies",
    "llama3_frequencies",
    "ntk_aware_base",
    "ntk_aware_frequencies",
    "ramp",
    "rotations",
    "wavelengths",
    "yarn_attention_scale",
    "yarn_frequencies",
]


def wavelengths(frequencies: Tensor) -> Tensor:
    r"""The positions each pair takes to turn once, $\lambda_i = 2\pi / \theta_i$.

    Args:
        frequencies: ``(d/2,)`` positive frequencies $\theta_i$.

    Returns:
        ``(d/2,)`` float64.

    Examples:
        >>> from attn_ref.positional import rope_frequencies
        >>> wavelengths(rope_frequencies(4, base=100.0))
        tensor([ 6.2832, 62.8319], dtype=torch.float64)
    """
    theta = _validate.frequencies("frequencies", frequencies).to(torch.float64)  # (d/2,)
    return 2 * math.pi / theta


def rotations(frequencies: Tensor, length: float) -> Tensor:
    r"""The turns each pair makes over ``length`` positions, $r_i = L / \lambda_i$.

    YaRN's paper calls this ratio $r$ (its equation 17). A pair with $r_i \ge 1$ has been all
    the way round within a training length $L$; a pair with $r_i < 1$ has met part of the
    circle only.

    Args:
        frequencies: ``(d/2,)`` positive frequencies $\theta_i$.
        length: The length $L$, positive.

    Returns:
        ``(d/2,)`` float64.

    Examples:
        >>> from attn_ref.positional import rope_frequencies
        >>> rotations(rope_frequencies(4, base=100.0), length=32)
        tensor([5.0930, 0.5093], dtype=torch.float64)
    """
    length = _validate.number("length", length, 0.0, above=True)
    return length / wavelengths(frequencies)


def interpolated_frequencies(frequencies: Tensor, factor: float) -> Tensor:
    r"""Position interpolation (Chen et al., 2023): every frequency divided by the factor.

    Chen et al. run a model trained on $L$ positions on $L' = sL$ of them by turning position
    $m$ as if it were $m L / L' = m / s$. The angle is $m\,\theta_i$, so dividing the
    positions by $s$ and dividing the frequencies by $s$ are the same thing:

    $$
    \theta_i' = \theta_i / s .
    $$

    Positions $0 \dots sL$ take the angles that $0 \dots L$ took in training, and two
    neighbours now differ by $1/s$ of a step.

    Args:
        frequencies: ``(d/2,)`` positive frequencies, from `attn_ref.positional.rope_frequencies`.
        factor: $s \ge 1$.

    Returns:
        ``(d/2,)`` float64.

    Raises:
        ValueError: ``factor`` is below 1, or ``frequencies`` is not a 1-D tensor of positive
            values.

    Examples:
        >>> from attn_ref.positional import rope_frequencies
        >>> interpolated_frequencies(rope_frequencies(4, base=100.0), factor=4)
        tensor([0.2500, 0.0250], dtype=torch.float64)
    """
    theta = _validate.frequencies("frequencies", frequencies).to(torch.float64)  # (d/2,)
    return theta / _validate.number("factor", factor, 1.0)


def ntk_aware_base(d: int, factor: float, base: float = 10000.0) -> float:
    r"""The larger base of "NTK-aware" scaling (bloc97, 2023), $b' = b\, s^{d/(d-2)}$.

    The fastest pair keeps $\theta_0 = b'^{\,0} = 1$ whatever the base. The exponent is chosen
    so that the slowest pair, $i = d/2 - 1$, is slowed down by exactly $s$, as in position
    interpolation (YaRN's paper, appendix A.1):

    $$
    b'^{-(d-2)/d} = \frac{b^{-(d-2)/d}}{s}
    \iff
    b' = b\, s^{d/(d-2)} .
    $$

    Args:
        d: Features per query or key, even, at least 4 (two pairs).
        factor: $s \ge 1$.
        base: RoPE's base $b$, above 1.

    Returns:
        $b'$.

    Raises:
        ValueError: ``d`` is not an even int of at least 4, ``factor`` is below 1, or
            ``base`` is not above 1.

    Examples:
        >>> round(ntk_aware_base(128, factor=8, base=10000.0))  # Llama 2's heads
        82685
    """
    _validate.feature_pairs("d", d, minimum=4)
    factor = _validate.number("factor", factor, 1.0)
    base = _validate.number("base", base, 1.0, above=True)
    return base * factor ** (d / (d - 2))


def ntk_aware_frequencies(d: int, factor: float, base: float = 10000.0) -> Tensor:
    r"""RoPE's frequencies with the NTK-aware base $b'$ of `ntk_aware_base`.

    $$
    \theta_i' = b'^{-2i/d} = \theta_i \, s^{-2i/(d-2)} :
    $$

    pair $i$ is slowed down by $s^{2i/(d-2)}$: pair 0 not at all, the last pair by $s$, and
    the pairs between by a factor that grows geometrically.

    Args:
        d: Features per query or key, even, at least 4.
        factor: $s \ge 1$.
        base: RoPE's base $b$, above 1.

    Returns:
        ``(d/2,)`` float64.

    Raises:
        ValueError: As `ntk_aware_base`.

    Examples:
        >>> ntk_aware_frequencies(4, factor=4, base=100.0)  # b' = 100 * 4**2
        tensor([1.0000, 0.0250], dtype=torch.float64)
    """
    return rope_frequencies(d, ntk_aware_base(d, factor, base))


def ramp(r: Tensor, low: float, high: float) -> Tensor:
    r"""YaRN's ramp $\gamma(r)$ (Peng et al., 2023, equation 18): how much of a pair to keep.

    $$
    \gamma(r) = \begin{cases}
    0 & r < \alpha \\
    \dfrac{r - \alpha}{\beta - \alpha} & \alpha \le r \le \beta \\
    1 & r > \beta
    \end{cases}
    $$

    with $\alpha$ = ``low``, $\beta$ = ``high`` and $r$ the turns of a pair within the
    training length (`rotations`).

    Args:
        r: Turns, any shape.
        low: $\alpha > 0$.
        high: $\beta > \alpha$.

    Returns:
        $\gamma(r)$, the shape and dtype of ``r``.

    Raises:
        ValueError: ``low`` is not below ``high``, or either is not a positive number.

    Examples:
        >>> ramp(torch.tensor([0.5, 1.0, 2.5, 4.0, 9.0]), low=1.0, high=4.0)
        tensor([0.0000, 0.0000, 0.5000, 1.0000, 1.0000])
    """
    _validate.tensor("r", r)
    low, high = _validate.band("low", low, "high", high)
    return ((r - low) / (high - low)).clamp(0.0, 1.0)


def yarn_frequencies(
    frequencies: Tensor,
    factor: float,
    original_length: float,
    *,
    alpha: float = 1.0,
    beta: float = 32.0,
    by: str = "pairs",
    truncate: bool | None = None,
) -> Tensor:
    r"""YaRN's "NTK-by-parts" frequencies (Peng et al., 2023, equation 20).

    Each pair keeps its frequency, is interpolated as in position interpolation, or takes a mix
    of the two, by the turns $r_i$ it makes within the training length $L$ (`rotations`):

    $$
    \begin{aligned}
    \theta_i' &= (1 - \gamma_i)\,\frac{\theta_i}{s} + \gamma_i\,\theta_i, \\
    r_i &= L\,\theta_i / 2\pi .
    \end{aligned}
    $$

    A pair that turns more than $\beta$ times within $L$ is kept ($\gamma_i = 1$): every angle
    it can take was met, many times. A pair that turns fewer than $\alpha$ times is
    interpolated ($\gamma_i = 0$). Between them, the weight $\gamma_i$ ramps from 0 to 1. How
    it ramps depends on ``by``:

    - ``"pairs"`` (the default): linearly in the pair index $i$, between the fractional
      indices where $r = \beta$ and where $r = \alpha$ (clamped to $[0, d - 1]$, widened by
      0.001 when they meet). This is what ships: the authors' code, Hugging Face
      Transformers, gpt-oss. Since $r_i$ falls geometrically with $i$, it is a ramp linear
      in $\ln r$. ``truncate`` (``True`` unless given, as in the authors' code and
      Transformers) first rounds the two indices outwards; gpt-oss does not.
    - ``"rotations"``: linearly in $r$, the paper's `ramp` (its equation 18).

    The two agree outside the ramp and differ inside it.

    Args:
        frequencies: ``(d/2,)`` positive frequencies, from `attn_ref.positional.rope_frequencies`;
            with ``by="pairs"``, a geometric sequence of at least two, as RoPE's are.
        factor: $s \ge 1$.
        original_length: The training length $L$, positive.
        alpha: $\alpha > 0$, the turns below which a pair is interpolated.
        beta: $\beta > \alpha$, the turns above which a pair is kept.
        by: ``"pairs"`` or ``"rotations"``.
        truncate: Round the ramp's ends outwards to whole pairs (``by="pairs"`` only).

    Returns:
        ``(d/2,)`` float64.

    Raises:
        ValueError: ``factor`` below 1, ``alpha`` not below ``beta``, an unknown ``by``,
            ``truncate=True`` with ``by="rotations"``, or frequencies that are not
            geometric with ``by="pairs"``.

    Examples:
        Llama 2 (128 features per head, base 10000, 4096 positions) stretched 16
        times: its fastest pairs are kept, its slowest divided by 16.

        >>> from attn_ref.positional import rope_frequencies
        >>> theta = rope_frequencies(128, base=10000.0)
        >>> kept = yarn_frequencies(theta, 16, 4096) / theta
        >>> kept[:3].tolist(), kept[-3:].tolist()
        ([1.0, 1.0, 1.0], [0.0625, 0.0625, 0.0625])
    """
    theta = _validate.frequencies("frequencies", frequencies).to(torch.float64)  # (d/2,)
    factor = _validate.number("factor", factor, 1.0)
    alpha, beta = _validate.band("alpha", alpha, "beta", beta)
    _validate.one_of("by", by, ("pairs", "rotations"))
    r = rotations(theta, original_length)  # (d/2,)
    if by == "rotations":
        if truncate:
            raise ValueError(
                "truncate rounds the pair indices of by='pairs'; it does not apply to by='rotations'"
            )
        gamma = ramp(r, alpha, beta)  # (d/2,)
    else:
        step = _geometric_step(theta)  # ln(theta_{i+1} / theta_i) = ln(r_{i+1} / r_i)
        # ln r_i = ln r_0 + i * step: the fractional pair indices where r = beta and r = alpha
        first, last = (math.log(turns / r[0].item()) / step for turns in (beta, alpha))
        if truncate is None or truncate:
            first, last = math.floor(first), math.ceil(last)
        first, last = max(first, 0.0), min(last, 2.0 * len(theta) - 1)  # [0, d - 1], as shipped
        last = last + 1e-3 if last == first else last
        index = torch.arange(len(theta), dtype=torch.float64)  # (d/2,)
        gamma = 1.0 - ((index - first) / (last - first)).clamp(0.0, 1.0)  # (d/2,)
    return (1 - gamma) * theta / factor + gamma * theta


def yarn_attention_scale(factor: float) -> float:
    r"""YaRN's factor on queries and keys, $\sqrt{1/t} = 0.1 \ln s + 1$ (Peng et al., eq. 22).

    YaRN divides the logits by a temperature $t$,
    $\operatorname{softmax}\bigl(q_m^\top k_n / (t \sqrt{d})\bigr)$, with
    $\sqrt{1/t} = 0.1 \ln s + 1$. Multiplying both the query and the key by $\sqrt{1/t}$
    does the same: the logits grow by $1/t = (0.1 \ln s + 1)^2$, which sharpens every row of
    attention weights. It is 1 for $s = 1$.

    Args:
        factor: $s \ge 1$.

    Returns:
        $\sqrt{1/t}$.

    Raises:
        ValueError: ``factor`` is below 1.

    Examples:
        >>> round(yarn_attention_scale(8), 4)  # the paper's equation 25: about 1.208
        1.2079
    """
    return 0.1 * math.log(_validate.number("factor", factor, 1.0)) + 1.0


def llama3_frequencies(
    frequencies: Tensor,
    factor: float = 8.0,
    original_length: float = 8192,
    *,
    low_freq_factor: float = 1.0,
    high_freq_factor: float = 4.0,
) -> Tensor:
    r"""Llama 3.1's frequencies, from its ``rope_scaling`` configuration.

    Meta's reference code (``apply_scaling``) sorts the pairs by wavelength
    $\lambda_i = 2\pi/\theta_i$ against the original context $L$:

    - $\lambda_i < L / h$ (``high_freq_factor`` $h$): kept;
    - $\lambda_i > L / l$ (``low_freq_factor`` $l$): divided by the factor $s$;
    - in between, the mix $(1 - \sigma)\,\theta_i / s + \sigma\,\theta_i$ with
      $\sigma = (L/\lambda_i - l) / (h - l)$.

    $L / \lambda_i$ is YaRN's $r_i$, so this is `yarn_frequencies` with $\alpha = l$,
    $\beta = h$ and ``by="rotations"``, without YaRN's change to the softmax; it is computed
    that way.

    Args:
        frequencies: ``(d/2,)`` positive frequencies, from `attn_ref.positional.rope_frequencies`.
        factor: $s \ge 1$; 8 in Llama 3.1.
        original_length: $L$ (``original_max_position_embeddings``); 8192 in Llama 3.1.
        low_freq_factor: $l > 0$; 1 in Llama 3.1.
        high_freq_factor: $h > l$; 4 in Llama 3.1.

    Returns:
        ``(d/2,)`` float64.

    Raises:
        ValueError: ``factor`` below 1, or ``low_freq_factor`` not below ``high_freq_factor``.

    Examples:
        >>> from attn_ref.positional import rope_frequencies
        >>> theta = rope_frequencies(128, base=500000.0)  # Llama 3.1 8B
        >>> kept = llama3_frequencies(theta) / theta
        >>> int((kept == 1).sum()), int((kept == 1 / 8).sum())  # kept, divided
        (29, 29)
    """
    low, high = _validate.band("low_freq_factor", low_freq_factor, "high_freq_factor", high_freq_factor)
    return yarn_frequencies(frequencies, factor, original_length, alpha=low, beta=high, by="rotations")


def _geometric_step(theta: Tensor) -> float:
    """The log of the common ratio of RoPE-like frequencies, which ``by="pairs"`` needs."""
    steps = (theta[1:] / theta[:-1]).log()  # (d/2 - 1,)
    if len(steps) == 0 or not torch.allclose(steps, steps[0].expand_as(steps), rtol=1e-9, atol=0.0):
        raise ValueError(
            "frequencies must be a geometric sequence of at least two, as rope_frequencies gives, "
            f"for by='pairs'; got {theta.tolist()}"
        )
    return steps[0].item()
