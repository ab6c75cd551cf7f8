"""attn_ref.compression's recall models and protocol against independent references.

- The protocol: the loop the cache-compression page ran in its cells, written out here with
  `train_recall`'s schedule, trains each model as `train_recall` trains several at once (to
  float32 rounding), and scores it as `recall_accuracy` does.
- `DeltaRecall` against the recurrence of the papers in float64 NumPy, its features and gates
  written out here; `RecallStack`'s layers against PyTorch's own attention and the same recurrence.
- What each model keeps, counted by hand.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attn_ref.compression import (
    AssociativeRecall,
    DeltaRecall,
    RecallStack,
    recall_accuracy,
    recall_batch,
    train_recall,
)
from tests.support.delta_rule_reference import delta_rule_np
from tests.support.reference import as64


def features_np(x: np.ndarray) -> np.ndarray:
    """SiLU, then unit length."""
    s = x / (1 + np.exp(-x))
    return s / np.linalg.norm(s, axis=-1, keepdims=True)


def rms_norm_np(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * weight


def dense_np(layer: torch.nn.Linear, x: np.ndarray) -> np.ndarray:
    out = x @ as64(layer.weight).T
    return out if layer.bias is None else out + as64(layer.bias)


def gates_np(gates, x: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    beta = 1 / (1 + np.exp(-dense_np(gates.beta_proj, x)[..., 0]))
    if gates.alpha_proj is None:
        return beta, None
    return beta, np.exp(-np.logaddexp(0.0, dense_np(gates.alpha_proj, x)[..., 0]))  # alpha = e^-softplus


# --- the protocol ---------------------------------------------------------------------------------


SMALL = {"num_keys": 16, "num_values": 16, "max_pairs": 16, "batch_size": 8, "num_queries": 4}


def one_at_a_time(model, seed, steps):
    """One model trained alone, as the cache-compression page's training cell trains it, but with
    `train_recall`'s schedule: the numbers of pairs from a generator seeded 0, the contexts from one
    seeded 100 + seed (written out here, without vmap; the small task of SMALL)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    sizes, g = torch.Generator().manual_seed(0), torch.Generator().manual_seed(100 + seed)
    losses = []
    for _ in range(steps):
        num_pairs = int(torch.randint(1, 16 + 1, (1,), generator=sizes))
        keys = torch.rand(8, 16, generator=g).argsort(dim=-1)[:, :num_pairs]
        values = torch.randint(0, 16, (8, num_pairs), generator=g)
        which = torch.randint(0, num_pairs, (8, 4), generator=g)
        queries, answers = keys.gather(1, which), values.gather(1, which)
        loss = F.cross_entropy(model(keys, values, queries).flatten(0, 1), answers.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("build", [
    lambda: AssociativeRecall(16, 16, 8, 4, attention="softmax"),
    lambda: AssociativeRecall(16, 16, 8, 4, attention="linear"),
    lambda: DeltaRecall(16, 16, 8, 4, attention="gated_delta"),
    lambda: RecallStack(("gated_delta", "softmax"), 16, 16, 8, 4),
])  # fmt: skip
def test_train_recall_trains_each_model_as_it_would_train_alone(build):
    """Three seeds trained at once (vmap) against each trained alone by the loop above: the same
    steps, to float32 rounding (a few units of 1e-7 relative per step, over 4 steps of Adam whose
    update is at most lr = 0.01 per number: far below the tolerances)."""
    seeds = (0, 1, 5)
    alone, together = [], []
    for seed in seeds:
        torch.manual_seed(seed)
        alone.append(build())
        torch.manual_seed(seed)
        together.append(build())
    expected = [one_at_a_time(model, seed, 4) for model, seed in zip(alone, seeds, strict=True)]
    losses = train_recall(together, seeds, steps=4, **SMALL)
    np.testing.assert_allclose(losses, expected, rtol=1e-5)
    for a, b in zip(alone, together, strict=True):
        assert not b.training
        for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
            torch.testing.assert_close(y, x, rtol=0, atol=1e-4, msg=name)
    assert not torch.equal(together[0].head.weight, together[1].head.weight)  # each model its own


def test_train_recall_gives_a_model_the_same_batches_whatever_trains_beside_it():
    torch.manual_seed(2)
    alone = AssociativeRecall(16, 16, 8, 4, attention="softmax")
    torch.manual_seed(2)
    beside = [AssociativeRecall(16, 16, 8, 4, attention="softmax") for _ in range(2)]
    first = train_recall([alone], [7], steps=3, **SMALL)[0]
    second = train_recall(beside, [7, 3], steps=3, **SMALL)[0]
    np.testing.assert_allclose(second, first, rtol=1e-5)


def test_recall_batch_by_hand_and_accuracy_by_counting():
    g = torch.Generator().manual_seed(3)
    keys, values, queries, answers = recall_batch(g, 50, 7, 5, num_keys=10, num_values=4)
    assert keys.shape == values.shape == (50, 7) and queries.shape == answers.shape == (50, 5)
    for b in range(50):
        assert len(set(keys[b].tolist())) == 7 and max(keys[b]) < 10 and max(values[b]) < 4
        pairs = dict(zip(keys[b].tolist(), values[b].tolist(), strict=True))
        assert [pairs[q] for q in queries[b].tolist()] == answers[b].tolist()
    # A model that always answers value 0 scores the share of answers that are 0, on the same contexts.
    zero = lambda keys, values, queries: F.one_hot(torch.zeros_like(queries), 64).float()  # noqa: E731
    _, _, _, drawn = recall_batch(torch.Generator().manual_seed(10_000 + 5), 512, 5, 8)
    assert recall_accuracy(zero, 5) == (drawn == 0).float().mean().item()


# --- the models -----------------------------------------------------------------------------------


def test_delta_recall_shares_associative_recalls_starting_weights():
    torch.manual_seed(3)
    plain = AssociativeRecall(16, 16, 8, 4, attention="linear")
    torch.manual_seed(3)
    ours = dict(DeltaRecall(16, 16, 8, 4, attention="gated_delta").named_parameters())
    for name, weight in plain.named_parameters():
        assert torch.equal(weight, ours[name])


@pytest.mark.parametrize("attention", ["delta", "gated_delta"])
def test_delta_recall_reads_the_state_the_papers_recurrence_writes(attention):
    torch.manual_seed(0)
    model = DeltaRecall(16, 16, 8, 4, attention=attention).double()
    keys, values = torch.tensor([[3, 5, 1, 7, 2]]), torch.tensor([[0, 7, 2, 2, 9]])
    queries = torch.tensor([[5, 3, 2]])
    E_k, E_v = as64(model.key_embed.weight), as64(model.value_embed.weight)
    memory = E_k[keys[0].numpy()] + E_v[values[0].numpy()]  # (N, C)
    k = features_np(dense_np(model.k_proj, memory))
    beta, alpha = gates_np(model.gates, memory)
    _, S = delta_rule_np(k, k, dense_np(model.v_proj, memory), beta, alpha)  # S: (C, d_k), the papers' layout
    q = features_np(dense_np(model.q_proj, E_k[queries[0].numpy()]))
    read = rms_norm_np(q @ S.T, as64(model.read_norm.weight), torch.finfo(torch.float64).eps)
    expected = dense_np(model.head, read)
    with torch.no_grad():
        np.testing.assert_allclose(model(keys, values, queries)[0].numpy(), expected, rtol=0, atol=1e-12)


def test_recall_stack_layers_against_pytorch_and_the_recurrence():
    torch.manual_seed(0)
    model = RecallStack(("gated_delta", "softmax"), 16, 16, 8, 4).double()
    keys, values, queries = torch.tensor([[3, 5, 1, 7]]), torch.tensor([[0, 7, 2, 2]]), torch.tensor([[5, 3]])
    with torch.no_grad():
        pairs = model.key_embed(keys) + model.value_embed(values)  # (B, N, C)
        asked = model.key_embed(queries)  # (B, Q, C)
        delta, soft = model.layers
        # layer 0: the gated delta rule, the papers' recurrence over pairs and queries' reads
        h_p, h_q = delta.norm(pairs), delta.norm(asked)
        x_p = as64(h_p[0])
        k = features_np(dense_np(delta.k_proj, x_p))
        beta, alpha = gates_np(delta.gates, x_p)
        out_p, S = delta_rule_np(
            features_np(dense_np(delta.q_proj, x_p)), k, dense_np(delta.v_proj, x_p), beta, alpha
        )
        out_q = features_np(dense_np(delta.q_proj, as64(h_q[0]))) @ S.T
        pairs, asked = pairs + torch.from_numpy(out_p)[None], asked + torch.from_numpy(out_q)[None]
        # layer 1: PyTorch's attention, causal for the pairs, every pair for the queries
        h_p, h_q = soft.norm(pairs), soft.norm(asked)
        k, v = soft.k_proj(h_p), soft.v_proj(h_p)
        pairs_out = F.scaled_dot_product_attention(soft.q_proj(h_p), k, v, is_causal=True)
        asked = asked + F.scaled_dot_product_attention(soft.q_proj(h_q), k, v)
        assert pairs_out.shape == pairs.shape
        expected = model.head(model.norm(asked))
        torch.testing.assert_close(model(keys, values, queries), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("kind", ["softmax", "delta", "gated_delta"])
def test_recall_stack_queries_never_see_each_other(kind):
    torch.manual_seed(0)
    model = RecallStack((kind, kind), 16, 16, 8, 4).eval()
    keys, values = torch.tensor([[3, 5, 1, 7]]), torch.tensor([[0, 7, 2, 2]])
    with torch.no_grad():
        both = model(keys, values, torch.tensor([[5, 3]]))
        alone = model(keys, values, torch.tensor([[3]]))
    torch.testing.assert_close(both[:, 1:], alone, rtol=0, atol=1e-6)


def test_numbers_kept_counted_by_hand():
    d_k, C = 16, 32
    assert AssociativeRecall(64, 64, C, d_k, attention="softmax").cache_numbers(64) == 64 * (16 + 32)
    assert AssociativeRecall(64, 64, C, d_k, attention="linear").cache_numbers(64) == 16 * 32 + 16
    assert DeltaRecall(64, 64, C, d_k, attention="gated_delta").cache_numbers(64) == 16 * 32
    hybrid = RecallStack(("gated_delta",) * 3 + ("softmax",), 64, 64, C, d_k)
    assert hybrid.cache_numbers(64) == 3 * 16 * 32 + 64 * (16 + 32)
    assert RecallStack(("softmax",) * 4, 64, 64, C, d_k).cache_numbers(64) == 4 * 64 * (16 + 32)


# --- bad input ------------------------------------------------------------------------------------


def test_bad_arguments_are_refused_by_name():
    with pytest.raises(ValueError, match="attention must be one of 'delta', 'gated_delta', got 'softmax'"):
        DeltaRecall(8, 8, 16, 4, attention="softmax")
    with pytest.raises(
        ValueError, match=r"layers\[1\] must be one of 'softmax', 'delta', 'gated_delta', got 'mamba'"
    ):
        RecallStack(("delta", "mamba"), 8, 8, 16, 4)
    with pytest.raises(ValueError, match="layers must name at least one layer"):
        RecallStack((), 8, 8, 16, 4)
    with pytest.raises(ValueError, match="num_pairs must be an int in \\[1, 10\\], got 11"):
        recall_batch(torch.Generator(), 2, 11, 3, num_keys=10)
    with pytest.raises(ValueError, match="steps must be an int of at least 1, got 0"):
        train_recall([AssociativeRecall(8, 8, 4, 2)], [0], steps=0)
    with pytest.raises(ValueError, match="one seed per model"):
        train_recall([AssociativeRecall(8, 8, 4, 2)], [0, 1])
    with pytest.raises(ValueError, match="one architecture"):
        train_recall([AssociativeRecall(8, 8, 4, 2), AssociativeRecall(8, 8, 8, 2)], [0, 1])
    with pytest.raises(ValueError, match="num_pairs must be an int of at least 0, got -1"):
        DeltaRecall(8, 8, 16, 4).cache_numbers(-1)
    with pytest.raises(ValueError, match=r"values must have the shape of keys"):
        DeltaRecall(8, 8, 16, 4)(torch.tensor([[0, 1]]), torch.tensor([[0]]), torch.tensor([[0]]))


def test_a_delta_model_has_no_weights_over_the_pairs():
    """Its inherited softmax/linear weights would be a wrong answer, so it refuses."""
    model = DeltaRecall(8, 8, embed_dim=16, head_dim=4)
    ids = torch.tensor([[3, 5, 1]])
    with pytest.raises(TypeError, match="keeps no weights"):
        model.attention_weights(ids, ids, ids[:, :1])
