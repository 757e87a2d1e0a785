"""Lessons in the store: one row per (project, signature), its evidence an L2 archive item.

Rules:
- Reads run on a reader connection, writes only on the writer's (``writer.run(partial(fn, ...))``);
  none commits. Pairing, signatures, merging and reconciling are the pure core's (``core.lessons``).
- Storing a lesson maps the stored event ids it names (``Lesson.events``) to the archive ids of the
  items those events archived (``Lesson.evidence``, the preferred kind per event: test result, error,
  change, tool); an event whose item was not archived gives no id. A lesson stored before this rule
  (evidence without events) is read with its evidence taken as event ids and mapped the same way.
- A repeat merges into the stored row (``core.lessons.merge``). The lesson's full text is an archive
  item of kind ``lesson`` with uid ``lesson:<signature>`` (upserted, so recall shows the latest).
- A hand-edited lessons.md wins for what it shows (:func:`reconcile_file`), except that a lesson the
  store updated after the file was last written is never dropped by it.
"""

from __future__ import annotations

import sqlite3

import msgspec

from ..core import lessons as LS
from ..core.model import Kind
from . import ops

_enc = msgspec.json.Encoder()
_dec = msgspec.json.Decoder(LS.Lesson)


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


def store_lessons(project: str, session: str, new: list[LS.Lesson], ts: float, conn: sqlite3.Connection) -> None:
    """Store lessons the tracker completed, each merged into the project's row of its signature."""
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


def with_archive_id(project: str, signature: str, conn: sqlite3.Connection) -> tuple[LS.Lesson, int | None] | None:
    """The lesson of ``signature`` and the archive id of its L2 item (what ``recall --id`` shows)."""
    r = conn.execute("SELECT data, archive_id FROM lessons WHERE project = ? AND signature = ?",
                     (project, signature)).fetchone()
    return (_decode(r[0], conn), r[1]) if r else None


def all_lessons(project: str | None, limit: int, conn: sqlite3.Connection) -> list[LS.Lesson]:
    """A project's lessons (every project's with None), most frequent first, then most recent."""
    if project is None:
        rows = conn.execute("SELECT data FROM lessons ORDER BY count DESC, last_seen DESC LIMIT ?", (limit,))
    else:
        rows = conn.execute("SELECT data FROM lessons WHERE project = ? ORDER BY count DESC, last_seen DESC LIMIT ?",
                            (project, limit))
    return [_decode(r[0], conn) for r in rows.fetchall()]


def count(project: str, conn: sqlite3.Connection) -> int:
    """How many lessons the project has."""
    return conn.execute("SELECT count(*) FROM lessons WHERE project = ?", (project,)).fetchone()[0]
