"""Target 3: recall over 100k and 1M archived elements of realistic text.

The corpus (bench/_corpus.py) is English prose, Python/JS code, shell output and Chinese, in six
projects (the main one holds half the rows), with 鉴权 in ~0.3% of rows. Queries are parsed with
the real grammar (``parse_recall``) and run through ``store.queries.search`` on a query-only
connection, scoped to the main project as the daemon scopes them (its ``cwd``); then the same
queries go end to end through a daemon's ``recall`` method (over the socket, Markdown rendered).

Categories (each a set of queries from rare to very common terms; p95 is over every query and
repetition of the category):
  word      single words: rare identifiers to very common words
  phrase    quoted phrases, including one with no match at all
  cjk2      2-character Chinese terms (鉴权 and common ones): the substring path
  filtered  words/phrases with ``phase:`` / ``type:`` filters
  cjk3      3+ character Chinese terms (trigram path), for reference
"""

from __future__ import annotations

import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

import _corpus
from _common import Daemon, RpcError, call, daemon_env, dist, rmtree, short_tmp, target

from ctxlifed.core.recall_query import parse_recall
from ctxlifed.store import queries
from ctxlifed.store.db import connect

QUERIES: dict[str, list[str]] = {
    "word": ["checkpoint", "semaphore", "get_user", "tokenizer", "rollback", "timeout", "database", "connection",
             "error", "locked"],
    "phrase": ['"database is locked"', '"connection refused"', '"unused variable"', '"throw new Error"',
               '"the single writer batches"', '"failed to connect"'],
    "cjk2": ["鉴权", "缓存", "部署", "令牌"],
    "filtered": ["phase:testing timeout", "type:error locked", "type:test_result failed", "phase:design rollback",
                 "phase:review 鉴权", 'type:code_change "self._"'],
    "cjk3": ["数据库", "用户会话", "重试超时"],
}
TARGET_MS = {100_000: 10.0, 1_000_000: 30.0}
REQUIRED = ("word", "phrase", "cjk2", "filtered")


def _search(conn: sqlite3.Connection, q: str, project: str | None, trigram: bool) -> tuple[int, int]:
    rq = parse_recall(q)
    kinds = (rq.kind,) if rq.kind else None
    hits, total = queries.search(conn, words=rq.words, phrases=rq.phrases, project=project, session=rq.session,
                                 phase=rq.phase, kinds=kinds, limit=20, trigram=trigram)
    return len(hits), total


def direct(db: Path, project: str | None, reps: int) -> dict[str, Any]:
    conn = connect(str(db), readonly=True)
    trigram = True
    out: dict[str, Any] = {}
    try:
        for cat, qs in QUERIES.items():
            samples: list[float] = []
            per_q: dict[str, Any] = {}
            for q in qs:
                _search(conn, q, project, trigram)  # warm: page cache and statement cache
                ts = []
                for _ in range(reps):
                    t0 = time.perf_counter()
                    n, total = _search(conn, q, project, trigram)
                    ts.append((time.perf_counter() - t0) * 1000)
                samples += ts
                per_q[q] = {"hits": n, "total": total, **dist(ts)}
            out[cat] = {"all": dist(samples), "queries": per_q}
    finally:
        conn.close()
    return out


def _settle(path: Path) -> int:
    """Apply the store's migrations and run the writer's idle work (trigram backlog, index merges:
    ``store/backlog.py``) to the end, as a daemon left idle would, so the timed queries do not
    share the machine with a start-up catch-up (a corpus built before schema 0009 has merge work)."""
    import sqlite3

    from ctxlifed.store import backlog, schema

    conn = sqlite3.connect(str(path), isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        schema.migrate(conn)
        conn.execute("COMMIT")
        steps = 0
        while True:
            conn.execute("BEGIN IMMEDIATE")
            more = backlog.idle_step(conn, budget_s=1.0)
            conn.execute("COMMIT")
            steps += 1
            if not more:
                return steps
    finally:
        conn.close()


def end_to_end(db: Path, project: str, reps: int, log: Any) -> dict[str, Any]:
    base = short_tmp("clbr-")
    try:
        env = daemon_env(base)
        data = Path(env["CTXLIFED_DATA_DIR"])
        data.mkdir(parents=True, mode=0o700)
        t0 = time.perf_counter()
        shutil.copyfile(db, data / "ctxlifed.db")  # the daemon writes to its store: never to the cache
        log(f"    copied the corpus for the daemon in {time.perf_counter() - t0:.1f}s")
        t0 = time.perf_counter()
        steps = _settle(data / "ctxlifed.db")
        log(f"    brought the copy to an idle daemon's state ({steps} merge steps, {time.perf_counter() - t0:.1f}s)")
        d = Daemon(base, env).start(timeout=120)
        out: dict[str, Any] = {}
        try:
            for cat, qs in QUERIES.items():
                samples = []
                errors = []
                for q in qs:
                    for i in range(reps + 1):
                        t0 = time.perf_counter()
                        try:
                            call(d.socket, "recall", {"query": q, "project": project})
                        except RpcError as exc:
                            errors.append(f"{q}: {exc}"[:300])
                        if i:  # the first one warms up
                            samples.append((time.perf_counter() - t0) * 1000)
                out[cat] = dist(samples)
                if errors:
                    out[cat]["errors"] = errors[:5]
                    out[cat]["n_errors"] = len(errors)
        finally:
            d.stop()
        return out
    finally:
        rmtree(base)


def term_frequencies(db: Path, project: str) -> dict[str, int]:
    """Rows of the main project holding each query's first term (instr count; informational)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    out = {}
    try:
        n = conn.execute("SELECT count(*) FROM archive WHERE project = ?", (project,)).fetchone()[0]
        out["_rows_in_project"] = n
        for cat in ("word", "cjk2"):
            for q in QUERIES[cat]:
                out[q] = conn.execute("SELECT count(*) FROM archive WHERE project = ? AND instr(lower(text), ?) > 0",
                                      (project, q.lower())).fetchone()[0]
    finally:
        conn.close()
    return out


def run(quick: bool, log: Any = print) -> dict[str, Any]:
    sizes = [20_000] if quick else [100_000, 1_000_000]
    reps = 5 if quick else 20
    rows: list[list[Any]] = []
    targets: list[dict[str, Any]] = []
    data: dict[str, Any] = {}
    for n in sizes:
        db, meta = _corpus.build(n, log=log)
        log(f"  recall over {n:,} elements ({meta['db_bytes'] / 1e9:.2f} GB, built in {meta['build_s']}s)")
        res = direct(db, _corpus.MAIN_PROJECT, reps)
        e2e = end_to_end(db, _corpus.MAIN_PROJECT, max(3, reps // 2), log)
        freq = term_frequencies(db, _corpus.MAIN_PROJECT) if not quick else {}
        data[str(n)] = {"corpus": meta, "search": res, "daemon_recall": e2e, "term_rows": freq}
        limit = TARGET_MS.get(n, 10.0)
        for cat in QUERIES:
            d = res[cat]["all"]
            rows.append([f"recall.{n // 1000}k {cat} (queries.search)", d, "ms", f"{len(QUERIES[cat])} queries x {reps}"])
            errs = e2e[cat].get("n_errors", 0)
            rows.append([f"recall.{n // 1000}k {cat} (daemon recall)", e2e[cat], "ms",
                         "end to end, Markdown" + (f"; {errs} ERRORS" if errs else "")])
            if cat in REQUIRED:
                targets.append(target(f"3 recall {n // 1000}k {cat} p95 (queries.search)", d["p95"], limit, unit="ms"))
                targets.append(target(f"3 recall {n // 1000}k {cat} p95 (daemon recall)", e2e[cat]["p95"], limit,
                                      unit="ms", note="end to end"))
    return {"rows": rows, "targets": targets, "data": data}
