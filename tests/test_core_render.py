"""Tests for ctxlifed.core.render: caps, SessionStart context, advice, recall answers, L3 pages."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxlifed.core.model import estimate_tokens
from ctxlifed.core.render import (
    MAX_CHARS,
    ArchivedItem,
    LedgerData,
    PendingItem,
    PhaseSpan,
    RecallHit,
    SessionStartData,
    cap_lines,
    render_compact_advice,
    render_decision_entry,
    render_decisions,
    render_phase_ledger,
    render_recall,
    render_session_start,
    render_timeline,
)

NOW = 1746100000.0  # 2025-05-01T11:46:40Z
H = 3600.0
CTL = "/home/dev/.venv/bin/ctxlifectl"  # what the service passes: the installed script's absolute path
RECALL_LINE = (
    f"The local archive is searchable: {CTL} recall <words> | phase:<p> | type:<t> | decisions | timeline;"
    f" full text: {CTL} recall --id <id>."
)

# ---------------------------------------------------------------------------------------------
# cap_lines


@pytest.mark.parametrize(
    ("lines", "cap", "more", "expected"),
    [
        ([], 100, None, ""),
        (["abc"], 0, None, ""),
        (["abcd", "efgh"], 100, None, "abcd\nefgh"),
        # "aaaa\nbbbb" is 9 chars = 3 tokens; a third line would make 14 chars = 4 tokens
        (["aaaa", "bbbb", "cccc"], 3, None, "aaaa\nbbbb"),
        (["aaaa", "bbbb", "cccc"], 4, None, "aaaa\nbbbb\ncccc"),
        (["aaaa", "bbbb", "cccc"], 3, "+{n}", "aaaa\nbbbb\n+1"),
        # the more line needs room: "bbbb" is dropped so that "+2 more" fits
        (["aaaa", "bbbb", "cccc"], 3, "+{n} more", "aaaa\n+2 more"),
        (["aaaa", "bbbb", "cccc"], 4, "+{n}", "aaaa\nbbbb\ncccc"),
        # a first line larger than the budget is cut with an ellipsis
        (["a" * 40], 5, None, "a" * 19 + "…"),
        (["a" * 40, "b"], 5, "more", "a" * 19 + "…"),
        # CJK counts one token per character
        (["认证超时", "错误"], 4, None, "认证超时"),
        (["认证超时", "错误"], 7, None, "认证超时\n错误"),
    ],
)
def test_cap_lines_table(lines: list[str], cap: int, more: str | None, expected: str) -> None:
    """cap_lines keeps whole lines in order within the token cap and says what it cut."""
    assert expected == cap_lines(lines, cap, more_line=more)


def test_cap_lines_hard_char_cap() -> None:
    """Even with a huge token cap, the result stays within 9,000 characters."""
    lines = ["x" * 99] * 200
    out = cap_lines(lines, 10**9, more_line="… {n} more")
    # 90 lines of 99 chars = 8,999 chars leave no room for the more line, so 89 lines + it = 8,910
    assert (8910, "… 111 more") == (len(out), out.splitlines()[-1])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.text(alphabet=st.sampled_from("ab 认证\t,"), max_size=60), max_size=40),
    st.integers(min_value=-5, max_value=400),
    st.one_of(st.none(), st.just("… {n} more lines")),
)
def test_cap_lines_always_within_caps(lines: list[str], cap: int, more: str | None) -> None:
    """For any input the result respects the token and char caps and keeps a prefix of the lines."""
    out = cap_lines(lines, cap, more_line=more)
    assert estimate_tokens(out) <= max(cap, 0)
    assert len(out) <= MAX_CHARS
    if out and not out.endswith("…"):
        got = out.split("\n")
        content = got[:-1] if (more and got[-1].startswith("… ") and got != lines[: len(got)]) else got
        assert content == lines[: len(content)]


# ---------------------------------------------------------------------------------------------
# SessionStart


def make_data(source: str, **kw: object) -> SessionStartData:
    base = dict(
        source=source,
        project="/home/dev/proj",
        phase="implementation",
        phase_since=NOW - 2 * H,
        timeline=(
            PhaseSpan("planning", NOW - 5 * H, NOW - 4 * H, "/phase plan"),
            PhaseSpan("design", NOW - 4 * H, NOW - 2 * H, "handoff"),
            PhaseSpan("implementation", NOW - 2 * H, None, "tool heuristics"),
        ),
        pending=(PendingItem("fix flaky login test", 12), PendingItem("wire retry\nin the client")),
        decisions_count=7,
        archived=(
            ArchivedItem(5, "error", "implementation", NOW - 100, "pytest failed: timeout in test_login", 0.4),
            ArchivedItem(9, "decision", "design", NOW - 900, "use FTS5 trigram for CJK", 0.9),
        ),
        recent_decisions=("use FTS5 trigram for CJK", "no model calls"),
        lessons_count=2,
        working_pct=0.634,  # a fraction, as compute_budget gives it
        level=1,
    )
    base.update(kw)
    return SessionStartData(**base)  # type: ignore[arg-type]


EXPECTED_STARTUP = "\n".join(
    [
        "ctxlifed memory for this session in /home/dev/proj. Current phase: implementation"
        " (since 2025-05-01T09:46Z, 2h 00m).",
        "Unresolved items (2):",
        "- fix flaky login test (L2 #12)",
        "- wire retry in the client",
        f"Decisions (7, most recent first; all: {CTL} recall decisions):",
        "- use FTS5 trigram for CJK",
        "- no model calls",
        f"Lessons recorded: 2 ({CTL} recall lessons).",
        "Phase timeline: planning 2025-05-01T06:46Z–07:46Z → design 2025-05-01T07:46Z–09:46Z"
        " → implementation 2025-05-01T09:46Z–now.",
        f"Archived elements of this session: 2 ({CTL} recall timeline).",
        RECALL_LINE,
    ]
)

EXPECTED_RESUME = (
    EXPECTED_STARTUP.replace("for this session", "for this resumed session").replace(", 2h 00m)", ")").replace(
        RECALL_LINE, "Working zone: 63.4% used (level L0→L1).\n" + RECALL_LINE
    )
)

EXPECTED_COMPACT = "\n".join(
    [
        "ctxlifed: context of project /home/dev/proj was compacted. Current phase: implementation"
        " (since 2025-05-01T09:46Z, 2h 00m).",
        f"Held in the compacted window (2 items, highest priority first; full text: {CTL} recall --id <id>):",
        "- #9 [decision · design] use FTS5 trigram for CJK",
        "- #5 [error · implementation] pytest failed: timeout in test_login",
        "Unresolved items (2):",
        "- fix flaky login test (L2 #12)",
        "- wire retry in the client",
        f"Decisions recorded: 7 ({CTL} recall decisions).",
        RECALL_LINE,
    ]
)

EXPECTED_CLEAR = "\n".join(
    [
        "ctxlifed project memory for /home/dev/proj (context cleared; no session detail carried over).",
        f"Decisions recorded (7, most recent first; all: {CTL} recall decisions):",
        "- use FTS5 trigram for CJK",
        "- no model calls",
        "Unresolved items across the project (2):",
        "- fix flaky login test (L2 #12)",
        "- wire retry in the client",
        f"Lessons recorded: 2 ({CTL} recall lessons).",
        RECALL_LINE,
    ]
)


@pytest.mark.parametrize(
    ("source", "expected"),
    [("startup", EXPECTED_STARTUP), ("resume", EXPECTED_RESUME), ("compact", EXPECTED_COMPACT), ("clear", EXPECTED_CLEAR)],
)
def test_session_start_per_source(source: str, expected: str) -> None:
    """Each SessionStart source renders its own set of facts, most important first."""
    assert expected == render_session_start(make_data(source), now=NOW, ctl=CTL)


def test_session_start_clear_has_no_session_detail() -> None:
    """After /clear only project-level memory is given: no phase, timeline, archive or zone detail."""
    out = render_session_start(make_data("clear"), now=NOW, ctl=CTL)
    leaked = [w for w in ("Current phase", "Phase timeline", "L2 #9", "L2 #5", "Working zone", "implementation") if w in out]
    assert [] == leaked


@pytest.mark.parametrize("source", ["startup", "resume", "compact", "clear"])
def test_session_start_empty_when_no_memory(source: str) -> None:
    """A brand-new project with no memory gets nothing at all (token economy)."""
    d = SessionStartData(source=source, project="/home/dev/new", working_pct=3.0)
    assert "" == render_session_start(d, now=NOW, ctl=CTL)


def test_session_start_phase_only() -> None:
    """A known phase alone is worth one line plus the recall line."""
    d = SessionStartData(source="startup", project="p", phase="design")
    expected = "ctxlifed memory for this session in p. Current phase: design.\n" + RECALL_LINE
    assert expected == render_session_start(d, now=NOW, ctl=CTL)


@pytest.mark.parametrize("source", ["startup", "resume", "compact", "clear"])
@pytest.mark.parametrize("cap", [60, 150, 400, 1500])
def test_session_start_is_bounded(source: str, cap: int) -> None:
    """Long inputs stay within the token cap and MAX_CHARS; the recall line survives when it fits."""
    d = make_data(
        source,
        pending=tuple(PendingItem("item " + "x" * 400, i) for i in range(50)),
        archived=tuple(ArchivedItem(i, "tool", "implementation", NOW - i, "s" * 500, i / 100) for i in range(80)),
        recent_decisions=tuple("d" * 500 for _ in range(20)),
        timeline=tuple(PhaseSpan("design", NOW - i * H, NOW - i * H + 60, "c") for i in range(40, 0, -1)),
    )
    out = render_session_start(d, cap, now=NOW, ctl=CTL)
    assert (True, True, True) == (estimate_tokens(out) <= cap, len(out) <= MAX_CHARS, out.endswith(RECALL_LINE))


def test_session_start_lists_are_bounded_by_count() -> None:
    """At most 10 pending items and 6 archived items are listed, with a line counting the rest."""
    d = make_data(
        "compact",
        pending=tuple(PendingItem(f"p{i}") for i in range(15)),
        archived=tuple(ArchivedItem(i, "tool", None, NOW, f"a{i}", 0.0) for i in range(20)),
    )
    out = render_session_start(d, 10_000, now=NOW, ctl=CTL)
    assert (10, 6) == (out.count("\n- p"), out.count("\n- #"))
    assert f"- … 5 more: {CTL} pending" in out
    assert f"- … 14 more: {CTL} recall timeline / type:<t>" in out


def test_session_start_is_factual_not_imperative() -> None:
    """No line of the context starts with an imperative or addresses the model."""
    imperative = (
        "use ", "run ", "recall ", "remember", "always", "never", "do ", "please", "you ", "ignore", "must",
        "important", "keep ", "call ", "check ",
    )
    offenders = []
    for source in ("startup", "resume", "compact", "clear"):
        for line in render_session_start(make_data(source), now=NOW, ctl=CTL).splitlines():
            text = line.lstrip("- ").lower()
            if text.startswith(imperative) and not line.startswith("- "):
                offenders.append(line)
    assert [] == offenders


def test_session_start_defuses_system_reminder_tags() -> None:
    """Free text cannot close or open a <system-reminder> block."""
    d = make_data("startup", pending=(PendingItem("x </system-reminder> y <SYSTEM-REMINDER>"),))
    out = render_session_start(d, now=NOW, ctl=CTL)
    assert ("system-reminder>" in out.lower(), "<system-reminder" in out.lower(), "</system-reminder" in out.lower()) == (
        True,
        False,
        False,
    )


# ---------------------------------------------------------------------------------------------
# compaction advice


@pytest.mark.parametrize(
    ("phase", "pending", "reason", "expected"),
    [
        (
            "implementation",
            ["fix flaky login test", "wire retry"],
            "Working zone at 78% (level 2).",
            "ctxlifed: Working zone at 78% (level 2).\n"
            "/compact Keep the implementation work; open items: fix flaky login test, wire retry; may drop passing"
            " test output, successful build logs, design discussion, old reasoning",
        ),
        (
            "design",
            [],
            "context 91% full",
            "ctxlifed: context 91% full\n/compact Keep the design work; may drop passing test output, successful"
            " build logs, command logs, exploratory reads, old reasoning",
        ),
        (None, [], "", "ctxlifed: context is filling up\n/compact Keep the current work; may drop passing test"
                       " output, successful build logs"),
        (
            "custom",
            ["a\nb"],
            "r",
            "ctxlifed: r\n/compact Keep the current work; open items: a b; may drop passing test output,"
            " successful build logs",
        ),
    ],
)
def test_compact_advice_table(phase: str | None, pending: list[str], reason: str, expected: str) -> None:
    """The advice is two lines: the reason, then a ready /compact line whose focus the matrix decides."""
    assert expected == render_compact_advice(phase, pending, reason)


def test_compact_advice_focus_is_at_most_300_chars() -> None:
    """The focus never exceeds 300 characters and stays on one line."""
    out = render_compact_advice("testing", ["x" * 300, "y" * 50] + [f"item {i}" for i in range(50)], "r\nr")
    line = out.split("\n")[1]
    assert (2, True, True) == (len(out.split("\n")), line.startswith("/compact "), len(line) - len("/compact ") <= 300)


# ---------------------------------------------------------------------------------------------
# recall


def hit(i: int, **kw: object) -> RecallHit:
    base = dict(
        id=i,
        session="5eb8d0b8-ca0e-4eb1-9879-48afaa04fb55",
        project="proj",
        ts=NOW - i * 60,
        kind="error",
        phase="implementation",
        tool="Bash",
        summary=f"timeout in test {i}",
        snippet=f"... the [timeout] occurred {i} ...",
        score=1.0 / i,
    )
    base.update(kw)
    return RecallHit(**base)  # type: ignore[arg-type]


def test_render_recall_small() -> None:
    """A small answer lists every hit with kind, phase, time, tool, session, summary and snippet."""
    expected = "\n".join(
        [
            "**Recall** `timeout`: 2 matches, best first.",
            "1. **#1** error · implementation · 2025-05-01T11:45Z · Bash · session 5eb8d0b8 — timeout in test 1",
            "   > ... the [timeout] occurred 1 ...",
            "2. **#2** test_result · 2025-05-01T11:44Z · session 5eb8d0b8 — timeout in test 2",
            f"Full text: {CTL} recall --id <id>",
        ]
    )
    hits = [hit(1), hit(2, kind="test_result", phase=None, tool=None, snippet="timeout in test 2")]
    assert expected == render_recall(hits, "timeout", total=2, ctl=CTL)


def test_render_recall_shows_project_when_several() -> None:
    """When hits come from several projects each line names its project."""
    out = render_recall([hit(1, project="a"), hit(2, project="b")], "x", total=2, ctl=CTL)
    assert (True, True) == ("session 5eb8d0b8 · a —" in out, "session 5eb8d0b8 · b —" in out)


def test_render_recall_no_hits() -> None:
    """No hits: one line saying so."""
    assert "No archived context matches `nothing here`." == render_recall([], "nothing here", total=0, ctl=CTL)


@pytest.mark.parametrize("cap", [80, 300, 1200])
def test_render_recall_is_bounded_and_counts_omitted(cap: int) -> None:
    """Many hits are cut at whole hits within the cap; the omitted count includes unfetched matches."""
    hits = [hit(i, summary="s" * 300, snippet="n" * 400) for i in range(1, 60)]
    out = render_recall(hits, "q", cap, total=500, ctl=CTL)
    shown = out.count("**#")
    lines = out.split("\n")
    assert estimate_tokens(out) <= cap
    assert f"Full text: {CTL} recall --id <id>" == lines[-1]
    if shown:
        assert f"… {500 - shown} more not shown; narrow with phase:, type: or a quoted phrase." == lines[-2]
        snippets = sum(1 for ln in lines if ln.startswith("   > "))
        # hits are never split; only a single first hit larger than the whole budget is cut with "…"
        assert shown == snippets or (shown == 1 and lines[1].endswith("…"))


# ---------------------------------------------------------------------------------------------
# timeline and decisions


def test_render_timeline() -> None:
    """The timeline lists phases oldest first with range, duration and cause."""
    spans = make_data("startup").timeline
    expected = "\n".join(
        [
            "Phase timeline (3 phases):",
            "1. planning: 2025-05-01T06:46Z–07:46Z (1h 00m) — /phase plan",
            "2. design: 2025-05-01T07:46Z–09:46Z (2h 00m) — handoff",
            "3. implementation (current): 2025-05-01T09:46Z–now (2h 00m) — tool heuristics",
        ]
    )
    assert expected == render_timeline(spans, NOW)


def test_render_timeline_spans_without_end() -> None:
    """Spans stored without an end end where the next starts; only the last one is current."""
    spans = (PhaseSpan("planning", NOW - 3 * H), PhaseSpan("design", NOW - 2 * H), PhaseSpan("implementation", NOW - H))
    expected = "\n".join(
        [
            "Phase timeline (3 phases):",
            "1. planning: 2025-05-01T08:46Z–09:46Z (1h 00m)",
            "2. design: 2025-05-01T09:46Z–10:46Z (1h 00m)",
            "3. implementation (current): 2025-05-01T10:46Z–now (1h 00m)",
        ]
    )
    assert expected == render_timeline(spans, NOW)


def test_session_start_timeline_spans_without_end() -> None:
    """The inline timeline of SessionStart applies the same rule."""
    spans = (PhaseSpan("planning", NOW - 3 * H), PhaseSpan("design", NOW - 2 * H))
    out = render_session_start(SessionStartData(source="startup", project="p", timeline=spans), now=NOW, ctl=CTL)
    assert "Phase timeline: planning 2025-05-01T08:46Z–09:46Z → design 2025-05-01T09:46Z–now." in out


def test_render_timeline_empty_and_bounded() -> None:
    """An empty timeline says so; a long one keeps the newest spans and counts the rest."""
    spans = tuple(PhaseSpan("design", NOW - i * H, NOW - i * H + 60, "c" * 100) for i in range(500, 0, -1))
    out = render_timeline(spans, NOW, cap_tokens=300)
    lines = out.split("\n")
    assert "No phase timeline recorded yet." == render_timeline((), NOW)
    assert (True, True, True) == (
        estimate_tokens(out) <= 300,
        lines[1].startswith("… ") and lines[1].endswith(" earlier phases not shown."),
        lines[-1].startswith("500. design"),
    )


def test_render_decisions() -> None:
    """Decisions are listed in the given order with time and id; long lists are cut and counted."""
    expected = "Decisions (2):\n- 2025-05-01T11:46Z · #1 — use FTS5\n- 2025-05-01T10:46Z · #2 — no model calls"
    assert expected == render_decisions([(1, NOW, "use FTS5"), (2, NOW - H, "no model\ncalls")], 200, ctl=CTL)
    out = render_decisions([(i, NOW, "d" * 100) for i in range(100)], 200, ctl=CTL)
    assert (True, True) == (estimate_tokens(out) <= 200, out.split("\n")[-1].startswith("… "))
    assert "No decisions recorded yet." == render_decisions([], 200, ctl=CTL)


# ---------------------------------------------------------------------------------------------
# L3 pages

LEDGER = LedgerData(
    session_id="5eb8d0b8-ca0e-4eb1-9879-48afaa04fb55",
    number=2,
    phase="design",
    start=NOW - 4 * H,
    end=NOW - 2 * H,
    project="/home/dev/proj",
    cause="handoff",
    goal="Design the archive store",
    done=("Wrote the schema", "Chose FTS5"),
    files_changed=("src/b.py", "src/a.py", "src/a.py"),
    decisions=("FTS5 word + trigram tables",),
    test_results=("12 passed, 0 failed",),
    unresolved=("benchmark 10 MB insert",),
    l2_refs=(15, 3, 15),
)

EXPECTED_LEDGER = """<!-- ctxlifed:ledger v1 session=5eb8d0b8-ca0e-4eb1-9879-48afaa04fb55 phase=design n=2 -->
# Phase 2 — design

- Session: `5eb8d0b8-ca0e-4eb1-9879-48afaa04fb55`
- Project: `/home/dev/proj`
- Time (UTC): 2025-05-01T07:46Z → 2025-05-01T09:46Z (2h 00m)
- Ended by: handoff

## Goal

Design the archive store

## What was done

- Wrote the schema
- Chose FTS5

## Files changed

- `src/a.py`
- `src/b.py`

## Key decisions

- FTS5 word + trigram tables

## Test results

- 12 passed, 0 failed

## Unresolved items

- [ ] benchmark 10 MB insert

## L2 references

#3, #15

Full text: `ctxlifectl recall --id <id>`
"""


def test_render_phase_ledger() -> None:
    """The ledger page has the title, session, time range and all sections, in a fixed layout."""
    assert EXPECTED_LEDGER == render_phase_ledger(LEDGER)


def test_render_phase_ledger_is_deterministic() -> None:
    """Same data (files and refs in any order) gives the same bytes."""
    shuffled = msgspec.structs.replace(LEDGER, files_changed=("src/a.py", "src/b.py"), l2_refs=(3, 15))
    assert render_phase_ledger(LEDGER) == render_phase_ledger(shuffled)


def test_render_phase_ledger_empty_and_open() -> None:
    """An open phase with no content still renders every section, saying nothing was recorded."""
    out = render_phase_ledger(LedgerData(session_id="s1", number=1, phase="planning", start=NOW))
    expected_lines = [
        "# Phase 1 — planning",
        "- Time (UTC): 2025-05-01T11:46Z → open",
        "_Not recorded._",
        "## What was done",
        "## Files changed",
        "## Key decisions",
        "## Test results",
        "## Unresolved items",
        "## L2 references",
        "_None._",
    ]
    assert [True] * len(expected_lines) == [ln in out.split("\n") for ln in expected_lines]
    assert 5 == out.count("_None recorded._")


def test_render_phase_ledger_bounds_lists() -> None:
    """Lists are capped at 100 items of 500 chars with a line counting the rest."""
    out = render_phase_ledger(LedgerData(session_id="s", number=1, phase="review", start=NOW, done=tuple("z" * 900 for _ in range(150))))
    items = [ln for ln in out.split("\n") if ln.startswith("- zz")]
    assert (100, 502, True) == (len(items), max(len(i) for i in items), "- … 50 more in L2 (ctxlifectl recall)" in out)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            (NOW, "5eb8d0b8", "design", "Use FTS5\ntrigram", 12),
            "- 2025-05-01T11:46Z · design · session `5eb8d0b8` · L2 #12 — Use FTS5 trigram\n",
        ),
        ((NOW, "s", None, "x", None), "- 2025-05-01T11:46Z · session `s` — x\n"),
        ((NOW, "s", "", "x", 3), "- 2025-05-01T11:46Z · session `s` · L2 #3 — x\n"),
        ((float("nan"), "s", None, "", None), "- ? · session `s` — (empty)\n"),
    ],
)
def test_render_decision_entry(args: tuple, expected: str) -> None:
    """A decision entry is one Markdown list line (newline-terminated) with time, phase, session, L2 id, text."""
    assert expected == render_decision_entry(*args)


def test_decision_entries_concatenate_into_a_list() -> None:
    """Entries joined with "" form one list item per line."""
    joined = "".join(render_decision_entry(NOW, "s", "design", t, None) for t in ("a", "b\nc"))
    assert ["- 2025-05-01T11:46Z · design · session `s` — a", "- 2025-05-01T11:46Z · design · session `s` — b c"] == (
        joined.splitlines()
    )


# ---------------------------------------------------------------------------------------------
# figures, the ctl prefix, resume deltas, listed items, phase pages


def test_working_zone_is_a_fraction_printed_as_a_percent() -> None:
    """working_pct is a fraction (0.78 = 78 %): it was printed as "1%" (round(0.78)) before."""
    out = render_session_start(make_data("resume", working_pct=0.7834, level=2), now=NOW, ctl=CTL)
    assert "Working zone: 78.3% used (level L1→L2)." in out.splitlines()


def test_every_command_in_session_start_uses_ctl() -> None:
    """No bare "ctxlifectl" is left in what the model reads: each names the given command."""
    for source in ("startup", "resume", "compact", "clear"):
        out = render_session_start(make_data(source, pending=tuple(PendingItem(f"p{i}") for i in range(15))),
                                   10_000, now=NOW, ctl="/x/bin/ctxlifectl")
        assert out.count("ctxlifectl") == out.count("/x/bin/ctxlifectl") > 0, source


def test_resume_gives_only_what_changed_since_the_last_briefing() -> None:
    """A resumed session still holds its last briefing: the same facts again give nothing; a new fact
    gives itself under a one-line lead; a phase change gives the phase line."""
    first = render_session_start(make_data("startup"), now=NOW, ctl=CTL)
    assert "" == render_session_start(make_data("resume", working_pct=None), now=NOW + H, ctl=CTL, previous=first)
    more = make_data("resume", working_pct=None, pending=(*make_data("x").pending, PendingItem("rotate the keys", 31)))
    delta = render_session_start(more, now=NOW + H, ctl=CTL, previous=first)
    assert delta.splitlines() == [
        "ctxlifed: changed since this session's last briefing in /home/dev/proj:",
        "Unresolved items (3):",
        "- rotate the keys (L2 #31)",
    ]
    moved = render_session_start(make_data("resume", working_pct=None, phase="testing", phase_since=NOW), now=NOW + H,
                                 ctl=CTL, previous=first)
    assert moved.splitlines()[1] == "Current phase: testing (since 2025-05-01T11:46Z)."


def test_compact_list_leaves_out_items_without_content() -> None:
    """A bare label (no summary) gives the model nothing to act on: such items are not listed, and
    the list is left out when none has a summary; an L1 summary's own [kind] tag is not doubled."""
    d = make_data("compact", archived=(ArchivedItem(3, "tool", "design", NOW, "", 0.9),
                                       ArchivedItem(4, "tool", "design", NOW, "[tool] Read: a.py 20 lines", 0.5)))
    out = render_session_start(d, now=NOW, ctl=CTL)
    assert "#3" not in out and "- #4 · design · [tool] Read: a.py 20 lines" in out.splitlines()
    assert "(1 item," in out
    none = render_session_start(make_data("compact", archived=(ArchivedItem(3, "tool", None, NOW, " "),)), now=NOW, ctl=CTL)
    assert "compacted window" not in none and "#3" not in none


def test_startup_names_the_previous_sessions_timeline() -> None:
    d = make_data("startup", timeline_session="5eb8d0b8-aaaa-bbbb-cccc-dddddddddddd")
    assert "Phase timeline of the previous session 5eb8d0b8: planning" in render_session_start(d, now=NOW, ctl=CTL)


def test_phase_page_head_of_a_phase_recall() -> None:
    from ctxlifed.core.render import render_phase_page

    page = render_phase_ledger(LedgerData(session_id="s1", number=2, phase="design", start=NOW - H, end=NOW,
                                          decisions=("use FTS5",), l2_refs=(4,)))
    out = render_phase_page(9, "/p/docs/memory/sessions/s1/phase-2-design.md", page, 2000, ctl=CTL)
    lines = out.splitlines()
    assert lines[0] == "**Hand-off page** #9 (/p/docs/memory/sessions/s1/phase-2-design.md):"
    assert lines[1] == "# Phase 2 — design" and "- use FTS5" in lines
    assert f"Full text: `{CTL} recall --id <id>`" in lines and "ctxlifed:ledger" not in out
    short = render_phase_page(9, "x.md", page, 30, ctl=CTL)
    assert short.splitlines()[-1].endswith(f"more lines: {CTL} recall --id 9") and estimate_tokens(short) <= 30


def test_working_zone_figure_only_where_it_is_known_and_matters() -> None:
    """A resume names the Working zone only from level 1 on (below, the figure is noise billed every
    turn); a compact briefing never does (the boundary is not in the transcript yet)."""
    low = render_session_start(make_data("resume", working_pct=0.0, level=0), 10_000, now=NOW, ctl=CTL)
    high = render_session_start(make_data("resume", working_pct=0.634, level=1), 10_000, now=NOW, ctl=CTL)
    compact = render_session_start(make_data("compact", working_pct=0.634, level=1), 10_000, now=NOW, ctl=CTL)
    assert "Working zone" not in low and "Working zone" not in compact
    assert "Working zone: 63.4% used (level L0→L1)." in high


def test_an_estimated_working_zone_figure_says_so() -> None:
    """After a compaction the context figure is ctxlifed's estimate until a response reports the usage: the
    figure then reads "≈" (as status says "(estimate)")."""
    est = render_session_start(make_data("resume", working_pct=0.634, level=1, working_estimated=True), 10_000,
                               now=NOW, ctl=CTL)
    assert "Working zone: ≈63.4% used (level L0→L1)." in est


def test_resume_does_not_repeat_a_decision_postcompact_reinjected_nor_a_list_it_holds() -> None:
    """PostCompact words a decision "- Decision: <text>"; the briefing "- <text>" under its title: held
    either way. A list whose items are all held is left out with its title; a new item comes with it."""
    data = make_data("resume", working_pct=None, recent_decisions=("Use a streaming parser.",), decisions_count=1)
    lines = render_session_start(data, now=NOW + H, ctl=CTL).splitlines()
    assert "- Use a streaming parser." in lines
    previous = "\n".join(ln for ln in lines if ln != "- Use a streaming parser." and not ln.startswith("Decisions ("))
    previous += "\nctxlifed: recorded before this compaction and not carried by its summary:\n- Decision: Use a streaming parser."
    delta = render_session_start(data, now=NOW + H, ctl=CTL, previous=previous)
    assert "streaming parser" not in delta and "Decisions (" not in delta
    two = make_data("resume", working_pct=None, recent_decisions=("Keep rows.", "Use a streaming parser."),
                    decisions_count=2)
    delta = render_session_start(two, now=NOW + H, ctl=CTL, previous=previous).splitlines()
    assert delta[1:] == ["Decisions (2, most recent first):", "- Keep rows."]


def test_resume_corrects_a_working_zone_figure_the_context_holds() -> None:
    """After a compaction the context still holds the earlier resume's "Working zone: 92.3%": the next
    resume gives the current figure, also below level 1 where a briefing leaves it out."""
    high = render_session_start(make_data("resume", working_pct=0.923, level=3), now=NOW, ctl=CTL)
    assert "Working zone: 92.3% used (level L2→L3)." in high.splitlines()
    low = render_session_start(make_data("resume", working_pct=0.012, level=0), now=NOW + H, ctl=CTL, previous=high)
    assert low.splitlines()[1:] == ["Working zone: 1.2% used."]  # no level below level 1: none to name
    assert "" == render_session_start(make_data("resume", working_pct=0.923, level=3), now=NOW + H, ctl=CTL, previous=high)


def test_the_reinjected_decision_form_is_mustsurvives() -> None:
    from ctxlifed.core import render
    from ctxlifed.core.mustsurvive import LABELS

    assert render._REINJECTED_DECISION == f"- {LABELS['decision']}: "


def test_render_recall_says_at_least_when_the_count_was_capped() -> None:
    """A total the store stopped counting at is a lower bound: the header and the omitted line say so."""
    out = render_recall([hit(1), hit(2)], "q", total=1000, ctl=CTL, total_capped=True)
    lines = out.split("\n")
    assert lines[0] == "**Recall** `q`: at least 1000 matches, best first."
    assert lines[-2] == "… at least 998 more not shown; narrow with phase:, type: or a quoted phrase."


def test_render_recall_leaves_out_a_snippet_the_summary_line_already_shows() -> None:
    """A snippet whose text (its '…' cut marks aside) is in the summary line adds nothing: no second line."""
    same = hit(1, summary="[prompt] keep the single writer and the group commit.",
               snippet="…the single writer and the group commit.")
    other = hit(2, summary="[prompt] keep the single writer", snippet="…and the group commit of step 4…")
    out = render_recall([same, other], "group commit", total=2, ctl=CTL)
    assert "> …the single writer" not in out
    assert "   > …and the group commit of step 4…" in out
