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
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHIM = ROOT / "src" / "ctxlifed" / "_shim" / "ctxlifed_hook.py"
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


def daemon_env(base: Path, **extra: str) -> dict[str, str]:
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
        notify_path = str(self.base / f"n{time.monotonic_ns() % 100000}.sock")
        ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        ns.bind(notify_path)
        ns.settimeout(timeout)
        env = dict(self.env, NOTIFY_SOCKET=notify_path)
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "ctxlifed"], env=env, stdin=subprocess.DEVNULL,
                                     stdout=logf, stderr=logf)
        logf.close()
        try:
            if expect_ready:
                while True:
                    try:
                        msg = ns.recv(4096).decode()
                    except TimeoutError:
                        raise AssertionError(f"daemon not ready in {timeout}s:\n{self.log.read_text()[-3000:]}") from None
                    if "READY=1" in msg:
                        break
        finally:
            ns.close()
            os.unlink(notify_path)
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
