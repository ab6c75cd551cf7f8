"""WCAG 2.1's contrast ratio, written out from its definition as the independent check of every
colour the site draws: plots, the playgrounds' cells, code in both schemes."""

from __future__ import annotations

import re

from matplotlib.colors import to_rgba


def srgb(css: str) -> tuple[int, ...]:
    """An ``rgb(r, g, b)`` or ``rgba(r, g, b, a)`` colour as its three 8-bit channels."""
    return tuple(int(float(c)) for c in re.findall(r"[\d.]+", css)[:3])


def on(css: str, background: str) -> tuple[float, ...]:
    """The colour ``css`` as seen over the opaque ``background`` (both CSS ``rgb``/``rgba``), as
    three channels in [0, 1]: a translucent colour is mixed with what is behind it."""
    channels = [float(c) for c in re.findall(r"[\d.]+", css)]
    alpha = channels[3] if len(channels) == 4 else 1.0
    behind = srgb(background)
    return tuple((alpha * c + (1 - alpha) * b) / 255 for c, b in zip(channels[:3], behind, strict=True))


def luminance(colour) -> float:
    """WCAG's relative luminance of a colour matplotlib reads."""
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in to_rgba(colour)[:3]]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a, b) -> float:
    """WCAG's contrast ratio of two colours, each anything matplotlib reads (``"#rrggbb"``, three
    channels in [0, 1])."""
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)
