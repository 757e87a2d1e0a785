"""Target 3 under load: recall right after a burst of hooks, while the daemon catches up.

8 client threads send the realistic mix of ``bench_daemon`` (40% PreToolUse, 40% PostToolUse with
log-normal outputs, 10% UserPromptSubmit, 10% Stop) as fast as the daemon answers, 20,000 events in
all (1,200 with ``--quick``). The moment the last reply arrives, one client starts recalling over
the socket (one connection per request, what ``ctxlifectl recall`` does), 20 ms apart, cycling
through three two-word queries and, every fourth recall, a word found nowhere (``NOWHERE``: the
search that falls back to the trigram substring path and reads it to the end), until the
derivation backlog and the trigram backlog are both empty (read from the store directly, so the
measuring does not itself wait for anything), then 30 of each kind on the quiet daemon. Reported
(p50/p95/p99), for the ordinary queries and the word found nowhere apart: the first 30 recalls
(immediately after), every recall while work was pending (during catch-up), the quiet ones (caught
up), and how long the catch-up took. Each recall's reply is checked (a Markdown answer, no error;
``query_too_broad`` is counted apart).
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
# Found in no row: its trigrams are common in the burst's text (the substring path reads its
# whole span); one recall in NOWHERE_EVERY asks for it.
NOWHERE = "checkpointing"
NOWHERE_EVERY = 4
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
    first_nowhere: list[float] = []
    during_nowhere: list[float] = []
    quiet_nowhere: list[float] = []
    bad: list[str] = []
    too_broad = {"ordinary": 0, "nowhere": 0}

    def recall(i: int, nowhere: bool | None = None) -> tuple[float, bool]:
        """(ms, nowhere?) of the i-th recall (every NOWHERE_EVERY-th asks for NOWHERE unless told)."""
        if nowhere is None:
            nowhere = i % NOWHERE_EVERY == NOWHERE_EVERY - 1
        query = NOWHERE if nowhere else QUERIES[(i - i // NOWHERE_EVERY) % len(QUERIES)]
        t = time.perf_counter()
        try:
            res = call(d.socket, "recall", {"query": query, "project": str(proj)})
            if not isinstance(res, dict) or not isinstance(res.get("markdown"), str):
                bad.append(f"bad result {res!r}"[:200])
        except RpcError as exc:
            if "too broad" in str(exc):
                too_broad["nowhere" if nowhere else "ordinary"] += 1
            bad.append(f"{query}: {exc}"[:200])
        return (time.perf_counter() - t) * 1000, nowhere

    t1 = time.perf_counter()
    i = 0
    caught_up = None
    next_check = 0.0
    pending = (derive0, index0)
    timeline: list[tuple[float, ...]] = []  # (s after the burst, recall ms, nowhere?, derive pending, index pending)
    while True:
        ms, nowhere = recall(i)
        timeline.append((round(time.perf_counter() - t1, 3), round(ms, 2), int(nowhere), *pending))
        if i < FIRST:
            (first_nowhere if nowhere else first).append(ms)
        if any(pending):
            (during_nowhere if nowhere else during).append(ms)
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
    for j in range(2 * QUIET_N):  # caught up: each kind QUIET_N times, in turn
        ms, nowhere = recall(i + j, nowhere=bool(j % 2))
        (quiet_nowhere if nowhere else quiet).append(ms)
        time.sleep(PACE_S)
    return {"events": n_clients * per_client, "burst_s": round(wall, 3), "n_errors": len(errors), "errors": errors[:5],
            "derive_pending_at_end": derive0, "index_pending_at_end": index0,
            "catch_up_s": round(caught_up, 3) if caught_up is not None else None,
            "recall_first_ms": dist(first), "recall_during_ms": dist(during) if during else None,
            "recall_quiet_ms": dist(quiet),
            "nowhere_first_ms": dist(first_nowhere) if first_nowhere else None,
            "nowhere_during_ms": dist(during_nowhere) if during_nowhere else None,
            "nowhere_quiet_ms": dist(quiet_nowhere),
            "recall_errors": bad[:5], "n_recall_errors": len(bad), "too_broad": too_broad,
            "timeline": timeline}


def run(quick: bool, log: Any = print) -> dict[str, Any]:
    per_client = 150 if quick else 2500
    with project_daemon("clbb-") as (base, proj, d):
        log(f"  burst: 8 x {per_client} events, then recall every {PACE_S * 1000:.0f} ms until caught up")
        res = burst(d, base, proj, 8, per_client)
    log(f"    burst {res['events']} events in {res['burst_s']}s; backlog at the end: derive {res['derive_pending_at_end']},"
        f" index {res['index_pending_at_end']}; caught up in {res['catch_up_s']}s")
    tb = res["too_broad"]
    note = (f"{res['events']} events in {res['burst_s']}s, backlog derive {res['derive_pending_at_end']} / index"
            f" {res['index_pending_at_end']}; caught up in {res['catch_up_s']}s; recall errors {res['n_recall_errors']}"
            f" (query_too_broad: {tb['ordinary']} ordinary, {tb['nowhere']} word found nowhere)")
    rows = [["burst.recall immediately after (first 30)", res["recall_first_ms"], "ms", note]]
    if res["recall_during_ms"]:
        rows.append(["burst.recall during catch-up", res["recall_during_ms"], "ms", "every recall while work was pending"])
    rows.append(["burst.recall caught up", res["recall_quiet_ms"], "ms", "reference: a quiet daemon"])
    if res["nowhere_during_ms"]:
        rows.append(["burst.recall word found nowhere, during catch-up", res["nowhere_during_ms"], "ms",
                     f"{NOWHERE!r}, every {NOWHERE_EVERY}th recall"])
    rows.append(["burst.recall word found nowhere, caught up", res["nowhere_quiet_ms"], "ms", f"{NOWHERE!r}"])
    worst = max(res["recall_first_ms"]["p95"], (res["recall_during_ms"] or {"p95": 0.0})["p95"],
                (res["nowhere_during_ms"] or {"p95": 0.0})["p95"], res["nowhere_quiet_ms"]["p95"])
    targets = [target("3 recall p95 right after a burst and during catch-up", worst, 10.0, unit="ms",
                      note=f"{res['events']} events over the socket, 8 clients")]
    return {"rows": rows, "targets": targets, "data": res}
