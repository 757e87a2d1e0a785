"""The recall corpus: N archived elements written straight into a fresh store with SQL inserts.

Rules:
- The schema is the store's own (``ctxlifed.store.schema.migrate`` on a fresh db), so the FTS
  triggers index every row exactly as the daemon's writer would; only the row source differs.
- Rows are inserted in id order in transactions of ``BATCH`` rows (a real store fills one event at
  a time; FTS5 automerge keeps the segment count bounded either way; since schema 0009 the
  daemon's idle merge steps do, and the build runs them after each batch). No ``optimize`` is run:
  the index is in the state incremental inserts leave it in. (v3 corpora were built with
  automerge on; the merged state is the same kind, so 0009 did not bump VERSION.)
- Cached under ``bench/.cache/recall-v<VERSION>-<n>.db``; bump VERSION when the generator or the
  schema changes. Build figures (seconds, bytes) are kept next to the db in a ``.json``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from _common import CACHE
from _text import PHASES, TextGen

from ctxlifed.core.recall_rank import identifier_words
from ctxlifed.store import backlog, schema
from ctxlifed.store.ops import content_hash

VERSION = 4  # 4: schema 0011 (identifier words, ``idents``, computed as the daemon's writer does); 3: schema 0006 (filter tags in the word index) and 0007 (trigram backlog, drained per batch)
BATCH = 5000
SEED = 20240611
PROJECTS = ["/home/dev/project", "/home/dev/webapp", "/home/dev/infra", "/home/dev/tools", "/home/dev/notes",
            "/home/dev/scratch"]
PROJECT_WEIGHTS = [0.5, 0.2, 0.12, 0.08, 0.06, 0.04]
MAIN_PROJECT = PROJECTS[0]


def path_for(n: int) -> Path:
    return CACHE / f"recall-v{VERSION}-{n}.db"


def build(n: int, *, log: Any = print) -> tuple[Path, dict[str, Any]]:
    """The cached corpus db for ``n`` elements (built if missing) and its build figures."""
    path = path_for(n)
    meta_path = path.with_suffix(".json")
    if path.exists() and meta_path.exists():
        return path, json.loads(meta_path.read_text())
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".building")
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            os.unlink(str(tmp) + suffix)
        except FileNotFoundError:
            pass
    log(f"building recall corpus of {n:,} elements at {path} (cached afterwards) ...")
    t0 = time.perf_counter()
    conn = sqlite3.connect(str(tmp), isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=OFF")
    conn.execute("PRAGMA cache_size=-262144")  # 256 MiB while building
    conn.execute("BEGIN IMMEDIATE")
    schema.migrate(conn)
    conn.execute("COMMIT")
    deferred = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'tri_pending'").fetchone() is not None
    merging = conn.execute("SELECT 1 FROM _migrations WHERE name = '0009_fts_merge'").fetchone() is not None
    gen = TextGen(seed=SEED)
    rng = gen.rng
    ts = 1_700_000_000.0
    session = ""
    left_in_session = 0
    phase_i = 0
    project = MAIN_PROJECT
    rows: list[tuple] = []
    jq = 0
    chars = 0
    done = 0
    gen_s = 0.0
    for i in range(1, n + 1):
        if left_in_session <= 0:
            session = f"{rng.getrandbits(128):032x}"
            session = f"{session[:8]}-{session[8:12]}-{session[12:16]}-{session[16:20]}-{session[20:]}"
            left_in_session = int(rng.lognormvariate(5.5, 0.8))  # ~250 elements a session
            project = rng.choices(PROJECTS, weights=PROJECT_WEIGHTS)[0]
            phase_i = 0
            ts += rng.random() * 36000
        left_in_session -= 1
        if rng.random() < 0.01:
            phase_i = min(phase_i + 1, len(PHASES) - 1)
        ts += rng.random() * 20
        g0 = time.perf_counter()
        kind, text, tool, file_path = gen.element()
        gen_s += time.perf_counter() - g0
        if "鉴权" in text:
            jq += 1
        chars += len(text)
        summary = text.split("\n", 1)[0][:200]
        rows.append((i, content_hash(kind, text) + f"{i:x}", session, project, ts, kind, PHASES[phase_i], tool,
                     file_path, f"u{i}", i, rng.randint(10, 95), None, rng.choice((0, 1, 2)), summary, text,
                     len(text), 0, identifier_words(text)))
        if len(rows) >= BATCH or i == n:
            conn.execute("BEGIN")
            conn.executemany(
                "INSERT INTO archive(id, hash, session, project, ts, kind, phase, tool, file_path, uid, event_id,"
                " priority, category, level, summary, text, chars, truncated, idents)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
            if deferred:  # the trigram backlog (0007), drained as the daemon's idle writer would
                conn.execute("INSERT INTO archive_tri(rowid, text) SELECT a.id, a.text FROM tri_pending p"
                             " JOIN archive a ON a.id = p.id ORDER BY p.id")
                conn.execute("DELETE FROM tri_pending")
            if merging:  # automerge is off (0009): merge as the daemon's idle writer would, to the end
                while backlog.idle_step(conn, budget_s=60.0):
                    pass
            conn.execute("COMMIT")
            done += len(rows)
            rows = []
            if done % 100_000 == 0:
                el = time.perf_counter() - t0
                log(f"  {done:,} rows, {el:.0f}s elapsed, ~{el / done * (n - done):.0f}s to go")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("ANALYZE")
    conn.close()
    build_s = time.perf_counter() - t0
    os.rename(tmp, path)
    meta = {
        "version": VERSION, "n": n, "seed": SEED, "build_s": round(build_s, 1), "generate_s": round(gen_s, 1),
        "db_bytes": path.stat().st_size, "text_chars": chars, "mean_chars": round(chars / max(1, n)),
        "jianquan_rows": jq, "jianquan_fraction": round(jq / max(1, n), 5),
        "projects": dict(zip(PROJECTS, PROJECT_WEIGHTS, strict=True)),
    }
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    log(f"  built in {build_s:.0f}s ({meta['db_bytes'] / 1e9:.2f} GB)")
    return path, meta
