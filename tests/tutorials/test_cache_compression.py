"""The cache-compression tutorial, as the build executed it, checked against references computed here.

What the tutorial computed is read from its kernel's variables (``values``) and checked against
references independent of attn_ref.compression: DeepSeek-V2's MLA equations and KIVI's quantizer
written out in NumPy (tests/attn_ref/compression/test_compression.py), linear attention's formula, the configuration
figures of the cited files typed here with their sources, and byte counts made by hand. The
claims the page makes about quantization errors are recomputed here for three more seeds, and the
trained recall models are evaluated on contexts drawn here. What a loop only printed is read from
the numbers its cell printed, without the page's labels (tests/support/shown.py).
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch

from attn_ref.plotting import PLOT_MIME
from tests.support import reference
from tests.support.compression_reference import (
    draw_contexts,
    linear_np,
    linear_tolerance,
    mla_np,
    mla_tolerance,
    phi_np,
    tolerance,
    weights_of,
)
from tests.support.reference import EPS32, EPS64, as64
from tests.support.shown import assert_printed, displayed, half_unit, sci_rtol, verdicts

# Configuration figures, from the files the page cites:
# deepseek-ai/DeepSeek-V3, inference/configs/config_236B.json (DeepSeek-V2) and config_671B.json
# (DeepSeek-V3): n_layers, n_heads, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim.
DEEPSEEK = {
    "DeepSeek-V2": {"layers": 60, "heads": 128, "d_c": 512, "nope": 128, "rope": 64, "v": 128},
    "DeepSeek-V3": {"layers": 61, "heads": 128, "d_c": 512, "nope": 128, "rope": 64, "v": 128},
}
# config_16B.json (DeepSeek-V2-Lite): 27 layers, 16 heads, the same kv_lora_rank and rope size.
LITE = {"layers": 27, "heads": 16}
# (layers, key/value heads, head size): metaseq's opt_job_constants.py "175b" is
# Size(96, 12288, 96, 128, ...); llama-models' sku_list.py: 70B dim 8192, 80 layers, 64 heads,
# 8 kv heads; 405B dim 16384, 126 layers, 128 heads, 8 kv heads.
OTHERS = [(60, 128, 128), (60, 8, 128), (60, 1, 128), (96, 96, 128), (80, 8, 128), (126, 8, 128)]

FOUR = half_unit(4)


# --- multi-head latent attention ---------------------------------------------------------------


def test_mla_output_and_latent_cache_follow_the_papers_equations(tutorial, values):
    mla, x, y, cache = values["mla"], values["x"], values["y"], values["cache"]
    expected = mla_np(copy.deepcopy(mla).double(), x.double().numpy())
    tol = mla_tolerance(mla, x, EPS32)
    np.testing.assert_allclose(as64(y), expected["output"], rtol=0, atol=tol)
    np.testing.assert_allclose(as64(cache.latents[0]), expected["latent"], rtol=0, atol=tol)
    np.testing.assert_allclose(as64(cache.rope_keys[0]), expected["rope_key"], rtol=0, atol=tol)
    per_token = 16 + 8  # d_c + d_R
    in_heads = 4 * ((16 + 8) + 16)  # four heads, each a key of d_nope + d_R and a value of d_v
    assert cache.nbytes == per_token * 10 * 4
    assert_printed(tutorial, [1, 10, 64, 1, 10, 16, 1, 10, 8], gaps=True)  # the shapes
    assert_printed(tutorial, [per_token, in_heads, per_token * 10 * 4, per_token, 10, 4], gaps=True)


def test_absorbed_form_gives_the_same_output(tutorial, values):
    mla, x, y, absorbed = values["mla"], values["x"], values["y"], values["absorbed"]
    query_weight, output_weight = values["query_weight"], values["output_weight"]
    w_uq = weights_of(mla.q_up).reshape(32, 4, 24)[..., :16]  # (q_in, H, d_nope)
    w_uk = weights_of(mla.k_up).reshape(16, 4, 16)  # (d_c, H, d_nope)
    w_uv = weights_of(mla.v_up).reshape(16, 4, 16)
    w_o = weights_of(mla.out_proj).reshape(4, 16, 64)
    product_tol = tolerance(EPS32, 16, 1.0)
    for h in range(4):
        np.testing.assert_allclose(as64(query_weight[h]), w_uq[:, h] @ w_uk[:, h].T, rtol=0, atol=product_tol)
        np.testing.assert_allclose(as64(output_weight[h]), w_uv[:, h] @ w_o[h], rtol=0, atol=product_tol)
    expected = mla_np(copy.deepcopy(mla).double(), x.double().numpy())["output"]
    tol32 = mla_tolerance(mla, x, EPS32)
    np.testing.assert_allclose(as64(absorbed), expected, rtol=0, atol=tol32)
    assert values["gap32"].item() == (absorbed - y).abs().max().item() <= 2 * tol32
    assert values["gap64"].item() <= 2 * mla_tolerance(mla, x, EPS64)
    assert_printed(tutorial, [4, 32, 16, 4, 16, 64], gaps=True)
    shown = [values["gap32"].item(), values["gap64"].item()]
    assert_printed(tutorial, shown, rtol=sci_rtol(1), gaps=True)
    assert_printed(tutorial, [np.abs(expected).max()], atol=half_unit(2) + tol32)


def test_generation_from_the_latent_cache(tutorial, values):
    mla, x, stepwise, decode = values["mla"], values["x"], values["stepwise"], values["decode"]
    expected = mla_np(copy.deepcopy(mla).double(), x.double().numpy())["output"]
    tol = mla_tolerance(mla, x, EPS32)
    np.testing.assert_allclose(as64(stepwise), expected, rtol=0, atol=tol)
    assert decode.length == 10 and decode.nbytes == 10 * 24 * 4
    assert_printed(tutorial, [values["decode_gap"].item()], rtol=sci_rtol(1))
    assert_printed(tutorial, [10, 960], gaps=True)


def test_absorbing_saves_the_up_projections_counted_by_hand(tutorial, values):
    S, C, H, d_c, d_q, d_n, d_r, d_v = 4096, 5120, 128, 512, 1536, 128, 64, 128  # V2's sizes
    up = S * 2 * d_c * H * d_n + S * 2 * d_c * H * d_v  # k_up and v_up over S latents
    plain = up + H * (2 * S * (d_n + d_r) + 2 * S * d_v)  # scores, then the mix
    absorbed = H * 2 * d_q * d_c + H * (2 * S * (d_c + d_r) + 2 * S * d_c) + H * 2 * d_c * C
    assert (values["plain_count"], values["absorbed_count"]) == (plain, absorbed)
    assert plain > 10 * absorbed
    assert_printed(tutorial, [S, plain, absorbed], rtol=[0, sci_rtol(2), sci_rtol(2)], gaps=True)
    assert_printed(tutorial, [plain / absorbed], atol=half_unit(1))


def test_cache_of_real_models_from_their_configurations(tutorial, values):
    for name, config in DEEPSEEK.items():
        kept = values["deepseek"][name]
        assert (kept["n_layers"], kept["n_heads"], kept["kv_lora_rank"]) == (
            config["layers"],
            config["heads"],
            config["d_c"],
        )
        assert (kept["qk_nope_head_dim"], kept["qk_rope_head_dim"], kept["v_head_dim"]) == (
            config["nope"],
            config["rope"],
            config["v"],
        )
    assert list(values["others"].values()) == OTHERS
    rows = [(c["layers"], c["d_c"] + c["rope"]) for c in DEEPSEEK.values()]
    rows += [(layers, 2 * kv_heads * size) for layers, kv_heads, size in OTHERS]
    assert list(values["per_layer"].values()) == [numbers for _, numbers in rows]
    for layers, numbers in rows:
        kib = layers * numbers * 2 / 1024  # all layers, 16-bit
        assert_printed(
            tutorial, [layers, numbers, kib, kib * 131072 / 2**20], atol=[0, 0, half_unit(1), half_unit(2)]
        )
    assert values["groups"] == 2.25 == (512 + 64) / (2 * 128)  # the paper's "2.25 groups"
    assert_printed(tutorial, [2.25, 128], gaps=True)


# --- quantization ------------------------------------------------------------------------------


def quantize_np(x: np.ndarray, bits: int, axis: int) -> np.ndarray:
    """KIVI's min-max quantizer, read back, computed in ``x``'s own dtype (min, step, round, q s + z)."""
    low, high = x.min(axis=axis, keepdims=True), x.max(axis=axis, keepdims=True)
    scale = (high - low) / x.dtype.type(2**bits - 1)
    step = np.where(scale == 0, x.dtype.type(1), scale)
    codes = np.clip(np.rint((x - low) / step), 0, 2**bits - 1)
    return codes * scale + low


def stored(x: np.ndarray, bits: int, per: str, group: int = 32) -> np.ndarray:
    """What a quantized cache reads back: tokens on their own, or per channel in groups of tokens."""
    if per == "token":
        return quantize_np(x, bits, axis=-1)
    S = x.shape[-2]
    assert S % group == 0
    grouped = x.reshape(*x.shape[:-2], S // group, group, x.shape[-1])
    return quantize_np(grouped, bits, axis=-2).reshape(x.shape)


def quantization_errors(queries, keys, values, bits, key_per, value_per):
    """(attention moved, output error) of attention over stored keys and values, in float64."""
    exact, weights = reference.attention(queries, keys, values)
    out, w = reference.attention(queries, stored(keys, bits, key_per), stored(values, bits, value_per))
    moved = 0.5 * np.abs(w - weights).sum(axis=-1).mean()
    return moved, np.linalg.norm(out - exact) / np.linalg.norm(exact)


def experiment(seed: int) -> tuple[dict, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The page's experiment, drawn anew: 64 queries, 512 keys and values of 64; four channels of the
    keys stretched ten times, the queries shrunk as much."""
    g = torch.Generator().manual_seed(seed)
    queries = torch.randn(1, 1, 64, 64, generator=g)
    keys, values = torch.randn(2, 1, 1, 512, 64, generator=g)
    stretch = torch.ones(64)
    stretch[torch.randperm(64, generator=g)[:4]] = 10.0
    sets = {"plain": (queries, keys), "outliers": (queries / stretch, keys * stretch)}
    errors = {}
    for name, (q, k) in sets.items():
        for bits in (8, 4, 2):
            for key_per in ("token", "channel"):
                for value_per in ("token", "channel"):
                    errors[bits, key_per, value_per, name] = quantization_errors(
                        q.numpy(), k.numpy(), values.numpy(), bits, key_per, value_per
                    )
    return errors, queries.numpy(), keys.numpy(), values.numpy(), stretch.numpy()


def check_claims(errors: dict) -> None:
    """What the page says about the table, with margins."""
    for key_per in ("token", "channel"):
        for value_per in ("token", "channel"):
            for name in ("plain", "outliers"):
                moved = [errors[bits, key_per, value_per, name][0] for bits in (8, 4, 2)]
                out = [errors[bits, key_per, value_per, name][1] for bits in (8, 4, 2)]
                assert moved[0] < moved[1] / 3 < moved[2] / 6 and out[0] < out[1] / 3 < out[2] / 6
    for bits in (8, 4, 2):
        # with outliers, keys per token move far more attention than keys per channel
        token, channel = (errors[bits, per, "token", "outliers"][0] for per in ("token", "channel"))
        assert token > 3 * channel
        # without, the two are close
        token, channel = (errors[bits, per, "token", "plain"][0] for per in ("token", "channel"))
        assert max(token, channel) < 1.5 * min(token, channel)
        # per channel, the outliers change nothing beyond rounding
        plain, outliers = (errors[bits, "channel", "token", name][0] for name in ("plain", "outliers"))
        assert abs(plain - outliers) < 0.05 * plain
        # values per token or per channel: close output errors
        for key_per in ("token", "channel"):
            token, channel = (errors[bits, key_per, per, "plain"][1] for per in ("token", "channel"))
            assert max(token, channel) < 1.5 * min(token, channel)


def attention_tolerance(queries, keys, values, eps) -> dict:
    """How far attention computed with unit roundoff u = eps / 2 may be from the exact one.

    A score sums d products: off by at most d u times the sum of |q_c k_c| (times the scale), which
    rescaling channels leaves alone. A softmax weight is then off by at most about twice the
    largest score error, relative to itself, plus (S + 4) u for the sum and the division. The
    attention moved, 0.5 sum_j |a'_j - a_j|, moves by at most that relative error (the weights sum
    to one). An output entry sum_j a_j v_jc is off by that relative error, plus S u, times
    sum_j a_j |v_jc|; the output error, a ratio of norms, by twice the norm of those bounds over
    the norm of the output, and by its own size times the output norm's relative error."""
    u = eps / 2
    d, S = queries.shape[-1], keys.shape[-2]
    sums = np.abs(queries).astype(np.float64) @ np.swapaxes(np.abs(keys).astype(np.float64), -1, -2)
    score = d * u * float(sums.max()) / math.sqrt(d)
    weight = 2 * score + (S + 4) * u
    output, weights = reference.attention(queries, keys, values)
    spread = np.linalg.norm(weights @ np.abs(values.astype(np.float64)))  # entry by entry, sum_j a_j |v_jc|
    relative_output = 2 * (weight + S * u) * spread / np.linalg.norm(output)
    return {"score": score, "moved": weight + S * u, "output": relative_output}


def test_one_large_channel_per_token_and_per_channel(tutorial, values):
    small = values["small"].numpy()
    assert (small[:, 2] > 10).all()
    for axis in (-1, -2):  # per token, then per channel
        error = np.abs(quantize_np(small, 4, axis) - small).max(axis=0)
        assert_printed(tutorial, error, atol=half_unit(3) + tolerance(EPS32, 4, 30.0))
    per_token = np.abs(quantize_np(small, 4, -1) - small).max(axis=0)
    per_channel = np.abs(quantize_np(small, 4, -2) - small).max(axis=0)
    others = [c for c in range(8) if c != 2]
    assert (per_token[others] > 5 * per_channel[others]).all()


def test_quantization_errors_are_recomputed_here(tutorial, values):
    queries, keys, kept_values = (values[name].numpy() for name in ("queries", "keys", "values"))
    stretch = values["stretch"].numpy()
    assert sorted(np.flatnonzero(stretch == 10).tolist()) == sorted(values["outlier_channels"].tolist())
    inputs = {"plain": (queries, keys), "outliers": (queries / stretch, keys * stretch)}
    # The page quantizes in float32, as this file's quantize_np does (the same IEEE operations), then
    # runs attention in float64: only float64 attention's rounding separates the two.
    tol = attention_tolerance(queries, keys, kept_values, EPS64)
    for name, (q, k) in inputs.items():
        for bits in (8, 4, 2):
            for key_per in ("token", "channel"):
                for value_per in ("token", "channel"):
                    moved, out = quantization_errors(q, k, kept_values, bits, key_per, value_per)
                    kept = values["errors"][bits, key_per, value_per, name]
                    case = (bits, key_per, value_per, name)
                    assert kept[0] == pytest.approx(moved, abs=tol["moved"]), case
                    assert kept[1] == pytest.approx(out, abs=tol["output"] * (1 + out)), case
    check_claims(values["errors"])
    rows = []
    for bits in (8, 4, 2):
        for key_per in ("token", "channel"):
            for value_per in ("token", "channel"):
                (w_plain, o_plain), (w_out, o_out) = (
                    values["errors"][bits, key_per, value_per, name] for name in ("plain", "outliers")
                )
                rows.append([bits, w_plain, w_out, o_plain, o_out])
    assert_printed(tutorial, rows, atol=[0] + [FOUR] * 4)
    score_gap = values["score_gap"].item()  # two float32 products of the same scores
    assert score_gap <= 2 * attention_tolerance(queries, keys, kept_values, EPS32)["score"]
    assert_printed(tutorial, [score_gap], rtol=sci_rtol(1))


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_the_quantization_claims_hold_for_other_draws(seed):
    errors, *_ = experiment(seed)
    check_claims(errors)


def test_bytes_saved_by_quantization_counted_by_hand(tutorial, values):
    d, group = 64, 32  # one head of 64, keys per channel in groups of 32, float16 scales
    by_hand = {16: 2 * d * 2}
    for bits in (8, 4, 2):
        codes = 2 * d * bits / 8  # a key and a value
        by_hand[bits] = codes + 2 * 2 + 2 * d * 2 / group  # values' scale and zero; keys' per group
    assert values["cache_bytes"] == by_hand
    rows = [[bits, b, 100 * (1 - b / by_hand[16])] for bits, b in by_hand.items()]
    assert_printed(tutorial, rows, atol=[0, 0, half_unit(1)])


# --- linear attention ----------------------------------------------------------------------------


def test_linear_attention_forms_agree_with_the_formula(tutorial, values):
    q, k, v = (values[name] for name in ("q64", "k64", "v64"))
    expected, _ = linear_np(q.numpy(), k.numpy(), v.numpy(), causal=True)
    tol = linear_tolerance(q, k, v, EPS64, against_numpy=True)
    np.testing.assert_allclose(values["quadratic"].numpy(), expected, rtol=0, atol=tol)
    np.testing.assert_allclose(values["recurrent"].numpy(), expected, rtol=0, atol=tol)
    assert values["lin_gap64"].item() <= linear_tolerance(q, k, v, EPS64)
    assert values["lin_gap32"].item() <= linear_tolerance(q, k, v, EPS32)
    state = values["lin_state"]
    phi_k = phi_np(k.numpy())
    state_tol = tolerance(EPS64, 65, float((1 + phi_k.max()) * v.abs().max()))
    np.testing.assert_allclose(
        state.state.numpy(), np.swapaxes(phi_k, -1, -2) @ v.numpy(), rtol=0, atol=state_tol
    )
    assert_printed(tutorial, [2, 4, 64, 64, 2, 4, 16, 16, 2, 4, 16], gaps=True)
    shown = [values["lin_gap64"].item(), values["lin_gap32"].item()]
    assert_printed(tutorial, shown, rtol=sci_rtol(1), gaps=True)


def test_the_state_stays_the_same_size(tutorial, values):
    rows = []
    for T in (16, 128, 1024):
        kv = 2 * 4 * T * 32 * 4  # keys and values: 4 heads of 32, float32
        state = 4 * (32 * 32 + 32) * 4  # per head a 32 x 32 state and 32 normalizers
        assert values["memory"][T] == (kv, state)
        rows.append([T, kv, state])
    assert_printed(tutorial, rows)


# --- recall --------------------------------------------------------------------------------------


def test_recall_accuracies_hold_on_contexts_drawn_here(tutorial, values):
    """Each kept model answers 4,096 fresh queries per count here. The page's accuracies came from
    4,096 other queries: two estimates of one accuracy differ by less than 6 standard errors
    (sqrt(1/4 / 4096) each, at most) but for a chance below 1e-8."""
    pairs, recall = values["PAIRS"], values["recall"]
    assert pairs == (1, 2, 4, 8, 16, 32, 64) and values["SEEDS"] == (0, 1, 2, 3)
    margin = 6 * math.sqrt(2 * 0.25 / 4096)
    g = torch.Generator().manual_seed(2024)
    for kind, models in values["models"].items():
        for seed, model in enumerate(models):
            assert model.attention == kind
            for i, n in enumerate(pairs):
                keys, vals, queries, answers = draw_contexts(g, 512, n, 8)
                with torch.no_grad():
                    here = (model(keys, vals, queries).argmax(dim=-1) == answers).float().mean().item()
                assert abs(here - recall[kind][seed, i]) < margin, (kind, seed, n)
    # The page's claims, for each of the four seeds, with margins far beyond sampling error.
    for seed in range(4):
        assert (recall["softmax"][seed] > 0.95).all()
        linear = recall["linear"][seed]
        assert linear[0] > 0.9 and linear[-1] < 0.5
        assert linear[-1] < linear[2] - 0.3  # it falls as the pairs grow
        assert (recall["softmax"][seed] - linear)[-1] > 0.4
    rows = [[n, *recall["softmax"][:, i], *recall["linear"][:, i]] for i, n in enumerate(pairs)]
    assert_printed(tutorial, rows, atol=[0] + [half_unit(2)] * 8)
    assert_printed(tutorial, [1 / 64], atol=half_unit(3))


def test_recall_training_stays_within_the_build_budget(tutorial, values):
    """The issue's budget: 10 s for the training, CPU time, on the build machine."""
    assert 0 < values["train_seconds"] < 10
    assert_printed(tutorial, [8, values["train_seconds"]], atol=[0, half_unit(1)], gaps=True)


def test_both_recall_models_have_the_same_parameters(values):
    counts = {
        kind: [sum(p.numel() for p in m.parameters()) for m in ms] for kind, ms in values["models"].items()
    }
    by_hand = (
        64 * 32 + 64 * 32 + 32 * 16 + 32 * 16 + 32 * 32 + 32 * 64 + 64
    )  # embeddings, W_Q, W_K, W_V, head
    assert counts == {"softmax": [by_hand] * 4, "linear": [by_hand] * 4}


def test_every_linear_similarity_is_positive_so_every_pair_interferes(tutorial, values):
    """elu(x) + 1 > 0 everywhere, so f(q) . f(k) > 0 for any query and key: recomputed here in
    float64 NumPy from each trained linear model's weights, over every query key and every
    possible (key, value) pair."""
    smallest = []
    for model in values["models"]["linear"]:
        E_k, E_v = (
            model.key_embed.weight.detach().double().numpy(),
            model.value_embed.weight.detach().double().numpy(),
        )
        q = E_k @ weights_of(model.q_proj)  # (64, d_k)
        pairs = (E_k[:, None, :] + E_v[None, :, :]).reshape(-1, E_k.shape[1])  # (4096, C)
        k = pairs @ weights_of(model.k_proj)
        similar = phi_np(q) @ phi_np(k).T
        assert (phi_np(q) > 0).all() and (phi_np(k) > 0).all()
        smallest.append(similar.min())
    assert min(smallest) > 0
    np.testing.assert_allclose(values["smallest"], smallest, rtol=1e-4, atol=1e-6)
    assert_printed(tutorial, smallest, atol=half_unit(3) + 1e-5)


def test_a_linear_query_reads_little_from_its_own_pair(tutorial, values):
    """The mean weight a query puts on its own pair, on contexts drawn here, for every seed: near
    all of it for softmax, a small share for linear at 64 pairs (margins far beyond sampling)."""
    g = torch.Generator().manual_seed(2025)
    for n in (16, 64):
        keys, vals, _, _ = draw_contexts(g, 64, n, 1)
        for kind, models in values["models"].items():
            for model in models:
                with torch.no_grad():
                    w = model.attention_weights(keys, vals, keys).numpy()  # (64, n, n)
                np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-5)
                own = np.diagonal(w, axis1=-2, axis2=-1).mean()
                if kind == "softmax":
                    assert own > 0.9, (kind, n)
                elif n == 64:
                    assert own < 0.2, (kind, n)
    on_own = values["on_own"]
    assert on_own["softmax", 64] > 0.9 > 0.2 > on_own["linear", 64]
    assert on_own["linear", 64] < on_own["linear", 16] < on_own["softmax", 16]
    for share in on_own.values():
        assert_printed(tutorial, [share], atol=half_unit(3))


def test_the_opening_picture_is_the_table(tutorial, values):
    """The bars' bytes per token, as the picture's text alternative lists them, counted by hand."""
    (first, *_) = displayed(tutorial, PLOT_MIME)
    for method, total in table_by_hand(32_768, 4_096).items():
        assert f"{method} {total / 32_768:,.0f}" in first, method


# --- the table ----------------------------------------------------------------------------------


def table_by_hand(T: int, window: int) -> dict[str, int]:
    """Bytes of one layer of 128 heads of 128 after T tokens, 16-bit numbers, counted here."""
    H, d, B = 128, 128, 2
    grouped = T // 32 * 32

    def quantized(bits):
        values_part = H * d * T * bits // 8 + 2 * H * T * B  # codes; a scale and a zero per token
        keys_part = H * d * grouped * bits // 8 + 2 * H * d * (T // 32) * B + H * d * (T - grouped) * B
        return values_part + keys_part

    return {
        "MHA, 128 heads": 2 * H * d * T * B,
        "GQA, 8 heads": 2 * 8 * d * T * B,
        "MQA, 1 head": 2 * d * T * B,
        "MLA, d_c + d_R = 576": 576 * T * B,
        "MHA, int8": quantized(8),
        "MHA, int4": quantized(4),
        "MHA, int2": quantized(2),
        "MHA, window 4,096": 2 * H * d * min(T, window) * B,
        "linear attention": H * (d * d + d) * B,
    }


def object_bytes(cache) -> int:
    """The bytes of a cache object, counted from its tensors here, not by its nbytes."""
    if hasattr(cache, "latents"):
        tensors = [*cache.latents, *cache.rope_keys]
    elif hasattr(cache, "state"):
        tensors = [cache.state, cache.normalizer]
    elif hasattr(cache, "_keys"):
        tensors = []
        for stream in (*cache._keys, *cache._values):
            for group in stream.groups:
                tensors += [group.codes, group.scale, group.zero]
            if stream.residual is not None:
                tensors.append(stream.residual)
    else:
        tensors = [*cache.keys, *cache.values]
    return sum(t.numel() * t.element_size() for t in tensors)


def test_the_table_counted_by_hand(tutorial, values):
    T = values["T_table"]
    assert (T, values["W_table"]) == (32_768, 4_096)
    table = table_by_hand(T, 4_096)
    assert list(values["gives_up"]) == list(table)
    for total in table.values():
        assert_printed(tutorial, [total / T, total / 2**20], atol=[half_unit(0), half_unit(2)], gaps=True)
    int2 = table["MHA, int2"]
    assert_printed(tutorial, [100 * (int2 - 2 * 128 * 128 * T * 2 // 8) / int2], atol=half_unit(0))


def test_every_formula_equals_a_real_cache_object(tutorial, values):
    T, window = values["T_check"], values["W_check"]
    assert (T, window) == (64, 48)
    by_hand = table_by_hand(T, window)
    objects = values["objects"]
    for method, expected in by_hand.items():
        assert object_bytes(objects[method]) == expected, method
        assert values["checked"][method] == (expected, expected)
    assert objects["MHA, window 4,096"].length == window
    assert objects["linear attention"].length == T
    for expected in by_hand.values():
        assert_printed(tutorial, [expected, expected])


# --- exercises ---------------------------------------------------------------------------------------


def test_exercises(tutorial, values):
    # 1. DeepSeek-V2-Lite: 576 numbers per token and layer, against 2 x 16 x 128 for MHA
    mla_lite, mha_lite = 576 * LITE["layers"] * 2, 2 * LITE["heads"] * 128 * LITE["layers"] * 2
    assert (values["mla_lite"], values["mha_lite"]) == (mla_lite, mha_lite)
    v2_ratio = 2 * 128 * 128 / 576
    assert values["v2_ratio"] == pytest.approx(v2_ratio) and v2_ratio / (
        mha_lite / mla_lite
    ) == pytest.approx(8)
    assert_printed(tutorial, [mla_lite / 1024, mha_lite / 1024], atol=half_unit(1), gaps=True)
    assert_printed(tutorial, [mha_lite / mla_lite], atol=half_unit(2))
    assert_printed(tutorial, [v2_ratio], atol=half_unit(2))
    # 2. the absorbed form through PyTorch's multi-query attention equals the layer
    mla, x = values["mla"], values["x"]
    expected = mla_np(copy.deepcopy(mla).double(), x.double().numpy())["output"]
    np.testing.assert_allclose(as64(values["by_hand"]), expected, rtol=0, atol=mla_tolerance(mla, x, EPS32))
    # 3. bits per number of a 2-bit cache, 8 heads of 128, 256 tokens, float16 scales
    for group in (32, 128):
        keys = 2 + 2 * 16 / group  # codes, then a scale and a zero per channel and group
        vals = 2 + 2 * 16 / 128  # codes, then a scale and a zero per token and head of 128
        assert_printed(tutorial, [group, (keys + vals) / 2], atol=[0, half_unit(3)])
    assert values["per_number"] == (2 + 2 * 16 / 128 + 2 + 2 * 16 / 128) / 2  # the last, groups of 128
    # 4. the break-even lengths: H (d^2 + d) numbers against 2 H_kv d per token
    state = 128 * (128 * 128 + 128)
    for kv_heads in (128, 8):
        tokens = state // (2 * kv_heads * 128) + 1
        assert 2 * kv_heads * 128 * tokens > state >= 2 * kv_heads * 128 * (tokens - 1)
        assert_printed(tutorial, [tokens])
    # 5. four calls carry the state: the same output as one
    q, k, v = (values[name] for name in ("q64", "k64", "v64"))
    torch.testing.assert_close(
        values["four_calls"], values["recurrent"], rtol=0, atol=linear_tolerance(q, k, v, EPS64)
    )
    assert values["carried"].length == 64


def test_every_verdict_the_tutorial_prints_is_the_truth(tutorial):
    assert verdicts(tutorial) == [True]  # every formula equals its object
