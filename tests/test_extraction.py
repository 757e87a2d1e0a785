"""Extraction rules: constraints are obligations (not descriptions, not questions), decisions are
choices, the goal is the substantive request, and tool evidence moves the phase (EN and ZH)."""

from __future__ import annotations

import pytest

from ctxlifed.core import phase as P
from ctxlifed.core.classify import (detect_facts, fact_kind, goal_text, is_question, is_substantive, pick_goal,
                                    starts_new_task)
from ctxlifed.core.model import Kind

C, D, PE = Kind.CONSTRAINT, Kind.DECISION, Kind.PENDING

CASES: list[tuple[str, Kind | None]] = [
    # obligations vs descriptions
    ("Never touch Redis directly in the tests.", C),
    ("The tests never touch Redis directly.", None),
    ("The cache always returns a copy.", None),
    ("This module never calls the network.", None),
    ("We never push to main directly.", C),
    ("You must not add new dependencies.", C),
    ("The API must stay backward compatible.", C),
    ("It must be a race in the writer.", None),  # epistemic must
    ("The bug must have been introduced in 2.1.", None),
    ("We have to keep Python 3.9 support.", C),
    ("It has to do with the cache.", None),
    ("Don't change the public API.", C),
    ("Please don't touch the migrations.", C),
    ("Don't worry about Windows.", None),
    ("The function does not handle empty input.", None),
    ("Always run the linter before committing.", C),
    ("Make sure the hook exits 0.", C),
    ("A peer uid check is required.", C),
    ("不要修改公共接口。", C),
    ("必须兼容 Python 3.9。", C),
    ("接口不能改。", C),
    ("别改数据库结构", C),
    ("这个函数不能处理空输入。", None),
    ("表里有一千万条记录。", None),  # 千万 as a number
    ("千万不要删除迁移文件。", C),
    ("不一定要用 Redis。", None),
    ("别的模块也会调用它。", None),  # 别的: "other"
    # questions oblige and decide nothing
    ("Should we use Redis or Postgres?", None),
    ("Must we keep Python 3.8 support?", None),
    ("Did we decide on the port?", None),
    ("要不要加缓存？", None),
    ("要不要先写测试", None),
    ("能不能不用 Redis", None),
    ("是否需要加锁？", None),
    ("这里必须加锁吗", None),
    # decisions are choices
    ("We decided to drop Python 3.8.", D),
    ("Let's use SQLite for the queue.", D),
    ("We'll go with the token bucket.", D),
    ("Use anyio instead of asyncio.", D),
    ("We switched to msgspec for speed.", D),
    ("We moved the helper to utils.py.", None),  # an action, not a choice
    ("I'll use a dict for the lookup here.", None),  # a step of the work, not a project decision
    ("I'll go with option B.", D),
    ("我们决定用 SQLite。", D),
    ("那就用 8080 端口", D),
    ("你来决定吧", None),
    ("Up to you, decide what's best.", None),
    # pending items need a label
    ("TODO: handle the empty case", PE),
    ("the TODO list is long", None),
    ("Next step: add the --json flag.", PE),
    ("What are the next steps?", None),
    ("Open question: do we need a lock?", PE),
    ("Events stay pending until derived.", None),
    ("We haven't decided the port yet.", PE),
    ("还没决定用哪个端口。", PE),
    ("下一步：实现归档。", PE),
    # acknowledgements
    ("Good plan. Go ahead and implement it.", None),
]


@pytest.mark.parametrize(("text", "kind"), CASES, ids=[f"case-{i}" for i in range(len(CASES))])
def test_fact_kind(text: str, kind: Kind | None) -> None:
    assert fact_kind(text) is kind


def test_a_typical_assistant_message_yields_the_obligation_only() -> None:
    """Of three 'constraint-looking' sentences, the two descriptions are not constraints."""
    msg = ("I looked at the storage layer. The tests never touch Redis directly; they always use the fake. "
           "Per your note, we must not add a Redis dependency to the test extra.")
    assert detect_facts(msg) == [(C, "Per your note, we must not add a Redis dependency to the test extra.")]


def test_an_obligation_after_another_sentence_is_found_in_the_whole_message() -> None:
    """The clause-start imperative ("Do not ...", "Don't ...") is found when a sentence precedes it in the
    same message, not only when the sentence is scanned on its own."""
    prompt = ("Users get logged out after 5 minutes instead of 30 minutes. Find out why. Do not change the token "
              "format, mobile clients parse it.")
    assert detect_facts(prompt) == [(C, "Do not change the token format, mobile clients parse it.")]
    assert detect_facts("Fix the flaky test_upload. Don't paper over it with a sleep, find the race.") == [
        (C, "Don't paper over it with a sleep, find the race.")]
    assert detect_facts("I read it. The tests never touch Redis directly.") == []


def test_clauses_that_are_facts_of_their_own_are_items_of_their_own() -> None:
    """'TODO: a; TODO: b' is two items (each closes on its own); a fact with a describing clause stays whole."""
    assert detect_facts("TODO: handle deleted documents; TODO: add a reindex command for admins.") == [
        (PE, "TODO: handle deleted documents"), (PE, "TODO: add a reindex command for admins.")]
    assert detect_facts("Never change the public API of charge(); three services call it.") == [
        (C, "Never change the public API of charge(); three services call it.")]


@pytest.mark.parametrize("text", ["要不要加缓存？", "能不能换成 SQLite？", "Should we never retry?", "这个要不要改"])
def test_questions(text: str) -> None:
    assert is_question(text) and detect_facts(text) == []


@pytest.mark.parametrize(("prompt", "substantive"), [
    ("Good plan. Go ahead and implement it.", False),
    ("go ahead", False),
    ("ok", False),
    ("yes, do it", False),
    ("Looks good, run the tests", False),
    ("好的，开始实现吧", False),
    ("继续", False),
    ("/compact keep the plan", False),
    ("Add rate limiting to the upload endpoint", True),
    ("Refactor the ledger writer", True),
    ("Fix the flaky test in test_store.py", True),
    ("给上传接口加限流", True),
    ("修复登录错误", True),
])
def test_substantive_prompt(prompt: str, substantive: bool) -> None:
    assert is_substantive(prompt) is substantive


def test_goal_is_the_first_substantive_request() -> None:
    prompts = ["ok", "Add rate limiting to the upload endpoint; must not break clients",
               "Good plan. Go ahead and implement it.", "Also handle the burst case"]
    assert pick_goal(prompts) == prompts[1]
    assert pick_goal(["go ahead", "好的"]) is None


def test_a_prompt_that_starts_another_task_replaces_the_goal() -> None:
    """The goal is the task being worked on: an explicit switch ("Something else: ...", 换个任务) starts a new
    one; a follow-up on the same task ("Now write tests for the edge cases") does not."""
    first = "Could we speed up the API by replacing json with orjson? Let's explore."
    other = "OK, forget orjson. Something else: the CSV export of the reports page is slow, look at that."
    assert pick_goal([first, "go ahead", other]) == other
    assert pick_goal([first, "Now write tests for the edge cases: the window rollover."]) == first
    assert pick_goal(["给订单导出加上 CSV 格式。", "换个任务：登录接口偶尔返回 500，帮我查一下。"]).startswith("换个任务")
    assert not starts_new_task("something else")  # no task stated
    assert not starts_new_task("Don't forget the changelog")
    assert not starts_new_task("Forget the cache, use a dict for the lookup.")  # another approach, same task


@pytest.mark.parametrize(("prompt", "goal"), [
    ("We need rate limiting on the login API. It must not break existing sessions. TODO: decide the store.",
     "We need rate limiting on the login API."),
    ("给订单导出加上 CSV 格式。必须保持现有的 JSON 接口不变。待办：确认日期格式。", "给订单导出加上 CSV 格式。"),
    ("Add rate limiting to the upload endpoint; must not break clients",
     "Add rate limiting to the upload endpoint; must not break clients"),  # nothing would be left: whole
    ("TODO: fix the refresh endpoint", "TODO: fix the refresh endpoint"),
])
def test_the_goal_leaves_the_facts_stated_with_it_to_their_own_items(prompt: str, goal: str) -> None:
    assert goal_text(prompt) == goal


@pytest.mark.parametrize(("prompt", "phase"), [
    ("Yes, reproduce it with a test, then fix it.", "implementation"),
    ("Fix the flaky test_parallel_upload. Don't paper over it with a sleep.", "implementation"),
    ("好，先复现再修。", "implementation"),
    ("Run the full test suite.", "testing"),
    ("Don't fix it yet, just find out why.", None),
    ("How do we fix the race?", None),
    ("不要修复它，先查原因", None),
])
def test_a_fix_asked_for_is_implementation(prompt: str, phase: str | None) -> None:
    got = [sig.phase for sig in P.signals_from_prompt(prompt)]
    assert got == ([phase] if phase else [])


def _run(state: P.PhaseState, calls: list[tuple[str, dict]]) -> list[str]:
    out = []
    for name, inp in calls:
        state, _ = P.observe(state, P.signals_from_tool(name, inp), 1.0)
        out.append(state.phase)
    return out


READ = ("Read", {"file_path": "src/app.py"})
TEST = ("Bash", {"command": "pytest -q"})
EDIT = ("Edit", {"file_path": "src/app.py"})


def test_read_failing_test_edit_passing_test_is_implementation() -> None:
    assert _run(P.PhaseState(), [READ, TEST, EDIT, TEST]) == ["planning", "planning", "implementation",
                                                               "implementation"]


def test_a_planned_session_needs_more_work_before_leaving_planning() -> None:
    """After a planning hand-off the seed holds longer, but edits and test runs still win."""
    st, _ = P.observe(P.PhaseState(), P.signals_from_prompt("let's plan the rate limiter"), 0.0)
    assert _run(st, [READ, TEST, EDIT, TEST]) == ["planning", "planning", "planning", "implementation"]


def test_test_runs_alone_take_the_usual_streak_to_testing() -> None:
    """Without an edit there is no work streak: three test runs in a row, as before."""
    assert _run(P.PhaseState(), [READ, TEST, TEST, TEST]) == ["planning", "planning", "planning", "testing"]
