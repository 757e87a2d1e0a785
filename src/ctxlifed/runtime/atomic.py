"""Atomic file replacement, shared by the CLI (settings.json) and the daemon (L3 memory pages).

Rules:
- Write a temporary file in the same folder, fsync it, set its mode, then ``os.replace`` it over
  the target: a reader sees the old file or the new one, never a half-written one.
- The temporary file is removed on any failure. Stdlib only (the CLI imports this).
"""

from __future__ import annotations

import os
import tempfile


def write_atomic(path: str, text: str, mode: int, *, prefix: str = ".ctxlifed-") -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=prefix, suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
