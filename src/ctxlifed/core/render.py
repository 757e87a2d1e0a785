"""Everything ctxlifed writes for humans or for the model: hook context, advice, recall answers, L3 pages.

Rules:
- Pure: no I/O, no clock (``now`` is passed in), no logging. Same input -> same output, byte for byte.
- Bounded: text for the model is capped by an estimated token budget (:func:`estimate_tokens`) AND by
  ``MAX_CHARS`` = 9,000 characters (Claude Code spills hook output over 10,000 characters to a file).
  Lists are cut at whole lines/items, most important first, and the cut is said ("… N more").
  L3 Markdown pages are bounded per list (``LEDGER_MAX_ITEMS`` items of ``LEDGER_ITEM_CHARS``).
- Every piece of free text (summaries, pending items, decisions, snippets) is made one line:
  whitespace collapsed, truncated with "…", ``<system-reminder>`` tags defused.
- Hook context states facts ("Current phase: design", "Unresolved items (2):") and never gives
  orders: Claude Code's prompt-injection defences distrust imperative "system" phrasing.
- Times are UTC, ISO 8601 to the minute: ``2025-05-01T10:20Z``.
- SessionStart context says nothing ("") when there is nothing worth saying: a project without any
  memory gets no line at all, not even a recall hint — it would cost tokens in every new session and
  point at an empty archive; the plugin's /recall skill already documents the command.
- Every command named for the model starts with ``ctl``, passed in by the service (the absolute path
  of the installed ctxlifectl: it is not on Claude Code's PATH). Pages kept in the repository (L3)
  name the bare ``ctxlifectl``: they are shared between machines.
- Figures (percentages, token counts, levels) are formatted by ``core.figures`` (percent, tokens,
  level_name) only, so the model reads what ``ctxlifectl status --json`` holds.
- A resumed session still holds its last briefing: it gets only the lines that changed, or nothing.
- Listed items carry their id and a one-line summary of their content, never a bare label.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from collections.abc import Callable, Iterable, Sequence

import msgspec

from ctxlifed.core.figures import level_name, percent
from ctxlifed.core.matrix import DEFAULT as DEFAULT_MATRIX
from ctxlifed.core.matrix import FOCUS_MAX_CHARS, FocusState, Matrix, focus_line
from ctxlifed.core.model import PHASES
from ctxlifed.core.model import cjk_count, estimate_tokens, tokens_of

__all__ = [
    "MAX_CHARS",
    "cap_lines",
    "PhaseSpan",
    "ArchivedItem",
    "PendingItem",
    "SessionStartData",
    "render_session_start",
    "render_compact_advice",
    "RecallHit",
    "render_recall",
    "render_timeline",
    "render_phase_page",
    "render_decisions",
    "LedgerData",
    "render_phase_ledger",
    "render_decision_entry",
    "recall_usage",
]

MAX_CHARS = 9000
ITEM_CHARS = 240  # one pending item / archived summary / decision in hook context
SNIPPET_CHARS = 300
LEDGER_MAX_ITEMS = 100
LEDGER_ITEM_CHARS = 500
SS_MAX_PENDING = 10
SS_MAX_ARCHIVED = 6
SS_MAX_DECISIONS = 5
TIMELINE_INLINE_SPANS = 6

CTL_NAME = "ctxlifectl"  # only where no machine-specific path belongs (pages kept in the repository)


def recall_usage(ctl: str) -> str:
    """The recall syntax, as a command the model can run (``ctl``: the ctxlifectl command)."""
    return f"{ctl} recall <words> | phase:<p> | type:<t> | decisions | timeline"


# --------------------------------------------------------------------------------------------
# data passed in by the service


class PhaseSpan(msgspec.Struct, frozen=True):
    """One phase of a session: ``end`` is None while it is the current phase."""

    phase: str
    start: float
    end: float | None = None
    cause: str = ""


class ArchivedItem(msgspec.Struct, frozen=True):
    """An element moved to L2; ``id`` is its archive row id (``ctxlifectl recall --id``)."""

    id: int
    kind: str
    phase: str | None
    ts: float
    summary: str
    priority: float = 0.0


class PendingItem(msgspec.Struct, frozen=True):
    """An unresolved item; ``id`` is its L2 id when it has one."""

    text: str
    id: int | None = None


class SessionStartData(msgspec.Struct, frozen=True):
    """What the SessionStart hook may tell the model. ``source`` is Claude Code's SessionStart
    source: startup, resume, compact or clear."""

    source: str
    project: str
    phase: str | None = None
    phase_since: float | None = None
    timeline: tuple[PhaseSpan, ...] = ()
    timeline_session: str = ""  # set when ``timeline`` is an earlier session's (a new session's briefing)
    pending: tuple[PendingItem, ...] = ()
    decisions_count: int = 0
    archived: tuple[ArchivedItem, ...] = ()
    recent_decisions: tuple[str, ...] = ()
    lessons_count: int = 0
    working_pct: float | None = None
    level: int = 0
    # the Working-zone figure is ctxlifed's estimate, not Claude Code's usage (after a compaction, until the next
    # response reports it): shown with "≈"
    working_estimated: bool = False


class RecallHit(msgspec.Struct, frozen=True):
    """One archive row returned by a recall query (already ranked by the store)."""

    id: int
    session: str
    project: str
    ts: float
    kind: str
    phase: str | None = None
    tool: str | None = None
    summary: str = ""
    snippet: str = ""
    score: float = 0.0


class LedgerData(msgspec.Struct, frozen=True, kw_only=True):
    """The content of one Phase Ledger page (L3, ``docs/memory/sessions/<sid>/phase-<N>-<name>.md``)."""

    session_id: str
    number: int
    phase: str
    start: float
    end: float | None = None
    project: str = ""
    cause: str = ""
    goal: str = ""
    done: tuple[str, ...] = ()
    files_changed: tuple[str, ...] = ()
    decisions: tuple[str, ...] = ()
    test_results: tuple[str, ...] = ()
    unresolved: tuple[str, ...] = ()
    l2_refs: tuple[int, ...] = ()


# --------------------------------------------------------------------------------------------
# small helpers

_SYSREM = re.compile(r"<(/?)(system-reminder)", re.I)


def _one_line(text: object, max_chars: int = ITEM_CHARS) -> str:
    """Collapse whitespace, defuse <system-reminder> tags, cut to ``max_chars`` with '…'."""
    s = " ".join(str(text).split()) if text is not None else ""  # str.split's white space is re's \s
    if "<" in s:
        s = _SYSREM.sub(r"‹\1\2", s)
    if len(s) > max_chars:
        s = s[: max(0, max_chars - 1)].rstrip() + "…"
    return s


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _code(text: str) -> str:
    """Inline Markdown code without breaking on backticks."""
    return "`" + text.replace("`", "'") + "`"


def _iso(ts: float | None) -> str:
    """UTC ISO 8601 to the minute: 2025-05-01T10:20Z ('?' for an unusable value)."""
    if ts is None or not isinstance(ts, (int, float)) or not math.isfinite(ts):
        return "?"
    try:
        return _dt.datetime.fromtimestamp(ts, tz=_dt.timezone.utc).strftime("%Y-%m-%dT%H:%MZ")
    except (OverflowError, OSError, ValueError):
        return "?"


def _dur(seconds: float) -> str:
    """A short duration: 45s, 12m, 3h 05m, 2d 4h."""
    if not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds < 0:
        seconds = 0
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"


def _range(start: float, end: float | None) -> str:
    """'2025-05-01T10:00Z–10:40Z' on one day, full stamps otherwise, '…–now' while open."""
    a = _iso(start)
    if end is None:
        return f"{a}–now"
    b = _iso(end)
    if a[:11] == b[:11] and a != "?":
        return f"{a}–{b[11:]}"
    return f"{a}–{b}"


def _take(items: Sequence[str], cap_tokens: int, max_chars: int) -> tuple[list[str], bool]:
    """Longest prefix of ``items`` whose newline-join fits both caps (items never split, except that
    a first item larger than the whole budget is cut with '…'). Returns (kept, truncated_first)."""
    kept: list[str] = []
    chars = cjk = 0
    for item in items:
        add_chars = len(item) + (1 if kept else 0)
        add_cjk = cjk_count(item)
        if tokens_of(chars + add_chars, cjk + add_cjk) <= cap_tokens and chars + add_chars <= max_chars:
            kept.append(item)
            chars += add_chars
            cjk += add_cjk
            continue
        if not kept:
            cut = _truncate_to(item, cap_tokens, max_chars)
            if cut:
                return [cut], True
        break
    return kept, False


def _truncate_to(item: str, cap_tokens: int, max_chars: int) -> str:
    """The longest prefix of ``item`` + '…' within both caps ('' if not even '…' fits)."""
    lo, hi = 0, min(len(item), max_chars)
    best = ""
    while lo <= hi:
        mid = (lo + hi) // 2
        cand = item[:mid].rstrip() + "…"
        if estimate_tokens(cand) <= cap_tokens and len(cand) <= max_chars:
            best = cand
            lo = mid + 1
        else:
            hi = mid - 1
    return best


def _fits(text: str, cap_tokens: int, max_chars: int = MAX_CHARS) -> bool:
    return estimate_tokens(text) <= cap_tokens and len(text) <= max_chars


# --------------------------------------------------------------------------------------------
# generic capping


def cap_lines(lines: list[str], cap_tokens: int, *, more_line: str | None = None) -> str:
    """Join ``lines`` (most important first) with newlines until the token cap or ``MAX_CHARS`` would
    be exceeded; cut at whole lines (a first line larger than the whole budget is cut with '…').

    When lines were cut and ``more_line`` is given, it is appended; ``{n}`` in it is replaced by the
    number of lines left out. Room is made for it by dropping further trailing lines, but at least one
    content line is kept; if it cannot fit next to that line it is left out. Result: '' for no lines
    or a cap <= 0; otherwise ``estimate_tokens(result) <= cap_tokens`` and ``len(result) <= 9000``.
    """
    return _cap(lines, cap_tokens, MAX_CHARS, more_line)


def _cap(lines: Sequence[str], cap_tokens: int, max_chars: int, more_line: str | None) -> str:
    if cap_tokens <= 0 or max_chars <= 0 or not lines:
        return ""
    kept, _ = _take(lines, cap_tokens, max_chars)
    if len(kept) == len(lines) or not more_line:
        return "\n".join(kept)
    while kept:
        ml = more_line.replace("{n}", str(len(lines) - len(kept)))
        out = "\n".join([*kept, ml])
        if _fits(out, cap_tokens, max_chars):
            return out
        if len(kept) == 1:
            break
        kept.pop()
    return "\n".join(kept)


def _with_footer(lines: list[str], footer: str, cap_tokens: int, *, more_line: str | None = None) -> str:
    """cap_lines for ``lines`` with ``footer`` always last (dropped only if nothing else fits)."""
    if not footer:
        return _cap(lines, cap_tokens, MAX_CHARS, more_line)
    if not lines:
        return footer if _fits(footer, cap_tokens) else ""
    reserve = estimate_tokens(footer) + 1
    body = _cap(lines, cap_tokens - reserve, MAX_CHARS - len(footer) - 1, more_line)
    if not body:
        return _cap(lines, cap_tokens, MAX_CHARS, more_line)
    return body + "\n" + footer


# --------------------------------------------------------------------------------------------
# SessionStart


def _phase_header(d: SessionStartData, now: float | None, lead: str) -> str:
    """The lead and the current phase; with ``now`` the phase's duration too."""
    if d.phase:
        since = ""
        if d.phase_since is not None:
            dur = f", {_dur(now - d.phase_since)}" if now is not None else ""
            since = f" (since {_iso(d.phase_since)}{dur})"
        return f"{lead} Current phase: {_one_line(d.phase, 40)}{since}."
    return f"{lead} No current phase recorded."


def _pending_lines(pending: Sequence[PendingItem], title: str, ctl: str) -> list[str]:
    if not pending:
        return []
    out = [f"{title} ({len(pending)}):"]
    for p in pending[:SS_MAX_PENDING]:
        ref = f" (L2 #{p.id})" if p.id is not None else ""
        out.append(f"- {_one_line(p.text)}{ref}")
    if len(pending) > SS_MAX_PENDING:
        out.append(f"- … {len(pending) - SS_MAX_PENDING} more: {ctl} pending")  # open items only, with their #N
    return out


def _ends(spans: Sequence[PhaseSpan]) -> list[float | None]:
    """Each span's end; a span stored without one ends where the next span starts, so only the
    last span can be open (the current phase)."""
    return [
        s.end if s.end is not None else (spans[i + 1].start if i + 1 < len(spans) else None)
        for i, s in enumerate(spans)
    ]


def _timeline_inline(spans: Sequence[PhaseSpan], of_session: str = "") -> str:
    if not spans:
        return ""
    ends = _ends(spans)[-TIMELINE_INLINE_SPANS:]
    shown = spans[-TIMELINE_INLINE_SPANS:]
    parts = [f"{_one_line(s.phase, 40)} {_range(s.start, e)}" for s, e in zip(shown, ends)]
    earlier = len(spans) - len(shown)
    prefix = f"(+{earlier} earlier) " if earlier else ""
    title = f"Phase timeline of the previous session {_one_line(of_session, 128)[:8]}" if of_session else "Phase timeline"
    return f"{title}: {prefix}{' → '.join(parts)}."


def _counts_line(decisions: int, lessons: int, ctl: str) -> str:
    parts = []
    if decisions > 0:
        parts.append(f"Decisions recorded: {decisions} ({ctl} recall decisions)")
    if lessons > 0:
        parts.append(f"lessons recorded: {lessons} ({ctl} recall lessons)")
    if not parts:
        return ""
    s = "; ".join(parts)
    return s[0].upper() + s[1:] + "."


def _working_figure(d: SessionStartData) -> str:
    """The Working-zone figure as a line ("" when unknown); the compression level only from level 1
    on (below it there is none to name)."""
    if d.working_pct is None or not math.isfinite(d.working_pct):
        return ""
    level = f" (level {level_name(d.level)})" if (d.level or 0) >= 1 else ""
    approx = "≈" if d.working_estimated else ""
    return f"{_WORKING_LEAD}{approx}{percent(d.working_pct)} used{level}."


def _working_line(d: SessionStartData) -> str:
    """The Working-zone figure, only when it matters (level 1 and up: it is the reason for advice)."""
    return _working_figure(d) if (d.level or 0) >= 1 else ""


_WORKING_LEAD = "Working zone: "


def _archived_lines(items: Sequence[ArchivedItem], ctl: str) -> list[str]:
    """What the compacted window held, with a one-line content summary each; items without a
    summary are left out (a label alone gives the model nothing to act on), and so is the list
    when none has one."""
    usable = [a for a in items if _one_line(a.summary)]
    if not usable:
        return []
    ranked = sorted(usable, key=lambda a: (-a.priority, -a.ts, a.id))
    out = [
        f"Held in the compacted window ({_plural(len(usable), 'item')}, highest priority first;"
        f" full text: {ctl} recall --id <id>):"
    ]
    for a in ranked[:SS_MAX_ARCHIVED]:
        phase = f" · {_one_line(a.phase, 40)}" if a.phase else ""
        summary = _one_line(a.summary)
        if summary.startswith("["):  # an L1 summary names its kind (and outcome) itself
            out.append(f"- #{a.id}{phase} · {summary}")
        else:
            out.append(f"- #{a.id} [{_one_line(a.kind, 40)}{phase}] {summary}")
    if len(usable) > SS_MAX_ARCHIVED:
        out.append(f"- … {len(usable) - SS_MAX_ARCHIVED} more: {ctl} recall timeline / type:<t>")
    return out


def _decision_lines(d: SessionStartData, title: str, ctl: str) -> list[str]:
    """The decisions count and the most recent decision texts (what a new context needs)."""
    n = max(d.decisions_count, len(d.recent_decisions))
    if not n:
        return []
    if not d.recent_decisions:
        return [f"Decisions recorded: {n} ({ctl} recall decisions)."]
    shown = d.recent_decisions[:SS_MAX_DECISIONS]
    more = f"; all: {ctl} recall decisions" if n > len(shown) else ""
    return [f"{title} ({n}, most recent first{more}):", *(f"- {_one_line(t)}" for t in shown)]


def session_start_lines(d: SessionStartData, *, now: float, ctl: str) -> tuple[list[str], str]:
    """The lines of the SessionStart context (most important first) and its footer, before capping.

    The resume delta (:func:`render_session_start` with ``previous``) compares these lines with the
    last briefing, so a line says the same thing the same way each time: the resume phase line
    carries no duration (it would differ at every resume)."""
    project = _one_line(d.project, 80) or "this project"
    footer = f"The local archive is searchable: {recall_usage(ctl)}; full text: {ctl} recall --id <id>."
    lines: list[str] = []
    if d.source == "clear":
        if not (d.decisions_count or d.recent_decisions or d.pending or d.lessons_count):
            return [], ""
        lines.append(f"ctxlifed project memory for {project} (context cleared; no session detail carried over).")
        lines += _decision_lines(d, "Decisions recorded", ctl)
        lines += _pending_lines(d.pending, "Unresolved items across the project", ctl)
        if d.lessons_count:
            lines.append(f"Lessons recorded: {d.lessons_count} ({ctl} recall lessons).")
    elif d.source == "compact":
        if not (d.phase or d.archived or d.pending or d.decisions_count):
            return [], ""
        lines.append(_phase_header(d, now, f"ctxlifed: context of project {project} was compacted."))
        lines += _archived_lines(d.archived, ctl)
        lines += _pending_lines(d.pending, "Unresolved items", ctl)
        counts = _counts_line(d.decisions_count, 0, ctl)
        if counts:
            lines.append(counts)
        # No Working-zone figure here: at SessionStart(compact) Claude Code has not yet written the
        # boundary (nor the summary) to the transcript, so any figure would be the pre-compaction one.
    else:  # startup, resume, or anything unknown
        if not (d.phase or d.timeline or d.pending or d.decisions_count or d.lessons_count or d.archived):
            return [], ""
        resume = d.source == "resume"
        what = "resumed session" if resume else "session"
        lead = f"ctxlifed memory for this {what} in {project}."
        lines.append(_phase_header(d, None if resume else now, lead))
        lines += _pending_lines(d.pending, "Unresolved items", ctl)
        lines += _decision_lines(d, "Decisions", ctl)
        if d.lessons_count:
            lines.append(f"Lessons recorded: {d.lessons_count} ({ctl} recall lessons).")
        if tl := _timeline_inline(d.timeline, d.timeline_session):
            lines.append(tl)
        if d.archived:
            lines.append(f"Archived elements of this session: {len(d.archived)} ({ctl} recall timeline).")
        if resume and (w := _working_line(d)):
            lines.append(w)
    return lines, footer


# How PostCompact's re-injection (core.mustsurvive, not imported: this module stays pure) words a
# decision; a test holds the two together.
_REINJECTED_DECISION = "- Decision: "


def _held_lines(previous: str) -> set[str]:
    """The lines the context holds of ours, a decision PostCompact re-injected also in the briefing's form."""
    seen = set(previous.splitlines())
    seen |= {"- " + ln[len(_REINJECTED_DECISION):] for ln in seen if ln.startswith(_REINJECTED_DECISION)}
    return seen


def _unseen(lines: list[str], seen: set[str]) -> list[str]:
    """The lines not in ``seen``; a list (a title ending in ":" and its "- " items) is given with its
    title when one of its items is new, and not at all when every item is held already."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        j = i + 1
        while lines[i].endswith(":") and j < len(lines) and lines[j].startswith("- "):
            j += 1
        items = [ln for ln in lines[i + 1:j] if ln not in seen]
        if j > i + 1:
            out += [lines[i], *items] if items else []
        elif lines[i] not in seen:
            out.append(lines[i])
        i = j
    return out


def render_session_start(d: SessionStartData, cap_tokens: int = 1500, *, now: float, ctl: str,
                         previous: str = "") -> str:
    """``additionalContext`` for SessionStart, by ``d.source``:

    - startup / resume: current phase, unresolved items, the most recent decisions (text, not just a
      count), lesson count, phase timeline (first phase included), working-zone usage (resume), and
      how to recall;
    - compact: current phase, what the compacted window held (top items by priority, each with its id
      and a one-line summary), unresolved items, decision count, working-zone usage, how to recall;
    - clear: project-level memory only: recent decisions, unresolved items across the project, lesson
      count, how to recall (no phase, timeline or archive detail of the session).

    ``previous`` (resume only): the last briefing this session received, still in its context. Only
    the lines it does not already hold are given, under a one-line lead; '' when nothing changed.
    '' when there is nothing worth saying. Bounded by ``cap_tokens`` and ``MAX_CHARS``. ``ctl`` is the
    ctxlifectl command as the model's shell can run it.
    """
    lines, footer = session_start_lines(d, now=now, ctl=ctl)
    if not lines:
        return ""
    if d.source == "resume" and previous:
        seen = _held_lines(previous)
        new = _unseen(lines[1:], seen)
        # A Working-zone figure the context holds is corrected when it changed, even below level 1
        # (where a briefing leaves it out): after a compaction the held one is the old, high one.
        figure = _working_figure(d)
        if figure and figure not in seen and figure not in new and any(ln.startswith(_WORKING_LEAD) for ln in seen):
            new.append(figure)
        if d.phase:
            since = f" (since {_iso(d.phase_since)}" if d.phase_since is not None else ""
            if f"Current phase: {_one_line(d.phase, 40)}{since}" not in previous:
                new.insert(0, _phase_header(d, None, "").strip())
        if not new:
            return ""
        project = _one_line(d.project, 80) or "this project"
        lines = [f"ctxlifed: changed since this session's last briefing in {project}:", *new]
        footer = "" if footer in seen else footer
    return _with_footer(lines, footer, cap_tokens, more_line="… {n} more lines not shown.")


# --------------------------------------------------------------------------------------------
# compaction advice (systemMessage for the user)


def render_compact_advice(phase: str | None, pending: list[str], reason: str, *,
                          state: FocusState | None = None, matrix: Matrix = DEFAULT_MATRIX) -> str:
    """Two lines for the user: why compaction is advised, and a ready ``/compact <focus>`` line.

    The focus is the category matrix's (``core.matrix.focus_line``): what the phase keeps, named
    concretely from ``state`` (files being changed, failing tests, decisions, constraints) and the
    open ``pending`` items, within ``FOCUS_MAX_CHARS`` characters; a single line.
    """
    why = _one_line(reason, 300) or "context is filling up"
    st = state or FocusState()
    items = [_one_line(p, FOCUS_MAX_CHARS) for p in pending if _one_line(p, FOCUS_MAX_CHARS)]
    if items:
        st = FocusState(files=st.files, failing_tests=st.failing_tests, decisions=st.decisions,
                        constraints=st.constraints, pending=items)
    focus = focus_line(phase if phase in PHASES else None, st, matrix, max_chars=FOCUS_MAX_CHARS)
    return f"ctxlifed: {why}\n/compact {_one_line(focus, FOCUS_MAX_CHARS)}"


# --------------------------------------------------------------------------------------------
# recall answers


def render_recall(hits: Sequence[RecallHit], query_text: str, cap_tokens: int = 1200, *, total: int,
                  ctl: str, total_capped: bool = False) -> str:
    """Markdown answer to a recall query: a header, the ranked hits (one or two lines each: id, kind,
    phase, UTC minute, tool, session, summary, then the snippet when it shows text the summary line
    does not), a line saying how many matches are not shown, and "Full text: <ctl> recall --id <id>".
    Bounded by ``cap_tokens`` and ``MAX_CHARS``; hits are never split. ``total_capped``: counting
    stopped at ``total``, so both counts are lower bounds and say "at least"."""
    q = _code(_one_line(query_text, 120)) if query_text.strip() else "(no words)"
    total = max(total, len(hits))
    if not hits:
        return f"No archived context matches {q}."
    projects = {h.project for h in hits}
    least = "at least " if total_capped else ""
    header = f"**Recall** {q}: {least}{total} match{'' if total == 1 else 'es'}, best first."
    footer = f"Full text: {ctl} recall --id <id>"
    items = []
    for i, h in enumerate(hits, 1):
        meta = [_one_line(h.kind, 30)]
        if h.phase:
            meta.append(_one_line(h.phase, 30))
        meta.append(_iso(h.ts))
        if h.tool:
            meta.append(_one_line(h.tool, 40))
        meta.append(f"session {_one_line(h.session, 128)[:8]}")
        if len(projects) > 1:
            meta.append(_one_line(h.project, 60))
        summary = _one_line(h.summary) or _one_line(h.snippet) or "(no summary)"
        line = f"{i}. **#{h.id}** {' · '.join(meta)} — {summary}"
        snippet = _one_line(h.snippet, SNIPPET_CHARS)
        shown = snippet.strip("…").strip()  # the window's cut marks are not text
        if shown and shown not in summary and summary not in snippet:
            line += f"\n   > {snippet}"
        items.append(line)
    more_max = f"… {least}{total} more not shown; narrow with phase:, type: or a quoted phrase."
    reserve = estimate_tokens(header) + estimate_tokens(footer) + estimate_tokens(more_max) + 3
    char_room = MAX_CHARS - len(header) - len(footer) - len(more_max) - 3
    kept, _ = _take(items, cap_tokens - reserve, char_room)
    if not kept:  # not even the first hit fits next to header and footer
        return _with_footer([header], footer, cap_tokens)
    lines = [header, *kept]
    omitted = total - len(kept)
    if omitted > 0:
        lines.append(f"… {least}{omitted} more not shown; narrow with phase:, type: or a quoted phrase.")
    lines.append(footer)
    return "\n".join(lines)


def render_phase_page(page_id: int, path: str, text: str, cap_tokens: int = 600, *, ctl: str) -> str:
    """A phase's hand-off page (L3) as the head of a ``phase:<p>`` recall answer: a title line with
    its id and path, then the page's lines (the machine comment left out; the page's bare ``ctxlifectl``
    commands given as ``ctl``) up to ``cap_tokens``; a cut says how to read the rest."""
    title = f"**Hand-off page** #{page_id} ({_one_line(path, 300)}):"
    body = [ln.replace(f"`{CTL_NAME} ", f"`{ctl} ") for ln in str(text).splitlines()
            if not ln.startswith("<!-- ctxlifed:ledger")]
    while body and not body[0].strip():
        body.pop(0)
    return _with_footer([title, *body], "", cap_tokens,
                        more_line=f"… {{n}} more lines: {ctl} recall --id {page_id}")


def render_timeline(spans: Sequence[PhaseSpan], now: float, *, cap_tokens: int = 1200) -> str:
    """Markdown phase timeline, oldest first, numbered, with duration and cause; when it is too long
    the oldest spans are left out and the first line says how many. A span without ``end`` ends
    where the next one starts; only an open last span is "(current)" and runs until ``now``."""
    if not spans:
        return "No phase timeline recorded yet."
    items = []
    for i, (s, e) in enumerate(zip(spans, _ends(spans)), 1):
        until = e if e is not None else now
        cause = f" — {_one_line(s.cause, 120)}" if s.cause else ""
        current = " (current)" if e is None else ""
        items.append(f"{i}. {_one_line(s.phase, 40)}{current}: {_range(s.start, e)} ({_dur(until - s.start)}){cause}")
    title = f"Phase timeline ({_plural(len(spans), 'phase')}):"
    reserve = estimate_tokens(title) + 20
    newest_first, _ = _take(items[::-1], cap_tokens - reserve, MAX_CHARS - len(title) - 80)
    kept = newest_first[::-1]
    lines = [title]
    if len(kept) < len(items):
        lines.append(f"… {len(items) - len(kept)} earlier phases not shown.")
    return "\n".join(lines + kept)


def render_decisions(decisions: Sequence[tuple[int, float, str]], cap_tokens: int = 1200, *, ctl: str) -> str:
    """Markdown list of decisions ``(id, ts, text)`` in the given order, bounded, with the L2 id of each."""
    if not decisions:
        return "No decisions recorded yet."
    title = f"Decisions ({len(decisions)}):"
    items = [f"- {_iso(ts)} · #{i} — {_one_line(text, 400)}" for i, ts, text in decisions]
    return _with_footer(
        [title, *items],
        "",
        cap_tokens,
        more_line=f"… {{n}} more not shown: {ctl} recall type:decision <words>",
    )


# --------------------------------------------------------------------------------------------
# L3 pages


def _bullets(
    items: Iterable[str], *, fmt: Callable[[str], str] = lambda s: s, empty: str = "_None recorded._"
) -> list[str]:
    lst = [x for x in (_one_line(i, LEDGER_ITEM_CHARS) for i in items) if x]
    if not lst:
        return [empty]
    out = [f"- {fmt(x)}" for x in lst[:LEDGER_MAX_ITEMS]]
    if len(lst) > LEDGER_MAX_ITEMS:
        out.append(f"- … {len(lst) - LEDGER_MAX_ITEMS} more in L2 ({CTL_NAME} recall)")
    return out


def render_phase_ledger(d: LedgerData) -> str:
    """The Markdown hand-off page of one phase: a machine-readable first-line comment, the title
    "Phase N — <name>", session and time range, then the sections Goal, What was done, Files changed
    (sorted, unique), Key decisions, Test results, Unresolved items (task list), L2 references
    (sorted, unique ids). Deterministic: same data, same bytes. The page is kept in the repository,
    shared between machines: it names the bare ``ctxlifectl`` command, never one machine's path."""
    name = _one_line(d.phase, 40)
    sid = _one_line(d.session_id, 128)
    end = "open" if d.end is None else _iso(d.end)
    span = f"{_iso(d.start)} → {end}"
    if d.end is not None:
        span += f" ({_dur(d.end - d.start)})"
    out = [
        f"<!-- ctxlifed:ledger v1 session={sid} phase={name} n={d.number} -->",
        f"# Phase {d.number} — {name}",
        "",
        f"- Session: {_code(sid)}",
    ]
    if d.project:
        out.append(f"- Project: {_code(_one_line(d.project, 200))}")
    out.append(f"- Time (UTC): {span}")
    if d.cause:
        out.append(f"- Ended by: {_one_line(d.cause, 200)}")
    files = sorted({f for f in (_one_line(x, LEDGER_ITEM_CHARS) for x in d.files_changed) if f})
    refs = sorted({int(r) for r in d.l2_refs if isinstance(r, int) and not isinstance(r, bool)})
    out += ["", "## Goal", "", _one_line(d.goal, 2000) or "_Not recorded._"]
    out += ["", "## What was done", "", *_bullets(d.done)]
    out += ["", "## Files changed", "", *_bullets(files, fmt=_code)]
    out += ["", "## Key decisions", "", *_bullets(d.decisions)]
    out += ["", "## Test results", "", *_bullets(d.test_results)]
    out += ["", "## Unresolved items", "", *_bullets(d.unresolved, fmt=lambda s: f"[ ] {s}")]
    out += ["", "## L2 references", ""]
    if refs:
        shown = refs[: LEDGER_MAX_ITEMS * 5]
        more = f" … and {len(refs) - len(shown)} more" if len(refs) > len(shown) else ""
        out.append(", ".join(f"#{r}" for r in shown) + more)
        out.append("")
        out.append(f"Full text: `{CTL_NAME} recall --id <id>`")
    else:
        out.append("_None._")
    return "\n".join(out) + "\n"


def render_decision_entry(ts: float, session: str, phase: str | None, text: str, l2_id: int | None) -> str:
    """One Markdown list entry for docs/memory/decisions.md: a single line ending with a newline, so
    entries can be concatenated and appended as they are."""
    parts = [_iso(ts)]
    if phase:
        parts.append(_one_line(phase, 40))
    parts.append(f"session {_code(_one_line(session, 128))}")
    if l2_id is not None:
        parts.append(f"L2 #{l2_id}")
    return f"- {' · '.join(parts)} — {_one_line(text, LEDGER_ITEM_CHARS) or '(empty)'}\n"
