"""Read queries. Each function takes a query-only connection from ``Readers``.

Rules:
- Reads are short: bounded LIMITs everywhere, no read holds a transaction past its function.
- User text reaches FTS5 only through ``fts_match_expression`` (every term quoted), so no query
  can raise an FTS syntax error.
- Bounded work per search, whatever the archive size: each index ranks only the newest
  ``RANK_WINDOW`` rows that match and pass the filters (FTS5 walks its doclist newest first and
  stops there), and the display columns are read for the returned hits only. Below that many
  matches the result is exactly "all matches ranked"; above it, older matches are reached by a
  more specific query. ``total`` is the number of matches, capped at ``TOTAL_CAP``.
- Substrings of non-CJK words the word index did not match come from the trigram index, read in
  rowid order within the newest ``TRI_SPAN`` ids and ordered newest first (no bm25: its IDF pass
  reads every match in the index, and FTS5 walks a long trigram phrase backwards slowly).
- 1–2 character CJK terms, which the trigram tokenizer cannot match, are found through it anyway:
  every occurrence followed by another character lies in a trigram that starts with the term, so
  one pass over that term range of the index (``fts5vocab`` 'instance') names every such row; an
  occurrence that ends a text has no such trigram, so the newest ``SHORT_SCAN`` ids are also
  scanned with ``instr()``. ``instr()`` confirms case (the index folds it) and any other short
  term. Without the trigram index, ``instr()`` scans the newest ``SCAN_CAP`` filtered rows.
- Ranking: FTS rank (bm25) first, then priority, then recency (1–2 character CJK terms: priority,
  then recency; substring matches: recency).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ..core.recall_query import fts_match_expression, needs_substring_fallback

SCAN_CAP = 200_000  # rows examined by a substring scan without an index, newest first
RANK_WINDOW = 300  # newest matching rows each index ranks
SHORT_SCAN = 1000  # newest ids scanned for a 1-2 character CJK term that ends a text
TRI_SPAN = 100_000  # ids (newest) the trigram substring fallback of non-CJK words looks at
TRI_CAP = 2000  # rows it keeps at most (the newest when the span held more)
TOTAL_CAP = 1000
WINDOW = 360
_VOCAB = "temp.ctxlifed_tri_vocab"


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


def _ranked_window(conn: sqlite3.Connection, table: str, expr: str, where: str, args: list[Any],
                   extra: str, extra_args: list[Any], min_id: int = 0) -> list[tuple[int, float, int]]:
    """(id, bm25, priority) of the newest RANK_WINDOW rows of ``table`` matching ``expr`` and the filters."""
    span = f" AND {table}.rowid >= {int(min_id)}" if min_id > 0 else ""
    return conn.execute(
        f"SELECT a.id, bm25({table}), a.priority FROM {table} JOIN archive a ON a.id = {table}.rowid"
        f" WHERE {table} MATCH ?{span} AND {where}{extra} ORDER BY {table}.rowid DESC LIMIT {RANK_WINDOW}",
        (expr, *args, *extra_args)).fetchall()


def _count(conn: sqlite3.Connection, table: str, expr: str, where: str, args: list[Any], extra: str,
           extra_args: list[Any], window: int) -> int:
    """Matches, capped at TOTAL_CAP: the window's size unless the window was full."""
    if window < RANK_WINDOW or window >= TOTAL_CAP:
        return min(window, TOTAL_CAP)
    return conn.execute(
        f"SELECT count(*) FROM (SELECT 1 FROM {table} JOIN archive a ON a.id = {table}.rowid"
        f" WHERE {table} MATCH ? AND {where}{extra} LIMIT {TOTAL_CAP})", (expr, *args, *extra_args)).fetchone()[0]


def _substring_window(conn: sqlite3.Connection, expr: str, where: str, args: list[Any], extra: str,
                      extra_args: list[Any]) -> list[int]:
    """Ids (newest first) among the newest TRI_SPAN ids whose text holds ``expr`` as a substring.

    Read in rowid order from a lower bound: FTS5 walks a long trigram phrase backwards slowly, and
    no bm25 (its IDF pass would read every match in the index)."""
    top = conn.execute("SELECT max(id) FROM archive").fetchone()[0] or 0
    span = TRI_SPAN
    while True:
        ids = [r[0] for r in conn.execute(
            f"SELECT a.id FROM archive_tri JOIN archive a ON a.id = archive_tri.rowid"
            f" WHERE archive_tri MATCH ? AND archive_tri.rowid >= ? AND {where}{extra} LIMIT {TRI_CAP + 1}",
            (expr, top - span + 1, *args, *extra_args))]
        if len(ids) <= TRI_CAP or span <= TRI_CAP:
            ids.sort(reverse=True)
            return ids[:TRI_CAP]
        span //= 8  # very common substring: look at fewer, newer rows


def _tri_docs(conn: sqlite3.Connection, prefix: str) -> list[int]:
    """Ids of the rows whose text holds a trigram starting with ``prefix`` (the index folds case),
    newest first: one pass over that term range of the index (``fts5vocab`` 'instance')."""
    sql = f"SELECT doc FROM {_VOCAB} WHERE term >= ? AND term < ?"
    bounds = (prefix, prefix + "\U0010ffff")
    try:
        docs = {r[0] for r in conn.execute(sql, bounds)}
    except sqlite3.OperationalError:
        # First use on this connection: a temp vocabulary table (readers are query_only; temp is
        # not the store, nothing is written to it).
        ro = conn.execute("PRAGMA query_only").fetchone()[0]
        try:
            if ro:
                conn.execute("PRAGMA query_only=0")
            conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {_VOCAB} USING fts5vocab(main, archive_tri, 'instance')")
        finally:
            if ro:
                conn.execute("PRAGMA query_only=1")
        docs = {r[0] for r in conn.execute(sql, bounds)}
    return sorted(docs, reverse=True)


def _short_candidates(conn: sqlite3.Connection, short: list[str], where: str, args: list[Any],
                      trigram: bool) -> list[tuple[int, int]]:
    """(id, priority) of rows holding every short CJK term, by priority then recency: the newest
    TOTAL_CAP such rows found through the trigram index, plus what a scan of the newest SHORT_SCAN
    ids finds (a term that ends a text); without the index, the newest SCAN_CAP filtered rows."""
    found: dict[int, int] = {}
    scan = SCAN_CAP
    if trigram:
        key = max(short, key=lambda t: (len(t), t))  # one term drives the index; all are confirmed
        # instr() confirms case (the index folds it) and the other terms; an uncased key needs none.
        confirm = [t for t in short if t is not key or t.lower() != t.upper()]
        extra = "".join(" AND instr(a.text, ?) > 0" for _ in confirm)
        ids = _tri_docs(conn, key.lower())
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            found.update(conn.execute(
                f"SELECT a.id, a.priority FROM archive a WHERE a.id IN ({','.join('?' * len(chunk))})"
                f" AND {where}{extra}", (*chunk, *args, *confirm)).fetchall())
            if len(found) >= TOTAL_CAP:
                break
        scan = SHORT_SCAN
    extra = "".join(" AND instr(a.text, ?) > 0" for _ in short)
    if trigram:  # the newest ids, whatever their project: bounded
        lo = (conn.execute("SELECT max(id) FROM archive").fetchone()[0] or 0) - scan + 1
    else:  # no index at all: the newest `scan` filtered rows, as before
        lo = conn.execute(f"SELECT min(id) FROM (SELECT a.id FROM archive a WHERE {where} ORDER BY a.id DESC"
                          f" LIMIT {scan})", args).fetchone()[0]
    if lo is not None:
        found.update(conn.execute(f"SELECT a.id, a.priority FROM archive a WHERE a.id >= ? AND {where}{extra}",
                                  (lo, *args, *short)).fetchall())
    return sorted(found.items(), key=lambda kv: (-kv[1], -kv[0]))


def search(conn: sqlite3.Connection, *, words: tuple[str, ...], phrases: tuple[str, ...] = (),
           project: str | None = None, session: str | None = None, phase: str | None = None,
           kinds: tuple[str, ...] | None = None, limit: int = 20, trigram: bool = True) -> tuple[list[dict[str, Any]], int]:
    """Ranked hits and a total (capped at TOTAL_CAP) for a parsed recall query."""
    limit = max(1, min(limit, 200))
    where, args = _filters(project, session, phase, kinds)
    terms = [t for t in (*words, *phrases) if t.strip()]
    if not terms:
        rows = conn.execute(
            f"SELECT {_COLS} FROM archive a WHERE {where} ORDER BY a.priority DESC, a.id DESC LIMIT ?",
            (*args, limit),
        ).fetchall()
        total = conn.execute(f"SELECT count(*) FROM (SELECT 1 FROM archive a WHERE {where} LIMIT {TOTAL_CAP})",
                             args).fetchone()[0]
        return [_row(r, 0.0) for r in rows], total

    short = [t for t in terms if needs_substring_fallback(t)]
    long_words = tuple(t for t in words if t.strip() and not needs_substring_fallback(t))
    long_phrases = tuple(t for t in phrases if t.strip() and not needs_substring_fallback(t))
    extra, extra_args = "", []
    for t in short:
        extra += " AND instr(a.text, ?) > 0"
        extra_args.append(t)

    scores: dict[int, float] = {}
    order: list[int] = []
    total = 0

    def take(ids_scores: list[tuple[int, float]]) -> None:
        for i, sc in ids_scores:
            if i not in scores:
                scores[i] = sc
                order.append(i)

    expr = fts_match_expression(long_words, long_phrases)
    if expr:
        long_terms = (*long_words, *long_phrases)
        cjk = any(_has_cjk(t) for t in long_terms)
        if not cjk:
            win = _ranked_window(conn, "archive_fts", expr, where, args, extra, extra_args)
            win.sort(key=lambda r: (r[1], -r[2], -r[0]))
            take([(r[0], 100.0 - r[1]) for r in win[:limit]])
            total = _count(conn, "archive_fts", expr, where, args, extra, extra_args, len(win))
        if trigram and len(order) < limit and all(len(t) >= 3 for t in long_terms):
            if cjk:  # the trigram index is the primary index for CJK: ranked like the word index
                win = _ranked_window(conn, "archive_tri", expr, where, args, extra, extra_args)
                win.sort(key=lambda r: (r[1], -r[0]))
                take([(r[0], 50.0 - r[1]) for r in win[: limit + len(order)]])
                total = max(total, _count(conn, "archive_tri", expr, where, args, extra, extra_args, len(win)))
            else:  # substrings of words the word index did not match: the newest rows, newest first
                ids = _substring_window(conn, expr, where, args, extra, extra_args)
                take([(i, 50.0) for i in ids[: limit + len(order)]])
                if not total:
                    total = min(len(ids), TOTAL_CAP)
        if len(order) < limit and (not trigram or any(len(t) < 3 for t in long_terms)):
            # Terms the indexes cannot serve (no trigram support, or short non-CJK pieces): substring scan.
            sub = " AND ".join(["instr(lower(a.text), lower(?)) > 0"] * len(long_terms))
            rows = conn.execute(
                f"SELECT a.id FROM (SELECT * FROM archive a WHERE {where} ORDER BY id DESC LIMIT {SCAN_CAP}) a"
                f" WHERE {sub}{extra} ORDER BY a.id DESC LIMIT ?",
                (*args, *long_terms, *extra_args, limit)).fetchall()
            take([(r[0], 10.0) for r in rows])
            total = max(total, len(order))
    elif short:
        cands = _short_candidates(conn, short, where, args, trigram)
        take([(i, 10.0) for i, _p in cands[:limit]])
        total = min(len(cands), TOTAL_CAP)
    else:  # nothing searchable (punctuation only): the newest rows by priority, as a listing
        rows = conn.execute(
            f"SELECT a.id FROM (SELECT * FROM archive a WHERE {where} ORDER BY id DESC LIMIT {SCAN_CAP}) a"
            f" ORDER BY a.priority DESC, a.id DESC LIMIT ?", (*args, limit)).fetchall()
        take([(r[0], 10.0) for r in rows])
        total = len(order)
    ids = order[:limit]
    got = {}
    if ids:
        marks = ",".join("?" * len(ids))
        got = {r[0]: r for r in conn.execute(f"SELECT {_COLS} FROM archive a WHERE a.id IN ({marks})", ids)}
    result = [_row(got[i], scores[i]) for i in ids if i in got]
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
    w, args = _filters(project, session, None, None, alias="sessions")
    rows = conn.execute(
        f"SELECT session, project, cwd, transcript_path, first_ts, last_ts, events, phase, phase_since, model,"
        f" ended_ts, state FROM sessions WHERE {w} ORDER BY last_ts DESC LIMIT ?", (*args, limit)
    ).fetchall()
    keys = ("session", "project", "cwd", "transcript_path", "first_ts", "last_ts", "events", "phase",
            "phase_since", "model", "ended_ts", "state")
    return [dict(zip(keys, r, strict=True)) for r in rows]


def compactions(conn: sqlite3.Connection, *, session: str | None, project: str | None,
                limit: int) -> list[tuple]:
    """(id, session, project, report blob) of compaction reports, newest first."""
    w, args = _filters(project, session, None, None, alias="compactions")
    return conn.execute(f"SELECT id, session, project, report FROM compactions WHERE {w} ORDER BY id DESC LIMIT ?",
                        (*args, limit)).fetchall()


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
