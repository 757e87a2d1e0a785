"""Support for tests and benchmarks: a real daemon process in a private temp environment.

Rules:
- Never imported by the daemon, the CLI or the shim; tests/ and bench/ use it (like trio.testing).
- Readiness is the daemon's own ``READY=1`` on a NOTIFY_SOCKET we bind: no sleeps, no polling.
- Every path lives under the caller's temp folder; nothing of the user's environment leaks in
  (CTXLIFED_*, NOTIFY_SOCKET and LISTEN_* are dropped).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def daemon_env(base: Path, **extra: str) -> dict[str, str]:
    """Environment for a daemon (and its shim and CLI) whose every path lies under ``base``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CTXLIFED_", "NOTIFY_SOCKET", "LISTEN_"))}
    home = base / "home"
    home.mkdir(exist_ok=True)
    env.update(
        HOME=str(home),
        XDG_RUNTIME_DIR=str(base / "run"),
        XDG_DATA_HOME=str(base / "data"),
        XDG_CONFIG_HOME=str(base / "config"),
        CTXLIFED_SOCKET=str(base / "run" / "ctxlifed" / "s.sock"),
        CTXLIFED_DATA_DIR=str(base / "data" / "ctxlifed"),
        CTXLIFED_CONFIG=str(base / "config" / "ctxlifed" / "config.toml"),
        CTXLIFED_TRANSCRIPT_ROOTS=str(base),
        PYTHONUNBUFFERED="1",
    )
    (base / "run").mkdir(mode=0o700, exist_ok=True)
    env.update(extra)
    return env


def start_daemon(base: Path, env: dict[str, str], log: Path | None, *, timeout: float = 20.0, expect_ready: bool = True,
                 python: str = sys.executable, args: tuple[str, ...] = (),
                 **popen_kw: Any) -> tuple[subprocess.Popen[bytes], float]:
    """Start ``python -m ctxlifed [args]`` with stdout/stderr appended to ``log`` (``/dev/null`` when None,
    as the hook shim starts it); return it and the seconds it took to report READY=1 (0.0 when
    ``expect_ready`` is false). Raises AssertionError on timeout."""
    notify_path = str(base / f"n{time.monotonic_ns() % 1000000}.sock")
    ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    ns.bind(notify_path)
    ns.settimeout(timeout)
    t0 = time.perf_counter()
    try:
        with open(log if log is not None else os.devnull, "ab") as logf:
            proc = subprocess.Popen([python, "-m", "ctxlifed", *args], env=dict(env, NOTIFY_SOCKET=notify_path),
                                    stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, **popen_kw)
        if not expect_ready:
            return proc, 0.0
        while True:
            try:
                msg = ns.recv(4096).decode()
            except TimeoutError:
                tail = log.read_text(errors="replace")[-3000:] if log is not None and log.exists() else ""
                raise AssertionError(f"daemon not ready in {timeout}s:\n{tail}") from None
            if "READY=1" in msg:
                return proc, time.perf_counter() - t0
    finally:
        ns.close()
        os.unlink(notify_path)
