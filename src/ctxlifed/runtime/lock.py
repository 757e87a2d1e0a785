"""Single-instance locks and socket ownership (watchman, chg, gpg-agent).

Rules:
- Take an exclusive non-blocking ``flock`` on ``<data>/ctxlifed.lock`` first (one daemon per data
  folder, whatever socket it serves), then on ``ctxlifed.lock`` beside the socket BEFORE binding.
  Holding the latter proves no other live daemon owns the socket, so a leftover socket file is
  stale and may be unlinked. A refused lock names the holder's pid and socket.
- A held lock file holds exactly one JSON line ``{"pid": N, "socket": "/abs/path"}`` (0600). It is
  written in place and then cut to length, so a reader that takes the first line sees a whole line.
  The line outlives its daemon (kill -9): a reader trusts it only while the lock is held
  (``is_held``) or the socket answers.
- The kernel releases the flock when a process dies (even kill -9): stale locks need no cleanup.
  The flock is released before the process is reaped, so ``is_held`` turning false means the
  daemon is gone even while it is still a zombie (``kill -0`` says alive until its parent reaps it).
- A socket-activated daemon (systemd's, the user's chosen service) that finds the data dir held by a
  daemon started elsewhere (by a shim without ``XDG_RUNTIME_DIR``) asks that daemon to stop
  (``request_shutdown``) and takes the lock once it is released; every other second daemon refuses.
- Bind to a temporary name and ``rename`` into place, so clients never see a half-made socket
  (a direct bind when the temporary name would not fit ``sun_path``).
- The listen backlog is deep (1024, capped by the kernel's somaxconn): on AF_UNIX a full backlog
  fails ``connect`` at once with EAGAIN, so a burst of hooks (parallel tool calls) must fit in it.
- ``owns_socket`` compares the path's (dev, inode) with what we bound; the daemon exits by itself
  when its socket was removed or replaced.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shlex
import socket
import stat

from .bounded_read import Refused, read_bounded

MAX_OWNER_BYTES = 8192  # a lock file line: a pid and a socket path


class AlreadyRunning(Exception):
    def __init__(self, message: str, *, pid: int | None = None, socket: str | None = None) -> None:
        super().__init__(message)
        self.pid = pid
        self.socket = socket


def read_owner(path: str) -> dict[str, object] | None:
    """The ``{"pid", "socket"}`` line of a lock file, or None (absent, empty, unreadable, old format,
    or not a regular file of ours that only we can write: a lock file someone else could have
    written names no daemon of ours). Bounded read; a symlink is not followed."""
    try:
        data, _st = read_bounded(path, MAX_OWNER_BYTES, ours=True, private=True, cut=True)
        owner = json.loads(data.split(b"\n", 1)[0])
    except (Refused, ValueError):
        return None
    if not isinstance(owner, dict) or not isinstance(owner.get("pid"), int):
        return None
    return owner


def is_held(path: str) -> bool:
    """Whether some process holds the flock on ``path`` (False if the file is absent)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # releases the shared lock taken for the test, if any
    return False


def holder(path: str) -> tuple[int, str] | None:
    """(pid, socket) of the live daemon holding the lock ``path``, or None (free, absent, unreadable)."""
    owner = read_owner(path)
    if owner is None or not isinstance(owner.get("socket"), str) or not is_held(path):
        return None
    return int(owner["pid"]), str(owner["socket"])  # type: ignore[call-overload]


def _refusal(path: str, what: str) -> AlreadyRunning:
    owner = read_owner(path) or {}
    pid = owner.get("pid") if isinstance(owner.get("pid"), int) else None
    sock = owner.get("socket") if isinstance(owner.get("socket"), str) else None
    who = f" (pid {pid}" + (f", socket {sock})" if sock else ")") if pid is not None else ""
    stop = f"ctxlifectl --socket {shlex.quote(sock)} daemon stop" if sock else "ctxlifectl daemon stop"
    return AlreadyRunning(
        f"another ctxlifed is already running{who} and holds {path} ({what}); "
        f"use that daemon, or stop it with `{stop}`",
        pid=pid, socket=sock)  # type: ignore[arg-type]


def acquire_lock(path: str, socket_path: str, *, what: str = "the socket") -> int:
    """Lock ``path`` for this process and write its owner line; raise :class:`AlreadyRunning` naming
    the holder when another process holds it. ``what`` says what the lock guards, for that message."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise _refusal(path, what) from None
        raise
    try:
        os.fchmod(fd, 0o600)
        line = json.dumps({"pid": os.getpid(), "socket": socket_path}).encode() + b"\n"
        os.pwrite(fd, line, 0)  # then cut: a concurrent reader's first line is whole, old or new
        os.ftruncate(fd, len(line))
    except BaseException:
        os.close(fd)
        raise
    return fd


def request_shutdown(path: str, timeout: float = 2.0) -> bool:
    """Ask the daemon at ``path`` to stop (the ``shutdown`` method); True once it acknowledged.
    The socket is trusted only when it and the process serving it are ours."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.geteuid():
        return False
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        s.connect(path)
        if peer_uid(s) != os.geteuid():
            return False
        s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"shutdown","params":{}}\n')
        reply = b""
        while not reply.endswith(b"\n") and len(reply) < 65536:
            chunk = s.recv(4096)
            if not chunk:
                break
            reply += chunk
        return b'"result"' in reply
    except OSError:
        return False
    finally:
        s.close()


def bind_unix(path: str, backlog: int = 1024) -> tuple[socket.socket, tuple[int, int]]:
    """Bind a 0600 listening socket at ``path`` atomically; returns it and its (dev, ino)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    if len(os.fsencode(path)) > 103:
        raise OSError(errno.ENAMETOOLONG, f"socket path too long for AF_UNIX: {path}")
    if len(os.fsencode(tmp)) > 103:  # no room for the temporary name: bind in place (we hold the lock)
        tmp = path
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        old = os.umask(0o177)
        try:
            sock.bind(tmp)
        finally:
            os.umask(old)
        os.chmod(tmp, 0o600)
        sock.listen(backlog)
        if tmp != path:
            os.rename(tmp, path)  # replaces a stale socket left by a crash: we hold the lock
        st = os.stat(path)
        sock.setblocking(False)
        return sock, (st.st_dev, st.st_ino)
    except BaseException:
        sock.close()
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def owns_socket(path: str, ident: tuple[int, int]) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == ident


def unlink_if_owned(path: str, ident: tuple[int, int] | None) -> None:
    if ident is not None and owns_socket(path, ident):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def peer_uid(sock: socket.socket) -> int | None:
    """The connecting process's uid (SO_PEERCRED on Linux, getpeereid-style LOCAL_PEERCRED on macOS)."""
    import struct

    try:
        if hasattr(socket, "SO_PEERCRED"):
            raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            _pid, uid, _gid = struct.unpack("3i", raw)
            return uid
        # macOS: LOCAL_PEERCRED (0x001) at level SOL_LOCAL (0) returns struct xucred.
        raw = sock.getsockopt(0, 0x001, struct.calcsize("Ii16I"))
        _ver, uid = struct.unpack("Ii", raw[:8])
        return uid
    except OSError:
        return None
