"""Single-instance lock and socket ownership (watchman, chg, gpg-agent).

Rules:
- Take an exclusive non-blocking ``flock`` on ``ctxlifed.lock`` BEFORE binding. Holding it proves
  no other live daemon owns the socket, so a leftover socket file is stale and may be unlinked.
- The kernel releases the flock when a process dies (even kill -9): stale locks need no cleanup.
- Bind to a temporary name and ``rename`` into place, so clients never see a half-made socket.
- The listen backlog is deep (1024, capped by the kernel's somaxconn): on AF_UNIX a full backlog
  fails ``connect`` at once with EAGAIN, so a burst of hooks (parallel tool calls) must fit in it.
- ``owns_socket`` compares the path's (dev, inode) with what we bound; the daemon exits by itself
  when its socket was removed or replaced.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket


class AlreadyRunning(Exception):
    pass


def acquire_lock(path: str) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            holder = ""
            try:
                with open(path) as f:
                    holder = f.read().strip()
            except OSError:
                pass
            who = f" (pid {holder})" if holder else ""
            raise AlreadyRunning(
                f"another ctxlifed is already running{who} and holds {path}; "
                "stop it with `ctxlifectl daemon stop` or use another --socket"
            ) from None
        raise
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def bind_unix(path: str, backlog: int = 1024) -> tuple[socket.socket, tuple[int, int]]:
    """Bind a 0600 listening socket at ``path`` atomically; returns it and its (dev, ino)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    if len(os.fsencode(path)) > 103 or len(os.fsencode(tmp)) > 107:
        raise OSError(errno.ENAMETOOLONG, f"socket path too long for AF_UNIX: {path}")
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
