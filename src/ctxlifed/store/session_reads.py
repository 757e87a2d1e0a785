"""The service's read jobs about sessions: each runs on a reader connection (``Readers.run``).

Rules:
- Read only: no job here writes.
- Bounded: every query has a LIMIT (or reads one row); a text read for ranking is cut at 64 KiB.
- A phase timeline is built from the sessions and phase switches stored: only the session asking
  (``current``; ``LATEST``: the most recently active one) may end in an open span.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from ..core.render import PhaseSpan
from . import queries

LATEST = "\x00latest"  # timeline: the most recently active session is the current one
WINDOW_ROWS = 5000  # newest archive rows of a session ranked at one compression
_L2_TRAILER = re.compile(r"\s*\[L2 #\d+\]\s*$")


def pending_payload(eid: int, conn: sqlite3.Connection) -> bytes | None:
    """The raw payload of an event acknowledged but not derived yet (None: derived, or forgotten)."""
    row = conn.execute("SELECT payload FROM events WHERE id = ? AND pending = 1", (eid,)).fetchone()
    return None if row is None else bytes(row[0])


def pending_rows(conn: sqlite3.Connection) -> list[tuple]:
    """(id, session, project, cwd, event, ts) of every event acknowledged but not derived, oldest first."""
    return conn.execute("SELECT id, session, project, cwd, event, ts FROM events WHERE pending = 1"
                        " ORDER BY id").fetchall()


def window_rows(session: str, after_id: int, conn: sqlite3.Connection) -> list[tuple]:
    """(id, kind, text, ts, tool, file_path) of the session's archive rows after ``after_id``, newest first."""
    return conn.execute(
        "SELECT id, kind, substr(text, 1, 65536), ts, tool, file_path FROM archive"
        f" WHERE session = ? AND id > ? ORDER BY id DESC LIMIT {WINDOW_ROWS}", (session, after_id)).fetchall()


def earlier_prompts(session: str, conn: sqlite3.Connection) -> list[str]:
    """The session's last prompts before the newest one (the one being answered)."""
    rows = conn.execute("SELECT text FROM archive WHERE session = ? AND kind = 'prompt' ORDER BY id DESC"
                        " LIMIT 4 OFFSET 1", (session,)).fetchall()
    return [r[0][:2000] for r in rows]


def focus_rows(session: str, project: str, conn: sqlite3.Connection) -> dict[str, list[dict[str, Any]]]:
    """The session's newest decisions, constraints and open pending items (a /compact focus line)."""
    return {kind: queries.items(conn, project=project, kind=kind, status="open" if kind == "pending" else None,
                                session=session, limit=8)
            for kind in ("decision", "constraint", "pending")}


def session_spans(session: str, switches: list[dict[str, Any]], first_phase: str | None, first_ts: float | None,
                  last_end: float | None) -> list[PhaseSpan]:
    """One session's phases, oldest first: the phase it began in (the first switch's ``from_phase``,
    or the only phase when it never switched) from the session's first event, then one span per
    switch. ``last_end``: when the last phase ended (None while it is the current one)."""
    spans: list[PhaseSpan] = []
    begin = switches[0]["from_phase"] if switches else first_phase
    if begin and first_ts is not None and (not switches or first_ts < switches[0]["ts"]):
        spans.append(PhaseSpan(phase=begin, start=first_ts, cause=f"start of session {session[:8]}"))
    spans += [PhaseSpan(phase=x["to_phase"], start=x["ts"], cause=x["cause"] or "") for x in switches]
    if spans and last_end is not None:
        spans[-1] = msgspec.structs.replace(spans[-1], end=max(last_end, spans[-1].start))
    return spans


def timeline(conn: sqlite3.Connection, *, project: str | None, session: str | None, current: str | None,
             max_sessions: int = 50) -> list[PhaseSpan]:
    """The phase timeline of one session, or of a project's (every project's) sessions, oldest first.
    Only ``current`` (the session asking; ``LATEST``: the most recently active one) may end in an open
    span; another session's last phase ends at its end, or its last event."""
    rows = queries.sessions(conn, project=project, session=session, limit=max_sessions)
    if current == LATEST:
        current = rows[0]["session"] if rows else None
    spans: list[PhaseSpan] = []
    for row in sorted(rows, key=lambda r: r["first_ts"] or 0):
        sw = queries.phase_switches(conn, project=None, session=row["session"], limit=200)
        end = None if row["session"] == current and row["ended_ts"] is None else (row["ended_ts"] or row["last_ts"])
        spans += session_spans(row["session"], sw, row["phase"], row["first_ts"], end)
    return sorted(spans, key=lambda x: x.start)


def session_start_rows(project: str, session: str, source: str, archived: list[int], conn: sqlite3.Connection, *,
                       listed_kinds: Iterable[str] = (),
                       is_stale: Callable[[dict[str, Any]], bool] | None = None) -> dict[str, Any]:
    """What a SessionStart briefing is made of, in one read: the timeline (this session's; at startup
    the project's last session's), open pending items that are not stale, recent decisions, counts,
    and at ``compact`` the ``archived`` rows of the ``listed_kinds`` (their summaries without the
    ``[L2 #id]`` trailer: the list names the id itself)."""
    spans: list[PhaseSpan] = []
    timeline_session = ""
    if source != "clear":
        spans = timeline(conn, project=None, session=session, current=session)
        if source == "startup":
            # A new session has one phase so far: where the project's last session went says more.
            earlier = [r for r in queries.sessions(conn, project=project, limit=2) if r["session"] != session]
            if earlier:
                spans = timeline(conn, project=None, session=earlier[0]["session"], current=None)
                timeline_session = earlier[0]["session"]
            elif len(spans) < 2:
                spans = []
    pending = [p for p in queries.pending_items(conn, project=project, status="open", limit=64)
               if not (is_stale and is_stale(p))][:8]
    decisions = queries.items(conn, project=project, kind="decision", status=None, limit=5)
    arch = []
    if source == "compact" and archived:
        marks = ",".join("?" * len(archived))
        kinds = sorted(listed_kinds)
        rows = conn.execute(
            f"SELECT id, kind, phase, ts, summary, priority FROM archive WHERE id IN ({marks})"
            f" AND kind IN ({','.join('?' * len(kinds))}) ORDER BY priority DESC, id DESC",
            (*archived, *kinds)).fetchall()
        arch = [dict(zip(("id", "kind", "phase", "ts", "summary", "priority"), r, strict=True)) for r in rows]
        for a in arch:
            a["summary"] = _L2_TRAILER.sub("", a["summary"] or "")  # the list names the id itself
    return {
        "timeline": spans, "timeline_session": timeline_session, "pending": pending, "decisions": decisions,
        "archived": arch, "decisions_count": queries.count_items(conn, project=project, kind="decision"),
        "lessons_count": conn.execute("SELECT count(*) FROM lessons WHERE project = ?", (project,)).fetchone()[0],
    }
