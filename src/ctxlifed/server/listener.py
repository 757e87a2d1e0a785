"""The anyio shell: accept loop, connections, limits, per-request logging.

Rules:
- Thin: bytes in -> ``protocol`` -> ``dispatch`` -> bytes out. No domain logic here.
- Every connection: peer uid checked (SO_PEERCRED) before a byte is read; a foreign uid is closed
  with no answer. Each frame must arrive within ``request_timeout_s`` of its first byte, and a
  connection idle for ``idle_timeout_s`` is closed (slowloris-safe). Frames are capped.
- Over ``max_connections`` a new connection gets one ``busy`` error and is closed.
- The accept loop survives EMFILE/ENFILE: it logs (rate-limited), backs off, and keeps serving
  the connections it has.
- A handler exception never escapes (it would kill the task group) and never reaches the wire
  as a traceback: it becomes -32603 and one log line with the request id.
"""

from __future__ import annotations

import errno
import os
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.abc
import msgspec
import structlog

from .. import protocol as P
from ..protocol import _errors as E
from ..runtime.lock import peer_uid

log = structlog.get_logger("ctxlifed.server")

Dispatch = Callable[[str, bytes], Awaitable[Any]]
_enc = msgspec.json.Encoder()


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    max_frame: int = P.DEFAULT_MAX_FRAME
    max_batch: int = P.DEFAULT_MAX_BATCH
    max_connections: int = 256
    idle_timeout_s: float = 30.0
    request_timeout_s: float = 10.0
    allow_root: bool = False


class Server:
    def __init__(self, dispatch: Dispatch, limits: Limits, *, translate: Callable[[BaseException], E.RpcError | None] | None = None) -> None:
        self.dispatch = dispatch
        self.limits = limits
        self.translate = translate
        self.active = 0
        self.in_flight = 0
        self.accepting = True
        self.rejected_peers = 0
        self._idle = anyio.Event()
        self._idle.set()
        self._last_emfile_log = 0.0
        self.uid = os.geteuid()

    # -- accept -------------------------------------------------------------------------------
    async def serve_listener(self, listener: anyio.abc.SocketListener, tg: anyio.abc.TaskGroup) -> None:
        backoff = 0.01
        while self.accepting:
            try:
                stream = await listener.accept()
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    now = time.monotonic()
                    if now - self._last_emfile_log > 5.0:
                        log.warning("accept_failed", error=errno.errorcode.get(exc.errno or 0, str(exc)),
                                    active=self.active, hint="descriptor limit reached; backing off")
                        self._last_emfile_log = now
                    await anyio.sleep(backoff)
                    backoff = min(backoff * 2, 0.5)
                    continue
                if not self.accepting:
                    return
                raise
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
            backoff = 0.01
            tg.start_soon(self._connection, stream)

    # -- one connection ------------------------------------------------------------------------
    async def _connection(self, stream: anyio.abc.SocketStream) -> None:
        async with stream:
            raw: socket.socket = stream.extra(anyio.abc.SocketAttribute.raw_socket)
            uid = peer_uid(raw)
            if uid is None or (uid != self.uid and not (uid == 0 and self.limits.allow_root)):
                self.rejected_peers += 1
                log.warning("peer_rejected", peer_uid=uid)
                return
            if self.active >= self.limits.max_connections or not self.accepting:
                err = E.Busy("too many connections") if self.accepting else E.ShuttingDown("daemon is stopping")
                with anyio.move_on_after(1):
                    await stream.send(P.encode_frame(P.encode_rpc_error(None, err)))
                return
            self.active += 1
            try:
                await self._serve_stream(stream)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, ConnectionError):
                pass
            finally:
                self.active -= 1

    async def _serve_stream(self, stream: anyio.abc.SocketStream) -> None:
        dec = P.FrameDecoder(self.limits.max_frame)
        frame_started: float | None = None
        while True:
            # Answer every complete frame already buffered.
            while True:
                try:
                    frame = dec.next_frame()
                except P.FrameTooLarge as exc:
                    err = P.encode_error(None, {"code": E.PARSE_ERROR, "message": "Parse error",
                                                "data": {"name": "frame_too_large", "limit": exc.limit}})
                    with anyio.move_on_after(1):
                        await stream.send(P.encode_frame(err))
                    log.info("request", method="-", outcome="frame_too_large", limit=exc.limit)
                    return
                if frame is None:
                    break
                reply = await self.handle_frame(frame)
                if reply is not None:
                    await stream.send(P.encode_frame(reply))
                if not self.accepting:
                    return
            if dec.buffered:
                if frame_started is None:
                    frame_started = time.monotonic()
                timeout = frame_started + self.limits.request_timeout_s - time.monotonic()
            else:
                frame_started = None
                timeout = self.limits.idle_timeout_s
            if timeout <= 0:
                return
            with anyio.move_on_after(timeout) as scope:
                try:
                    data = await stream.receive(65536)
                except anyio.EndOfStream:
                    return
            if scope.cancelled_caught:
                return
            dec.receive_data(data)

    # -- one frame -----------------------------------------------------------------------------
    async def handle_frame(self, frame: bytes) -> bytes | None:
        msg = P.parse_message(frame, max_batch=self.limits.max_batch)
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
        self._idle = anyio.Event() if self.in_flight == 1 else self._idle
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
            if self.in_flight == 0:
                self._idle.set()
        ms = (time.perf_counter() - t0) * 1000
        log.info("request", method=call.method, ms=round(ms, 3), outcome=outcome,
                 notification=call.notification)
        return None if call.notification else reply

    async def wait_idle(self, timeout: float) -> bool:
        with anyio.move_on_after(timeout):
            await self._idle.wait()
            return True
        return False


