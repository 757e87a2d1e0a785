"""ctxlifectl statusline: one short line from the daemon's status, fast, silent when the daemon is down."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxlifed.cli import statusline as SL

STATUS_JSON = {"session_id": "0b5c1f9e-6f0e-4f6a-9a51-5d0c9d8e7f10", "cwd": "/x", "model": {"id": "claude-opus-5-5"},
               "context_window": {"used_percentage": 12}}


class FakeDaemon:
    """Answers each JSON-RPC line with ``answer(method, params)``; ``hang`` accepts and never answers."""

    def __init__(self, path: str, answer: Any = None, hang: bool = False) -> None:
        self.path, self.answer, self.hang = path, answer, hang
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(8)
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)
            if self.hang:
                continue
            buf = b""
            while b"\n" not in buf:
                chunk = c.recv(65536)
                if not chunk:
                    break
                buf += chunk
            req = json.loads(buf.split(b"\n")[0])
            self.calls.append((req["method"], req["params"]))
            res = self.answer(req["method"], req["params"])
            c.sendall(json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": res}).encode() + b"\n")
            c.close()

    def close(self) -> None:
        self.sock.close()
        for c in self.conns:
            c.close()


@pytest.fixture
def sock_path(short_tmp: Path) -> str:
    return str(short_tmp / "d.sock")


@pytest.fixture
def fake(sock_path: str) -> Iterator[FakeDaemon]:
    view = {"session": STATUS_JSON["session_id"], "project": "/x", "events": 3, "first_ts": 1.0, "last_ts": 2.0,
            "phase": "implementation", "context_tokens": 50000, "zones": [{"name": "working"}],
            "working_pct": 0.4249, "level": 1}
    d = FakeDaemon(sock_path, lambda m, p: {"version": "0.1.0", "sessions": [view] if p.get("session") else []})
    yield d
    d.close()


@pytest.mark.parametrize("view,line", [
    ({"phase": "implementation", "zones": [{}], "working_pct": 0.42, "level": 1}, "ctx: implementation · W 42.0% · L0→L1"),
    ({"phase": "testing", "context_tokens": 10, "working_pct": 0.05, "level": 0}, "ctx: testing · W 5.0% · L0"),
    ({"phase": "review", "zones": [{}], "working_pct": 0.951, "level": 3}, "ctx: review · W 95.1% · L2→L3"),
    ({"phase": "planning"}, "ctx: planning"),
    ({"phase": "design", "ended": True}, "ctx: design · ended"),
])
def test_render(view: dict[str, Any], line: str) -> None:
    assert SL.render(view) == line


def test_line_from_daemon(fake: FakeDaemon, sock_path: str) -> None:
    assert SL.line(json.dumps(STATUS_JSON), sock_path) == "ctx: implementation · W 42.5% · L0→L1"
    assert fake.calls == [("status", {"session": STATUS_JSON["session_id"], "limit": 1})]


@pytest.mark.parametrize("stdin", ["", "not json", "[1]", '{"cwd": "/x"}', '{"session_id": 5}'])
def test_bad_input_is_silent(fake: FakeDaemon, sock_path: str, stdin: str) -> None:
    assert SL.line(stdin, sock_path) == ""


def test_unknown_session_is_silent(sock_path: str) -> None:
    d = FakeDaemon(sock_path, lambda m, p: {"sessions": []})
    try:
        assert SL.line(json.dumps(STATUS_JSON), sock_path) == ""
    finally:
        d.close()


def test_daemon_down_is_silent_and_quick(short_tmp: Path) -> None:
    t0 = time.monotonic()
    assert SL.line(json.dumps(STATUS_JSON), str(short_tmp / "absent.sock")) == ""
    assert time.monotonic() - t0 < 0.2


def test_hung_daemon_is_silent_within_the_deadline(sock_path: str) -> None:
    d = FakeDaemon(sock_path, hang=True)
    try:
        t0 = time.monotonic()
        assert SL.line(json.dumps(STATUS_JSON), sock_path) == ""
        assert time.monotonic() - t0 < SL.TIMEOUT_S + 0.3
    finally:
        d.close()


def _run(argv: list[str], sock: str, stdin: str) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXLIFED_")}
    env["CTXLIFED_SOCKET"] = sock
    t0 = time.monotonic()
    r = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, timeout=30, check=False)
    return r, time.monotonic() - t0


def test_the_installed_command_runs_fast_without_heavy_imports(fake: FakeDaemon, sock_path: str) -> None:
    # The exact command `ctxlifectl install --statusline` writes.
    import shlex

    from ctxlifed.cli.install import statusline_entry

    argv = shlex.split(statusline_entry(os.path.abspath(sys.executable))["command"])
    r, dt = _run(argv, sock_path, json.dumps(STATUS_JSON))
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout == "ctx: implementation · W 42.5% · L0→L1\n"
    assert dt < 1.5, dt
    probe = ("import sys, runpy; sys.stdin = open('/dev/null'); sys.argv = ['x'];"
             "import ctxlifed.cli.statusline as s; s.line('{}');"
             "print(sorted(n for n in sys.modules if n in ('msgspec','anyio','structlog','argparse','sqlite3')))")
    out = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_ctxlifectl_statusline_subcommand(sock_path: str, short_tmp: Path) -> None:
    r, _ = _run([sys.executable, "-m", "ctxlifed.cli.main", "statusline"], sock_path, json.dumps(STATUS_JSON))
    assert (r.returncode, r.stdout, r.stderr) == (0, "\n", "")


def test_with_the_real_daemon(daemon: Any) -> None:
    sid = "5e3c1a8e-0c44-4a0b-9f41-0e9b3a0f2d11"
    daemon.call("hook", {"session_id": sid, "transcript_path": "/nonexistent.jsonl", "cwd": str(daemon.base),
                         "hook_event_name": "UserPromptSubmit", "prompt": "let's implement the parser"})
    r, dt = _run([sys.executable, "-I", "-m", "ctxlifed.cli.statusline"], daemon.socket,
                 json.dumps({**STATUS_JSON, "session_id": sid}))
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout.startswith("ctx: ") and r.stdout.count("\n") == 1
