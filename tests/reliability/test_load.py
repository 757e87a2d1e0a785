"""Load: concurrent clients, slow and silent connections, descriptor exhaustion, connect/close churn.

Matrix rows C1-C7 of docs/reliability.md.
"""

from __future__ import annotations

import json
import random
import resource
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from typing import Any

import pytest

from ._harness import SEED, check_reply, connect, frame, hook, mixed_hook, pct, proc_stats, query, recv_line, wait_until

SLOW = pytest.mark.slow


# -- C1: concurrent clients with mixed requests ---------------------------------------------------------
def _client(path: str, cid: int, n: int, persistent: bool, lat: list[float], outcomes: Counter[str],
            acked: list[str], lock: threading.Lock) -> None:
    rng = random.Random(SEED + cid)
    s = connect(path, timeout=30) if persistent else None
    buf = bytearray()
    try:
        for i in range(n):
            k = rng.random()
            rid = f"c{cid}-{i}"
            if k < 0.5:
                data = frame("hook", mixed_hook(rng, f"load-{cid % 16}", f"/tmp/loadproj{cid % 4}", i, marker=rid), rid)
            elif k < 0.7:
                data = frame("recall", {"query": rng.choice(["refactor", "pytest passed", "module", "step 3", "错误"]),
                                        "cwd": f"/tmp/loadproj{cid % 4}"}, rid)
            elif k < 0.85:
                data = frame("status", {"cwd": f"/tmp/loadproj{cid % 4}", "limit": 5}, rid)
            else:
                data = frame("ping", {}, rid)
            t0 = time.perf_counter()
            try:
                if not persistent:
                    s = connect(path, timeout=30)
                    buf = bytearray()
                assert s is not None
                s.sendall(data)
                line = recv_line(s, buf, timeout=30)
                if not persistent:
                    s.close()
                if line is None:
                    outcome = "closed"
                else:
                    (r,) = check_reply(json.loads(line))
                    outcome = "ok" if "result" in r else r["error"].get("data", {}).get("name", str(r["error"]["code"]))
                    if outcome == "ok" and k < 0.5:
                        with lock:
                            acked.append(rid)
            except (OSError, TimeoutError) as exc:
                outcome = type(exc).__name__
            with lock:
                lat.append((time.perf_counter() - t0) * 1000)
                outcomes[outcome] += 1
    finally:
        if s is not None:
            s.close()


@pytest.mark.parametrize(("clients", "per_client"), [(64, 12), pytest.param(64, 100, marks=SLOW)], ids=["fast", "long"])
def test_concurrent_clients_mixed_requests(rdaemon: Any, figures: Any, clients: int, per_client: int) -> None:
    """64 clients (half persistent, half connect-per-request) x mixed hook/recall/status/ping:
    0 errors, 0 SQLITE_BUSY surfaced, every acknowledged hook stored."""
    d = rdaemon()
    d.start()
    lat: list[float] = []
    outcomes: Counter[str] = Counter()
    acked: list[str] = []
    lock = threading.Lock()
    threads = [threading.Thread(target=_client, args=(d.socket, c, per_client, c % 2 == 0, lat, outcomes, acked, lock))
               for c in range(clients)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    wall = time.monotonic() - t0
    total = clients * per_client
    errors = total - outcomes.get("ok", 0)
    busy_logged = d.log_text().count("database is locked") + d.log_text().count("SQLITE_BUSY")
    stored = query(d.db, "SELECT count(*) FROM events WHERE rid LIKE 'c%'")[0][0]
    figures.record("requests", total, n=clients)
    figures.record("throughput_rps", round(total / wall, 1), "req/s")
    figures.record("p50_ms", round(pct(lat, 50), 2), "ms", n=len(lat))
    figures.record("p99_ms", round(pct(lat, 99), 2), "ms", n=len(lat))
    figures.record("max_ms", round(max(lat), 2), "ms", n=len(lat))
    figures.record("errors", errors, outcomes=dict(outcomes))
    figures.record("busy_errors", outcomes.get("busy", 0) + busy_logged)
    figures.record("acked_hooks_stored", stored, n=len(acked))
    assert {"ok": total} == dict(outcomes)
    assert 0 == busy_logged
    assert len(acked) == stored


# -- C4: slow (1 byte/s) and silent connections -----------------------------------------------------------
def _legit_latencies(path: str, n: int) -> list[float]:
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        with connect(path, timeout=10) as s:
            s.sendall(frame("ping" if i % 2 else "status", {"limit": 1} if i % 2 == 0 else {}, i))
            line = recv_line(s, bytearray(), timeout=10)
        assert line is not None and "result" in json.loads(line)
        out.append((time.perf_counter() - t0) * 1000)
    return out


# The attacker runs in its own process, so its 400 sockets do not compete with the measured client
# for this process's GIL: the figures measure the daemon, not the test harness.
ATTACKER = r"""
import json, selectors, socket, sys, time
path, slow, silent, limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
req = b'{"jsonrpc":"2.0","method":"ping","params":{},"id":"slow"}\n'
socks, opened = [], []
for i in range(slow + silent):
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            break
        except BlockingIOError:
            s.close(); time.sleep(0.002)
    s.setblocking(False)
    socks.append(s); opened.append(time.monotonic())
sel = selectors.DefaultSelector()
for i, s in enumerate(socks):
    sel.register(s, selectors.EVENT_READ, i)
print("ready", flush=True)
closed, pos = {}, [0] * slow
t0 = time.monotonic()
due = [t0 + i / max(1, slow) for i in range(slow)]  # each sends 1 byte/s, spread over the second
end = t0 + limit
while len(closed) < len(socks) and time.monotonic() < end:
    now = time.monotonic()
    for i in range(slow):
        if i not in closed and due[i] <= now and pos[i] < len(req) - 1:  # never the final newline
            try:
                socks[i].send(req[pos[i]:pos[i] + 1])
            except OSError:
                pass
            if pos[i] == 0:
                opened[i] = time.monotonic()  # a slow request's deadline runs from its first byte
            pos[i] += 1
            due[i] += 1.0
    wait = max(0.0, min([due[i] for i in range(slow) if i not in closed] + [now + 0.05]) - time.monotonic())
    for key, _ in sel.select(timeout=min(0.05, wait)):
        i = key.data
        try:
            data = socks[i].recv(4096)
        except BlockingIOError:
            continue
        except OSError:
            data = b""
        if not data:
            closed[i] = time.monotonic() - opened[i]
            sel.unregister(socks[i])
print(json.dumps({str(k): v for k, v in closed.items()}), flush=True)
"""


@pytest.mark.parametrize("capacity", ["ample", "default"])
@pytest.mark.parametrize(("slow", "silent", "timeout_s"), [(200, 200, 1.5), pytest.param(200, 200, 10.0, marks=SLOW)],
                         ids=["fast", "long"])
def test_slow_and_silent_connections(rdaemon: Any, figures: Any, capacity: str, slow: int, silent: int, timeout_s: float) -> None:
    """200 connections trickling a request at 1 byte/s and 200 silent ones: a normal client's p99 stays
    within 2x its unloaded value; slow ones are closed at the request deadline, silent ones at the idle
    deadline. With the default cap (256 < 400) the cap evicts the laziest connections instead of
    refusing the normal client."""
    extra = {"CTXLIFED_REQUEST_TIMEOUT": str(timeout_s), "CTXLIFED_IDLE_TIMEOUT": str(timeout_s)}
    if capacity == "ample":
        extra["CTXLIFED_MAX_CONNECTIONS"] = "1024"
    d = rdaemon(**extra)
    d.start()
    samples = 400 if timeout_s < 5 else 2000
    _legit_latencies(d.socket, 50)  # warm-up
    base = _legit_latencies(d.socket, samples)
    att = subprocess.Popen([sys.executable, "-c", ATTACKER, d.socket, str(slow), str(silent), str(timeout_s * 3 + 10)],
                           stdout=subprocess.PIPE, text=True)
    try:
        assert att.stdout is not None and att.stdout.readline().strip() == "ready"
        fds_peak = proc_stats(d.pid)["fds"]
        loaded = _legit_latencies(d.socket, samples)
        fds_peak = max(fds_peak, proc_stats(d.pid)["fds"])
        closed = {int(k): v for k, v in json.loads(att.stdout.readline() or "{}").items()}
        att.wait(30)
    finally:
        if att.poll() is None:
            att.kill()
            att.wait()
        if att.stdout is not None:
            att.stdout.close()
    slow_after = [closed[i] for i in range(slow) if i in closed]
    silent_after = [closed[i] for i in range(slow, slow + silent) if i in closed]
    early = sum(1 for x in slow_after + silent_after if x < timeout_s * 0.9)
    b99, l99 = pct(base, 99), pct(loaded, 99)
    figures.record("legit_p99_ms_unloaded", round(b99, 2), "ms", n=len(base))
    figures.record("legit_p99_ms_under_attack", round(l99, 2), "ms", n=len(loaded))
    figures.record("p99_ratio", round(l99 / b99, 2), "x")
    figures.record("slow_closed_after_s_p50", round(pct(slow_after, 50), 2), "s", n=len(slow_after))
    figures.record("slow_closed_after_s_max", round(max(slow_after), 2), "s", n=len(slow_after))
    figures.record("silent_closed_after_s_p50", round(pct(silent_after, 50), 2), "s", n=len(silent_after))
    figures.record("closed_before_deadline", early, note="evicted to make room" if capacity == "default" else "")
    figures.record("max_open_fds", fds_peak)
    # 2x the unloaded p99, with 1.5 ms of slack, gated in the long tier only (2000 samples, `make
    # reliability` on a quiet machine): a 400-sample p99 of about 1 ms is a timing figure, not a
    # behaviour, and a busy 2-CPU runner moves it past any fixed bound. The fast tier records it and
    # checks the behaviour: every slow and silent connection closed at its deadline, none early.
    if timeout_s >= 5:
        assert l99 <= 2 * b99 + 1.5, (b99, l99)
    assert len(slow_after) == slow and len(silent_after) == silent
    assert max(slow_after + silent_after) < timeout_s + 2.5
    if capacity == "ample":
        assert 0 == early
        assert min(slow_after) >= timeout_s * 0.9
    assert d.alive() and d.rpc("ping")["result"]["pong"]


# -- C5: descriptor exhaustion ------------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["ulimit_at_start", "limit_lowered_while_running"])
def test_descriptor_flood_survives_and_recovers(rdaemon: Any, figures: Any, how: str) -> None:
    """With 64 descriptors, a flood of 300 connections (silent, and sending requests): the daemon stays
    alive, keeps answering or recovers within a second after the flood, and its warnings are rate-limited."""
    d = rdaemon(CTXLIFED_IDLE_TIMEOUT="30", CTXLIFED_REQUEST_TIMEOUT="30")
    if how == "ulimit_at_start":
        d.start(nofile=64)
    else:
        d.start()
        resource.prlimit(d.pid, resource.RLIMIT_NOFILE, (64, 64))
    flood: list[socket.socket] = []
    refused = 0
    t_flood = time.monotonic()
    for i in range(300):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(d.socket)
            if i % 3 == 0:
                s.send(frame("ping", {}, f"flood{i}"))
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            refused += 1
            s.close()
            continue
        flood.append(s)
    during_ok = 0
    for _ in range(10):  # a normal client during the flood
        try:
            during_ok += "result" in d.rpc("ping", timeout=0.5)
        except (OSError, TimeoutError, ConnectionError):
            pass
    peak = proc_stats(d.pid)["fds"]
    flood_s = time.monotonic() - t_flood
    for s in flood:
        s.close()
    t0 = time.monotonic()

    def pong() -> bool:
        try:
            return "result" in d.rpc("ping", timeout=1)
        except (OSError, TimeoutError, ConnectionError):
            return False

    wait_until(pong, timeout=20)
    recovery_ms = (time.monotonic() - t0) * 1000
    elapsed = time.monotonic() - t_flood
    warn_lines = len(d.log_events("accept_failed")) + len(d.log_events("connection_evicted"))
    figures.record("flood_connections", 300, refused_at_connect=refused)
    figures.record("peak_daemon_fds", peak, "fds", limit=64)
    figures.record("normal_pings_ok_during_flood", during_ok, n=10)
    figures.record("recovery_ms", round(recovery_ms, 1), "ms")
    figures.record("accept_error_log_lines", len(d.log_events("accept_failed")), window_s=round(elapsed, 1))
    figures.record("eviction_log_lines", len(d.log_events("connection_evicted")), window_s=round(elapsed, 1))
    figures.record("daemon_alive", d.alive())
    assert d.alive()
    assert recovery_ms < 2000
    assert warn_lines <= 2 * (int(elapsed / 5) + 1)  # at most one line per kind per 5 s
    assert peak <= 64
    del flood_s


# -- C7: connect/request/close churn ------------------------------------------------------------------------
@pytest.mark.parametrize("cycles", [1000, pytest.param(10_000, marks=SLOW)], ids=["fast", "long"])
def test_connect_request_close_cycles_leak_nothing(rdaemon: Any, figures: Any, cycles: int) -> None:
    """N connect/request/close cycles (ping, status, hook; some closed mid-request): descriptors and
    threads flat, RSS within 10 MiB."""
    d = rdaemon()
    d.start()
    rng = random.Random(SEED)

    def cycle(i: int) -> None:
        s = connect(d.socket, timeout=10)
        try:
            k = i % 10
            if k == 9:  # hang up mid-frame
                s.sendall(b'{"jsonrpc":"2.0","method":"pi')
                return
            if k == 8:  # hang up before reading the answer
                s.sendall(frame("ping", {}, i))
                return
            data = (frame("hook", mixed_hook(rng, "churn", "/tmp/churn", i), i) if k < 3
                    else frame("status", {"limit": 2}, i) if k < 5 else frame("ping", {}, i))
            s.sendall(data)
            assert recv_line(s, bytearray(), timeout=10) is not None
        finally:
            s.close()

    for i in range(150):  # warm-up: worker threads, caches, first allocations
        cycle(i)
    wait_until(lambda: d.rpc("ping")["result"], timeout=5)
    before = proc_stats(d.pid)
    t0 = time.monotonic()
    for i in range(cycles):
        cycle(i)
    took = time.monotonic() - t0
    wait_until(lambda: proc_stats(d.pid)["fds"] <= before["fds"] + 2, timeout=10)  # half-closed ones drain
    after = proc_stats(d.pid)
    figures.record("cycles", cycles)
    figures.record("cycles_per_s", round(cycles / took, 1), "1/s")
    figures.record("fd_delta", after["fds"] - before["fds"])
    figures.record("thread_delta", after["threads"] - before["threads"])
    figures.record("rss_delta_mib", round((after["rss_kb"] - before["rss_kb"]) / 1024, 2), "MiB")
    assert after["fds"] - before["fds"] <= 2
    assert after["threads"] - before["threads"] <= 2
    assert after["rss_kb"] - before["rss_kb"] <= 10 * 1024
