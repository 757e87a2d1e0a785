"""The composition root: paths -> checks -> locks -> bind -> store -> service -> serve.

Rules:
- Order of start: umask 0o077; data dir created or tightened to 0700; the data-dir flock (one
  daemon per data dir: a second one, whatever its socket, exits naming the first's pid and socket,
  except a socket-activated one, which asks the first to stop and takes over);
  runtime dir created/verified 0700; the socket flock; bind (or take systemd's socket); open the
  store and migrate; ingest the spool; warm the hot path up (``core/warmup.py``: its first-use
  compiles, and ``Readers.warm``: a worker thread and a connection's schema, are paid here, not by
  the first hook); only then READY=1 and ``task_status``.
- Stop: SIGTERM/SIGINT (or the ``shutdown`` method) stops accepting, lets in-flight requests finish
  (grace period), commits, checkpoints, unlinks the socket only if it is still ours, exits 0.
  A second signal forces an immediate exit. Nothing waits out a timeout on the way: the file
  watcher's thread is told to stop when the stop begins (``watch``).
- The daemon exits by itself when its socket file was removed or replaced (another daemon or a
  user's ``rm``): a daemon nobody can reach must not linger.
- Never a traceback on a client's wire. Logging (``runtime.logs``): redacted, capped, rate-limited
  JSON lines, to stderr or to the rotating ``<data>/ctxlifed.log`` when stderr is /dev/null.
- Descriptor budget (ssh-agent): at most ``RLIMIT_NOFILE - FD_RESERVE`` connections, so a flood
  meets the connection cap (eviction, ``busy``) before the process runs out of descriptors.
- Housekeeping (every ``SPOOL_POLL_S``): socket ownership, spool ingestion, a changed free-space
  mark or size cap from a reloaded config, a passive checkpoint every ``CHECKPOINT_S``, and
  retention (``service.retention``) at start and every ``retention_interval_s``.
"""

from __future__ import annotations

import gc
import os
import resource
import signal
import socket
import sqlite3
import sys
import time
from typing import Any

import anyio
import anyio.abc
import structlog

from . import __version__
from .core.warmup import warm_up
from .protocol import _errors as E
from .runtime import logs, systemd
from .runtime.config import Config, load
from .runtime.dirs import ensure_data_dir, ensure_private_dir
from .runtime.lock import AlreadyRunning, acquire_lock, bind_unix, owns_socket, request_shutdown, unlink_if_owned
from .runtime.logs import configure as configure_logging  # noqa: F401 - the daemon's main and bench use it
from .runtime.paths import Paths
from .scheduler import Scheduler
from .server.listener import Limits, Server
from .service import retention
from .service.app import Service
from .store.db import Readers, StorageFullError, StorageUnavailableError, Writer, storage_fault

log = structlog.get_logger("ctxlifed")

GRACE_S = 10.0
TAKEOVER_S = 2 * GRACE_S + 5  # how long a socket-activated daemon waits for the one it asked to stop
OWNERSHIP_CHECK_S = 2.0
SPOOL_POLL_S = 1.0
CHECKPOINT_S = 2.0  # background PASSIVE checkpoints (off the commit path; see store.db.Writer)
FD_RESERVE = 32  # database (writer + readers: db, wal, shm), listener, lock, log, watcher, transcripts


def translate(exc: BaseException) -> E.RpcError | None:
    """Map known failures below the service to typed errors (anything else is -32603)."""
    if isinstance(exc, sqlite3.Error):
        exc = storage_fault(exc) or exc  # an unwritable or full store met outside the writer
    if isinstance(exc, StorageUnavailableError):
        return E.StorageUnavailable(f"storage unavailable: {exc}; nothing was stored (the shim spools the event)")
    if isinstance(exc, StorageFullError):
        return E.StorageFull(f"storage full: {exc}; the event was not stored (the shim spools it)")
    if isinstance(exc, OverflowError):
        # An integer parameter beyond SQLite's 64-bit range (e.g. recall --id 99999999999999999999).
        return E.InvalidParams("a number in the request is out of range (64-bit signed integers only)")
    if isinstance(exc, sqlite3.OperationalError):
        name = getattr(exc, "sqlite_errorname", "")
        if name == "SQLITE_INTERRUPT":
            return E.Busy("the query ran past its deadline; narrow it (a project, a session, more words)")
        if name in ("SQLITE_BUSY", "SQLITE_LOCKED"):
            return E.Busy("the store is busy; retry")
    return None


def fd_budget(max_connections: int) -> int:
    """Connections allowed by the descriptor limit (``RLIMIT_NOFILE - FD_RESERVE``, at least 4)."""
    try:
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return max_connections
    if soft == resource.RLIM_INFINITY:
        return max_connections
    return max(4, min(max_connections, soft - FD_RESERVE))



def ready_line(socket: str, data_dir: str) -> str:
    """The one line a person running the daemon in a terminal reads (stdout; the log goes to stderr)."""
    return f"ctxlifed {__version__} is running: socket {socket} · data {data_dir} · Ctrl-C to stop"

class Daemon:
    def __init__(self, paths: Paths, cfg: Config | None = None) -> None:
        self.paths = paths
        self.cfg = cfg if cfg is not None else load(paths.config)
        self.lock_fd: int | None = None
        self.data_lock_fd: int | None = None
        self.ident: tuple[int, int] | None = None
        self.activated = False
        self.service: Service | None = None
        self.server: Server | None = None
        self.writer: Writer | None = None
        self.readers: Readers | None = None
        self._signals = 0

    # -- start ---------------------------------------------------------------------------------
    def _listeners(self) -> list[Any]:
        inherited = systemd.inherited_listeners()
        if inherited:
            self.activated = True
            self._take_over_data_lock(_served_path(inherited, self.paths.socket))
            return inherited
        self.data_lock_fd = acquire_lock(self.paths.data_lock, self.paths.socket, what="the data directory")
        ensure_private_dir(self.paths.runtime_dir)
        if os.path.realpath(self.paths.lock) != os.path.realpath(self.paths.data_lock):
            self.lock_fd = acquire_lock(self.paths.lock, self.paths.socket)
        sock, self.ident = bind_unix(self.paths.socket)
        return [sock]

    def _take_over_data_lock(self, served: str) -> None:
        """The data-dir lock for a socket-activated daemon: a daemon started elsewhere (by a shim that
        saw another socket) is asked to stop, and its lock taken once released (``TAKEOVER_S``)."""
        try:
            self.data_lock_fd = acquire_lock(self.paths.data_lock, served, what="the data directory")
            return
        except AlreadyRunning as exc:
            if exc.socket is None or exc.socket == served or not request_shutdown(exc.socket):
                raise
            log.warning("taking_over", pid=exc.pid, socket=exc.socket, data_dir=self.paths.data_dir,
                        reason="socket-activated: this daemon serves the data directory")
        deadline = time.monotonic() + TAKEOVER_S
        while True:
            try:
                self.data_lock_fd = acquire_lock(self.paths.data_lock, served, what="the data directory")
                return
            except AlreadyRunning:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.02)  # the other daemon drains (at most its grace period), then releases

    async def run(self, *, task_status: anyio.abc.TaskStatus[Any] = anyio.TASK_STATUS_IGNORED) -> int:
        os.umask(0o077)
        ensure_data_dir(self.paths.data_dir)
        try:
            socks = self._listeners()
        except BaseException:
            self._close_locks()
            raise
        t0 = time.monotonic()
        # Who waits for whom (replies, reads, derivation, idle work): one object, the rules in scheduler.py.
        scheduler = Scheduler()
        try:
            self.writer = Writer(self.paths.db, min_free_bytes=self.cfg.min_free_mb << 20,
                                 max_bytes=self.cfg.max_db_mb << 20, scheduler=scheduler)
            self.writer.start_checkpointer()
            self.readers = Readers(self.paths.db)
        except BaseException:
            self._close()  # a store that cannot be opened (StoreUnusableError) leaves no socket behind
            raise
        self.service = svc = Service(self.cfg, self.paths, self.writer, self.readers, started=t0,
                                          scheduler=scheduler)
        limits = Limits(max_frame=self.cfg.max_frame, max_batch=self.cfg.max_batch,
                        max_connections=fd_budget(self.cfg.max_connections), idle_timeout_s=self.cfg.idle_timeout_s,
                        request_timeout_s=self.cfg.request_timeout_s)

        async def dispatch(method: str, params: bytes, rid: Any = None) -> Any:
            return await svc.dispatch(method, params, rid)

        self.server = server = Server(dispatch, limits, translate=translate, scheduler=scheduler)
        listeners = socks  # raw, non-blocking: the server accepts on them (server/listener.py)
        try:
            async with anyio.create_task_group() as tg:
                svc.bind(tg)
                try:
                    await svc.recover()  # events acknowledged but not derived before the last stop
                except Exception:  # noqa: BLE001 - they stay pending; the next start retries
                    log.exception("derive_recover_failed")
                try:
                    await svc.ingest_spool()
                except Exception:  # noqa: BLE001 - a bad spool must not stop the daemon
                    log.exception("spool_ingest_failed")
                for lst in listeners:
                    tg.start_soon(server.serve_listener, lst, tg)
                await tg.start(self._signal_watch)
                tg.start_soon(self._housekeeping)
                tg.start_soon(self._watch_files)
                tg.start_soon(self._watch_outputs)
                try:  # the hot path's first-use work, so the first hook does not pay it
                    warm_up()
                    await self.readers.warm()
                except Exception:  # noqa: BLE001 - never a reason not to start
                    log.exception("warm_up_failed")
                ready_ms = (time.monotonic() - t0) * 1000
                log.info("ready", version=__version__, socket=self.paths.socket, db=self.paths.db,
                         activated=self.activated, pid=os.getpid(), ready_ms=round(ready_ms, 1),
                         config_problems=list(self.cfg.problems))
                if sys.stdout is not None and sys.stdout.isatty():  # a person started us (make run)
                    print(ready_line(self.paths.socket, self.paths.data_dir), flush=True)
                # Start-up objects (modules, config, compiled patterns) never die: keep them out of
                # the collector's sight, so a full collection scans only what requests created
                # (otherwise it costs tens of ms, paid by whichever hook triggers it).
                gc.collect()
                gc.freeze()
                systemd.notify(f"READY=1\nSTATUS=serving on {self.paths.socket}\nMAINPID={os.getpid()}")
                task_status.started(self)
                await svc.stop_requested.wait()
                await self._stop(listeners)
                tg.cancel_scope.cancel()
        finally:
            self._close()
        return 0

    async def _stop(self, listeners: list[Any]) -> None:
        systemd.notify("STOPPING=1")
        t0 = time.monotonic()
        server = self.server
        log.info("stopping", in_flight=server.in_flight if server else 0, connections=server.active if server else 0)
        drained = 0
        if server is not None:
            server.begin_stop()
            # The accept loops take the connections already queued (sent before we stopped: they
            # are answered), then return; only then are the listening sockets closed.
            await server.wait_accept_stopped(GRACE_S)
            drained = server.drained
        for lst in listeners:
            try:
                lst.close()
            except Exception:  # noqa: BLE001
                pass
        idle = True
        if server is not None:
            idle = await server.wait_idle(GRACE_S)
        if self.service is not None and self.service.backlog.pending():
            # Derive what was acknowledged; what is left stays pending in the store for the next start.
            left = self.service.backlog.pending()
            done = await self.service.backlog.wait(None, GRACE_S)
            log.info("derive_drained", pending=left, complete=done, left=self.service.backlog.pending())
        log.info("drained", backlog=drained, clean=idle, ms=round((time.monotonic() - t0) * 1000, 1),
                 left_in_flight=server.in_flight if server else 0)

    def _close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        if self.readers is not None:
            self.readers.close()
        if not self.activated:
            unlink_if_owned(self.paths.socket, self.ident)
        logs.flush_suppressed(force=True)
        log.info("stopped")
        self._close_locks()  # last: a released lock tells `ctxlifectl daemon stop` we are done

    def _close_locks(self) -> None:
        for fd in (self.lock_fd, self.data_lock_fd):
            if fd is not None:
                os.close(fd)
        self.lock_fd = self.data_lock_fd = None

    # -- background tasks ------------------------------------------------------------------------
    async def _signal_watch(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            task_status.started()  # handlers are installed before READY=1 is sent
            async for signum in signals:
                self._signals += 1
                if self._signals > 1:
                    log.warning("forced_exit", signal=signum)
                    os._exit(1)
                log.info("signal", signal=signal.Signals(signum).name)
                assert self.service is not None
                self.service.stop_requested.set()

    async def _housekeeping(self) -> None:
        assert self.service is not None and self.writer is not None
        last_cp = time.monotonic()
        last_retention: float | None = None
        failures_logged, last_failure_log = 0, -1e9
        while True:
            await anyio.sleep(SPOOL_POLL_S)
            logs.flush_suppressed()
            # The writer thread does not log: failed maintenance steps (retried every second) are
            # reported from here, at most once a minute, with how many failed since.
            failed = self.writer.idle_failures
            if failed > failures_logged and time.monotonic() - last_failure_log >= 60:
                log.warning("maintenance_failed", failed=failed - failures_logged, total=failed,
                            error=self.writer.last_idle_error)
                failures_logged, last_failure_log = failed, time.monotonic()
            if not self.activated and self.ident is not None and not owns_socket(self.paths.socket, self.ident):
                log.warning("socket_lost", socket=self.paths.socket, action="exiting")
                self.service.stop_requested.set()
                return
            cfg = self.service.cfg  # the watcher swaps in a reloaded config
            try:
                await self.writer.set_limits(min_free_bytes=cfg.min_free_mb << 20, max_bytes=cfg.max_db_mb << 20)
            except Exception:  # noqa: BLE001
                log.exception("limits_update_failed")
            try:
                await self.service.ingest_spool()
            except Exception:  # noqa: BLE001
                log.exception("spool_ingest_failed")
            now = time.monotonic()
            if (cfg.retention_days or cfg.max_project_mb) and (
                    last_retention is None or now - last_retention >= cfg.retention_interval_s):
                last_retention = now
                try:
                    report = await retention.enforce(self.writer, cfg, now=self.service.clock())
                    if report.deleted:
                        log.info("retention", **report.as_log())
                except StorageFullError:
                    log.warning("retention_deferred", reason="storage_full")
                except Exception:  # noqa: BLE001
                    log.exception("retention_failed")
            if now - last_cp > CHECKPOINT_S:
                self.writer.request_checkpoint()  # on the checkpoint thread: nothing here waits for it
                last_cp = time.monotonic()

    async def _watch_files(self) -> None:
        from .watch import Watched, watch_loop

        assert self.service is not None
        await watch_loop(Watched(config_path=self.paths.config, service=self.service, apply_config=self._apply_config))

    async def _watch_outputs(self) -> None:
        from .watch import readahead_loop

        assert self.service is not None
        await readahead_loop(self.service.readahead, self.service.stop_requested)

    def _apply_config(self, cfg: Config) -> None:
        """A reloaded config: the daemon's and the service's."""
        self.cfg = cfg
        if self.service is not None:
            self.service.cfg = cfg


def _served_path(listeners: list[Any], fallback: str) -> str:
    """The path of the first inherited Unix listening socket (systemd's, which may differ from ours)."""
    for lst in listeners:
        try:
            name = lst.getsockname()
        except OSError:
            continue
        if lst.family == socket.AF_UNIX and isinstance(name, str) and name.startswith("/"):
            return name
    return fallback


def run_daemon(paths: Paths, cfg: Config | None = None) -> int:
    return anyio.run(Daemon(paths, cfg).run)
