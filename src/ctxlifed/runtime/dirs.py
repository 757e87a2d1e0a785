"""Private directory discipline (watchman, ssh-agent).

Rules:
- The runtime dir is created 0700 and verified on every start: owned by our euid, no group/other
  write bit, a directory. A symlink is followed only if its target passes the same checks.
- The data dir holds the archive: created 0700, and when it already exists (pre-created 0755 by a
  packager, a dotfiles script or an older version) and is ours, tightened to 0700; one that is not
  ours is refused like the runtime dir.
- Failing a check raises :class:`UnsafeDir` whose message names the exact fix.
- Files we create are 0600 (umask 0o077 is set once at daemon start, before any thread).
"""

from __future__ import annotations

import os
import stat


class UnsafeDir(Exception):
    pass


def ensure_private_dir(path: str, *, create: bool = True) -> str:
    """Create (0700) or verify ``path``; return its real path."""
    if create and not os.path.lexists(path):
        parent = os.path.dirname(path)
        os.makedirs(parent, exist_ok=True)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except FileNotFoundError:
        raise UnsafeDir(f"{path} does not exist (its symlink points nowhere?): remove it: rm -f {path}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeDir(f"{path} is not a directory: move it away: mv {path} {path}.bak")
    if st.st_uid != os.geteuid():
        raise UnsafeDir(
            f"{path} is owned by uid {st.st_uid}, not by you (uid {os.geteuid()}): "
            f"use another location (CTXLIFED_SOCKET / --socket) or remove it as its owner"
        )
    if st.st_mode & 0o022:
        raise UnsafeDir(
            f"{path} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o}): fix with: chmod 700 {path}"
        )
    if os.path.islink(path):
        # A symlinked dir is accepted only when its target passes the checks above (done) and
        # the link itself is ours: someone else's link could be re-pointed under us.
        lst = os.lstat(path)
        if lst.st_uid != os.geteuid():
            raise UnsafeDir(f"{path} is a symlink owned by uid {lst.st_uid}: remove it: rm {path}")
    return real


def ensure_data_dir(path: str) -> str:
    """Create (0700) or tighten to 0700 the data dir; return its real path."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except FileNotFoundError:
        raise UnsafeDir(f"{path} does not exist (its symlink points nowhere?): remove it: rm -f {path}") from None
    if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(real, 0o700)
    return ensure_private_dir(path, create=False)
