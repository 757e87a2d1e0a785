"""Retention's deletions: the age cap and the size cap, one bounded chunk per writer job.

Rules:
- Only the writer runs these (``await writer.run(partial(fn, ...))``); they never commit.
- Every call deletes at most ``CHUNK`` rows per table, so hook events keep flowing between chunks
  (``service/retention.py`` loops until a chunk comes back short).
- A project's footprint is its event payload bytes plus its archived text characters, measured the
  same way every time (:func:`footprints`).
- Deleting archive rows deletes their FTS entries (the schema's triggers); ledger index rows age like
  anything else, the L3 files stay (they are the user's).
"""

from __future__ import annotations

import sqlite3

CHUNK = 2000


def age_chunk(cutoff: float, conn: sqlite3.Connection) -> tuple[int, int, int]:
    """Delete up to CHUNK rows older than ``cutoff`` from each table; returns (events, archive, other)."""
    e = conn.execute("DELETE FROM events WHERE id IN (SELECT id FROM events WHERE ts < ? LIMIT ?)",
                     (cutoff, CHUNK)).rowcount
    a = conn.execute("DELETE FROM archive WHERE id IN (SELECT id FROM archive WHERE ts < ? LIMIT ?)",
                     (cutoff, CHUNK)).rowcount
    o = 0
    for table, col in (("items", "ts"), ("phase_switches", "ts"), ("ledgers", "ts")):
        key = "rowid"
        o += conn.execute(f"DELETE FROM {table} WHERE {key} IN (SELECT {key} FROM {table} WHERE {col} < ? LIMIT ?)",
                          (cutoff, CHUNK)).rowcount
    o += conn.execute("DELETE FROM sessions WHERE rowid IN (SELECT rowid FROM sessions WHERE last_ts < ? LIMIT ?)",
                      (cutoff, CHUNK)).rowcount
    return e, a, o


def footprints(conn: sqlite3.Connection) -> dict[str, int]:
    """Bytes per project: event payloads plus archived characters."""
    out: dict[str, int] = {}
    for project, n in conn.execute("SELECT project, coalesce(sum(bytes), 0) FROM events GROUP BY project"):
        out[project] = out.get(project, 0) + int(n)
    for project, n in conn.execute("SELECT project, coalesce(sum(chars), 0) FROM archive GROUP BY project"):
        out[project] = out.get(project, 0) + int(n)
    return out


def trim_chunk(project: str, excess: int, conn: sqlite3.Connection) -> tuple[int, int, int]:
    """Delete the project's oldest rows (events and archive together) until ``excess`` bytes are
    freed or CHUNK rows went; returns (events, archive, bytes freed)."""
    rows = conn.execute(
        "SELECT 'e', id, ts, bytes FROM events WHERE project = ?"
        " UNION ALL SELECT 'a', id, ts, chars FROM archive WHERE project = ?"
        " ORDER BY 3, 2 LIMIT ?", (project, project, CHUNK)).fetchall()
    ev: list[tuple[int]] = []
    ar: list[tuple[int]] = []
    freed = 0
    for kind, rid, _ts, size in rows:
        (ev if kind == "e" else ar).append((rid,))
        freed += int(size or 0)
        if freed >= excess:
            break
    conn.executemany("DELETE FROM events WHERE id = ?", ev)
    conn.executemany("DELETE FROM archive WHERE id = ?", ar)
    return len(ev), len(ar), freed
