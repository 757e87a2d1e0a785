"""Recall in the store at scale: filter tags in the word index (schema 0006), the bm25 paths for
rare / common / very common terms, counts, and the word-index proof that a substring is absent."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from ctxlifed.core import recall_rank
from ctxlifed.store import queries, schema

PHASES = ("planning", "design", "implementation", "testing", "review")
KINDS = ("tool", "error", "test_result", "code_change")


def _old_store(path: Path) -> sqlite3.Connection:
    """A store created by the migrations before 0006 (as an older daemon left it)."""
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_ts FLOAT)")
    for name, stmts in schema.MIGRATIONS:
        if name >= "0006":
            break
        if name == "0003_fts_trigram" and not schema.has_trigram(conn):
            continue
        for stmt in stmts:
            conn.execute(stmt)
        conn.execute("INSERT INTO _migrations VALUES (?, 0)", (name,))
    conn.execute("COMMIT")
    return conn


def _insert(conn: sqlite3.Connection, rows: list[tuple[str, str, str, str, str]], priority: int = 50) -> list[int]:
    """rows: (project, session, phase, kind, text)."""
    ids = []
    conn.execute("BEGIN")
    for i, (project, session, phase, kind, text) in enumerate(rows):
        cur = conn.execute(
            "INSERT INTO archive(hash, session, project, ts, kind, phase, priority, summary, text, chars)"
            " VALUES (?,?,?,?,?,?,?,?,?,?)",
            (f"h{len(text)}-{i}-{text[:20]}-{project}-{session}", session, project, float(i), kind, phase,
             priority, "", text, len(text)))
        ids.append(cur.lastrowid)
    conn.execute("COMMIT")
    return ids


def _migrate(conn: sqlite3.Connection) -> list[str]:
    conn.execute("BEGIN IMMEDIATE")
    applied = schema.migrate(conn)
    conn.execute("COMMIT")
    return applied


def _brute(conn: sqlite3.Connection, word: str, **flt: str | None) -> list[int]:
    """Ids whose text holds ``word`` as a whole (ASCII) word and pass the filters, newest first."""
    where, args = ["(' ' || lower(text) || ' ') LIKE ?"], [f"% {word} %"]
    for col, value in flt.items():
        if value is not None:
            where.append(f"{col} = ?")
            args.append(value)
    return [r[0] for r in conn.execute(f"SELECT id FROM archive WHERE {' AND '.join(where)} ORDER BY id DESC", args)]


@pytest.fixture
def corpus(tmp_path: Path):
    """A store migrated from an old one, holding a common word in many rows of several projects,
    sessions, phases and kinds, plus a few rows added after the migration."""
    conn = _old_store(tmp_path / "old.db")
    rows = []
    for i in range(150):
        project = "/p" if i % 3 else "/other/项目"
        words = " ".join(["alpha"] * (1 + i % 4)) + " filler" * (i % 7) + (" beta" if i % 5 == 0 else "")
        rows.append((project, f"s{i % 4}", PHASES[i % 5], KINDS[i % 4], f"row {i} {words} end"))
    _insert(conn, rows[:100])
    assert "0006_fts_tags" in _migrate(conn)
    _insert(conn, rows[100:])
    yield conn
    conn.close()


def _search(conn: sqlite3.Connection, words: tuple[str, ...] = (), phrases: tuple[str, ...] = (), **kw):
    return queries.search(conn, words=words, phrases=phrases, limit=200, **kw)


def test_migration_0006_rebuilds_the_word_index_of_an_old_store(corpus) -> None:
    """An old store gains the tags column (and, with 0011, the identifier words); rows from before
    and after the migration are indexed, and the index matches its content (integrity-check)."""
    conn = corpus
    cols = [r[1] for r in conn.execute("PRAGMA table_info(archive_fts)")]
    assert cols == ["text", "summary", "idents", "tags"]
    conn.execute("INSERT INTO archive_fts(archive_fts) VALUES ('integrity-check')")
    hits, total = _search(conn, ("alpha",), project="/p", phase="testing")
    assert {h["id"] for h in hits} == set(_brute(conn, "alpha", project="/p", phase="testing"))
    assert total == len(hits) > 0
    assert max(h["id"] for h in hits) > 100  # rows inserted after the migration are tagged too
    assert _migrate(conn) == []  # idempotent


def test_tag_tokens_are_the_indexed_tokens(tmp_path: Path) -> None:
    """``tag_token`` builds exactly what the triggers index, non-ASCII values included."""
    conn = _old_store(tmp_path / "t.db")
    _migrate(conn)
    [aid] = _insert(conn, [("/home/用户/项目 x", "sess-1", "design", "code_change", "some text")])
    for letter, value in (("p", "/home/用户/项目 x"), ("s", "sess-1"), ("h", "design"), ("k", "code_change")):
        tok = queries.tag_token(letter, value)
        got = conn.execute("SELECT rowid FROM archive_fts WHERE archive_fts MATCH ?", (f'tags : "{tok}"',)).fetchall()
        assert got == [(aid,)], (letter, value)
    # user words never match the tags column
    tok = queries.tag_token("h", "design")
    assert _search(conn, (tok,))[0] == []


def test_tags_follow_updates_of_every_filter_column(corpus) -> None:
    """The update trigger re-tags a row whose phase, kind, project or session changed."""
    conn = corpus
    [aid] = _insert(conn, [("/p", "s0", "design", "tool", "a unique zebraword here")])
    conn.execute("UPDATE archive SET phase = 'review', kind = 'error', project = '/q', session = 'zz' WHERE id = ?", (aid,))
    assert [h["id"] for h in _search(conn, ("zebraword",), project="/q", session="zz", phase="review",
                                     kinds=("error",))[0]] == [aid]
    for kw in ({"project": "/p"}, {"session": "s0"}, {"phase": "design"}, {"kinds": ("tool",)}):
        assert _search(conn, ("zebraword",), **kw)[0] == [], kw
    conn.execute("UPDATE archive SET summary = 'summarised', priority = 90 WHERE id = ?", (aid,))
    assert [h["id"] for h in _search(conn, ("summarised",), project="/q")[0]] == [aid]
    conn.execute("DELETE FROM archive WHERE id = ?", (aid,))
    conn.execute("INSERT INTO archive_fts(archive_fts) VALUES ('integrity-check')")


@pytest.mark.parametrize("path", ["rare", "bm25", "computed"])
@pytest.mark.parametrize("filters", [
    {}, {"project": "/p"}, {"project": "/p", "phase": "testing"}, {"project": "/other/项目", "kinds": ("error",)},
    {"session": "s1", "kinds": ("error", "tool")}, {"phase": "design", "kinds": ("code_change",)},
])
def test_every_path_finds_exactly_the_filtered_matches(corpus, monkeypatch, path, filters) -> None:
    """Rare terms (FTS5 bm25, join), common terms (tags + bm25 of the window) and very common terms
    (tags + bm25 computed here) return the same hits and totals as a brute-force scan."""
    conn = corpus
    if path != "rare":
        monkeypatch.setattr(queries, "DF_WALK", 5)
    monkeypatch.setattr(queries, "BM25_BUDGET", 10**9 if path == "bm25" else 0)
    monkeypatch.setattr(queries, "RANK_WINDOW", 1000)
    kinds = filters.get("kinds")
    want = _brute(conn, "alpha", project=filters.get("project"), session=filters.get("session"),
                  phase=filters.get("phase"))
    if kinds:
        ok = {r[0] for r in conn.execute(f"SELECT id FROM archive WHERE kind IN ({','.join('?' * len(kinds))})", kinds)}
        want = [i for i in want if i in ok]
    hits, total = _search(conn, ("alpha",), **filters)
    assert sorted(h["id"] for h in hits) == sorted(want)
    assert total == len(want)


@pytest.mark.parametrize("path", ["rare", "bm25", "computed"])
def test_single_term_order_is_fts5_bm25_order(corpus, monkeypatch, path) -> None:
    """Ranking: the computed bm25 orders one term's matches as FTS5's bm25() does (more
    occurrences in a shorter row first), weighted by kind (errors and code changes before tool
    output), then priority, then recency."""
    conn = corpus
    if path != "rare":
        monkeypatch.setattr(queries, "DF_WALK", 5)
    monkeypatch.setattr(queries, "BM25_BUDGET", 10**9 if path == "bm25" else 0)
    monkeypatch.setattr(queries, "RANK_WINDOW", 1000)
    hits, _ = _search(conn, ("alpha",), project="/p")
    ref = [r[0] for r in conn.execute(
        "SELECT a.id FROM archive_fts JOIN archive a ON a.id = archive_fts.rowid WHERE archive_fts MATCH ?"
        " AND a.project = '/p' ORDER BY bm25(archive_fts)"
        f" * (CASE WHEN a.kind IN ('error', 'code_change') THEN {recall_rank.WORK_WEIGHT} ELSE 1 END),"
        " a.priority DESC, a.id DESC",
        ('{text summary} : "alpha"',))]
    assert [h["id"] for h in hits] == ref
    assert hits[0]["score"] > hits[-1]["score"]


def test_multi_term_ranking_credits_each_term(corpus, monkeypatch) -> None:
    """Very common terms, two of them: every row holding both is found, and a row with more
    occurrences of the rarer term ranks above one with fewer, other things equal."""
    conn = corpus
    monkeypatch.setattr(queries, "DF_WALK", 5)
    monkeypatch.setattr(queries, "BM25_BUDGET", 0)
    a, b = _insert(conn, [("/r", "s9", "design", "tool", "alpha beta beta beta gamma"),
                          ("/r", "s9", "design", "tool", "alpha alpha alpha beta gamma")])
    hits, total = _search(conn, ("alpha", "beta"), project="/r")
    assert [h["id"] for h in hits] == [a, b] and total == 2
    hits, _ = _search(conn, ("alpha", "beta"))
    assert {h["id"] for h in hits} == set(_brute(conn, "alpha")) & set(_brute(conn, "beta"))


def test_totals_count_on_from_the_window(corpus, monkeypatch) -> None:
    """A full window: the total counts the older matches too (capped at TOTAL_CAP)."""
    conn = corpus
    monkeypatch.setattr(queries, "RANK_WINDOW", 10)
    monkeypatch.setattr(queries, "TOTAL_CAP", 50)
    for df_walk in (1000, 5):
        monkeypatch.setattr(queries, "DF_WALK", df_walk)
        for flt, want in (({"project": "/p"}, 50), ({"project": "/p", "phase": "review"},
                                                     len(_brute(conn, "alpha", project="/p", phase="review")))):
            hits, total = queries.search(conn, words=("alpha",), limit=5, **flt)
            assert len(hits) == 5 and total == min(want, 50), (df_walk, flt)


def test_phrases_through_every_path(corpus, monkeypatch) -> None:
    conn = corpus
    want = {r[0] for r in conn.execute("SELECT id FROM archive WHERE text LIKE '%alpha alpha alpha%'"
                                       " AND project = '/p'")}
    for df_walk, budget in ((1000, 0), (5, 10**9), (5, 0)):
        monkeypatch.setattr(queries, "DF_WALK", df_walk)
        monkeypatch.setattr(queries, "BM25_BUDGET", budget)
        hits, total = _search(conn, (), ("alpha alpha alpha",), project="/p")
        assert {h["id"] for h in hits} == want and total == len(want)


def test_absent_inner_words_prove_no_substring_match(corpus) -> None:
    """A phrase whose inner words no row holds is answered from the word index; one whose words
    exist but only inside longer words is still found as a substring (trigram index)."""
    conn = corpus
    assert _search(conn, (), ("the nonexistentword writer",), project="/p") == ([], 0)
    assert queries._no_substring_match(conn, ("the nonexistentword writer",), "/p", None)
    assert not queries._no_substring_match(conn, ("lpha filler fil",), "/p", None)  # inner word: filler
    assert not queries._no_substring_match(conn, ("lpha",), "/p", None)  # no inner word: no proof
    assert not queries._no_substring_match(conn, ("añejo vino tinto",), None, None)  # not ASCII: no proof
    if schema.has_trigram(conn):
        [aid] = _insert(conn, [("/p", "s0", "design", "tool", "xxthe prefixed wordsyy")])
        conn.execute("BEGIN")  # the trigram backlog (if any), drained as the idle writer does
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'tri_pending'").fetchone():
            conn.execute("INSERT INTO archive_tri(rowid, text) SELECT a.id, a.text FROM tri_pending p"
                         " JOIN archive a ON a.id = p.id")
            conn.execute("DELETE FROM tri_pending")
        conn.execute("COMMIT")
        assert [h["id"] for h in _search(conn, (), ("he prefixed words",), project="/p")[0]] == [aid]


class _Recorder:
    """A connection that records every statement a search runs (sql, parameters)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.statements: list[tuple[str, tuple]] = []

    def execute(self, sql: str, args: tuple | list = ()) -> sqlite3.Cursor:
        self.statements.append((sql, tuple(args)))
        return self.conn.execute(sql, args)

    def __getattr__(self, name: str):
        return getattr(self.conn, name)


def _loop_order(conn: sqlite3.Connection, sql: str, args: tuple) -> list[str]:
    """The tables of a statement's plan in loop order (outer first): 'fts', 'tri', 'pending', 'a'."""
    order = []
    for *_ids, detail in conn.execute("EXPLAIN QUERY PLAN " + sql, args):
        words = detail.split()
        if words[0] not in ("SCAN", "SEARCH") or len(words) < 2:
            continue
        name = {"archive_fts": "fts", "archive_tri": "tri", "a": "a", "p": "pending"}.get(words[1])
        if name:
            order.append(name)
    return order


def test_index_joins_walk_the_index_first_in_a_store_without_statistics(tmp_path: Path, monkeypatch) -> None:
    """A daemon's store has no ``ANALYZE`` statistics, and with them missing SQLite guessed that the
    ``project = ?`` filter was selective: it looped over every row of the project and looked each
    one up in the trigram index (a word found nowhere took seconds on a 10k-row archive). Every
    statement of a search that joins an index to ``archive`` walks the index (or the pending rows)
    first, whatever the path."""
    conn = sqlite3.connect(str(tmp_path / "s.db"), isolation_level=None)
    _migrate(conn)
    assert conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_stat1'").fetchone() is None
    rows = [("/p", f"s{i % 3}", PHASES[i % 5], KINDS[i % 4],
             f"row {i} alpha{' beta' * (i % 3)} 数据库 鉴权 checkpointer") for i in range(60)]
    _insert(conn, rows)
    if schema.has_trigram(conn):  # index most rows (the idle writer's work); the last 10 stay pending
        conn.execute("BEGIN")
        conn.execute("INSERT INTO archive_tri(rowid, text) SELECT id, text FROM archive WHERE id <= 50")
        conn.execute("DELETE FROM tri_pending WHERE id <= 50")
        conn.execute("COMMIT")
    monkeypatch.setattr(queries, "RANK_WINDOW", 5)  # full windows: the totals are counted by a join
    rec = _Recorder(conn)
    for words, kw in (((("alpha",), {"project": "/p"})), (("alpha", "beta"), {"project": "/p", "kinds": ("error",)}),
                      (("nowhereword",), {"project": "/p"}), (("checkpoint",), {"project": "/p"}),
                      (("heckpoin",), {"project": "/p", "phase": "design"}), (("数据库",), {"project": "/p"}),
                      (("鉴权",), {"project": "/p"})):
        queries.search(rec, words=words, limit=3, **kw)
    joins = [(sql, args) for sql, args in rec.statements
             if re.search(r"\bJOIN archive a\b", sql) and re.search(r"archive_(fts|tri)\b|tri_pending", sql)]
    assert joins
    for sql, args in joins:
        order = _loop_order(conn, sql, args)
        assert order.index("a") > 0, (sql, order)  # something (the index, the pending rows) comes first


@pytest.mark.parametrize("path", ["rare", "common", "very_common"])
def test_a_window_of_tied_scores_is_ranked_without_classifying_every_candidate(tmp_path: Path, monkeypatch,
                                                                               path: str) -> None:
    """A burst of like prompts leaves RANK_WINDOW candidates with one bm25 score: the kind weights
    order them all first, then only as many as it takes to find 2 * limit content rows are
    classified (echo or not), and the result is what classifying all of them gives: a decision
    first (its weight), an echo (a question) last, then priority, then the newest."""
    conn = sqlite3.connect(str(tmp_path / "t.db"), isolation_level=None)
    _migrate(conn)
    rows = [("/p", "s1", "implementation", "prompt", f"keep the single writer and the group commit {i % 10}")
            for i in range(400)]
    ids = _insert(conn, rows)
    conn.execute("UPDATE archive SET kind = 'decision' WHERE id = ?", (ids[-50],))
    conn.execute("UPDATE archive SET summary = 'what about the group commit of the single writer?' WHERE id = ?",
                 (ids[-1],))  # the newest row is a question: an echo
    conn.execute("UPDATE archive SET priority = 80 WHERE id = ?", (ids[100],))
    monkeypatch.setattr(queries, "RANK_WINDOW", 300)
    budget = {"rare": (10_000, 10**9), "common": (100, 10**9), "very_common": (100, 1)}[path]
    monkeypatch.setattr(queries, "DF_WALK", budget[0])
    monkeypatch.setattr(queries, "BM25_BUDGET", budget[1])
    classified: list[int] = []
    real = recall_rank.is_echo
    monkeypatch.setattr(recall_rank, "is_echo", lambda kind, tool, head: classified.append(1) or real(kind, tool, head))
    limit = 5
    hits, total = queries.search(conn, words=("group", "commit"), project="/p", limit=limit)
    window = sorted(ids, reverse=True)[:300]  # the newest RANK_WINDOW matches
    assert len(classified) <= 2 * limit + 2  # not RANK_WINDOW
    got = [h["id"] for h in hits]
    assert got[0] == ids[-50]  # the decision: its weight
    expect = [i for i in window if i not in (ids[-50], ids[-1])]
    expect.sort(key=lambda i: (-(80 if i == ids[100] else 50), -i))
    assert got[1:] == expect[: limit - 1]  # then priority (the oldest of the window), then the newest
    assert ids[-1] not in got  # the echo ranks below every content row
    assert total == 400


class _SyncReaders:
    """The reader pool's interface over one connection (the seam reads.recall uses)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    async def run(self, fn):
        return fn(self.conn)

    search = run


@pytest.mark.anyio
async def test_a_recall_whose_count_stopped_at_the_cap_says_at_least(corpus, monkeypatch) -> None:
    """The store counts matches up to TOTAL_CAP: a total that reached it is a lower bound, and the
    answer says "at least" (header and omitted line) and flags it; below the cap it is exact."""
    from ctxlifed.protocol import _methods as methods
    from ctxlifed.service import reads

    async def recall(query: str) -> methods.RecallResult:
        return await reads.recall(methods.RecallParams(query=query, project="/p", limit=5),
                                  readers=_SyncReaders(corpus), trigram=True, clock=lambda: 1000.0)

    exact = await recall("beta")
    assert (exact.total, exact.total_capped) == (len(_brute(corpus, "beta", project="/p")), False)
    assert f": {exact.total} matches, best first." in exact.markdown.split("\n")[0]
    monkeypatch.setattr(queries, "TOTAL_CAP", 40)
    capped = await recall("alpha")
    assert (capped.total, capped.total_capped) == (40, True)
    lines = capped.markdown.split("\n")
    assert lines[0].endswith(": at least 40 matches, best first.")
    assert lines[-2].startswith("… at least 35 more not shown")
