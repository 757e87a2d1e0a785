"""File-system adapters for the service: project roots, transcript tails, atomic writes.

Rules:
- Transcripts are read only from the allowed roots (Claude Code's projects folders by default,
  configurable) after resolving symlinks; anything else is refused, never opened.
- A transcript is read from a remembered offset, at most ``max_bytes`` per call: the cost of an
  event is O(new bytes), never O(file size). A file that shrank (rotated/replaced) restarts at 0.
- L3 writes are atomic (tmp in the same dir, fsync, rename) and only land inside the project root
  after resolving symlinks; a path escaping it raises ``PathEscape``.
- L3 is the user's own: a project root is a folder with ``.git`` where both are owned by the user
  and not writable by others (``core.paths.untrusted_reason``). :func:`project_root` stops at the
  first ``.git`` up the tree and, when that one is someone else's (another user's repository in a
  shared parent), the project is the cwd itself, which has no ``.git``: nothing is written there
  and nothing is read from there. Every existing folder from the root down to an L3 file, and the
  file itself, must pass the same check before it is written (:func:`l3_target`) or read
  (:func:`l3_readable`); ``Untrusted`` (a ``PathEscape``) says which path failed and why.
- What ctxlifed creates there is never readable by more than can enter the project root and never
  writable by others (``core.paths.l3_modes``: 0644/0755 in a 0755 repo, 0600/0700 in a 0700 one).
- An L3 file is read back only through :func:`read_memory_text`: no symlink, nothing but a regular
  file (a FIFO put there cannot block the daemon), at most ``MEMORY_FILE_MAX`` bytes (a larger one
  is refused, so a rewrite never drops what it could not read).
"""

from __future__ import annotations

import codecs
import functools
import os
import stat

from ..core.paths import l3_modes, untrusted_reason
from ..runtime.atomic import write_atomic
from ..runtime.bounded_read import Refused, read_bounded

MEMORY_FILE_MAX = 16 << 20  # bytes of one memory file (decisions.md, history.md, a page) read back


class PathEscape(ValueError):
    pass


class Untrusted(PathEscape):
    """An L3 path that is not the user's own (owner, mode or symlink): never read or written."""


def why_untrusted(path: str, *, want_dir: bool = True, follow: bool = False) -> str | None:
    """Why ``path`` is not the user's own (``core.paths.untrusted_reason``), None when it is."""
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except OSError as exc:
        return f"cannot be checked ({exc.strerror})"
    return untrusted_reason(st.st_uid, st.st_gid, st.st_mode, uid=os.geteuid(), gid=os.getegid(),
                            want_dir=want_dir)


def root_untrusted(root: str) -> str | None:
    """Why ``root`` is not a project root of the user's own (``<root>/.git`` must exist), else None."""
    if not root or not os.path.isabs(root) or "\0" in root:
        return f"{root!r} is not an absolute path"
    real = os.path.realpath(root)
    if not os.path.lexists(os.path.join(real, ".git")):
        return f"{real} has no .git"
    why = why_untrusted(real)
    if why is not None:
        return f"{real} {why}"
    why = why_untrusted(os.path.join(real, ".git"), want_dir=False, follow=True)
    return f"{real}/.git {why}" if why is not None else None


@functools.lru_cache(maxsize=1024)
def _project_root_cached(cwd: str) -> str:
    p = cwd
    for _ in range(64):
        if os.path.lexists(os.path.join(p, ".git")):
            return p if root_untrusted(p) is None else cwd  # someone else's repository is not ours
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    return cwd


def project_root(cwd: str) -> str:
    """Git top level of ``cwd`` (the first ``.git`` up the tree) when it is the user's own, else
    ``cwd`` itself (module rules)."""
    if not cwd or not os.path.isabs(cwd) or "\0" in cwd:
        return cwd or "(unknown)"
    return _project_root_cached(os.path.normpath(cwd))


def transcript_allowed(path: str, roots: tuple[str, ...]) -> str | None:
    """The real path of ``path`` if it is a ``.jsonl`` file under one of ``roots``, else None."""
    return under_roots(path, roots) if path.endswith(".jsonl") else None


def under_roots(path: str, roots: tuple[str, ...]) -> str | None:
    """The real path of the absolute ``path`` (links resolved) if it lies under one of ``roots``, else None."""
    if not path or not os.path.isabs(path) or "\0" in path:
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


def persisted_text(real: str, max_bytes: int) -> tuple[str, os.stat_result] | None:
    """The text of a file Claude Code saved a tool's output to (UTF-8, bad bytes replaced) and the ``fstat``
    it was read under; None when it is not a regular file, is larger than ``max_bytes`` or cannot be read.
    The hook path and the read-ahead both read such a file through this, so both get the same text."""
    try:
        data, st = read_bounded(real, max_bytes)
    except Refused:
        return None
    return data.decode("utf-8", "replace"), st


def read_tail(path: str, max_bytes: int) -> tuple[bytes, bool]:
    """The last ``max_bytes`` of the regular file ``path`` and whether they start inside it (``(b"", False)``
    for anything else; opened non-blocking, like :func:`read_from`)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return b"", False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return b"", False
        start = max(0, st.st_size - max_bytes)
        return os.pread(fd, max_bytes, start), start > 0
    except OSError:
        return b"", False
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


def _check_below(root_real: str, path: str) -> None:
    """Every existing folder from ``root_real`` down to ``path``'s folder, and ``path`` itself when it
    exists, is the user's own; raises ``Untrusted`` naming the first that is not."""
    rel = os.path.relpath(path, root_real)
    parts = rel.split(os.sep)
    cur = root_real
    for i, part in enumerate(parts):
        cur = os.path.join(cur, part)
        last = i == len(parts) - 1
        if not os.path.lexists(cur):
            return
        why = why_untrusted(cur, want_dir=not last)
        if why is None and last and not stat.S_ISREG(os.lstat(cur).st_mode):
            why = "is not a regular file"
        if why is not None:
            raise Untrusted(f"refusing L3 path {cur}: it {why}")


def l3_target(root: str, rel: str) -> tuple[str, int, int]:
    """``(path, file mode, folder mode)`` for writing ``rel`` under the project ``root``: the path is
    ``safe_target``'s, and the root, every existing folder down to it and the file if it exists are
    the user's own (else ``Untrusted``). The modes follow the root's (``core.paths.l3_modes``)."""
    why = root_untrusted(root)
    if why is not None:
        raise Untrusted(f"refusing to write L3 memory: {why}")
    target = safe_target(root, rel)
    root_real = os.path.realpath(root)
    _check_below(root_real, target)
    fmode, dmode = l3_modes(os.stat(root_real).st_mode)
    return target, fmode, dmode


def l3_readable(root: str, path: str) -> bool:
    """Whether the L3 file ``path`` (a real path) under ``root`` may be read as the user's memory."""
    if root_untrusted(root) is not None:
        return False
    root_real = os.path.realpath(root)
    if not path.startswith(root_real.rstrip("/") + "/") or not os.path.lexists(path):
        return False
    try:
        _check_below(root_real, path)
    except Untrusted:
        return False
    return True


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


def read_memory_text(path: str, max_bytes: int = MEMORY_FILE_MAX, *, cut: bool = False,
                     errors: str = "strict") -> str:
    """The text of the L3 file ``path`` (see the module rules; ``cut``: its first ``max_bytes``
    instead of a refusal). FileNotFoundError when it does not exist, OSError naming why it was not
    read otherwise; bytes that are not UTF-8 raise UnicodeDecodeError (``errors="replace"``: read as
    U+FFFD, for a text that is only indexed, never written back)."""
    try:
        data, _st = read_bounded(path, max_bytes, cut=cut)
    except Refused as exc:
        if exc.missing:
            raise FileNotFoundError(f"{path}: {exc}") from None
        raise OSError(f"{path} not read: {exc}") from None
    if cut:  # a cut may end inside a character: the incremental decoder leaves that piece out
        return codecs.getincrementaldecoder("utf-8")(errors).decode(data)
    return data.decode("utf-8", errors)


def append_text(path: str, text: str, header: str = "", mode: int = 0o644, dir_mode: int = 0o755) -> None:
    """Append atomically: rewrite the whole (small) file via atomic_write."""
    try:
        old = read_memory_text(path)
    except FileNotFoundError:
        old = header
    if old and not old.endswith("\n"):
        old += "\n"
    atomic_write(path, old + text, mode, dir_mode)
