"""sitebuild.code_blocks: what a block uses and defines, read from its code; folded blocks; a hidden
block's output refused; each block's label naming the blocks it continues; titles that link."""

from __future__ import annotations

import re

import pytest

from sitebuild.code_blocks import html, markdown, names, publish
from sitelook.project import ROOT


@pytest.mark.parametrize(
    ("code", "needed", "bound"),
    [
        ("x = f(x)\n", ["f", "x"], {"x"}),  # the value runs before the name is bound
        ("for i in range(3):\n    print(i)\n", [], {"i"}),
        ("import torch.nn as nn\nimport numpy\nlayer = nn.Linear(2, 2)\n", [], {"nn", "numpy", "layer"}),
        ("x[0] = 1\nm.weight = w\n", ["x", "w", "m"], {"x", "m"}),  # changed in place: a later block needs it
        ("total += step\n", ["total", "step"], {"total"}),
        ("ys = [a * b for a in xs]\n", ["xs", "b"], {"ys"}),  # `a` stays in the comprehension
        ("def f(t):\n    return t * scale\n\nscale = 2\n", [], {"f", "scale"}),  # read when f runs
        ("def f(t):\n    return t * later\n", ["later"], {"f"}),
        ("with open(p) as handle:\n    text = handle.read()\n", ["p"], {"handle", "text"}),
        ("try:\n    pass\nexcept ValueError as error:\n    print(error)\n", [], {"error"}),
        ("(n := len(items))\n", ["items"], {"n"}),
    ],
)
def test_what_a_block_needs_and_defines_is_read_in_the_order_it_runs(code, needed, bound):
    found_needed, found_bound, _ = names(code)
    assert (found_needed, found_bound) == (needed, bound)


FOLDED = (
    '```python exec="true" source="folded" fold="Checking code" result="text" session="s"\n'
    '--8<-- "snippets/bugs/softmax_axis.py:check"\n'
    '--8<-- "snippets/bugs/softmax_axis.py:verdict"\n'
    "```\n"
)


def test_a_folded_block_shows_the_code_that_runs_in_a_fold_and_its_output_under_it():
    page = markdown(FOLDED, "p.md", ROOT)
    includes = (
        '--8<-- "snippets/bugs/softmax_axis.py:check"\n--8<-- "snippets/bugs/softmax_axis.py:verdict"\n'
    )
    indented = "".join("    " + line + "\n" for line in includes.splitlines())
    assert page.text == (
        '??? example "Checking code"\n\n'
        f'    ```python title="softmax_axis.py"\n{indented}    ```\n\n'
        f'```python exec="true" result="text" session="s"\n{includes}```\n'
    )
    assert page.scripts == {"softmax_axis.py": "snippets/bugs/softmax_axis.py"}


def test_a_shown_snippet_is_titled_with_its_name_at_any_indent_and_other_blocks_are_left_alone():
    text = (
        '```python exec="true" source="above" result="text"\n--8<-- "snippets/a/b.py:part"\n```\n'
        '    ```python exec="true" source="above"\n    --8<-- "snippets/c/d.py"\n    ```\n'
        '```python exec="true" html="true"\nprint(figure_to_svg(fig, alt="x"))\n```\n'
        "```bash\npip install x\n```\n"
    )
    page = markdown(text, "p.md", ROOT)
    assert page.text == text.replace('result="text"\n', 'result="text" title="b.py"\n').replace(
        'source="above"\n    --8<--', 'source="above" title="d.py"\n    --8<--'
    )
    assert page.scripts == {"b.py": "snippets/a/b.py", "d.py": "snippets/c/d.py"}


@pytest.mark.parametrize(
    "hidden",
    [
        '```python exec="true" result="text"\n--8<-- "snippets/a/b.py:report"\n```\n',
        '```python exec="true" session="s"\n--8<-- "snippets/a/b.py:table"\n```\n',
        '    ```python exec="true" session="s"\n    print("| a | b |")\n    ```\n',  # a table, in a fold
    ],
)
def test_output_of_code_the_reader_cannot_see_fails_the_build(hidden):
    with pytest.raises(ValueError, match="shows what it prints but not its code"):
        markdown(hidden, "p.md", ROOT)


def test_a_hidden_block_may_repeat_a_shown_one():
    shown = '??? example "The code"\n\n    ```python exec="true" source="above" result="text"\n    --8<-- "snippets/a/b.py"\n    ```\n'
    repeat = '```python exec="true" result="text"\n--8<-- "snippets/a/b.py"\n```\n'
    assert markdown(shown + repeat, "p.md", ROOT).text.endswith(repeat)


def _block(code: str, title: str = "") -> str:
    shown = f'<span class="filename">{title}</span>' if title else ""
    return (
        f'<div class="language-python highlight">{shown}<pre><span></span><code>{code}</code></pre></div>\n'
    )


def test_a_block_that_uses_what_an_earlier_one_defines_says_which_it_continues():
    page = (
        '<h2 id="a">Setup</h2>\n'
        + _block("<span>import</span> torch\nx = torch.ones(3)", title="b.py")
        + '<details class="example"><summary>Checking code</summary>\n'
        + _block("w = x * 2")
        + "</details>\n<h2>Use</h2>\n"
        + _block("print(w)")
        + _block("print(torch.zeros(1), x)")
        + _block("import math\nprint(math.pi)")
    )
    result = html(page, "p.md", {"b.py": "snippets/a/b.py"})
    labels = re.findall(r'<p class="code-continues">(.*?)</p>', result)
    assert labels == [
        'Continues <a href="#code-1">the block above</a>: uses <code>x</code>.',
        'Continues <a href="#code-2">the block above</a>: uses <code>w</code>.',
        # x was last used (and so maybe changed) in the fold, which continues the block with torch
        'Continues <a href="#code-2">“Checking code” under “Setup”</a>: uses <code>torch</code>, <code>x</code>.',
    ]
    assert [f"code-{n}" for n in range(1, 6)] == re.findall(
        r'<div id="(code-\d)" class="language-python', result
    )
    assert result.index(labels[0]) < result.index('id="code-2"')  # above its block, inside the fold
    assert '<a href="b.py" title="The whole script: it runs on its own">b.py</a>' in result


def test_a_label_leaves_out_what_the_block_it_continues_continues():
    page = _block("import torch") + _block("x = torch.ones(2)") + _block("print(torch.zeros(1) + x)")
    labels = re.findall(r'<p class="code-continues">(.*?)</p>', html(page, "p.md", {}))
    assert (
        labels[-1]
        == 'Continues <a href="#code-2">the block above</a>: uses <code>torch</code>, <code>x</code>.'
    )


def test_a_block_continues_the_last_block_that_used_a_name_which_may_have_changed_it():
    page = (
        _block("import torch\nq = torch.ones(2)")
        + _block("for t in (q,):\n    t.requires_grad_(True)")
        + _block("import math\nprint(math.pi)")
        + _block("print(q.requires_grad)")
    )
    labels = re.findall(r'<p class="code-continues">(.*?)</p>', html(page, "p.md", {}))
    assert (
        labels[-1] == 'Continues <a href="#code-2">an earlier block of this section</a>: uses <code>q</code>.'
    )


def test_a_name_that_no_shown_block_defines_fails_the_build():
    with pytest.raises(ValueError, match="uses fig, which no block shown above it defines"):
        html(_block("x = 1") + _block("fig.savefig(name)"), "p.md", {})


def test_a_published_script_is_the_snippet_without_its_section_markers(tmp_path):
    publish({"softmax_axis.py": "snippets/bugs/softmax_axis.py"}, ROOT, tmp_path / "page")
    published = (tmp_path / "page" / "softmax_axis.py").read_text()
    original = (ROOT / "snippets/bugs/softmax_axis.py").read_text()
    assert "--8<--" not in published and "--8<--" in original
    assert published.splitlines() == [line for line in original.splitlines() if "# --8<-- [" not in line]


def test_a_block_under_the_pages_title_is_named_as_at_the_top_of_the_page():
    page = (
        '<h1 id="t">Title</h1>\n'
        + _block("import torch")
        + '<h2 id="s">Later</h2>\n'
        + _block("print(torch.pi)")
    )
    labels = re.findall(r'<p class="code-continues">(.*?)</p>', html(page, "p.md", {}))
    assert labels == ['Continues <a href="#code-1">the block above</a>: uses <code>torch</code>.']
    page = page.replace(_block("print(torch.pi)"), _block("import math") + _block("print(torch.pi)"))
    labels = re.findall(r'<p class="code-continues">(.*?)</p>', html(page, "p.md", {}))
    assert labels == [
        'Continues <a href="#code-1">the block at the top of the page</a>: uses <code>torch</code>.'
    ]
