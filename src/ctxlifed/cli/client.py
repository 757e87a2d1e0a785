"""A small blocking JSON-RPC client over the Unix socket (stdlib only, like dmypy's client).

Rules:
- Never imports the server side; fast to import (socket + json).
- Every call has a deadline; transport faults raise :class:`DaemonUnavailable` with a message that
  says how to start the daemon. JSON-RPC errors raise :class:`RemoteError` with code and name.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import time
from typing import Any

MAX_REPLY = 16 << 20


class DaemonUnavailable(Exception):
    pass


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


def call(sock_path: str, method: str, params: dict[str, Any] | None = None, *, timeout: float = 10.0) -> Any:
    rid = next(_ids)
    frame = json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}},
                       separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
    deadline = time.monotonic() + timeout
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
