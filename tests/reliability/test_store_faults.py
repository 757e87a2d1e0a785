"""Storage faults and read budgets: an unwritable store, a -shm SQLite cannot write, slow and huge
recalls, a WAL that outgrows its cap.

Rows A10-A12 and C9-C10 of docs/reliability.md (reliability issue items 4, 7, 8, 12, 14 and 19):
a fault is a typed, retryable refusal and the daemon survives it; reads never wait on what the
fault stalls; a recall is bounded in terms and time and can never hold every reader; the WAL stays
under its cap through a burst with reads going on.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from ctxlifed import scheduler
from ctxlifed.cli.main import main as cli_main
from ctxlifed.protocol import _methods as M
from ctxlifed.runtime.config import load
from ctxlifed.runtime.paths import Paths
from ctxlifed.service import derive as DV
from ctxlifed.service.app import Service
from ctxlifed.store import ops
from ctxlifed.store.db import (
    QueryTooBroadError,
    Readers,
    StorageFullError,
    StorageUnavailableError,
    StoreUnusableError,
    Writer,
    storage_fault,
)

from ._harness import db_checks, hook, query, wait_until

LONG = pytest.mark.slow
HANG_GUARD_S = 60  # a wait that never ends fails the test here (not a speed bound)


def _chattr_works(d: Path) -> bool:
    if os.geteuid() != 0 or not shutil.which("chattr"):
        return False
    probe = d / "chattr-probe"
    probe.write_bytes(b"x")
    ok = subprocess.run(["chattr", "+i", str(probe)], capture_output=True).returncode == 0
    subprocess.run(["chattr", "-i", str(probe)], capture_output=True)
    probe.unlink()
    return ok


@contextlib.contextmanager
def _immutable(*paths: Path) -> Iterator[None]:
    """chattr +i for the duration (the files' writes then fail with EPERM, even through open descriptors)."""
    subprocess.run(["chattr", "+i", *map(str, paths)], check=True)
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", *map(str, paths)], check=False)


def _name(reply: dict[str, Any]) -> str:
    return "result" if "result" in reply else reply["error"]["data"]["name"]


def _ms(fn: Any) -> tuple[Any, float]:
    t0 = time.monotonic()
    out = fn()
    return out, (time.monotonic() - t0) * 1000


# -- A10 (issue item 4, 8): an unwritable store --------------------------------------------------------------
@pytest.mark.parametrize("which", ["db+wal", "wal"])
def test_unwritable_store_is_a_typed_retryable_refusal_and_recovers(rdaemon: Any, short_tmp: Path, figures: Any,
                                                                    which: str) -> None:
    """DB and WAL (or the WAL alone) unwritable (EPERM): every hook gets storage_unavailable (never
    -32603), status and recall answer, the daemon lives; once the fault is cleared writes resume with
    no restart and every event acknowledged before is intact."""
    if not _chattr_works(short_tmp):
        pytest.skip("needs root and a filesystem with chattr")
    d = rdaemon()
    d.start()
    acked = []
    for i in range(12):
        rid = f"before-{i}"
        assert "result" in d.rpc("hook", hook("UserPromptSubmit", "unw", "/tmp/unw", prompt=f"UNWMARK{i} before"), id_=rid)
        acked.append(rid)
    assert "result" in d.rpc("status")  # derived: what follows meets the fault, not a backlog
    files = [d.db, Path(f"{d.db}-wal")] if which == "db+wal" else [Path(f"{d.db}-wal")]
    with _immutable(*files):
        refusals = [d.rpc("hook", hook("PostToolUse", "unw", "/tmp/unw", tool_name="Bash", tool_input={"command": "x"},
                                       tool_response={"stdout": f"during {i}"}), id_=f"during-{i}") for i in range(5)]
        refusals.append(d.rpc("hook", hook("SessionStart", "unw-new", "/tmp/unw", source="startup")))  # the inline path
        status, status_ms = _ms(lambda: d.rpc("status"))
        recall, recall_ms = _ms(lambda: d.rpc("recall", {"query": "UNWMARK3", "all_projects": True}))
        alive = d.alive()
    t0 = time.monotonic()
    wait_until(lambda: "result" in d.rpc("hook", hook("UserPromptSubmit", "unw", "/tmp/unw", prompt="after")), timeout=20)
    recovery_ms = (time.monotonic() - t0) * 1000
    names = [_name(r) for r in refusals]
    stored = {r[0] for r in query(d.db, "SELECT rid FROM events WHERE rid LIKE 'before-%' OR rid LIKE 'during-%'")}
    figures.record("refusals", {n: names.count(n) for n in set(names)}, n=len(names),
                   message=refusals[0].get("error", {}).get("message", "")[:100])
    figures.record("status_ms_during_fault", round(status_ms, 1), "ms")
    figures.record("recall_ms_during_fault", round(recall_ms, 1), "ms")
    figures.record("recovery_ms", round(recovery_ms, 1), "ms")
    figures.record("acked_lost", len(set(acked) - stored), n=len(acked))
    assert ["storage_unavailable"] * 6 == names
    assert all(r["error"]["code"] == -32007 for r in refusals)
    assert alive and d.alive()
    assert "result" in status and 1 == recall["result"]["total"]
    assert set(acked) <= stored and not any(r.startswith("during-") for r in stored)  # refused = not stored
    assert '"outcome": "internal_error"' not in d.log_text()
    assert db_checks(d.db)["ok"]


def test_storage_faults_are_typed_from_real_errors(short_tmp: Path) -> None:
    """What SQLite and the OS raise for an unwritable store maps to StorageUnavailableError, a full one to
    StorageFullError (both retryable: every retry path catches StorageFullError); anything else stays as is."""
    db = short_tmp / "t.db"
    sqlite3.connect(db).execute("CREATE TABLE t(x)").connection.close()
    errors: dict[str, BaseException] = {}
    ro = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    with pytest.raises(sqlite3.Error) as readonly:
        ro.execute("INSERT INTO t VALUES (1)")
    errors["readonly"] = readonly.value
    with pytest.raises(sqlite3.Error) as cantopen:
        sqlite3.connect(short_tmp / "missing" / "t.db").execute("SELECT 1")
    errors["cantopen"] = cantopen.value
    full_conn = sqlite3.connect(db)
    full_conn.execute(f"PRAGMA max_page_count={full_conn.execute('PRAGMA page_count').fetchone()[0]}")
    with pytest.raises(sqlite3.Error) as full:
        full_conn.execute("INSERT INTO t VALUES (?)", (b"x" * 100_000,))
    errors["full"] = full.value
    with pytest.raises(sqlite3.Error) as syntax:
        ro.execute("SELEC 1")
    errors["syntax"] = syntax.value
    for e in (errno.EPERM, errno.EROFS, errno.EIO, errno.EACCES, errno.ENOSPC, errno.ENOENT):
        errors[errno.errorcode[e]] = OSError(e, os.strerror(e))
    got = {k: type(storage_fault(v)).__name__ if storage_fault(v) is not None else None for k, v in errors.items()}
    assert got == {
        "readonly": "StorageUnavailableError", "cantopen": "StorageUnavailableError", "full": "StorageFullError",
        "syntax": None, "EPERM": "StorageUnavailableError", "EROFS": "StorageUnavailableError",
        "EIO": "StorageUnavailableError", "EACCES": "StorageUnavailableError", "ENOSPC": "StorageFullError",
        "ENOENT": None,
    }
    assert issubclass(StorageUnavailableError, StorageFullError)
    ro.close()
    full_conn.close()


# -- A11 (issue item 8): reads during a stalled derivation ---------------------------------------------------
@pytest.mark.anyio
async def test_reads_do_not_wait_for_a_derivation_stalled_on_a_storage_fault(short_tmp: Path, figures: Any,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Acknowledged events whose derivation fails on a full store: status and recall answer from what is
    stored instead of waiting for the backlog (READ_WAIT_S is made endless here: a read that waits hangs);
    once there is room the backlog drains and reads wait for it again."""
    monkeypatch.setattr(scheduler, "READ_WAIT_S", 3600.0)
    monkeypatch.setattr(DV, "RETRY_S", 0.05)
    proj = short_tmp / "proj"
    (proj / ".git").mkdir(parents=True)
    paths = Paths(socket=str(short_tmp / "s.sock"), data_dir=str(short_tmp), config=str(short_tmp / "c.toml"))
    writer, readers = Writer(paths.db), Readers(paths.db)
    # Live compression off: it would archive these (over 30,000 characters) at the acknowledgement, and
    # this test is about archiving at the derivation.
    svc = Service(load(str(short_tmp / "c.toml"), env={"CTXLIFED_COMPRESS_OUTPUTS": "off"}), paths, writer, readers)
    sid = "5e5e5e5e-1111-4222-8333-444455556666"
    try:
        async with anyio.create_task_group() as tg:
            svc.bind(tg, derive=False)
            await svc.hook({"session_id": sid, "cwd": str(proj), "hook_event_name": "SessionStart", "source": "startup"})
            for i in range(4):
                await svc.hook({"session_id": sid, "cwd": str(proj), "hook_event_name": "PostToolUse", "tool_name": "Bash",
                                "tool_use_id": f"toolu_{i:08d}", "tool_input": {"command": f"echo {i}"},
                                "tool_response": {"stdout": f"STALLMARK{i} " + os.urandom(40_000).hex()}})
            assert svc.backlog.pending() == 4
            await writer.set_limits(max_bytes=os.path.getsize(paths.db))  # no room to archive what was acknowledged
            svc.start_deriver()
            t0 = time.monotonic()
            with anyio.fail_after(HANG_GUARD_S):
                st = await svc.dispatch("status", b"{}")
                rec = await svc.dispatch("recall", b'{"query": "STALLMARK1", "all_projects": true}')
            stalled_ms = (time.monotonic() - t0) * 1000
            assert isinstance(st, M.StatusResult) and st.derive_pending == 4 and svc.derive_stalled
            assert rec.total == 0  # not derived yet: nothing archived to find
            await writer.set_limits(max_bytes=0)
            with anyio.fail_after(HANG_GUARD_S):
                while svc.derive_stalled:  # until the deriver's next retry succeeds
                    await anyio.sleep(0.01)
                rec = await svc.dispatch("recall", b'{"query": "STALLMARK1", "all_projects": true}')
            figures.record("status_and_recall_ms_while_stalled", round(stalled_ms, 1), "ms")
            assert rec.total == 1 and svc.backlog.pending() == 0
            tg.cancel_scope.cancel()
    finally:
        readers.close()
        writer.close()


# -- A12 (issue item 14): a -shm SQLite cannot write --------------------------------------------------------
@pytest.mark.parametrize("case", ["immutable", "symlink", "directory"])
def test_unusable_shm_is_refused_at_start_with_the_fix_and_no_socket(rdaemon: Any, short_tmp: Path, figures: Any,
                                                                    case: str) -> None:
    """A -shm that SQLite could not write through its mapping (immutable: SIGBUS at the first write), or
    that is not a regular file: the daemon exits 4 with a message naming the file and the fix, and leaves no
    socket; once the file is fixed it starts and every event is there."""
    if case == "immutable" and not _chattr_works(short_tmp):
        pytest.skip("needs root and a filesystem with chattr")
    d = rdaemon()
    d.start()
    for i in range(5):
        assert "result" in d.rpc("hook", hook("UserPromptSubmit", "shm", "/tmp/shm", prompt=f"SHMMARK{i}"), id_=f"shm-{i}")
    d.rpc("status")
    shm = Path(f"{d.db}-shm")
    kept = shm.read_bytes()
    assert 0 == d.stop()
    other = short_tmp / "elsewhere"
    if case == "immutable":
        shm.write_bytes(kept)
    elif case == "symlink":
        other.write_bytes(kept)
        shm.symlink_to(other)
    else:
        shm.mkdir()
    cm = _immutable(shm) if case == "immutable" else contextlib.nullcontext()
    with cm:
        d.start(expect_ready=False)
        assert d.proc is not None
        code = d.proc.wait(timeout=HANG_GUARD_S)
        socket_left = os.path.exists(d.socket)
    message = next((ln for ln in d.log_text().splitlines() if ln.startswith("ctxlifed: cannot open the store")), "")
    figures.record("exit_code", code, message=message[:160], socket_left=socket_left)
    assert 4 == code
    assert str(shm) in message and {"immutable": "chattr -i", "symlink": "rm ", "directory": "rm "}[case] in message
    assert not socket_left
    assert "Traceback" not in d.log_text()
    if case == "directory":
        shm.rmdir()
    else:
        shm.unlink()
    d.start()
    assert {f"shm-{i}" for i in range(5)} <= {r[0] for r in query(d.db, "SELECT rid FROM events")}
    assert 0 == d.stop()


def test_shm_made_immutable_while_running_is_a_typed_refusal_not_a_crash(rdaemon: Any, short_tmp: Path,
                                                                          figures: Any) -> None:
    """The -shm made immutable under a running daemon (any write through SQLite's mapping would raise
    SIGBUS): writes and reads get storage_unavailable, the daemon lives; fixed, it writes again. A stop
    during the fault exits 0 and removes the socket, and the next start has every acknowledged event."""
    if not _chattr_works(short_tmp):
        pytest.skip("needs root and a filesystem with chattr")
    d = rdaemon()
    d.start()
    acked = []
    for i in range(5):
        assert "result" in d.rpc("hook", hook("UserPromptSubmit", "shmrun", "/tmp/shmrun", prompt=f"before {i}"), id_=f"sr-{i}")
        acked.append(f"sr-{i}")
    assert "result" in d.rpc("status")
    shm = Path(f"{d.db}-shm")
    with _immutable(shm):
        during = [_name(d.rpc("hook", hook("UserPromptSubmit", "shmrun", "/tmp/shmrun", prompt=f"during {i}"))) for i in range(5)]
        during.append(_name(d.rpc("status")))
        alive = d.alive()
    wait_until(lambda: "result" in d.rpc("hook", hook("UserPromptSubmit", "shmrun", "/tmp/shmrun", prompt="after"), id_="sr-after"),
               timeout=20)
    acked.append("sr-after")
    with _immutable(shm):
        code = d.stop()
        socket_left = os.path.exists(d.socket)
    figures.record("during_fault", {n: during.count(n) for n in set(during)}, n=len(during))
    figures.record("stop_during_fault", code, socket_left=socket_left)
    assert ["storage_unavailable"] * 6 == during and alive
    assert (0, False) == (code, socket_left)
    d.start()
    assert set(acked) <= {r[0] for r in query(d.db, "SELECT rid FROM events")}
    assert db_checks(d.db)["ok"]


def test_store_check_refuses_a_shm_of_another_kind_in_process(short_tmp: Path) -> None:
    """The same check on the Writer itself: StoreUnusableError before SQLite maps anything."""
    db = short_tmp / "t.db"
    Path(f"{db}-shm").mkdir()
    with pytest.raises(StoreUnusableError, match="not a regular file"):
        Writer(str(db))


# -- C9 (issue items 7, 12): recall budgets --------------------------------------------------------------------
def test_huge_recall_is_a_typed_query_too_broad(rdaemon: Any, figures: Any) -> None:
    """~999 terms (SQLite's expression limit) and 33 terms: query_too_broad with the reason and the limit,
    never -32603; 32 terms still answer; the daemon serves on."""
    d = rdaemon()
    d.start()
    assert "result" in d.rpc("hook", hook("UserPromptSubmit", "wide", "/tmp/wide", prompt="w1 w2 w3"))
    out = {}
    for n in (999, 33, 32):
        r = d.rpc("recall", {"query": " ".join(f"w{i}" for i in range(n)), "all_projects": True})
        out[n] = r.get("error", {"code": 0, "data": {"name": "result"}})
    figures.record("outcomes", {n: e["data"]["name"] for n, e in out.items()})
    assert -32008 == out[999]["code"] == out[33]["code"]
    assert {"name": "query_too_broad", "reason": "terms", "limit": 32} == out[999]["data"] == out[33]["data"]
    assert "result" == out[32]["data"]["name"]
    assert "result" in d.rpc("ping")


def test_cli_explains_query_too_broad(rdaemon: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """``ctxlifectl recall`` with too many words: exit 1 and one line saying what to do, no traceback."""
    d = rdaemon()
    d.start()
    code = cli_main(["--socket", d.socket, "recall", "--all", *[f"w{i}" for i in range(40)]])
    err = capsys.readouterr().err
    assert 1 == code
    assert err.startswith("ctxlifectl: query too broad: it has more than 32 words and phrases. Use fewer")
    assert 1 == len(err.splitlines()) and "Traceback" not in err


def test_search_budget_in_time(short_tmp: Path) -> None:
    """A search that runs past its time budget stops with QueryTooBroadError(reason='time'); the
    connection goes back to the pool and serves the next read."""
    db = str(short_tmp / "t.db")
    w = Writer(db)
    r = Readers(db, search_s=0.05)
    slow = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"

    async def go() -> int:
        with pytest.raises(QueryTooBroadError) as exc:
            await r.search(lambda c: c.execute(slow).fetchone())
        assert ("time", 0.05) == (exc.value.reason, exc.value.limit)
        return await r.run(lambda c: c.execute("SELECT 42").fetchone()[0])

    try:
        assert 42 == anyio.run(go)
    finally:
        r.close()
        w.close()


def test_searches_never_hold_every_reader(short_tmp: Path) -> None:
    """As many searches as there are readers, each stuck inside its connection: at most size - RESERVED
    run, and a plain read (a hook's, status) is served meanwhile."""
    db = str(short_tmp / "t.db")
    w = Writer(db)
    r = Readers(db, size=4)
    release = threading.Event()
    inside: list[int] = []
    peak = [0]
    lock = threading.Lock()

    def stuck(c: sqlite3.Connection) -> None:
        with lock:
            inside.append(1)
            peak[0] = max(peak[0], len(inside))
        release.wait(HANG_GUARD_S)
        with lock:
            inside.pop()

    async def go() -> int:
        async with anyio.create_task_group() as tg:
            for _ in range(6):
                tg.start_soon(r.search, stuck)
            with anyio.fail_after(HANG_GUARD_S):
                while len(inside) < 4 - Readers.RESERVED:
                    await anyio.sleep(0.005)
                plain = await r.run(lambda c: c.execute("SELECT 7").fetchone()[0])
            release.set()
        return plain

    try:
        assert 7 == anyio.run(go)
        assert 4 - Readers.RESERVED == peak[0]
    finally:
        release.set()
        r.close()
        w.close()


@LONG
@pytest.mark.parametrize("slow", [4, 8])
def test_slow_recalls_do_not_starve_hooks_or_status(rdaemon: Any, figures: Any, slow: int) -> None:
    """``slow`` clients loop on 300-term recalls while hooks (a known session, and a new one: the inline
    path that reads) and status are timed: every hook and status answers; every recall is answered
    query_too_broad or a result, never an internal error or busy."""
    d = rdaemon()
    d.start()
    for i in range(300):
        d.rpc("hook", hook("PostToolUse", "fill", "/tmp/slowproj", tool_name="Bash", tool_use_id=f"t{i}",
                           tool_input={"command": f"run {i}"}, tool_response={"stdout": " ".join(f"w{(i * 7 + k) % 400}" for k in range(200))}))
    d.rpc("status", timeout=120)
    q = " OR ".join(f"w{(k * 13) % 400}" for k in range(300))
    stop = threading.Event()
    outcomes: list[str] = []

    def loop() -> None:
        while not stop.is_set():
            outcomes.append(_name(d.rpc("recall", {"query": q, "all_projects": True}, timeout=60)))

    threads = [threading.Thread(target=loop) for _ in range(slow)]
    for t in threads:
        t.start()
    hooks, stats = [], []
    try:
        wait_until(lambda: len(outcomes) >= slow, timeout=60)
        for i in range(10):
            r, ms = _ms(lambda: d.rpc("hook", hook("PostToolUse", "fill", "/tmp/slowproj", tool_name="Bash",
                                                   tool_input={"command": "x"}, tool_response={"stdout": "ok"}), timeout=60))
            hooks.append((_name(r), ms))
            r, ms = _ms(lambda: d.rpc("hook", hook("SessionStart", f"new-{i}", "/tmp/slowproj", source="startup"), timeout=60))
            hooks.append((_name(r), ms))
            r, ms = _ms(lambda: d.rpc("status", {"limit": 1}, timeout=60))
            stats.append((_name(r), ms))
    finally:
        stop.set()
        for t in threads:
            t.join()
    figures.record("hook_max_ms", round(max(ms for _n, ms in hooks), 1), "ms", n=len(hooks))
    figures.record("status_max_ms", round(max(ms for _n, ms in stats), 1), "ms", n=len(stats))
    figures.record("recall_outcomes", {n: outcomes.count(n) for n in set(outcomes)})
    assert {"result"} == {n for n, _ms_ in hooks} == {n for n, _ms_ in stats}
    assert set(outcomes) <= {"result", "query_too_broad"}


# -- C10 (issue item 19): the WAL cap under a burst with reads going on ---------------------------------------
def test_wal_stays_under_its_cap_through_a_burst_with_overlapping_reads(short_tmp: Path, figures: Any) -> None:
    """A burst of 8 KB events while two readers keep a read transaction open at all times (so a PASSIVE
    checkpoint can never restart the log): with a 1 MiB cap the WAL never grows past the cap plus one
    transaction, and every event is stored."""
    cap = 1 << 20
    db = str(short_tmp / "t.db")
    w = Writer(db, wal_cap=cap)
    r = Readers(db)
    stop = threading.Event()

    def read() -> None:
        def overlap(c: sqlite3.Connection) -> None:
            c.execute("BEGIN")
            c.execute("SELECT count(*) FROM events").fetchone()
            time.sleep(0.003)
            c.execute("COMMIT")

        while not stop.is_set():
            r.run_sync(overlap)

    readers = [threading.Thread(target=read) for _ in range(2)]
    for t in readers:
        t.start()
    peak, blob, n = 0, os.urandom(4000).hex().encode(), 1500
    try:
        for i in range(n):
            row = ops.EventRow(session="s", project="/p", cwd="/p", event="PostToolUse", tool="Bash", ts=time.time(),
                               payload=blob, redactions=0, source="hook", rid=f"r{i}")
            w.run_sync(lambda c, row=row: ops.insert_event(c, row))
            with contextlib.suppress(FileNotFoundError):
                peak = max(peak, os.path.getsize(db + "-wal"))
    finally:
        stop.set()
        for t in readers:
            t.join()
        truncations = w.wal_truncations
        r.close()
        w.close()
    figures.record("wal_peak_bytes", peak, "bytes", cap=cap, truncations=truncations, n=n)
    assert truncations >= 1
    assert peak <= cap + (256 << 10)  # one transaction past the cap at most (an 8 KB event is ~3 pages)
    assert n == query(Path(db), "SELECT count(*) FROM events")[0][0]


def test_a_reader_outside_the_daemon_cannot_stall_every_commit(short_tmp: Path, figures: Any) -> None:
    """A ``sqlite3`` shell holding a read transaction keeps the WAL from being truncated: the writer gives
    up after its wait and backs off (doubling) instead of waiting again at every commit; every event is
    stored, and once the shell lets go the next truncation succeeds."""
    cap = 256 << 10
    db = str(short_tmp / "t.db")
    w = Writer(db, wal_cap=cap)
    shell = sqlite3.connect(db, isolation_level=None)
    shell.execute("BEGIN")
    shell.execute("SELECT count(*) FROM events").fetchone()  # a snapshot: its frames must stay
    blob = os.urandom(4000).hex().encode()

    def burst(tag: str, n: int) -> None:
        for i in range(n):
            row = ops.EventRow(session="s", project="/p", cwd="/p", event="PostToolUse", tool="Bash", ts=time.time(),
                               payload=blob, redactions=0, source="hook", rid=f"{tag}{i}")
            w.run_sync(lambda c, row=row: ops.insert_event(c, row))

    try:
        burst("a", 300)
        blocked = w.wal_truncations_blocked
        shell.execute("COMMIT")
        more = [0]

        def truncated_once_free() -> bool:  # writes go on until the backoff ends and the WAL is truncated
            burst(f"b{more[0]}-", 10)
            more[0] += 1
            return w.wal_truncations >= 1

        wait_until(truncated_once_free, timeout=HANG_GUARD_S, interval=0)
        figures.record("blocked_attempts", blocked, n=300)
        assert 1 <= blocked <= 3  # 300 commits past the cap: a few waits (backoff 1, 2, 4 s...), not 300
        assert 300 + 10 * more[0] == query(Path(db), "SELECT count(*) FROM events")[0][0]
    finally:
        shell.close()
        w.close()


# A fresh process: threads and descriptors other tests left in this one come and go on their own.
_STEADY_STATE = r"""
import json, os, sys, threading, time
from ctxlifed.store import ops
from ctxlifed.store.db import Writer

def counts():
    return threading.active_count(), len(os.listdir("/proc/self/fd"))

w = Writer(sys.argv[1], wal_cap=1 << 20)
w.start_checkpointer()
before = counts()
blob = os.urandom(4000).hex().encode()
for i in range(200):  # ~1.6 MB of events: past cap // 4, where each commit asks for a checkpoint
    row = ops.EventRow(session="s", project="/p", cwd="/p", event="PostToolUse", tool="Bash", ts=time.time(),
                       payload=blob, redactions=0, source="hook", rid=f"r{i}")
    w.run_sync(lambda c, row=row: ops.insert_event(c, row))
during = counts()
names = sorted(t.name for t in threading.enumerate())
w.close()
print(json.dumps({"before": before, "during": during, "names": names, "after": counts(),
                  "truncations": w.wal_truncations}))
"""


def test_a_started_checkpointer_holds_its_thread_and_descriptors_from_the_start(short_tmp: Path) -> None:
    """A daemon starts the checkpoint thread and its connection with the writer: a burst that takes the WAL
    past the mark where commits ask for a checkpoint (and past its cap) adds no thread and no descriptor (a
    steady state to measure leaks against), and ``close`` ends the thread."""
    db = str(short_tmp / "t.db")
    out = subprocess.run([sys.executable, "-c", _STEADY_STATE, db], capture_output=True, text=True, check=True,
                         timeout=HANG_GUARD_S)
    got = json.loads(out.stdout)
    assert got["during"] == got["before"]
    assert "ctxlifed-checkpoint" in got["names"]
    assert got["after"][0] == 1  # the main thread only: the writer's and the checkpoint thread are gone
    assert 200 == query(Path(db), "SELECT count(*) FROM events")[0][0]


def test_close_during_a_checkpoint_ends_the_checkpoint_thread(short_tmp: Path) -> None:
    """``close`` while the checkpoint thread is inside a checkpoint (here: waiting for the lock a WAL truncation
    holds): the thread sees the close when the checkpoint ends and stops; it is never left waiting for a
    request that was cleared unseen."""
    w = Writer(str(short_tmp / "t.db"))
    w.start_checkpointer()
    thread = w._cp_thread
    assert thread is not None
    closer = threading.Thread(target=w.close)
    with w._cp_lock:  # what a TRUNCATE checkpoint holds while it waits for readers
        w.request_checkpoint()
        wait_until(lambda: not w._cp_wanted.is_set(), timeout=HANG_GUARD_S)  # taken: the thread is on its way in
        closer.start()
        wait_until(lambda: w._closing and w._cp_wanted.is_set(), timeout=HANG_GUARD_S)
    closer.join(HANG_GUARD_S)
    assert not closer.is_alive()
    assert not thread.is_alive()
