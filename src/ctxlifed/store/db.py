"""Connections, the single writer, and short readers (datasette's shape).

Rules:
- One write connection, owned by :class:`Writer`. Jobs queue up; the writer drains what is
  queued and runs it in ONE ``BEGIN IMMEDIATE`` transaction (group commit), each job in its own
  SAVEPOINT so a failing job rolls back alone. A job's caller is answered only after COMMIT:
  an acknowledged event is durable (WAL, ``synchronous=NORMAL``: survives a daemon crash).
- Readers are separate ``query_only`` connections from a small pool; a progress handler aborts a
  read that runs past its deadline, so no reader pins the WAL for long.
- ``SQLITE_FULL`` becomes :class:`StorageFullError`; the low-disk guard refuses writes below the
  free-space mark before SQLite has to.
- Files are created 0600 (the daemon's umask) and re-checked after open.
"""

from __future__ import annotations

import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from .schema import has_trigram, migrate

T = TypeVar("T")


class StorageFullError(Exception):
    pass


def connect(path: str, *, readonly: bool = False) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=10.0, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout=10000")
    if readonly:
        conn.execute("PRAGMA query_only=1")
    else:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA journal_size_limit=67108864")
    conn.execute("PRAGMA temp_store=MEMORY")
    for suffix in ("", "-wal", "-shm"):
        try:
            os.chmod(path + suffix, 0o600)
        except FileNotFoundError:
            pass
    return conn


def _is_full(exc: sqlite3.Error) -> bool:
    name = getattr(exc, "sqlite_errorname", "")
    return name == "SQLITE_FULL" or "database or disk is full" in str(exc)


class _Outside:
    """A writer job that must run outside a transaction (checkpoints, VACUUM)."""

    def __init__(self, fn: Callable[[sqlite3.Connection], Any]) -> None:
        self.fn = fn

    def __call__(self, conn: sqlite3.Connection) -> Any:
        return self.fn(conn)


class Writer:
    """The single writer. ``await writer.run(fn)`` runs ``fn(conn)`` inside a committed transaction."""

    def __init__(self, path: str, *, min_free_bytes: int = 0, max_group: int = 256) -> None:
        self.path = path
        self.min_free_bytes = min_free_bytes
        self.max_group = max_group
        self.conn = connect(path)
        self._q: queue.SimpleQueue[tuple[Callable[[sqlite3.Connection], Any], Any] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name="ctxlifed-writer", daemon=True)
        self.commits = 0
        self.jobs = 0
        self.trigram = has_trigram(self.conn)
        self._begin()
        try:
            self.applied = migrate(self.conn)
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self._thread.start()

    def _begin(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def free_bytes(self) -> int:
        st = os.statvfs(os.path.dirname(self.path) or ".")
        return st.f_bavail * st.f_frsize

    def _loop(self) -> None:
        while True:
            first = self._q.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < self.max_group:
                try:
                    nxt = self._q.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self._q.put(None)
                    break
                batch.append(nxt)
            self._run_batch(batch)

    def _run_batch(self, batch: list[tuple[Callable[[sqlite3.Connection], Any], Any]]) -> None:
        results: list[tuple[bool, Any]] = []
        outside = [job for job in batch if isinstance(job[0], _Outside)]
        if outside:
            batch = [job for job in batch if not isinstance(job[0], _Outside)]
            for fn, done in outside:
                try:
                    done((True, fn(self.conn)))
                except sqlite3.Error as exc:
                    done((False, exc))
            if not batch:
                return
        if self.min_free_bytes and self.free_bytes() < self.min_free_bytes:
            err = StorageFullError(
                f"free disk space below {self.min_free_bytes // (1 << 20)} MiB on {os.path.dirname(self.path)}"
            )
            for _fn, done in batch:
                done((False, err))
            return
        try:
            self._begin()
        except sqlite3.Error as exc:
            for _fn, done in batch:
                done((False, StorageFullError(str(exc)) if _is_full(exc) else exc))
            return
        for i, (fn, _done) in enumerate(batch):
            sp = f"j{i}"
            self.conn.execute(f"SAVEPOINT {sp}")
            try:
                results.append((True, fn(self.conn)))
                self.conn.execute(f"RELEASE {sp}")
            except BaseException as exc:  # a job's failure must not poison the group
                try:
                    self.conn.execute(f"ROLLBACK TO {sp}")
                    self.conn.execute(f"RELEASE {sp}")
                except sqlite3.Error:
                    pass
                if isinstance(exc, sqlite3.Error) and _is_full(exc):
                    exc = StorageFullError(str(exc))
                results.append((False, exc))
        try:
            self.conn.execute("COMMIT")
            self.commits += 1
            self.jobs += len(batch)
        except sqlite3.Error as exc:
            try:
                self.conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            err = StorageFullError(str(exc)) if _is_full(exc) else exc
            results = [(False, err)] * len(batch)
        for (_fn, done), res in zip(batch, results, strict=True):
            done(res)

    def submit(self, fn: Callable[[sqlite3.Connection], T], done: Callable[[tuple[bool, Any]], None]) -> None:
        self._q.put((fn, done))

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in the writer transaction; returns after COMMIT (or raises)."""
        event = anyio.Event()
        box: list[tuple[bool, Any]] = []
        token = anyio.lowlevel.current_token()

        def done(res: tuple[bool, Any]) -> None:
            box.append(res)
            anyio.from_thread.run_sync(event.set, token=token)

        self.submit(fn, done)
        await event.wait()
        ok, value = box[0]
        if ok:
            return value
        raise value

    def run_sync(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Blocking variant for tools and tests outside an event loop."""
        ev = threading.Event()
        box: list[tuple[bool, Any]] = []

        def done(res: tuple[bool, Any]) -> None:
            box.append(res)
            ev.set()

        self.submit(fn, done)
        ev.wait()
        ok, value = box[0]
        if ok:
            return value
        raise value

    async def checkpoint(self, mode: str = "PASSIVE") -> tuple[int, int, int] | None:
        """Run ``PRAGMA wal_checkpoint(mode)`` on the writer thread, outside any transaction."""
        if mode not in ("PASSIVE", "FULL", "RESTART", "TRUNCATE"):
            raise ValueError(mode)
        return await self.run(_Outside(lambda c: c.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()))

    def close(self) -> None:
        self._q.put(None)
        self._thread.join(timeout=30)
        try:
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error:
            pass
        self.conn.close()


class Readers:
    """A small pool of query-only connections; each read runs in a worker thread with a deadline."""

    def __init__(self, path: str, size: int = 4, deadline_s: float = 2.0) -> None:
        self.path = path
        self.deadline_s = deadline_s
        self._pool: queue.SimpleQueue[sqlite3.Connection] = queue.SimpleQueue()
        self._all: list[sqlite3.Connection] = []
        for _ in range(size):
            c = connect(path, readonly=True)
            self._pool.put(c)
            self._all.append(c)
        self.limiter = anyio.CapacityLimiter(size)

    def _with_conn(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._pool.get()
        deadline = time.monotonic() + self.deadline_s
        conn.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 10_000)
        try:
            return fn(conn)
        finally:
            conn.set_progress_handler(None, 0)
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            self._pool.put(conn)

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await anyio.to_thread.run_sync(self._with_conn, fn, limiter=self.limiter)

    def run_sync(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return self._with_conn(fn)

    def close(self) -> None:
        for c in self._all:
            c.close()
