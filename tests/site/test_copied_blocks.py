"""A reader copies one code block into a fresh interpreter (with the site's package installed): it
runs and prints what the page shows under it, or its label says which block it continues; and no
printed result is shown without the code that printed it.

Read from the built pages (tests/support/copied.py), each page's blocks run in one new process,
each block in a fresh namespace, in a folder holding what the site publishes beside the page (the
scripts its titles link to). A block that runs alone must print exactly what the page shows: the
page was built on this machine, with this arithmetic, so any difference is a block that depends
on something it does not show. On a Markdown page, a block that continues others runs after
them (the blocks its label names, and the ones theirs name, in page order; in the namespace the
block before it left, when that one ran after exactly those); on a tutorial page it
does not run here: its notebook's cells ran in that order when the tutorial was executed, and
running them again would train its models again. Cells that measure time or memory are left out.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from sitelook.project import PAGE_PATHS
from tests.support import copied


def _normalised(printed: str) -> str:
    return "\n".join(line.rstrip() for line in printed.strip("\n").splitlines())


def _number(anchor: str) -> int:
    return int(anchor.removeprefix("code-"))


def _chain(block: copied.CopiedBlock, by_anchor: dict[str, copied.CopiedBlock]) -> list[int]:
    """The numbers of the blocks ``block`` continues, with those they continue, in page order."""
    found, todo = set(), list(block.continues)
    while todo:
        anchor = todo.pop()
        if anchor not in found:
            found.add(anchor)
            todo += by_anchor[anchor].continues
    return sorted(_number(anchor) for anchor in found)


@pytest.mark.parametrize("page_path", PAGE_PATHS)
def test_every_code_block_runs_alone_or_says_which_block_it_continues(built_site, page_path, tmp_path):
    """A page that passed is not run again for the same build (kept beside it, under this check's
    own code): its blocks and what it shows are the build's, and their output depends on nothing else."""
    this_check = hashlib.sha256(Path(__file__).read_bytes() + Path(copied.__file__).read_bytes()).hexdigest()
    passed = built_site.kept / "copied-blocks" / f"{page_path.replace('/', '_') or 'home'}-{this_check[:16]}"
    if passed.is_file():
        return
    _check_page(built_site, page_path, tmp_path)
    passed.parent.mkdir(exist_ok=True)
    passed.touch()


def _check_page(built_site, page_path: str, tmp_path: Path) -> None:
    page = built_site.path / page_path / "index.html"
    blocks, _, _ = copied.blocks(page.read_text())
    if not blocks:
        pytest.skip("no Python code on this page")
    by_anchor = {block.anchor: block for block in blocks}
    assert len(by_anchor) == len(blocks) and "" not in by_anchor, "every block has an anchor of its own"
    tutorial = page_path.startswith("tutorials/")
    runs = []
    for number, block in enumerate(blocks):
        earlier = {b.anchor for b in blocks[:number]}
        assert set(block.continues) <= earlier, f"{block.anchor} continues a block that is not above it"
        if block.measured or (block.continues and tutorial):
            continue
        runs.append((block, _chain(block, by_anchor)))
    for published in (built_site.path / page_path).iterdir():  # the scripts beside the page
        if published.is_file() and published.name != "index.html":
            shutil.copy2(published, tmp_path / published.name)
    jobs = [
        (chain, _number(block.anchor), [by_anchor[f"code-{n}"].code for n in chain], block.code)
        for block, chain in runs
    ]
    printed = copied.run_page(jobs, tmp_path, notebook=tutorial)
    wrong = []
    for (block, _), output in zip(runs, printed, strict=True):
        if output.startswith("Traceback"):
            wrong.append(f"{block.anchor} fails:\n{block.code}\n{output[-1500:]}")
        elif block.tables:
            if [copied.markdown_table(output)] != block.tables:
                wrong.append(f"{block.anchor} prints another table:\n{output}\nshown: {block.tables}")
        elif _normalised(output) != _normalised("\n".join(block.shown)):
            wrong.append(f"{block.anchor} prints:\n{output}\nthe page shows:\n{chr(10).join(block.shown)}")
    assert wrong == [], "\n\n".join(wrong)


@pytest.mark.parametrize("page_path", PAGE_PATHS)
def test_no_printed_output_is_shown_without_the_code_that_printed_it(built_site, page_path):
    """Every printed text is shown under its code (or under the fold that holds it), or repeats one
    that is."""
    _, every_text, claimed = copied.blocks((built_site.path / page_path / "index.html").read_text())
    assert [shown for shown in every_text if shown not in claimed] == []
