"""The controller's reconcile logic (controller/agent.py) without a switch: a fake switch
that records writes stands in for P4Runtime (the logic is ours; tests/test_controller_bmv2.py
runs it against a real BMv2)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from qcn.controller.agent import ReconcileReport, _add, _apply_difference


class RecordingSwitch:
    """Holds entries by key; records each write call in order."""

    def __init__(self, entries: dict[str, int]) -> None:
        self.entries = dict(entries)
        self.calls: list[tuple[str, list[tuple[str, int]]]] = []

    def delete(self, es: list[tuple[str, int]]) -> None:
        self.calls.append(("delete", es))
        for k, _ in es:
            del self.entries[k]

    def modify(self, es: list[tuple[str, int]]) -> None:
        self.calls.append(("modify", es))
        for k, v in es:
            assert k in self.entries
            self.entries[k] = v

    def insert(self, es: list[tuple[str, int]]) -> None:
        self.calls.append(("insert", es))
        for k, v in es:
            assert k not in self.entries
            self.entries[k] = v


def reconcile(sw: RecordingSwitch, want: dict[str, int]) -> ReconcileReport:
    have = {k: (k, v) for k, v in sw.entries.items()}
    wanted = {k: (k, v) for k, v in want.items()}
    fake: Any = sw
    return _apply_difference(fake, have, wanted, lambda a, b: a[1] == b[1])


def test_deletes_modifies_inserts_in_that_order() -> None:
    sw = RecordingSwitch({"a": 1, "b": 2, "c": 3})
    report = reconcile(sw, {"b": 2, "c": 30, "d": 4})
    assert report == ReconcileReport(inserted=1, modified=1, deleted=1)
    # Deleting first frees table space (and a key that moves) before anything is added.
    assert [c[0] for c in sw.calls] == ["delete", "modify", "insert"]
    assert sw.entries == {"b": 2, "c": 30, "d": 4}


def test_nothing_to_do_writes_nothing() -> None:
    sw = RecordingSwitch({"a": 1})
    assert reconcile(sw, {"a": 1}) == ReconcileReport(0, 0, 0)
    assert sw.calls == []


@given(
    st.dictionaries(st.sampled_from("abcdefgh"), st.integers(0, 3)),
    st.dictionaries(st.sampled_from("abcdefgh"), st.integers(0, 3)),
)
def test_reconcile_reaches_the_desired_state_and_is_idempotent(
    have: dict[str, int], want: dict[str, int]
) -> None:
    sw = RecordingSwitch(have)
    first = reconcile(sw, want)
    assert sw.entries == want
    assert first.inserted == len(want.keys() - have.keys())
    assert first.deleted == len(have.keys() - want.keys())
    assert first.modified == sum(1 for k in want.keys() & have.keys() if want[k] != have[k])
    sw.calls.clear()
    assert reconcile(sw, want) == ReconcileReport(0, 0, 0)
    assert sw.calls == []


def test_reports_add_up() -> None:
    assert _add(ReconcileReport(1, 2, 3), ReconcileReport(4, 5, 6)) == ReconcileReport(5, 7, 9)
