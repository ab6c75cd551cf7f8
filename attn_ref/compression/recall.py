"""Associative recall: a one-layer model that must name the value of a key, with softmax or linear attention.

`AssociativeRecall` measures what linear attention's fixed state costs: the two
models have the same parameters, and differ only in how scores become weights.
"""

from __future__ import annotations

import torch  # noqa: F401 (the examples below use it)
from torch import Tensor, nn

from attn_ref import _validate
from attn_ref.compression.linear import linear_attention
from attn_ref.functional import scaled_dot_product_attention

__all__ = ["AssociativeRecall"]


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
    """

    def __init__(
        self, num_keys: int, num_values: int, embed_dim: int, head_dim: int, attention: str = "softmax"
    ) -> None:
        super().__init__()
        for name, size in (
            ("num_keys", num_keys),
            ("num_values", num_values),
            ("embed_dim", embed_dim),
            ("head_dim", head_dim),
        ):
            _validate.count(name, size)
        self.attention = _validate.one_of("attention", attention, ("softmax", "linear"))
        self.key_embed = nn.Embedding(num_keys, embed_dim)
        self.value_embed = nn.Embedding(num_values, embed_dim)
        self.q_proj = nn.Linear(embed_dim, head_dim, bias=False)
        self.k_proj = nn.Linear(embed_dim, head_dim, bias=False)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.head = nn.Linear(embed_dim, num_values)

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
        _validate.token_ids("keys", keys, min_length=1)
        _validate.token_ids("values", values)
        _validate.token_ids("queries", queries, min_length=1)
        if values.shape != keys.shape or queries.shape[0] != keys.shape[0]:
            raise ValueError(
                f"values must have the shape of keys, (B, N) = {tuple(keys.shape)}, and queries (B, Q) the "
                f"same B; got values {tuple(values.shape)} and queries {tuple(queries.shape)}"
            )
        memory = self.key_embed(keys) + self.value_embed(values)  # (B, N, C): one pair per position
        q = self.q_proj(self.key_embed(queries))  # (B, Q, d_k)
        k, v = self.k_proj(memory), self.v_proj(memory)  # (B, N, d_k), (B, N, C)
        if self.attention == "softmax":
            return scaled_dot_product_attention(q, k, v)  # (B, Q, C), (B, Q, N)
        return linear_attention(q, k, v)  # (B, Q, C), (B, Q, N)
