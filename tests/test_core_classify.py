"""Tests for ctxlifed.core.classify: facts, the kind x phase table, overrides, ranking, compression plans."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxlifed.core import classify as cl
from ctxlifed.core.classify import (
    CompressionPlan,
    Ranked,
    categorize,
    detect_facts,
    plan_compression,
    priority,
    rank,
)
from ctxlifed.core.model import PHASES, Category, Element, Kind, Level

K, S, A, D = Category.KEEP, Category.SUMMARIZE, Category.ARCHIVE, Category.DISCARD

# --------------------------------------------------------------------------- facts

FACTS: list[tuple[str, list[tuple[Kind, str]]]] = [
    ("We decided to use SQLite FTS5.", [(Kind.DECISION, "We decided to use SQLite FTS5.")]),
    ("Decision: msgspec for the wire.", [(Kind.DECISION, "Decision: msgspec for the wire.")]),
    ("OK, let's go with anyio.", [(Kind.DECISION, "OK, let's go with anyio.")]),
    ("We will use a Unix socket.", [(Kind.DECISION, "We will use a Unix socket.")]),
    ("Chose trigram over unicode61 for CJK.", [(Kind.DECISION, "Chose trigram over unicode61 for CJK.")]),
    ("The hook must not block.", [(Kind.CONSTRAINT, "The hook must not block.")]),
    (
        "Never call a model. Always exit 0.",
        [(Kind.CONSTRAINT, "Never call a model."), (Kind.CONSTRAINT, "Always exit 0.")],
    ),
    ("Do not write outside the project.", [(Kind.CONSTRAINT, "Do not write outside the project.")]),
    ("A peer uid check is required.", [(Kind.CONSTRAINT, "A peer uid check is required.")]),
    ("TODO: wire the watcher", [(Kind.PENDING, "TODO: wire the watcher")]),
    ("- [ ] write the docs", [(Kind.PENDING, "write the docs")]),
    ("- [x] done already", []),
    ("Next step: benchmarks.", [(Kind.PENDING, "Next step: benchmarks.")]),
    ("We still need to add recall.", [(Kind.PENDING, "We still need to add recall.")]),
    ("my todo list is long", []),
    ("我们决定采用 msgspec。", [(Kind.DECISION, "我们决定采用 msgspec。")]),
    ("最终选择了 anyio", [(Kind.DECISION, "最终选择了 anyio")]),
    ("钩子里不要做网络请求！必须在 1 秒内返回。", [(Kind.CONSTRAINT, "钩子里不要做网络请求！"), (Kind.CONSTRAINT, "必须在 1 秒内返回。")]),
    ("禁止写入项目外的文件", [(Kind.CONSTRAINT, "禁止写入项目外的文件")]),
    ("下一步：实现归档。待定：端口号。", [(Kind.PENDING, "下一步：实现归档。"), (Kind.PENDING, "待定：端口号。")]),
    ("还没决定用哪个端口。", [(Kind.PENDING, "还没决定用哪个端口。")]),
    ("```\nmust = True  # TODO\n```\nplain text", []),
    ("The weather is nice. 今天天气不错。", []),
    ("", []),
]


@pytest.mark.parametrize(("text", "expected"), FACTS, ids=[f"fact-{i}" for i in range(len(FACTS))])
def test_detect_facts(text: str, expected: list[tuple[Kind, str]]) -> None:
    """Decisions, constraints and pending items in EN and ZH; code fences and plain prose give none."""
    assert expected == detect_facts(text)


def test_detect_facts_is_bounded() -> None:
    """At most MAX_FACTS facts, each at most MAX_FACT_CHARS characters, duplicates dropped."""
    text = "\n".join(f"TODO item {i} " + "x" * 1000 for i in range(100)) + "\nTODO item 0 " + "x" * 1000
    facts = detect_facts(text)
    assert (cl.MAX_FACTS, True) == (len(facts), all(len(s) <= cl.MAX_FACT_CHARS for _, s in facts))


def test_detect_facts_scans_head_and_tail_of_huge_text() -> None:
    """A fact at the very end of a huge text is still found; one in the unscanned middle is not."""
    mid = "x " * (cl.SCAN_HEAD)
    text = mid + "\nWe decided to ship.\n" + mid + "\nTODO: the end\n"
    assert [(Kind.PENDING, "TODO: the end")] == detect_facts(text)


# --------------------------------------------------------------------------- the kind x phase table


def el(kind: Kind, text: str = "plain words here", **kw: object) -> Element:
    return Element(uid=kw.pop("uid", "u"), kind=kind, text=text, **kw)  # type: ignore[arg-type]


ELEMENTS: dict[str, Element] = {
    "prompt": el(Kind.PROMPT, "Add a recall command."),
    "assistant": el(Kind.ASSISTANT, "I will look at the store first."),
    "thinking": el(Kind.THINKING, "Let me think about the layout."),
    "tool": el(Kind.TOOL, "Agent: report", tool="Agent"),
    "error": el(Kind.ERROR, "Bash: x\nboom", tool="Bash", command="x", is_error=True),
    "code_change": el(Kind.CODE_CHANGE, "Edit: /a.py\n+x", tool="Edit", file_path="/a.py"),
    "decision": el(Kind.DECISION, "We decided to use FTS5."),
    "constraint": el(Kind.CONSTRAINT, "Never call a model."),
    "pending": el(Kind.PENDING, "TODO: recall"),
    "test_result": el(Kind.TEST_RESULT, "1 failed", tool="Bash", command="pytest", passed=False, is_error=True),
    "compact_summary": el(Kind.COMPACT_SUMMARY, "Summary of the session."),
    "ledger": el(Kind.LEDGER, "# Phase ledger"),
    "lesson": el(Kind.LESSON, "Error X was fixed by Y."),
    "read": el(Kind.TOOL, "Read: /a.py\n...", tool="Read", file_path="/a.py"),
    "grep": el(Kind.TOOL, "Grep: x\n...", tool="Grep"),
    "web": el(Kind.TOOL, "WebFetch: u\n...", tool="WebFetch"),
    "bash": el(Kind.TOOL, "Bash: ls\na b", tool="Bash", command="python gen.py"),
    "bash_test_tool_passing": el(Kind.TOOL, "3 passed", tool="Bash", command="pytest -q", passed=True),
    "test_passing": el(Kind.TEST_RESULT, "3 passed in 0.1s", tool="Bash", command="pytest -q", passed=True),
    "test_unknown": el(Kind.TEST_RESULT, "ran", tool="Bash", command="pytest -q", passed=None),
    "build_ok": el(Kind.TOOL, "Bash: make\nok", tool="Bash", command="cd w && make -j4"),
    "install_ok": el(Kind.TOOL, "Bash: pip\nok", tool="Bash", command="pip install -e ."),
    "build_failed": el(Kind.ERROR, "Bash: make\nerror: x", tool="Bash", command="make", is_error=True),
    "tool_failed": el(Kind.TOOL, "Read: /x\nno such file", tool="Read", is_error=True),
    "edit_failed": el(Kind.CODE_CHANGE, "Edit: /x\nno match", tool="Edit", is_error=True),
    "thinking_with_fact": el(Kind.THINKING, "Hmm. We must not block the hook."),
}

#                       planning design implementation testing review
EXPECTED: dict[str, tuple[Category, ...]] = {
    "prompt":                 (K, K, K, K, K),
    "assistant":              (S, S, A, S, K),
    "thinking":               (A, A, D, D, D),
    "tool":                   (S, S, S, S, S),
    "error":                  (K, K, K, K, K),
    "code_change":            (S, S, K, S, S),
    "decision":               (K, K, K, K, K),
    "constraint":             (K, K, K, K, K),
    "pending":                (K, K, K, K, K),
    "test_result":            (S, S, K, K, A),
    "compact_summary":        (K, K, K, K, K),
    "ledger":                 (K, K, K, K, K),
    "lesson":                 (K, K, K, K, K),
    "read":                   (A, A, S, A, S),
    "grep":                   (A, A, S, A, S),
    "web":                    (A, A, S, A, S),
    "bash":                   (A, A, S, S, A),
    "bash_test_tool_passing": (D, D, D, D, D),
    "test_passing":           (D, D, D, D, D),
    "test_unknown":           (S, S, K, K, A),
    "build_ok":               (D, D, D, D, D),
    "install_ok":             (D, D, D, D, D),
    "build_failed":           (K, K, K, K, K),
    "tool_failed":            (K, K, K, K, K),
    "edit_failed":            (K, K, K, K, K),
    "thinking_with_fact":     (A, A, A, A, A),
}  # fmt: skip


def test_every_kind_is_in_the_expected_table() -> None:
    """The table below covers every Kind."""
    assert set(Kind) == {e.kind for e in ELEMENTS.values()}


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("name", list(EXPECTED))
def test_category_by_kind_and_phase(name: str, phase: str) -> None:
    """Every kind (and tool family, and override) x every phase: the category."""
    assert EXPECTED[name][PHASES.index(phase)] == categorize(ELEMENTS[name], phase)


@pytest.mark.parametrize(
    ("phase", "higher", "lower"),
    [
        ("planning", "constraint", "assistant"),
        ("planning", "prompt", "read"),
        ("design", "decision", "assistant"),
        ("design", "assistant", "thinking"),
        ("implementation", "code_change", "assistant"),
        ("implementation", "test_result", "read"),
        ("testing", "test_result", "code_change"),
        ("testing", "error", "code_change"),
        ("review", "assistant", "test_result"),
        ("review", "prompt", "code_change"),
    ],
)
def test_phase_priorities_follow_the_design_table(phase: str, higher: str, lower: str) -> None:
    """What a phase keeps ranks above what it archives."""
    assert (True, phase) == (priority(ELEMENTS[higher], phase) > priority(ELEMENTS[lower], phase), phase)


def test_passing_tests_and_builds_rank_lowest() -> None:
    """Discardable output has the discard priority in every phase."""
    expected = {(cl.DISCARD_PRIORITY,)}
    actual = {(priority(ELEMENTS[n], p),) for n in ("test_passing", "build_ok") for p in PHASES}
    assert expected == actual


def test_unknown_phase_raises() -> None:
    """An unknown phase name is a caller bug."""
    with pytest.raises(ValueError):
        categorize(ELEMENTS["prompt"], "deploying")


# --------------------------------------------------------------------------- properties

_elements = st.builds(
    Element,
    uid=st.text(min_size=1, max_size=8),
    kind=st.sampled_from(list(Kind)),
    text=st.one_of(st.text(max_size=200), st.sampled_from(["we decided x", "TODO y", "3 passed", "必须"])),
    ts=st.floats(min_value=0, max_value=1e6),
    tool=st.sampled_from([None, "Bash", "Read", "Edit", "Write", "Agent", "Grep"]),
    command=st.sampled_from([None, "pytest -q", "make", "npm run build", "git diff", "ls"]),
    is_error=st.booleans(),
    passed=st.sampled_from([None, True, False]),
)


@settings(max_examples=400, deadline=None)
@given(_elements, st.sampled_from(PHASES))
def test_never_discard_invariant(element: Element, phase: str) -> None:
    """Decisions, constraints, pending items, errors (any failed element), lessons, summaries and
    ledgers are never DISCARD and never below the floor; every priority is in 0..100."""
    prio, cat = priority(element, phase), categorize(element, phase)
    protected = element.kind in cl.NEVER_DISCARD or element.is_error
    assert (True, True, True) == (
        0 <= prio <= 100,
        not protected or cat is not D,
        not protected or prio >= cl.NEVER_DISCARD_FLOOR,
    )


@settings(max_examples=200, deadline=None)
@given(st.lists(_elements, max_size=30), st.sampled_from(PHASES), st.floats(min_value=0, max_value=2e6))
def test_rank_invariants(elements: list[Element], phase: str, now: float) -> None:
    """rank keeps every element, sorts by priority descending, stays in 0..100, never discards protected."""
    ranked = rank(elements, phase, now)
    prios = [r.priority for r in ranked]
    assert (sorted(map(id, elements)), sorted(prios, reverse=True), True, True) == (
        sorted(id(r.element) for r in ranked),
        prios,
        all(0 <= p <= 100 for p in prios),
        all(r.category is not D for r in ranked if r.element.kind in cl.NEVER_DISCARD or r.element.is_error),
    )


# --------------------------------------------------------------------------- ranking


def test_rank_recency_bonus_and_lift_to_keep() -> None:
    """A fresh Read in implementation gets the full bonus and is kept; an hour-old one is summarized."""
    now = 10_000.0
    fresh = el(Kind.TOOL, tool="Read", uid="fresh", ts=now - 1)
    old = el(Kind.TOOL, tool="Read", uid="old", ts=now - 3600)
    ranked = rank([old, fresh], "implementation", now)
    expected = [
        Ranked(fresh, 55 + cl.RECENCY_BONUS, K),
        Ranked(old, 55 + round(cl.RECENCY_BONUS / 16), S),
    ]
    assert expected == ranked


def test_rank_is_stable_and_never_lifts_archive() -> None:
    """Equal priorities keep input order; recency does not lift ARCHIVE or DISCARD to KEEP."""
    now = 500.0
    a = el(Kind.THINKING, uid="a", ts=now)
    b = el(Kind.THINKING, uid="b", ts=now)
    c = el(Kind.TEST_RESULT, uid="c", ts=now, passed=True, tool="Bash", command="pytest")
    ranked = rank([a, b, c], "planning", now)
    assert [("a", 45, A), ("b", 45, A), ("c", 30, D)] == [(r.element.uid, r.priority, r.category) for r in ranked]


def test_rank_without_timestamps_has_no_bonus() -> None:
    """ts == 0 (unknown) means no recency bonus."""
    assert [40] == [r.priority for r in rank([el(Kind.TOOL, tool="Agent")], "review", 1e9)]


# --------------------------------------------------------------------------- compression plans

SESSION = [
    Ranked(el(Kind.COMPACT_SUMMARY, uid="cs"), 100, K),
    Ranked(el(Kind.DECISION, uid="dec"), 95, K),
    Ranked(el(Kind.ERROR, uid="err", is_error=True), 85, K),
    Ranked(el(Kind.PROMPT, uid="old-prompt"), 75, K),
    Ranked(el(Kind.PENDING, uid="todo"), 90, K),
    Ranked(el(Kind.TOOL, tool="Read", uid="read"), 55, S),
    Ranked(el(Kind.ASSISTANT, uid="chat"), 35, S),
    Ranked(el(Kind.THINKING, uid="think"), 25, A),
    Ranked(el(Kind.TEST_RESULT, uid="green", passed=True), 10, D),
    Ranked(el(Kind.LESSON, uid="lesson"), 85, K),
]


@pytest.mark.parametrize(
    ("level", "expected"),
    [
        (
            Level.NONE,
            CompressionPlan(
                level=Level.NONE,
                keep=("cs", "dec", "err", "old-prompt", "todo", "read", "chat", "think", "green", "lesson"),
            ),
        ),
        (
            Level.L0_L1,
            CompressionPlan(
                level=Level.L0_L1,
                keep=("cs", "dec", "err", "old-prompt", "todo", "lesson"),
                summarize=("read", "chat"),
                archive=("think",),
                discard=("green",),
            ),
        ),
        (
            Level.L1_L2,
            CompressionPlan(
                level=Level.L1_L2,
                keep=("cs", "dec", "err", "todo", "lesson"),
                summarize=("old-prompt", "read"),
                archive=("chat", "think"),
                discard=("green",),
            ),
        ),
        (
            Level.L2_L3,
            CompressionPlan(
                level=Level.L2_L3,
                keep=("cs", "dec", "todo"),
                summarize=("err", "old-prompt", "lesson"),
                archive=("read", "chat", "think"),
                discard=("green",),
                promote=("dec", "todo", "lesson"),
            ),
        ),
    ],
)
def test_plan_compression(level: Level, expected: CompressionPlan) -> None:
    """Per level: what stays, gets an L1 summary, is archived, discarded, promoted to L3."""
    assert expected == plan_compression(SESSION, level)


def test_plan_archived_is_everything_that_leaves_l0() -> None:
    """plan.archived = summarize + archive + discard (each gets an L2 row and an L1 summary)."""
    plan = plan_compression(SESSION, Level.L0_L1)
    assert ("read", "chat", "think", "green") == plan.archived


def test_end_to_end_testing_phase_plan() -> None:
    """rank + plan in testing: failing tests and errors stay, passing output and old edits leave."""
    now = 100_000.0
    els = [
        el(Kind.TEST_RESULT, uid="red", tool="Bash", command="pytest", passed=False, ts=now - 60),
        el(Kind.TEST_RESULT, uid="green", tool="Bash", command="pytest", passed=True, ts=now - 30),
        el(Kind.CODE_CHANGE, uid="edit", tool="Edit", file_path="/a.py", ts=now - 7200),
        el(Kind.ERROR, uid="err", is_error=True, ts=now - 7200),
    ]
    plan = plan_compression(rank(els, "testing", now), Level.L0_L1)
    assert (("red", "err"), ("edit",), ("green",)) == (plan.keep, plan.summarize, plan.discard)


# --------------------------------------------------------------------------- purity


def test_core_modules_import_no_io_libraries() -> None:
    """Importing the pure modules pulls in neither anyio, sqlite3 nor socket."""
    code = (
        "import sys\n"
        "import ctxlifed.core.commands, ctxlifed.core.phase, ctxlifed.core.classify, ctxlifed.core.summarize\n"
        "print(sorted(m for m in ('anyio', 'sqlite3', 'socket', 'sqlite_utils', 'logging') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert "[]" == out.stdout.strip()


def test_a_failure_a_later_passing_run_covers_is_archived() -> None:
    """A red run of a command that later passed (the same command, or one the caller says covers it) is
    history: archived, never kept, summarized or listed; a failure nothing covers stays kept."""
    fail = el(Kind.TEST_RESULT, "1 failed", uid="1", command="pytest -q tests/test_a.py", passed=False)
    other = el(Kind.TEST_RESULT, "1 failed", uid="2", command="pytest -q tests/test_b.py", passed=False)
    green = el(Kind.TEST_RESULT, "3 passed", uid="3", command="pytest -q tests/test_a.py", passed=True)
    later = el(Kind.TEST_RESULT, "1 failed", uid="4", command="pytest -q tests/test_a.py", passed=False)
    assert cl.superseded_failures([fail, other, green, later]) == frozenset({"1"})
    assert cl.superseded_failures([green, fail]) == frozenset()  # a pass before the failure covers nothing
    whole = el(Kind.TEST_RESULT, "9 passed", uid="5", command="pytest -q", passed=True)
    assert cl.superseded_failures([fail, other, whole], lambda ok, bad: ok == "pytest -q") == frozenset({"1", "2"})
    ranked = {r.element.uid: r.category for r in cl.rank([fail, other, green], "implementation", 0.0,
                                                           superseded=frozenset({"1"}))}
    assert ranked["1"] is Category.ARCHIVE and ranked["2"] is Category.KEEP
