"""sitebuild.snippet_titles: an executed block that shows a snippet is titled with its path."""

from sitebuild.snippet_titles import titled


def test_a_shown_snippet_gets_its_path_as_title_at_any_indent():
    page = (
        '```python exec="true" source="above" result="text"\n--8<-- "snippets/a/b.py:part"\n```\n'
        '    ```python exec="true" source="above"\n    --8<-- "snippets/c/d.py"\n    ```\n'
    )
    assert titled(page) == (
        '```python exec="true" source="above" result="text" title="snippets/a/b.py"\n--8<-- "snippets/a/b.py:part"\n```\n'
        '    ```python exec="true" source="above" title="snippets/c/d.py"\n    --8<-- "snippets/c/d.py"\n    ```\n'
    )


def test_hidden_blocks_and_plain_code_are_left_alone():
    page = '```python exec="true" html="true"\n--8<-- "snippets/a/b.py"\n```\n```python\nx = 1\n```\n'
    assert titled(page) == page
