"""Bounded reads of small files that someone else may have put there (settings, lock files, counters,
Claude Code's persisted outputs).

Rules:
- Opened with ``O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC``: a symlink is refused, a FIFO does not block the
  reader, nothing leaks into a child process. Resolve a path with ``os.path.realpath`` first where a
  symlinked file is allowed.
- Checked on the open descriptor (``fstat``, no swap between the check and the read): a regular file;
  with ``ours``, owned by this user; with ``private``, not writable by group or others.
- Never more than ``max_bytes`` read into memory, in chunks: a larger file is refused (:class:`Refused`)
  or, with ``cut=True``, its first ``max_bytes`` are returned.
- Every failure is a :class:`Refused` with the reason in words; ``missing`` says the file (or a folder on
  its path) does not exist, which callers usually treat as "nothing there" rather than a problem.
- Stdlib only (the CLI imports this).
"""

from __future__ import annotations

import errno
import os
import stat

__all__ = ["Refused", "read_bounded"]

_CHUNK = 1 << 20


class Refused(Exception):
    """The file was not read: ``str(exc)`` says why; ``missing`` is True when it does not exist."""

    def __init__(self, reason: str, *, missing: bool = False) -> None:
        super().__init__(reason)
        self.missing = missing


def read_bounded(path: str, max_bytes: int, *, ours: bool = False, private: bool = False,
                 cut: bool = False) -> tuple[bytes, os.stat_result]:
    """The bytes of the regular file ``path`` (at most ``max_bytes``) and its ``fstat`` (see the rules)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise Refused(exc.strerror or "not found", missing=True) from None
    except OSError as exc:
        reason = "a symlink" if exc.errno == errno.ELOOP else (exc.strerror or str(exc))
        raise Refused(reason) from None
    except ValueError:  # a NUL in the path
        raise Refused("not a valid path", missing=True) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Refused("not a regular file")
        if ours and st.st_uid != os.geteuid():
            raise Refused("owned by another user")
        if private and st.st_mode & 0o022:
            raise Refused("writable by others")
        if st.st_size > max_bytes and not cut:
            raise Refused(f"larger than {max_bytes} bytes")
        chunks: list[bytes] = []
        left = max_bytes if cut else max_bytes + 1  # one byte more tells a file that grew past the bound
        while left > 0:
            chunk = os.read(fd, min(left, _CHUNK))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise Refused(exc.strerror or str(exc)) from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise Refused(f"larger than {max_bytes} bytes")
    return data, st
