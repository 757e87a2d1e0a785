"""Connections, the single writer, and short readers (datasette's shape).

Rules:
- One write connection, owned by :class:`Writer`. Jobs queue up; the writer drains what is
  queued and runs it in ONE ``BEGIN IMMEDIATE`` transaction (group commit), each job in its own
  SAVEPOINT so a failing job rolls back alone. A job's caller is answered only after COMMIT:
  an acknowledged event is durable (WAL, ``synchronous=NORMAL``: survives a daemon crash).
- Readers are separate ``query_only`` connections from a small pool; a progress handler aborts a
  read that runs past its deadline, so no reader pins the WAL for long.
- ``SQLITE_FULL`` becomes :class:`StorageFullError`; the low-disk guard refuses writes below the
  free-space mark before SQLite has to. An optional size cap (``max_bytes``, SQLite's
  ``max_page_count``) gives the same typed error once the store reaches it; both can change while
  the daemon runs (``set_limits``).
- Deleting is forgetting: the writer runs with ``secure_delete=ON`` (deleted cells are zeroed), and
  a ``TRUNCATE`` checkpoint (``forget``, retention, close) first merges the FTS indexes when rows
  were deleted since the last one, so deleted text is gone from the main file, the WAL and the
  FTS segments, not merely unlinked.
- Jobs submitted ``low`` (write-behind derivation) run only when no normal job waits, at most
  ``LOW_GROUP`` per transaction, so an acknowledgement waits for at most one short low group.
- Idle work (the trigram backlog, ``backlog.py``) runs on the writer thread in its own short
  transactions when no job is queued and the daemon's ``Scheduler`` allows it (``idle_allowed``:
  the rules are written in ``scheduler.py``; it also tells the writer to ``preempt`` and ``nudge``), and at least every
  ``IDLE_MAX_LAG_S`` under load: work that need not be durable with the acknowledgement stays off
  the reply path but always drains. It uses a second connection (``idle_conn``), only ever from the
  writer thread and never inside a job's transaction, so there is still one writer at a time; that
  connection alone is interrupted (``preempt``, ``sqlite3_interrupt``) when a job or a request
  arrives during a step: the step rolls back and is redone later, and nobody waits for it.
  A step interrupted ``MAX_PREEMPTS`` times in a row is not interruptible the next time, so a stream
  of requests can delay idle work but never starve it.
- One lock (``_busy``) is held around every transaction. An acknowledgement (``run(inline=True)``)
  that finds the writer free and nothing queued runs on the caller's thread under that lock instead
  of hopping to the writer thread and back; otherwise it is queued like any job. The caller is the
  event loop, which must never wait for a lock: the inline BEGIN does not wait (busy timeout 0), and
  when another process holds the write lock (a ``sqlite3`` shell, a backup) the job goes to the
  writer thread, which waits for it as usual.
- A job's caller is woken without blocking the writer thread, so a caller that was cancelled
  (shutdown) can never stall the writer or ``close``. On asyncio (the daemon's backend) the writer
  schedules ``Event.set`` on the loop with ``loop.call_soon_threadsafe`` (public asyncio API; only a
  closed loop is ignored: nobody waits then); on any other backend the caller waits for a
  ``threading.Event`` in an anyio worker thread (``anyio.to_thread.run_sync``, abandoned on
  cancellation), which costs a thread wake-up per queued job. No anyio internals: an event-loop
  token's private fields changed shape between anyio releases, and a wake-up that failed silently
  left a job's caller waiting for ever. Jobs still queued when the writer stops are answered with
  :class:`StoreClosedError`, so no waiter is left behind.
- Storage faults are typed and retryable; a job that hits one stored nothing: ``SQLITE_FULL`` /
  ENOSPC is :class:`StorageFullError`; an unwritable store (EPERM, EACCES, EROFS, EIO,
  ``SQLITE_IOERR``, ``SQLITE_READONLY``, ``SQLITE_CANTOPEN``) is :class:`StorageUnavailableError`, a
  subclass, so every retry path treats both alike. The writer survives them: once the fault is
  cleared the next job commits, with no restart.
- Files are created 0600 (the daemon's umask) and re-checked after open. Before SQLite maps the
  WAL index, the store's files are checked (``check_files``): each that exists must be a regular
  file of ours that we can open read-write. A ``-shm`` that cannot be written (immutable, read-only,
  another owner) kills the process with SIGBUS on its first write through the mapping, so the
  store refuses to open instead (:class:`StoreUnusableError`, the message names the fix). A
  ``-shm`` made immutable while we run is checked for (``shm_problem``) before every transaction,
  read and checkpoint: they are refused with :class:`StorageUnavailableError` until it is fixed,
  and a stop then leaves the last connection open rather than checkpoint through the mapping.
- The WAL is capped (``wal_cap``): past it, the writer thread runs a ``TRUNCATE`` checkpoint
  before its next transaction, waiting for the readers still on older frames (each read has a
  deadline). A ``PASSIVE`` checkpoint alone never restarts the log while readers overlap, and a
  burst with reads going on then grew the WAL without bound. It does the same when a transaction is
  refused below the free-space mark: the WAL keeps its high-water size until truncated, and on a
  small disk that may be the space missing (the daemon stayed refusing after space was freed).
- Readers: a search (``Readers.search``) runs under a budget (``search_s``; past it,
  :class:`QueryTooBroadError`) and at most ``size - RESERVED`` searches hold a connection at once,
  so other reads (hooks, status) always find one: no client can hold every reader.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ctypes
import errno
import fcntl
import os
import queue
import sqlite3
import stat
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread

from ..scheduler import Scheduler
from . import backlog
from .schema import applied_names, has_trigram, migrate

T = TypeVar("T")
BUSY_TIMEOUT_MS = 10_000  # how long a statement waits for another process's lock (off the event loop)
JOURNAL_SIZE_LIMIT = 64 << 20  # a restarted WAL is cut back to this (SQLite's journal_size_limit)


class StorageFullError(Exception):
    """The store cannot take a write now (full); nothing was stored: retry later. Every retry path
    (derivation, spool ingestion, retention) catches this class, so the other storage faults
    subclass it."""


class StorageUnavailableError(StorageFullError):
    """The store cannot be written now (EPERM, EROFS, EIO, read-only, cannot open); nothing was
    stored: retry later."""


class StoreClosedError(Exception):
    """The writer stopped before it ran this job; nothing was stored."""


class StoreUnusableError(Exception):
    """The store cannot be opened safely; the message names the file and the fix."""


class QueryTooBroadError(Exception):
    """A search ran out of its budget: ``reason`` is ``terms`` (more than ``limit`` terms) or
    ``time`` (more than ``limit`` seconds)."""

    def __init__(self, message: str, *, reason: str, limit: float) -> None:
        super().__init__(message)
        self.reason = reason
        self.limit = limit


_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_UNAVAILABLE_ERRNOS = frozenset({errno.EPERM, errno.EACCES, errno.EROFS, errno.EIO})
_UNAVAILABLE_SQLITE = ("SQLITE_IOERR", "SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM")
FS_IOC_GETFLAGS = 0x80086601  # <linux/fs.h>: _IOR('f', 1, long)
_FS_IMMUTABLE_FL, _FS_APPEND_FL = 0x10, 0x20


def connect(path: str, *, readonly: bool = False) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    if readonly:
        conn.execute("PRAGMA query_only=1")
    else:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}")
        conn.execute("PRAGMA secure_delete=ON")
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


def _interrupted(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and (
        getattr(exc, "sqlite_errorname", "") == "SQLITE_INTERRUPT" or "interrupted" in str(exc))


def storage_fault(exc: BaseException) -> StorageFullError | None:
    """The typed storage fault ``exc`` is (a full or an unwritable store), or None."""
    if isinstance(exc, StorageFullError):
        return exc
    if isinstance(exc, sqlite3.Error):
        name = getattr(exc, "sqlite_errorname", "") or ""
        if _is_full(exc):
            return StorageFullError(str(exc))
        if name.startswith(_UNAVAILABLE_SQLITE):
            return StorageUnavailableError(f"{exc} ({name})")
        return None
    if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
        return StorageFullError(str(exc))
    if isinstance(exc, OSError) and exc.errno in _UNAVAILABLE_ERRNOS:
        return StorageUnavailableError(str(exc))
    return None


def _typed(exc: BaseException) -> BaseException:
    return storage_fault(exc) or exc


def _frozen(path: str) -> str:
    """"" unless ``path`` is immutable or append-only (then the message with the fix). It opens and
    closes the file, which drops this process's POSIX locks on it: only for a store not open yet."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""  # gone, or not openable: the caller's own checks tell
    try:
        flags = int.from_bytes(fcntl.ioctl(fd, FS_IOC_GETFLAGS, bytes(8))[:4], "little")
    except OSError:
        return ""  # no such flags here (tmpfs, another OS)
    finally:
        os.close(fd)
    if flags & (_FS_IMMUTABLE_FL | _FS_APPEND_FL):
        return f"{path} is immutable or append-only: as root, chattr -i -a {path}"
    return ""


def shm_problem(path: str) -> str:
    """Why SQLite could not write the store's WAL index (``-shm``) through its mapping now, or "".
    A write through the mapping of an immutable file raises SIGBUS, which kills the process: every
    transaction, read and checkpoint of ours asks first. ``access()``, not ``open()``: closing a
    descriptor of the file would drop SQLite's POSIX locks on it."""
    shm = path + "-shm"
    if os.access(shm, os.W_OK) or not os.path.lexists(shm):
        return ""
    return (f"{shm} is not writable (immutable, read-only or not ours): as root, chattr -i {shm}, or"
            f" chmod 600 {shm}; writes resume by themselves")


def _abandon(conn: sqlite3.Connection) -> None:
    """Never close ``conn``: closing the last connection checkpoints through the WAL index mapping,
    which raises SIGBUS when the ``-shm`` cannot be written. One reference is leaked on purpose (only
    at a stop during that fault); the OS releases the files at exit and the next start recovers."""
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(conn))


def _fix_for(path: str, st: os.stat_result) -> str:
    """Why ``path`` cannot serve as a store file, and what fixes it ("" when it can)."""
    if not stat.S_ISREG(st.st_mode):
        return f"{path} is not a regular file: remove it (rm {path}) with the daemon stopped"
    if st.st_uid != os.geteuid():
        return f"{path} belongs to uid {st.st_uid}, not to you: move it away (mv {path} {path}.bak)"
    if os.access(path, os.W_OK):
        return ""
    return _frozen(path) or f"{path} is not writable: chmod 600 {path}, or move it away with the daemon stopped"


def check_files(path: str) -> None:
    """Refuse a store whose files SQLite could not write (see the module rules): a ``-shm`` that
    cannot be written kills the process (SIGBUS) at its first write through the mapping."""
    for f in (path, path + "-wal", path + "-shm"):
        try:
            st = os.lstat(f)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise StoreUnusableError(f"cannot inspect {f}: {exc}") from None
        fix = _fix_for(f, st)
        if fix:
            raise StoreUnusableError(fix)


class _Marked:
    """A writer job tagged with how the writer must run it (the subclass says how)."""

    def __init__(self, fn: Callable[[sqlite3.Connection], Any]) -> None:
        self.fn = fn

    def __call__(self, conn: sqlite3.Connection) -> Any:
        return self.fn(conn)


class _Low(_Marked):
    """A low-priority writer job: run only when no normal job waits (see ``Writer.run(low=True)``)."""


_NUDGE: Any = ("nudge",)  # a queue item that only wakes the writer


class _Outside(_Marked):
    """A writer job that must run outside a transaction (checkpoints, VACUUM)."""


_DEFAULT_MAX_PAGES = 1073741823  # SQLite's default max_page_count

_PURGE_TRACKING = [
    "CREATE TEMP TABLE IF NOT EXISTS _ctxlifed_purge(k INTEGER PRIMARY KEY)",
    "CREATE TEMP TRIGGER IF NOT EXISTS _ctxlifed_archive_deleted AFTER DELETE ON main.archive"
    " BEGIN INSERT OR IGNORE INTO _ctxlifed_purge(k) VALUES (1); END",
]


def _once(done: Callable[[tuple[bool, Any]], None]) -> Callable[[tuple[bool, Any]], None]:
    called = False

    def wrapper(res: tuple[bool, Any]) -> None:
        nonlocal called
        if not called:
            called = True
            done(res)

    return wrapper


def _loop_call_soon() -> Callable[[Callable[[], object]], Any] | None:
    """The running asyncio loop's ``call_soon_threadsafe`` (public asyncio API: schedules a callback
    from any thread without waiting), or None on another anyio backend."""
    try:
        return asyncio.get_running_loop().call_soon_threadsafe
    except RuntimeError:
        return None


_WAITERS: anyio.lowlevel.RunVar[anyio.CapacityLimiter] = anyio.lowlevel.RunVar("ctxlifed_writer_waiters")
MAX_WAITER_THREADS = 64  # worker threads waiting for queued jobs at once; more callers queue for one


def _waiter_limiter() -> anyio.CapacityLimiter:
    """This event loop's limiter for the threads that wait for queued jobs: their own, so a burst of
    acknowledgements never takes the threads other ``to_thread`` work needs."""
    try:
        return _WAITERS.get()
    except LookupError:
        limiter = anyio.CapacityLimiter(MAX_WAITER_THREADS)
        _WAITERS.set(limiter)
        return limiter


WAL_SOON = 64 << 20  # bytes of WAL past which a commit asks the checkpoint thread for a PASSIVE checkpoint
# (each checkpoint has a fixed cost, and copies a page once however often the WAL rewrote it: the
# larger the mark, the less CPU a burst spends on checkpoints; figures in bench/RESULTS.md)
WAL_CAP = 256 << 20  # bytes of WAL past which the writer thread truncates it (TRUNCATE checkpoint)
TRUNCATE_WAIT_MS = 1_000  # how long that checkpoint waits for the reads in progress (new ones wait for it)
TRUNCATE_RETRY_S = 1.0  # after it gave up (a reader outside the daemon): first retry, doubling up to
TRUNCATE_RETRY_MAX_S = 60.0


def _wal_bytes(path: str) -> int:
    """The size of the store's WAL file; 0 when there is none."""
    try:
        return os.path.getsize(path + "-wal")
    except OSError:
        return 0


class Writer:
    """The single writer. ``await writer.run(fn)`` runs ``fn(conn)`` inside a committed transaction."""

    IDLE_MAX_LAG_S = 0.5  # under sustained load, idle work still runs at least this often
    IDLE_POLL_S = 0.02  # how often a busy daemon is asked whether idle work may run (besides ``nudge``)
    LOW_GROUP = 4  # low-priority jobs per transaction
    MAX_PREEMPTS = 2  # an idle step interrupted this often in a row is not interruptible (progress)
    IDLE_RETRY_S = 1.0  # a failed idle step is retried after this long

    def __init__(self, path: str, *, min_free_bytes: int = 0, max_group: int = 256, max_bytes: int = 0,
                 wal_cap: int = WAL_CAP, scheduler: Scheduler | None = None) -> None:
        self.path = path
        # When idle work may run (asked from the writer thread); it tells us to stop or go.
        self.scheduler = scheduler if scheduler is not None else Scheduler()
        self.min_free_bytes = min_free_bytes
        self.max_bytes = 0
        self._max_pages = _DEFAULT_MAX_PAGES  # ``max_bytes`` in pages, for every write connection
        self.max_group = max_group
        self.wal_cap = wal_cap
        self._wal_soon = min(WAL_SOON, wal_cap // 4)
        self._wal_over = False  # the WAL passed ``wal_cap``: the writer thread truncates it next
        self.wal_truncations = 0
        self.wal_truncations_blocked = 0
        self._wal_retry_at = 0.0  # after a truncation that readers outside the daemon blocked
        self._wal_backoff = 0.0
        self._gate = _gate_for(path)  # holds our own readers back while the WAL is truncated
        check_files(path)
        try:
            self.conn = connect(path)
            self.conn.execute(f"PRAGMA journal_size_limit={min(JOURNAL_SIZE_LIMIT, wal_cap)}")
            self.idle_conn = self._open_idle()  # idle work only (see the rules): interruptible on its own
        except (sqlite3.Error, OSError) as exc:
            raise StoreUnusableError(f"cannot open the store {path}: {exc}") from None
        self._q: queue.SimpleQueue[tuple[Callable[[sqlite3.Connection], Any], Any] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name="ctxlifed-writer", daemon=True)
        self.commits = 0
        self.jobs = 0
        self.trigram = has_trigram(self.conn)
        self.idle_runs = 0
        self.preempted = 0  # idle steps interrupted by a job or a request (``preempt``)
        self._preempt_streak = 0  # interrupted in a row, without a step completing in between
        self._idle_lock = threading.Lock()
        self._in_idle = False  # a preemptible idle step is running its statements (not its COMMIT)
        self._interrupt_sent = False  # ``preempt`` interrupted the current idle step
        self._busy = threading.Lock()  # held while a transaction runs (writer thread, or ``run(inline=True)``)
        self.inline_runs = 0
        self.inline_busy = 0  # inline jobs handed to the writer thread: another process held the write lock
        self._idle_due = False  # the writer thread has idle work to do (``nudge`` wakes it only then)
        self.idle_failures = 0
        self.last_idle_error = ""
        self._idle_retry_at = 0.0  # after a failed idle step: not before this (monotonic)
        try:
            self._begin()
            try:
                self.applied = migrate(self.conn)
                self.conn.execute("COMMIT")
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise
        except (sqlite3.Error, OSError) as exc:
            self.idle_conn.close()
            self.conn.close()
            raise StoreUnusableError(f"cannot open the store {path}: {exc}") from None
        for stmt in _PURGE_TRACKING:
            self.conn.execute(stmt)
        self._apply_max_bytes(max_bytes)
        # Checkpoints are taken off the commit path: SQLite's automatic one would run inside a
        # random commit (a spike in the tail); ``background_checkpoint`` runs PASSIVE from its
        # own connection on the checkpoint thread, concurrently with writes (when the daemon asks,
        # periodically, and when a commit leaves the WAL past WAL_SOON), and the writer only steps
        # in past WAL_CAP.
        self.conn.execute("PRAGMA wal_autocheckpoint=0")
        # Idle work: the trigram backlog (``backlog.py``), indexed between jobs, off the reply path.
        self.idle: Callable[[sqlite3.Connection], bool] | None = (
            backlog.idle_step if "0009_fts_merge" in applied_names(self.conn) else None)
        self._cp_conn: sqlite3.Connection | None = None
        self._cp_lock = threading.Lock()
        self._cp_start_lock = threading.Lock()
        self._cp_wanted = threading.Event()
        self._cp_thread: threading.Thread | None = None
        self._closing = False
        self.scheduler.attach_idle_worker(self)
        self._stopped = False  # set by ``close`` once the writer thread is gone: ``submit`` answers at once
        self._submit_lock = threading.Lock()
        self._thread.start()

    def _apply_max_bytes(self, max_bytes: int) -> None:
        """Cap the database at ``max_bytes`` (0 = SQLite's default); never below its current size."""
        page = self.conn.execute("PRAGMA page_size").fetchone()[0]
        self._max_pages = int(-(-max_bytes // page) if max_bytes > 0 else _DEFAULT_MAX_PAGES)
        for conn in (self.conn, self.idle_conn):
            conn.execute(f"PRAGMA max_page_count={self._max_pages}")
        self.max_bytes = max(0, max_bytes)

    async def set_limits(self, *, min_free_bytes: int | None = None, max_bytes: int | None = None) -> None:
        """Change the free-space mark and the size cap of a running writer (config reload)."""
        if min_free_bytes is not None:
            self.min_free_bytes = min_free_bytes
        if max_bytes is not None and max_bytes != self.max_bytes:
            await self.run(_Outside(lambda c: self._apply_max_bytes(max_bytes)))

    def _purge_pending(self) -> bool:
        try:
            return self.conn.execute("SELECT 1 FROM temp._ctxlifed_purge").fetchone() is not None
        except sqlite3.Error:
            return False

    def _purge(self) -> bool:
        """Merge the FTS indexes so deleted rows leave no tokens behind (after ``forget``/retention)."""
        if not self._purge_pending():
            return False
        tables = [r[0] for r in self.conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name IN ('archive_fts', 'archive_tri')")]
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            for t in tables:
                self.conn.execute(f"INSERT INTO {t}({t}) VALUES ('optimize')")
            self.conn.execute("DELETE FROM temp._ctxlifed_purge")
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        return True

    def _checkpoint(self, mode: str) -> tuple[int, int, int]:
        problem = shm_problem(self.path)
        if problem:
            raise StorageUnavailableError(problem)
        if mode == "TRUNCATE":
            try:
                self._purge()
            except sqlite3.Error as exc:
                if _is_full(exc):
                    raise StorageFullError(str(exc)) from None
                raise
        return tuple(self.conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone())  # type: ignore[return-value]

    def _begin(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def _begin_nowait(self) -> bool:
        """BEGIN IMMEDIATE without waiting for another process's write lock; False if it is held."""
        conn = self.conn
        conn.execute("PRAGMA busy_timeout=0")
        try:
            self._begin()
            return True
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorcode", None) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                return False
            raise
        finally:
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")

    def _cap_wal(self) -> None:
        """Keep the WAL bounded without checkpointing on the commit path: past WAL_SOON the
        checkpoint thread runs a PASSIVE checkpoint next to the writer (a burst of big rows grows the
        WAL by megabytes a second, faster than the periodic checkpoint drains it); past ``wal_cap``
        the writer thread truncates it before its next transaction (``_truncate_wal``)."""
        size = _wal_bytes(self.path)
        if size > self.wal_cap:
            self._ask_truncation()
        elif size > self._wal_soon and not self._cp_wanted.is_set():
            self.request_checkpoint()

    def _ask_truncation(self) -> None:
        """Have the writer thread truncate the WAL before its next transaction (unless it backs off)."""
        if not self._wal_over and time.monotonic() >= self._wal_retry_at:
            self._wal_over = True
            if threading.current_thread() is not self._thread:
                self._q.put(_NUDGE)  # an inline commit: wake the writer thread to do it

    def start_checkpointer(self) -> None:
        """Start the checkpoint thread with its connection now. A daemon calls this once at start: the
        thread and the connection's descriptors are then part of its steady state from the first
        request, not something that appears in the middle of a busy hour. A read opens the connection's
        database, WAL and shared-memory files; no checkpoint runs here (a WAL left large by a crash is
        copied back by the thread, not before the daemon answers)."""
        if not shm_problem(self.path):
            with self._cp_lock:
                try:
                    if self._cp_conn is None:
                        self._cp_conn = self._open_checkpoint_conn()
                    self._cp_conn.execute("PRAGMA schema_version").fetchone()
                except sqlite3.Error:
                    pass  # as in background_checkpoint: a store that cannot be read is the writer's to report
        self._ensure_checkpoint_thread()

    def request_checkpoint(self) -> None:
        """Ask the checkpoint thread for a PASSIVE checkpoint (see ``background_checkpoint``); never waits."""
        self._cp_wanted.set()
        self._ensure_checkpoint_thread()

    def _ensure_checkpoint_thread(self) -> None:
        if self._cp_thread is not None:
            return
        with self._cp_start_lock:  # not ``_cp_lock``: a commit must not wait for a checkpoint to end
            if self._cp_thread is None and not self._closing:
                self._cp_thread = threading.Thread(target=self._checkpointer, name="ctxlifed-checkpoint", daemon=True)
                self._cp_thread.start()

    def _open_checkpoint_conn(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout=0")
        return conn

    def _checkpointer(self) -> None:
        # The request is taken (cleared) before the checkpoint runs: one made during it, or ``close``'s,
        # is seen at the next wait, never cleared unseen (which would leave the thread waiting for ever
        # and ``close`` waiting for it).
        while True:
            self._cp_wanted.wait()
            self._cp_wanted.clear()
            if self._closing:
                return
            self.background_checkpoint()

    def _truncate_wal(self) -> None:
        """The WAL passed ``wal_cap``, or a transaction was refused below the free-space mark
        (``_ask_truncation``): a TRUNCATE checkpoint from the writer thread, outside any
        transaction. It waits (busy handler) for the readers still on frames it must copy, which
        end within their deadline, and empties the file; if it could not finish (a reader outside the
        daemon), a commit asks again after a backoff."""
        self._wal_over = False
        busy = 1
        if shm_problem(self.path):
            self._wal_retry_at = time.monotonic() + TRUNCATE_RETRY_S
            return
        with self._cp_lock:  # not next to the checkpoint thread's PASSIVE: SQLite would say busy
            try:
                # First copy what can be copied with reads going on; then, with new reads held back
                # (they would keep the last frames in use), wait for the reads in progress and empty the WAL.
                self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                self.conn.execute(f"PRAGMA busy_timeout={TRUNCATE_WAIT_MS}")
                with self._gate.closed():
                    busy = self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            except sqlite3.Error:
                pass
            finally:
                self.conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        if busy:  # a reader outside the daemon held on (a ``sqlite3`` shell): back off
            self.wal_truncations_blocked += 1
            self._wal_backoff = min(TRUNCATE_RETRY_MAX_S, self._wal_backoff * 2 or TRUNCATE_RETRY_S)
            self._wal_retry_at = time.monotonic() + self._wal_backoff
        else:
            self._wal_backoff = 0.0
            self.wal_truncations += 1

    def background_checkpoint(self) -> tuple[int, int, int] | None:
        """PASSIVE checkpoint from a dedicated connection (call from a worker thread): it copies what
        it can without waiting for, or blocking, the writer."""
        if shm_problem(self.path):
            return None
        with self._cp_lock:
            try:
                if self._cp_conn is None:
                    self._cp_conn = self._open_checkpoint_conn()
                return tuple(self._cp_conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone())  # type: ignore[return-value]
            except sqlite3.Error:
                return None

    def free_bytes(self) -> int:
        st = os.statvfs(os.path.dirname(self.path) or ".")
        return st.f_bavail * st.f_frsize

    def _loop(self) -> None:
        high: collections.deque[tuple[Any, Any]] = collections.deque()
        low: collections.deque[tuple[Any, Any]] = collections.deque()
        stopping = False
        idle_due = self.idle is not None  # a previous run may have left work behind
        last_idle = time.monotonic()
        while True:
            if self._wal_over:
                with self._busy:
                    self._truncate_wal()
            self._idle_due = idle_due  # what ``nudge`` reads
            # Take everything queued; block only when there is nothing to do at all.
            while True:
                if high or low or stopping:
                    try:
                        item = self._q.get_nowait()
                    except queue.Empty:
                        break
                elif idle_due:
                    # Idle work waits for a quiet daemon (``idle_allowed``), checked every IDLE_POLL_S.
                    try:
                        item = self._q.get(timeout=0 if self.scheduler.idle_allowed() else self.IDLE_POLL_S)
                    except queue.Empty:
                        break
                else:
                    item = self._q.get()
                if item is None:
                    stopping = True
                elif item is _NUDGE:
                    if self._wal_over and not high and not low:
                        break  # an inline commit passed the WAL cap: truncate it now
                    continue  # woken to re-check ``idle_allowed``
                elif isinstance(item[0], _Low):
                    low.append(item)
                else:
                    high.append(item)
            if not high and not low:
                if stopping:
                    return
                if idle_due and time.monotonic() >= self._idle_retry_at:
                    # When quiet, or due for IDLE_MAX_LAG_S (requests or reads keep the daemon from
                    # going quiet): one step now. Interruptible, unless interrupted MAX_PREEMPTS
                    # times in a row: that one runs through (progress).
                    if time.monotonic() - last_idle >= self.IDLE_MAX_LAG_S or self.scheduler.idle_allowed():
                        idle_due, last_idle = self._idle_step(), time.monotonic()
                continue
            # Acknowledgements first; low-priority jobs in small groups so they never hold one up long.
            src, cap = (high, self.max_group) if high else (low, self.LOW_GROUP)
            batch = [src.popleft() for _ in range(min(cap, len(src)))]
            batch = [(fn, _once(done)) for fn, done in batch]
            try:
                with self._busy:
                    self._run_batch(batch)
            except BaseException as exc:  # noqa: BLE001 - the writer thread must never die
                for _fn, done in batch:
                    done((False, exc))  # no-op for the jobs already answered
            if self.idle is not None:
                if not idle_due:  # the batch may have queued work: due from now on
                    idle_due, last_idle = True, time.monotonic()
                now = time.monotonic()
                # Not while a job waits (an acknowledgement that arrived during the batch goes
                # first): under load the queue still empties between requests, and the step runs then.
                if now - last_idle >= self.IDLE_MAX_LAG_S and now >= self._idle_retry_at and self._q.empty():
                    idle_due, last_idle = self._idle_step(), time.monotonic()

    def _idle_step(self) -> bool:
        """One idle step from the loop: interruptible unless interrupted MAX_PREEMPTS times in a row."""
        with self._busy:
            return self._run_idle(preemptible=self._preempt_streak < self.MAX_PREEMPTS)

    def _run_idle(self, *, preemptible: bool = False) -> bool:
        """One short transaction of idle work (``self.idle``, on ``idle_conn``); True if more remains.
        A failure (I/O, a bug) leaves the work for later: it is retried after ``IDLE_RETRY_S``.
        ``preemptible``: ``preempt`` may interrupt the step's statements (never its
        COMMIT); the step then rolls back, and is redone after whatever interrupted it."""
        idle = self.idle
        if idle is None or (self.min_free_bytes and self.free_bytes() < self.min_free_bytes):
            return False
        if shm_problem(self.path):
            self._idle_retry_at = time.monotonic() + self.IDLE_RETRY_S
            return True  # the work is still there: later
        conn = self.idle_conn
        self._interrupt_sent = False
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            return preemptible and _interrupted(exc)  # an interrupt that came before the step began
        try:
            self._in_idle = preemptible
            if preemptible and not self._q.empty():  # queued before ``preempt`` could see the step
                self.preempt()
            try:
                more = idle(conn)
            finally:
                with self._idle_lock:  # from here on no interrupt can be sent
                    self._in_idle = False
            conn.execute("COMMIT")
            self.idle_runs += 1
            self._cap_wal()
            self._preempt_streak = 0
            return more
        except BaseException as exc:  # noqa: BLE001 - the writer thread must never die
            self._idle_rollback()
            # An interrupt can surface as another error ("vtable constructor failed: ..."): what
            # counts is that one was sent during this step.
            if preemptible and (_interrupted(exc) or self._interrupt_sent):
                self.preempted += 1
                self._preempt_streak += 1
                return True  # the work is still there
            # Anything else (I/O, a full disk, a bug): the work is still there too; retry later.
            self.idle_failures += 1
            self.last_idle_error = repr(exc)[:300]
            self._idle_retry_at = time.monotonic() + self.IDLE_RETRY_S
            return True

    def _open_idle(self) -> sqlite3.Connection:
        conn = connect(self.path)
        conn.execute("PRAGMA wal_autocheckpoint=0")
        # SQLite < 3.42 checks a pending interrupt when it *prepares* a statement, and clears it only
        # when one starts to run: prepare the statements that frame a step now, while no interrupt
        # can be pending (the statement cache keeps them; this connection runs a handful of statements).
        # An interrupt sent after a step's last statement then never fails its COMMIT or ROLLBACK.
        conn.execute("SELECT 1").fetchall()
        for end in ("ROLLBACK", "COMMIT"):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(end)
        conn.execute(f"PRAGMA max_page_count={self._max_pages}")
        return conn

    def _idle_rollback(self) -> None:
        """End a failed idle step's transaction whatever it takes: an open one would hold the write
        lock and stall every job."""
        conn = self.idle_conn
        for _ in range(3):
            if not conn.in_transaction:
                return
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                try:  # a cached statement that runs clears an interrupt still pending
                    conn.execute("SELECT 1").fetchall()
                except sqlite3.Error:
                    pass
        if conn.in_transaction:  # last resort: closing a connection rolls its transaction back
            try:
                conn.close()
            finally:
                self.idle_conn = self._open_idle()

    def preempt(self) -> None:
        """A job or a request needs the writer: interrupt the idle step in progress, if
        any (from any thread; costs nothing when there is none)."""
        if self._in_idle:
            with self._idle_lock:
                if self._in_idle:
                    self.idle_conn.interrupt()
                    self._interrupt_sent = True

    def _run_batch(self, batch: list[tuple[Callable[[sqlite3.Connection], Any], Any]]) -> None:
        outside = [job for job in batch if isinstance(job[0], _Outside)]
        if outside:
            batch = [job for job in batch if not isinstance(job[0], _Outside)]
            for fn, done in outside:
                try:
                    res: tuple[bool, Any] = (True, fn(self.conn))
                except BaseException as exc:  # noqa: BLE001
                    res = (False, exc)
                done(res)
            if not batch:
                return
        pending = batch
        while pending:
            pending = self._run_group(pending)

    def _run_group(self, batch: list[tuple[Callable[[sqlite3.Connection], Any], Any]], *,
                   nowait: bool = False) -> list[Any] | None:
        """One transaction for ``batch``. Returns the jobs to run again in a fresh transaction (when a
        job's error made SQLite roll the whole transaction back), else []. ``nowait`` (an inline job,
        on the event loop): when another process holds the write lock, return None at once, with
        nothing run and nobody answered, instead of waiting up to the busy timeout."""
        if self.min_free_bytes and self.free_bytes() < self.min_free_bytes:
            # The WAL keeps its high-water size until it is truncated: on a small disk that space may be
            # what is missing. Give it back before the next transaction; this one is refused (retried).
            if _wal_bytes(self.path):
                self._ask_truncation()
            err = StorageFullError(
                f"free disk space below {self.min_free_bytes // (1 << 20)} MiB on {os.path.dirname(self.path)}"
            )
            for _fn, done in batch:
                done((False, err))
            return []
        problem = shm_problem(self.path)
        if problem:
            err = StorageUnavailableError(problem)
            for _fn, done in batch:
                done((False, err))
            return []
        try:
            if nowait:
                if not self._begin_nowait():
                    return None
            else:
                self._begin()
        except sqlite3.Error as exc:
            for _fn, done in batch:
                done((False, _typed(exc)))
            return []
        results: list[tuple[bool, Any]] = []
        for i, (fn, done) in enumerate(batch):
            sp = "j"  # released or rolled back before the next: one name, one cached statement
            try:
                self.conn.execute(f"SAVEPOINT {sp}")
                results.append((True, fn(self.conn)))
                self.conn.execute(f"RELEASE {sp}")
            except BaseException as exc:  # a job's failure must not poison the group
                exc = _typed(exc)
                if not self.conn.in_transaction:
                    # SQLITE_FULL, IOERR, NOMEM... can roll the whole transaction back: the jobs before
                    # this one are undone too. Answer this one; run the others again.
                    done((False, exc))
                    return batch[:i] + batch[i + 1:]
                try:
                    self.conn.execute(f"ROLLBACK TO {sp}")
                    self.conn.execute(f"RELEASE {sp}")
                except sqlite3.Error:
                    pass
                results.append((False, exc))
        problem = shm_problem(self.path)  # again: it may have become immutable during the jobs
        if problem:
            try:
                self.conn.execute("ROLLBACK")  # nothing written yet: no write through the mapping
            except sqlite3.Error:
                pass
            err = StorageUnavailableError(problem)
            for _fn, done in batch:
                done((False, err))
            return []
        try:
            self.conn.execute("COMMIT")
            self.commits += 1
            self._cap_wal()
            self.jobs += len(batch)
        except sqlite3.Error as exc:
            try:
                self.conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            results = [(False, _typed(exc))] * len(batch)
        for (_fn, done), res in zip(batch, results, strict=True):
            done(res)
        return []

    def nudge(self) -> None:
        """The daemon went quiet: idle work may start now (instead of at the next IDLE_POLL_S). A
        writer with no idle work due is not woken (the daemon goes quiet after every request)."""
        if self.idle is not None and self._idle_due:
            self._q.put(_NUDGE)

    def submit(self, fn: Callable[[sqlite3.Connection], T], done: Callable[[tuple[bool, Any]], None], *,
               low: bool = False) -> None:
        with self._submit_lock:
            if self._stopped:
                done((False, StoreClosedError("the store is closed")))
                return
            self._q.put((_Low(fn) if low else fn, done))
        if not low:
            self.preempt()

    async def run(self, fn: Callable[[sqlite3.Connection], T], *, low: bool = False, inline: bool = False) -> T:
        """Run ``fn`` in the writer transaction; returns after COMMIT (or raises). ``low``: queued
        behind every normal job (work that acknowledges nothing: write-behind derivation).
        ``inline`` (a short job: one acknowledgement): when no job is queued and no transaction is
        running, run it right here, on the caller's thread, under the same lock as the writer
        thread's transactions (still one writer at a time); it skips two thread wake-ups, the
        largest part of a lone acknowledgement's latency on an idle machine. Else it is queued."""
        if inline and not low and not self._wal_over and self._q.empty() and self._busy.acquire(blocking=False):
            got: list[tuple[bool, Any]] = []
            try:
                started = self._run_group([(fn, _once(got.append))], nowait=True) is not None
            finally:
                self._busy.release()
            if started:
                self.inline_runs += 1
                ok, value = got[0]
                if ok:
                    return value  # type: ignore[no-any-return]
                raise value
            self.inline_busy += 1  # another process holds the write lock: the writer thread waits for it
        box: list[tuple[bool, Any]] = []
        call_soon = _loop_call_soon()
        if call_soon is not None:  # asyncio (the daemon's loop): the writer schedules the wake-up
            event = anyio.Event()

            def done(res: tuple[bool, Any]) -> None:
                box.append(res)
                try:
                    call_soon(event.set)
                except RuntimeError:  # the loop is closed (shutdown): nobody is waiting any more
                    pass

            self.submit(fn, done, low=low)
            await event.wait()
        else:  # any other backend: wait in a worker thread
            answered = threading.Event()

            def done(res: tuple[bool, Any]) -> None:
                box.append(res)
                answered.set()

            self.submit(fn, done, low=low)
            await anyio.to_thread.run_sync(answered.wait, abandon_on_cancel=True, limiter=_waiter_limiter())
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
        """Run ``PRAGMA wal_checkpoint(mode)`` on the writer thread, outside any transaction. A
        TRUNCATE (after ``forget``/retention) first finishes the idle work, so the WAL it empties
        stays empty."""
        if mode not in ("PASSIVE", "FULL", "RESTART", "TRUNCATE"):
            raise ValueError(mode)

        def job(conn: sqlite3.Connection) -> tuple[int, int, int]:
            if mode == "TRUNCATE":
                failures = self.idle_failures
                while self._run_idle() and self.idle_failures == failures:
                    pass
            return self._checkpoint(mode)

        return await self.run(_Outside(job))

    def close(self) -> None:
        self._closing = True
        self._cp_wanted.set()
        if self._cp_thread is not None:
            self._cp_thread.join(timeout=30)
        with self._cp_lock:
            if self._cp_conn is not None:
                self._cp_conn.close()
                self._cp_conn = None
        self._q.put(None)
        self._thread.join(timeout=30)
        if not self._thread.is_alive():  # jobs submitted after the stop: answer them, nobody waits for ever
            with self._submit_lock:
                self._stopped = True
                while True:
                    try:
                        item = self._q.get_nowait()
                    except queue.Empty:
                        break
                    if item is not _NUDGE and isinstance(item, tuple):
                        item[1]((False, StoreClosedError("the store is closed")))
        self.idle_conn.close()  # not the last connection: SQLite does not checkpoint
        try:
            self._checkpoint("TRUNCATE")
        except (sqlite3.Error, StorageFullError):
            pass
        if shm_problem(self.path):
            _abandon(self.conn)  # the last connection: closing it would write through the mapping
        else:
            self.conn.close()


class _ReadGate:
    """Lets the writer hold new reads back for a moment (``closed``): SQLite's TRUNCATE checkpoint
    needs a gap between reads, which overlapping reads never leave."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._closed = False

    def wait_open(self, timeout: float) -> None:
        with self._cond:
            if self._closed:
                self._cond.wait_for(lambda: not self._closed, timeout)

    @contextlib.contextmanager
    def closed(self) -> Iterator[None]:
        with self._cond:
            self._closed = True
        try:
            yield
        finally:
            with self._cond:
                self._closed = False
                self._cond.notify_all()


_gates: weakref.WeakValueDictionary[str, _ReadGate] = weakref.WeakValueDictionary()
_gates_lock = threading.Lock()


def _gate_for(path: str) -> _ReadGate:
    """The one gate of a store in this process, shared by its writer and its readers."""
    key = os.path.realpath(path)
    with _gates_lock:
        gate = _gates.get(key)
        if gate is None:
            gate = _gates[key] = _ReadGate()
        return gate


_TOO_BIG = ("expression tree is too large", "too many sql variables", "parser stack overflow",
            "string or blob too big")


class Readers:
    """A small pool of query-only connections; each read runs in a worker thread with a deadline.
    Searches (``search``) take at most ``size - RESERVED`` of them at once, under their own budget."""

    RESERVED = 2  # connections a search never takes: hooks and status always find one

    def __init__(self, path: str, size: int = 4, deadline_s: float = 2.0, search_s: float = 1.0) -> None:
        self.path = path
        self.deadline_s = deadline_s
        self.search_s = search_s
        self._gate = _gate_for(path)
        # Last in, first out: the connection used last has the warmest page cache (a quiet store keeps
        # it across reads), and the others stay cold instead of all being half warm.
        self._pool: queue.LifoQueue[sqlite3.Connection] = queue.LifoQueue()
        self._all: list[sqlite3.Connection] = []
        for _ in range(size):
            c = connect(path, readonly=True)
            self._pool.put(c)
            self._all.append(c)
        self.limiter = anyio.CapacityLimiter(size)
        self.search_limiter = anyio.CapacityLimiter(max(1, size - self.RESERVED))

    def _with_conn(self, fn: Callable[[sqlite3.Connection], T], budget_s: float | None = None) -> T:
        self._gate.wait_open(TRUNCATE_WAIT_MS / 1000)
        problem = shm_problem(self.path)
        if problem:  # starting a read may write a read mark through the mapping: SIGBUS
            raise StorageUnavailableError(problem)
        conn = self._pool.get()
        deadline = time.monotonic() + (budget_s if budget_s is not None else self.deadline_s)
        conn.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 10_000)
        try:
            return fn(conn)
        except sqlite3.Error as exc:
            if budget_s is None:
                raise
            if _interrupted(exc):
                raise QueryTooBroadError(f"the search ran past its budget of {budget_s:g} s", reason="time",
                                         limit=budget_s) from None
            if any(m in str(exc).lower() for m in _TOO_BIG):
                raise QueryTooBroadError(f"the search is too large for SQLite ({exc})", reason="terms",
                                         limit=0) from None
            raise
        finally:
            conn.set_progress_handler(None, 0)
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            self._pool.put(conn)

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await anyio.to_thread.run_sync(self._with_conn, fn, limiter=self.limiter)

    async def warm(self) -> None:
        """One read now, before the first request: it starts the worker thread reads run on (anyio keeps
        the last one alive) and reads a connection's schema, which the first hook paid for otherwise."""
        await self.run(_read_schema)

    async def search(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """A search on behalf of a client (recall): within ``search_s`` or :class:`QueryTooBroadError`,
        and never more than ``size - RESERVED`` at once (the others wait their turn)."""
        async with self.search_limiter:
            return await anyio.to_thread.run_sync(self._with_conn, fn, self.search_s, limiter=self.limiter)

    def run_sync(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return self._with_conn(fn)

    def close(self) -> None:
        unwritable = shm_problem(self.path)
        for c in self._all:
            if unwritable:
                _abandon(c)  # as Writer.close: one of them may be the last connection
            else:
                c.close()


def _read_schema(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0])
