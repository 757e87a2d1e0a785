"""The one blocking JSON-RPC 2.0 client over the daemon's Unix socket (stdlib only).

``ctxlifectl`` (``cli/client.py``, which adds the lock-file discovery and its messages) and the bench
(``bench/_common.py``) both talk to the daemon through :class:`Connection`.

Rules:
- Standard library only, fast to import (socket, json, os, stat, struct, sys, time); never imports
  the rest of the package, so the bench can load it from any checkout.
- Trust before the first byte: the socket's folder ours and writable by nobody else, the socket
  ours, the peer's uid ours (``SO_PEERCRED`` / ``LOCAL_PEERCRED``); otherwise :class:`UntrustedSocket`
  (a :class:`DaemonUnavailable`) says why and nothing is sent.
- Every exchange has a deadline; a reply is one line of at most ``MAX_REPLY`` bytes. Transport
  faults raise :class:`DaemonUnavailable` (the cause is chained); a JSON-RPC error raises
  :class:`RemoteError` with its code and ``data.name``.
- Frames are built here (:func:`frame`); a caller may pass ``params`` already encoded as JSON bytes
  (the bench encodes with msgspec so the client's own cost stays out of its figures).
- The hook shim (``_shim/ctxlifed_hook.py``) does NOT use this module: it runs as ``python3 -I -S``
  from a file copied into Claude Code's plugin cache, where the package cannot be imported, and its
  start-up cost is part of every hook's latency (it imports ``_socket``, not ``socket``). Its rules
  (trust, deadline) are the same; ``tests/reliability/test_clients.py`` holds the shim, ``ctxlifectl``
  and the status line to them.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import struct
import sys
import time
from typing import Any

MAX_REPLY = 16 << 20


class DaemonUnavailable(Exception):
    pass


class UntrustedSocket(DaemonUnavailable):
    """The socket, its folder or the process listening on it is not ours: nothing was sent."""


class RemoteError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data if isinstance(data, dict) else {}

    @property
    def name(self) -> str:
        return str(self.data.get("name", self.code))


def socket_problem(sock_path: str) -> str | None:
    """Why no client may talk to ``sock_path`` (its folder or the socket belongs to someone else or is
    writable by others), or None. An absent folder or socket is no problem (nothing to trust yet)."""
    d = os.path.dirname(sock_path) or "."
    uid = os.geteuid()
    try:
        st = os.stat(d)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot inspect {d}: {exc.strerror}"
    if st.st_uid != uid:
        return f"its folder {d} belongs to uid {st.st_uid}, not to you (uid {uid})"
    if st.st_mode & 0o022:
        return f"its folder {d} is writable by others (mode {stat.S_IMODE(st.st_mode):o})"
    try:
        sst = os.stat(sock_path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot inspect {sock_path}: {exc.strerror}"
    if not stat.S_ISSOCK(sst.st_mode):
        return f"{sock_path} is not a socket"
    if sst.st_uid != uid:
        return f"{sock_path} belongs to uid {sst.st_uid}, not to you (uid {uid})"
    return None


def peer_uid(s: socket.socket) -> int | None:
    """The uid of the process at the other end of ``s`` (None where the OS cannot tell)."""
    if hasattr(socket, "SO_PEERCRED"):  # Linux: struct ucred {pid, uid, gid}
        return int(struct.unpack("3i", s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[1])
    if sys.platform == "darwin" or "bsd" in sys.platform:  # LOCAL_PEERCRED at SOL_LOCAL: struct xucred
        raw = s.getsockopt(0, getattr(socket, "LOCAL_PEERCRED", 1), 76)
        return int(struct.unpack("Ii", raw[:8])[1])
    return None


def frame(method: str, params: Any, rid: int | str) -> bytes:
    """One request line; ``params`` is a JSON-able value or JSON already encoded (bytes)."""
    body = params if isinstance(params, bytes) else json.dumps(
        params if params is not None else {}, separators=(",", ":"), ensure_ascii=False).encode()
    return (b'{"jsonrpc":"2.0","id":' + json.dumps(rid).encode() + b',"method":' + json.dumps(method).encode()
            + b',"params":' + body + b"}\n")


def result_of(msg: Any, rid: int | str, where: str) -> Any:
    """The result of the decoded reply ``msg`` to request ``rid``; raises RemoteError on an error."""
    if not isinstance(msg, dict) or msg.get("id") != rid:
        raise DaemonUnavailable(f"unexpected reply from the daemon at {where}")
    if "error" in msg:
        e = msg["error"] if isinstance(msg["error"], dict) else {}
        raise RemoteError(int(e.get("code", -32603)), str(e.get("message", "error")), e.get("data"))
    return msg.get("result")


class Connection:
    """One trusted connection to the daemon; several requests may follow each other on it."""

    def __init__(self, sock_path: str, timeout: float = 10.0) -> None:
        self.path = sock_path
        self.timeout = timeout
        self._buf = b""
        why = socket_problem(sock_path)
        if why:
            raise UntrustedSocket(f"refusing to talk to {sock_path}: {why}")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(timeout)
            try:
                s.connect(sock_path)
            except (FileNotFoundError, ConnectionRefusedError) as exc:
                raise DaemonUnavailable(f"no daemon at {sock_path}") from exc
            except OSError as exc:
                raise DaemonUnavailable(f"cannot connect to {sock_path}: {exc}") from exc
            try:
                peer = peer_uid(s)
            except OSError as exc:
                raise UntrustedSocket(f"refusing to talk to {sock_path}: cannot tell who listens on it ({exc})") from exc
            if peer is not None and peer != os.geteuid():
                raise UntrustedSocket(f"refusing to talk to {sock_path}: the process listening on it runs as uid"
                                      f" {peer}, not as you (uid {os.geteuid()})")
        except BaseException:
            s.close()
            raise
        self._sock = s

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._sock.close()

    def exchange(self, data: bytes) -> bytes:
        """Send ``data`` (one or more request lines) and return the next reply line, without its newline."""
        deadline = time.monotonic() + self.timeout
        late = f"ctxlifed at {self.path} did not answer within {self.timeout:.1f}s"
        try:
            self._sock.settimeout(self.timeout)
            self._sock.sendall(data)
        except (TimeoutError, socket.timeout):
            raise DaemonUnavailable(late) from None
        except OSError as exc:
            raise DaemonUnavailable(f"connection to {self.path} failed: {exc}") from exc
        buf = self._buf
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DaemonUnavailable(late)
            self._sock.settimeout(left)
            try:
                chunk = self._sock.recv(1 << 16)
            except (TimeoutError, socket.timeout):
                raise DaemonUnavailable(late) from None
            except OSError as exc:
                raise DaemonUnavailable(f"connection to {self.path} failed: {exc}") from exc
            if not chunk:
                raise DaemonUnavailable(f"ctxlifed at {self.path} closed the connection without an answer")
            buf += chunk
            if len(buf) > MAX_REPLY:
                raise DaemonUnavailable(f"a reply from {self.path} is larger than {MAX_REPLY} bytes")
        line, self._buf = buf.split(b"\n", 1)
        return line

    def call(self, method: str, params: Any = None, rid: int | str = 1) -> Any:
        """One request and its result (json-decoded)."""
        line = self.exchange(frame(method, params, rid))
        try:
            msg = json.loads(line)
        except ValueError as exc:
            raise DaemonUnavailable(f"ctxlifed at {self.path} answered with something that is not JSON") from exc
        return result_of(msg, rid, self.path)


def call(sock_path: str, method: str, params: Any = None, *, timeout: float = 10.0, rid: int | str = 1) -> Any:
    """One connection, one request, one result."""
    with Connection(sock_path, timeout) as conn:
        return conn.call(method, params, rid)
