"""What the hook shim leaves on disk for the user to see: read client-side by ``status`` and ``doctor``.

The shim (``_shim/ctxlifed_hook.py``) writes, without the daemon:
- ``dropped``: events it could keep nowhere (no daemon, and no spool could be written: disk full,
  read-only, I/O error, spool at its bound), a decimal count, in the data dir or else the runtime dir.
- ``spool.jsonl`` in the runtime dir (the socket's folder): its fallback spool when the data dir's
  could not be written.
- ``stalled`` in the runtime dir: the daemon missed a hook's deadline; hooks only probe it briefly
  and spool until it answers in time again.
- ``pycache`` in the data dir: the shim's bytecode, which the hook script uses only while that
  folder is a real folder, ours, and open to nobody else; otherwise every hook compiles the shim.

Rules:
- Read only, bounded reads, stdlib only; a file that is missing, unreadable or not ours counts as
  nothing (never an exception).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from ..runtime.bounded_read import Refused, read_bounded

DROPPED_NAME = "dropped"
STALLED_NAME = "stalled"
SPOOL_NAME = "spool.jsonl"
CACHE_NAME = "pycache"  # as _shim/ctxlifed_hook.py
MAX_COUNT_READ = 32


@dataclass(frozen=True)
class ShimState:
    dropped: int  # events kept nowhere, both counters together
    dropped_at: float | None  # when the last one was counted (the counter's mtime)
    runtime_spool: str  # path of the runtime-dir spool
    runtime_spool_bytes: int
    stalled_since: float | None  # the stalled mark's mtime
    cache: str = ""  # path of the shim's bytecode cache
    cache_problem: str = ""  # why the hook script does not use it ("": absent or private)


def _ours(st: os.stat_result) -> bool:
    return st.st_uid == os.geteuid() and stat.S_ISREG(st.st_mode)


def _count(path: str) -> tuple[int, float | None]:
    try:
        data, st = read_bounded(path, MAX_COUNT_READ, ours=True, cut=True)
    except Refused:
        return 0, None
    raw = data.strip()
    return (int(raw), st.st_mtime) if raw.isdigit() else (0, None)


def _stat(path: str) -> os.stat_result | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st if _ours(st) else None


def cache_problem(path: str) -> str:
    """Why the hook script would not use the bytecode folder ``path`` ("" when it is absent or private)."""
    try:
        st = os.lstat(path)
    except OSError:
        return ""
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a folder"
    if st.st_uid != os.geteuid():
        return f"belongs to uid {st.st_uid}"
    if st.st_mode & 0o077:
        return f"is open to others (mode {st.st_mode & 0o777:o})"
    return ""


def read(data_dir: str, runtime_dir: str) -> ShimState:
    total, last = 0, None
    seen: set[str] = set()
    for d in (data_dir, runtime_dir):
        real = os.path.realpath(d)
        if real in seen:
            continue
        seen.add(real)
        n, at = _count(os.path.join(d, DROPPED_NAME))
        total += n
        if at is not None and (last is None or at > last):
            last = at
    spool = os.path.join(runtime_dir, SPOOL_NAME)
    same = os.path.realpath(runtime_dir) == os.path.realpath(data_dir)
    sp = None if same else _stat(spool)
    mark = _stat(os.path.join(runtime_dir, STALLED_NAME))
    cache = os.path.join(data_dir, CACHE_NAME)
    return ShimState(dropped=total, dropped_at=last, runtime_spool=spool,
                     runtime_spool_bytes=sp.st_size if sp else 0, stalled_since=mark.st_mtime if mark else None,
                     cache=cache, cache_problem=cache_problem(cache))
