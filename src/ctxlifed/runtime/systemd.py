"""systemd socket activation and sd_notify without libsystemd (sd_listen_fds(3), sd_notify(3)).

Rules:
- Use inherited fds only when ``LISTEN_PID`` equals our pid; unset the variables afterwards so
  children never inherit them; mark the fds close-on-exec; check each is a listening AF_UNIX stream.
- ``notify`` is one datagram to ``$NOTIFY_SOCKET`` (``@`` = abstract namespace); it never raises.
"""

from __future__ import annotations

import os
import socket

SD_LISTEN_FDS_START = 3


def inherited_listeners() -> list[socket.socket]:
    if os.environ.get("LISTEN_PID") != str(os.getpid()):
        return []
    try:
        n = int(os.environ.get("LISTEN_FDS", "0"))
    except ValueError:
        n = 0
    for k in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
        os.environ.pop(k, None)
    socks = []
    for fd in range(SD_LISTEN_FDS_START, SD_LISTEN_FDS_START + n):
        s = socket.socket(fileno=fd)
        os.set_inheritable(fd, False)
        if (
            s.family != socket.AF_UNIX
            or s.type != socket.SOCK_STREAM
            or not s.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
        ):
            raise RuntimeError(f"inherited fd {fd} is not a listening AF_UNIX stream socket")
        s.setblocking(False)
        socks.append(s)
    return socks


def notify(state: str) -> bool:
    addr = os.environ.get("NOTIFY_SOCKET")
    if not addr:
        return False
    if addr.startswith("@"):
        addr = "\0" + addr[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
            s.connect(addr)
            s.sendall(state.encode())
        return True
    except OSError:
        return False
