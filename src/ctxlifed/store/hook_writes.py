"""The hook path's writer jobs: each runs on the writer thread, inside its transaction.

Rules:
- One job is one hook's whole write: the acknowledgement stores the event (pending); the derivation
  stores its archive rows, facts, pending closures, phase switch and the session state together, and
  clears the pending mark (or stores the event itself, inline). A job that finds its event stored
  already (a replay) or its pending mark gone (forgotten) writes nothing and returns None / 0.
- The session state arrives serialized (``SessionRow``): the store never sees a SessionState.
- Pending items close on the evidence the service computed (core/pending.py decides which); only the
  project's newest ``OPEN_ITEMS_CHECKED`` open items older than the event are looked at.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from ..core import pending as pending_rules
from ..core.model import Element, Kind
from . import ops

FACT_KINDS = {Kind.DECISION: "decision", Kind.CONSTRAINT: "constraint", Kind.PENDING: "pending"}
OPEN_ITEMS_CHECKED = 200  # newest open items of a project checked against one event's evidence


@dataclass(frozen=True)
class SessionRow:
    """A session's row as the hook path writes it: where it is, its phase, and its serialized state."""

    session: str
    project: str
    cwd: str
    transcript_path: str | None
    phase: str
    phase_since: float
    model: str | None
    ended_ts: float | None
    state: bytes


def store_event_only(row: ops.EventRow, conn: sqlite3.Connection) -> int:
    """An event that names no valid session: the raw event and its session row, nothing derived."""
    eid = ops.insert_event(conn, row)
    if eid:
        ops.touch_session(conn, session=row.session, project=row.project, cwd=row.cwd, transcript_path=None, ts=row.ts)
    return eid


def store_ack(row: ops.EventRow, conn: sqlite3.Connection) -> int:
    """The acknowledgement's whole write: the event, pending (its session row follows with the derivation)."""
    return ops.insert_event(conn, dataclasses.replace(row, pending=True))


def store_hook(conn: sqlite3.Connection, *, row: ops.EventRow | None, eid: int | None, now: float,
               session: SessionRow, elements: list[Element], facts: list[Element], phase: str, switch: Any,
               priority: Callable[[Element], int], summaries: list[str],
               closing: pending_rules.Evidence | None = None) -> int | None:
    """One derived event: the event (``row``, inline) or its pending mark cleared (``eid``), its
    archive rows and facts, the pending items it closes, its phase switch, the session state."""
    if row is not None:
        eid = ops.insert_event(conn, row)
        if eid == 0:
            return None
    elif eid is None or not ops.finish_pending(conn, eid):
        return None
    ops.touch_session(conn, session=session.session, project=session.project, cwd=session.cwd,
                      transcript_path=session.transcript_path, ts=now)
    for el, summ in zip(elements, summaries, strict=True):
        ops.insert_archive(conn, ops.ArchiveRow(
            session=session.session, project=session.project, ts=el.ts or now, kind=str(el.kind), text=el.text,
            summary=summ, phase=phase, tool=el.tool, file_path=el.file_path, uid=el.uid, event_id=eid,
            priority=priority(el), level=0, truncated="characters cut by ctxlifed" in el.text))
    for f in facts:
        aid, _ = ops.insert_archive(conn, ops.ArchiveRow(
            session=session.session, project=session.project, ts=now, kind=str(f.kind), text=f.text, phase=phase,
            uid=f.uid, event_id=eid, priority=priority(f), level=0, summary=f.text[:280]))
        ops.upsert_item(conn, project=session.project, session=session.session,
                        kind=FACT_KINDS.get(f.kind, str(f.kind)), text=f.text, ts=now, phase=phase, archive_id=aid)
    if closing is not None and not closing.empty():
        close_pending(conn, session.project, closing, now)
    if switch is not None:
        _insert_switch(conn, session, switch)
    save_state(session, conn)
    return eid


def save_state(session: SessionRow, conn: sqlite3.Connection) -> None:
    ops.save_session_state(conn, session=session.session, phase=session.phase, phase_since=session.phase_since,
                           model=session.model, state=session.state, ended_ts=session.ended_ts)


def store_switch_and_state(session: SessionRow, switch: Any, conn: sqlite3.Connection) -> None:
    """A manual phase switch (``phase.set``) and the session state after it."""
    _insert_switch(conn, session, switch)
    save_state(session, conn)


def _insert_switch(conn: sqlite3.Connection, session: SessionRow, switch: Any) -> None:
    ops.insert_phase_switch(conn, session=session.session, project=session.project, ts=switch.ts,
                            from_phase=switch.from_phase, to_phase=switch.to_phase, cause=switch.cause,
                            evidence=msgspec.json.encode(list(switch.evidence)).decode())


def apply_compression(updates: list[tuple[int, str, str, int]], level: int, conn: sqlite3.Connection) -> None:
    """Store ranked rows' L1 summaries, categories and priorities: ``updates`` is (id, summary,
    category, priority); a kept or summarized row is at level 1 at least, any other at level 2."""
    conn.executemany("UPDATE archive SET summary=?, category=?, priority=?, level=max(level, ?) WHERE id=?",
                     [(sm, cat, pr, 1 if cat in ("summarize", "keep") else 2, aid) for aid, sm, cat, pr in updates])


def close_pending(conn: sqlite3.Connection, project: str, ev: pending_rules.Evidence, now: float) -> int:
    """Close the project's open pending items this event's evidence settles (not those it just stated)."""
    rows = conn.execute("SELECT id, text FROM items WHERE project = ? AND kind = 'pending' AND status = 'open'"
                        " AND ts < ? ORDER BY id DESC LIMIT ?", (project, now, OPEN_ITEMS_CHECKED)).fetchall()
    closed = pending_rules.closing([(int(r[0]), r[1]) for r in rows], ev)
    return ops.resolve_items(conn, closed, now) if closed else 0
