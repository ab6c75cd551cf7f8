"""sitebuild/hooks.py: the settings a build uses besides mkdocs.yml, and the events MkDocs finds."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import pytest
from properdocs.plugins import PluginCollection

from sitebuild import downloads, hooks

WHEEL = Path("/kept/attn_ref-0.1.0-py3-none-any.whl")


@pytest.mark.parametrize(
    ("site_url", "kept_url", "wheel_url"),
    [
        (
            "https://example.org/attention/",
            "https://example.org/attention/",
            "https://example.org/attention/downloads/",
        ),
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000", "http://127.0.0.1:8000/downloads/"),
        (None, "", "/downloads/"),  # no site_url: links from the site's root
    ],
)
def test_the_settings_come_from_where_mkdocs_yml_is_and_its_site_url(
    monkeypatch, tmp_path, site_url, kept_url, wheel_url
):
    built_from = []
    monkeypatch.setattr(downloads, "wheel", lambda root: built_from.append(root) or WHEEL)
    config = SimpleNamespace(config_file_path=str(tmp_path / "mkdocs.yml"), site_url=site_url)
    settings = hooks.Settings.of(config)
    assert settings == hooks.Settings(tmp_path.resolve(), kept_url, WHEEL, wheel_url + WHEEL.name)
    assert built_from == [tmp_path.resolve()]  # the wheel of that project's attn_ref


def test_mkdocs_finds_every_event_and_the_files_event_first():
    events = PluginCollection()
    events["hooks"] = hooks  # as properdocs registers the file named under hooks: in mkdocs.yml
    handlers = {
        name: [handler.__name__ for handler in found] for name, found in events.events.items() if found
    }
    assert handlers == {
        name: [f"on_{name}"]
        for name in [
            "pre_build",
            "files",
            "page_read_source",
            "page_markdown",
            "page_content",
            "post_page",
            "post_build",
        ]
    }
    assert events.events["files"][0].mkdocs_priority == 100  # before other plugins look at the files


def test_a_builds_state_lives_on_an_object_not_in_a_reassigned_module_global():
    tree = ast.parse(Path(hooks.__file__).read_text())
    assert [node for node in ast.walk(tree) if isinstance(node, ast.Global)] == []
