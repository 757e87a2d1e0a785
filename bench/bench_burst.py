"""Target 3 under load: recall right after a burst of hooks, while the daemon catches up.

8 client threads send the realistic mix of ``bench_daemon`` (40% PreToolUse, 40% PostToolUse with
log-normal outputs, 10% UserPromptSubmit, 10% Stop) as fast as the daemon answers, 20,000 events in
all (1,200 with ``--quick``). The moment the last reply arrives, one client starts recalling over
the socket (one connection per request, what ``ctxlifectl recall`` does), 20 ms apart, cycling
through three two-word queries, until the derivation backlog and the
trigram backlog are both empty (read from the store directly, so the measuring does not itself
wait for anything), then 30 more on the quiet daemon. Reported: the first 30 recalls (immediately
after), every recall while work was pending (during catch-up), the quiet ones, and how long the
catch-up took. Each recall's reply is checked (a Markdown answer, no error).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from typing import Any

import msgspec
from _common import RpcError, adapt, call, dist, project_daemon, sample, target
from bench_daemon import Client

# Words of the burst's prompts (a tenth of the events), each with more than a page of hits once
# derived: what is timed is the burst's effect, not a query's own cost (``bench_recall`` times those).
# Until then they have fewer, and the search also scans the rows not trigram-indexed yet.
QUERIES = ("group commit", "single writer", "plan work")
FIRST = 30  # recalls counted as "immediately after the burst"
QUIET_N = 30
PACE_S = 0.02


def _pending(db: str) -> tuple[int, int]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        derive = conn.execute("SELECT count(*) FROM events WHERE pending = 1").fetchone()[0]
        try:
            index = conn.execute("SELECT count(*) FROM tri_pending").fetchone()[0]
        except sqlite3.OperationalError:
            index = 0
        return int(derive), int(index)
    finally:
        conn.close()


def burst(d: Any, base: Any, proj: Any, n_clients: int, per_client: int) -> dict[str, Any]:
    clients = [Client(base, proj, 200 + k) for k in range(n_clients)]
    for c in clients:
        call(d.socket, "hook", msgspec.json.encode(adapt(sample("SessionStart:startup"), c.sid, c.proj, str(c.transcript))))
    plans = [c.plan(per_client) for c in clients]
    errors: list[str] = []
    start = threading.Barrier(n_clients + 1)

    def worker(k: int) -> None:
        c = clients[k]
        start.wait()
        for _ev, line, b in plans[k]:
            c.append(line)
            try:
                call(d.socket, "hook", b)
            except Exception as exc:  # noqa: BLE001
                errors.append(repr(exc)[:200])

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n_clients)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    derive0, index0 = _pending(d.db)

    first: list[float] = []
    during: list[float] = []
    quiet: list[float] = []
    bad: list[str] = []

    def recall(i: int) -> float:
        t = time.perf_counter()
        try:
            res = call(d.socket, "recall", {"query": QUERIES[i % len(QUERIES)], "project": str(proj)})
            if not isinstance(res, dict) or not isinstance(res.get("markdown"), str):
                bad.append(f"bad result {res!r}"[:200])
        except RpcError as exc:
            bad.append(str(exc)[:200])
        return (time.perf_counter() - t) * 1000

    t1 = time.perf_counter()
    i = 0
    caught_up = None
    next_check = 0.0
    pending = (derive0, index0)
    timeline: list[tuple[float, ...]] = []  # (s after the burst, recall ms, derive pending, index pending)
    while True:
        ms = recall(i)
        timeline.append((round(time.perf_counter() - t1, 3), round(ms, 2), *pending))
        if i < FIRST:
            first.append(ms)
        if any(pending):
            during.append(ms)
        i += 1
        now = time.perf_counter()
        if now >= next_check:
            pending = _pending(d.db)
            next_check = now + 0.1
            if not any(pending) and caught_up is None:
                caught_up = now - t1
        if caught_up is not None and i >= FIRST:
            break
        if now - t1 > 600:
            break
        time.sleep(PACE_S)
    for j in range(QUIET_N):
        quiet.append(recall(i + j))
        time.sleep(PACE_S)
    return {"events": n_clients * per_client, "burst_s": round(wall, 3), "n_errors": len(errors), "errors": errors[:5],
            "derive_pending_at_end": derive0, "index_pending_at_end": index0,
            "catch_up_s": round(caught_up, 3) if caught_up is not None else None,
            "recall_first_ms": dist(first), "recall_during_ms": dist(during) if during else None,
            "recall_quiet_ms": dist(quiet), "recall_errors": bad[:5], "n_recall_errors": len(bad),
            "timeline": timeline}


def run(quick: bool, log: Any = print) -> dict[str, Any]:
    per_client = 150 if quick else 2500
    with project_daemon("clbb-") as (base, proj, d):
        log(f"  burst: 8 x {per_client} events, then recall every {PACE_S * 1000:.0f} ms until caught up")
        res = burst(d, base, proj, 8, per_client)
    log(f"    burst {res['events']} events in {res['burst_s']}s; backlog at the end: derive {res['derive_pending_at_end']},"
        f" index {res['index_pending_at_end']}; caught up in {res['catch_up_s']}s")
    note = (f"{res['events']} events in {res['burst_s']}s, backlog derive {res['derive_pending_at_end']} / index"
            f" {res['index_pending_at_end']}; caught up in {res['catch_up_s']}s; recall errors {res['n_recall_errors']}")
    rows = [["burst.recall immediately after (first 30)", res["recall_first_ms"], "ms", note]]
    if res["recall_during_ms"]:
        rows.append(["burst.recall during catch-up", res["recall_during_ms"], "ms", "every recall while work was pending"])
    rows.append(["burst.recall caught up", res["recall_quiet_ms"], "ms", "reference: a quiet daemon"])
    worst = max(res["recall_first_ms"]["p95"], (res["recall_during_ms"] or {"p95": 0.0})["p95"])
    targets = [target("3 recall p95 right after a burst and during catch-up", worst, 10.0, unit="ms",
                      note=f"{res['events']} events over the socket, 8 clients")]
    return {"rows": rows, "targets": targets, "data": res}
