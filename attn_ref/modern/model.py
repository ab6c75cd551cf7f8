r"""A layer and a decoder with today's changes, and the helpers that train and measure them.

`ModernAttention` is causal multi-head attention with, each optional: QK-norm, rotary
positions with the layer's own base, a softcap on the scores, a sliding window, a sink
logit per head and an output gate. `ModernDecoder` stacks it by a layer schedule
(`attn_ref.modern.tile_layer_types`); `generate` decodes greedily, with or without a
`attn_ref.modern.ScheduleCache`. `train_repeats` trains a decoder on repeating random
tokens (the induction task) and records what the pages plot; `no_match_queries` and
`first_position_mass` measure the attention sink.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from attn_ref import _validate
from attn_ref.cache import KVCache
from attn_ref.masks import causal_mask, sliding_window_mask
from attn_ref.modern.logits import softcap
from attn_ref.modern.schedules import FULL, SLIDING, ScheduleCache, tile_layer_types
from attn_ref.modern.sinks import output_gate, sink_softmax
from attn_ref.multihead import merge_heads, repeat_kv_heads, split_heads
from attn_ref.positional import apply_rotary

__all__ = [
    "GATES",
    "History",
    "ModernAttention",
    "ModernDecoder",
    "first_position_mass",
    "generate",
    "no_match_queries",
    "train_repeats",
]

GATES = (None, "head", "elementwise")


class ModernAttention(nn.Module):
    r"""Causal multi-head self-attention with the changes of today's open models, each optional.

    In order: project to queries, keys and values; `attn_ref.modern.qk_norm`
    on queries and keys (``qk_norm=True``, gains shared by the heads, as in
    Gemma 3); rotary positions with the layer's own base (``rope_base``);
    scores capped by `attn_ref.modern.softcap` (``softcap``); a causal mask,
    within the last ``window`` positions if given; a softmax with a learned
    sink logit per head (``sink=True``, `attn_ref.modern.sink_softmax`);
    each head's output times a gate (``gate``, `attn_ref.modern.output_gate`:
    ``"head"``, or ``"elementwise"`` as in Qwen3-Next); merged and projected.

    Args:
        embed_dim: Model width ``C``.
        num_heads: Query heads ``H``; must divide ``embed_dim``.
        num_kv_heads: Key/value heads ``H_kv``; must divide ``num_heads``.
        window: Positions a query sees, itself included; ``None`` for all.
        rope_base: Base of the rotary frequencies; ``None`` for none.
        sink: Learn one sink logit per head.
        gate: ``None``, ``"head"`` or ``"elementwise"``.
        softcap: Cap $c$ of the scaled scores; ``None`` for none.
        qk_norm: Normalize queries and keys.
        bias: Biases on the four projections.

    Attributes:
        max_logit: The largest scaled score (before any cap) of the last
            call, detached: what a training run watches.

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> layer = ModernAttention(8, num_heads=2, sink=True, gate="head")
        >>> out, w = layer(torch.randn(1, 5, 8))
        >>> out.shape, w.shape
        (torch.Size([1, 5, 8]), torch.Size([1, 2, 5, 5]))
        >>> bool((w.sum(-1) < 1).all())  # the sink took some weight
        True
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        *,
        num_kv_heads: int | None = None,
        window: int | None = None,
        rope_base: float | None = None,
        sink: bool = False,
        gate: str | None = None,
        softcap: float | None = None,
        qk_norm: bool = False,
        bias: bool = False,
    ) -> None:
        super().__init__()
        _validate.counts(embed_dim=embed_dim, num_heads=num_heads)
        num_kv_heads = num_heads if num_kv_heads is None else _validate.count("num_kv_heads", num_kv_heads)
        _validate.divides("num_heads", num_heads, "embed_dim", embed_dim)
        _validate.divides("num_kv_heads", num_kv_heads, "num_heads", num_heads)
        self.gate = _validate.one_of("gate", gate, GATES)
        self.embed_dim, self.num_heads, self.num_kv_heads = embed_dim, num_heads, num_kv_heads
        self.head_dim = embed_dim // num_heads
        self.window = None if window is None else _validate.count("window", window)
        self.rope_base = (
            None if rope_base is None else _validate.number("rope_base", rope_base, 0, above=True)
        )
        if self.rope_base is not None and self.head_dim % 2:
            raise ValueError(f"rotary positions need an even head_dim, got {self.head_dim}")
        self.softcap = None if softcap is None else _validate.number("softcap", softcap, 0, above=True)
        kv_dim = num_kv_heads * self.head_dim
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(embed_dim, kv_dim, bias=bias)
        self.v_proj = nn.Linear(embed_dim, kv_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.sink = nn.Parameter(torch.zeros(num_heads)) if sink else None
        gate_width = {None: 0, "head": num_heads, "elementwise": embed_dim}[gate]
        self.gate_proj = nn.Linear(embed_dim, gate_width) if gate else None
        self.q_norm = nn.RMSNorm(self.head_dim, eps=1e-6) if qk_norm else None
        self.k_norm = nn.RMSNorm(self.head_dim, eps=1e-6) if qk_norm else None
        self.max_logit = torch.tensor(float("nan"))

    def scores(self, x: Tensor, positions: Tensor | None = None) -> Tensor:
        r"""The scaled scores $q k^\top / \sqrt{d_k}$, before any cap or mask: ``(B, T, C) -> (B, H, T, T)``.

        What ``forward`` computes before the cap, without a cache: how far
        the raw scores reach under a cap, say.

        Examples:
            >>> layer = ModernAttention(8, num_heads=2, softcap=1.0)
            >>> layer.scores(torch.randn(1, 5, 8)).shape
            torch.Size([1, 2, 5, 5])
        """
        return self._scores_and_values(x, positions, None)[0]

    def _scores_and_values(
        self, x: Tensor, positions: Tensor | None, cache: KVCache | None
    ) -> tuple[Tensor, Tensor]:
        """Scaled scores ``(B, H, T, S)`` and values ``(B, H, S, d_k)``, the cache updated."""
        _validate.tensor("x", x)
        _validate.shape("x", x, (None, None, self.embed_dim), f"(B, T, embed_dim={self.embed_dim})")
        T = x.shape[1]
        positions = torch.arange(T, device=x.device) if positions is None else positions
        q = split_heads(self.q_proj(x), self.num_heads)  # (B, T, C) -> (B, H, T, d_k)
        k = split_heads(self.k_proj(x), self.num_kv_heads)  # (B, T, H_kv d_k) -> (B, H_kv, T, d_k)
        v = split_heads(self.v_proj(x), self.num_kv_heads)  # (B, T, H_kv d_k) -> (B, H_kv, T, d_k)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if self.rope_base is not None:  # rotate before caching: a cached key keeps its own position
            q = apply_rotary(q, positions, base=self.rope_base)
            k = apply_rotary(k, positions, base=self.rope_base)
        if cache is not None:
            k, v = cache.update(0, k, v)  # (B, H_kv, S, d_k): the kept keys, then the new ones
        k = repeat_kv_heads(k, self.num_heads)  # (B, H_kv, S, d_k) -> (B, H, S, d_k)
        v = repeat_kv_heads(v, self.num_heads)  # (B, H_kv, S, d_k) -> (B, H, S, d_k)
        return q @ k.transpose(-2, -1) / math.sqrt(self.head_dim), v  # (B, H, T, S), (B, H, S, d_k)

    def forward(
        self, x: Tensor, positions: Tensor | None = None, cache: KVCache | None = None
    ) -> tuple[Tensor, Tensor]:
        """``(B, T, C) -> (B, T, C)``, and the weights ``(B, H, T, S)``.

        Args:
            x: ``(B, T, C)``: the new positions.
            positions: ``(T,)`` their absolute positions, for rotary angles;
                defaults to ``0 .. T - 1``.
            cache: A one-layer cache (its layer 0): a `attn_ref.KVCache`, or
                a `attn_ref.compression.SlidingWindowCache` for a sliding
                layer. The new keys and values are appended and every kept
                one is attended to.
        """
        scores, v = self._scores_and_values(x, positions, cache)  # (B, H, T, S), (B, H, S, d_k)
        T, S = scores.shape[-2:]
        self.max_logit = scores.detach().abs().amax()
        if self.softcap is not None:
            scores = softcap(scores, self.softcap)
        if self.window is None:
            allowed = causal_mask(T, S, device=x.device, lower_right=True)  # (T, S)
        else:
            keys_at = torch.arange(S, device=x.device)  # (S,): the new queries are the last T
            allowed = sliding_window_mask(keys_at[S - T :], keys_at, self.window)  # (T, S)
        scores = scores.masked_fill(~allowed, float("-inf"))
        weights = scores.softmax(dim=-1) if self.sink is None else sink_softmax(scores, self.sink)
        heads = weights @ v  # (B, H, T, d_k)
        if self.gate_proj is not None:
            heads = output_gate(heads, self.gate_proj(x))  # (B, H, T, d_k)
        return self.out_proj(merge_heads(heads)), weights  # (B, H, T, d_k) -> (B, T, C)


class ModernDecoder(nn.Module):
    """A decoder-only stack of `ModernAttention` layers, one per entry of ``layer_types``.

    Token embeddings go into the residual stream (plus learned position
    embeddings unless ``rope_bases`` is given); each layer adds its attention
    output back; a linear map gives the logits, capped by ``final_softcap``
    if given. There is no MLP and no layer norm, as in
    `attn_ref.training.AttentionOnlyDecoder`, so what a head does shows in
    the logits.

    Args:
        vocab_size: Distinct tokens.
        context_length: Most positions the model reads.
        embed_dim: Model width ``C``.
        num_heads: Query heads per layer.
        layer_types: One kind per layer, `attn_ref.modern.SLIDING` or
            `attn_ref.modern.FULL`.
        window: The sliding layers' window; needed if any layer slides.
        rope_bases: ``{kind: base}``, one rotary base per kind (Gemma 3:
            10,000 sliding, 1,000,000 full); ``None`` for learned positions.
        final_softcap: Cap of the final logits; ``None`` for none.
        **attention: Passed to every `ModernAttention` (``num_kv_heads``,
            ``sink``, ``gate``, ``softcap``, ``qk_norm``, ``bias``).

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> model = ModernDecoder(
        ...     10, 16, embed_dim=8, num_heads=2, layer_types=(SLIDING, FULL),
        ...     window=4, rope_bases={SLIDING: 1e4, FULL: 1e6},
        ... )
        >>> logits, weights = model(torch.tensor([[1, 2, 3, 4, 5, 6]]))
        >>> logits.shape, bool(weights[0][0, 0, 5, :2].eq(0).all())
        (torch.Size([1, 6, 10]), True)
    """

    def __init__(
        self,
        vocab_size: int,
        context_length: int,
        embed_dim: int,
        num_heads: int,
        layer_types: Sequence[str] = (FULL, FULL),
        *,
        window: int | None = None,
        rope_bases: dict[str, float] | None = None,
        final_softcap: float | None = None,
        **attention: object,
    ) -> None:
        super().__init__()
        _validate.counts(vocab_size=vocab_size, context_length=context_length)
        self.vocab_size, self.context_length = vocab_size, context_length
        self.layer_types = tile_layer_types(layer_types, len(layer_types) or 1)
        if SLIDING in self.layer_types and window is None:
            raise ValueError("window must be given when layer_types has a sliding layer")
        if rope_bases is not None and set(rope_bases) != set(self.layer_types):
            raise ValueError(f"rope_bases must give one base per kind in layer_types, got {rope_bases!r}")
        self.final_softcap = (
            None if final_softcap is None else _validate.number("final_softcap", final_softcap, 0, above=True)
        )
        self.token_embedding = nn.Embedding(vocab_size, embed_dim)
        self.position_embedding = None if rope_bases else nn.Embedding(context_length, embed_dim)
        self.layers = nn.ModuleList(
            ModernAttention(
                embed_dim,
                num_heads,
                window=window if kind == SLIDING else None,
                rope_base=rope_bases[kind] if rope_bases else None,
                **attention,
            )
            for kind in self.layer_types
        )
        self.unembedding = nn.Linear(embed_dim, vocab_size, bias=False)

    def embed(self, tokens: Tensor, start: int = 0) -> Tensor:
        """The residual stream before the first layer: ``(B, T)`` ids -> ``(B, T, C)``."""
        _validate.token_ids("tokens", tokens)
        x = self.token_embedding(tokens)  # (B, T, C)
        if self.position_embedding is not None:
            x = x + self.position_embedding(torch.arange(start, start + tokens.shape[1], device=x.device))
        return x

    def forward(self, tokens: Tensor, cache: ScheduleCache | None = None) -> tuple[Tensor, list[Tensor]]:
        """Next-token logits ``(B, T, vocab_size)`` and each layer's weights ``(B, H, T, S)``.

        With a ``cache``, ``tokens`` are the positions after the ``cache.seen`` already read.
        """
        _validate.token_ids("tokens", tokens)
        start = 0 if cache is None else cache.seen
        T = tokens.shape[1]
        if start + T > self.context_length:
            raise ValueError(
                f"{start} cached and {T} new positions exceed context_length={self.context_length}"
            )
        positions = torch.arange(start, start + T, device=tokens.device)  # (T,)
        x = self.embed(tokens, start)  # (B, T, C)
        weights = []
        for i, layer in enumerate(self.layers):
            out, w = layer(x, positions, None if cache is None else cache.layers[i])
            x = x + out  # (B, T, C)
            weights.append(w)
        if cache is not None:
            cache.seen += T
        logits = self.unembedding(x)  # (B, T, vocab_size)
        return (logits if self.final_softcap is None else softcap(logits, self.final_softcap)), weights


@torch.no_grad()
def generate(
    model: ModernDecoder, prompt: Tensor, max_new_tokens: int, cache: ScheduleCache | None = None
) -> Tensor:
    """Greedy decoding; with a ``cache``, the prompt once and then one token per step.

    Without a cache, each step runs the model on the whole text so far.

    Args:
        model: The decoder.
        prompt: ``(B, T)`` token ids.
        max_new_tokens: Tokens to append.
        cache: An empty `attn_ref.modern.ScheduleCache`, or ``None``.

    Returns:
        ``(B, T + max_new_tokens)``.

    Examples:
        >>> from attn_ref.modern import ScheduleCache
        >>> _ = torch.manual_seed(0)
        >>> model = ModernDecoder(
        ...     10, 32, embed_dim=8, num_heads=2, layer_types=(SLIDING, FULL),
        ...     window=4,
        ... )
        >>> prompt = torch.tensor([[1, 2, 3]])
        >>> cached = generate(model, prompt, 20, ScheduleCache.for_model(model))
        >>> torch.equal(cached, generate(model, prompt, 20))
        True
    """
    _validate.token_ids("prompt", prompt, min_length=1)
    _validate.count("max_new_tokens", max_new_tokens, minimum=0)
    if cache is not None and cache.seen:
        raise ValueError(f"cache must be empty, it has seen {cache.seen} positions")
    tokens, new = prompt, prompt
    for _ in range(max_new_tokens):
        logits, _ = model(new if cache is not None else tokens, cache)
        next_token = logits[:, -1].argmax(dim=-1, keepdim=True)  # (B, 1)
        tokens = torch.cat([tokens, next_token], dim=1)  # (B, T + 1)
        new = next_token
    return tokens


def no_match_queries(tokens: Tensor, min_position: int = 2) -> Tensor:
    """The queries with nothing to match: their token did not occur earlier in the sequence.

    On repeating text an induction head looks for an earlier copy of the
    current token; these queries have none, so whatever the head reads there
    is of no use. Queries before ``min_position`` are left out.

    Args:
        tokens: ``(B, T)`` token ids.
        min_position: First query position counted.

    Returns:
        ``(B, T)`` boolean.

    Examples:
        >>> no_match_queries(torch.tensor([[5, 6, 7, 5, 8, 6]])).int()
        tensor([[0, 0, 1, 0, 1, 0]], dtype=torch.int32)
    """
    _validate.token_ids("tokens", tokens)
    _validate.count("min_position", min_position, minimum=0)
    T = tokens.shape[1]
    same = tokens[:, :, None] == tokens[:, None, :]  # (B, T, T): query i's token at key j
    earlier = torch.ones(T, T, dtype=torch.bool, device=tokens.device).tril(diagonal=-1)  # j < i
    nothing = ~(same & earlier).any(dim=-1)  # (B, T)
    nothing[:, :min_position] = False
    return nothing


def first_position_mass(weights: Tensor, queries: Tensor) -> Tensor:
    r"""Each head's mean weight on position 0 over the chosen queries: the attention sink.

    $$
    m_h = \frac{1}{|Q|} \sum_{(b, i) \in Q} a^{(h)}_{b, i, 0}
    $$

    Args:
        weights: ``(B, H, T, T)`` attention weights of one layer.
        queries: ``(B, T)`` boolean, the queries to average over.

    Returns:
        ``(H,)``.

    Examples:
        >>> w = torch.tensor([[1.0, 0.0], [0.9, 0.1]]).expand(1, 1, 2, 2)
        >>> first_position_mass(w, torch.tensor([[False, True]]))
        tensor([0.9000])
    """
    _validate.tensor("weights", weights)
    _validate.shape("weights", weights, (None, None, None, None), "(B, H, T, S)")
    B, _, T, _ = weights.shape
    _validate.boolean("queries", queries)
    _validate.shape("queries", queries, (B, T), "(B, T), one flag per query")
    if not queries.any():
        raise ValueError("queries selects no query: the mean would be 0 / 0")
    on_first = weights[..., 0]  # (B, H, T)
    return (on_first * queries[:, None]).sum(dim=(0, 2)) / queries.sum()


@dataclass
class History:
    """What `train_repeats` records.

    Attributes:
        loss: Mean next-token loss of each step's batch (nats).
        max_logit: Largest scaled attention score of each step, over every
            layer, before any cap.
        steps: The steps after which ``first_mass`` was measured.
        first_mass: Each layer's ``(H,)`` first-position mass on the probe
            batch's no-match queries, one list of layers per measurement.
    """

    loss: list[float] = field(default_factory=list)
    max_logit: list[float] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    first_mass: list[list[Tensor]] = field(default_factory=list)


def train_repeats(
    model: ModernDecoder,
    steps: int,
    lr: float,
    seed: int,
    batch_size: int = 32,
    periods: tuple[int, int] = (8, 16),
    probe: Tensor | None = None,
    every: int = 25,
) -> History:
    """Train ``model`` in place on `attn_ref.training.repeated_tokens`, a fresh batch per step.

    AdamW at a constant ``lr`` (PyTorch's defaults otherwise) on the mean
    next-token loss; the data come from a generator seeded with ``seed``
    (seed the weights yourself before building the model). Every ``every``
    steps, and after the last, the first-position mass of every layer is
    measured on ``probe``'s no-match queries.

    Args:
        model: The decoder, trained in place.
        steps: Optimizer steps.
        lr: Learning rate.
        seed: Seed of the data.
        batch_size: Sequences per step.
        periods: Range of the repeat periods.
        probe: ``(B, T)`` tokens to measure the sink on; ``None`` for none.
        every: Steps between measurements.

    Returns:
        The `History`.

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> model = ModernDecoder(16, 12, embed_dim=8, num_heads=2, sink=True)
        >>> h = train_repeats(model, steps=3, lr=1e-2, seed=0, batch_size=4,
        ...                   periods=(4, 6), probe=torch.randint(0, 16, (4, 12)))
        >>> len(h.loss), h.steps, len(h.first_mass[0])
        (3, [3], 2)
    """
    from attn_ref.training import next_token_losses, repeated_tokens

    _validate.counts(steps=steps, batch_size=batch_size, every=every)
    _validate.number("lr", lr, 0, above=True)
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    queries = None if probe is None else no_match_queries(probe)
    history = History()
    model.train()
    for step in range(1, steps + 1):
        tokens, _ = repeated_tokens(batch_size, model.context_length, model.vocab_size, periods, generator)
        logits, _ = model(tokens)
        loss = next_token_losses(logits, tokens).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        history.loss.append(loss.item())
        history.max_logit.append(max(layer.max_logit.item() for layer in model.layers))
        if probe is not None and (step % every == 0 or step == steps):
            with torch.no_grad():
                _, weights = model(probe)
            history.steps.append(step)
            history.first_mass.append([first_position_mass(w, queries) for w in weights])
    model.eval()
    return history
