"""The fully-masked-row probe under the installed torch: each value it found (its ``results``) measured
again here, on other inputs, and named by comparing it with two float64 references (the reference
attention, which gives a query that sees no key zero weights, and a plain softmax over scores of -inf,
which gives nan); and the committed table's row for this version equal to what the probe prints now."""

import contextlib
import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from scripts.torch_versions import TABLE, parse
from tests.support import worst_case_rounding
from tests.support.reference import attention, plain_attention

BACKENDS = {"default": None, "math": SDPBackend.MATH, "flash": SDPBackend.FLASH_ATTENTION}


def name(got, zeros, nan):
    """Which reference ``got`` equals: 'zeros' (the reference attention) or 'nan' (a plain softmax)."""
    assert np.isnan(nan).all() and (zeros == 0).all(), "the references disagree with themselves"
    if np.isnan(got).all():
        return "nan"
    if np.allclose(got, zeros, atol=1e-6):
        return "zeros"
    return "other"


def test_the_probe_ran_on_the_installed_torch(values):
    assert values["results"]["torch"] == torch.__version__


@pytest.mark.parametrize("backend", BACKENDS)
def test_sdpa(values, backend):
    rng = np.random.default_rng(1)
    q, k, v = rng.standard_normal((3, 1, 2, 4, 8))  # (B, H, L, E), as many keys as queries
    allowed = np.array([[0, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]], dtype=bool)
    tensors = [torch.tensor(a, dtype=torch.float32) for a in (q, k, v)] + [torch.tensor(allowed)]
    with sdpa_kernel(BACKENDS[backend]) if BACKENDS[backend] else contextlib.nullcontext():
        out = F.scaled_dot_product_attention(*tensors[:3], attn_mask=tensors[3]).numpy()
        chosen = SDPBackend(torch._fused_sdp_choice(*tensors[:3], attn_mask=tensors[3]))
    reference, _ = attention(q, k, v, allowed)
    # The other queries: the exact attention of the float32 inputs, up to float32 rounding.
    bounded, _ = worst_case_rounding.attention(
        *(worst_case_rounding.exact(t) for t in tensors[:3]), allowed=allowed
    )
    assert bounded.map(lambda a: a[:, :, 1:]).holds(out[:, :, 1:])
    expected = name(out[:, :, 0], reference[:, :, 0], plain_attention(q, k, v, allowed)[0][:, :, 0])
    assert values["results"][f"sdpa_{backend}"] == expected
    kernel = values["results"][f"sdpa_{backend}_kernel"]
    assert ("_math" in kernel, "flash" in kernel) == (
        chosen == SDPBackend.MATH,
        chosen == SDPBackend.FLASH_ATTENTION,
    )


def heads(a, H):
    """(B, T, C) -> (B, H, T, C / H)."""
    B, T, C = a.shape
    return a.reshape(B, T, H, C // H).transpose(0, 2, 1, 3)


@pytest.mark.parametrize("need_weights", [True, False], ids=["weights", "no_weights"])
@pytest.mark.parametrize("path", ["grad", "no_grad"])
@pytest.mark.parametrize("mask_name", ["attn_mask", "key_padding_mask"])
def test_multihead_attention(values, monkeypatch, mask_name, path, need_weights):
    torch.manual_seed(1)
    B, T, C, H = 2, 5, 6, 2
    mha = torch.nn.MultiheadAttention(C, H, batch_first=True).eval()
    with torch.no_grad():  # biases that are not zero, so that a zero attention output shows as out_proj.bias
        mha.in_proj_bias.normal_()
        mha.out_proj.bias.normal_()
    x = torch.randn(B, T, C)
    masked = torch.zeros(B, T, T, dtype=torch.bool)  # True: may not see; (batch, query, key)
    if mask_name == "attn_mask":
        mask = torch.zeros(T, T, dtype=torch.bool)
        mask[3] = True  # query 3 sees no key
        mask[0, 4] = True
        masked[:] = mask
        fully_masked = (slice(None), 3)
    else:
        mask = torch.zeros(B, T, dtype=torch.bool)
        mask[0] = True  # sequence 0 is all padding
        mask[1, 1:3] = True
        masked[:] = mask[:, None, :]
        fully_masked = (0,)
    fast = []  # calls to the fast path's kernel
    native = torch._native_multi_head_attention
    monkeypatch.setattr(
        torch, "_native_multi_head_attention", lambda *a, **kw: fast.append(1) or native(*a, **kw)
    )
    with torch.set_grad_enabled(path == "grad"):
        out, w = mha(x, x, x, need_weights=need_weights, **{mask_name: mask})

    # The reference, in float64, from the module's own weights (nn.Linear stores W^T).
    W, b = mha.in_proj_weight.double().detach().numpy(), mha.in_proj_bias.double().detach().numpy()
    q, k, v = (
        heads(x.double().numpy() @ W[i * C : (i + 1) * C].T + b[i * C : (i + 1) * C], H) for i in range(3)
    )
    W_o, b_o = mha.out_proj.weight.double().detach().numpy(), mha.out_proj.bias.double().detach().numpy()
    allowed = ~masked.numpy()[:, None]  # (B, 1, T, T)
    results = {}
    for kind, fn in (("zeros", attention), ("nan", plain_attention)):
        o, weights = fn(q, k, v, allowed)
        results[kind] = (o.transpose(0, 2, 1, 3).reshape(B, T, C) @ W_o.T, weights.mean(axis=1))
    others = ~np.isin(np.arange(B * T).reshape(B, T), np.arange(B * T).reshape(B, T)[fully_masked])
    # The queries that see a key: the exact attention of the module, up to float32 rounding.
    bounded = worst_case_rounding.multihead_attention(x.numpy(), mha, allowed)
    np.testing.assert_allclose(
        bounded.value[others], results["zeros"][0][others] + b_o, rtol=1e-12, atol=1e-12
    )
    assert bounded.map(lambda a: a[others]).holds(out.detach()[others])

    case = f"mha_{mask_name}_{path}_{'weights' if need_weights else 'no_weights'}"
    found = values["results"]
    rows = out.detach().numpy()[fully_masked] - mha.out_proj.bias.detach().numpy()  # the attention's part
    expected = name(rows, results["zeros"][0][fully_masked], results["nan"][0][fully_masked])
    assert found[f"{case}_output"] == expected
    if w is None:
        assert found[f"{case}_weights"] == "None"
    else:
        rows = w.detach().numpy()[fully_masked]
        expected = name(rows, results["zeros"][1][fully_masked], results["nan"][1][fully_masked])
        assert found[f"{case}_weights"] == expected
    assert ("_native_multi_head_attention" in found[f"{case}_kernel"]) == bool(fast)


def test_the_probe_prints_what_it_found(printed, values):
    """Its output is the table's data: parsed as scripts/torch_versions.py parses it, it is ``results``."""
    assert parse(printed) == values["results"]


def test_the_committed_table_holds_what_the_probe_prints_now(printed):
    table = json.loads(TABLE.read_text())
    version = torch.__version__.split("+")[0]
    if version not in table:  # the pinned version always is; another one may be installed by hand
        pytest.skip(f"torch {version} was not measured (python -m scripts.torch_versions {version})")
    assert table[version] == parse(printed)
