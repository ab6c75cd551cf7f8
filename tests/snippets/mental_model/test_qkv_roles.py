"""mental_model/qkv_roles.py: hand-set projections make 'she' find Alice, against PyTorch."""

from __future__ import annotations

import numpy as np
import torch

from tests.printed import block_after, line_after, numbers
from tests.snippets.mental_model.helpers import alice_tokens

ALICE, SHE = 0, 3


def test_qkv_roles_make_she_find_alice(printed):
    X = torch.tensor(alice_tokens())
    W_Q = torch.zeros(6, 2, dtype=torch.float64)
    W_Q[2] = 4.0  # pronoun -> (a name, female)
    W_K = torch.zeros(6, 2, dtype=torch.float64)
    W_K[0, 0] = W_K[3, 1] = 1.0  # name, female
    W_V = torch.zeros(6, 2, dtype=torch.float64)
    W_V[4, 0] = W_V[5, 1] = 1.0  # alice, bob
    sdpa = torch.nn.functional.scaled_dot_product_attention

    plain = torch.softmax(X @ X.T / 6**0.5, dim=-1)
    shown = numbers(line_after(printed, "plain weights of 'she' (Alice, met, Bob, she):"))
    np.testing.assert_allclose(shown, plain[SHE], atol=6e-4)
    assert int(plain[SHE].argmax()) == SHE  # plain: 'she' attends most to itself

    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    np.testing.assert_allclose(block_after(printed, "scores Q K^T:", rows=4), Q @ K.T)
    assert (Q @ K.T)[SHE, ALICE] > 0  # she scores Alice
    assert (Q @ K.T)[ALICE].abs().max() == 0  # Alice scores no one
    weights = torch.softmax(Q @ K.T / 2**0.5, dim=-1)
    output = sdpa(Q, K, V)
    np.testing.assert_allclose(
        numbers(line_after(printed, "projected weights of 'she' (Alice, met, Bob, she):")),
        weights[SHE],
        atol=6e-4,
    )
    assert int(weights[SHE].argmax()) == ALICE  # projected: 'she' attends most to Alice
    np.testing.assert_allclose(
        numbers(line_after(printed, "output of 'she' (alice, bob):")), output[SHE], atol=6e-4
    )
    np.testing.assert_allclose(numbers(line_after(printed, "key of 'met' (W_K ignores 'verb'):")), K[1])
