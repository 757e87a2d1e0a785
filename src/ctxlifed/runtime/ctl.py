"""The ``ctxlifectl`` command as Claude Code's shell can run it.

Rules:
- Every text ctxlifed puts before the model that names a ctxlifectl command starts with
  :func:`ctl_command`: after ``make run`` and ``.venv/bin/ctxlifectl install`` the script is not on
  Claude Code's PATH, so a bare "ctxlifectl recall …" would fail with exit 127.
- Resolution, first that works: the ``ctxlifectl`` script installed next to the running interpreter
  (``dirname(sys.executable)/ctxlifectl``, existing and executable); ``shutil.which("ctxlifectl")``
  made absolute; the bare name ``ctxlifectl`` (nothing better is known).
- The result is shell-quoted (``shlex.quote``), so a path with spaces stays one word, and computed
  once per process (the interpreter does not move while it runs).
- The pure core never calls this: renderers take the prefix as a ``ctl`` parameter.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import sys

__all__ = ["CTL_NAME", "ctl_command", "resolve_ctl"]

CTL_NAME = "ctxlifectl"


def resolve_ctl(executable: str, which: str | None) -> str:
    """The shell-quoted command for ``executable`` (the interpreter) and ``which`` (PATH's answer)."""
    if executable:
        beside = os.path.join(os.path.dirname(os.path.abspath(executable)), CTL_NAME)
        if os.path.isfile(beside) and os.access(beside, os.X_OK):
            return shlex.quote(beside)
    if which:
        return shlex.quote(os.path.abspath(which))
    return CTL_NAME


@functools.cache
def ctl_command() -> str:
    """The ``ctxlifectl`` command for texts the model reads (see module rules); cached."""
    return resolve_ctl(sys.executable, shutil.which(CTL_NAME))
