"""check/list_exercises.py: the three exercises the reference page names, each followed by the
class or function a reader's file must define for it."""

EXPECTED = {  # exercise -> the first line of what its file must define
    "causal-mha": "class CausalMultiHeadAttention(nn.Module):",
    "causal-attention": "def causal_attention(q, k, v):",
    "attention": "def attention(q, k, v):",
}


def test_each_exercise_is_listed_with_what_its_file_defines(printed):
    listed: dict[str, list[str]] = {}  # exercise -> the lines of what its file defines
    for line in printed.splitlines():
        if not line.startswith(" "):
            name, defines = line.removesuffix(":"), False
            listed[name] = []
        elif line.strip() == "the file defines:":
            defines = True
        elif defines:
            listed[name].append(line.strip())
    assert list(listed) == list(EXPECTED)
    for name, definition in EXPECTED.items():
        assert listed[name] and listed[name][0].startswith(definition), (name, listed[name])
