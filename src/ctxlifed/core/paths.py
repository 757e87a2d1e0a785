"""Pure path rules checked before ctxlifed writes anything under a project (L3) or reads Claude Code's files.

Rules:
- Pure string math: no filesystem access, no ``os`` calls; ``posixpath`` is used only for
  ``normpath``. Symlinks are the caller's job (resolve, then check again with :func:`is_within`).
- A session id is 1-128 characters from ``[A-Za-z0-9_-]`` (UUIDs pass). Anything else — ``/``,
  ``..``, ``.``, NUL, whitespace, non-ASCII, empty, too long, not a string — raises ValueError
  with a message that says what is allowed. Session ids are used as directory names, so this is
  what keeps ``sessions/<sid>/`` inside the memory directory.
- L3 ledger pages live at ``sessions/<sid>/phase-<N>-<name>.md`` (relative to ``docs/memory/``);
  N is an int >= 1 and name one of PHASES.
- ``is_within(root, candidate)``: both must be absolute POSIX paths without NUL; after normpath
  (and collapsing a leading ``//``) the candidate must equal root or lie below it. A relative path
  is never "within" (join it to the root first).
- ``encode_project_dir(cwd)``: Claude Code's folder name under ``~/.claude/projects/``: every
  character that is not an ASCII letter or digit becomes ``-`` — per UTF-16 code unit, as the
  JavaScript ``replace(/[^a-zA-Z0-9]/g, "-")`` does, so a character outside the BMP (emoji) gives
  ``--``. Claude Code cuts names longer than ``ENCODED_MAX`` (200) and appends a hash of its own
  runtime that cannot be recomputed here: :func:`project_dir_matches` compares by the 200-character
  prefix then. Prefer the ``transcript_path`` a hook payload carries.
- ``untrusted_reason(...)``: whether a project root, ``.git`` or memory folder (given its stat
  fields) is the user's own: owned by ``uid``, a real directory or file (never a symlink), not
  writable by others, and writable by its group only when that group is the user's own ``gid``
  (a user-private group). Returns why not, or None. Only such paths are read or written as L3.
- ``l3_modes(root_mode)``: the modes of the L3 files and folders ctxlifed creates in a project:
  never readable by more than can enter the project root (``0o600 | root & 0o044`` for files,
  ``0o700 | root & 0o055`` for folders: 0644/0755 in a 0755 repo, 0600/0700 in a 0700 one),
  never writable by anyone but the user.
"""

from __future__ import annotations

import posixpath
import re

from ctxlifed.core.model import PHASES

__all__ = [
    "validate_session_id",
    "ledger_relpath",
    "is_within",
    "encode_project_dir",
    "project_dir_matches",
    "ENCODED_MAX",
    "untrusted_reason",
    "l3_modes",
]

ENCODED_MAX = 200
_S_IFMT, _S_IFDIR, _S_IFLNK = 0o170000, 0o040000, 0o120000  # the POSIX file type bits of st_mode
_SID = re.compile(r"[A-Za-z0-9_-]{1,128}\Z")


def _show(value: object) -> str:
    r = repr(value)
    return r if len(r) <= 60 else r[:57] + "..."


def validate_session_id(s: str) -> str:
    """Return ``s`` when it is a safe session id ([A-Za-z0-9_-]{1,128}); raise ValueError otherwise."""
    if not isinstance(s, str):
        raise ValueError(f"invalid session id {_show(s)}: must be a string of 1-128 characters [A-Za-z0-9_-]")
    if not _SID.match(s):
        if not s:
            why = "empty"
        elif len(s) > 128:
            why = "longer than 128 characters"
        else:
            why = "has a character outside [A-Za-z0-9_-]"
        raise ValueError(f"invalid session id {_show(s)}: {why}; allowed are 1-128 characters [A-Za-z0-9_-]")
    return s


def ledger_relpath(session_id: str, n: int, phase: str) -> str:
    """``sessions/<sid>/phase-<N>-<name>.md`` after validating all three parts."""
    sid = validate_session_id(session_id)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"invalid phase number {_show(n)}: must be an int >= 1")
    if phase not in PHASES:
        raise ValueError(f"invalid phase {_show(phase)}: must be one of {', '.join(PHASES)}")
    return f"sessions/{sid}/phase-{n}-{phase}.md"


def _norm_abs(p: object) -> str | None:
    if not isinstance(p, str) or not p.startswith("/") or "\x00" in p:
        return None
    n = posixpath.normpath(p)
    if n.startswith("//"):  # POSIX keeps exactly two leading slashes; they mean the same root here
        n = "/" + n.lstrip("/")
    return n


def is_within(root: str, candidate: str) -> bool:
    """True iff the absolute ``candidate`` is ``root`` or lies below it (pure normpath logic)."""
    r = _norm_abs(root)
    c = _norm_abs(candidate)
    if r is None or c is None:
        return False
    if c == r:
        return True
    return c.startswith(r if r.endswith("/") else r + "/")


def encode_project_dir(cwd: str) -> str:
    """Claude Code's transcript folder name for ``cwd`` (not cut at 200; see the module rules)."""
    out = []
    for ch in cwd:
        if ch.isascii() and ch.isalnum():
            out.append(ch)
        else:
            out.append("--" if ord(ch) > 0xFFFF else "-")
    return "".join(out)


def project_dir_matches(name: str, cwd: str) -> bool:
    """True when ``name`` (a folder under ~/.claude/projects) is Claude Code's folder for ``cwd``:
    equal to the encoding, or, for encodings longer than 200 characters, the 200-character prefix
    followed by ``-`` and a hash."""
    enc = encode_project_dir(cwd)
    if len(enc) <= ENCODED_MAX:
        return name == enc
    prefix = enc[:ENCODED_MAX] + "-"
    return name.startswith(prefix) and len(name) > len(prefix) and name[len(prefix) :].isalnum()


def untrusted_reason(st_uid: int, st_gid: int, st_mode: int, *, uid: int, gid: int,
                     want_dir: bool = True) -> str | None:
    """Why a path with these ``lstat`` fields is not the user's own (module rules); None when it is."""
    kind = st_mode & _S_IFMT
    if kind == _S_IFLNK:
        return "is a symlink"
    if want_dir and kind != _S_IFDIR:
        return "is not a directory"
    if st_uid != uid:
        return f"is owned by uid {st_uid}, not by uid {uid}"
    if st_mode & 0o002:
        return "is writable by other users"
    if st_mode & 0o020 and st_gid != gid:
        return f"is writable by group {st_gid}"
    return None


def l3_modes(root_mode: int) -> tuple[int, int]:
    """(file mode, folder mode) of what ctxlifed creates under a project root of ``root_mode``."""
    return 0o600 | (root_mode & 0o044), 0o700 | (root_mode & 0o055)
