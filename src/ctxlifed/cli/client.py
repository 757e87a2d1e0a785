"""A small blocking JSON-RPC client over the Unix socket (stdlib only, like dmypy's client).

Rules:
- Never imports the server side; fast to import (socket + json).
- Every call has a deadline; transport faults raise :class:`DaemonUnavailable` with a message that
  says how to start the daemon. JSON-RPC errors raise :class:`RemoteError` with code and name.
- Trust before the first byte, as the hook shim: the socket's folder ours and writable by nobody
  else, the socket ours, the peer's uid ours (``SO_PEERCRED`` / ``LOCAL_PEERCRED``); otherwise
  :class:`UntrustedSocket` (a ``DaemonUnavailable``) says why and nothing is sent.
- No daemon at the socket (ENOENT / ECONNREFUSED): the running daemon's lock file
  (``<data dir>/ctxlifed.lock``, ours and not writable by others) may name the socket it listens on;
  that one is tried, with the same checks.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import stat
import struct
import sys
import time
from typing import Any

MAX_REPLY = 16 << 20
MAX_LOCK_READ = 4096
LOCK_NAME = "ctxlifed.lock"


class DaemonUnavailable(Exception):
    pass


class UntrustedSocket(DaemonUnavailable):
    """The socket, its folder or the process listening on it is not ours: nothing was sent."""


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


def untrusted_fix(sock_path: str) -> str:
    return (f"remove {os.path.dirname(sock_path)} (as its owner, or root) if you did not create it, or set XDG_RUNTIME_DIR"
            " or CTXLIFED_SOCKET to a folder only you can write")


def locked_socket(sock_path: str, data_dir: str | None = None) -> str | None:
    """The socket named in the running daemon's lock file, when it is not ``sock_path``; else None."""
    from ..runtime import paths as P

    path = os.path.join(data_dir or P.data_dir(), LOCK_NAME)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid() or st.st_mode & 0o022 or not stat.S_ISREG(st.st_mode):
            return None
        raw = os.read(fd, MAX_LOCK_READ)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        obj = json.loads(raw.split(b"\n", 1)[0])
    except ValueError:
        return None
    sock = obj.get("socket") if isinstance(obj, dict) else None
    if not isinstance(sock, str) or not os.path.isabs(sock) or os.path.normpath(sock) == os.path.normpath(sock_path):
        return None
    return sock


class RemoteError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data if isinstance(data, dict) else {}

    @property
    def name(self) -> str:
        return str(self.data.get("name", self.code))


_ids = itertools.count(1)


def call(sock_path: str, method: str, params: dict[str, Any] | None = None, *, timeout: float = 10.0,
         discover: bool = True) -> Any:
    """One request; with ``discover``, a daemon listening elsewhere (its lock file says where) is
    used when none is at ``sock_path``."""
    try:
        return _call(sock_path, method, params, timeout)
    except DaemonUnavailable as exc:
        if not discover or not isinstance(exc.__cause__, (FileNotFoundError, ConnectionRefusedError)):
            raise
        other = locked_socket(sock_path)
        if other is None:
            raise
        try:
            return _call(other, method, params, timeout)
        except DaemonUnavailable as again:
            if isinstance(again.__cause__, (FileNotFoundError, ConnectionRefusedError)):
                raise exc from exc.__cause__
            raise


def _call(sock_path: str, method: str, params: dict[str, Any] | None, timeout: float) -> Any:
    rid = next(_ids)
    frame = json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}},
                       separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
    deadline = time.monotonic() + timeout
    why = socket_problem(sock_path)
    if why:
        raise UntrustedSocket(f"refusing to talk to {sock_path}: {why}")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        try:
            s.connect(sock_path)
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise DaemonUnavailable(
                f"ctxlifed is not running (no daemon at {sock_path}): start it with `ctxlifectl daemon start`"
                " (or `make run` in a checkout, or `systemctl --user start ctxlifed.socket`)"
            ) from exc
        except OSError as exc:
            raise DaemonUnavailable(f"cannot connect to {sock_path}: {exc}") from exc
        try:
            peer = peer_uid(s)
        except OSError as exc:
            raise UntrustedSocket(f"refusing to talk to {sock_path}: cannot tell who listens on it ({exc})") from exc
        if peer is not None and peer != os.geteuid():
            raise UntrustedSocket(f"refusing to talk to {sock_path}: the process listening on it runs as uid {peer},"
                                  f" not as you (uid {os.geteuid()})")
        s.sendall(frame)
        buf = b""
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DaemonUnavailable(f"ctxlifed at {sock_path} did not answer within {timeout:.1f}s")
            s.settimeout(left)
            try:
                chunk = s.recv(1 << 16)
            except (TimeoutError, socket.timeout):
                raise DaemonUnavailable(f"ctxlifed at {sock_path} did not answer within {timeout:.1f}s") from None
            except OSError as exc:
                raise DaemonUnavailable(f"connection to {sock_path} failed: {exc}") from exc
            if not chunk:
                raise DaemonUnavailable(f"ctxlifed at {sock_path} closed the connection without an answer")
            buf += chunk
            if len(buf) > MAX_REPLY:
                raise DaemonUnavailable("reply too large")
    finally:
        s.close()
    try:
        msg = json.loads(buf.split(b"\n", 1)[0])
    except ValueError as exc:
        raise DaemonUnavailable(f"ctxlifed at {sock_path} answered with something that is not JSON") from exc
    if not isinstance(msg, dict) or msg.get("id") != rid:
        raise DaemonUnavailable("unexpected reply from the daemon")
    if "error" in msg:
        e = msg["error"] if isinstance(msg["error"], dict) else {}
        raise RemoteError(int(e.get("code", -32603)), str(e.get("message", "error")), e.get("data"))
    return msg.get("result")


def wait_ready(sock_path: str, timeout: float = 10.0) -> bool:
    """Poll ``ping`` until the daemon answers or the timeout passes (used by ``daemon start``)."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while time.monotonic() < deadline:
        try:
            call(sock_path, "ping", timeout=1.0)
            return True
        except (DaemonUnavailable, RemoteError):
            time.sleep(delay)
            delay = min(delay * 2, 0.2)
    return False


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
