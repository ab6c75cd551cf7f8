"""check/list_exercises.py: the three exercises the reference page names, each followed by the
class or function a reader's file must define for it."""

EXPECTED = {  # exercise -> the first line of what its file must define
    "causal-mha": "class CausalMultiHeadAttention(nn.Module):",
    "causal-attention": "def causal_attention(q, k, v):",
    "attention": "def attention(q, k, v):",
}


def test_each_exercise_is_listed_with_what_its_file_defines(printed):
    listed: dict[str, list[str]] = {}  # exercise -> the indented lines under it
    for line in printed.splitlines():
        if line.startswith(" "):
            listed[list(listed)[-1]].append(line.strip())
        else:
            listed[line.split(": ")[0]] = []
    assert list(listed) == list(EXPECTED)
    for name, definition in EXPECTED.items():
        assert listed[name] and listed[name][0].startswith(definition), (name, listed[name])
