"""Tests for ctxlifed.core.advice: advice only when it pays, once, debounced."""

from __future__ import annotations

import pytest

from ctxlifed.core import advice as ADV


def test_boundary_threshold_numbers() -> None:
    """The rule's numbers (docs/advice.md): with a 20k fixed part a boundary compaction pays from about
    51k Working tokens; 1.5 % of a 1M window's Working zone (9,750 tokens) never pays."""
    assert ADV.compaction_cost(20_000 + 60_000) == pytest.approx(8_000 + 15_000 + 16_250)
    assert ADV.saving_per_turn(60_000) == pytest.approx(4_700)
    assert ADV.boundary_min_working(20_000) == 51_389
    w = ADV.boundary_min_working(20_000)
    assert ADV.compaction_pays(w, 20_000) and not ADV.compaction_pays(w - 1, 20_000)
    assert not ADV.compaction_pays(9_750, 20_000)
    assert not ADV.compaction_pays(13_000, 0)  # less than what comes back: never pays


@pytest.mark.parametrize(
    ("level", "near", "boundary", "working", "expected"),
    [
        (0, False, True, 9_750, None),  # a phase switch at 1.5 % of a 1M window
        (0, False, False, 200_000, None),  # no boundary, below level 1
        (0, False, True, 60_000, "boundary"),
        (1, False, False, 80_000, "level"),
        (2, False, True, 100_000, "level"),
        (0, True, False, 5_000, "near"),
    ],
)
def test_compact_cause(level: int, near: bool, boundary: bool, working: int, expected: str | None) -> None:
    assert ADV.compact_cause(level=level, near_autocompact=near, at_boundary=boundary, working_tokens=working,
                             fixed_tokens=20_000) == expected


def test_rewind_after_the_same_failure_three_times() -> None:
    assert [ADV.rewind_due(n) for n in (0, 1, 2, 3, 4)] == [False, False, False, True, True]


def test_unrelated_task() -> None:
    """A new task sharing nothing with the session's work, after a large context: /clear; a follow-up, a
    short answer or a small context: nothing."""
    topic = "Add rate limiting to the login API with a token bucket in Redis\nsrc/limiter.py\nsrc/api/login.py"
    new = "Write a release announcement blog post about the kubernetes helm chart upgrade"
    assert ADV.unrelated_task(new, topic, 80_000)
    assert not ADV.unrelated_task(new, topic, 10_000)  # small context: nothing to gain
    assert not ADV.unrelated_task("now add a test for the limiter burst in login", topic, 80_000)
    assert not ADV.unrelated_task("ok go ahead", topic, 80_000)
    assert not ADV.unrelated_task(new, "", 80_000)


def test_sweep() -> None:
    assert not ADV.sweep_due(5, 5)
    assert not ADV.sweep_due(8, 2)  # the same file again and again is not a sweep
    assert ADV.sweep_due(6, 5)


def test_debounce_once_per_key_and_per_kind() -> None:
    a = ADV.Advice(kind="compact", key="compact:phase:2", reason="r", command="/compact x", urgency=1)
    assert not ADV.debounced(a, delivered=[], last_of_kind=None, now=1000.0, pending=None)
    assert ADV.debounced(a, delivered=["compact:phase:2"], last_of_kind=None, now=1000.0, pending=None)
    assert ADV.debounced(a, delivered=[], last_of_kind=900.0, now=1000.0, pending=None)
    assert not ADV.debounced(a, delivered=[], last_of_kind=1000.0 - ADV.DEBOUNCE_S, now=1000.0, pending=None)
    level = ADV.Advice(kind="compact", key="compact:level:1:0", reason="r", command="c", urgency=4)
    assert not ADV.debounced(level, delivered=[], last_of_kind=900.0, now=1000.0, pending=a)
    assert ADV.debounced(a, delivered=[], last_of_kind=None, now=1000.0, pending=level)
    assert a.text == "ctxlifed: r\n/compact x" and a.line == "r: /compact x"


def test_the_same_tests_failing_are_the_same_failure_whatever_their_figures() -> None:
    """A flaky test failing with "9 != 10" then "8 != 10" is one failure repeated; other tests failing, or
    a failure without test ids, is told apart by its signature."""
    assert ADV.failure_key(["tests/a.py::test_x"], "assert|9 != 10") == ADV.failure_key(["tests/a.py::test_x"],
                                                                                        "assert|8 != 10")
    assert ADV.failure_key(["tests/a.py::test_x"], "s") != ADV.failure_key(["tests/a.py::test_y"], "s")
    assert ADV.failure_key(["b", "a", "a"], "s") == ADV.failure_key(["a", "b"], "t") == "tests|a, b"
    assert ADV.failure_key([], "python|missing module x") == "python|missing module x"


@pytest.mark.parametrize(("prompt", "asked"), [
    ("How is authentication done across all our services? Read through the handlers and tell me.", True),
    ("Audit every endpoint for missing auth checks", True),
    ("检查一下所有服务的鉴权方式", True),
    ("how does the auth flow work?", False),
    ("Run all the tests", False),
    ("Refactor the payment module: split PaymentService into a Gateway and a Ledger.", False),
])
def test_a_prompt_asking_for_a_sweep(prompt: str, asked: bool) -> None:
    assert ADV.asks_for_sweep(prompt) is asked


def test_an_announced_sweep_is_advised_after_fewer_reads() -> None:
    """When the request asks for a sweep, three reads of three targets show it under way in the main window."""
    assert ADV.sweep_due(3, 3, asked=True)
    assert not ADV.sweep_due(3, 3)
    assert not ADV.sweep_due(2, 2, asked=True)
    assert not ADV.sweep_due(3, 1, asked=True)  # the same file again is no sweep
