"""``python -m attn_ref.check``: it passes a correct solution written for the tests
(tests/support/attention_solutions.py), and fails each kind of wrong solution, made from it by one
edit, on the property that the mistake breaks, with words that name it; a file it cannot use gets a
message that says what was expected."""

from __future__ import annotations

from pathlib import Path

import pytest

from attn_ref.check import EXERCISES, UnusableFileError, check, main
from tests.support.forked import run_python

SOLUTIONS = Path(__file__).parents[1] / "support" / "attention_solutions.py"
SPLIT = ".view(B, T, self.n_heads, d_k).transpose(1, 2)"
MERGE = "heads.transpose(1, 2).reshape(B, T, C)"
FUTURE = "torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)"


def _written(tmp_path: Path, edits: list[tuple[str, str]] = (), name: str = "my_attention.py") -> Path:
    """The solutions' file with each ``(old, new)`` edit made in the class (its first occurrence)."""
    text = SOLUTIONS.read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1 if old != SPLIT else 3)
    path = tmp_path / name
    path.write_text(text)
    return path


def _verdicts(exercise: str, path: Path) -> dict[str, str]:
    return {result.name: str(result) for result in check(exercise, path)}


@pytest.mark.parametrize("exercise", EXERCISES)
def test_a_correct_solution_passes_every_property(tmp_path, exercise):
    results = check(exercise, _written(tmp_path))
    assert [r.name for r in results] == [c.name for c in EXERCISES[exercise].checks]
    assert all(r.passed for r in results), [str(r) for r in results]


# Each mistake: the edit that makes it, the line that must fail and words it must say, and the
# properties that must still pass (the others may fail as a consequence, or go unchecked).
MISTAKES = {
    "no scaling": (
        [(" / math.sqrt(d_k)", "")],
        "scaling: FAILED: scores are divided by 1.00 (no scaling); expected sqrt(d_k) = sqrt(4) = 2.00",
        ["shape", "projections", "softmax", "causality", "heads"],
    ),
    "scaled by the model's width": (
        [("math.sqrt(d_k)", "math.sqrt(C)")],
        "scaling: FAILED: scores are divided by 2.83 (sqrt(d_model) instead of sqrt(d_k)",
        ["shape", "projections", "softmax", "causality", "heads"],
    ),
    "no mask": (
        [('        scores = scores.masked_fill(future, float("-inf"))\n', "")],
        "causality: FAILED: changing token 5 changed the output at positions 0, 1, 2, 3 and 4",
        ["shape", "projections", "softmax", "heads", "scaling"],
    ),
    "the mask the wrong way": (
        [(FUTURE, "torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)")],
        "causality: FAILED: changing token 5 changed the output at positions 0, 1, 2, 3 and 4",
        ["shape", "projections", "softmax", "heads"],
    ),
    "softmax over the queries": (
        [
            (
                "torch.softmax(scores, dim=-1) @ v\n        merged",
                "torch.softmax(scores, dim=-2) @ v\n        merged",
            )
        ],
        "softmax: FAILED: each query's weights must sum to 1 over the keys; at position",
        ["shape", "projections", "heads"],
    ),
    "heads split without the transpose": (
        [(SPLIT, ".view(B, self.n_heads, T, d_k)")],
        "heads: FAILED: heads split by reshaping (B, T, C) straight to (B, n_heads, T, d_k), without the "
        "transpose: each head then attends over pieces of several tokens",
        ["shape", "projections", "softmax"],
    ),
    "heads merged without transposing back": (
        [(MERGE, "heads.reshape(B, T, C)")],
        "heads: FAILED: heads merged by reshaping (B, n_heads, T, d_k) straight to (B, T, C), without "
        "transposing back: each position's output then holds pieces of other positions' results",
        ["shape", "projections", "softmax"],
    ),
    "split and merge both without transposes": (
        [(SPLIT, ".view(B, self.n_heads, T, d_k)"), (MERGE, "heads.reshape(B, T, C)")],
        "heads: FAILED: heads split by reshaping (B, T, C) straight to (B, n_heads, T, d_k), without the "
        "transpose and heads merged by reshaping (B, n_heads, T, d_k) straight to (B, T, C), without "
        "transposing back: the merge undoes the split's reshape",
        ["shape", "projections", "softmax", "causality"],
    ),
    "no output projection": (
        [("return self.W_o(merged)", "return merged")],
        "projections: FAILED: with a single token, the output should be W_o(W_v(x)); it is no output projection",
        ["shape", "softmax", "causality"],
    ),
    "weights the wrong way round": (
        [(f"self.{w}(x)", f"(x @ self.{w}.weight)") for w in ("W_q", "W_k", "W_v")]
        + [("self.W_o(merged)", "merged @ self.W_o.weight")],
        "projections: FAILED: with a single token, the output should be W_o(W_v(x)); it is the weights used "
        "as x @ W.weight",
        ["shape", "softmax", "causality"],
    ),
}


@pytest.mark.parametrize("mistake", MISTAKES)
def test_a_wrong_solution_fails_on_the_property_it_breaks(tmp_path, mistake):
    edits, failure, still_passing = MISTAKES[mistake]
    verdicts = _verdicts("causal-mha", _written(tmp_path, edits))
    name = failure.split(":")[0]
    assert verdicts[name].startswith(failure), verdicts[name]
    assert [verdicts[n] for n in still_passing] == [f"{n}: passed" for n in still_passing]
    assert verdicts["agreement with PyTorch"].startswith(
        "agreement with PyTorch: FAILED: differs from PyTorch's"
    )


def test_agreement_names_the_mistake_the_output_matches(tmp_path):
    verdicts = _verdicts("causal-mha", _written(tmp_path, MISTAKES["no scaling"][0]))
    assert verdicts["agreement with PyTorch"].endswith(
        "it matches attention with no scaling (scores not divided by sqrt(d_k))"
    )


FUNCTION_MISTAKES = {  # (exercise, edit in its function, the line that must fail)
    "causal, no scaling": (
        "causal-attention",
        ("    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)", "    scores = q @ k.transpose(-2, -1)"),
        "scaling: FAILED: scores are divided by 1.00 (no scaling)",
    ),
    "causal, no mask": (
        "causal-attention",
        ('    scores = scores.masked_fill(future, float("-inf"))\n    return', "    return"),
        "causality: FAILED: changing token 5 changed the output at positions 0, 1, 2, 3 and 4",
    ),
    "softmax over the queries": (
        "attention",
        ("    return torch.softmax(scores, dim=-1) @ v\n", "    return torch.softmax(scores, dim=-2) @ v\n"),
        "softmax: FAILED: each query's weights must sum to 1 over the keys",
    ),
    "a mask where none belongs": (
        "attention",
        (
            "    return torch.softmax(scores, dim=-1) @ v\n",
            "    T = q.shape[-2]\n    scores = scores.masked_fill(torch.ones(T, T).triu(1).bool(), -1e9)\n"
            "    return torch.softmax(scores, dim=-1) @ v\n",
        ),
        "every key seen: FAILED: changing the last key and value left the output at positions 0, 1, 2, 3, 4 and 5",
    ),
}


@pytest.mark.parametrize("mistake", FUNCTION_MISTAKES)
def test_a_wrong_function_fails_on_the_property_it_breaks(tmp_path, mistake):
    exercise, (old, new), failure = FUNCTION_MISTAKES[mistake]
    text = SOLUTIONS.read_text()
    at = text.index(f"def {exercise.replace('-', '_')}(")  # the edit goes in that function
    assert old in text[at:]
    path = tmp_path / "mine.py"
    path.write_text(text[:at] + text[at:].replace(old, new, 1))
    verdicts = _verdicts(exercise, path)
    name = failure.split(":")[0]
    assert verdicts[name].startswith(failure), verdicts[name]
    assert verdicts["agreement with PyTorch"].startswith("agreement with PyTorch: FAILED")


BAD_FILES = {  # what the file holds instead of the class, and the message's start
    "a syntax error": ("class CausalMultiHeadAttention(nn.Module)\n", "my_attention.py, line 1: "),
    "no class": (
        "def attention(q, k, v):\n    return q\n",
        "my_attention.py defines no class CausalMultiHeadAttention",
    ),
    "an error when run": (
        "import torch\nx = torch.zeros(2) @ torch.zeros(3)\n",
        "running my_attention.py raised",
    ),
    "another signature": (
        "from torch import nn\nclass CausalMultiHeadAttention(nn.Module):\n"
        "    def __init__(self, d_model, n_heads, block_size):\n        super().__init__()\n",
        "CausalMultiHeadAttention(d_model, n_heads, block_size) cannot be called as "
        "CausalMultiHeadAttention(d_model, n_heads)",
    ),
}


@pytest.mark.parametrize("bad", BAD_FILES)
def test_a_file_it_cannot_use_is_refused_with_what_was_expected(tmp_path, bad):
    text, message = BAD_FILES[bad]
    path = tmp_path / "my_attention.py"
    path.write_text(text)
    with pytest.raises(UnusableFileError) as refused:
        check("causal-mha", path)
    assert str(refused.value).startswith(message)


LAYER_EDITS = {  # an edit of the class's layers, and what the check says
    "a missing layer": (
        "        self.W_o = nn.Linear(d_model, d_model, bias=False)\n",
        "",
        "CausalMultiHeadAttention(16, 4) has no W_o; expected self.W_o = nn.Linear(d_model, d_model, bias=False)",
    ),
    "a layer per head": (
        "self.W_q = nn.Linear(d_model, d_model, bias=False)",
        "self.W_q = nn.Linear(d_model, d_model // n_heads, bias=False)",
        "CausalMultiHeadAttention(16, 4).W_q maps 16 features to 4; expected self.W_q = nn.Linear(",
    ),
    "a bias": (
        "self.W_k = nn.Linear(d_model, d_model, bias=False)",
        "self.W_k = nn.Linear(d_model, d_model)",
        "CausalMultiHeadAttention(16, 4).W_k has a bias; expected self.W_k = nn.Linear(d_model, d_model, bias=False)",
    ),
}


@pytest.mark.parametrize("edit", LAYER_EDITS)
def test_layers_other_than_the_contract_are_named(tmp_path, edit):
    old, new, message = LAYER_EDITS[edit]
    with pytest.raises(UnusableFileError) as refused:
        check("causal-mha", _written(tmp_path, [(old, new)]))
    assert str(refused.value).startswith(message)


def test_an_error_in_forward_fails_the_shape_with_its_line(tmp_path):
    path = _written(tmp_path, [("        d_k = C // self.n_heads\n", "        d_k = C // self.heads\n")])
    verdicts = _verdicts("causal-mha", path)
    assert verdicts["shape"].startswith("shape: FAILED: forward raised AttributeError:")
    assert verdicts["shape"].endswith("(my_attention.py, line 22)")
    assert verdicts["softmax"] == "softmax: not checked: needs shape first"


def test_the_command_prints_a_line_per_property_and_exits_0_only_when_all_pass(tmp_path, capsys):
    good, bad = _written(tmp_path), _written(tmp_path, MISTAKES["no scaling"][0], name="mine.py")
    assert main(["causal-mha", str(good)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "all 7 passed"
    assert main(["causal-mha", str(bad)]) == 1
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 8 and printed[-1] == "5 of 7 passed"
    assert main(["causal-mha", str(tmp_path / "missing.py")]) == 1
    assert capsys.readouterr().out.startswith(f"cannot check {tmp_path / 'missing.py'}: no file")


def test_python_m_runs_it_and_lists_the_exercises(tmp_path):
    """As ``python -m`` runs it (runpy.run_module), in a fresh process: the exit status and the list."""
    _written(tmp_path, MISTAKES["no mask"][0])
    script = tmp_path / "command.py"
    script.write_text(
        "import runpy, sys\n"
        "for arguments in (['--list'], ['causal-mha', 'my_attention.py']):\n"
        "    sys.argv = ['attn_ref.check', *arguments]\n"
        "    try:\n"
        "        runpy.run_module('attn_ref.check', run_name='__main__', alter_sys=True)\n"
        "    except SystemExit as exit:\n"
        "        print('exit status', exit.code)\n"
    )
    printed = run_python(script, cwd=tmp_path).stdout
    listed, checked = printed.split("exit status 0\n")
    assert [line.split(":")[0] for line in listed.splitlines() if line and not line[0].isspace()] == list(
        EXERCISES
    )
    assert "class CausalMultiHeadAttention(nn.Module):" in listed
    assert checked.splitlines()[-2:] == ["5 of 7 passed", "exit status 1"]
