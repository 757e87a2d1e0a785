"""Lessons: error → fix pairs remembered per project, offered once per session when the error returns.

Rules:
- Fed with every (redacted) PostToolUse / PostToolUseFailure after it is committed and archived.
  Pairing and signatures are the pure core's (core.lessons); the core names the stored event ids
  (``Lesson.events``), and storing a lesson maps them to the archive ids of the items those events
  archived (``Lesson.evidence``): every ``#N`` a lesson prints resolves with ``ctxlifectl recall --id N``
  to the failure, fix step or success it names. An event whose item was not archived (an identical
  item already was) gives no id. A lesson stored before this rule (evidence without events) is read
  with its evidence taken as event ids and mapped the same way.
- One row per (project, signature) in ``lessons``; a repeat merges into it. Its full evidence is an
  L2 archive item (kind ``lesson``, recallable with ``type:lesson``), its short entry is in
  ``<project>/docs/memory/lessons.md`` (rewritten atomically; a hand edit is reconciled back).
- A known signature failing again is answered with ``additionalContext`` naming the earlier fix,
  ≤ 150 tokens, once per signature per session; the recorded lesson is quoted as data (it may be a
  hand edit of lessons.md), and its pointer is ``ctxlifectl recall --id <the lesson's archive id>``.
"""

from __future__ import annotations

import sqlite3
from functools import partial
from typing import TYPE_CHECKING, Any

import msgspec

from ..core import lessons as LS
from ..core.model import Kind
from ..runtime.ctl import ctl_command
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
    found = await svc.readers.run(partial(_with_archive_id, st.project, sig))
    if found is None:
        return ""
    known, aid = found
    st.lessons, hint = LS.hint_for(st.lessons, ev, {sig: known},  # '' if hinted meanwhile
                                   recall_ids={sig: aid} if aid is not None else None, ctl=ctl_command())
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
        summary=f"Lesson: {le.signature}"[:280], uid=_uid(le.signature), priority=80, level=3))
    conn.execute(
        "INSERT INTO lessons(project, signature, data, count, last_seen, archive_id) VALUES (?,?,?,?,?,?)"
        " ON CONFLICT(project, signature) DO UPDATE SET data = excluded.data, count = excluded.count,"
        " last_seen = excluded.last_seen, archive_id = excluded.archive_id",
        (project, le.signature, _enc.encode(le), le.count, le.last_seen, aid))


# Kinds an event's own item has (a tool call's result, its change, a test run), by preference.
_EVIDENCE_KINDS = ("test_result", "error", "code_change", "tool")


def archive_ids(event_ids: tuple[int, ...], conn: sqlite3.Connection) -> tuple[int, ...]:
    """The archive id of the item each stored event archived (in the events' order; none for an event
    whose item was not archived)."""
    if not event_ids:
        return ()
    marks = ",".join("?" * len(event_ids))
    rows = conn.execute(f"SELECT event_id, id, kind FROM archive WHERE event_id IN ({marks}) ORDER BY id",
                        tuple(event_ids)).fetchall()
    best: dict[int, tuple[int, int]] = {}
    for eid, aid, kind in rows:
        rank = _EVIDENCE_KINDS.index(kind) if kind in _EVIDENCE_KINDS else len(_EVIDENCE_KINDS)
        if eid not in best or rank < best[eid][0]:
            best[eid] = (rank, aid)
    out: list[int] = []
    for eid in event_ids:
        if eid in best and best[eid][1] not in out:
            out.append(best[eid][1])
    return tuple(out)


def _store(project: str, session: str, new: list[LS.Lesson], ts: float, conn: sqlite3.Connection) -> None:
    for le in new:
        le = msgspec.structs.replace(le, evidence=archive_ids(le.events, conn))
        old = _by_signature(project, le.signature, conn)
        _put(conn, project, session, LS.merge(old, le) if old is not None else le, ts)


def _decode(data: bytes | str, conn: sqlite3.Connection) -> LS.Lesson:
    le = _dec.decode(data)
    if le.evidence and not le.events:  # stored before evidence named archive ids: those were event ids
        le = msgspec.structs.replace(le, events=le.evidence, evidence=archive_ids(le.evidence, conn))
    return le


def _by_signature(project: str, signature: str, conn: sqlite3.Connection) -> LS.Lesson | None:
    r = conn.execute("SELECT data FROM lessons WHERE project = ? AND signature = ?", (project, signature)).fetchone()
    return _decode(r[0], conn) if r else None


def _with_archive_id(project: str, signature: str, conn: sqlite3.Connection) -> tuple[LS.Lesson, int | None] | None:
    """The lesson of ``signature`` and the archive id of its L2 item (what ``recall --id`` shows)."""
    r = conn.execute("SELECT data, archive_id FROM lessons WHERE project = ? AND signature = ?",
                     (project, signature)).fetchone()
    return (_decode(r[0], conn), r[1]) if r else None


def all_lessons(project: str | None, limit: int, conn: sqlite3.Connection) -> list[LS.Lesson]:
    if project is None:
        rows = conn.execute("SELECT data FROM lessons ORDER BY count DESC, last_seen DESC LIMIT ?", (limit,))
    else:
        rows = conn.execute("SELECT data FROM lessons WHERE project = ? ORDER BY count DESC, last_seen DESC LIMIT ?",
                            (project, limit))
    return [_decode(r[0], conn) for r in rows.fetchall()]


def _count(project: str, conn: sqlite3.Connection) -> int:
    return conn.execute("SELECT count(*) FROM lessons WHERE project = ?", (project,)).fetchone()[0]
