"""versions/fully_masked_rows_table.py: the measured table as the bugs page shows it, read back and
compared, version by version, with the JSON the measurement wrote."""

import itertools
import json

import pytest

from scripts.torch_versions import TABLE
from tests.conftest import ROOT
from tests.forked import run_python
from tests.printed import table_rows

CASES = [  # the probe's cases, in the order of the table's columns
    "sdpa_default",
    "mha_attn_mask_grad_weights_output",
    "mha_attn_mask_grad_no_weights_output",
    "mha_attn_mask_no_grad_no_weights_output",
]


@pytest.fixture(scope="module")
def rows():
    """The table's rows; the snippet runs from the repository's root, as the site's build runs it."""
    finished = run_python(ROOT / "snippets" / "versions" / "fully_masked_rows_table.py", cwd=ROOT)
    assert finished.returncode == 0, finished.stderr
    return table_rows(finished.stdout)


def _versions(cell: str, measured: list[str]) -> list[str]:
    """The measured versions a cell such as '2.0.1 to 2.4.1' stands for."""
    first, _, last = cell.partition(" to ")
    return measured[measured.index(first) : measured.index(last or first) + 1]


def test_every_measured_version_is_in_exactly_one_row_with_its_own_values(rows):
    measured = json.loads(TABLE.read_text())
    order = list(measured)
    covered = []
    for versions, *values in rows:
        for version in _versions(versions, order):
            assert values == [measured[version][case] for case in CASES], version
            covered.append(version)
    assert covered == order


def test_neighbouring_rows_differ(rows):
    """A row stands for every version that behaves alike: no two rows in a row could be merged."""
    assert all(a[1:] != b[1:] for a, b in itertools.pairwise(rows))
