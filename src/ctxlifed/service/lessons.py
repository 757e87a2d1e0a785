"""Lessons: error → fix pairs remembered per project, offered once per session when the error returns.

Rules:
- Fed with every (redacted) PostToolUse / PostToolUseFailure after it is committed, so the lesson's
  evidence names the stored event ids. Pairing and signatures are the pure core's (core.lessons).
- One row per (project, signature) in ``lessons``; a repeat merges into it. Its full evidence is an
  L2 archive item (kind ``lesson``, recallable with ``type:lesson``), its short entry is in
  ``<project>/docs/memory/lessons.md`` (rewritten atomically; a hand edit is reconciled back).
- A known signature failing again is answered with ``additionalContext`` naming the earlier fix,
  ≤ 150 tokens, once per signature per session.
"""

from __future__ import annotations

import sqlite3
from functools import partial
from typing import TYPE_CHECKING, Any

import msgspec

from ..core import lessons as LS
from ..core.model import Kind
from ..store import ops

if TYPE_CHECKING:
    from .app import Service
    from .state import SessionState

_enc = msgspec.json.Encoder()
_dec = msgspec.json.Decoder(LS.Lesson)


async def on_tool_event(svc: Service, st: SessionState, payload: dict[str, Any], event_id: int, now: float) -> str:
    """Advance the session's tracker; store completed lessons; return a hint for a known error (or '')."""
    ev = LS.classify_event(payload, event_id=event_id, ts=now)
    hint = await hint_for(svc, st, ev)
    await advance(svc, st, ev, now)
    return hint


KNOWN_TTL_S = 5.0  # how long "this project has (no) lessons" is trusted before asking the store again


async def may_hint(svc: Service, project: str) -> bool:
    """Whether a hint is possible at all: the project has a lesson. Answered from memory for
    ``KNOWN_TTL_S`` (a lesson stored here sets it at once), so the acknowledgement of a tool event
    in a project without lessons skips classifying it (its derivation does that)."""
    now = svc.clock()
    known = svc.lessons_known.get(project)
    if known is None or now - known[1] > KNOWN_TTL_S:
        known = (await count(svc, project) > 0, now)
        svc.lessons_known[project] = known
    return known[0]


async def hint_for(svc: Service, st: SessionState, ev: LS.Ev | None) -> str:
    """The hint for a failure a lesson of this project already knows (once per signature per session)."""
    if ev is None or ev.kind != "fail":
        return ""
    _own_tracker(st)
    sig = ev.signature or LS.signature(ev.text, tool=ev.tool or None, command=ev.command or None,
                                       file_path=ev.file_path or None)
    if not sig or sig in st.lessons.hinted:
        return ""
    known = await svc.readers.run(partial(_by_signature, st.project, sig))
    if known is None:
        return ""
    st.lessons, hint = LS.hint_for(st.lessons, ev, {sig: known})  # '' if hinted meanwhile
    return hint


async def advance(svc: Service, st: SessionState, ev: LS.Ev | None, now: float) -> None:
    """Feed the session's error -> fix tracker (in event order); store the lessons it completes."""
    if ev is None:
        return
    _own_tracker(st)
    st.lessons, new = LS.step(st.lessons, ev)
    if new:
        await svc.writer.run(partial(_store, st.project, st.session, new, now))
        svc.lessons_known[st.project] = (True, svc.clock())
        svc.spawn(svc.ledgers.write_lessons, st.project)


def _own_tracker(st: SessionState) -> None:
    """The session's error -> fix tracker (a fresh one if the state holds another session's)."""
    if st.lessons.session_id != st.session:
        st.lessons = LS.Tracker(session_id=st.session)


async def listing(svc: Service, *, project: str | None, limit: int) -> list[LS.Lesson]:
    return LS.rank(await svc.readers.run(partial(all_lessons, project, limit)))


async def count(svc: Service, project: str) -> int:
    return await svc.readers.run(partial(_count, project))


def reconcile_file(project: str, text: str, ts: float, mtime: float, conn: sqlite3.Connection) -> None:
    """A hand-edited lessons.md: the file wins for what it shows (core.lessons.reconcile), except that
    a lesson the store updated after the file was last written (``mtime``) is never dropped by it."""
    stored = all_lessons(project, 10_000, conn)
    merged = LS.reconcile(stored, LS.parse_lessons_md(text))
    keep = {le.signature for le in merged} | {le.signature for le in stored if le.last_seen > mtime}
    for le in stored:
        if le.signature not in keep:
            conn.execute("DELETE FROM lessons WHERE project = ? AND signature = ?", (project, le.signature))
            conn.execute("DELETE FROM archive WHERE project = ? AND uid = ?", (project, _uid(le.signature)))
    for le in merged:
        _put(conn, project, "", le, ts)


# -- store jobs --------------------------------------------------------------------------------
def _uid(signature: str) -> str:
    return f"lesson:{signature}"


def _put(conn: sqlite3.Connection, project: str, session: str, le: LS.Lesson, ts: float) -> None:
    text = LS.lesson_text(le)
    aid = ops.upsert_archive_by_uid(conn, ops.ArchiveRow(
        session=session, project=project, ts=ts, kind=str(Kind.LESSON), text=text,
        summary=text.splitlines()[0][:280] if text else le.signature, uid=_uid(le.signature), priority=80, level=3))
    conn.execute(
        "INSERT INTO lessons(project, signature, data, count, last_seen, archive_id) VALUES (?,?,?,?,?,?)"
        " ON CONFLICT(project, signature) DO UPDATE SET data = excluded.data, count = excluded.count,"
        " last_seen = excluded.last_seen, archive_id = excluded.archive_id",
        (project, le.signature, _enc.encode(le), le.count, le.last_seen, aid))


def _store(project: str, session: str, new: list[LS.Lesson], ts: float, conn: sqlite3.Connection) -> None:
    for le in new:
        old = _by_signature(project, le.signature, conn)
        _put(conn, project, session, LS.merge(old, le) if old is not None else le, ts)


def _by_signature(project: str, signature: str, conn: sqlite3.Connection) -> LS.Lesson | None:
    r = conn.execute("SELECT data FROM lessons WHERE project = ? AND signature = ?", (project, signature)).fetchone()
    return _dec.decode(r[0]) if r else None


def all_lessons(project: str | None, limit: int, conn: sqlite3.Connection) -> list[LS.Lesson]:
    if project is None:
        rows = conn.execute("SELECT data FROM lessons ORDER BY count DESC, last_seen DESC LIMIT ?", (limit,))
    else:
        rows = conn.execute("SELECT data FROM lessons WHERE project = ? ORDER BY count DESC, last_seen DESC LIMIT ?",
                            (project, limit))
    return [_dec.decode(r[0]) for r in rows.fetchall()]


def _count(project: str, conn: sqlite3.Connection) -> int:
    return conn.execute("SELECT count(*) FROM lessons WHERE project = ?", (project,)).fetchone()[0]
