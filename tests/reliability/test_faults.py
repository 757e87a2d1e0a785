"""Faults: kill -9 at random points, a shim facing a bad daemon, signals, stale files, lost sockets, skew.

Matrix rows A1-A9 of docs/reliability.md. What tests/test_daemon_runtime.py and tests/test_shim.py
already pin (stale socket+lock after one kill -9, socket removed, second daemon refused, the shim's
functional fail-open cases) is not repeated here; these tests add trials, timings and the cases
those files do not cover.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ._harness import (
    SEED,
    check_reply,
    connect,
    db_checks,
    frame,
    hook,
    mixed_hook,
    pct,
    query,
    recv_line,
    rpc,
    run_shim_timed,
    wait_until,
)

LONG = pytest.mark.slow


# -- A4: kill -9 at seeded random points --------------------------------------------------------------
def _stream(path: str, name: str, rng: random.Random, acked: set[str], sent: list[int], stop: threading.Event,
            batch: int) -> None:
    """Stream hook events with unique request ids until the daemon dies; record what it acknowledged."""
    i = 0
    try:
        s = connect(path, timeout=5)
    except OSError:
        return
    buf = bytearray()
    try:
        while not stop.is_set():
            reqs = []
            for _ in range(batch):
                i += 1
                rid = f"{name}-{i}"
                reqs.append({"jsonrpc": "2.0", "id": rid, "method": "hook",
                             "params": mixed_hook(rng, f"kill-{name}", "/tmp/kill9proj", i, marker=rid)})
            data = json.dumps(reqs if batch > 1 else reqs[0], separators=(",", ":")).encode() + b"\n"
            s.sendall(data)
            sent[0] += batch
            line = recv_line(s, buf, timeout=5)
            if line is None:
                return
            for r in check_reply(json.loads(line)):
                if "result" in r:
                    acked.add(r["id"])
    except (OSError, TimeoutError, ValueError):
        return
    finally:
        s.close()


@pytest.mark.parametrize("trials", [10, pytest.param(50, marks=LONG)], ids=["fast", "long"])
def test_kill9_at_random_points_loses_nothing_acknowledged(rdaemon: Any, figures: Any, trials: int) -> None:
    """kill -9 while 4 clients stream events (one in batches): every acknowledged event survives,
    integrity_check and both FTS integrity checks are clean after every kill, restart needs no manual step."""
    rng = random.Random(SEED)
    d = rdaemon()
    d.start()
    acked: set[str] = set()
    sent = [0]
    ready_ms: list[float] = []
    integrity_failures = fts_failures = 0
    details = []
    for t in range(trials):
        stop = threading.Event()
        threads = [threading.Thread(target=_stream, args=(d.socket, f"t{t}c{c}", random.Random(rng.random()), acked,
                                                          sent, stop, 8 if c == 3 else 1), daemon=True)
                   for c in range(4)]
        for th in threads:
            th.start()
        kill_at = rng.uniform(0.05, 0.4)
        time.sleep(kill_at)  # the seeded random kill point (not a readiness wait)
        d.kill9()
        stop.set()
        for th in threads:
            th.join(10)
        chk = db_checks(d.db)
        if chk["integrity"] != "ok":
            integrity_failures += 1
            details.append(chk)
        if any(v != "ok" for v in chk["fts"].values()):
            fts_failures += 1
            details.append(chk)
        d.start()
        ready_ms.append(d.ready_ms)
    stored = {r[0] for r in query(d.db, "SELECT rid FROM events WHERE rid IS NOT NULL")}
    dup = query(d.db, "SELECT count(*) - count(DISTINCT rid) FROM events WHERE rid IS NOT NULL")[0][0]
    lost = sorted(acked - stored)
    # Write-behind: what a kill left answered but not derived is derived after the restart.
    # The clients streamed without a gap, so derivation mostly waited (it yields to replies): the
    # backlog carried over the kills is derived once the stream stops.
    behind_at_restart = query(d.db, "SELECT count(*) FROM events WHERE pending = 1")[0][0]
    t_catch = time.monotonic()
    while d.rpc("status", {"limit": 1})["result"].get("derive_pending", 0) and time.monotonic() - t_catch < 300:
        pass  # each status waits up to 5 s for the backlog
    still_pending = query(d.db, "SELECT count(*) FROM events WHERE pending = 1")[0][0]
    figures.record("pending_after_last_restart", behind_at_restart, "events")
    figures.record("catch_up_s", round(time.monotonic() - t_catch, 1), "s")
    figures.record("pending_after_catch_up", still_pending, "events")
    figures.record("trials", trials, seed=SEED)
    figures.record("events_acknowledged", len(acked), n=sent[0])
    figures.record("acked_lost", len(lost), "events", n=len(acked))
    figures.record("duplicates", dup, "events")
    figures.record("integrity_failures", integrity_failures, n=trials)
    figures.record("fts_integrity_failures", fts_failures, n=trials)
    figures.record("restart_to_ready_ms_p50", round(pct(ready_ms, 50), 1), "ms", n=len(ready_ms))
    figures.record("restart_to_ready_ms_p95", round(pct(ready_ms, 95), 1), "ms", n=len(ready_ms))
    figures.record("restart_to_ready_ms_max", round(max(ready_ms), 1), "ms", n=len(ready_ms))
    assert len(acked) > trials  # the stream really ran
    assert [] == lost
    assert 0 == dup
    assert 0 == still_pending
    assert (0, 0) == (integrity_failures, fts_failures), details
    assert d.rpc("ping")["result"]["pong"] is True


# -- A9: the shim against an absent, stopped, slow or garbage daemon ----------------------------------------
PAYLOAD = hook("UserPromptSubmit", "0f1e2d3c-aaaa-bbbb-cccc-00000000f00d", "/tmp", prompt="fail open please")


def _fake_daemon(path: str, behaviour: str, delay: float) -> socket.socket:
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(64)

    def handle(conn: socket.socket) -> None:
        with conn:
            buf = bytearray()
            try:
                line = recv_line(conn, buf, timeout=5)
                rid = json.loads(line)["id"] if line else None
                if behaviour == "slow":
                    time.sleep(delay)
                    conn.sendall(json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"stdout": "LATE", "exit_code": 0}}).encode() + b"\n")
                else:
                    conn.sendall(b"\x00\xff{not json\n")
            except OSError:
                pass

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return srv


@pytest.mark.parametrize("case", ["absent", "sigstop", "slow", "garbage"])
@pytest.mark.parametrize(("runs", "deadline"), [(6, 0.2), pytest.param(50, 0.5, marks=LONG)], ids=["fast", "long"])
def test_shim_fails_open_within_its_deadline(rdaemon: Any, figures: Any, case: str, runs: int, deadline: float) -> None:
    """Absent, SIGSTOPped, slow (answers after the deadline) or garbage: exit 0, no output, every time;
    the event is spooled and, once a real daemon is back, stored exactly once."""
    d = rdaemon(CTXLIFED_HOOK_DEADLINE=str(deadline), CTXLIFED_DAEMON_CMD="/bin/true")
    os.makedirs(os.path.dirname(d.socket), mode=0o700, exist_ok=True)
    fake = None
    if case == "sigstop":
        d.start()
        os.kill(d.pid, signal.SIGSTOP)
    elif case in ("slow", "garbage"):
        fake = _fake_daemon(d.socket, case, deadline + 0.3)
    walls, bad = [], []
    session = f"shim-{case}"
    try:
        for i in range(runs):
            r, ms = run_shim_timed(dict(PAYLOAD, session_id=session, prompt=f"fail open {case} {i}"), d.env)
            walls.append(ms)
            if (r.returncode, r.stdout, r.stderr) != (0, b"", b""):
                bad.append((r.returncode, r.stdout[:80], r.stderr[:200]))
    finally:
        if case == "sigstop":
            os.kill(d.pid, signal.SIGCONT)
        if fake is not None:
            fake.close()
            os.unlink(d.socket)
    spool = d.data_dir / "spool.jsonl"
    spooled = len(spool.read_bytes().splitlines()) if spool.exists() else 0
    figures.record("deadline_s", deadline)
    figures.record("shim_wall_ms_p50", round(pct(walls, 50), 1), "ms", n=runs)
    figures.record("shim_wall_ms_p99", round(pct(walls, 99), 1), "ms", n=runs)
    figures.record("shim_wall_ms_max", round(max(walls), 1), "ms", n=runs)
    figures.record("not_fail_open", len(bad), n=runs)
    assert [] == bad
    assert max(walls) < deadline * 1000 + 1500  # deadline plus interpreter start on a loaded machine
    # Nothing was acknowledged, so everything waits in the spool (SIGSTOP: the daemon may already have
    # ingested some after SIGCONT), and a real daemon stores each exactly once.
    if case != "sigstop":
        assert runs == spooled
        d.start()
    wait_until(lambda: not spool.exists() and not Path(f"{spool}.ingesting").exists())
    stored = wait_until(lambda: d.rpc("status", {"session": session})["result"]["sessions"], timeout=10)
    figures.record("stored_after_recovery", stored[0]["events"], "events", n=runs)
    assert runs == stored[0]["events"]


# -- A6: SIGTERM with requests in flight; a second signal forces exit -------------------------------------
def _hold_write_lock(db: Path) -> sqlite3.Connection:
    """Hold SQLite's write lock from outside: the daemon's writer waits (busy_timeout), requests stay in flight."""
    conn = sqlite3.connect(db, timeout=10, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    return conn


def _inflight(path: str, n: int, tag: str) -> tuple[list[threading.Thread], dict[str, Any], list[socket.socket]]:
    replies: dict[str, Any] = {}
    socks = [connect(path, timeout=30) for _ in range(n)]
    for i, s in enumerate(socks):
        s.sendall(frame("hook", hook("UserPromptSubmit", f"inflight-{tag}", "/tmp", prompt=f"in flight {i}"), f"{tag}{i}"))

    def wait(i: int, s: socket.socket) -> None:
        try:
            line = recv_line(s, bytearray(), timeout=30)
            replies[f"{tag}{i}"] = json.loads(line) if line else None
        except (OSError, TimeoutError) as exc:
            replies[f"{tag}{i}"] = repr(exc)
        finally:
            s.close()

    threads = [threading.Thread(target=wait, args=(i, s), daemon=True) for i, s in enumerate(socks)]
    for t in threads:
        t.start()
    return threads, replies, socks


def test_sigterm_answers_every_request_in_flight(rdaemon: Any, figures: Any) -> None:
    """SIGTERM while 20 requests wait on the store: all 20 are answered and stored, exit 0, socket gone."""
    d = rdaemon()
    d.start()
    assert "result" in d.rpc("hook", hook("SessionStart", "inflight-t", "/tmp"))  # schema and session ready
    lock = _hold_write_lock(d.db)
    threads, replies, _ = _inflight(d.socket, 20, "t")
    wait_until(lambda: d.rpc("ping")["result"])  # the daemon is up and the 20 are parked behind the lock
    t0 = time.monotonic()
    d.proc.send_signal(signal.SIGTERM)
    # The stop has begun while the lock is still held: no request can have been answered yet (each
    # needs a commit), whatever the timing.
    (stopping,) = wait_until(lambda: d.log_events("stopping"))
    assert {} == replies
    lock.execute("COMMIT")
    lock.close()
    code = d.proc.wait(timeout=30)
    shutdown_ms = (time.monotonic() - t0) * 1000
    for t in threads:
        t.join(10)
    answered = [k for k, v in replies.items() if isinstance(v, dict) and "result" in v]
    figures.record("inflight_sent", 20)
    figures.record("inflight_answered", len(answered), n=20)
    figures.record("inflight_completed_pct", 100.0 * len(answered) / 20, "%")
    figures.record("inflight_at_stop", stopping["in_flight"], n=20, note="the rest still queued to be accepted")
    figures.record("shutdown_ms", round(shutdown_ms, 1), "ms", note="includes the held lock, until the stop began")
    figures.record("exit_code", code)
    assert 20 == len(answered), replies
    assert 0 == code
    assert not os.path.exists(d.socket)
    stored = query(d.db, "SELECT count(*) FROM events WHERE rid LIKE 't%'")[0][0]
    assert 20 == stored


def test_second_signal_forces_exit(rdaemon: Any, figures: Any) -> None:
    """A stop that cannot finish (the store is locked) ends at once on a second signal; the store stays sound."""
    d = rdaemon()
    d.start()
    assert "result" in d.rpc("hook", hook("SessionStart", "force-t", "/tmp"))
    lock = _hold_write_lock(d.db)
    threads, replies, _ = _inflight(d.socket, 5, "f")
    wait_until(lambda: d.rpc("ping")["result"])
    d.proc.send_signal(signal.SIGTERM)
    wait_until(lambda: d.log_events("stopping"))
    assert d.alive()  # graceful stop is waiting for the 5 requests (they cannot commit: the lock is held)
    t0 = time.monotonic()
    d.proc.send_signal(signal.SIGINT)
    code = d.proc.wait(timeout=10)
    force_ms = (time.monotonic() - t0) * 1000
    lock.execute("ROLLBACK")
    lock.close()
    for t in threads:
        t.join(10)
    figures.record("force_exit_ms", round(force_ms, 1), "ms")
    figures.record("exit_code", code)
    assert 1 == code
    assert force_ms < 2000
    assert db_checks(d.db)["ok"]
    d.start()  # and the next start recovers with no manual step
    assert d.rpc("ping")["result"]["pong"]


# -- A5/A7: stale spool after kill -9, a frozen daemon keeps its socket, a replaced socket ----------------------
def test_stale_spool_after_kill9_is_ingested_exactly_once(rdaemon: Any, figures: Any) -> None:
    """kill -9 in the middle of ingesting a spool leaves spool.jsonl.ingesting behind; the next start
    finishes it (and a newer spool.jsonl) with no manual step, each event stored once."""
    rng = random.Random(SEED + 5)
    d = rdaemon()
    d.data_dir.mkdir(parents=True, exist_ok=True)
    n = 800
    lines = []
    for i in range(n):
        p = mixed_hook(rng, "spool-kill", "/tmp/spoolproj", i, marker=f"sp{i}")
        lines.append(json.dumps({"rid": f"sp-{i:05d}", "ts": time.time(), "payload": p}, separators=(",", ":")))
    (d.data_dir / "spool.jsonl").write_text("\n".join(lines) + "\n")
    # Start and kill -9 during the ingestion that precedes READY.
    d.start(expect_ready=False)
    work = d.data_dir / "spool.jsonl.ingesting"
    wait_until(lambda: work.exists(), timeout=20, interval=0.005)
    wait_until(lambda: query(d.db, "SELECT count(*) FROM events")[0][0] > 20, timeout=20, interval=0.005)
    d.kill9()
    partial = query(d.db, "SELECT count(*) FROM events")[0][0]
    assert work.exists() and 0 < partial < n, partial
    # A newer spool written meanwhile (the shim keeps spooling while no daemon answers).
    (d.data_dir / "spool.jsonl").write_text(json.dumps({"rid": "sp-new", "ts": time.time(),
                                                        "payload": hook("UserPromptSubmit", "spool-kill", "/tmp/spoolproj", prompt="newer")}) + "\n")
    t0 = time.monotonic()
    d.start()
    wait_until(lambda: not work.exists() and not (d.data_dir / "spool.jsonl").exists())
    recovery_ms = (time.monotonic() - t0) * 1000
    total, distinct = query(d.db, "SELECT count(*), count(DISTINCT rid) FROM events WHERE rid LIKE 'sp-%'")[0]
    figures.record("spool_events", n + 1)
    figures.record("ingested_before_kill", partial)
    figures.record("stored_after_recovery", total, n=n + 1)
    figures.record("duplicates", total - distinct)
    figures.record("stale_recovery_ms", round(recovery_ms, 1), "ms")
    assert (n + 1, n + 1) == (total, distinct)


def test_frozen_daemon_keeps_its_socket(rdaemon: Any, figures: Any) -> None:
    """A second daemon started while the first is SIGSTOPped (unresponsive, socket looks dead) is refused:
    the lock, not a connect probe, decides; the socket inode is unchanged."""
    d = rdaemon()
    d.start()
    ino = os.stat(d.socket).st_ino
    os.kill(d.pid, signal.SIGSTOP)
    try:
        r = subprocess.run([sys.executable, "-m", "ctxlifed"], env=d.env, capture_output=True, timeout=30)
        r2 = subprocess.run([sys.executable, "-m", "ctxlifed", "--spawned"], env=d.env, capture_output=True, timeout=30)
    finally:
        os.kill(d.pid, signal.SIGCONT)
    figures.record("second_daemon_exit", r.returncode)
    figures.record("spawned_duplicate_exit", r2.returncode)
    assert 3 == r.returncode and b"already running" in r.stderr
    assert (0, b"") == (r2.returncode, r2.stderr)
    assert ino == os.stat(d.socket).st_ino
    assert d.rpc("ping")["result"]["pid"] == d.pid


def test_daemon_exits_when_its_socket_is_replaced(rdaemon: Any, figures: Any) -> None:
    """Another socket renamed over ours (a daemon started by other means): we exit by ourselves and
    leave the new socket alone."""
    d = rdaemon()
    d.start()
    other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    tmp = d.socket + ".other"
    other.bind(tmp)
    other.listen(1)
    ino = os.stat(tmp).st_ino
    t0 = time.monotonic()
    os.rename(tmp, d.socket)
    code = d.proc.wait(timeout=20)
    exit_ms = (time.monotonic() - t0) * 1000
    intact = os.path.exists(d.socket) and os.stat(d.socket).st_ino == ino
    other.close()
    figures.record("orphan_exit_ms", round(exit_ms, 1), "ms")
    figures.record("replacement_intact", intact)
    figures.record("exit_code", code)
    assert 0 == code
    assert intact
    assert exit_ms < 5000


# -- A8: version skew --------------------------------------------------------------------------------
def test_version_skew_is_detected_and_answered_clearly(rdaemon: Any, figures: Any) -> None:
    """hello reports compatibility; newer or older clients get typed errors that name the problem,
    never a crash; the shim facing an older or newer daemon stays silent and exits 0."""
    from ctxlifed import PROTOCOL_VERSION, __version__

    d = rdaemon(CTXLIFED_HOOK_DEADLINE="0.5", CTXLIFED_DAEMON_CMD="/bin/true")
    d.start()
    cases = {}
    r = d.rpc("hello", {"client": "ctxlifectl", "version": __version__, "protocol": PROTOCOL_VERSION})
    cases["same"] = r["result"]["compatible"] is True and r["result"]["protocol"] == PROTOCOL_VERSION
    r = d.rpc("hello", {"client": "ctxlifectl", "version": "9.0.0", "protocol": PROTOCOL_VERSION + 1})
    cases["newer_client"] = r["result"]["compatible"] is False and r["result"]["version"] == __version__
    r = d.rpc("hello", {"client": "old-shim", "version": "0.0.1"})  # protocol absent: a client older than hello's protocol field
    cases["old_client_no_protocol"] = r["result"]["compatible"] is True
    r = d.rpc("hello", {"client": "x", "protocol": "two"})
    cases["hello_bad_type"] = r["error"]["code"] == -32602 and "protocol" in r["error"]["message"]
    r = d.rpc("hello", {"client": "x", "protocol": 2, "features": ["zstd"]})
    cases["hello_unknown_field"] = r["error"]["code"] == -32602 and "features" in r["error"]["message"]
    r = d.rpc("recall.v2", {"query": "x"})  # a method only a newer daemon would have
    cases["unknown_method"] = r["error"]["code"] == -32601 and "recall.v2" in r["error"]["message"]
    r = d.rpc("recall", {"query": "x", "rerank": True})  # a parameter only a newer daemon would know
    cases["unknown_param"] = r["error"]["code"] == -32602 and "rerank" in r["error"]["message"]
    r = d.rpc("hook", hook("UserPromptSubmit", "skew", "/tmp", prompt="x", future_field={"a": [1, 2]}))
    cases["hook_future_fields"] = r["result"]["exit_code"] == 0  # hook params are Claude Code's, open-ended
    r = rpc(d.socket, "ping")
    cases["daemon_alive"] = r["result"]["pong"] is True
    figures.record("skew_cases_passed", sum(cases.values()), n=len(cases), cases=cases)
    assert all(cases.values()), cases


@pytest.mark.parametrize("reply", [
    {"result": {"stdout": "", "exit_code": 0, "advice": ["newer field"], "schema": 2}},
    {"result": {"stdout": {"structured": True}, "exit_code": 0}},
    {"result": "ok"},
    {"error": {"code": -32601, "message": "Method not found: hook"}},
    {"error": {"code": -32003, "message": "version mismatch", "data": {"name": "version_mismatch"}}},
], ids=["newer_result", "retyped_stdout", "scalar_result", "older_daemon_no_hook", "version_mismatch"])
def test_shim_against_an_other_version_daemon(short_tmp: Path, figures: Any, reply: dict[str, Any]) -> None:
    """A daemon of another version answering in a shape this shim does not know: exit 0, nothing printed
    except a well-formed stdout string."""
    from conftest import daemon_env

    env = daemon_env(short_tmp, CTXLIFED_HOOK_DEADLINE="1.0", CTXLIFED_DAEMON_CMD="/bin/true")
    path = env["CTXLIFED_SOCKET"]
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)

    def serve() -> None:
        conn, _ = srv.accept()
        with conn:
            line = recv_line(conn, bytearray(), timeout=5)
            rid = json.loads(line)["id"]
            conn.sendall(json.dumps({"jsonrpc": "2.0", "id": rid, **reply}).encode() + b"\n")

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    r, ms = run_shim_timed(PAYLOAD, env)
    srv.close()
    figures.record("shim_exit", r.returncode)
    figures.record("shim_wall_ms", round(ms, 1), "ms")
    assert (0, b"", b"") == (r.returncode, r.stdout, r.stderr)


def test_cli_against_an_older_daemon_says_what_failed(short_tmp: Path, figures: Any) -> None:
    """ctxlifectl facing a daemon that lacks a method (an older version): exit 1, a one-line typed
    message on stderr, no traceback."""
    path = str(short_tmp / "old.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(4)

    def serve() -> None:
        for _ in range(2):
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with conn:
                req = json.loads(recv_line(conn, bytearray(), timeout=5) or b"{}")
                if req.get("method") == "hello":
                    body = {"result": {"version": "0.0.9", "protocol": 0, "pid": 1, "compatible": False}}
                else:
                    body = {"error": {"code": -32601, "message": f"Method not found: {req.get('method')}",
                                      "data": {"name": "method_not_found"}}}
                conn.sendall(json.dumps({"jsonrpc": "2.0", "id": req.get("id"), **body}).encode() + b"\n")

    threading.Thread(target=serve, daemon=True).start()
    r = subprocess.run([sys.executable, "-m", "ctxlifed.cli.main", "--socket", path, "recall", "anything"],
                       capture_output=True, text=True, timeout=30)
    srv.close()
    figures.record("exit_code", r.returncode)
    figures.record("message", r.stderr.strip()[:160])
    assert 1 == r.returncode
    assert "version skew" in r.stderr and "0.0.9" in r.stderr and "ctxlifectl daemon restart" in r.stderr
    assert "Traceback" not in r.stderr
