"""Where the ``ctxlifectl`` command of this installation is, as text a shell can run.

Rules:
- Every command ctxlifed puts before the model or the user names ctxlifectl by this absolute,
  shell-quoted path: the script next to the running interpreter (a venv's or pipx's ``bin/``) first,
  then the one on PATH made absolute; the bare name only when neither exists.
- Stdlib only and import-cheap; the answer is computed once per process.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import sys

CTL_NAME = "ctxlifectl"


def _runnable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


@functools.cache
def ctl_command() -> str:
    beside = os.path.join(os.path.dirname(os.path.abspath(sys.executable)), CTL_NAME)
    if _runnable(beside):
        return shlex.quote(beside)
    found = shutil.which(CTL_NAME)
    if found:
        return shlex.quote(os.path.abspath(found))
    return CTL_NAME
