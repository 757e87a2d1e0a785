"""Read queries. Each function takes a query-only connection from ``Readers``.

Rules:
- Reads are short: bounded LIMITs everywhere, no read holds a transaction past its function.
- User text reaches FTS5 only through ``fts_match_expression`` (every term quoted), so no query
  can raise an FTS syntax error. 1–2 character CJK terms, which the trigram index cannot match,
  fall back to ``instr()`` over the filtered rows, capped by ``SCAN_CAP``.
- Ranking: FTS rank (bm25) first, then priority, then recency.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ..core.recall_query import fts_match_expression, needs_substring_fallback

SCAN_CAP = 200_000  # rows examined by the substring fallback, newest first
WINDOW = 360


def _filters(project: str | None, session: str | None, phase: str | None,
             kinds: tuple[str, ...] | None, alias: str = "a") -> tuple[str, list[Any]]:
    sql, args = [], []
    if project is not None:
        sql.append(f"{alias}.project = ?")
        args.append(project)
    if session is not None:
        sql.append(f"{alias}.session = ?")
        args.append(session)
    if phase is not None:
        sql.append(f"{alias}.phase = ?")
        args.append(phase)
    if kinds:
        sql.append(f"{alias}.kind IN ({','.join('?' * len(kinds))})")
        args.extend(kinds)
    return (" AND ".join(sql) or "1"), args


def _has_cjk(s: str) -> bool:
    return any("\u3040" <= ch <= "\u9fff" or "\uac00" <= ch <= "\ud7af" or "\uf900" <= ch <= "\ufaff" for ch in s)


_COLS = "a.id, a.session, a.project, a.ts, a.kind, a.phase, a.tool, a.file_path, a.summary, a.priority, a.chars"


def _row(r: sqlite3.Row | tuple, score: float) -> dict[str, Any]:
    return {
        "id": r[0], "session": r[1], "project": r[2], "ts": r[3], "kind": r[4], "phase": r[5],
        "tool": r[6], "file_path": r[7], "summary": r[8], "priority": r[9], "chars": r[10], "score": score,
    }


def search(conn: sqlite3.Connection, *, words: tuple[str, ...], phrases: tuple[str, ...] = (),
           project: str | None = None, session: str | None = None, phase: str | None = None,
           kinds: tuple[str, ...] | None = None, limit: int = 20, trigram: bool = True) -> tuple[list[dict[str, Any]], int]:
    """Ranked hits and a total (capped at 1000) for a parsed recall query."""
    limit = max(1, min(limit, 200))
    where, args = _filters(project, session, phase, kinds)
    terms = [t for t in (*words, *phrases) if t.strip()]
    if not terms:
        rows = conn.execute(
            f"SELECT {_COLS} FROM archive a WHERE {where} ORDER BY a.priority DESC, a.id DESC LIMIT ?",
            (*args, limit),
        ).fetchall()
        total = conn.execute(f"SELECT count(*) FROM (SELECT 1 FROM archive a WHERE {where} LIMIT 1000)", args).fetchone()[0]
        return [_row(r, 0.0) for r in rows], total

    short = [t for t in terms if needs_substring_fallback(t)]
    long_words = tuple(t for t in words if t.strip() and not needs_substring_fallback(t))
    long_phrases = tuple(t for t in phrases if t.strip() and not needs_substring_fallback(t))
    extra, extra_args = "", []
    for t in short:
        extra += " AND instr(a.text, ?) > 0"
        extra_args.append(t)

    hits: dict[int, dict[str, Any]] = {}
    order: list[int] = []
    total = 0

    def take(rows: list[tuple], base: float) -> None:
        for r in rows:
            if r[0] not in hits:
                hits[r[0]] = _row(r, base - (r[11] if len(r) > 11 else 0.0))
                order.append(r[0])

    expr = fts_match_expression(long_words, long_phrases)
    if expr:
        cjk = any(_has_cjk(t) for t in (*long_words, *long_phrases))
        if not cjk:
            q = (f"SELECT {_COLS}, bm25(archive_fts) AS r FROM archive_fts JOIN archive a ON a.id = archive_fts.rowid"
                 f" WHERE archive_fts MATCH ? AND {where}{extra} ORDER BY r, a.priority DESC, a.id DESC LIMIT ?")
            take(conn.execute(q, (expr, *args, *extra_args, limit)).fetchall(), 100.0)
            total = conn.execute(
                f"SELECT count(*) FROM (SELECT 1 FROM archive_fts JOIN archive a ON a.id = archive_fts.rowid"
                f" WHERE archive_fts MATCH ? AND {where}{extra} LIMIT 1000)", (expr, *args, *extra_args)).fetchone()[0]
        if trigram and len(order) < limit and all(len(t) >= 3 for t in (*long_words, *long_phrases)):
            q = (f"SELECT {_COLS}, bm25(archive_tri) AS r FROM archive_tri JOIN archive a ON a.id = archive_tri.rowid"
                 f" WHERE archive_tri MATCH ? AND {where}{extra} ORDER BY r, a.id DESC LIMIT ?")
            take(conn.execute(q, (expr, *args, *extra_args, limit)).fetchall(), 50.0)
            if not total or cjk:
                total = max(total, conn.execute(
                    f"SELECT count(*) FROM (SELECT 1 FROM archive_tri JOIN archive a ON a.id = archive_tri.rowid"
                    f" WHERE archive_tri MATCH ? AND {where}{extra} LIMIT 1000)", (expr, *args, *extra_args)).fetchone()[0])
        if len(order) < limit and (not trigram or any(len(t) < 3 for t in (*long_words, *long_phrases))):
            # Terms the indexes cannot serve (no trigram support, or short non-CJK pieces): substring scan.
            sub = " AND ".join(["instr(lower(a.text), lower(?)) > 0"] * len((*long_words, *long_phrases)))
            q = (f"SELECT {_COLS} FROM (SELECT * FROM archive a WHERE {where} ORDER BY id DESC LIMIT {SCAN_CAP}) a"
                 f" WHERE {sub}{extra} ORDER BY a.id DESC LIMIT ?")
            take(conn.execute(q, (*args, *long_words, *long_phrases, *extra_args, limit)).fetchall(), 10.0)
            total = max(total, len(order))
    else:
        q = (f"SELECT {_COLS} FROM (SELECT * FROM archive a WHERE {where} ORDER BY id DESC LIMIT {SCAN_CAP}) a"
             f" WHERE 1{extra} ORDER BY a.priority DESC, a.id DESC LIMIT ?")
        take(conn.execute(q, (*args, *extra_args, limit)).fetchall(), 10.0)
        total = len(order)
    result = [hits[i] for i in order[:limit]]
    first = terms[0]
    for h in result:
        h["window"] = window(conn, h["id"], first)
    return result, max(total, len(result))


def window(conn: sqlite3.Connection, aid: int, term: str) -> str:
    r = conn.execute(
        "SELECT substr(text, max(1, CASE WHEN instr(text, ?1) > 0 THEN instr(text, ?1)"
        " ELSE instr(lower(text), lower(?1)) END - 120), ?2) FROM archive WHERE id = ?3",
        (term, WINDOW, aid),
    ).fetchone()
    return r[0] if r else ""


def get_archive(conn: sqlite3.Connection, aid: int) -> dict[str, Any] | None:
    r = conn.execute(
        f"SELECT {_COLS}, a.text, a.truncated, a.uid, a.event_id, a.category FROM archive a WHERE a.id = ?", (aid,)
    ).fetchone()
    if not r:
        return None
    d = _row(r, 0.0)
    d.update(text=r[11], truncated=bool(r[12]), uid=r[13], event_id=r[14], category=r[15])
    return d


def sessions(conn: sqlite3.Connection, *, project: str | None = None, session: str | None = None,
             limit: int = 20) -> list[dict[str, Any]]:
    where, args = [], []
    if project is not None:
        where.append("project = ?")
        args.append(project)
    if session is not None:
        where.append("session = ?")
        args.append(session)
    w = " AND ".join(where) or "1"
    rows = conn.execute(
        f"SELECT session, project, cwd, transcript_path, first_ts, last_ts, events, phase, phase_since, model,"
        f" ended_ts, state FROM sessions WHERE {w} ORDER BY last_ts DESC LIMIT ?", (*args, limit)
    ).fetchall()
    keys = ("session", "project", "cwd", "transcript_path", "first_ts", "last_ts", "events", "phase",
            "phase_since", "model", "ended_ts", "state")
    return [dict(zip(keys, r, strict=True)) for r in rows]


def stats(conn: sqlite3.Connection) -> dict[str, int]:
    ev = conn.execute("SELECT coalesce(max(id), 0) FROM events").fetchone()[0]
    ar = conn.execute("SELECT count(*) FROM archive").fetchone()[0]
    return {"events": ev, "archive_items": ar}


def phase_switches(conn: sqlite3.Connection, *, project: str | None, session: str | None,
                   limit: int = 200) -> list[dict[str, Any]]:
    where, args = _filters(project, session, None, None, alias="p")
    rows = conn.execute(
        f"SELECT p.session, p.ts, p.from_phase, p.to_phase, p.cause, p.evidence FROM phase_switches p"
        f" WHERE {where} ORDER BY p.id DESC LIMIT ?", (*args, limit)).fetchall()
    keys = ("session", "ts", "from_phase", "to_phase", "cause", "evidence")
    return [dict(zip(keys, r, strict=True)) for r in reversed(rows)]


def items(conn: sqlite3.Connection, *, project: str | None, kind: str, status: str | None = "open",
          session: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
    """Facts (decision, constraint, pending) newest first; ``project=None`` means every project."""
    where, args = ["kind = ?"], [kind]
    if project is not None:
        where.append("project = ?")
        args.append(project)
    if status is not None:
        where.append("status = ?")
        args.append(status)
    if session is not None:
        where.append("session = ?")
        args.append(session)
    rows = conn.execute(
        f"SELECT id, session, text, ts, phase, status, archive_id FROM items WHERE {' AND '.join(where)}"
        f" ORDER BY id DESC LIMIT ?", (*args, limit)).fetchall()
    keys = ("id", "session", "text", "ts", "phase", "status", "archive_id")
    return [dict(zip(keys, r, strict=True)) for r in rows]


def count_items(conn: sqlite3.Connection, *, project: str, kind: str) -> int:
    return conn.execute("SELECT count(*) FROM items WHERE project = ? AND kind = ?", (project, kind)).fetchone()[0]
