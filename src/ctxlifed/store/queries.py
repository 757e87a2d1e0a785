"""Read queries. Each function takes a query-only connection from ``Readers``.

Rules:
- Reads are short: bounded LIMITs everywhere, no read holds a transaction past its function.
- An index joined to ``archive`` is the outer loop (``CROSS JOIN``: SQLite keeps that order): a
  daemon's store has no ``ANALYZE`` statistics, and without them the planner takes ``project = ?``
  for a selective filter, loops over every row of the project and looks each one up in the index
  (one MATCH per row). The bounds above (windows, spans, LIMITs) are bounds of the index walk.
- A search takes at most ``MAX_TERMS`` words and phrases (each costs index walks): more raises
  :class:`~.db.QueryTooBroadError`, as does running past its time budget (``Readers.search``).
- User text reaches FTS5 only through ``fts_query.py`` (``fts_match_expression`` / ``fts_term_expression``: every
  term quoted; an identifier term is an OR group, so terms are joined with an explicit AND), so no
  query can raise an FTS syntax error.
- Bounded work per search, whatever the archive size: each index ranks only the newest
  ``RANK_WINDOW`` rows that match and pass the filters (FTS5 walks its doclist newest first and
  stops there); ranking reads kind, tool and summary of at most that many candidates, the display
  columns are read for the returned hits only. Below that many
  matches the result is exactly "all matches ranked"; above it, older matches are reached by a
  more specific query. ``total`` is the number of matches, capped at ``TOTAL_CAP`` (counted on from
  the window's oldest id, not again from the top).
- Word index (schema 0006, 0011): user terms match the ``text``, ``summary`` and ``idents`` (words
  of mixed-case identifiers) columns only, an identifier term also as its words
  (``fts_term_expression``); the
  ``tags`` column holds one token per project, session, phase and kind (``tag_token``), so filters
  are intersected inside the index instead of by visiting every term match. A filter held by more
  than ``TAG_DENSE`` of the newest rows is left to the join (decoding its long doclist costs more
  than it saves), unless it is one of several dense filters and the only kind there is (together
  they may hold few rows: the index intersects them). The join keeps checking every filter either way.
- bm25 and its cost: FTS5's ``bm25()`` first reads every match of every phrase in the whole index
  (its IDF), whatever the LIMIT. So each term's document frequency is first read from at most
  ``DF_WALK`` of its newest matches (exact below that, else estimated from the id span walked):
  * all terms rarer than ``DF_WALK``: ``bm25()`` on the window, filters by join (bounded: fewer
    than DF_WALK matches per term);
  * else, if the matches bm25 would read (a phrase's counted ``PHRASE_COST`` times: positions) stay
    within ``BM25_BUDGET``: with a sparse filter, the window from the index with its tags, then
    ``bm25()`` for those rows only (``+rowid IN``, with the terms alone: a tag in the MATCH would
    add its whole doclist to the IDF pass); without one, ``bm25()`` on the window in the same
    statement, filters by join (the rows that pass are the window: nothing is read twice);
  * else (very common terms): bm25 computed here for the window rows, with FTS5's formula and
    parameters: term frequencies from ``highlight()`` (a span of a multi-term query is credited to
    the term it shares the longest prefixes with), document lengths from the index's docsize
    records, IDF from the estimated frequency. The order equals ``bm25()``'s for
    one term and differs only through the estimated IDF weights for several.
  Document lengths (``bm25()``'s and the computed ones alike) include the four tag tokens (≈3% of
  a mean row): scores move a little against schema 0005; rows of near-equal score may swap.
- A non-CJK term the word index did not match goes to the trigram index (substrings) unless the
  word index proves it absent: an ASCII term's inner words (all but a first/last word it may cut
  out of a longer one) are whole tokens of any text holding it, so no row with all of them means
  no row holds the term.
- Substrings of non-CJK words the word index did not match come from the trigram index, read in
  rowid order within the newest ``TRI_SPAN`` ids and ordered newest first (no bm25: its IDF pass
  reads every match in the index, and FTS5 walks a long trigram phrase backwards slowly).
- Rows still waiting for the trigram index (``backlog.py``: indexed after the reply, when the
  writer is idle) are found by a case-folding substring scan over that backlog (``LIKE``,
  ``fts_query.substring_pattern``) and come first (they are the newest), so a row is findable by
  substring the moment its event is acknowledged.
- 1–2 character CJK terms, which the trigram tokenizer cannot match, are found through it anyway:
  every occurrence followed by another character lies in a trigram that starts with the term, so
  one pass over that term range of the index (``fts5vocab`` 'instance') names every such row; an
  occurrence that ends a text has no such trigram, so the newest ``SHORT_SCAN`` ids are also
  scanned with ``instr()``. ``instr()`` confirms case (the index folds it) and any other short
  term. Without the trigram index, the newest ``SCAN_CAP`` filtered rows are scanned (``instr()``
  for short CJK terms, the case-folding ``LIKE`` scan for the others).
- ``type:error`` (kinds holding "error" but not "test_result") also matches failed test runs:
  test_result rows whose summary opens ``[test_result FAILED]`` (``core.summarize``'s header).
- Ranking (``_rank``, rules in ``core/recall_rank.py``): each path's candidates (the word index's
  window, the trigram window, rows waiting for the trigram index, substring and short CJK matches)
  are ordered by text relevance (-bm25; 1 where a path has none) times the kind weight, echoes
  after every content row, a superseded decision just below its replacement, then priority, then
  recency. Bounded: a hit is classified from its kind, tool and summary (never its text, unless it
  has no summary), read by the window statement that found it (it joins the row anyway; other
  paths read them in one statement). The kind weights order every candidate before any is
  classified as an echo; candidates are classified in that order (ties cut by priority, then
  recency) until ``2 * limit`` content rows are found, and the rest are left out: a window of
  tied scores (a burst of like prompts) costs ``2 * limit`` classifications, not ``RANK_WINDOW``.
  A path without relevance ranks its first ``RANK_FLAT``. Echoes told by a lookup (assistant text of a recall turn, facts found in an echo)
  are looked up for the best ``limit`` content rows, together (two statements a round), until all
  were (at most ``RANK_LOOKUPS`` rows); supersession is checked for the best ``2 * limit``
  decisions against the newest ``LATER_DECISIONS`` later ones of their project. Across paths,
  echoes also come last. A superseded hit carries ``superseded_by`` and its summary opens
  ``(superseded by #N)``.
"""

from __future__ import annotations

import math
import os
import re
import sqlite3
from typing import Any

from ..core import recall_rank as RR
from .fts_query import CONTAINS_SQL, fts_match_expression, fts_term_expression, needs_substring_fallback, substring_pattern
from . import backlog
from .db import QueryTooBroadError

MAX_TERMS = 32  # words and phrases one search takes
SCAN_CAP = 200_000  # rows examined by a substring scan without an index, newest first
RANK_WINDOW = 300  # newest matching rows each index ranks
SHORT_SCAN = 1000  # newest ids scanned for a 1-2 character CJK term that ends a text
TRI_SPAN = 100_000  # ids (newest) the trigram substring fallback of non-CJK words looks at
TRI_CAP = 2000  # rows it keeps at most (the newest when the span held more)
TOTAL_CAP = 1000
IN_CHUNK = 500  # ids bound in one ``IN (...)`` statement (well under SQLite's host parameter limit)
DF_WALK = 500  # matches of one term read (newest first) to know or estimate its document frequency
TAG_DENSE = 0.25  # a filter held by more of the newest rows than this is applied by a join, not a tag
BM25_BUDGET = 80_000  # term matches FTS5's bm25() may read for its IDF (see bench/RESULTS.md; a phrase's count PHRASE_COST
PHRASE_COST = 8  # times: its matches are checked against positions)
K1, B = 1.2, 0.75  # bm25 parameters (FTS5's)
WINDOW = 360
_WORD_COLS = "text summary idents"  # the word index's columns user terms match (not ``tags``)
_VOCAB = "temp.ctxlifed_tri_vocab"
Feats = tuple  # (kind, tool, project, head, priority) of a ranking candidate (``_FEATS``)


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
        cond = f"{alias}.kind IN ({','.join('?' * len(kinds))})"
        if _with_red_tests(kinds):  # a failed test run is an error to the user (its summary says so)
            cond = f"({cond} OR ({alias}.kind = 'test_result' AND {alias}.summary LIKE '[test_result FAILED]%'))"
        sql.append(cond)
        args.extend(kinds)
    return (" AND ".join(sql) or "1"), args


def _with_red_tests(kinds: tuple[str, ...]) -> bool:
    """``type:error`` also holds failed test runs; ``type:test`` stays the narrow form."""
    return "error" in kinds and "test_result" not in kinds


def _has_cjk(s: str) -> bool:
    return any("\u3040" <= ch <= "\u9fff" or "\uac00" <= ch <= "\ud7af" or "\uf900" <= ch <= "\ufaff" for ch in s)


_COLS = "a.id, a.session, a.project, a.ts, a.kind, a.phase, a.tool, a.file_path, a.summary, a.priority, a.chars"


def _row(r: sqlite3.Row | tuple, score: float) -> dict[str, Any]:
    return {
        "id": r[0], "session": r[1], "project": r[2], "ts": r[3], "kind": r[4], "phase": r[5],
        "tool": r[6], "file_path": r[7], "summary": r[8], "priority": r[9], "chars": r[10], "score": score,
    }


def _ranked_window(conn: sqlite3.Connection, table: str, expr: str, where: str, args: list[Any],
                   extra: str, extra_args: list[Any], min_id: int = 0) -> list[tuple[int, float, int, Feats]]:
    """(id, bm25, priority, features) of the newest RANK_WINDOW rows of ``table`` matching ``expr``
    and the filters."""
    span = f" AND {table}.rowid >= {int(min_id)}" if min_id > 0 else ""
    return [(r[0], r[1], r[2 + _FEAT_PRIORITY], r[2:]) for r in conn.execute(
        f"SELECT a.id, bm25({table}), {_FEATS} FROM {table} CROSS JOIN archive a ON a.id = {table}.rowid"
        f" WHERE {table} MATCH ?{span} AND {where}{extra} ORDER BY {table}.rowid DESC LIMIT {RANK_WINDOW}",
        (expr, *args, *extra_args))]


def tag_token(letter: str, value: str) -> str | None:
    """The word index's filter tag for a column value (schema 0006 builds the same in SQL)."""
    try:
        return letter + value.encode("utf-8").hex() + "0"
    except UnicodeEncodeError:
        return None


def _walk(conn: sqlite3.Connection, match: str) -> tuple[int, int | None]:
    """(matches, lowest id) among the newest DF_WALK matches of ``match`` in the word index."""
    return conn.execute(
        f"SELECT count(*), min(rowid) FROM (SELECT rowid FROM archive_fts WHERE archive_fts MATCH ?"
        f" ORDER BY rowid DESC LIMIT {DF_WALK})", (match,)).fetchone()


def _density(cnt: int, low: int | None, top: int) -> float:
    """Share of the newest ids that match, from a walk (0 when the walk held every match)."""
    if cnt < DF_WALK or low is None:
        return 0.0
    return DF_WALK / max(top - low + 1, DF_WALK)


def _tag_expression(conn: sqlite3.Connection, top: int, project: str | None, session: str | None,
                    phase: str | None, kinds: tuple[str, ...] | None) -> tuple[str, bool]:
    """An FTS5 expression over the ``tags`` column for the sparse filters, and whether it applies
    every filter. A filter held by more than TAG_DENSE of the newest rows stays a join filter: the
    index would decode its long doclist for nothing."""
    parts: list[str] = []
    covered = True
    wanted: list[list[str | None]] = []
    for letter, value in (("p", project), ("s", session), ("h", phase)):
        if value is not None:
            wanted.append([tag_token(letter, value)])
    if kinds:
        wanted.append([tag_token("k", k) for k in (*kinds, "test_result") if k in kinds or _with_red_tests(kinds)])
    dense: list[str] = []
    for toks in wanted:
        if None in toks:
            covered = False  # no token for it: the join's
            continue
        alt = " OR ".join(f'"{t}"' for t in toks)
        alt = f"({alt})" if len(toks) > 1 else alt
        if sum(_density(*_walk(conn, f'tags : "{t}"'), top) for t in toks) > TAG_DENSE:
            dense.append(alt)
        else:
            parts.append(alt)
    if len(dense) > 1 and not parts:
        parts = dense  # dense filters together may select few rows: the index intersects them
    elif dense:
        covered = False  # one dense filter (the join reads at most 1 / TAG_DENSE matches per row it keeps)
    return (f"tags : ({' AND '.join(parts)})" if parts else ""), covered


def _varints(b: bytes) -> list[int]:
    """SQLite varints (FTS5's docsize and averages records)."""
    out, i, n = [], 0, len(b)
    while i < n:
        v = 0
        for j in range(9):
            c = b[i]
            i += 1
            if j == 8:
                v = (v << 8) | c
                break
            v = (v << 7) | (c & 0x7F)
            if not c & 0x80:
                break
        out.append(v)
    return out


def _length(sz: bytes) -> int:
    """Tokens in a row: the sum of its docsize record (one varint per column; values < 2**56)."""
    total = v = 0
    for c in sz:
        v = (v << 7) | (c & 0x7F)
        if c < 0x80:
            total += v
            v = 0
    return total


_SPAN = re.compile("\x01(.*?)\x02", re.S)
_TOKEN = re.compile(r"\w+")
_WORD = re.compile(r"[^\W_]+")  # roughly a unicode61 token: a term of several is a phrase for FTS5


def _tokens(s: str) -> list[str]:
    return _TOKEN.findall(s.lower())


def _attribute(span: str, term_tokens: list[list[str]]) -> int:
    """Which term a highlighted span is an instance of: same token count, then the longest shared
    prefixes (the index stems, so "locking" is an instance of "locked")."""
    st = _tokens(span)
    best, best_key = 0, (-1, -1)
    for i, tt in enumerate(term_tokens):
        shared = sum(len(os.path.commonprefix((a, b))) for a, b in zip(st, tt))
        key = (len(st) == len(tt), shared)
        if key > best_key:
            best, best_key = i, key
    return best


def _doc_freqs(conn: sqlite3.Connection, term_exprs: list[str], top: int) -> list[tuple[float, bool]]:
    """Per term (document frequency in the word index, exact?). At most DF_WALK matches of each
    term are read, newest first: fewer is the exact count; a full walk estimates the frequency from
    the id span it covered (ids are dense)."""
    out = []
    for te in term_exprs:
        cnt, low = _walk(conn, f"{{{_WORD_COLS}}} : ({te})")
        if cnt < DF_WALK:
            out.append((float(cnt), True))
        else:
            out.append((_density(cnt, low, top) * top, False))
    return out


def _word_window(conn: sqlite3.Connection, terms: tuple[str, ...], filters: tuple[Any, ...], where: str,
                 args: list[Any], extra: str, extra_args: list[Any]) -> tuple[list[tuple[int, float, int, Feats]], str, bool]:
    """(id, bm25, priority, features) of the newest RANK_WINDOW rows of the word index matching every term and
    the filters; the MATCH expression used; whether it applies every filter itself (tags)."""
    term_exprs = list(dict.fromkeys(e for e in (fts_term_expression(t) for t in terms) if e))
    if not term_exprs:
        return [], "", False
    words = f"{{{_WORD_COLS}}} : ({' AND '.join(term_exprs)})"  # AND: implicit only between strings
    top = conn.execute("SELECT max(rowid) FROM archive_fts_docsize").fetchone()[0] or 0
    dfs = _doc_freqs(conn, term_exprs, top)
    if all(exact for _df, exact in dfs):
        # Rare terms: FTS5's bm25() reads at most DF_WALK matches per term for its IDF, and the
        # filters are checked on at most that many rows: exact ranking, bounded work.
        return _ranked_window(conn, "archive_fts", words, where, args, extra, extra_args), words, False
    tags, covered = _tag_expression(conn, top, *filters)
    match = f"{words} AND {tags}" if tags else words
    idf_cost = sum(df * (PHRASE_COST if len(_WORD.findall(te)) > 1 else 1)
                   for (df, _exact), te in zip(dfs, term_exprs, strict=True))
    if idf_cost <= BM25_BUDGET and not tags:
        # Common, not very common, no sparse filter: bm25() on the window, filters by join.
        return _ranked_window(conn, "archive_fts", words, where, args, extra, extra_args), words, False
    if idf_cost <= BM25_BUDGET:
        # Common, not very common, a sparse filter: the window from the index (tags), then FTS5's
        # bm25() over that id range (its IDF pass reads every match of the terms: within budget).
        win = conn.execute(
            f"SELECT a.id, {_FEATS} FROM archive_fts CROSS JOIN archive a ON a.id = archive_fts.rowid"
            f" WHERE archive_fts MATCH ? AND {where}{extra} ORDER BY archive_fts.rowid DESC LIMIT {RANK_WINDOW}",
            (match, *args, *extra_args)).fetchall()
        if not win:
            return [], match, covered
        got = {r[0]: r for r in win}
        ids = ",".join(str(int(r[0])) for r in win)  # `+rowid`: a filter (bm25 for these rows only), not a lookup
        ranked = conn.execute(
            "SELECT rowid, bm25(archive_fts) FROM archive_fts WHERE archive_fts MATCH ? AND rowid BETWEEN ? AND ?"
            f" AND +rowid IN ({ids})", (words, win[-1][0], win[0][0])).fetchall()
        return [(i, sc, got[i][1 + _FEAT_PRIORITY], got[i][1:]) for i, sc in ranked if i in got], match, covered
    # Very common terms: bm25 computed here over the window (see the module rules).
    rows = conn.execute(
        "SELECT a.id, highlight(archive_fts, 0, char(1), char(2)),"
        " highlight(archive_fts, 1, char(1), char(2)) || ' ' || highlight(archive_fts, 2, char(1), char(2)),"
        f" d.sz, {_FEATS} FROM archive_fts CROSS JOIN archive a ON a.id = archive_fts.rowid"
        " LEFT JOIN archive_fts_docsize d ON d.id = archive_fts.rowid"
        f" WHERE archive_fts MATCH ? AND {where}{extra} ORDER BY archive_fts.rowid DESC LIMIT {RANK_WINDOW}",
        (match, *args, *extra_args)).fetchall()
    if not rows:
        return [], match, covered
    avg = _varints(conn.execute("SELECT block FROM archive_fts_data WHERE id = 1").fetchone()[0])
    n_rows = max(avg[0], 1)
    avgdl = max(sum(avg[1:]) / n_rows, 1.0)  # every column, as bm25() counts
    idf = [max(math.log((n_rows - df + 0.5) / (df + 0.5)), 1e-6) for df, _exact in dfs]
    a_, b_ = K1 * (1 - B), K1 * B / avgdl
    out = []
    if len(idf) == 1:
        w = idf[0] * (K1 + 1)
        for aid, h0, h1, sz, *feats in rows:
            f = h0.count("\x01") + h1.count("\x01")
            out.append((aid, -w * f / (f + a_ + b_ * (_length(sz) if sz else avgdl)), feats[_FEAT_PRIORITY],
                        tuple(feats)))
        return out, match, covered
    term_tokens = [_tokens(t) for t in term_exprs]
    seen: dict[str, int] = {}
    for aid, h0, h1, sz, *feats in rows:
        tf = [0] * len(idf)
        for span in (*_SPAN.findall(h0), *_SPAN.findall(h1)):
            i = seen.get(span)
            if i is None:
                i = seen[span] = _attribute(span, term_tokens)
            tf[i] += 1
        norm = a_ + b_ * (_length(sz) if sz else avgdl)
        score = sum(w * (f * (K1 + 1)) / (f + norm) for w, f in zip(idf, tf, strict=True))
        out.append((aid, -score, feats[_FEAT_PRIORITY], tuple(feats)))
    return out, match, covered


def _count(conn: sqlite3.Connection, table: str, expr: str, where: str, args: list[Any], extra: str,
           extra_args: list[Any], window: int, *, join: bool = True, below: int = 0) -> int:
    """Matches, capped at TOTAL_CAP: the window's size unless the window was full. ``join=False``
    when ``expr`` itself applies every filter (the word index's tags); ``below`` > 0: the window
    is every match with an id from ``below`` on, so only the older ones are counted."""
    if window < RANK_WINDOW or window >= TOTAL_CAP:
        return min(window, TOTAL_CAP)
    span, base, cap = "", 0, TOTAL_CAP
    if below > 0:
        span, base, cap = f" AND {table}.rowid < {int(below)}", window, TOTAL_CAP - window
    if not join:
        return base + conn.execute(f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {table} MATCH ?{span}"
                                   f" LIMIT {cap})", (expr,)).fetchone()[0]
    return base + conn.execute(
        f"SELECT count(*) FROM (SELECT 1 FROM {table} CROSS JOIN archive a ON a.id = {table}.rowid"
        f" WHERE {table} MATCH ?{span} AND {where}{extra} LIMIT {cap})", (expr, *args, *extra_args)).fetchone()[0]


# --------------------------------------------------------------------------- ranking (see the module rules)

RANK_FLAT = 100  # candidates of a path without text relevance (substrings, short CJK) that are ranked
RANK_LOOKUPS = 40  # assistant / fact hits checked for an echo by a lookup, best first
TURN_SPAN = 200  # ids before an assistant row searched for the prompt or Bash call of its turn
FACT_SPAN = 64  # ids before a fact searched for the prompt / assistant text it was found in
LATER_DECISIONS = 50  # newest later decisions of a project a decision hit is compared with
HEAD_CHARS = 600  # start of a text read to classify a hit that has no summary
_FACTS = ("decision", "constraint", "pending")


def _head(alias: str) -> str:
    """A row's text for classifying it: its summary (``[kind] Tool: command``, then the opening or
    the facts; short, and stored before the text, so no overflow page is read), else the text's start."""
    return f"CASE WHEN {alias}.summary != '' THEN {alias}.summary ELSE substr({alias}.text, 1, {HEAD_CHARS}) END"


# What ranking reads of a candidate (``Feats``), selected with it by the window statements (they join
# the row anyway) or by ``_features``.
_FEATS = f"a.kind, a.tool, a.project, {_head('a')}, a.priority"
_FEAT_PRIORITY = 4  # the priority's place in it


def _marks(n: int) -> str:
    return ",".join("?" * n)


def _features(conn: sqlite3.Connection, ids: list[int]) -> dict[int, tuple]:
    """id -> (kind, tool, project, head, priority) of the given rows (at most ``IN_CHUNK``)."""
    return {r[0]: r[1:] for r in conn.execute(
        f"SELECT a.id, {_FEATS} FROM archive a WHERE a.id IN ({_marks(len(ids))})", ids)}


def _echo_lookups(conn: sqlite3.Connection, rows: list[tuple[int, str]]) -> dict[int, bool]:
    """id -> echo? for (id, kind) assistant and fact rows: assistant text answering a turn that
    recalled (the nearest prompt or Bash call before it in its session, within TURN_SPAN ids, is a
    recall), a fact found in an echo (the nearest prompt or assistant row of its event, within
    FACT_SPAN ids). Two statements whatever the number of rows."""
    facts = [i for i, k in rows if k in _FACTS]
    source: dict[int, int | None] = {}
    if facts:
        source = dict(conn.execute(
            f"SELECT a.id, (SELECT s.id FROM archive s WHERE s.session = a.session AND s.id < a.id"
            f" AND s.id >= a.id - {FACT_SPAN} AND s.event_id = a.event_id AND s.kind IN ('prompt', 'assistant')"
            f" ORDER BY s.id DESC LIMIT 1) FROM archive a WHERE a.id IN ({_marks(len(facts))})", facts))
    look = sorted({i for i, k in rows if k == "assistant"} | {v for v in source.values() if v})
    info: dict[int, tuple] = {}
    if look:
        info = {r[0]: r[1:] for r in conn.execute(
            f"SELECT a.id, a.kind, a.tool, {_head('a')}, CASE WHEN a.kind = 'assistant' THEN"
            f" (SELECT p.kind || char(1) || coalesce(p.tool, '') || char(1) || {_head('p')} FROM archive p"
            f" WHERE p.session = a.session AND p.id < a.id AND p.id >= a.id - {TURN_SPAN}"
            f" AND (p.kind = 'prompt' OR p.tool = 'Bash') ORDER BY p.id DESC LIMIT 1) END"
            f" FROM archive a WHERE a.id IN ({_marks(len(look))})", look)}

    def echo(i: int | None) -> bool:
        if i is None or i not in info:
            return False
        kind, tool, head, turn = info[i]
        if RR.is_echo(kind, tool, head or ""):
            return True
        if not turn:
            return False
        pk, pt, ph = turn.split("\x01", 2)
        return RR.is_recall_text(pk, pt or None, ph)

    return {i: echo(i) if k == "assistant" else echo(source.get(i)) for i, k in rows}


def _superseding(conn: sqlite3.Connection, decisions: list[tuple[int, str, str]]) -> dict[int, int]:
    """old id -> id of the later decision of its project that supersedes it, for the given
    (id, project, text) decision hits. Later decisions found in an echo supersede nothing."""
    out: dict[int, int] = {}
    by_project: dict[str, list[tuple[int, str]]] = {}
    for aid, project, text in decisions:
        by_project.setdefault(project, []).append((aid, text))
    for project, olds in by_project.items():
        later = conn.execute(
            "SELECT a.id, a.text FROM archive a WHERE a.project = ? AND a.kind = 'decision'"
            f" AND a.id > ? ORDER BY a.id DESC LIMIT {LATER_DECISIONS}", (project, min(i for i, _t in olds))).fetchall()
        topics = [(lid, RR.topic_words(lt)) for lid, lt in reversed(later)]  # oldest first
        found = {aid: [lid for lid, new in topics if lid > aid and RR.supersedes(RR.topic_words(text), new)]
                 for aid, text in olds}
        echo = _echo_lookups(conn, [(i, "decision") for i in sorted({i for ls in found.values() for i in ls})])
        for aid, lids in found.items():
            lid = next((i for i in lids if not echo.get(i)), None)  # the first later one that replaced it
            if lid is not None:
                out[aid] = lid
    return out


def _rank(conn: sqlite3.Connection, rows: list[tuple], limit: int, base: float,
          notes: dict[int, dict[str, Any]]) -> list[tuple[int, float]]:
    """(id, score) best first for (id, text relevance >= 0, priority or None: the stored one[,
    features]) candidates: relevance times the kind weight, echoes after all content, a superseded
    decision below its replacement, then priority, then recency. Marks echoes and superseded
    decisions in ``notes``. The weights come from the kinds (read with the candidates when the
    path's statement did not: ``_features``), so every candidate's place is known before any is
    classified; candidates are then classified (echo or not) in that order until ``2 * limit``
    content rows are found (ties are cut by priority and recency, not by classifying them all):
    the rest cannot rank above those and are left out."""
    if not rows:
        return []
    missing = [r[0] for r in rows if len(r) < 4 or r[3] is None]
    fetched = {}
    for i in range(0, len(missing), IN_CHUNK):
        fetched.update(_features(conn, missing[i:i + IN_CHUNK]))
    cand: list[list[Any]] = []  # [id, score, priority, echo, features, echo known]
    seen: set[int] = set()
    for r in rows:
        aid, rel, prio = r[0], r[1], r[2]
        f = r[3] if len(r) > 3 and r[3] is not None else fetched.get(aid)
        if f is None or aid in seen:
            continue
        seen.add(aid)
        kind, _tool, _project, head, stored = f
        cand.append([aid, rel * RR.weight(kind, head or ""), stored if prio is None else prio, None, f, False])
    key = lambda c: (-c[1], -c[2], -c[0])  # noqa: E731 - the order of content rows (and of echoes)
    cand.sort(key=key)
    want = 2 * limit  # supersession looks at the best 2 * limit
    content: list[list[Any]] = []
    echoes: list[list[Any]] = []
    looked = done = 0
    while True:
        while done < len(cand) and len(content) < want:
            c = cand[done]
            done += 1
            kind, tool, _project, head, _stored = c[4]
            c[3] = RR.is_echo(kind, tool, head or "")
            c[5] = kind != "assistant" and kind not in _FACTS
            (echoes if c[3] else content).append(c)
        # Echoes that need a lookup (assistant text of a recall turn, facts found in echoes): the best
        # `limit` content rows are checked, together, until they all were (rows below cannot pass them).
        todo = [c for c in content[:limit] if not c[5]][: max(0, RANK_LOOKUPS - looked)]
        if not todo:
            break
        looked += len(todo)
        echo = _echo_lookups(conn, [(c[0], c[4][0]) for c in todo])
        for c in todo:
            c[3], c[5] = echo[c[0]], True
        if any(c[3] for c in todo):
            echoes.extend(c for c in content if c[3])
            content = [c for c in content if not c[3]]
    echoes.sort(key=key)
    cand = content + echoes

    def order() -> None:
        cand.sort(key=lambda c: (c[3], -c[1], -c[2], -c[0]))

    decisions = [c for c in cand[: 2 * limit] if not c[3] and c[4][0] == "decision"]
    if decisions:
        texts = dict(conn.execute(f"SELECT id, text FROM archive WHERE id IN ({_marks(len(decisions))})",
                                  [c[0] for c in decisions]).fetchall())
        sup = _superseding(conn, [(c[0], c[4][2], texts.get(c[0], "")) for c in decisions])
        score = {c[0]: c for c in cand}
        for c in sorted((c for c in decisions if c[0] in sup), key=lambda c: -c[0]):
            new = score.get(sup[c[0]])
            c[1] /= RR.FACT_WEIGHT  # a superseded decision weighs as chatter
            if new is not None and not new[3]:
                c[1] = min(c[1], new[1] - 1e-6)
            notes.setdefault(c[0], {})["superseded_by"] = sup[c[0]]
        order()
    for c in cand:
        if c[3]:
            notes.setdefault(c[0], {})["echo"] = True
    return [(c[0], (0.0 if c[3] else base) + c[1]) for c in cand]


_ASCII_WORD = re.compile(r"[A-Za-z0-9]+")


def _inner_words(term: str) -> list[str]:
    """Words of an ASCII ``term`` that any text holding it as a substring holds as whole tokens of
    the word index: all but a first/last word the term may cut out of a longer one."""
    if not term.isascii():
        return []
    words = _ASCII_WORD.findall(term)
    if words and term[:1].isalnum():
        words = words[1:]
    if words and term[-1:].isalnum():
        words = words[:-1]
    return words


def _no_substring_match(conn: sqlite3.Connection, terms: tuple[str, ...], project: str | None,
                        session: str | None) -> bool:
    """True when the word index proves that no row (of the project / session) holds every term as
    a substring: no row has all their inner words. Token lookups, no scan."""
    inner = list(dict.fromkeys(w.lower() for t in terms for w in _inner_words(t)))
    if not inner:
        return False
    toks = [t for t in (project is not None and tag_token("p", project),
                        session is not None and tag_token("s", session)) if t]
    match = f"{{{_WORD_COLS}}} : ({fts_match_expression(tuple(inner), ())})"
    if toks:
        match += " AND tags : (" + " AND ".join(f'"{t}"' for t in toks) + ")"
    return conn.execute("SELECT 1 FROM archive_fts WHERE archive_fts MATCH ? LIMIT 1", (match,)).fetchone() is None


def _substring_window(conn: sqlite3.Connection, expr: str, where: str, args: list[Any], extra: str,
                      extra_args: list[Any]) -> list[int]:
    """Ids (newest first) among the newest TRI_SPAN ids whose text holds ``expr`` as a substring.

    Read in rowid order from a lower bound: FTS5 walks a long trigram phrase backwards slowly, and
    no bm25 (its IDF pass would read every match in the index)."""
    top = conn.execute("SELECT max(id) FROM archive").fetchone()[0] or 0
    span = TRI_SPAN
    while True:
        ids = [r[0] for r in conn.execute(
            f"SELECT a.id FROM archive_tri CROSS JOIN archive a ON a.id = archive_tri.rowid"
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
        for i in range(0, len(ids), IN_CHUNK):
            chunk = ids[i:i + IN_CHUNK]
            found.update(conn.execute(
                f"SELECT a.id, a.priority FROM archive a WHERE a.id IN ({','.join('?' * len(chunk))})"
                f" AND {where}{extra}", (*chunk, *args, *confirm)).fetchall())
            if len(found) >= TOTAL_CAP:
                break
        scan = SHORT_SCAN
    extra = "".join(" AND instr(a.text, ?) > 0" for _ in short)
    if trigram:  # rows still waiting for the trigram index (backlog.py), then the newest ids, whatever
        # their project: bounded
        pend = backlog.pending_matches(conn, tuple(short), where, args, extra, short, TOTAL_CAP)
        if pend:
            found.update(conn.execute(f"SELECT id, priority FROM archive WHERE id IN ({','.join('?' * len(pend))})",
                                      pend).fetchall())
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
    if len(terms) > MAX_TERMS:
        raise QueryTooBroadError(f"the query has {len(terms)} terms; a search takes at most {MAX_TERMS}",
                                 reason="terms", limit=MAX_TERMS)
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
    notes: dict[int, dict[str, Any]] = {}  # echo / superseded_by, from _rank
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
            win, match, covered = _word_window(conn, long_terms, (project, session, phase, kinds), where, args,
                                               extra, extra_args)
            take(_rank(conn, [(i, -bm, p, f) for i, bm, p, f in win], limit, 100.0, notes)[:limit])
            if match:
                total = _count(conn, "archive_fts", match, where, args, extra, extra_args, len(win),
                               join=bool(extra) or not covered, below=min(r[0] for r in win) if win else 0)
        if trigram and len(order) < limit and all(len(t) >= 3 for t in long_terms):
            # Rows not in the trigram index yet (backlog.py): the newest, so first, by substring.
            pend = backlog.pending_matches(conn, long_terms, where, args, extra, extra_args, limit)
            take(_rank(conn, [(i, 1.0, None) for i in pend], limit, 50.0, notes))
            if cjk:  # the trigram index is the primary index for CJK: ranked like the word index
                win = _ranked_window(conn, "archive_tri", expr, where, args, extra, extra_args)
                take(_rank(conn, [(i, -bm, p, f) for i, bm, p, f in win], limit, 50.0, notes)[: limit + len(order)])
                total = max(total, len(pend) + _count(conn, "archive_tri", expr, where, args, extra, extra_args,
                                                      len(win)))
            elif pend or not _no_substring_match(conn, long_terms, project, session):
                # substrings of words the word index did not match: the newest rows, newest first
                ids = _substring_window(conn, expr, where, args, extra, extra_args)
                take(_rank(conn, [(i, 1.0, None) for i in ids[:RANK_FLAT]], limit, 50.0,
                           notes)[: limit + len(order)])
                if not total:
                    total = min(len(pend) + len(ids), TOTAL_CAP)
        if len(order) < limit and (not trigram or any(len(t) < 3 for t in long_terms)):
            # Terms the indexes cannot serve (no trigram support, or short non-CJK pieces): substring scan.
            sub = " AND ".join([CONTAINS_SQL] * len(long_terms))
            rows = conn.execute(
                f"SELECT a.id FROM (SELECT * FROM archive a WHERE {where} ORDER BY id DESC LIMIT {SCAN_CAP}) a"
                f" WHERE {sub}{extra} ORDER BY a.id DESC LIMIT ?",
                (*args, *map(substring_pattern, long_terms), *extra_args, limit)).fetchall()
            take(_rank(conn, [(r[0], 1.0, None) for r in rows], limit, 10.0, notes))
            total = max(total, len(order))
    elif short:
        cands = _short_candidates(conn, short, where, args, trigram)
        take(_rank(conn, [(i, 1.0, p) for i, p in cands[:RANK_FLAT]], limit, 10.0, notes)[:limit])
        total = min(len(cands), TOTAL_CAP)
    else:  # nothing searchable (punctuation only): the newest rows by priority, as a listing
        rows = conn.execute(
            f"SELECT a.id FROM (SELECT * FROM archive a WHERE {where} ORDER BY id DESC LIMIT {SCAN_CAP}) a"
            f" ORDER BY a.priority DESC, a.id DESC LIMIT ?", (*args, limit)).fetchall()
        take([(r[0], 10.0) for r in rows])
        total = len(order)
    order.sort(key=lambda i: bool(notes.get(i, {}).get("echo")))  # echoes after content, whatever the path
    ids = order[:limit]
    got = {}
    if ids:
        got = {r[0]: r for r in conn.execute(
            f"SELECT {_COLS}, {_WINDOW} FROM archive a WHERE a.id IN ({_marks(len(ids))})", (terms[0], *ids))}
    result = [_row(got[i], scores[i]) for i in ids if i in got]
    for h in result:
        h["window"] = got[h["id"]][-1]
        later = notes.get(h["id"], {}).get("superseded_by")
        if later is not None:
            h["superseded_by"] = later
            h["summary"] = f"(superseded by #{later}) {h['summary']}"
    return result, max(total, len(result))


# The WINDOW characters of a hit's text from 120 before the first instance of the first term (the
# first ``?`` parameter; case first as written, then folded), where its snippet is taken from.
_WINDOW = (f"substr(a.text, max(1, CASE WHEN instr(a.text, ?1) > 0 THEN instr(a.text, ?1)"
           f" ELSE instr(lower(a.text), lower(?1)) END - 120), {WINDOW})")


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


def session_or_project_last(conn: sqlite3.Connection, *, session: str, project: str) -> tuple[dict[str, Any] | None,
                                                                                               dict[str, Any] | None]:
    """(the session's row, the project's most recent session row): both lookups of a session the
    daemon does not hold in memory, in one read job (one thread hop fewer before its first answer)."""
    own = sessions(conn, session=session, limit=1)
    last = sessions(conn, project=project, limit=1)
    return (own[0] if own else None), (last[0] if last else None)


def compactions(conn: sqlite3.Connection, *, session: str | None, project: str | None,
                limit: int) -> list[tuple]:
    """(id, session, project, report blob) of compaction reports, newest first."""
    w, args = _filters(project, session, None, None, alias="compactions")
    return conn.execute(f"SELECT id, session, project, report FROM compactions WHERE {w} ORDER BY id DESC LIMIT ?",
                        (*args, limit)).fetchall()


def session_report(conn: sqlite3.Connection, *, session: str, limit: int = 200) -> dict[str, Any] | None:
    """One session's row, its compaction reports (ts, report blob) and phase switches, oldest first;
    None for an unknown session."""
    rows = sessions(conn, session=session, limit=1)
    if not rows:
        return None
    comps = conn.execute("SELECT ts, report FROM compactions WHERE session = ? ORDER BY id DESC LIMIT ?",
                         (session, limit)).fetchall()
    return {"session": rows[0], "compactions": [(r[0], r[1]) for r in reversed(comps)],
            "switches": phase_switches(conn, project=None, session=session, limit=limit)}


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



def _equal(where: list[str], args: list[Any], **columns: Any) -> tuple[list[str], list[Any]]:
    """``where``/``args`` with ``<column> = ?`` added for every column given a value (None: no filter)."""
    for column, value in columns.items():
        if value is not None:
            where.append(f"{column} = ?")
            args.append(value)
    return where, args


def phase_page(conn: sqlite3.Connection, *, project: str | None, session: str | None,
               phase: str) -> dict[str, Any] | None:
    """The newest hand-off page (L3) written for ``phase`` in the project (or session): id, path, text."""
    where, args = _equal(["l.path LIKE ?"], [f"%/phase-%-{phase}.md"], **{"l.project": project, "l.session": session})
    row = conn.execute(
        "SELECT a.id, l.path, a.text, l.session, l.project, l.ts FROM ledgers l JOIN archive a ON a.id = l.archive_id"
        f" WHERE {' AND '.join(where)} ORDER BY l.ts DESC, a.id DESC LIMIT 1", args).fetchone()
    return None if row is None else dict(zip(("id", "path", "text", "session", "project", "ts"), row, strict=True))


def items(conn: sqlite3.Connection, *, project: str | None, kind: str, status: str | None = "open",
          session: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
    """Facts (decision, constraint, pending) newest first; ``project=None`` means every project."""
    where, args = _equal(["kind = ?"], [kind], project=project, status=status, session=session)
    rows = conn.execute(
        f"SELECT id, session, text, ts, phase, status, archive_id FROM items WHERE {' AND '.join(where)}"
        f" ORDER BY id DESC LIMIT ?", (*args, limit)).fetchall()
    keys = ("id", "session", "text", "ts", "phase", "status", "archive_id")
    return [dict(zip(keys, r, strict=True)) for r in rows]


def pending_items(conn: sqlite3.Connection, *, project: str | None, session: str | None = None,
                  status: str | None = "open", limit: int = 50) -> list[dict[str, Any]]:
    """Pending items newest first, each with ``ref`` (the ``#N`` shown to the model: its archive id),
    ``touched`` and how many phase switches / later sessions of its project followed that
    (``phases_since`` / ``sessions_since``, for staleness: core/pending.py)."""
    where, args = _equal(["i.kind = 'pending'"], [], **{"i.project": project, "i.session": session, "i.status": status})
    rows = conn.execute(
        "SELECT i.id, coalesce(i.archive_id, i.id), i.session, i.project, i.text, i.ts, i.phase, i.status,"
        " coalesce(i.touched_ts, i.ts), i.resolved_ts, i.resolution,"
        " (SELECT count(*) FROM phase_switches p WHERE p.project = i.project AND p.ts > coalesce(i.touched_ts, i.ts)),"
        " (SELECT count(*) FROM sessions s WHERE s.project = i.project AND s.first_ts > coalesce(i.touched_ts, i.ts))"
        f" FROM items i WHERE {' AND '.join(where)} ORDER BY i.id DESC LIMIT ?", (*args, limit)).fetchall()
    keys = ("id", "ref", "session", "project", "text", "ts", "phase", "status", "touched", "resolved_ts",
            "resolution", "phases_since", "sessions_since")
    return [dict(zip(keys, r, strict=True)) for r in rows]


def count_items(conn: sqlite3.Connection, *, project: str, kind: str) -> int:
    return conn.execute("SELECT count(*) FROM items WHERE project = ? AND kind = ?", (project, kind)).fetchone()[0]
