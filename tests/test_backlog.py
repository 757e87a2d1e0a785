"""The trigram backlog (store/backlog.py): rows are findable at once, indexed when the writer is idle,
and the index stays consistent through deletes, updates, crashes and old databases."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ctxlifed.store import backlog, ops
from ctxlifed.store.db import Writer
from ctxlifed.store.schema import MIGRATIONS, has_trigram

pytestmark = pytest.mark.skipif(not has_trigram(sqlite3.connect(":memory:")), reason="SQLite without trigram")


def _row(text: str, i: int = 0) -> ops.ArchiveRow:
    return ops.ArchiveRow(session="s1", project="/p", ts=float(i), kind="tool_output", text=text, uid=f"u{i}")


def _check(conn: sqlite3.Connection) -> None:
    conn.execute("INSERT INTO archive_tri(archive_tri) VALUES ('integrity-check')")
    pend = {r[0] for r in conn.execute("SELECT id FROM tri_pending")}
    assert pend <= {r[0] for r in conn.execute("SELECT id FROM archive")}  # no orphan marks


def _tri_ids(conn: sqlite3.Connection, term: str) -> list[int]:
    return sorted(r[0] for r in conn.execute("SELECT rowid FROM archive_tri WHERE archive_tri MATCH ?",
                                             (f'"{term}"',)))


def _signalling(real: Callable[[sqlite3.Connection], bool] | None,
                drained: threading.Event) -> Callable[[sqlite3.Connection], bool]:
    """``real`` (the writer's idle work) that sets ``drained`` once nothing remains."""
    assert real is not None

    def idle(conn: sqlite3.Connection) -> bool:
        more = real(conn)
        if not more:
            drained.set()
        return more

    return idle


@contextlib.contextmanager
def _preempted_every_ms(w: Writer) -> Iterator[None]:
    """``preempt`` from another thread every millisecond, as a stream of requests would."""
    stop = threading.Event()

    def hammer() -> None:
        while not stop.is_set():
            w.preempt()
            stop.wait(0.001)

    t = threading.Thread(target=hammer)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()


@pytest.fixture
def w(tmp_path: Path) -> Iterator[Writer]:
    """A writer whose trigram backlog is driven by hand (its idle work off)."""
    writer = Writer(str(tmp_path / "x.db"))
    writer.idle = None
    try:
        yield writer
    finally:
        writer.close()


def test_the_scan_of_pending_rows_is_bounded_and_older_rows_are_found_once_indexed(
        w: Writer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A burst's backlog is long: a reader scans only the newest SCAN_PENDING pending rows (a recall stays
    fast); a substring in an older one is found once the idle work has indexed it."""
    monkeypatch.setattr(backlog, "SCAN_PENDING", 2)
    ids = [w.run_sync(lambda c, i=i: ops.insert_archive(c, _row(f"beta ConnectionManager {i}", i))[0])
           for i in range(5)]
    got = w.run_sync(lambda c: backlog.pending_matches(c, ("nmanag",), "1", []))
    assert got == sorted(ids, reverse=True)[:2]
    while w.run_sync(lambda c: backlog.index_some(c, max_rows=100, budget_s=10)):
        pass
    assert w.run_sync(lambda c: _tri_ids(c, "nManag")) == ids


def test_insert_queues_then_index_some_indexes(w: Writer) -> None:
    ids = [w.run_sync(lambda c, i=i: ops.insert_archive(c, _row(f"alpha ConnectionManager {i} 鉴权", i))[0])
           for i in range(5)]
    assert w.run_sync(backlog.pending) == 5
    assert w.run_sync(lambda c: _tri_ids(c, "nManag")) == []
    # what a reader sees meanwhile: the pending rows, by substring, newest first
    got = w.run_sync(lambda c: backlog.pending_matches(c, ("nmanag", "鉴权"), "a.project = ?", ["/p"]))
    assert got == sorted(ids, reverse=True)
    assert w.run_sync(lambda c: backlog.index_some(c, max_rows=2, budget_s=10)) is True
    assert w.run_sync(backlog.pending) == 3
    assert w.run_sync(lambda c: backlog.index_some(c, max_rows=100, budget_s=10)) is False
    assert w.run_sync(lambda c: _tri_ids(c, "nManag")) == ids
    assert w.run_sync(lambda c: backlog.pending_matches(c, ("nmanag",), "1", [])) == []
    w.run_sync(_check)


def test_delete_and_update_of_pending_and_indexed_rows_keep_the_index_consistent(w: Writer) -> None:
    a = w.run_sync(lambda c: ops.insert_archive(c, _row("first quokka row", 1))[0])
    w.run_sync(lambda c: backlog.index_some(c, budget_s=10))
    b = w.run_sync(lambda c: ops.insert_archive(c, _row("second quokka row", 2))[0])
    # b is pending, a indexed: delete b (no FTS delete), update a (FTS delete, then pending)
    w.run_sync(lambda c: c.execute("DELETE FROM archive WHERE id = ?", (b,)))
    w.run_sync(lambda c: c.execute("UPDATE archive SET text = 'first wombat row' WHERE id = ?", (a,)))
    w.run_sync(_check)
    assert w.run_sync(lambda c: _tri_ids(c, "quokka")) == []
    assert w.run_sync(backlog.pending) == 1
    w.run_sync(lambda c: backlog.index_some(c, budget_s=10))
    assert w.run_sync(lambda c: _tri_ids(c, "wombat")) == [a]
    # an indexed row deleted: gone from the index
    w.run_sync(lambda c: c.execute("DELETE FROM archive WHERE id = ?", (a,)))
    assert w.run_sync(lambda c: _tri_ids(c, "wombat")) == []
    w.run_sync(_check)
    w.run_sync(lambda c: c.execute("INSERT INTO archive_tri(archive_tri, rank) VALUES ('integrity-check', 1)"))


def test_writer_drains_the_backlog_when_idle_and_after_a_restart(tmp_path: Path) -> None:
    db = str(tmp_path / "x.db")
    w = Writer(db)
    w.idle = None
    w.run_sync(lambda c: [ops.insert_archive(c, _row(f"row {i} platypus", i)) for i in range(20)])
    w.close()  # as after a crash: the backlog is on disk
    drained = threading.Event()
    w = Writer(db)
    w.idle = _signalling(w.idle, drained)
    try:
        w.run_sync(lambda c: None)  # any job: the idle work runs once the queue is empty
        assert drained.wait(30)
        assert w.run_sync(backlog.pending) == 0
        assert len(w.run_sync(lambda c: _tri_ids(c, "platypus"))) == 20
        w.run_sync(_check)
    finally:
        w.close()


def test_idle_work_runs_under_sustained_load(tmp_path: Path) -> None:
    """A queue that never empties still lets the idle work run (every IDLE_MAX_LAG_S)."""
    w = Writer(str(tmp_path / "x.db"))
    calls = threading.Event()

    def idle(conn: sqlite3.Connection) -> bool:
        calls.set()
        return True

    w.idle = None
    w.IDLE_MAX_LAG_S = 0.0
    gate = threading.Event()
    w.submit(lambda c: gate.wait(30), lambda res: None)  # hold the writer while jobs pile up
    for _ in range(50):
        w.submit(lambda c: None, lambda res: None)
    w.idle = idle
    gate.set()
    try:
        assert calls.wait(30)
    finally:
        w.idle = None
        w.close()


def test_old_database_keeps_its_trigram_index(tmp_path: Path) -> None:
    """A store made before 0007 (rows indexed by the old trigger) migrates with nothing pending."""
    db = str(tmp_path / "old.db")
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("CREATE TABLE _migrations(name TEXT PRIMARY KEY, applied_ts REAL)")
    conn.execute("BEGIN")
    for name, stmts in MIGRATIONS:
        if name == "0007_tri_deferred":
            break
        for s in stmts:
            conn.execute(s)
        conn.execute("INSERT INTO _migrations VALUES (?, 0)", (name,))
    conn.execute("COMMIT")
    conn.execute("BEGIN")  # as that daemon wrote it (its archive had no idents column yet)
    conn.execute("INSERT INTO archive(hash, session, project, ts, kind, text, uid)"
                 " VALUES ('h1', 's1', '/p', 1.0, 'tool_output', 'legacy echidna row', 'u1')")
    conn.execute("COMMIT")
    conn.close()
    w = Writer(db)
    try:
        assert "0007_tri_deferred" in w.applied
        assert w.run_sync(backlog.pending) == 0
        assert w.run_sync(lambda c: _tri_ids(c, "echidna")) == [1]
        w.run_sync(lambda c: c.execute("DELETE FROM archive WHERE id = 1"))
        w.run_sync(_check)
    finally:
        w.close()


def test_search_finds_rows_still_waiting_for_the_trigram_index(w: Writer) -> None:
    """Substring and CJK recall see a row the moment it is stored, before the writer indexes it."""
    from ctxlifed.store import queries

    old = w.run_sync(lambda c: ops.insert_archive(c, _row("older WombatFactory row 鉴权失败了", 1))[0])
    w.run_sync(lambda c: backlog.index_some(c, budget_s=10))
    new = w.run_sync(lambda c: ops.insert_archive(c, _row("newer WombatFactory row 鉴权失败了", 2))[0])
    assert w.run_sync(backlog.pending) == 1
    for words in (("mbatFact",), ("鉴权失败",), ("鉴权",)):
        hits, total = w.run_sync(lambda c, ws=words: queries.search(c, words=ws, project="/p"))
        assert [h["id"] for h in hits] == [new, old], words
        assert total == 2, words


# A long statement; mark() runs once it has begun (an interrupt before that would be a no-op).
_SLOW_STEP = ("WITH RECURSIVE r(i) AS (SELECT mark() UNION ALL SELECT i + 1 FROM r WHERE i < 3000000)"
              " INSERT INTO slow(n) SELECT count(*) FROM r")


def _slow_writer(tmp_path: Path) -> Writer:
    w = Writer(str(tmp_path / "x.db"))
    w.idle = None
    w.IDLE_MAX_LAG_S = 1e9  # idle steps only when quiet
    w.run_sync(lambda c: c.execute("CREATE TABLE slow(n INTEGER)"))
    return w


def test_a_job_interrupts_quiet_time_idle_work_which_is_redone(tmp_path: Path) -> None:
    """A job arriving during an idle step interrupts it (the step rolls back, on its own
    connection) instead of waiting for it; the job commits, nothing is left half-done, and the idle
    work completes afterwards."""
    w = _slow_writer(tmp_path)
    armed, started, finished = threading.Event(), threading.Event(), threading.Event()
    runs = 0

    def idle(conn: sqlite3.Connection) -> bool:
        nonlocal runs
        if finished.is_set() or not armed.is_set():  # (a step begun before the test's first job: no work)
            return False
        runs += 1
        conn.create_function("mark", 0, lambda: (started.set(), 1)[1])
        conn.execute(_SLOW_STEP)  # long: only an interrupt ends it early
        finished.set()
        return False

    try:
        w.idle = idle
        w.run_sync(lambda c: armed.set())  # after a job, the idle work is due
        assert started.wait(30)
        assert w.run_sync(lambda c: c.execute("INSERT INTO slow(n) VALUES (-1)").lastrowid) is not None
        assert w.preempted == 1
        assert finished.wait(60)  # redone once the writer is idle again
        assert runs == 2
        rows = w.run_sync(lambda c: sorted(r[0] for r in c.execute("SELECT n FROM slow")))
        assert rows == [-1, 3000000]  # the interrupted attempt left nothing behind
        # the interrupt is not left pending for what follows, on either connection
        for i in range(20):
            w.run_sync(lambda c, i=i: c.execute("INSERT INTO slow(n) VALUES (?)", (i,)))
    finally:
        w.idle = None
        w.close()


def test_idle_work_interrupted_over_and_over_still_completes(tmp_path: Path) -> None:
    """Requests every few milliseconds (``preempt`` from the server) cannot starve a long idle step:
    after MAX_PREEMPTS interrupts in a row the next attempt runs through."""
    w = _slow_writer(tmp_path)
    finished = threading.Event()

    def idle(conn: sqlite3.Connection) -> bool:
        if finished.is_set():
            return False
        conn.create_function("mark", 0, lambda: 1)
        conn.execute(_SLOW_STEP)
        finished.set()
        return False

    try:
        w.idle = idle
        with _preempted_every_ms(w):
            w.run_sync(lambda c: None)
            assert finished.wait(60)
        assert w.preempted >= 1
        assert w.run_sync(lambda c: c.execute("SELECT count(*) FROM slow").fetchone()[0]) == 1
    finally:
        w.idle = None
        w.close()


def test_a_job_queued_during_a_batch_goes_before_idle_work_that_is_overdue(tmp_path: Path) -> None:
    """Idle work overdue (IDLE_MAX_LAG_S, the daemon never quiet) runs after a batch, but not while
    a job waits: an acknowledgement that arrived during the batch is not held up by a step."""
    w = _slow_writer(tmp_path)
    w.IDLE_MAX_LAG_S = 0.0  # always overdue
    w.scheduler.request_began()  # a reply in progress for good: never quiet
    order: list[str] = []
    gate, running = threading.Event(), threading.Event()

    stepped = threading.Event()

    def idle(conn: sqlite3.Connection) -> bool:
        order.append("idle")
        stepped.set()
        return False

    try:
        w.idle = idle
        done_b = threading.Event()
        w.submit(lambda c: (order.append("A"), running.set(), gate.wait(30)), lambda res: None)
        assert running.wait(30)
        w.submit(lambda c: order.append("B"), lambda res: done_b.set())  # queued during A's batch
        gate.set()
        assert done_b.wait(30)
        assert stepped.wait(30)  # the overdue step still ran, after B
        assert order[:2] == ["A", "B"], order
    finally:
        w.idle = None
        w.close()


def _t_writer(tmp_path: Path) -> Writer:
    """A writer (idle work off) with a table ``t`` for the inline-path tests."""
    w = Writer(str(tmp_path / "x.db"))
    w.idle = None
    w.run_sync(lambda c: c.execute("CREATE TABLE t(x)"))
    return w


def _insert_t(x: int) -> Callable[[sqlite3.Connection], str]:
    """A job inserting ``x`` into ``t``; it returns the name of the thread that ran it."""
    return lambda c: (c.execute("INSERT INTO t VALUES (?)", (x,)), threading.current_thread().name)[1]


def test_an_inline_job_runs_on_the_callers_thread_only_when_the_writer_is_free(tmp_path: Path) -> None:
    import anyio

    w = _t_writer(tmp_path)

    async def main() -> tuple[str, str]:
        free = await w.run(_insert_t(1), inline=True)
        gate, held = threading.Event(), threading.Event()
        w.submit(lambda c: (held.set(), gate.wait(30)), lambda res: None)  # the writer thread is busy
        assert await anyio.to_thread.run_sync(held.wait, 30)
        async with anyio.create_task_group() as tg:
            names: list[str] = []

            async def queued() -> None:
                names.append(await w.run(_insert_t(2), inline=True))

            tg.start_soon(queued)
            await anyio.sleep(0)
            gate.set()
        return free, names[0]

    try:
        free, busy = anyio.run(main)
        assert free == threading.current_thread().name  # inline: no thread hop
        assert busy == "ctxlifed-writer"  # queued behind the running job, run by the writer thread
        assert w.inline_runs == 1
        assert w.run_sync(lambda c: c.execute("SELECT count(*) FROM t").fetchone()[0]) == 2
    finally:
        w.close()


def test_an_inline_job_never_waits_for_another_processs_write_lock(tmp_path: Path) -> None:
    """The inline path runs on the event loop: when another connection (a ``sqlite3`` shell, a
    backup) holds the write lock, it does not wait there for the busy timeout. The job goes to the
    writer thread, which waits for the lock, while the event loop keeps running; it commits once the
    lock is released, and the connection's busy timeout is back to normal."""
    import anyio

    w = _t_writer(tmp_path)
    other = sqlite3.connect(str(tmp_path / "x.db"), isolation_level=None)
    other.execute("BEGIN IMMEDIATE")

    async def main() -> tuple[str, int]:
        ticks = 0
        async with anyio.create_task_group() as tg:
            box: list[str] = []

            async def job() -> None:
                box.append(await w.run(_insert_t(1), inline=True))

            tg.start_soon(job)
            while w.inline_busy == 0:  # the inline attempt found the lock taken and handed the job over
                await anyio.sleep(0)
            for _ in range(20):  # the event loop is not blocked: this task keeps running
                await anyio.sleep(0.001)
                ticks += 1
            assert box == []  # still waiting on the writer thread for the lock
            other.execute("COMMIT")
        return box[0], ticks

    try:
        name, ticks = anyio.run(main)
        assert name == "ctxlifed-writer" and ticks == 20
        assert (w.inline_busy, w.inline_runs) == (1, 0)
        assert w.run_sync(lambda c: c.execute("PRAGMA busy_timeout").fetchone()[0]) == 10_000
        assert w.run_sync(lambda c: c.execute("SELECT count(*) FROM t").fetchone()[0]) == 1
    finally:
        other.close()
        w.close()


def test_idle_work_due_too_long_runs_even_if_the_daemon_never_goes_quiet(tmp_path: Path) -> None:
    """Reads every few ms (a status poller) keep the daemon from going quiet and queue no writer job:
    idle work due for IDLE_MAX_LAG_S still runs."""
    w = Writer(str(tmp_path / "x.db"))
    w.idle = None
    w.scheduler.request_began()  # a reply in progress for good: never quiet
    w.IDLE_MAX_LAG_S = 0.05
    ran = threading.Event()

    def idle(conn: sqlite3.Connection) -> bool:
        ran.set()
        return False

    try:
        w.idle = idle
        w.run_sync(lambda c: None)  # the job makes idle work due; no job follows
        assert ran.wait(30)
    finally:
        w.idle = None
        w.close()


def test_the_real_idle_step_drains_under_constant_interruption(tmp_path: Path) -> None:
    """backlog.idle_step itself, interrupted every millisecond: no interrupt is mistaken for another
    error (the backlog drains, the index stays consistent) and no idle step fails."""
    w = Writer(str(tmp_path / "x.db"))
    real = w.idle
    w.idle = None
    text = " ".join(f"line{i} def handler_{i}(request): return token_{i * 7919 % 1000} 鉴权" for i in range(400))
    w.run_sync(lambda c: [ops.insert_archive(c, _row(f"{text} row{i}", i)) for i in range(40)])
    drained = threading.Event()
    try:
        w.idle = _signalling(real, drained)
        with _preempted_every_ms(w):
            w.run_sync(lambda c: None)
            assert drained.wait(60)
        assert w.idle_failures == 0, w.last_idle_error
        assert w.run_sync(backlog.pending) == 0
        assert len(w.run_sync(lambda c: _tri_ids(c, "handler_39"))) == 40
        w.run_sync(_check)
    finally:
        w.idle = None
        w.close()
