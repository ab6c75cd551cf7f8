"""Results kept under a key of their inputs (tests/support/kept.py): computed once per key, again
for any other key, and no two different inputs share one."""

from __future__ import annotations

from tests.support import kept


def test_a_result_is_computed_once_per_key(tmp_path, monkeypatch):
    monkeypatch.setattr(kept, "LOOKS", tmp_path)
    calls = []

    def compute(value):
        calls.append(value)
        return {"value": value}

    assert kept.remembered("look", "a", lambda: compute(1)) == {"value": 1}
    assert kept.remembered("look", "a", lambda: compute(2)) == {"value": 1}  # kept: not computed
    assert kept.remembered("look", "b", lambda: compute(3)) == {"value": 3}
    assert calls == [1, 3]


def test_the_digest_tells_apart_what_differs_anywhere():
    assert kept.digest(["ab", "c"]) != kept.digest(["a", "bc"])  # where one part ends counts
    assert kept.digest(["ab", b"c"]) == kept.digest([b"ab", "c"])  # text is its UTF-8 bytes
    assert kept.digest(["page", "narrow"]) != kept.digest(["page", "desktop"])
