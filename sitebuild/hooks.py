"""MkDocs' hooks (``hooks:`` in mkdocs.yml): each event handed to the sitebuild module that does the job.

MkDocs loads this file by its path, at every build; the project's root is on ``sys.path`` because
the site is built with ``python -m properdocs`` from there (Makefile, tests), so the package imports
normally. What a build uses besides mkdocs.yml is its `Settings`; what it learns lives in `Build`,
made afresh when the build starts; the events are methods of one `Hooks`.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import nbformat
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page
from properdocs.exceptions import PluginError

from sitebuild import (
    checklist,
    code_blocks,
    downloads,
    execution,
    freshness,
    page_html,
    plot_style,
    reading_time,
    tutorial_pages,
    typeset,
)

DIRTY_NOTICE = "A 'dirty' build is being performed"  # `make serve` asks for one (Makefile says why)


def _not_the_dirty_notice(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith(DIRTY_NOTICE)


@dataclass(frozen=True)
class Settings:
    """What a build uses besides mkdocs.yml's own keys, found when it starts."""

    root: Path  # the project: mkdocs.yml's folder, whose attn_ref and snippets the pages run
    site_url: str  # mkdocs.yml's site_url ($SITE_URL when the publish workflow sets it), or ""
    wheel: Path  # attn_ref's wheel for readers, built from root once per version (.cache/wheel/)
    wheel_url: str  # where readers download it: the site's downloads/ folder

    @classmethod
    def of(cls, config: MkDocsConfig) -> Settings:
        root = Path(config.config_file_path).resolve().parent
        site_url = config.site_url or ""
        wheel = downloads.wheel(root)
        return cls(root, site_url, wheel, downloads.wheel_url(site_url, wheel))


class Build:
    """One build: its `Settings`, and what it learns as the pages are made (the tutorials being
    executed, the files to write once it ends)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        # page src_uri -> (tutorial, its executed notebook, download name)
        self.executions: dict[str, tuple[Path, Future, str]] = {}
        self.files: dict[str, str] = {}  # site path -> text (plots)
        self.minutes: dict[str, int] = {}  # page src_uri -> minutes to read (sitebuild.reading_time)
        self.typesetter = typeset.Typesetter()
        self.downloads = tempfile.TemporaryDirectory()  # the notebooks as readers download them
        self.scripts: dict[str, dict[str, str]] = {}  # page url -> the scripts its code's titles link to


class Hooks:
    """MkDocs' events, as methods of one object that holds the current `Build`, made afresh when a
    build starts (`make serve` loads this file once, then builds again after every edit)."""

    build: Build

    def on_pre_build(self, config: MkDocsConfig) -> None:
        builder = logging.getLogger("properdocs.commands.build")
        if not any(getattr(f, "__name__", "") == _not_the_dirty_notice.__name__ for f in builder.filters):
            builder.addFilter(_not_the_dirty_notice)
        self.build = Build(Settings.of(config))
        code_blocks.print_as_python()
        freshness.forget_imported_code()
        plot_style.use()

    @event_priority(100)  # before other plugins look at the files
    def on_files(self, files: Files, config: MkDocsConfig) -> Files:
        build = self.build
        missing = checklist.problems(build.settings.root, config.nav or [])
        if missing:
            raise PluginError("\n".join(missing))
        # make serve --dirty: rebuild every page, not only the edited one
        if freshness.code_changed(build.settings.root):
            for file in files.documentation_pages():
                Path(file.abs_dest_path).unlink(missing_ok=True)
        sources = [f for f in files if f.src_uri.startswith("tutorials/") and f.src_uri.endswith(".py")]
        running = execution.execute_all([Path(f.abs_src_path) for f in sources], build.settings.root)
        known = execution.digests(build.settings.root)
        for file in sources:
            source = Path(file.abs_src_path)
            notebook = execution.executed_notebook(source, build.settings.root, known)
            files.remove(file)
            page = File.generated(
                config, f"tutorials/{source.stem}.md", content=""
            )  # text: on_page_read_source
            files.append(page)
            download = Path(build.downloads.name) / notebook.name  # written with the page, copied after
            files.append(File.generated(config, f"tutorials/{notebook.name}", abs_src_path=str(download)))
            build.executions[page.src_uri] = (source, running[source], notebook.name)
        wheel = File.generated(
            config, f"{downloads.FOLDER}/{build.settings.wheel.name}", abs_src_path=str(build.settings.wheel)
        )
        files.append(wheel)
        return files

    def on_page_read_source(self, page: Page, config: MkDocsConfig) -> str | None:
        build = self.build
        if page.file.src_uri not in build.executions:
            return None
        source, running, download = build.executions[page.file.src_uri]
        notebook = execution.notebook(source, running.result())  # a failing cell stops the build here
        readers_copy = downloads.for_download(
            notebook, page.file.src_uri, build.settings.site_url, build.settings.wheel_url
        )
        nbformat.write(readers_copy, Path(build.downloads.name) / download)
        return tutorial_pages.markdown_page(notebook, download)

    def on_page_markdown(self, markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
        build = self.build
        code_blocks.fresh_printing()  # before the page's blocks run
        try:
            written = code_blocks.markdown(markdown, page.file.src_uri, build.settings.root)
        except ValueError as error:
            raise PluginError(str(error)) from None
        build.scripts[page.url] = written.scripts
        return downloads.with_wheel_url(written.text, build.settings.wheel_url)

    def on_page_content(self, content: str, page: Page, config: MkDocsConfig, files: Files) -> str:
        build = self.build
        content = build.typesetter.page(content, page.file.src_uri)
        try:
            content = code_blocks.html(content, page.file.src_uri, build.scripts.get(page.url, {}))
        except ValueError as error:
            raise PluginError(str(error)) from None
        content, plots = page_html.rendered_page(content, page.url)
        build.files.update(plots)
        content, minutes = reading_time.with_reading_time(content, page.file.src_uri)
        if minutes is not None:
            build.minutes[page.file.src_uri] = minutes
        return content

    def on_post_page(self, output: str, page: Page, config: MkDocsConfig) -> str:
        return page_html.without_indentation(page_html.named_dialogs(output))

    def on_post_build(self, config: MkDocsConfig) -> None:
        build = self.build
        site = Path(config.site_dir)
        for path, text in build.files.items():
            (site / path).parent.mkdir(parents=True, exist_ok=True)
            (site / path).write_text(text)
        for src_uri, (_, running, _) in build.executions.items():  # what each tutorial wrote, beside its page
            page_folder = site / Path(src_uri).with_suffix("")
            for written in sorted(execution.written_files(running.result()).glob("*")):
                if not written.is_file():
                    continue
                page_folder.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(written, page_folder / written.name)
        for url, scripts in build.scripts.items():  # the scripts shown on each page, beside it
            code_blocks.publish(scripts, build.settings.root, site / url)
        home = site / "index.html"  # its map shows every page's minutes, known once all are built
        home.write_text(reading_time.with_minutes(home.read_text(), build.minutes))
        build.typesetter.close()
        build.downloads.cleanup()
        typeset.copy_assets(site)
        docs = Path(config.docs_dir)
        used = {
            execution.cache_folder(source, build.settings.root)
            for source in sorted((docs / "tutorials").glob("*.py"))
        }
        execution.prune(build.settings.root, used)


_hooks = Hooks()
on_pre_build = _hooks.on_pre_build
on_files = _hooks.on_files
on_page_read_source = _hooks.on_page_read_source
on_page_markdown = _hooks.on_page_markdown
on_page_content = _hooks.on_page_content
on_post_page = _hooks.on_post_page
on_post_build = _hooks.on_post_build
