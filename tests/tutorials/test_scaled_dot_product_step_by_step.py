"""The tutorial "Scaled dot-product attention and heads" (page 4 of the core path), as the build
executed it: the scaling experiment, the two hand-set heads on the sentence step by step, and the
whole CausalMultiHeadAttention module the page shows, which is read from its cell and checked here
as a reader's file would be: against multi-head attention written out in float64 with float32's
bounds (tests/support/transformer_block_reference.py), against PyTorch's nn.MultiheadAttention, for
causality, and for its error on a bad width."""

from __future__ import annotations

import importlib.util
import math
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

from tests.support.printed import allclose_decided
from tests.support.reference import U32, as64, causal, softmax
from tests.support.sentence import ALICE, BOB, MET, SHE, X
from tests.support.sentence import HEADS_W_K as W_K
from tests.support.sentence import HEADS_W_O as W_O
from tests.support.sentence import HEADS_W_Q as W_Q
from tests.support.sentence import HEADS_W_V as W_V
from tests.support.shown import assert_printed, drawn, half_unit, printed_by_cell, verdicts
from tests.support.transformer_block_reference import attention, held, linear, merge, multi_head, split

TWO = half_unit(2)
H, d_k = 2, 3
T, C = X.shape
FEATURES = {name: i for i, name in enumerate(["name", "verb", "pronoun", "female", "alice", "bob"])}
CLASS_LINES = 25  # "one visible block of at most about 30 lines"; the site shows none longer than 25


def sentence_heads() -> dict:
    """The two heads on the sentence, exactly, with float32's bounds (the projections of small
    integers are exact in float32)."""
    q, k, v = (split(held(X[None] @ W), H) for W in (W_Q, W_K, W_V))
    heads = attention(q, k, v, causal(T), U32)
    concat = merge(heads["out"])
    return {"weights": heads["weights"], "heads": heads["out"], "output": linear(concat, W_O.T, None, U32)}


EXACT = sentence_heads()


@pytest.fixture(scope="module")
def pictures(tutorial) -> list[str]:
    found = drawn(tutorial)
    # she through the two heads; the scaling plot; the split; each head's weights times its values;
    # the merge.
    assert len(found) == 5
    return found


@pytest.fixture(scope="module")
def module_file(tutorial, tmp_path_factory):
    """The page's CausalMultiHeadAttention cell, written to a file as a reader would save it."""
    (cell,) = [c for c in tutorial.code_cells if "class CausalMultiHeadAttention" in c.source]
    path = tmp_path_factory.mktemp("reader") / "my_attention.py"
    path.write_text(cell.source + "\n")
    return path


@pytest.fixture(scope="module")
def module_class(module_file):
    spec = importlib.util.spec_from_file_location("my_attention", module_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # the cell runs alone: its imports are its own
    return module.CausalMultiHeadAttention


def test_the_notebook_ran_cleanly(tutorial):
    assert "".join(printed_by_cell(tutorial, "stderr")) == ""


def test_the_scaling_experiment(tutorial, values):
    """Unit-variance queries and keys: the scores' spread follows sqrt(d_k) unscaled and 1 scaled
    (500 queries of 10 keys: an estimated standard deviation is within a few percent); unscaled,
    the rows saturate; scaled, the largest weight hardly moves."""
    widths, keys = values["widths"], values["keys"]
    plain, scaled = (as64(values["table"][name]) for name in ("plain", "scaled"))
    np.testing.assert_allclose(plain[:, 0], np.sqrt(widths), rtol=0.1)
    np.testing.assert_allclose(scaled[:, 0], 1.0, rtol=0.1)
    assert (np.diff(plain[:, 1]) > 0).all() and plain[-1, 1] > 0.9
    assert scaled[:, 1].max() - scaled[:, 1].min() < 0.1 and scaled[:, 1].min() > 1 / keys
    z = as64(values["z"])  # the last width's draws, again in float64
    for column, s in ((plain, z), (scaled, z / np.sqrt(widths[-1]))):
        np.testing.assert_allclose(column[-1], [s.std(ddof=1), softmax(s).max(-1).mean()], rtol=1e-9)


def test_the_split_is_a_view_of_q(tutorial, values):
    Q = X[None] @ W_Q
    np.testing.assert_array_equal(as64(values["Q"]), Q)
    np.testing.assert_array_equal(as64(values["q"])[0, 1], Q[0, :, d_k:])  # head 1: features 3 to 5
    np.testing.assert_array_equal(as64(values["q"])[0, 0], Q[0, :, :d_k])
    assert_printed(tutorial, [1, 4, 6, 1, 2, 4, 3])  # the shapes, before and after


def test_the_heads_look_for_different_things(values):
    """Head 0's weight sits in Alice's column, head 1's in met's: she, met and Bob commit to
    different tokens in the two heads, by more than rounding."""
    w, dw = EXACT["weights"]
    assert (np.abs(as64(values["weights"]) - w) <= dw).all()
    assert w[0, 0, SHE].argmax() == ALICE and w[0, 0, MET].argmax() == ALICE
    assert w[0, 1, SHE].argmax() == MET and w[0, 1, BOB].argmax() == MET
    for h, token, top in ((0, SHE, ALICE), (0, MET, ALICE), (1, SHE, MET), (1, BOB, MET)):
        assert w[0, h, token, top] - dw[0, h, token, top] > 0.8
    np.testing.assert_allclose(w[0, 0, BOB, :3], 1 / 3, rtol=1e-15)  # nothing to ask: even


def test_merge_and_w_o(tutorial, values):
    out, bound = EXACT["output"]
    assert (np.abs(as64(values["output"]) - out) <= bound).all()
    she = out[0, SHE]
    assert she[FEATURES["alice"]] > 0.8 and she[FEATURES["verb"]] > 0.85 and she[FEATURES["bob"]] < 0.1
    # The broken merge (no transpose): Alice's row holds met's head-0 output in head 1's slot, so
    # the first token reads a later one and gains a "verb" it cannot see; merged right, it has none.
    heads = EXACT["heads"][0]
    broken = heads.reshape(1, T, C) @ W_O
    np.testing.assert_allclose(broken[0, ALICE, FEATURES["verb"]], heads[0, 0, MET, 0], rtol=1e-15)
    assert broken[0, ALICE, FEATURES["verb"]] > 0.85 and out[0, ALICE, FEATURES["verb"]] == 0
    assert_printed(tutorial, [*broken[0, ALICE], *out[0, ALICE]], atol=TWO + 1e-6)


def test_pictures_draw_the_computed_numbers(tutorial, pictures, values):
    she_picture, _, split_picture, weights_picture, merge_picture = pictures
    w, _ = EXACT["weights"]
    out, _ = EXACT["output"]
    assert_printed(tutorial, [*w[0, 0, SHE], *w[0, 1, SHE]], atol=TWO + 1e-6, gaps=True, texts=[she_picture])
    assert_printed(tutorial, out[0, SHE], atol=TWO + 1e-6, texts=[she_picture])
    for W in (W_Q, W_K, W_V):
        assert_printed(tutorial, (X @ W).ravel(), texts=[split_picture], gaps=True)
    heads, heads_bound = EXACT["heads"]
    for h in range(H):  # each head's weights, times its values (small integers), give its output
        assert_printed(tutorial, w[0, h][causal(T)], atol=TWO + 1e-6, texts=[weights_picture])
        values = (X @ W_V)[:, h * d_k : (h + 1) * d_k]
        assert_printed(tutorial, values, texts=[weights_picture])
        assert_printed(tutorial, heads[0, h], atol=TWO + heads_bound[0, h], texts=[weights_picture])
    assert_printed(tutorial, out[0].ravel(), atol=TWO + 1e-6, texts=[merge_picture])


def test_the_module_fits_in_one_block_that_runs_alone(module_file, module_class):
    lines = module_file.read_text().strip().splitlines()
    assert len(lines) <= CLASS_LINES
    layer = module_class(d_model=8, n_heads=2)
    for name in ("W_q", "W_k", "W_v", "W_o"):
        linear_layer = getattr(layer, name)
        assert isinstance(linear_layer, torch.nn.Linear) and linear_layer.bias is None
        assert linear_layer.weight.shape == (8, 8)
    with pytest.raises(ValueError, match="n_heads"):
        module_class(d_model=10, n_heads=3)


@pytest.mark.parametrize(
    ("B", "T_", "C_", "H_", "seed"), [(1, 4, 6, 2, 0), (3, 7, 8, 2, 1), (2, 5, 12, 4, 2), (1, 1, 4, 1, 3)]
)
def test_the_module_is_causal_multi_head_attention(module_class, B, T_, C_, H_, seed):
    """Against multi-head attention written out in float64 from the module's own weights, within
    float32's bound at every step; and against PyTorch's nn.MultiheadAttention in float64."""
    torch.manual_seed(seed)
    layer = module_class(d_model=C_, n_heads=H_)
    x = torch.randn(B, T_, C_)
    with torch.no_grad():
        got = as64(layer(x))
    state = {f"{p}_proj.weight": as64(getattr(layer, f"W_{p}").weight) for p in "qkvo"}
    state = {name.replace("o_proj", "out_proj"): value for name, value in state.items()}
    value, bound = multi_head(held(x), state, H_, causal(T_), U32)["out"]
    assert (np.abs(got - value) <= bound).all()
    torch_layer = torch.nn.MultiheadAttention(C_, H_, bias=False, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        torch_layer.in_proj_weight.copy_(torch.cat([getattr(layer, f"W_{p}").weight for p in "qkv"]))
        torch_layer.out_proj.weight.copy_(layer.W_o.weight)
        blocked = ~torch.tril(torch.ones(T_, T_, dtype=torch.bool))  # True: may not attend
        expected, _ = torch_layer(*(x.double(),) * 3, attn_mask=blocked)
    np.testing.assert_allclose(expected.numpy(), value, rtol=1e-12, atol=1e-12)


def test_the_module_is_causal_to_the_last_bit(module_class):
    torch.manual_seed(5)
    layer = module_class(d_model=8, n_heads=2)
    x = torch.randn(2, 6, 8)
    changed = x.clone()
    changed[:, 4] = torch.randn(2, 8)
    with torch.no_grad():
        before, after = layer(x), layer(changed)
    assert torch.equal(before[:, :4], after[:, :4])  # the changed key has weight exactly 0 for them
    assert not torch.equal(before[:, 4:], after[:, 4:])


def test_the_pages_checks_say_what_the_float64_references_say(values):
    """The sentence: the module with the hand-set matrices is the steps; random weights: the module
    is nn.MultiheadAttention and SDPA with is_causal=True (computed above in float64)."""
    assert allclose_decided(as64(values["output"]), EXACT["output"][0], atol=1e-8) is True


def test_the_reader_check_passes_the_pages_module(module_file):
    """`python -m attn_ref.check causal-mha`, the command the page gives, passes the page's own module."""
    result = subprocess.run(
        [sys.executable, "-m", "attn_ref.check", "causal-mha", str(module_file)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_exercise_1_one_head_splits_shes_weight(tutorial, values):
    Q, K = X @ W_Q, X @ W_K
    z = np.where(causal(T), Q @ K.T / math.sqrt(C), -np.inf)
    one = softmax(z)
    assert max(one[SHE, ALICE], one[SHE, MET]) < 0.6 < one[SHE, ALICE] + one[SHE, MET]
    w, _ = EXACT["weights"]
    assert min(w[0, 0, SHE, ALICE], w[0, 1, SHE, MET]) > 0.8
    assert_printed(tutorial, one[SHE], atol=TWO + 1e-6)


def test_exercise_2_shifting_keys_changes_nothing_shifting_queries_does(tutorial, values):
    c = as64(values["c"])
    q, k = (split(held(X[None] @ W), H)[0] for W in (W_Q, W_K))

    def weights(qq, kk):
        return softmax(np.where(causal(T), qq @ np.swapaxes(kk, -1, -2) / math.sqrt(d_k), -np.inf))

    base = weights(q, k)
    assert np.abs(weights(q, k + c) - base).max() < 1e-12
    assert np.abs(weights(q + c, k) - base).max() > 0.1
    assert_printed(tutorial, [0.0, np.abs(weights(q + c, k) - base).max()], atol=TWO + 1e-5, gaps=True)


def test_exercise_3_four_c_squared_parameters_for_any_number_of_heads(tutorial):
    assert_printed(tutorial, [1, 4 * 512**2, 8, 4 * 512**2, 64, 4 * 512**2, 4, 2, 4 * 512**2])


def test_every_verdict_the_tutorial_prints_is_the_truth(tutorial):
    expected = [
        True,  # the sentence, same as the steps
        True,  # random weights, same as nn.MultiheadAttention
        True,  # same as SDPA with is_causal=True
    ]
    assert verdicts(tutorial) == expected


def test_links_inside_the_page_land(built_site):
    page = (built_site.path / "tutorials" / "scaled_dot_product_step_by_step" / "index.html").read_text()
    ids = set(re.findall(r'\bid="([^"]+)"', page))
    targets = set(re.findall(r'href="#([^"]+)"', page))
    assert targets - ids == set()
