"""The anyio shell: accept loop, connections, limits, per-request logging.

Rules:
- Thin: bytes in -> ``protocol`` -> ``dispatch`` -> bytes out. No domain logic here.
- The server tells the daemon's ``Scheduler`` when it begins and ends answering a frame and when a
  connection opens and closes, and gives it a probe (``connection_waiting``: a connection queued on
  a listening socket, not accepted yet); background work yields to replies by the rules written there.
- Every connection: peer uid checked (SO_PEERCRED) before a byte is read; a foreign uid is closed
  with no answer. Each frame must arrive within ``request_timeout_s`` of its first byte, and a
  connection idle for ``idle_timeout_s`` is closed (slowloris-safe). Frames are capped. A reply
  that the peer does not read within ``request_timeout_s`` closes the connection.
- At ``max_connections`` a new connection makes room by closing the connection that is doing the
  least: the one whose partial frame has been arriving longest (a slow sender), else the one idle
  longest. Only when every connection is busy inside a request does the newcomer get one ``busy``
  error. So silent or slow connections can never lock a normal client out.
- The accept loop survives EMFILE/ENFILE/ENOBUFS/ENOMEM: it logs (at most one line per ``LOG_EVERY_S``, with a count), evicts an
  idle connection to free a descriptor, backs off, and keeps serving. It never stops accepting
  while the daemon runs.
- Stop (``begin_stop``): no new connection is accepted after the backlog is drained; every frame
  already received or arriving within ``DRAIN_S`` is answered; idle connections are closed;
  ``wait_idle`` returns once no request is in flight and no connection is open.
- A handler exception never escapes (it would kill the task group) and never reaches the wire
  as a traceback: it becomes -32603 and one log line with the request id.
- Lean hot path: a hook is one short connection, so the listening and accepted sockets are used
  raw (non-blocking): accept, recv and send are tried first and a task waits for readiness
  (``anyio.wait_readable``/``wait_writable``, under a cancel scope for deadlines and kicks) only
  when the call would block. An anyio stream would add a checkpoint (one event-loop turn) before
  every receive and send, and a cancel scope per call (measured: ``bench/RESULTS.md``). The raw
  socket is used only through one small class (``_Conn``), which holds the deadline, kick and close
  rules: a socket is closed only by the task that serves it, after its wait has ended. A connection
  that always has a next frame ready (pipelining) yields to the others every ``FAIR_FRAMES`` frames.
"""

from __future__ import annotations

import errno
import os
import select
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import msgspec
import structlog

from .. import protocol as P
from ..protocol import _errors as E
from ..runtime.lock import peer_uid
from ..scheduler import Scheduler

log = structlog.get_logger("ctxlifed.server")

Dispatch = Callable[[str, bytes], Awaitable[Any]]
_enc = msgspec.json.Encoder()

OVERLOAD_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
LOG_EVERY_S = 5.0  # at most one accept/eviction warning per interval
DRAIN_S = 0.05  # on stop, how long an idle connection may still deliver a frame already sent
SLOW_MS = 100.0  # a request slower than this is logged at INFO (others at DEBUG)
RECV_BYTES = 65536
FAIR_FRAMES = 16  # frames a connection answers in a row, without waiting, before it yields once


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    max_frame: int = P.DEFAULT_MAX_FRAME
    max_batch: int = P.DEFAULT_MAX_BATCH
    max_connections: int = 256
    idle_timeout_s: float = 30.0
    request_timeout_s: float = 10.0
    allow_root: bool = False


class _Conn:
    """One accepted connection: the raw non-blocking socket, used only through these methods, and
    what the server knows about it (for eviction and stop).

    The rules live here: every wait has a deadline; a wait for bytes can be kicked (``kick`` names
    why: "evict" or "stop") by cancelling its scope; the socket is closed only by the task serving
    it (``with conn:``), after its wait has ended, never by the task that kicks it.
    """

    __slots__ = ("sock", "busy", "frame_started", "last_active", "scope", "kick")

    def __init__(self, sock: socket.socket, now: float) -> None:
        self.sock = sock
        self.busy = False  # inside a request: never evicted
        self.frame_started: float | None = None  # first byte of a partial frame
        self.last_active = now
        self.scope: anyio.CancelScope | None = None  # set while waiting for bytes
        self.kick: str | None = None  # "evict" or "stop": why ``scope`` was cancelled

    def __enter__(self) -> _Conn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def peer_uid(self) -> int | None:
        return peer_uid(self.sock)

    def recv_now(self) -> bytes | None:
        """What has arrived (b"" at end of stream), or None when nothing has: no wait."""
        try:
            return self.sock.recv(RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return None

    async def wait_readable(self, timeout: float) -> bool:
        """Wait up to ``timeout`` for bytes; False when the deadline passed or the wait was kicked."""
        with anyio.CancelScope(deadline=anyio.current_time() + timeout) as scope:
            self.scope = scope
            if self.kick is not None:  # kicked before the wait began
                scope.cancel()
            try:
                await anyio.wait_readable(self.sock)
            finally:
                self.scope = None
        return not scope.cancelled_caught

    async def send(self, payload: bytes, timeout: float) -> bool:
        """Write one frame; False if the peer does not take it within ``timeout``. A reply fits the
        socket buffer almost always: no wait then."""
        sock = self.sock
        view = memoryview(P.encode_frame(payload))
        try:
            view = view[sock.send(view):]
        except (BlockingIOError, InterruptedError):
            pass
        if not view:
            return True
        with anyio.move_on_after(timeout):
            while view:
                await anyio.wait_writable(sock)
                try:
                    view = view[sock.send(view):]
                except (BlockingIOError, InterruptedError):
                    pass
            return True
        return False


class _RateLimited:
    def __init__(self, event: str) -> None:
        self.event = event
        self.last = -1e9
        self.suppressed = 0

    def __call__(self, **kw: Any) -> bool:
        now = time.monotonic()
        if now - self.last < LOG_EVERY_S:
            self.suppressed += 1
            return False
        log.warning(self.event, suppressed=self.suppressed, **kw)
        self.last, self.suppressed = now, 0
        return True


class Server:
    def __init__(self, dispatch: Dispatch, limits: Limits, *, translate: Callable[[BaseException], E.RpcError | None] | None = None,
                 scheduler: Scheduler | None = None) -> None:
        self.dispatch = dispatch
        self.scheduler = scheduler if scheduler is not None else Scheduler()
        self.limits = limits
        self.translate = translate
        self.in_flight = 0
        self.accepting = True
        self.stopping = False
        self.rejected_peers = 0
        self.accept_errors = 0
        self.evicted = 0
        self.busy_replies = 0
        self._conns: set[_Conn] = set()
        self._idle = anyio.Event()
        self._idle.set()
        self._log_accept = _RateLimited("accept_failed")
        self._log_evict = _RateLimited("connection_evicted")
        self.uid = os.geteuid()
        self.drained = 0  # connections taken from the accept queue after stop began
        self._accept_scopes: set[anyio.CancelScope] = set()
        self._accepting_loops = 0
        self._accept_done = anyio.Event()
        self._listening = select.poll()  # the listening sockets, for ``connection_waiting``
        self.scheduler.attach_arrival_probe(self.connection_waiting)

    def connection_waiting(self) -> bool:
        """A connection waits in a listening socket's queue (not accepted yet): one ``poll`` with no
        timeout. The deriver asks at its pauses (``scheduler.py`` rule 3)."""
        return bool(self._listening.poll(0))

    @property
    def active(self) -> int:
        return len(self._conns)

    # -- accept -------------------------------------------------------------------------------
    async def serve_listener(self, listener: socket.socket, tg: anyio.abc.TaskGroup) -> None:
        """Accept on a listening socket (non-blocking) until ``begin_stop``; then take the
        connections already queued (they were sent before we stopped: they are answered) and
        return, after which the socket may be closed."""
        backoff = 0.01
        scope = anyio.CancelScope()
        self._accept_scopes.add(scope)
        self._accepting_loops += 1
        self._listening.register(listener, select.POLLIN)
        try:
            with scope:
                while self.accepting:
                    try:
                        sock, _ = listener.accept()
                    except (BlockingIOError, InterruptedError):
                        await anyio.wait_readable(listener)
                        continue
                    except OSError as exc:
                        if not self.accepting:
                            break
                        eno = exc.errno or 0
                        self.accept_errors += 1
                        overloaded = eno in OVERLOAD_ERRNOS
                        self._log_accept(error=errno.errorcode.get(eno, str(exc)), active=self.active,
                                         hint="descriptor limit reached; closing idle connections and backing off"
                                         if overloaded else "accept failed; retrying")
                        if overloaded and self._evict_some(max(8, self.active // 8)):
                            await anyio.sleep(0.002)  # the evicted connections close and free their descriptors
                            continue
                        await anyio.sleep(backoff)
                        backoff = min(backoff * 2, 0.5)
                        continue
                    backoff = 0.01
                    sock.setblocking(False)
                    tg.start_soon(self._connection, sock)
            self.drained += self._drain_backlog(listener, tg)
        finally:
            self._listening.unregister(listener)
            self._accept_scopes.discard(scope)
            self._accepting_loops -= 1
            if not self._accepting_loops:
                self._accept_done.set()

    def _drain_backlog(self, listener: socket.socket, tg: anyio.abc.TaskGroup) -> int:
        """On stop: take every connection already queued on ``listener`` so its request is answered."""
        n = 0
        while True:
            try:
                sock, _ = listener.accept()
            except OSError:  # BlockingIOError: the queue is empty; anything else: nothing more to take
                return n
            sock.setblocking(False)
            n += 1
            tg.start_soon(self._connection, sock)

    async def wait_accept_stopped(self, timeout: float = 5.0) -> bool:
        """After ``begin_stop``: wait until every accept loop has drained its queue and returned,
        so the listening sockets can be closed (nobody waits on them any more)."""
        with anyio.move_on_after(timeout):
            await self._accept_done.wait()
            return True
        return False

    def begin_stop(self) -> None:
        """Stop accepting; wake idle connections so they drain and close."""
        self.accepting = False
        self.stopping = True
        for scope in self._accept_scopes:
            scope.cancel()
        for c in list(self._conns):
            if not c.busy and c.frame_started is None and c.scope is not None and c.kick is None:
                c.kick = "stop"
                c.scope.cancel()
        self._check_idle()

    def _evict_one(self) -> bool:
        return self._evict_some(1) == 1

    def _evict_some(self, n: int) -> int:
        """Close up to ``n`` connections that are doing the least: slow partial frames (oldest first),
        then idle ones (idle longest first). Never one inside a request."""
        candidates = [c for c in self._conns if not c.busy and c.scope is not None and c.kick is None]
        if not candidates:
            return 0
        candidates.sort(key=lambda c: (c.frame_started is None, c.frame_started or c.last_active))
        victims = candidates[:n]
        for v in victims:
            v.kick = "evict"
            assert v.scope is not None
            v.scope.cancel()
        self.evicted += len(victims)
        self._log_evict(active=self.active, evicted=len(victims), limit=self.limits.max_connections,
                        reason="partial frame" if victims[0].frame_started is not None else "idle")
        return len(victims)

    # -- one connection ------------------------------------------------------------------------
    async def _connection(self, sock: socket.socket) -> None:
        with _Conn(sock, time.monotonic()) as conn:
            uid = conn.peer_uid()
            if uid is None or (uid != self.uid and not (uid == 0 and self.limits.allow_root)):
                self.rejected_peers += 1
                log.warning("peer_rejected", peer_uid=uid)
                return
            live = sum(1 for c in self._conns if c.kick != "evict") if len(self._conns) >= self.limits.max_connections else 0
            if live >= self.limits.max_connections and not self._evict_one():
                self.busy_replies += 1
                await conn.send(P.encode_rpc_error(None, E.Busy("too many connections")), 1.0)
                return
            self._conns.add(conn)
            self.scheduler.connection_opened()
            if self._idle.is_set():
                self._idle = anyio.Event()
            try:
                await self._serve(conn)
            except (anyio.ClosedResourceError, OSError):  # reset by the peer, or closed under us
                pass
            finally:
                self._conns.discard(conn)
                self.scheduler.connection_closed()
                self._check_idle()

    async def _serve(self, conn: _Conn) -> None:
        dec = P.FrameDecoder(self.limits.max_frame)
        unyielded = 0  # frames answered since this task last let the event loop run other tasks
        while True:
            # Answer every complete frame already buffered (also while stopping: they were received).
            while True:
                if unyielded >= FAIR_FRAMES:  # a client pipelining requests does not starve the others
                    unyielded = 0
                    await anyio.lowlevel.checkpoint()
                try:
                    frame = dec.next_frame()
                except P.FrameTooLarge as exc:
                    err = P.encode_error(None, {"code": E.PARSE_ERROR, "message": "Parse error",
                                                "data": {"name": "frame_too_large", "limit": exc.limit}})
                    await conn.send(err, 1.0)
                    log.info("request", method="-", outcome="frame_too_large", limit=exc.limit)
                    return
                if frame is None:
                    break
                unyielded += 1
                conn.busy = True
                self.scheduler.request_began()
                try:
                    reply = await self.handle_frame(frame)
                    sent = reply is None or await conn.send(reply, self.limits.request_timeout_s)
                finally:
                    conn.busy = False
                    self.scheduler.request_ended()
                if not sent:
                    log.info("request", method="-", outcome="reply_not_read")
                    return
                conn.last_active = time.monotonic()
            data = conn.recv_now()  # the request is usually there already: no wait
            if data is None:
                now = time.monotonic()
                if dec.buffered:
                    if conn.frame_started is None:
                        conn.frame_started = now
                    timeout = conn.frame_started + self.limits.request_timeout_s - now
                else:
                    conn.frame_started = None
                    timeout = DRAIN_S if self.stopping else self.limits.idle_timeout_s
                if timeout <= 0:
                    return
                unyielded = 0  # the wait below lets the others run
                if not await conn.wait_readable(timeout):
                    if conn.kick == "stop":
                        conn.kick = None  # one more short wait (DRAIN_S) for a frame already on its way
                        continue
                    return  # deadline passed, or evicted
                continue
            if not data:
                return  # end of stream
            dec.receive_data(data)

    # -- one frame -----------------------------------------------------------------------------
    async def handle_frame(self, frame: bytes) -> bytes | None:
        try:
            msg = P.parse_message(frame, max_batch=self.limits.max_batch)
        except Exception:  # noqa: BLE001 - the daemon never dies on input, even where the parser has a gap
            log.exception("parse_failed", size=len(frame))
            return P.encode_rpc_error(None, E.ParseError("Parse error"))
        responses: list[bytes | None] = []
        for item in msg.items:
            if isinstance(item, P.ErrorReply):
                responses.append(item.response)
                log.info("request", method="-", outcome="invalid")
                continue
            responses.append(await self._call(item))
        return P.assemble(msg, responses)

    async def _call(self, call: P.Call) -> bytes | None:
        t0 = time.perf_counter()
        outcome = "ok"
        self.in_flight += 1
        self._idle = anyio.Event() if self._idle.is_set() else self._idle
        try:
            try:
                result = await self.dispatch(call.method, call.params, call.id)
                reply = P.encode_result(call.id, result)
            except E.RpcError as exc:
                outcome = exc.name
                reply = P.encode_rpc_error(call.id, exc)
            except Exception as exc:  # noqa: BLE001 - the daemon never dies on input
                mapped = self.translate(exc) if self.translate else None
                if mapped is not None:
                    outcome = mapped.name
                    reply = P.encode_rpc_error(call.id, mapped)
                else:
                    outcome = "internal_error"
                    log.exception("request_failed", method=call.method, id=call.id)
                    reply = P.encode_rpc_error(call.id, E.InternalError("Internal error"))
        finally:
            self.in_flight -= 1
            self._check_idle()
        ms = (time.perf_counter() - t0) * 1000
        # One line per request only at DEBUG: hooks fire on every tool call, and a log line per
        # call costs CPU on the hot path and floods the journal. Failures and slow calls stay at INFO.
        (log.info if outcome != "ok" or ms >= SLOW_MS else log.debug)(
            "request", method=call.method, ms=round(ms, 3), outcome=outcome, notification=call.notification)
        return None if call.notification else reply

    def _check_idle(self) -> None:
        if self.in_flight == 0 and (not self.stopping or not self._conns):
            self._idle.set()

    async def wait_idle(self, timeout: float) -> bool:
        """Wait until no request is in flight (and, once stopping, no connection is open)."""
        with anyio.move_on_after(timeout):
            while True:
                await self._idle.wait()
                if self.in_flight == 0 and (not self.stopping or not self._conns):
                    return True
                self._idle = anyio.Event()
        return False
