"""systemd user units, the launchd agent, `ctxlifectl service`, and a socket-activated start."""

from __future__ import annotations

import os
import plistlib
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import daemon_env

from ctxlifed.cli import service as S
from ctxlifed.cli.client import call
from ctxlifed.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
PY = "/opt/ctx lifed/bin/python"  # a space: quoting must hold


def unit_values(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line and not line.startswith(("#", "[")) and "=" in line:
            k, _, v = line.partition("=")
            out.setdefault(k, []).append(v)
    return out


def test_repository_files_are_the_templates() -> None:
    assert (ROOT / "systemd" / "ctxlifed.socket").read_text() == S.SOCKET_UNIT
    assert (ROOT / "systemd" / "ctxlifed.service").read_text() == S.SERVICE_UNIT
    assert (ROOT / "systemd" / "launchd" / "dev.ctxlifed.plist").read_text() == S.LAUNCHD_PLIST


def test_socket_unit() -> None:
    v = unit_values(S.render_socket())
    assert v["ListenStream"] == ["%t/ctxlifed/ctxlifed.sock"]  # %t = $XDG_RUNTIME_DIR: the default socket path
    assert v["SocketMode"] == ["0600"] and v["DirectoryMode"] == ["0700"]
    assert v["WantedBy"] == ["sockets.target"]


def test_service_unit() -> None:
    text = S.render_service(PY)
    v = unit_values(text)
    assert v["Type"] == ["notify"]
    assert v["ExecStart"] == ['"/opt/ctx lifed/bin/python" -m ctxlifed']
    assert shlex.split(v["ExecStart"][0]) == [PY, "-m", "ctxlifed"]
    assert v["Requires"] == ["ctxlifed.socket"] and v["After"] == ["ctxlifed.socket"]
    assert v["Also"] == ["ctxlifed.socket"]
    assert "@PYTHON@" not in text
    assert S.render_service("/usr/bin/python3").count("ExecStart=/usr/bin/python3 -m ctxlifed\n") == 1


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    (tmp_path / "ctxlifed.socket").write_text(S.render_socket())
    (tmp_path / "ctxlifed.service").write_text(S.render_service(sys.executable))
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    env = dict(os.environ, XDG_RUNTIME_DIR=str(run))
    r = subprocess.run(["systemd-analyze", "verify", "--user", "ctxlifed.socket", "ctxlifed.service"], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=60, check=False)
    if "Failed to initialize manager" in r.stderr:
        pytest.skip(f"systemd-analyze cannot run here: {r.stderr.strip()}")
    assert r.returncode == 0 and r.stderr.strip() == "", r.stderr


def test_launchd_plist() -> None:
    text = S.render_plist(PY, "/Users/me/Library/Logs/a&b.log")
    p = plistlib.loads(text.encode())
    assert p["Label"] == "dev.ctxlifed"
    assert p["ProgramArguments"] == [PY, "-m", "ctxlifed"]
    assert p["RunAtLoad"] is True and p["KeepAlive"] == {"SuccessfulExit": False}
    assert p["StandardErrorPath"] == "/Users/me/Library/Logs/a&b.log"


# -- ctxlifectl service, with fake systemctl / launchctl ------------------------------------------
@pytest.fixture
def fake_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """systemctl and launchctl stand-ins that log their argv; FAIL_TOOLS=1 makes them fail."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    log = tmp_path / "calls.log"
    for name in ("systemctl", "launchctl"):
        f = bin_ / name
        f.write_text(f'#!/bin/sh\necho "{name} $*" >> {log}\n'
                     'if [ -n "$FAIL_TOOLS" ]; then echo "Failed to connect to bus: No medium found" >&2; exit 1; fi\n'
                     'case "$*" in *is-enabled*) echo enabled;; *is-active*) echo active;; esac\n')
        f.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_}:{os.environ['PATH']}")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("CTXLIFED_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("CTXLIFED_SOCKET", raising=False)
    monkeypatch.delenv("FAIL_TOOLS", raising=False)
    return log


def calls(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_service_install_systemd(fake_tools: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["service", "install", "--platform", "linux"]) == 0
    unit_dir = tmp_path / "cfg" / "systemd" / "user"
    assert (unit_dir / "ctxlifed.socket").read_text() == S.render_socket()
    assert (unit_dir / "ctxlifed.service").read_text() == S.render_service(os.path.abspath(sys.executable))
    assert calls(fake_tools) == ["systemctl --user daemon-reload", "systemctl --user enable --now ctxlifed.socket"]
    out = capsys.readouterr().out
    assert f"wrote {unit_dir / 'ctxlifed.socket'}" in out
    assert "ran systemctl --user enable --now ctxlifed.socket: ok" in out
    # Again: files unchanged, commands re-run (harmless), still exit 0.
    assert main(["service", "install", "--platform", "linux"]) == 0
    assert "unchanged" in capsys.readouterr().out
    # status: installed, enabled, active; the daemon itself is not running here.
    assert main(["service", "status", "--platform", "linux"]) == 1
    out = capsys.readouterr().out
    assert "installed" in out and "socket enabled enabled" in out and "not answering" in out
    assert main(["service", "uninstall", "--platform", "linux"]) == 0
    assert not (unit_dir / "ctxlifed.socket").exists() and not (unit_dir / "ctxlifed.service").exists()
    assert calls(fake_tools)[-2:] == ["systemctl --user disable --now ctxlifed.socket ctxlifed.service",
                                      "systemctl --user daemon-reload"]


def test_service_install_reports_a_failing_systemctl(fake_tools: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FAIL_TOOLS", "1")
    assert main(["service", "install", "--platform", "linux"]) == 1
    cap = capsys.readouterr()
    assert "exit 1" in cap.out and "No medium found" in cap.out
    assert "loginctl enable-linger" in cap.err


def test_service_dry_run_does_nothing(fake_tools: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["service", "install", "--dry-run", "--platform", "linux"]) == 0
    out = capsys.readouterr().out
    assert "would write" in out and "ListenStream=%t/ctxlifed/ctxlifed.sock" in out
    assert "would run systemctl --user enable --now ctxlifed.socket" in out
    assert not (tmp_path / "cfg").exists() and calls(fake_tools) == []


def test_service_install_launchd(fake_tools: Path, tmp_path: Path) -> None:
    assert main(["service", "install", "--platform", "darwin"]) == 0
    plist = tmp_path / "home" / "Library" / "LaunchAgents" / "dev.ctxlifed.plist"
    p = plistlib.loads(plist.read_bytes())
    assert p["ProgramArguments"] == [os.path.abspath(sys.executable), "-m", "ctxlifed"]
    assert p["StandardOutPath"] == str(tmp_path / "data" / "ctxlifed.log")
    dom = f"gui/{os.getuid()}"
    assert calls(fake_tools) == [f"launchctl bootout {dom}/dev.ctxlifed", f"launchctl bootstrap {dom} {plist}",
                                 f"launchctl enable {dom}/dev.ctxlifed"]
    assert main(["service", "uninstall", "--platform", "darwin"]) == 0
    assert not plist.exists()


# -- socket activation ------------------------------------------------------------------------------
@pytest.mark.skipif(shutil.which("systemd-socket-activate") is None, reason="systemd-socket-activate not installed")
def test_socket_activated_start(short_tmp: Path) -> None:
    """Start the daemon exactly as the units describe: the socket unit's path, the service's ExecStart."""
    env = daemon_env(short_tmp)
    sock = Path(env["XDG_RUNTIME_DIR"]) / "ctxlifed" / "ctxlifed.sock"  # ListenStream=%t/ctxlifed/ctxlifed.sock
    sock.parent.mkdir(mode=0o700)
    env["CTXLIFED_SOCKET"] = str(sock)
    exec_start = shlex.split(unit_values(S.render_service(sys.executable))["ExecStart"][0])
    setenv = [f"--setenv={k}" for k in ("HOME", "XDG_RUNTIME_DIR", "XDG_DATA_HOME", "XDG_CONFIG_HOME",
                                        "CTXLIFED_DATA_DIR", "CTXLIFED_CONFIG", "CTXLIFED_SOCKET")]
    proc = subprocess.Popen(["systemd-socket-activate", "--listen", str(sock), *setenv, *exec_start],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    lines: list[bytes] = []
    drain: threading.Thread | None = None
    try:
        # It prints "Listening on <path> as 3." once bound; the first connection then starts the daemon,
        # which answers when ready: no sleeps, the call itself waits (bounded).
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert b"Listening on" in first, first
        drain = threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, b"")), daemon=True)  # type: ignore[union-attr]
        drain.start()
        r = call(str(sock), "ping", {}, timeout=20)
        assert r["pong"] is True
        st = call(str(sock), "status", {}, timeout=10)
        assert st["socket"] == str(sock) and st["pid"] == r["pid"] == proc.pid  # it execs the daemon in place
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if drain is not None:
        drain.join(5)
    assert proc.stderr is not None
    proc.stderr.close()
    text = b"".join(lines).decode(errors="replace")
    assert '"activated": true' in text, text[-2000:]
    assert sock.exists()  # systemd's socket: the activated daemon never unlinks it
