"""versions/fully_masked_rows_table.py: the measured table as the bugs page shows it, read back and
compared, version by version, with the JSON the measurement wrote, for the probe's cases the snippet
chose as columns."""

import itertools
import json

import pytest

from scripts.torch_versions import TABLE
from sitelook.project import ROOT
from tests.support.forked import Finished, run_python
from tests.support.printed import table_rows


@pytest.fixture(scope="module")
def table() -> Finished:
    """The snippet's run in its own folder, beside the JSON, as the site's build runs it."""
    folder = ROOT / "snippets" / "versions"
    finished = run_python(folder / "fully_masked_rows_table.py", cwd=folder)
    assert finished.returncode == 0, finished.stderr
    return finished


def _versions(cell: str, measured: list[str]) -> list[str]:
    """The measured versions a cell such as '2.0.1 to 2.4.1' stands for."""
    first, _, last = cell.partition(" to ")
    return measured[measured.index(first) : measured.index(last or first) + 1]


def test_each_column_is_the_output_of_a_measured_case(table):
    """Each cell is the output for the query that sees no key (not the weights, nor the kernel)."""
    measured = json.loads(TABLE.read_text())
    cases = list(table.values["columns"])
    assert cases and all(case == "sdpa_default" or case.endswith("_output") for case in cases)
    assert all(case in found for found in measured.values() for case in cases)


def test_every_measured_version_is_in_exactly_one_row_with_its_own_values(table):
    measured = json.loads(TABLE.read_text())
    cases = list(table.values["columns"])
    order = list(measured)
    covered = []
    for versions, *values in table_rows(table.stdout):
        for version in _versions(versions, order):
            assert values == [measured[version][case] for case in cases], version
            covered.append(version)
    assert covered == order


def test_neighbouring_rows_differ(table):
    """A row stands for every version that behaves alike: no two rows in a row could be merged."""
    rows = table_rows(table.stdout)
    assert all(a[1:] != b[1:] for a, b in itertools.pairwise(rows))
