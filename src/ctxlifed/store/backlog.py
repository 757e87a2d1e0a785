"""The trigram backlog: substring/CJK indexing done after the reply, by the writer when idle.

Rules:
- Trigram-indexing a row costs several times its word indexing (figures: ``bench/RESULTS.md``),
  so it is not done inside the transaction that acknowledges a hook. An insert (or a
  text update) only records the row id in ``tri_pending`` (trigger, migration 0007); the writer
  indexes pending rows in id order between jobs (:func:`index_some`, its idle work) and, under
  sustained load, at least every ``Writer.IDLE_MAX_LAG_S``, so the backlog always drains.
- ``tri_pending`` and ``archive_tri`` change in the same transaction: a row is either indexed or
  pending, never both, never neither (a crash keeps the backlog; the next start drains it). The
  delete and update triggers skip the FTS ``delete`` for a pending row (it was never indexed: a
  ``delete`` of unindexed content would corrupt an external-content index).
- Readers never wait for the backlog: a substring search also scans the pending rows
  (:func:`pending_matches`, newest first, at most ``SCAN_PENDING`` of them), so a row is findable
  by substring the moment it is archived. The scan is bounded so that a recall stays fast however
  long the backlog (a burst of hooks leaves thousands of rows, indexed only once the daemon is
  quiet: ``scheduler.py``): staleness bound: a substring-only match (not a whole word: the word
  index has every archived row) in a pending row older than the newest ``SCAN_PENDING`` is found
  once the idle work has indexed it (oldest first); so is one that follows a NUL character in its
  text (the scan tests with ``LIKE``: ``fts_query.substring_pattern``).
- Index segments are merged here too, in small steps (``idle_step``), not by FTS5's automerge
  inside whichever insert crosses a threshold (migration 0009).
- Functions here take a connection and never commit (like ``ops``).
"""

from __future__ import annotations

import sqlite3
import time

from .fts_query import CONTAINS_SQL, substring_pattern


def _no_table(exc: sqlite3.OperationalError) -> bool:
    return "no such table" in str(exc)


SCAN_PENDING = 1_000  # newest pending rows a substring search scans (the backlog is ~0 when idle)


def index_some(conn: sqlite3.Connection, *, max_rows: int = 32, budget_s: float = 0.003) -> bool:
    """Index pending rows (oldest first) until ``max_rows`` or ``budget_s``; True if more remain."""
    deadline = time.perf_counter() + budget_s
    done = 0
    while done < max_rows:
        try:
            row = conn.execute("SELECT id FROM tri_pending ORDER BY id LIMIT 1").fetchone()
        except sqlite3.OperationalError as exc:  # no trigram index here (SQLite without it)
            if _no_table(exc):
                return False
            raise  # an interrupt (the writer's ``preempt``) must end the step
        if row is None:
            return False
        conn.execute("INSERT INTO archive_tri(rowid, text) SELECT id, text FROM archive WHERE id = ?", row)
        conn.execute("DELETE FROM tri_pending WHERE id = ?", row)
        done += 1
        if time.perf_counter() >= deadline:
            break
    return conn.execute("SELECT 1 FROM tri_pending LIMIT 1").fetchone() is not None


MERGE_PAGES = 2  # FTS5 merge work per statement; a step merges until its time budget is spent
_MERGED = ("archive_tri", "archive_fts")


def idle_step(conn: sqlite3.Connection, *, budget_s: float = 0.001) -> bool:
    """The writer's idle work: index pending rows, then merge index segments a few pages at a time
    (migration 0009 turns FTS5's automerge off: a merge inside an insert took 10-70 ms, paid by
    whichever request waited for the writer then). Merging goes on while rows are still pending, so
    a backlog indexed over a long busy stretch never piles up segments into a crisis merge (one long
    step). True while work remains."""
    more = index_some(conn, budget_s=budget_s)
    deadline = time.perf_counter() + budget_s
    for table in _MERGED:
        while True:
            before = conn.total_changes
            try:
                conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('merge', {MERGE_PAGES})")
            except sqlite3.OperationalError as exc:  # no such table (no trigram support)
                if _no_table(exc):
                    break
                raise
            if conn.total_changes - before <= 1:  # FTS5: no change means no merge work left
                break
            if time.perf_counter() >= deadline:
                return True
    return more


def pending(conn: sqlite3.Connection) -> int:
    """Rows waiting for the trigram index (0 without one)."""
    try:
        return int(conn.execute("SELECT count(*) FROM tri_pending").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


def pending_matches(conn: sqlite3.Connection, terms: tuple[str, ...], where: str, args: list | tuple,
                    extra: str = "", extra_args: list | tuple = (), limit: int = 200) -> list[int]:
    """Ids of pending rows holding every term as a case-insensitive substring (what the trigram
    index would match), newest first, under the caller's ``where`` filter on ``archive a``."""
    if not terms:
        return []
    try:
        if conn.execute("SELECT 1 FROM tri_pending LIMIT 1").fetchone() is None:
            return []
    except sqlite3.OperationalError:
        return []
    sub = " AND ".join([CONTAINS_SQL] * len(terms))
    rows = conn.execute(
        f"SELECT a.id FROM (SELECT id FROM tri_pending ORDER BY id DESC LIMIT {SCAN_PENDING}) p"
        f" CROSS JOIN archive a ON a.id = p.id WHERE {where} AND {sub}{extra} ORDER BY a.id DESC LIMIT ?",
        (*args, *map(substring_pattern, terms), *extra_args, limit)).fetchall()
    return [int(r[0]) for r in rows]
