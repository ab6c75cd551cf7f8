"""A request to a server, and the check every engine of `attn_ref.serving` starts with."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from attn_ref import _validate
from attn_ref.decoder import TinyDecoder

__all__ = ["Request", "check_requests"]


@dataclass(frozen=True)
class Request:
    """One request to a server: a prompt, how many tokens to generate, and when it arrives.

    Attributes:
        prompt: The prompt's token ids, at least one.
        max_new_tokens: Tokens to generate greedily, at least one.
        arrival: The step at which the request reaches the server.
    """

    prompt: tuple[int, ...]
    max_new_tokens: int
    arrival: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "prompt", tuple(self.prompt))
        if not self.prompt or not all(isinstance(t, int) and t >= 0 for t in self.prompt):
            raise ValueError(f"prompt must be a non-empty sequence of token ids >= 0, got {self.prompt!r}")
        _validate.count("max_new_tokens", self.max_new_tokens)
        _validate.count("arrival", self.arrival, minimum=0)

    @property
    def max_length(self) -> int:
        """Positions the request can occupy: the prompt and every new token but the last."""
        return len(self.prompt) + self.max_new_tokens - 1


def check_requests(requests: Sequence[Request], model: TinyDecoder) -> list[Request]:
    """``requests`` as a list, each checked against ``model``'s context and vocabulary.

    Every engine of `attn_ref.serving` starts with it, so that a request
    that cannot fit is refused before any work, naming the request.

    Args:
        requests: The requests, in order.
        model: The decoder that is to serve them.

    Returns:
        The requests, as a list.

    Raises:
        TypeError: ``requests`` is empty or holds something other than a `Request`.
        ValueError: A request needs more positions than ``model.context_length``,
            or its prompt holds a token id outside the vocabulary.

    Examples:
        >>> model = TinyDecoder(
        ...     vocab_size=10, context_length=8, embed_dim=16,
        ...     num_layers=1, num_heads=4,
        ... )
        >>> check_requests((Request((1, 2, 3), 5),), model)
        [Request(prompt=(1, 2, 3), max_new_tokens=5, arrival=0)]
    """
    requests = list(requests)
    if not requests or not all(isinstance(r, Request) for r in requests):
        raise TypeError(f"requests must be a non-empty sequence of Request, got {requests!r}")
    vocab = model.head.out_features
    for i, r in enumerate(requests):
        if r.max_length > model.context_length:
            raise ValueError(
                f"request {i} needs {r.max_length} positions (prompt of {len(r.prompt)}, "
                f"{r.max_new_tokens} new tokens), more than the model's context_length={model.context_length}"
            )
        if max(r.prompt) >= vocab:
            raise ValueError(f"request {i}'s prompt has token id {max(r.prompt)}, vocab_size is {vocab}")
    return requests
