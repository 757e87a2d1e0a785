"""L3 project memory in the store: the pages' index rows, their archived text, the decision log's
progress, and what a phase's hand-off page is made of.

Rules:
- Reads run on a reader connection, writes only on the writer's (``writer.run(partial(fn, ...))``);
  none commits. The files themselves are ``service/ledger.py``'s.
- Every page ctxlifed writes or reads back is indexed as one archive item of kind ``ledger`` with
  uid ``ledger:<path>`` (upserted: the latest text wins) and one ``ledgers`` row naming it.
- The decision log's progress is the highest item id written to ``decisions.md``, kept in ``meta``
  under ``decisions_written:<project>``; the next write takes at most 200 newer decisions.
- A phase's page is made of bounded reads (:func:`phase_rows`): the 12 most important steps and the
  8 latest test runs of the phase (both in time order), at most 50 changed files, 20 decisions and
  12 open pending items.
- A ticked checkbox closes an open pending item of the project whose text it shows, whole or cut with
  ``…`` (:func:`resolve_ticked`, route ``ledger``), among the project's 500 newest open ones.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from . import ops
from .compactions import session_goal


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def resolve_ticked(project: str, ticked: list[str], ts: float, conn: sqlite3.Connection) -> int:
    """Close the project's open pending items whose text a ticked checkbox shows (whole, or cut with …)."""
    want = [_norm(t) for t in ticked]
    rows = conn.execute("SELECT id, text FROM items WHERE project = ? AND kind = 'pending' AND status = 'open'"
                        " ORDER BY id DESC LIMIT 500", (project,)).fetchall()
    closed = []
    for iid, text in rows:
        t = _norm(text)
        if any(t == w or (w.endswith("…") and len(w) > 8 and t.startswith(w[:-1])) for w in want):
            closed.append((int(iid), "ledger"))
    return ops.resolve_items(conn, closed, ts) if closed else 0


def ledger_index(project: str, conn: sqlite3.Connection) -> dict[str, tuple[float, int | None, str | None]]:
    """Pages the store knows for ``project``: path -> (time written, archive id, indexed text)."""
    rows = conn.execute(
        "SELECT l.path, l.ts, l.archive_id, a.text FROM ledgers l LEFT JOIN archive a ON a.id = l.archive_id"
        " WHERE l.project = ?", (project,)).fetchall()
    return {r[0]: (float(r[1]), r[2], r[3]) for r in rows}


def decision_logs(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """Every decision log the store indexed: (path, project)."""
    return [(r[0], r[1]) for r in conn.execute("SELECT path, project FROM ledgers WHERE path LIKE '%decisions.md'")]


def indexed_text(project: str, path: str, conn: sqlite3.Connection) -> str | None:
    """The text the archive holds for the page at ``path`` (None: never indexed)."""
    r = conn.execute("SELECT text FROM archive WHERE project = ? AND uid = ?", (project, f"ledger:{path}")).fetchone()
    return r[0] if r else None


def index_ledger(path: str, project: str, session: str | None, ts: float, text: str, conn: sqlite3.Connection) -> int:
    """Index a page's text as its ledger archive item and record the page; returns the archive id."""
    summary = next((ln.strip("# ").strip() for ln in text.splitlines() if ln.strip()), "")[:200]
    aid = ops.upsert_archive_by_uid(conn, ops.ArchiveRow(
        session=session or "", project=project, ts=ts, kind="ledger", text=text, summary=summary,
        uid=f"ledger:{path}", priority=70, level=3))
    ops.record_ledger(conn, path=path, project=project, session=session, ts=ts, archive_id=aid)
    return aid


def after_decisions(path: str, project: str, ts: float, text: str, last: int, conn: sqlite3.Connection) -> None:
    """``decisions.md`` was appended up to item ``last``: remember that and index its text."""
    conn.execute("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                 (f"decisions_written:{project}", str(last)))
    index_ledger(path, project, None, ts, text, conn)


def new_decisions(project: str, conn: sqlite3.Connection) -> tuple[list[tuple], int]:
    """Decisions not in ``decisions.md`` yet (id, ts, session, phase, text, archive id), and the last written."""
    r = conn.execute("SELECT value FROM meta WHERE key = ?", (f"decisions_written:{project}",)).fetchone()
    last = int(r[0]) if r else 0
    rows = conn.execute(
        "SELECT id, ts, session, phase, text, archive_id FROM items WHERE project = ? AND kind = 'decision' AND id > ?"
        " ORDER BY id LIMIT 200", (project, last)).fetchall()
    return rows, last


def phase_rows(session: str, start: float, end: float, phase: str, conn: sqlite3.Connection) -> dict[str, Any]:
    """What a phase's page is made of (module rules); ``service/ledger.py`` shapes it into the page."""
    win = (session, start - 0.001, end + 0.001)
    goal = session_goal(conn, session, end + 0.001)
    done = conn.execute(  # the 12 most important, shown in time order
        "SELECT id, summary FROM (SELECT id, ts, summary FROM archive WHERE session = ? AND ts BETWEEN ? AND ?"
        " AND kind IN ('code_change', 'tool', 'test_result', 'error', 'assistant')"
        " ORDER BY priority DESC, id DESC LIMIT 12) ORDER BY ts, id", win).fetchall()
    files_ = conn.execute(
        "SELECT DISTINCT file_path FROM archive WHERE session = ? AND ts BETWEEN ? AND ? AND kind = 'code_change'"
        " AND file_path IS NOT NULL ORDER BY id LIMIT 50", win).fetchall()
    decisions = conn.execute(
        "SELECT text FROM items WHERE session = ? AND ts BETWEEN ? AND ? AND kind = 'decision' ORDER BY id LIMIT 20",
        win).fetchall()
    tests = conn.execute(  # the 8 latest, shown in time order
        "SELECT id, summary FROM (SELECT id, ts, summary FROM archive WHERE session = ? AND ts BETWEEN ? AND ?"
        " AND kind = 'test_result' ORDER BY id DESC LIMIT 8) ORDER BY ts, id", win).fetchall()
    pending = conn.execute(
        "SELECT text FROM items WHERE session = ? AND kind = 'pending' AND status = 'open' ORDER BY id DESC LIMIT 12",
        (session,)).fetchall()
    noted = conn.execute(  # a constraint or an open item stated in this phase
        "SELECT 1 FROM items WHERE session = ? AND ts BETWEEN ? AND ? AND kind IN ('constraint', 'pending') LIMIT 1",
        win).fetchone()
    worked = conn.execute(  # entered on tool evidence (edits, test runs): work happened even if deduplicated
        "SELECT 1 FROM phase_switches WHERE session = ? AND ts BETWEEN ? AND ? AND to_phase = ? AND cause = 'heuristic'"
        " LIMIT 1", (*win, phase)).fetchone()
    return {
        "goal": goal,
        "done": [(int(i), s) for i, s in done],
        "files": [r[0] for r in files_],
        "decisions": [r[0] for r in decisions],
        "tests": [(int(i), s) for i, s in tests],
        "pending": [r[0] for r in pending],
        "noted": noted is not None,
        "worked": worked is not None,
    }
