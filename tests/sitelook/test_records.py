"""sitelook/records.py: what a test run leaves for `make measure`."""

from __future__ import annotations

from sitelook import records


def test_a_run_keeps_its_five_slowest_tests_under_its_selection(tmp_path):
    seconds = {f"tests/test_x.py::test_{n}": float(n) for n in range(8)}
    records.write(tmp_path, "not executed and not site", 12.34, seconds, failed=1)
    kept = records.read(tmp_path, "not executed and not site")
    assert kept["slowest"] == [[f"tests/test_x.py::test_{n}", float(n)] for n in (7, 6, 5, 4, 3)]
    assert (kept["wall_seconds"], kept["tests"], kept["failed"]) == (12.3, 8, 1)
    assert records.read(tmp_path, "") is None  # the whole suite's run is another record
    records.write(tmp_path, "", 1.0, {"t": 1.0}, failed=0)
    assert records.read(tmp_path, "")["slowest"] == [["t", 1.0]]
    assert records.read(tmp_path, "not executed and not site")["wall_seconds"] == 12.3
