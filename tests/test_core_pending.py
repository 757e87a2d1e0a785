"""core/pending.py: each closing route closes its item and nothing else; done statements; staleness."""

from __future__ import annotations

import pytest

from ctxlifed.core.pending import Evidence, closing, done_statements, is_stale, test_names

ITEMS = [
    (1, "Next step: implement the rate limiter"),
    (2, "Open question: which store to use for sessions?"),
    (3, "TODO: fix tests/test_calc.py::test_add_negative"),
    (4, "TODO: handle retries in fetch"),
    (5, "还没决定用哪个端口"),
    (6, "We still need to add the --json flag"),
    (7, "Next step: test the parser"),
    (8, "Not decided: how to shard the index"),
]


@pytest.mark.parametrize(("ev", "expected"), [
    (Evidence(done=tuple(done_statements("The rate limiter is done. Is the flag done?"))), [(1, "user")]),
    (Evidence(decisions=("We decided to use SQLite as the session store.",)), [(2, "decision")]),
    (Evidence(decisions=("端口决定用 8080",)), [(5, "decision")]),
    (Evidence(decisions=("We decided to use SQLite.",)), []),  # another subject settles nothing
    (Evidence(decisions=("We decided to shard the logs by day.",)), []),  # half the subject is not enough
    (Evidence(passed_text="pytest tests/test_calc.py::test_add_negative\n1 passed"), [(3, "test")]),
    (Evidence(passed_tests=("tests/test_calc.py::test_add_negative",)), [(3, "test")]),
    (Evidence(passed_text="pytest -q tests/test_other.py\n3 passed"), []),
    (Evidence(edits=(("# TODO: handle retries in fetch\nx = 1", "x = 1"),)), [(4, "todo_line")]),
    (Evidence(edits=(("# TODO: handle retries in fetch\nx = 1", "# TODO: handle retries in fetch\nx = 2"),)), []),
    (Evidence(completed_todos=("Add the --json flag",)), [(6, "todo")]),
    (Evidence(done=tuple(done_statements("The parser is done."))), []),  # "test the parser" is not done
    (Evidence(), []),
])
def test_closing_routes(ev: Evidence, expected: list[tuple[int, str]]) -> None:
    assert closing(ITEMS, ev) == expected


@pytest.mark.parametrize(("text", "done"), [
    ("The limiter is done.", ["The limiter is done."]),
    ("Finished the migration script.", ["Finished the migration script."]),
    ("I've fixed the flaky test.", ["I've fixed the flaky test."]),
    ("登录功能已完成。", ["登录功能已完成。"]),
    ("迁移脚本搞定了", ["迁移脚本搞定了"]),
    ("Is the limiter done?", []),
    ("The limiter isn't done yet.", []),
    ("The limiter is not done.", []),
    ("还没完成登录功能。", []),
    ("登录功能完成了吗？", []),
])
def test_done_statements(text: str, done: list[str]) -> None:
    assert done_statements(text) == done


def test_test_names() -> None:
    assert test_names("fix tests/a.py::test_x[1] and TestParse") == ["tests/a.py::test_x[1]", "test_x", "TestParse"]


@pytest.mark.parametrize(("phases", "sessions", "stale"), [(0, 0, False), (3, 1, False), (4, 0, True), (0, 3, True)])
def test_is_stale(phases: int, sessions: int, stale: bool) -> None:
    assert is_stale(phases, sessions, stale_phases=4, stale_sessions=3) is stale
    assert is_stale(phases, sessions, stale_phases=0, stale_sessions=0) is False
