"""Write operations. Each function takes the writer's connection and runs inside its transaction.

Rules:
- Only the writer calls these (``await writer.run(partial(fn, ...))``); they never commit.
- Text arrives already redacted and bounded by the service; this layer only dedups and stores.
- Archive dedup: one row per (project, content hash); a repeat returns the existing id.
- Every write of an archive text writes its ``idents`` too (the words of its mixed-case
  identifiers, indexed by the word index since schema 0011).
"""

from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import dataclass

from ..core.recall_rank import identifier_words


@dataclass(frozen=True, slots=True)
class EventRow:
    session: str
    project: str
    cwd: str
    event: str
    tool: str | None
    ts: float
    payload: bytes
    truncated: bool = False
    redactions: int = 0
    source: str = "hook"
    rid: str | None = None
    pending: bool = False  # acknowledged, not derived yet (service/derive.py)


@dataclass(frozen=True, slots=True)
class ArchiveRow:
    session: str
    project: str
    ts: float
    kind: str
    text: str
    summary: str = ""
    phase: str | None = None
    tool: str | None = None
    file_path: str | None = None
    uid: str | None = None
    event_id: int | None = None
    priority: int = 50
    category: str | None = None
    level: int = 2
    truncated: bool = False


def content_hash(kind: str, text: str) -> str:
    return hashlib.blake2b(f"{kind}\0{text}".encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def seen_rid(conn: sqlite3.Connection, rid: str | None) -> bool:
    return rid is not None and conn.execute("SELECT 1 FROM events WHERE rid = ?", (rid,)).fetchone() is not None


def insert_event(conn: sqlite3.Connection, ev: EventRow) -> int:
    """Insert one event; returns its id, or 0 when its request id was already stored (a replay)."""
    cur = conn.execute(
        "INSERT OR IGNORE INTO events(session, project, cwd, event, tool, ts, payload, bytes, truncated,"
        " redactions, source, rid, pending) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (ev.session, ev.project, ev.cwd, ev.event, ev.tool, ev.ts, ev.payload, len(ev.payload),
         int(ev.truncated), ev.redactions, ev.source, ev.rid, int(ev.pending)),
    )
    return int(cur.lastrowid or 0) if cur.rowcount else 0


def finish_pending(conn: sqlite3.Connection, eid: int) -> bool:
    """Clear an event's pending mark; False when it is gone (forgotten) or was derived already."""
    return conn.execute("UPDATE events SET pending = 0 WHERE id = ? AND pending = 1", (eid,)).rowcount == 1


def insert_archive(conn: sqlite3.Connection, row: ArchiveRow) -> tuple[int, bool]:
    """Insert or find by hash. Returns (id, created)."""
    h = content_hash(row.kind, row.text)
    found = conn.execute("SELECT id FROM archive WHERE project=? AND hash=?", (row.project, h)).fetchone()
    if not found and row.uid:
        found = conn.execute("SELECT id FROM archive WHERE project=? AND uid=?", (row.project, row.uid)).fetchone()
    if found:
        return int(found[0]), False
    cur = conn.execute(
        "INSERT INTO archive(hash, session, project, ts, kind, phase, tool, file_path, uid, event_id,"
        " priority, category, level, summary, text, chars, truncated, idents)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (h, row.session, row.project, row.ts, row.kind, row.phase, row.tool, row.file_path, row.uid,
         row.event_id, row.priority, row.category, row.level, row.summary, row.text, len(row.text),
         int(row.truncated), identifier_words(row.text)),
    )
    return int(cur.lastrowid or 0), True


def upsert_archive_by_uid(conn: sqlite3.Connection, row: ArchiveRow) -> int:
    """One archive row per (project, uid) whose text follows its source (a ledger page, a lesson).

    The row is updated in place when the text changed; FTS follows by trigger. The hash carries the
    id so an identical text elsewhere never collides with the unique (project, hash) index.
    """
    found = conn.execute("SELECT id, text FROM archive WHERE project = ? AND uid = ?", (row.project, row.uid)).fetchone()
    if not found:
        return insert_archive(conn, row)[0]
    aid = int(found[0])
    if found[1] != row.text:
        conn.execute("UPDATE archive SET text = ?, summary = ?, chars = ?, ts = ?, hash = ?, idents = ? WHERE id = ?",
                     (row.text, row.summary, len(row.text), row.ts, f"{content_hash(row.kind, row.text)}:{aid}",
                      identifier_words(row.text), aid))
    return aid


def touch_session(conn: sqlite3.Connection, *, session: str, project: str, cwd: str,
                  transcript_path: str | None, ts: float, n_events: int = 1) -> None:
    conn.execute(
        "INSERT INTO sessions(session, project, cwd, transcript_path, first_ts, last_ts, events, phase_since)"
        " VALUES (?,?,?,?,?,?,?,?)"
        " ON CONFLICT(session) DO UPDATE SET last_ts=max(last_ts, excluded.last_ts),"
        " events=events+excluded.events, cwd=excluded.cwd,"
        " transcript_path=coalesce(excluded.transcript_path, transcript_path)",
        (session, project, cwd, transcript_path, ts, ts, n_events, ts),
    )


def save_session_state(conn: sqlite3.Connection, *, session: str, phase: str, phase_since: float,
                       model: str | None, state: bytes, ended_ts: float | None = None) -> None:
    conn.execute(
        "UPDATE sessions SET phase=?, phase_since=?, model=coalesce(?, model), state=?,"
        " ended_ts=coalesce(?, ended_ts) WHERE session=?",
        (phase, phase_since, model, state, ended_ts, session),
    )


def insert_phase_switch(conn: sqlite3.Connection, *, session: str, project: str, ts: float,
                        from_phase: str | None, to_phase: str, cause: str, evidence: str) -> int:
    cur = conn.execute(
        "INSERT INTO phase_switches(session, project, ts, from_phase, to_phase, cause, evidence) VALUES (?,?,?,?,?,?,?)",
        (session, project, ts, from_phase, to_phase, cause, evidence),
    )
    return int(cur.lastrowid or 0)


def upsert_item(conn: sqlite3.Connection, *, project: str, session: str, kind: str, text: str,
                ts: float, phase: str | None, archive_id: int | None) -> tuple[int, bool]:
    """Insert a fact, or touch the one already stored with the same text (restating an open item keeps
    it current: its staleness counts from ``touched_ts``)."""
    h = content_hash(kind, " ".join(text.lower().split()))
    found = conn.execute("SELECT id FROM items WHERE project=? AND kind=? AND hash=?", (project, kind, h)).fetchone()
    if found:
        conn.execute("UPDATE items SET touched_ts = max(coalesce(touched_ts, ts), ?) WHERE id = ?", (ts, found[0]))
        return int(found[0]), False
    cur = conn.execute(
        "INSERT INTO items(project, session, kind, text, hash, ts, phase, archive_id, touched_ts)"
        " VALUES (?,?,?,?,?,?,?,?,?)",
        (project, session, kind, text, h, ts, phase, archive_id, ts),
    )
    return int(cur.lastrowid or 0), True


def resolve_items(conn: sqlite3.Connection, closed: list[tuple[int, str]], ts: float = 0.0) -> int:
    """Close open items: ``closed`` is ``(item id, route)`` (core/pending.py ROUTES). Returns how many
    were open."""
    return sum(conn.execute(
        "UPDATE items SET status = 'resolved', resolved_ts = ?, resolution = ? WHERE id = ? AND status = 'open'",
        (ts, route, iid)).rowcount for iid, route in closed)


def resolve_pending_ref(conn: sqlite3.Connection, ref: int, *, project: str | None, ts: float,
                        route: str = "ctl") -> dict | None:
    """Close the pending item shown as ``#ref`` (its archive id; an item id when it has none).
    Returns the item (status before closing), or None when no pending item has that reference."""
    where = "kind = 'pending' AND (archive_id = ? OR (archive_id IS NULL AND id = ?))"
    args: list = [ref, ref]
    if project is not None:
        where += " AND project = ?"
        args.append(project)
    row = conn.execute(f"SELECT id, text, status, project FROM items WHERE {where} ORDER BY id LIMIT 1",
                       args).fetchone()
    if row is None:
        return None
    resolve_items(conn, [(int(row[0]), route)], ts)
    return {"item": int(row[0]), "text": row[1], "status": row[2], "project": row[3]}


def record_ledger(conn: sqlite3.Connection, *, path: str, project: str, session: str | None,
                  ts: float, archive_id: int | None) -> None:
    conn.execute(
        "INSERT INTO ledgers(path, project, session, ts, archive_id) VALUES (?,?,?,?,?)"
        " ON CONFLICT(path) DO UPDATE SET ts=excluded.ts, archive_id=excluded.archive_id",
        (path, project, session, ts, archive_id),
    )


def forget(conn: sqlite3.Connection, *, id: int | None = None, session: str | None = None,
           project: str | None = None) -> tuple[int, int, list[str]]:
    """Delete rows (FTS follows by trigger). Returns (events, archive) deleted and the decision texts
    that went with them (the caller also takes those out of the project's decision log on disk).

    ``id``: the item, the raw event it came from, and every row derived from that event (facts).
    ``session`` / ``project``: everything of that scope; a session's decisions are also cut out of
    the project-level ledger rows (``decisions.md``) that quote them.
    """
    if id is not None:
        row = conn.execute("SELECT event_id FROM archive WHERE id = ?", (id,)).fetchone()
        if row is None:
            return 0, 0, []
        eid = row[0]
        ids = [id] if eid is None else [r[0] for r in conn.execute("SELECT id FROM archive WHERE event_id = ?", (eid,))]
        marks = ",".join("?" * len(ids))
        texts = [r[0] for r in conn.execute(
            f"SELECT text FROM items WHERE kind = 'decision' AND archive_id IN ({marks})", ids)]
        conn.execute(f"DELETE FROM items WHERE archive_id IN ({marks})", ids)
        a = conn.execute(f"DELETE FROM archive WHERE id IN ({marks})", ids).rowcount
        e = conn.execute("DELETE FROM events WHERE id = ?", (eid,)).rowcount if eid is not None else 0
        _cut_from_logs(conn, None, texts)
        return e, a, texts
    col, val = ("session", session) if session is not None else ("project", project)
    if val is None:
        return 0, 0, []
    texts = [r[0] for r in conn.execute(f"SELECT text FROM items WHERE kind = 'decision' AND {col} = ?", (val,))]
    projects = [r[0] for r in conn.execute(f"SELECT DISTINCT project FROM items WHERE {col} = ?", (val,))]
    e = conn.execute(f"DELETE FROM events WHERE {col}=?", (val,)).rowcount
    a = conn.execute(f"DELETE FROM archive WHERE {col}=?", (val,)).rowcount
    for table in ("items", "phase_switches", "ledgers", "sessions", "compactions"):
        conn.execute(f"DELETE FROM {table} WHERE {col}=?", (val,))
    if col == "project":
        conn.execute("DELETE FROM lessons WHERE project = ?", (val,))
        conn.execute("DELETE FROM meta WHERE key = ?", (f"decisions_written:{val}",))
    else:
        for proj in projects:
            _cut_from_logs(conn, proj, texts)
    return e, a, texts


def _cut_from_logs(conn: sqlite3.Connection, project: str | None, texts: list[str]) -> None:
    """Remove the lines quoting ``texts`` from project-level ledger rows (the decision log's index)."""
    if not texts:
        return
    q = "SELECT id, text FROM archive WHERE kind = 'ledger' AND session = ''"
    rows = conn.execute(q + (" AND project = ?" if project else ""), (project,) if project else ()).fetchall()
    for aid, text in rows:
        kept = [ln for ln in text.splitlines(keepends=True) if not any(t in ln for t in texts)]
        new = "".join(kept)
        if new != text:
            conn.execute("UPDATE archive SET text = ?, chars = ?, idents = ? WHERE id = ?",
                         (new, len(new), identifier_words(new), aid))
