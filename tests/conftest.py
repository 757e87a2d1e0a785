"""Shared fixtures: short private temp dirs, a real daemon process, the real shim.

Rules:
- No sleeps to wait for readiness: a started daemon reports READY=1 on a NOTIFY_SOCKET we own.
- Socket paths are short (AF_UNIX limit) and come from tempfile.
- Every daemon a test starts is stopped (SIGTERM, then SIGKILL) when the test ends.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxlifed.testing import daemon_env, start_daemon

ROOT = Path(__file__).resolve().parent.parent
SHIM = ROOT / "src" / "ctxlifed" / "_shim" / "ctxlifed_hook.py"  # the script Claude Code runs
SHIM_MODULE = SHIM.parent / "ctxlifed_shim.py"  # the shim proper, which the script loads
# Real Claude Code 2.1.328 data (copied from ../shared/fixtures/claude-code so a clean clone is self-contained).
FIXTURES = Path(os.environ.get("CTXLIFED_FIXTURES", ROOT / "tests" / "fixtures" / "claude-code"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="cl-", dir="/tmp"))
    os.chmod(d, 0o700)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


class DaemonProc:
    """A real ``python -m ctxlifed`` process, ready when READY=1 arrived."""

    def __init__(self, base: Path, env: dict[str, str]) -> None:
        self.base = base
        self.env = env
        self.socket = env["CTXLIFED_SOCKET"]
        self.data_dir = Path(env["CTXLIFED_DATA_DIR"])
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = base / "daemon.log"

    def start(self, timeout: float = 20.0, expect_ready: bool = True) -> DaemonProc:
        self.proc, _ready_s = start_daemon(self.base, self.env, self.log, timeout=timeout, expect_ready=expect_ready)
        return self

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        from ctxlifed.cli.client import call

        return call(self.socket, method, params or {})

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@pytest.fixture
def daemon_factory(short_tmp: Path) -> Iterator[Any]:
    made: list[DaemonProc] = []

    def make(**extra: str) -> DaemonProc:
        d = DaemonProc(short_tmp, daemon_env(short_tmp, **extra))
        made.append(d)
        return d

    yield make
    for d in made:
        if d.proc is not None and d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait()


@pytest.fixture
def daemon(daemon_factory: Any) -> DaemonProc:
    return daemon_factory().start()


def run_shim(payload: bytes | str | dict[str, Any], env: dict[str, str], timeout: float = 10.0) -> subprocess.CompletedProcess[bytes]:
    if isinstance(payload, dict):
        payload = json.dumps(payload)
    if isinstance(payload, str):
        payload = payload.encode()
    return subprocess.run([sys.executable, "-I", "-S", str(SHIM)], input=payload, env=env,
                          capture_output=True, timeout=timeout, check=False)


def load_hooks(run: str) -> list[dict[str, Any]]:
    path = FIXTURES / "runs" / run / "hooks.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]



_E2E_SKIPPED: list[str] = []


def pytest_terminal_summary(terminalreporter: Any) -> None:
    skipped = [r for r in terminalreporter.stats.get("skipped", [])
               if "tests/e2e/" in str(getattr(r, "nodeid", "")).replace(os.sep, "/")]
    if skipped:
        longrepr = getattr(skipped[0], "longrepr", None)
        reason = str(longrepr[2]).removeprefix("Skipped: ") if isinstance(longrepr, tuple) and len(longrepr) == 3 else ""
        _E2E_SKIPPED[:] = [str(len(skipped)), reason]


def pytest_unconfigure(config: Any) -> None:
    """Say it as the run's last words when the end-to-end tests with the real Claude Code CLI were skipped."""
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if not _E2E_SKIPPED or tr is None:
        return
    n, reason = _E2E_SKIPPED
    tr.write_line(f"NOTE: {n} end-to-end tests with the real Claude Code CLI were skipped: {reason}", yellow=True, bold=True)
    tr.write_line("      Run them with `.ci/run` (it installs the pinned CLI into .cache/claude-code), or set "
                  "CTXLIFED_CLAUDE_BIN to a Claude Code 2.1.328 binary and run `make test`.", yellow=True)
