r"""A character model trained on Python's own documentation, and what measures it.

`CharTransformer` is a decoder built from the site's blocks: a character and a
learned position embedding, `attn_ref.decoder.DecoderBlock` s (layer norm,
`attn_ref.multihead.MultiHeadAttention`, layer norm, MLP), a final norm and an
output head. It returns every layer's attention weights with its logits.
`train_char_model` is its training recipe, seeded and deterministic on a given
machine, on the text of `attn_ref.training.corpus`; `window_losses` and
`context_losses` measure it on held-out text, `ngram_bits` and
`bigram_window_bits` give the baselines a reader can count by hand, `sample`
writes with it, and `ablated_losses` zeroes each head in turn
(`attn_ref.training.without_heads`) to see which ones the loss depends on.
What its heads attend to is read in `attn_ref.training.text_heads`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attn_ref import _validate
from attn_ref.decoder import DecoderBlock
from attn_ref.masks import causal_mask
from attn_ref.training.corpus import ALPHABET, char_ids, decode, encode
from attn_ref.training.heads import without_heads

__all__ = [
    "CharTransformer",
    "ablated_losses",
    "bigram_window_bits",
    "context_losses",
    "ngram_bits",
    "sample",
    "train_char_model",
    "window_losses",
]


# --- the model ---------------------------------------------------------------------------------


class CharTransformer(nn.Module):
    r"""A decoder-only transformer over characters that returns its attention weights.

    $$
    \begin{aligned}
    x_0 &= E[c] + P, \\
    x_{\ell+1} &= \operatorname{Block}_\ell(x_\ell), \\
    \text{logits} &= \operatorname{LN}(x_L)\, W_U
    \end{aligned}
    $$

    Each block is a `attn_ref.decoder.DecoderBlock` (pre-norm: causal
    multi-head attention, then a GELU MLP of width ``4 C``, each added back to
    the stream), run here one part at a time so that each layer's attention
    weights are kept. Positions are learned, one vector per position.

    Args:
        context_length: Most characters the model reads at once, ``T``.
        embed_dim: Width ``C``.
        num_layers: Number of blocks.
        num_heads: Heads per block; must divide ``embed_dim``.

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> model = CharTransformer(
        ...     context_length=16, embed_dim=8, num_layers=2, num_heads=2
        ... )
        >>> logits, weights = model(encode("def f(x):")[None])
        >>> logits.shape  # (B, T, V): a prediction after each character
        torch.Size([1, 9, 96])
        >>> [tuple(w.shape) for w in weights]  # (B, H, T, T) per layer
        [(1, 2, 9, 9), (1, 2, 9, 9)]
    """

    def __init__(self, context_length: int, embed_dim: int, num_layers: int, num_heads: int) -> None:
        super().__init__()
        for name, size in (
            ("context_length", context_length),
            ("embed_dim", embed_dim),
            ("num_layers", num_layers),
        ):
            _validate.count(name, size)
        self.context_length = context_length
        self.token_embedding = nn.Embedding(len(ALPHABET), embed_dim)
        self.position_embedding = nn.Embedding(context_length, embed_dim)
        self.blocks = nn.ModuleList(DecoderBlock(embed_dim, num_heads) for _ in range(num_layers))
        self.norm = nn.LayerNorm(embed_dim)
        self.head = nn.Linear(embed_dim, len(ALPHABET), bias=False)

    @property
    def num_heads(self) -> int:
        """Heads per layer."""
        return self.blocks[0].attn.num_heads

    @property
    def layers(self) -> list[nn.Module]:
        """Each block's attention, in order: what `attn_ref.training.without_heads` zeroes heads in."""
        return [block.attn for block in self.blocks]

    def forward(self, tokens: Tensor) -> tuple[Tensor, list[Tensor]]:
        """Next-character logits after every position, and every layer's attention weights.

        Args:
            tokens: ``(B, T)`` character ids, ``1 <= T <= context_length``.

        Returns:
            ``(logits, weights)``: ``(B, T, 96)``, and one ``(B, H, T, T)`` per layer.
        """
        char_ids("tokens", tokens, 2)
        T = _validate.count("tokens' T", tokens.shape[1], maximum=self.context_length)
        positions = torch.arange(T, device=tokens.device)  # (T,)
        x = self.token_embedding(tokens) + self.position_embedding(positions)  # (B, T, C)
        mask = causal_mask(T, device=tokens.device)  # (T, T)
        weights = []
        for block in self.blocks:
            h = block.norm1(x)  # (B, T, C)
            out, w = block.attn(h, h, h, attn_mask=mask)  # (B, T, C), (B, H, T, T)
            x = x + out
            x = x + block.mlp(block.norm2(x))  # (B, T, C)
            weights.append(w)
        return self.head(self.norm(x)), weights


# --- training and measuring ------------------------------------------------------------------


def train_char_model(
    model: CharTransformer,
    train_ids: Tensor,
    steps: int,
    batch_size: int,
    lr: float,
    seed: int = 0,
    warmup: int = 0,
) -> list[float]:
    """Train ``model`` in place on random windows of ``train_ids``; the loss of every step (nats).

    Each step draws ``batch_size`` windows of ``context_length + 1``
    characters at random starts (from a generator seeded with ``seed``), and
    takes one step of AdamW (PyTorch's defaults but the learning rate) on the
    mean next-character loss. The learning rate rises linearly to ``lr`` over
    ``warmup`` steps, then falls linearly to 0. Seed the model's initial
    weights yourself (``torch.manual_seed``) before building it.

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> model = CharTransformer(8, embed_dim=8, num_layers=1, num_heads=2)
        >>> text = encode("abcabcabcabcabcabc")
        >>> history = train_char_model(model, text, steps=3, batch_size=2, lr=0.01)
        >>> len(history), model.training  # a loss per step; evaluation mode
        (3, False)
    """
    char_ids("train_ids", train_ids, 1)
    _validate.count("steps", steps)
    _validate.count("batch_size", batch_size)
    _validate.number("lr", lr, 0.0, above=True)
    _validate.count("warmup", warmup, minimum=0, maximum=steps - 1)
    T = model.context_length
    _validate.count("train_ids' length", len(train_ids), minimum=T + 2)
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)

    def factor(step: int) -> float:  # multiplies lr at each step
        return (step + 1) / warmup if step < warmup else (steps - step) / (steps - warmup)

    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
    offsets = torch.arange(T + 1)  # (T + 1,)
    history = []
    model.train()
    for _ in range(steps):
        starts = torch.randint(0, len(train_ids) - T, (batch_size,), generator=generator)  # (B,)
        batch = train_ids[starts[:, None] + offsets]  # (B, T + 1)
        logits, _ = model(batch[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())  # (B * T, V), (B * T,)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        history.append(loss.item())
    model.eval()
    return history


@torch.no_grad()
def window_losses(model: CharTransformer, batch: Tensor, chunk: int = 64) -> Tensor:
    r"""Next-character losses in nats within each window: ``(B, T)`` ids -> ``(B, T - 1)``.

    Position $i$ of a window predicts character $i + 1$ from characters
    $0, \dots, i$ of the same window; the loss is $-\ln p(x_{i+1})$. Divide by
    $\ln 2$ for bits. Windows go through the model ``chunk`` at a time.

    Examples:
        >>> from attn_ref.training import windows
        >>> _ = torch.manual_seed(0)
        >>> model = CharTransformer(8, embed_dim=8, num_layers=1, num_heads=2)
        >>> window_losses(model, windows(encode("abcdefgh"), 4)).shape
        torch.Size([2, 3])
    """
    char_ids("batch", batch, 2)
    _validate.count("chunk", chunk)
    out = []
    for rows in batch.split(chunk):
        logits, _ = model(rows)
        out.append(F.cross_entropy(logits[:, :-1].transpose(1, 2), rows[:, 1:], reduction="none"))
    return torch.cat(out)  # (B, T - 1)


@torch.no_grad()
def context_losses(model: CharTransformer, ids: Tensor, positions: Tensor, context: int) -> Tensor:
    r"""The loss (nats) of predicting ``ids[p]`` from the ``context`` characters just before it.

    Unlike `window_losses`, which predicts each character of a window from
    however many characters precede it *in the window*, this gives every
    character at ``positions`` the same amount of context: the window
    ``ids[p - context : p]``. Comparing two contexts on the same positions
    measures what the longer one adds, and nothing else.

    Args:
        model: The model; ``context <= model.context_length``.
        ids: ``(N,)`` the text.
        positions: ``(n,)`` the characters to predict, each at least ``context``.
        context: Characters of context.

    Returns:
        ``(n,)`` losses in nats.

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> model = CharTransformer(8, embed_dim=8, num_layers=1, num_heads=2)
        >>> text = encode("abcdefghij")
        >>> last = context_losses(model, text, torch.tensor([9]), context=8)
        >>> logits, _ = model(text[1:9][None])  # "b" .. "i", then predict "j"
        >>> by_hand = F.cross_entropy(logits[:, -1], text[9:10])
        >>> torch.allclose(last, by_hand)
        True
    """
    char_ids("ids", ids, 1)
    _validate.count("context", context, maximum=model.context_length)
    if not isinstance(positions, Tensor) or positions.ndim != 1 or positions.dtype.is_floating_point:
        raise ValueError(f"positions must be a (n,) integer tensor, got {positions!r}")
    if len(positions) and (positions.min() < context or positions.max() >= len(ids)):
        raise ValueError(
            f"positions must lie in [{context}, {len(ids) - 1}] (context={context} characters before each), "
            f"got {positions.min().item()} .. {positions.max().item()}"
        )
    rows = ids[positions[:, None] - context + torch.arange(context)]  # (n, context)
    out = []
    for chunk, targets in zip(rows.split(64), ids[positions].split(64), strict=True):
        logits, _ = model(chunk)  # (chunk, context, V)
        out.append(F.cross_entropy(logits[:, -1], targets, reduction="none"))  # the last position's
    return torch.cat(out)  # (n,)


def ngram_bits(train_ids: Tensor, test_ids: Tensor, order: int, alpha: float = 1.0) -> float:
    r"""Bits per character, on ``test_ids``, of an $n$-gram model counted on ``train_ids``.

    Order 0 is a uniform guess over the 96 characters, $\log_2 96$; order 1
    the unigram, $p(c) \propto n(c) + \alpha$; order 2 the bigram,
    $p(c \mid b) \propto n(b\,c) + \alpha$. The $\alpha$ added to every count
    (add-one smoothing by default) keeps a pair never seen in training from
    getting probability 0. For the bigram, the first test character is only
    context.

    Examples:
        >>> ngram_bits(encode("ab"), encode("ba"), 0) == math.log2(96)
        True
        >>> bits = ngram_bits(encode("abab"), encode("ba"), 2)
        >>> bits == -math.log2((1 + 1) / (1 + 96))  # "ba" seen once, "b" once
        True
    """
    char_ids("train_ids", train_ids, 1)
    char_ids("test_ids", test_ids, 1)
    _validate.count("order", order, minimum=0, maximum=2)
    _validate.number("alpha", alpha, 0.0, above=True)
    V = len(ALPHABET)
    if order == 0:
        return math.log2(V)
    if order == 1:
        counts = torch.bincount(train_ids, minlength=V).double() + alpha  # (V,)
        return -(counts / counts.sum()).log2()[test_ids].mean().item()
    return bigram_window_bits(train_ids, test_ids[None], alpha).mean().item()


def bigram_window_bits(train_ids: Tensor, batch: Tensor, alpha: float = 1.0) -> Tensor:
    r"""The bigram's bits for each prediction in each window: ``(B, T)`` ids -> ``(B, T - 1)``.

    The bigram of `ngram_bits` (counted on ``train_ids``, $\alpha$ added to
    every count) predicts character $i + 1$ of each window from character
    $i$: the predictions `window_losses` makes, so the two compare window by
    window.

    Examples:
        >>> bits = bigram_window_bits(encode("abab"), encode("bab")[None])
        >>> bits.shape
        torch.Size([1, 2])
        >>> bool(bits[0, 0] == -math.log2((1 + 1) / (1 + 96)))  # "ba" seen once
        True
    """
    char_ids("train_ids", train_ids, 1)
    char_ids("batch", batch, 2)
    _validate.number("alpha", alpha, 0.0, above=True)
    V = len(ALPHABET)
    pairs = torch.bincount(train_ids[:-1] * V + train_ids[1:], minlength=V * V).double()  # (V * V,)
    counts = pairs.view(V, V) + alpha  # (V * V,) -> (V, V): previous character down
    log_p = (counts / counts.sum(dim=1, keepdim=True)).log2()
    return -log_p[batch[:, :-1], batch[:, 1:]]  # (B, T - 1)


@torch.no_grad()
def sample(model: CharTransformer, prompt: str, length: int, temperature: float, seed: int = 0) -> str:
    r"""``length`` characters drawn one at a time after ``prompt``, at ``temperature``.

    Each character is drawn from $\operatorname{softmax}(z / \tau)$, where $z$
    are the logits after the last ``context_length`` characters and $\tau$ the
    temperature: below 1 the likely characters get likelier, above 1 the
    distribution flattens. The draws come from a generator seeded with ``seed``.

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> model = CharTransformer(8, embed_dim=8, num_layers=1, num_heads=2)
        >>> len(sample(model, "for ", 5, temperature=0.5))
        5
    """
    _validate.count("length", length, minimum=0)
    _validate.number("temperature", temperature, 0.0, above=True)
    ids = encode(prompt)
    _validate.count("prompt's length", len(ids))
    generator = torch.Generator().manual_seed(seed)
    start = len(ids)
    for _ in range(length):
        logits, _ = model(ids[-model.context_length :][None])  # (1, T, V)
        p = F.softmax(logits[0, -1].double() / temperature, dim=-1)  # (V,)
        ids = torch.cat([ids, torch.multinomial(p, 1, generator=generator)])
    return decode(ids[start:])


@torch.no_grad()
def ablated_losses(model: CharTransformer, batch: Tensor) -> dict[tuple[int, int], Tensor]:
    """`window_losses` with each head zeroed in turn (`without_heads`), by ``(layer, head)``.

    Examples:
        >>> from attn_ref.training import windows
        >>> _ = torch.manual_seed(0)
        >>> model = CharTransformer(8, embed_dim=8, num_layers=1, num_heads=2)
        >>> losses = ablated_losses(model, windows(encode("abcdefgh"), 4))
        >>> list(losses), tuple(losses[0, 1].shape)
        ([(0, 0), (0, 1)], (2, 3))
    """
    return {
        (layer, head): window_losses(without_heads(model, [(layer, head)]), batch)
        for layer in range(len(model.blocks))
        for head in range(model.num_heads)
    }
