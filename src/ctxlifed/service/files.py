"""File-system adapters for the service: project roots, transcript tails, atomic writes.

Rules:
- Transcripts are read only from the allowed roots (Claude Code's projects folders by default,
  configurable) after resolving symlinks; anything else is refused, never opened.
- A transcript is read from a remembered offset, at most ``max_bytes`` per call: the cost of an
  event is O(new bytes), never O(file size). A file that shrank (rotated/replaced) restarts at 0.
- L3 writes are atomic (tmp in the same dir, fsync, rename) and only land inside the project root
  after resolving symlinks; a path escaping it raises ``PathEscape``.
"""

from __future__ import annotations

import functools
import os
import stat

from ..runtime.atomic import write_atomic


class PathEscape(ValueError):
    pass


@functools.lru_cache(maxsize=1024)
def _project_root_cached(cwd: str) -> str:
    p = cwd
    for _ in range(64):
        if os.path.exists(os.path.join(p, ".git")):
            return p
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    return cwd


def project_root(cwd: str) -> str:
    """Git top level of ``cwd`` (a ``.git`` dir or file up the tree), else ``cwd`` itself."""
    if not cwd or not os.path.isabs(cwd) or "\0" in cwd:
        return cwd or "(unknown)"
    return _project_root_cached(os.path.normpath(cwd))


def transcript_allowed(path: str, roots: tuple[str, ...]) -> str | None:
    """The real path of ``path`` if it lies under one of ``roots``, else None."""
    if not path or not os.path.isabs(path) or "\0" in path or not path.endswith(".jsonl"):
        return None
    real = os.path.realpath(path)
    for r in roots:
        if real == r or real.startswith(r.rstrip("/") + "/"):
            return real
    return None


def read_from(path: str, offset: int, max_bytes: int) -> tuple[bytes, int, bool]:
    """Bytes from ``offset`` (at most max_bytes), the file size, and whether it restarted at 0.

    Only a regular file is read: a directory, FIFO or device named like a transcript gives
    ``(b"", -1, False)`` at once (opened non-blocking, so a FIFO cannot hang the session).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return b"", -1, False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return b"", -1, False
        size = st.st_size
        restarted = False
        if offset > size:
            offset, restarted = 0, True
        if offset == size:
            return b"", size, restarted
        return os.pread(fd, min(max_bytes, size - offset), offset), size, restarted
    except OSError:
        return b"", -1, False
    finally:
        os.close(fd)


def safe_target(root: str, rel: str) -> str:
    """Absolute path of ``rel`` under ``root``; refuses anything that would land outside it."""
    if os.path.isabs(rel) or "\0" in rel:
        raise PathEscape(f"refusing absolute or NUL path {rel!r}")
    root_real = os.path.realpath(root)
    target = os.path.normpath(os.path.join(root_real, rel))
    if not target.startswith(root_real.rstrip("/") + "/"):
        raise PathEscape(f"{rel!r} escapes {root}")
    # Resolve existing parents: a symlinked folder must not lead out of the project.
    parent = os.path.dirname(target)
    probe = parent
    while not os.path.exists(probe) and probe != root_real:
        probe = os.path.dirname(probe)
    real_probe = os.path.realpath(probe)
    if real_probe != root_real and not real_probe.startswith(root_real.rstrip("/") + "/"):
        raise PathEscape(f"{rel!r} leads out of {root} through a symlink")
    if os.path.islink(target):
        raise PathEscape(f"{target} is a symlink; refusing to write through it")
    return target


def _makedirs(d: str, mode: int) -> None:
    """Create missing folders with ``mode`` exactly (the daemon's umask is 077: repo folders are 0755)."""
    missing = []
    while d and not os.path.isdir(d):
        missing.append(d)
        d = os.path.dirname(d)
    for m in reversed(missing):
        try:
            os.mkdir(m)
        except FileExistsError:
            continue
        os.chmod(m, mode)


def atomic_write(path: str, text: str, mode: int = 0o644, dir_mode: int = 0o755) -> None:
    _makedirs(os.path.dirname(path), dir_mode)
    write_atomic(path, text, mode)


def append_text(path: str, text: str, header: str = "") -> None:
    """Append atomically: rewrite the whole (small) file via atomic_write."""
    try:
        with open(path, encoding="utf-8") as f:
            old = f.read()
    except FileNotFoundError:
        old = header
    if old and not old.endswith("\n"):
        old += "\n"
    atomic_write(path, old + text)
