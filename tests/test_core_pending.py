"""core/pending.py: each closing route closes its item and nothing else; done statements; staleness."""

from __future__ import annotations

import pytest

from ctxlifed.core.pending import (Evidence, answer_clauses, closing, done_statements, is_stale, settled_topics,
                                   test_names)

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


CHOICES = [
    (11, "TODO: decide where the counters live."),
    (12, "Naming is not decided yet."),
    (13, "Open question: whether the benchmark shows any gain."),
    (14, "TODO: where failed deliveries go (a dead letter queue?)."),
    (15, "待办：确认日期格式。"),
    (16, "待办：短信模板还没决定。"),
    (17, "TODO: handle deleted documents"),
    (18, "TODO: add a reindex command for admins."),
]


def _settled(text: str) -> Evidence:
    return Evidence(settled=tuple(settled_topics(text)))


def _answers(text: str) -> Evidence:
    return Evidence(answers=tuple(answer_clauses(text)))


@pytest.mark.parametrize(("ev", "expected"), [
    # "where X lives" asks for a place for X: a decision naming X settles it
    (Evidence(decisions=("We'll use Redis for the counters, with a fixed 60-second window.",)), [(11, "decision")]),
    # "确认 X" (confirm X) leaves a choice open: a decision on X settles it
    (Evidence(decisions=("日期格式就用 ISO 8601，决定了。",)), [(15, "decision")]),
    (Evidence(decisions=("We'll use exponential backoff starting at 1 s.",)), []),
    # "X settles Y" closes the item Y names; a pronoun object points back to the subject
    (_settled("The names PaymentGateway and PaymentLedger settle the naming."), [(12, "settled")]),
    (_settled("The benchmark settles it: serialisation is 12 ms of a 320 ms response."), [(13, "settled")]),
    (_settled("On delete the row is removed too, which settles deleted documents."), [(17, "settled")]),
    (_settled("模板已经定好了，用运营给的那版。"), [(16, "settled")]),
    (_settled("This does not settle the naming."), []),
    (_settled("That settles it."), []),
    (_settled("We settled on Redis."), []),  # a decision, not a settle statement
    # the user's answer: a clause that opens with the choice's subject and says more
    (_answers("Let's implement it: failed deliveries go to a dead letter table."), [(14, "answer")]),
    (_answers("Look at failed deliveries in the retry code."), []),
    (_answers("Where do failed deliveries go?"), []),
    (_answers("Failed deliveries do not go anywhere yet."), []),
    (_answers("TODO: failed deliveries go to a dead letter table."), []),  # restated as open
])
def test_open_choices_close_on_what_settles_them(ev: Evidence, expected: list[tuple[int, str]]) -> None:
    assert closing(CHOICES, ev) == expected
    assert closing(ITEMS, ev) == []  # and nothing else


@pytest.mark.parametrize(("text", "topics"), [
    ("The names A and B settle the naming.", ["the naming"]),
    ("The benchmark settles it: the time goes into the query.", ["The benchmark"]),
    ("Now deletes: the row goes too, which settles deleted documents.", ["deleted documents"]),
    ("The port is decided.", ["The port"]),
    ("模板已经定好了，这个完成了。", ["模板"]),
    ("Does this settle the naming?", []),
    ("It doesn't settle the port.", []),
    ("日期格式就用 ISO 8601，决定了。", []),  # no topic before 决定了: the decision route's
    # an intention or a pending item says the topic is still open
    ("We need to settle the naming.", []),
    ("Let's settle the naming first.", []),
    ("I'll settle the naming later.", []),
    ("TODO: settle the naming.", []),
])
def test_settled_topics(text: str, topics: list[str]) -> None:
    assert settled_topics(text) == topics


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
