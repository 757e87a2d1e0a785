"""Target 5: daemon memory and descriptors.

8 client threads send the realistic mix of bench_daemon (PreToolUse, PostToolUse with log-normal
outputs and growing transcripts, UserPromptSubmit, Stop); every client starts a new session every
500 events, so 100k events cover 200 sessions. RSS (/proc/<pid>/status VmRSS) and open
descriptors (/proc/<pid>/fd) are read after 100k events, then sampled every 1k events through a
further 10k-event soak: growth over the soak must stay within 5 MB and 2 descriptors.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import msgspec
from _common import (Daemon, adapt, call, project_daemon, sample, target)
from bench_daemon import Client

SESSION_EVENTS = 500


def _drive(d: Daemon, base: Path, proj: Path, total: int, n_clients: int, first_k: int) -> int:
    per = total // n_clients
    errors = [0]
    lock = threading.Lock()

    def worker(k: int) -> None:
        c = None
        for i in range(per):
            if i % SESSION_EVENTS == 0:
                if c is not None:
                    c.transcript.unlink(missing_ok=True)
                c = Client(base, proj, first_k + k * 10_000 + i)
                call(d.socket, "hook", msgspec.json.encode(
                    adapt(sample("SessionStart:startup"), c.sid, c.proj, str(c.transcript))))
            _ev, line, b = c.mixed(i)
            c.append(line)
            try:
                call(d.socket, "hook", b)
            except Exception:  # noqa: BLE001
                with lock:
                    errors[0] += 1
        if c is not None:
            c.transcript.unlink(missing_ok=True)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n_clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors[0]


def run(quick: bool, log: Any = print) -> dict[str, Any]:
    warm = 5_000 if quick else 100_000
    soak = 2_000 if quick else 10_000
    step = 500 if quick else 1_000
    with project_daemon("clbm-") as (base, proj, d):
        rss0, fds0 = d.rss_kb(), d.fds()
        log(f"  memory: {warm:,} events (8 clients), then a {soak:,}-event soak; idle RSS {rss0 / 1024:.1f} MB")
        errors = 0
        done = 0
        curve = []
        while done < warm:
            chunk = min(10_000, warm - done)
            errors += _drive(d, base, proj, chunk, 8, done)
            done += chunk
            curve.append((done, d.rss_kb(), d.fds()))
            log(f"    {done:>7,} events: RSS {curve[-1][1] / 1024:.1f} MB, fds {curve[-1][2]}")
        rss_w, fds_w = d.rss_kb(), d.fds()
        soak_curve = [(0, rss_w, fds_w)]
        s = 0
        while s < soak:
            errors += _drive(d, base, proj, step, 8, 10_000_000 + s)
            s += step
            soak_curve.append((s, d.rss_kb(), d.fds()))
        status = call(d.socket, "status", {"limit": 1})
    rss_end, fds_end = soak_curve[-1][1], soak_curve[-1][2]
    growth_mb = (rss_end - rss_w) / 1024
    max_growth_mb = (max(r for _, r, _ in soak_curve) - rss_w) / 1024
    fd_growth = max(f for _, _, f in soak_curve) - fds_w
    rows = [
        ["memory.RSS idle after start", round(rss0 / 1024, 1), "MB", f"fds {fds0}"],
        [f"memory.RSS after {warm:,} events", round(rss_w / 1024, 1), "MB", f"fds {fds_w}; events in store {status['events']}"],
        [f"memory.RSS growth over {soak:,}-event soak", round(growth_mb, 2), "MB",
         f"max {max_growth_mb:.2f} MB; fds {fds_w}->{fds_end} (max +{fd_growth})"],
    ]
    targets = [
        target(f"5 RSS after {warm:,} events", rss_w / 1024, 80, unit=" MB"),
        target(f"5 RSS growth across {soak:,}-event soak (max over samples)", max_growth_mb, 5, unit=" MB"),
        target(f"5 fd growth across {soak:,}-event soak", fd_growth, 2, unit=" fds"),
    ]
    if errors:
        targets.append(target("5 no errors while driving", errors, 0))
    return {"rows": rows, "targets": targets,
            "data": {"idle": {"rss_kb": rss0, "fds": fds0}, "warm_curve": curve, "soak_curve": soak_curve,
                     "errors": errors, "events_total": status["events"]}}
