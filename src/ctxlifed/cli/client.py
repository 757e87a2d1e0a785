"""The CLI's calls to the daemon: :mod:`ctxlifed.rpc_client` (the one JSON-RPC client, shared with
the bench) plus what only the CLI needs (the running daemon's socket from its lock file, readiness,
messages that say how to start the daemon).

Rules:
- Never imports the server side; fast to import (socket + json).
- Every call has a deadline; transport faults raise :class:`DaemonUnavailable` with a message that
  says how to start the daemon. JSON-RPC errors raise :class:`RemoteError` with code and name.
- Trust before the first byte (``rpc_client``): otherwise :class:`UntrustedSocket` says why and
  nothing is sent.
- No daemon at the socket (ENOENT / ECONNREFUSED): the running daemon's lock file
  (``<data dir>/ctxlifed.lock``, ours and not writable by others) may name the socket it listens on;
  that one is tried, with the same checks.
"""

from __future__ import annotations

import itertools
import os
import time
from typing import Any

from ..rpc_client import (  # noqa: F401 - re-exported: the CLI's commands and the tests import them from here
    Connection,
    DaemonUnavailable,
    RemoteError,
    UntrustedSocket,
    peer_uid,
    socket_problem,
)

LOCK_NAME = "ctxlifed.lock"


def untrusted_fix(sock_path: str) -> str:
    return (f"remove {os.path.dirname(sock_path)} (as its owner, or root) if you did not create it, or set XDG_RUNTIME_DIR"
            " or CTXLIFED_SOCKET to a folder only you can write")


def locked_socket(sock_path: str, data_dir: str | None = None) -> str | None:
    """The socket named in the running daemon's lock file (``runtime.lock.read_owner``: ours, writable
    by nobody else), when it is not ``sock_path``; else None."""
    from ..runtime import paths as P
    from ..runtime.lock import read_owner

    owner = read_owner(os.path.join(data_dir or P.data_dir(), LOCK_NAME)) or {}
    sock = owner.get("socket")
    if not isinstance(sock, str) or not os.path.isabs(sock) or os.path.normpath(sock) == os.path.normpath(sock_path):
        return None
    return sock


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
    try:
        conn = Connection(sock_path, timeout)
    except UntrustedSocket:
        raise
    except DaemonUnavailable as exc:
        if isinstance(exc.__cause__, (FileNotFoundError, ConnectionRefusedError)):
            raise DaemonUnavailable(
                f"ctxlifed is not running (no daemon at {sock_path}): start it with `ctxlifectl daemon start`"
                " (or `make run` in a checkout, or `systemctl --user start ctxlifed.socket`)"
            ) from exc.__cause__
        raise
    with conn:
        return conn.call(method, params or {}, next(_ids))


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
