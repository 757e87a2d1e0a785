"""Linux inotify through libc (ctypes): the watch of Claude Code's persisted outputs (``watch.py``).

Why not watchfiles here: watchfiles hands changes over only after a polling step in which none came
(``step``), and wakes every step while it waits. The read-ahead must see a file within a few ms of its
close, and may wait for hours between files; inotify's descriptor does both (readable at once, no
wake-ups while idle). watchfiles stays the watch of everything else.

Rules:
- :func:`open_inotify` returns None where inotify is not there (not Linux, no libc symbol, the per-user
  instance limit reached): the caller then does without (the hook path reads the file itself).
- The descriptor is non-blocking and close-on-exec; :meth:`Inotify.read` returns what is queued now
  (complete events only, at most :data:`READ_BYTES` per call) and never blocks; wait for it with
  ``anyio.wait_readable(ino.fileno())``.
- Names are decoded with ``os.fsdecode`` (surrogateescape), as ``os.listdir`` does.
- Stdlib only.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import sys

__all__ = ["IN_CLOSE_WRITE", "IN_MOVED_TO", "IN_Q_OVERFLOW", "Inotify", "open_inotify"]

IN_CLOSE_WRITE = 0x00000008
IN_MOVED_TO = 0x00000080
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC
READ_BYTES = 64 * 1024
_HEAD = struct.Struct("iIII")  # wd, mask, cookie, len (struct inotify_event)


class Inotify:
    """One inotify instance: folders added and removed by path, events read as ``(folder, mask, name)``."""

    def __init__(self, libc: ctypes.CDLL, fd: int) -> None:
        self._libc = libc
        self._fd = fd
        self._by_wd: dict[int, str] = {}
        self._by_path: dict[str, int] = {}

    def fileno(self) -> int:
        return self._fd

    def watched(self) -> set[str]:
        return set(self._by_path)

    def add(self, folder: str, mask: int) -> None:
        """Watch ``folder`` (a directory; a symlink is not followed) for ``mask``. Raises OSError."""
        wd = self._libc.inotify_add_watch(self._fd, os.fsencode(folder), mask | IN_ONLYDIR | IN_DONT_FOLLOW)
        if wd < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), folder)
        self._by_wd[wd] = folder
        self._by_path[folder] = wd

    def remove(self, folder: str) -> None:
        wd = self._by_path.pop(folder, None)
        if wd is not None:
            self._by_wd.pop(wd, None)
            self._libc.inotify_rm_watch(self._fd, wd)  # fails harmlessly when the folder is gone

    def read(self) -> list[tuple[str, int, str]]:
        """The events queued now: ``(folder, mask, name)``; an overflow is ``("", IN_Q_OVERFLOW, "")``."""
        try:
            data = os.read(self._fd, READ_BYTES)
        except BlockingIOError:
            return []
        except OSError as exc:
            if exc.errno == errno.EINTR:
                return []
            raise
        out: list[tuple[str, int, str]] = []
        i = 0
        while i + _HEAD.size <= len(data):
            wd, mask, _cookie, n = _HEAD.unpack_from(data, i)
            raw = data[i + _HEAD.size: i + _HEAD.size + n]
            i += _HEAD.size + n
            if mask & IN_Q_OVERFLOW:
                out.append(("", IN_Q_OVERFLOW, ""))
                continue
            if mask & IN_IGNORED:  # the folder was removed (or unwatched): forget its descriptor
                folder = self._by_wd.pop(wd, None)
                if folder is not None and self._by_path.get(folder) == wd:
                    del self._by_path[folder]
                continue
            folder = self._by_wd.get(wd)
            if folder is not None:
                out.append((folder, mask, os.fsdecode(raw.split(b"\0", 1)[0])))
        return out

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._by_wd.clear()
        self._by_path.clear()


def open_inotify() -> Inotify | None:
    """A new inotify instance, or None where there is none (see the rules)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)  # this process's own symbols: libc is loaded already
        init = libc.inotify_init1
    except (OSError, AttributeError):
        return None
    init.argtypes = [ctypes.c_int]
    libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
    fd = init(IN_NONBLOCK | IN_CLOEXEC)
    if fd < 0:
        return None
    return Inotify(libc, fd)
