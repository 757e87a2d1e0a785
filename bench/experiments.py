"""What-if experiments behind the proposals in bench/RESULTS.md (not part of `make bench`).

    bench/experiments.py fts-insert      cost of one 10 KB archive insert with/without each FTS index
    bench/experiments.py no-fts-daemon   daemon PostToolUse 10 KB latency with the FTS insert
                                         triggers dropped (= indexing deferred off the request path)
    bench/experiments.py reader-cache    recall with the default reader page cache vs 32 MB vs mmap
    bench/experiments.py fts-segments    recall costs before/after merging FTS segments (100k copy)
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import msgspec  # noqa: E402
from _common import (Daemon, adapt, call, daemon_env, dist, rmtree, sample, short_tmp,  # noqa: E402
                     tool_output)

P = "/home/dev/project"


def fts_insert() -> None:
    from ctxlifed.store.schema import migrate

    outs = [tool_output(10 * 1024, seed=i) for i in range(600)]
    for label, drop in (("word+trigram", []), ("word only", ["archive_tri_ai"]), ("trigram only", ["archive_ai"]),
                        ("no FTS", ["archive_ai", "archive_tri_ai"])):
        d = tempfile.mkdtemp(dir="/tmp")
        c = sqlite3.connect(os.path.join(d, "x.db"), isolation_level=None)
        c.execute("PRAGMA journal_mode=WAL")
        c.execute("PRAGMA synchronous=NORMAL")
        c.execute("BEGIN IMMEDIATE")
        migrate(c)
        c.execute("COMMIT")
        for t in drop:
            c.execute(f"DROP TRIGGER {t}")
        ins, com = [], []
        for i, o in enumerate(outs):
            t0 = time.perf_counter()
            c.execute("BEGIN IMMEDIATE")
            c.execute("INSERT INTO archive(hash, session, project, ts, kind, text, summary, chars) VALUES (?,?,?,?,?,?,?,?)",
                      (str(i), "s", "/p", 1.0, "tool", o, "summary", len(o)))
            t1 = time.perf_counter()
            c.execute("COMMIT")
            ins.append((t1 - t0) * 1000)
            com.append((time.perf_counter() - t1) * 1000)
        c.close()
        shutil.rmtree(d, ignore_errors=True)
        print(f"{label:14s} insert {dist(ins[100:])}\n{'':14s} commit {dist(com[100:])}")


def no_fts_daemon() -> None:
    import bench_daemon as BD

    for label in ("as is", "FTS insert triggers dropped"):
        base = short_tmp()
        env = daemon_env(base)
        proj = base / "proj"
        (proj / ".git").mkdir(parents=True)
        d = Daemon(base, env).start()
        d.stop()
        if label != "as is":
            c = sqlite3.connect(d.db)
            c.execute("DROP TRIGGER archive_ai")
            c.execute("DROP TRIGGER archive_tri_ai")
            c.commit()
            c.close()
        d = Daemon(base, env).start()
        try:
            cl = BD.Client(base, proj, 1)
            call(d.socket, "hook", msgspec.json.encode(adapt(sample("SessionStart:startup"), cl.sid, cl.proj,
                                                             str(cl.transcript))))
            for i in range(100):
                call(d.socket, "hook", cl.ptu(900_000 + i, 10 * 1024))
            for grow in (True, False):
                ts = []
                c0 = d.cpu_s()
                for i in range(800):
                    b = cl.ptu(i + (0 if grow else 50_000), 10 * 1024, grow=grow)
                    t0 = time.perf_counter()
                    call(d.socket, "hook", b)
                    ts.append((time.perf_counter() - t0) * 1000)
                cpu = (d.cpu_s() - c0) / 800 * 1000
                print(f"{label}: PostToolUse 10KB {'+transcript' if grow else 'payload only'} {dist(ts)}"
                      f" daemon CPU {cpu:.2f} ms/event")
            thr = BD.throughput(d, base, proj, 8, 500)
            print(f"{label}: throughput {thr['events_per_s']} ev/s, CPU {thr['daemon_cpu_ms_per_event']} ms/event")
        finally:
            d.stop()
            rmtree(base)


def _recall_times(conn: sqlite3.Connection, qs: list[str]) -> list[float]:
    from ctxlifed.core.recall_query import parse_recall
    from ctxlifed.store import queries as Q

    out = []
    for q in qs:
        rq = parse_recall(q)
        kinds = (rq.kind,) if rq.kind else None
        ts = []
        for _ in range(11):
            t0 = time.perf_counter()
            Q.search(conn, words=rq.words, phrases=rq.phrases, project=P, phase=rq.phase, kinds=kinds)
            ts.append((time.perf_counter() - t0) * 1000)
        out.append(round(sorted(ts)[5], 2))
    return out


def reader_cache() -> None:
    import _corpus

    from ctxlifed.store.db import connect

    qs = ['"database is locked"', "type:error locked", "error", "鉴权", "phase:testing timeout"]
    print("queries:", qs, "(median ms)")
    for n in (100_000, 1_000_000):
        db, _ = _corpus.build(n)
        for label, pragma in (("default (2 MB)", None), ("cache 32 MB", "PRAGMA cache_size=-32768"),
                              ("mmap 1 GB", "PRAGMA mmap_size=1073741824")):
            c = connect(str(db), readonly=True)
            if pragma:
                c.execute(pragma)
            print(f"{n:>9,} {label:15s} {_recall_times(c, qs)}")
            c.close()


def fts_segments() -> None:
    import _corpus

    db, _ = _corpus.build(100_000)
    tmp = Path(tempfile.mkdtemp(dir="/tmp")) / "c.db"
    shutil.copyfile(db, tmp)
    qs = ["鉴权", "缓存", "error", '"database is locked"', "phase:testing timeout"]
    for label in ("as built", "after 'optimize'"):
        c = sqlite3.connect(str(tmp))
        if label != "as built":
            t0 = time.perf_counter()
            for t in ("archive_fts", "archive_tri"):
                c.execute(f"INSERT INTO {t}({t}) VALUES ('optimize')")
            c.commit()
            print(f"optimize took {time.perf_counter() - t0:.1f}s")
        segs = [c.execute(f"SELECT count(DISTINCT segid) FROM {t}_idx").fetchone()[0] for t in ("archive_fts", "archive_tri")]
        c.execute("PRAGMA query_only=1")
        print(f"{label:18s} segments word/trigram {segs}: {_recall_times(c, qs)} ms for {qs}")
        c.close()
    rmtree(tmp.parent)


if __name__ == "__main__":
    cmds = {"fts-insert": fts_insert, "no-fts-daemon": no_fts_daemon, "reader-cache": reader_cache,
            "fts-segments": fts_segments}
    if len(sys.argv) != 2 or sys.argv[1] not in cmds:
        print(__doc__)
        sys.exit(2)
    cmds[sys.argv[1]]()
