r"""Associative recall: models that must name the value of a key, and the protocol that trains and scores them.

A context holds key-value pairs; a query names one of its keys; the model must
answer with that key's value. The task measures what a fixed state costs against
a cache that keeps every pair.

- `AssociativeRecall`: one attention layer, softmax or linear. The two models have
  the same parameters and differ only in how scores become weights.
- `DeltaRecall`: the same layer, whose pairs are written into a state by the
  (gated) delta rule (`attn_ref.compression.delta_rule`).
- `RecallStack`: several layers, each softmax or (gated) delta rule, to build
  hybrids.
- `recall_batch`, `train_recall`, `recall_accuracy`: the contexts, the training and
  the score, with the same data for every model trained from the same seed.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attn_ref import _validate
from attn_ref.compression.delta_rule import DeltaRuleState, _chunks
from attn_ref.compression.linear import linear_attention
from attn_ref.functional import scaled_dot_product_attention
from attn_ref.masks import causal_mask

__all__ = [
    "AssociativeRecall",
    "DeltaRecall",
    "RecallStack",
    "recall_accuracy",
    "recall_batch",
    "train_recall",
]


class AssociativeRecall(nn.Module):
    r"""One attention layer that must recall: given key-value pairs, name the value of each query key.

    Position $j$ of the context holds one pair, embedded as
    $m_j = E_K[\text{key}_j] + E_V[\text{value}_j]$. A query is a key alone,
    $E_K[\text{query}]$. One head of size ``head_dim`` attends from the queries
    to the context, with queries $E_K[\cdot] W_Q$, keys $m W_K$ and values
    $m W_V$, and a linear layer turns what it read into a score per value.

    With ``attention="softmax"`` the head is scaled dot-product attention; with
    ``"linear"``, `linear_attention` with $\phi = \operatorname{elu} + 1$. The two
    models have the same parameters; only the way the scores become weights differs.
    Generating, the softmax model would cache every pair's key and value
    (``head_dim + embed_dim`` numbers a pair); the linear one, a
    ``head_dim`` by ``embed_dim`` state, whatever the number of pairs.

    Args:
        num_keys: Size of the keys' vocabulary.
        num_values: Size of the values' vocabulary, and number of scores.
        embed_dim: Width of the embeddings and of the values read, ``C``.
        head_dim: Width of the queries and keys, ``d_k``.
        attention: ``"softmax"`` or ``"linear"``.

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> model = AssociativeRecall(
        ...     num_keys=8, num_values=8, embed_dim=16, head_dim=4
        ... )
        >>> keys, values = torch.tensor([[3, 5, 1]]), torch.tensor([[0, 7, 2]])
        >>> queries = torch.tensor([[5, 3]])
        >>> model(keys, values, queries=queries).shape  # (B, Q, num_values)
        torch.Size([1, 2, 8])
        >>> model.cache_numbers(num_pairs=3)  # 3 pairs of (4 + 16) numbers
        60
    """

    def __init__(
        self, num_keys: int, num_values: int, embed_dim: int, head_dim: int, attention: str = "softmax"
    ) -> None:
        super().__init__()
        _validate.counts(num_keys=num_keys, num_values=num_values, embed_dim=embed_dim, head_dim=head_dim)
        self.attention = _validate.one_of("attention", attention, ("softmax", "linear"))
        self.key_embed = nn.Embedding(num_keys, embed_dim)
        self.value_embed = nn.Embedding(num_values, embed_dim)
        self.q_proj = nn.Linear(embed_dim, head_dim, bias=False)
        self.k_proj = nn.Linear(embed_dim, head_dim, bias=False)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.head = nn.Linear(embed_dim, num_values)

    def cache_numbers(self, num_pairs: int) -> int:
        r"""Numbers kept to answer after ``num_pairs`` pairs.

        Softmax keeps every pair's key and value, $N (d_k + C)$; linear attention
        its state and normalizer, $d_k (C + 1)$, whatever $N$.
        """
        _validate.count("num_pairs", num_pairs, minimum=0)
        d_k, C = self.k_proj.out_features, self.v_proj.out_features
        return num_pairs * (d_k + C) if self.attention == "softmax" else d_k * (C + 1)

    def forward(self, keys: Tensor, values: Tensor, queries: Tensor) -> Tensor:
        """Scores of every value for every query.

        Args:
            keys: ``(B, N)`` key ids of the ``N`` pairs.
            values: ``(B, N)`` value ids.
            queries: ``(B, Q)`` key ids to look up.

        Returns:
            ``(B, Q, num_values)`` scores (logits).
        """
        read, _ = self._attend(keys, values, queries)
        return self.head(read)  # (B, Q, num_values)

    def attention_weights(self, keys: Tensor, values: Tensor, queries: Tensor) -> Tensor:
        """The head's weights: how much each query reads from each pair, ``(B, Q, N)``.

        Each row sums to one. A model that recalls well puts most of a query's weight on
        the pair with its key.

        Examples:
            >>> _ = torch.manual_seed(0)
            >>> model = AssociativeRecall(8, 8, embed_dim=16, head_dim=4)
            >>> keys, values = torch.tensor([[3, 5, 1]]), torch.tensor([[0, 7, 2]])
            >>> w = model.attention_weights(keys, values, torch.tensor([[5]]))
            >>> w.shape, round(w.sum().item(), 6)
            (torch.Size([1, 1, 3]), 1.0)
        """
        return self._attend(keys, values, queries)[1]

    def _attend(self, keys: Tensor, values: Tensor, queries: Tensor) -> tuple[Tensor, Tensor]:
        """What each query reads, ``(B, Q, C)``, and its weights, ``(B, Q, N)``."""
        _context(keys, values, queries)
        memory = self.key_embed(keys) + self.value_embed(values)  # (B, N, C): one pair per position
        q = self.q_proj(self.key_embed(queries))  # (B, Q, d_k)
        k, v = self.k_proj(memory), self.v_proj(memory)  # (B, N, d_k), (B, N, C)
        if self.attention == "softmax":
            return scaled_dot_product_attention(q, k, v)  # (B, Q, C), (B, Q, N)
        return linear_attention(q, k, v)  # (B, Q, C), (B, Q, N)


def _context(keys: object, values: object, queries: object) -> None:
    """``keys`` and ``values`` are ``(B, N)`` ids, ``queries`` ``(B, Q)``, with one ``B``."""
    _validate.token_ids("keys", keys, min_length=1)
    _validate.token_ids("values", values)
    _validate.token_ids("queries", queries, min_length=1)
    if values.shape != keys.shape or queries.shape[0] != keys.shape[0]:
        raise ValueError(
            f"values must have the shape of keys, (B, N) = {tuple(keys.shape)}, and queries (B, Q) the "
            f"same B; got values {tuple(values.shape)} and queries {tuple(queries.shape)}"
        )


def _unit_features(x: Tensor) -> Tensor:
    """DeltaNet's query and key features: SiLU, then unit length."""
    x = F.silu(x)
    return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-6)


class _Gates(nn.Module):
    r"""$\beta = \sigma(x w_\beta + b_\beta)$ and, gated, $\log\alpha = -\operatorname{softplus}(x w_\alpha + b_\alpha)$.

    $b_\alpha$ starts at $-4$: $\alpha \approx 0.98$, a state that forgets slowly
    until training says otherwise.
    """

    def __init__(self, embed_dim: int, gated: bool) -> None:
        super().__init__()
        self.beta_proj = nn.Linear(embed_dim, 1)
        self.alpha_proj = nn.Linear(embed_dim, 1) if gated else None
        if self.alpha_proj is not None:
            nn.init.constant_(self.alpha_proj.bias, -4.0)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor | None]:
        beta = torch.sigmoid(self.beta_proj(x)).squeeze(-1)  # (B, N, 1) -> (B, N)
        if self.alpha_proj is None:
            return beta, None
        return beta, -F.softplus(self.alpha_proj(x)).squeeze(-1)  # (B, N, 1) -> (B, N): log alpha <= 0


DELTA_KINDS = ("delta", "gated_delta")
CHUNK = 64  # tokens per chunk of the delta rule, as DeltaNet's kernels use


class DeltaRecall(AssociativeRecall):
    r"""`AssociativeRecall` whose pairs are written into a state by the (gated) delta rule.

    The pairs $m_j$ are written in order into a $d_k \times C$ state with
    `attn_ref.compression.delta_rule_chunked`, from unit keys
    $\hat k_j = \phi(m_j W_K)$ with $\phi(x) = \operatorname{silu}(x) / \lVert \operatorname{silu}(x) \rVert$,
    values $m_j W_V$, $\beta_j = \sigma(m_j w_\beta + b_\beta)$ and, for
    ``"gated_delta"``, $\log\alpha_j = -\operatorname{softplus}(m_j w_\alpha + b_\alpha)$:
    DeltaNet's layer without its short convolutions. Each query reads the final
    state with its unit query, $\hat q S_N$, normalized by an RMSNorm as in
    DeltaNet, and the linear layer of `AssociativeRecall` scores the values.

    The parameters of `AssociativeRecall` are made first, in the same order, so one
    seed gives every kind the same starting weights; the gates come after them.

    Args:
        num_keys: Size of the keys' vocabulary.
        num_values: Size of the values' vocabulary, and number of scores.
        embed_dim: Width of the embeddings and of the values read, ``C``.
        head_dim: Width of the queries and keys, ``d_k``.
        attention: ``"delta"`` (DeltaNet) or ``"gated_delta"`` (Gated DeltaNet).

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> model = DeltaRecall(8, 8, embed_dim=16, head_dim=4)
        >>> keys, values = torch.tensor([[3, 5, 1]]), torch.tensor([[0, 7, 2]])
        >>> model(keys, values, queries=torch.tensor([[5, 3]])).shape
        torch.Size([1, 2, 8])
        >>> model.cache_numbers(num_pairs=3)  # d_k * C, however many pairs
        64
    """

    def __init__(
        self, num_keys: int, num_values: int, embed_dim: int, head_dim: int, attention: str = "delta"
    ) -> None:
        attention = _validate.one_of("attention", attention, DELTA_KINDS)
        super().__init__(num_keys, num_values, embed_dim, head_dim, attention="linear")
        self.attention = attention
        self.gates = _Gates(embed_dim, gated=attention == "gated_delta")
        self.read_norm = nn.RMSNorm(embed_dim)

    def cache_numbers(self, num_pairs: int) -> int:
        r"""Numbers kept to answer after ``num_pairs`` pairs: the state's $d_k \times C$, whatever $N$."""
        _validate.count("num_pairs", num_pairs, minimum=0)
        return self.k_proj.out_features * self.v_proj.out_features

    def write(self, keys: Tensor, values: Tensor) -> DeltaRuleState:
        """The state after writing the ``(B, N)`` pairs in order."""
        memory = self.key_embed(keys) + self.value_embed(values)  # (B, N, C)
        k = _unit_features(self.k_proj(memory))  # (B, N, d_k)
        beta, log_alpha = self.gates(memory)  # (B, N) each
        _, state = _chunks(k, k, self.v_proj(memory), beta, log_alpha, CHUNK, None)  # from a state of zeros
        return DeltaRuleState(state, keys.shape[1])

    def forward(self, keys: Tensor, values: Tensor, queries: Tensor) -> Tensor:
        """Scores of every value for every query, ``(B, Q, num_values)``: see `AssociativeRecall`."""
        _context(keys, values, queries)
        state = self.write(keys, values).state  # (B, d_k, C)
        q = _unit_features(self.q_proj(self.key_embed(queries)))  # (B, Q, d_k)
        return self.head(self.read_norm(q @ state))  # (B, Q, d_k) @ (B, d_k, C) -> (B, Q, C)

    def attention_weights(self, keys: Tensor, values: Tensor, queries: Tensor) -> Tensor:
        """Not defined: the delta rule overwrites a state, it keeps no weight per pair."""
        raise TypeError(f"{type(self).__name__} ({self.attention!r}) keeps no weights over the pairs")


STACK_KINDS = ("softmax", *DELTA_KINDS)


class _StackLayer(nn.Module):
    """One layer of `RecallStack`: each pair reads the pairs up to it, each query reads every pair."""

    def __init__(self, kind: str, embed_dim: int, head_dim: int) -> None:
        super().__init__()
        self.kind = kind
        self.norm = nn.RMSNorm(embed_dim)
        self.q_proj = nn.Linear(embed_dim, head_dim, bias=False)
        self.k_proj = nn.Linear(embed_dim, head_dim, bias=False)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.gates = _Gates(embed_dim, gated=kind == "gated_delta") if kind in DELTA_KINDS else None

    def forward(self, pairs: Tensor, asked: Tensor) -> tuple[Tensor, Tensor]:
        h_p, h_q = self.norm(pairs), self.norm(asked)  # (B, N, C), (B, Q, C)
        k, v = self.k_proj(h_p), self.v_proj(h_p)  # (B, N, d_k), (B, N, C)
        q_p, q_q = self.q_proj(h_p), self.q_proj(h_q)  # (B, N, d_k), (B, Q, d_k)
        if self.kind == "softmax":
            out_p, _ = scaled_dot_product_attention(q_p, k, v, attn_mask=causal_mask(k.shape[-2]))
            out_q, _ = scaled_dot_product_attention(q_q, k, v)  # (B, Q, C): every pair
            return out_p, out_q
        k, q_p, q_q = _unit_features(k), _unit_features(q_p), _unit_features(q_q)
        beta, log_alpha = self.gates(h_p)  # (B, N) each
        out_p, state = _chunks(q_p, k, v, beta, log_alpha, CHUNK, None)  # (B, N, C), (B, d_k, C)
        return out_p, q_q @ state  # (B, Q, d_k) @ (B, d_k, C) -> (B, Q, C)


class RecallStack(nn.Module):
    r"""Associative recall by a stack of layers, each softmax attention or the (gated) delta rule.

    The pairs $m_j = E_K[\text{key}_j] + E_V[\text{value}_j]$ and the queries
    $E_K[\text{query}]$ form two residual streams. In each layer (pre-norm, an
    RMSNorm) pair $j$ reads pairs $1, \dots, j$, as a decoder reads its context in
    order, and each query reads every pair but never another query; both add what
    they read to their stream. A softmax layer caches every pair's key and value; a
    delta-rule layer keeps one state. After the last layer an RMSNorm and a linear
    layer score the values from the queries' stream.

    ``layers=("gated_delta",) * 3 + ("softmax",)`` is a hybrid with one softmax
    layer in four, as in Qwen3-Next and Kimi Linear, whose full-attention layer is
    the last of each group of four.

    Args:
        layers: The kind of each layer: ``"softmax"``, ``"delta"`` or ``"gated_delta"``.
        num_keys: Size of the keys' vocabulary.
        num_values: Size of the values' vocabulary.
        embed_dim: Width of the streams, ``C``.
        head_dim: Width of the queries and keys, ``d_k``.

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> model = RecallStack(
        ...     ("delta", "softmax"), 8, 8, embed_dim=16, head_dim=4
        ... )
        >>> keys, values = torch.tensor([[3, 5, 1]]), torch.tensor([[0, 7, 2]])
        >>> model(keys, values, torch.tensor([[5, 3]])).shape
        torch.Size([1, 2, 8])
        >>> model.cache_numbers(num_pairs=3)  # 4 * 16 + 3 * (4 + 16)
        124
    """

    def __init__(
        self, layers: Sequence[str], num_keys: int, num_values: int, embed_dim: int, head_dim: int
    ) -> None:
        super().__init__()
        layers = tuple(layers)
        if not layers:
            raise ValueError(
                f"layers must name at least one layer, one of {STACK_KINDS} each, got {layers!r}"
            )
        for number, kind in enumerate(layers):
            _validate.one_of(f"layers[{number}]", kind, STACK_KINDS)
        _validate.counts(num_keys=num_keys, num_values=num_values, embed_dim=embed_dim, head_dim=head_dim)
        self.kinds = layers
        self.key_embed = nn.Embedding(num_keys, embed_dim)
        self.value_embed = nn.Embedding(num_values, embed_dim)
        self.layers = nn.ModuleList(_StackLayer(kind, embed_dim, head_dim) for kind in layers)
        self.norm = nn.RMSNorm(embed_dim)
        self.head = nn.Linear(embed_dim, num_values)

    def cache_numbers(self, num_pairs: int) -> int:
        r"""Numbers kept to answer after ``num_pairs`` pairs: $N (d_k + C)$ per softmax layer, $d_k C$ per other."""
        _validate.count("num_pairs", num_pairs, minimum=0)
        total = 0
        for layer in self.layers:
            d_k, C = layer.k_proj.out_features, layer.v_proj.out_features
            total += num_pairs * (d_k + C) if layer.kind == "softmax" else d_k * C
        return total

    def forward(self, keys: Tensor, values: Tensor, queries: Tensor) -> Tensor:
        """Scores of every value for every query, ``(B, Q, num_values)``."""
        _context(keys, values, queries)
        pairs = self.key_embed(keys) + self.value_embed(values)  # (B, N, C)
        asked = self.key_embed(queries)  # (B, Q, C)
        for layer in self.layers:
            out_p, out_q = layer(pairs, asked)
            pairs, asked = pairs + out_p, asked + out_q
        return self.head(self.norm(asked))  # (B, Q, num_values)


def recall_batch(
    generator: torch.Generator,
    batch_size: int,
    num_pairs: int,
    num_queries: int,
    *,
    num_keys: int = 64,
    num_values: int = 64,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Contexts of ``num_pairs`` distinct keys with random values, and queries among their keys.

    Each context's keys are the first ``num_pairs`` of a random order of the
    ``num_keys`` keys, so no key comes twice; each value is drawn from
    ``num_values``; each query is one of the context's keys, drawn with repeats.

    Args:
        generator: Where every random number comes from.
        batch_size: Contexts, ``B``.
        num_pairs: Pairs per context, ``N``, at most ``num_keys``.
        num_queries: Queries per context, ``Q``.
        num_keys: Size of the keys' vocabulary.
        num_values: Size of the values' vocabulary.

    Returns:
        ``(keys, values, queries, answers)``: ``(B, N)``, ``(B, N)``, ``(B, Q)`` and
        ``(B, Q)`` ids; ``answers`` are the values of the queried keys.

    Examples:
        >>> g = torch.Generator().manual_seed(0)
        >>> keys, values, queries, answers = recall_batch(g, 2, 3, 4)
        >>> keys.shape, queries.shape
        (torch.Size([2, 3]), torch.Size([2, 4]))
        >>> bool((keys.sort(-1).values.diff(dim=-1) > 0).all())  # distinct
        True
        >>> found = (queries[..., None] == keys[:, None]).int().argmax(-1)
        >>> torch.equal(values.gather(1, found), answers)
        True
    """
    _validate.counts(batch_size=batch_size, num_queries=num_queries, num_values=num_values)
    _validate.count("num_keys", num_keys)
    _validate.count("num_pairs", num_pairs, maximum=num_keys)
    keys = torch.rand(batch_size, num_keys, generator=generator).argsort(dim=-1)[:, :num_pairs]  # (B, N)
    values = torch.randint(0, num_values, (batch_size, num_pairs), generator=generator)  # (B, N)
    which = torch.randint(0, num_pairs, (batch_size, num_queries), generator=generator)  # (B, Q)
    return keys, values, keys.gather(1, which), values.gather(1, which)


def train_recall(
    models: Sequence[nn.Module],
    seeds: Sequence[int],
    steps: int = 150,
    *,
    batch_size: int = 32,
    max_pairs: int = 64,
    num_queries: int = 8,
    lr: float = 1e-2,
    num_keys: int = 64,
    num_values: int = 64,
) -> list[list[float]]:
    """Train one model per seed, all at once and in place, on `recall_batch` contexts.

    Each step draws a number of pairs from 1 to ``max_pairs``, the same for every
    model, then for each model ``batch_size`` contexts of that many pairs with
    ``num_queries`` queries each, and takes one step of Adam on each model's mean
    cross-entropy. Model ``i``'s contexts come from a generator seeded with
    ``100 + seeds[i]``, the numbers of pairs from one seeded with 0: a model sees
    the same batches whichever models train beside it, and so does every model
    trained from the same seed. Seed each model's starting weights yourself
    (``torch.manual_seed(seed)`` before building it).

    The models must have the same parameters' names and shapes (one architecture).
    They are trained as one batched model (`torch.func.stack_module_state` and
    `torch.func.vmap`): Adam updates each number on its own, and the loss is the sum
    of the models' losses, so each model takes the steps it would take alone, on
    fewer and larger operations.

    Args:
        models: ``model(keys, values, queries)`` returns ``(B, Q, num_values)`` scores.
        seeds: One seed per model, for its contexts.
        steps: Optimizer steps.
        batch_size: Contexts per step and model.
        max_pairs: Most pairs in a context.
        num_queries: Queries per context.
        lr: Adam's learning rate.
        num_keys: Size of the keys' vocabulary.
        num_values: Size of the values' vocabulary.

    Returns:
        Each model's loss at every step, on its batch (nats). The models are left in
        eval mode.

    Examples:
        >>> models = []
        >>> for seed in (0, 1):
        ...     _ = torch.manual_seed(seed)
        ...     models.append(AssociativeRecall(64, 64, embed_dim=32, head_dim=16))
        >>> losses = train_recall(models, seeds=(0, 1), steps=3)
        >>> [len(x) for x in losses], models[1].training
        ([3, 3], False)
    """
    models, seeds = list(models), list(seeds)
    _validate.count("steps", steps)
    _validate.count("max_pairs", max_pairs, maximum=num_keys)
    if not models or len(seeds) != len(models):
        raise ValueError(
            f"give one seed per model and at least one model, got {len(models)} models and seeds {seeds}"
        )
    shapes = [{name: p.shape for name, p in m.named_parameters()} for m in models]
    if any(type(m) is not type(models[0]) or s != shapes[0] for m, s in zip(models, shapes, strict=True)):
        raise ValueError("models must share one architecture: the same class, parameter names and shapes")
    params, buffers = torch.func.stack_module_state(models)  # name -> (M, ...) leaves, one row per model
    shell = copy.deepcopy(models[0]).to("meta")  # the architecture, without numbers

    def loss_of_one(params, buffers, keys, values, queries, answers):
        logits = torch.func.functional_call(shell, (params, buffers), (keys, values, queries))
        return F.cross_entropy(logits.flatten(0, 1), answers.flatten())  # (B * Q, num_values), (B * Q,)

    loss_of_each = torch.func.vmap(loss_of_one)
    optimizer = torch.optim.Adam(params.values(), lr=lr)
    sizes = torch.Generator().manual_seed(0)  # the numbers of pairs, shared by the models
    generators = [torch.Generator().manual_seed(100 + seed) for seed in seeds]
    losses = []
    for _ in range(steps):
        num_pairs = int(torch.randint(1, max_pairs + 1, (1,), generator=sizes))
        batches = [
            recall_batch(g, batch_size, num_pairs, num_queries, num_keys=num_keys, num_values=num_values)
            for g in generators
        ]
        stacked = [
            torch.stack(x) for x in zip(*batches, strict=True)
        ]  # keys, values, queries, answers: (M, B, ...)
        loss = loss_of_each(params, buffers, *stacked)  # (M,)
        optimizer.zero_grad()
        loss.sum().backward()  # each model's gradient is that of its own loss
        optimizer.step()
        losses.append(loss.tolist())
    with torch.no_grad():
        for number, model in enumerate(models):
            for name, x in (*model.named_parameters(), *model.named_buffers()):
                x.copy_((params | buffers)[name][number])
            model.eval()
    return [list(x) for x in zip(*losses, strict=True)]


@torch.no_grad()
def recall_accuracy(
    model: nn.Module,
    num_pairs: int,
    *,
    num_contexts: int = 512,
    num_queries: int = 8,
    num_keys: int = 64,
    num_values: int = 64,
) -> float:
    """The share of queries answered right, on ``num_contexts`` fresh contexts of ``num_pairs`` pairs.

    The contexts come from a generator seeded with ``10_000 + num_pairs``: every
    model answers the same ones, and none of them was a training batch.

    Args:
        model: A trained recall model.
        num_pairs: Pairs per context.
        num_contexts: Contexts to answer.
        num_queries: Queries per context.
        num_keys: Size of the keys' vocabulary.
        num_values: Size of the values' vocabulary.

    Returns:
        Right answers / ``num_contexts * num_queries``.

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> untrained = AssociativeRecall(64, 64, embed_dim=32, head_dim=16)
        >>> recall_accuracy(untrained, num_pairs=1) < 0.1  # about 1 / 64
        True
    """
    generator = torch.Generator().manual_seed(10_000 + num_pairs)
    keys, values, queries, answers = recall_batch(
        generator, num_contexts, num_pairs, num_queries, num_keys=num_keys, num_values=num_values
    )
    right = model(keys, values, queries).argmax(dim=-1) == answers  # (B, Q)
    return right.float().mean().item()
