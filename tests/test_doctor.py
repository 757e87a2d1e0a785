"""ctxlifectl doctor: one line per finding, every problem with its fix, non-zero exit when something is wrong."""

from __future__ import annotations

import json
import os
import socket
import stat
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxlifed.cli import doctor as D
from ctxlifed.cli.main import main


@pytest.fixture
def world(short_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private HOME with nothing installed; no service tools on PATH; the socket in a private dir."""
    home = short_tmp / "home"
    home.mkdir()
    bin_ = short_tmp / "bin"
    bin_.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(short_tmp / "cfg"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(short_tmp / "run"))
    monkeypatch.setenv("CTXLIFED_DATA_DIR", str(short_tmp / "data"))
    monkeypatch.setenv("CTXLIFED_CONFIG", str(short_tmp / "cfg" / "ctxlifed" / "config.toml"))
    monkeypatch.setenv("CTXLIFED_SOCKET", str(short_tmp / "run" / "ctxlifed" / "s.sock"))
    monkeypatch.chdir(short_tmp)
    return short_tmp


def doctor(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    code = main(["doctor", "--platform", "linux", *args])
    return code, capsys.readouterr().out.splitlines()


def fails(lines: list[str]) -> list[str]:
    return [ln for ln in lines if ln.startswith("FAIL")]


def test_every_problem_is_one_line_with_its_fix(world: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = doctor(capsys)
    assert code == 1
    bad = fails(lines)
    assert bad and all(" — fix: " in ln for ln in bad)
    assert any(ln.startswith("FAIL  daemon") and "fix: ctxlifectl daemon start" in ln for ln in bad)
    assert any(ln.startswith("FAIL  hooks") and ln.endswith("fix: ctxlifectl install") for ln in bad)
    assert lines[-1] == (f"{len(bad)} problems found" if len(bad) > 1 else "1 problem found")
    for check in ("python", "sqlite", "runtime", "config", "service", "disk"):
        assert any(ln.split()[1] == check for ln in lines if ln.startswith(("ok", "warn"))), check


def test_all_good(world: Path, daemon_factory: Any, capsys: pytest.CaptureFixture[str],
                  monkeypatch: pytest.MonkeyPatch) -> None:
    d = daemon_factory()
    monkeypatch.setenv("CTXLIFED_SOCKET", d.socket)
    monkeypatch.setenv("CTXLIFED_DATA_DIR", str(d.data_dir))
    d.start()
    assert main(["install"]) == 0
    capsys.readouterr()
    code, lines = doctor(capsys)
    assert code == 0, lines
    assert not fails(lines) and lines[-1] == "everything looks fine"
    assert any(ln.startswith("ok    daemon") and "0.1.0" in ln for ln in lines)
    assert any(ln.startswith("ok    hooks") and "13 events" in ln for ln in lines)
    code = main(["doctor", "--platform", "linux", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["ok"] is True and {f["check"] for f in out["findings"]} >= {"python", "sqlite", "daemon", "hooks"}


def test_hooks_pointing_at_missing_shim_and_interpreter(world: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = world / "home" / ".claude" / "settings.json"
    assert main(["install"]) == 0
    data = json.loads(settings.read_text())
    data["hooks"]["Stop"][0]["hooks"][0]["command"] = "/gone/venv/bin/python"
    data["hooks"]["PostToolUse"][0]["hooks"][0]["args"][2] = "/gone/ctxlifed_hook.py"
    del data["hooks"]["PreCompact"]
    settings.write_text(json.dumps(data))
    capsys.readouterr()
    code, lines = doctor(capsys)
    assert code == 1
    hook_fails = [ln for ln in fails(lines) if ln.startswith("FAIL  hooks")]
    assert any("Stop: interpreter '/gone/venv/bin/python' is missing" in ln for ln in hook_fails)
    assert any("PostToolUse: shim /gone/ctxlifed_hook.py does not exist" in ln for ln in hook_fails)
    assert any("no ctxlifed hook for PreCompact" in ln for ln in hook_fails)
    assert all(ln.endswith("fix: ctxlifectl install --scope user") for ln in hook_fails)


def test_unparseable_settings_and_disabled_hooks(world: Path, capsys: pytest.CaptureFixture[str]) -> None:
    user = world / "home" / ".claude" / "settings.json"
    user.parent.mkdir(parents=True)
    user.write_text("{nope")
    local = world / ".claude" / "settings.local.json"
    local.parent.mkdir()
    local.write_text(json.dumps({"disableAllHooks": True}))
    code, lines = doctor(capsys)
    assert code == 1
    assert any("cannot parse" in ln and str(user) in ln and f"fix: $EDITOR {user}" in ln for ln in fails(lines))
    assert any("disableAllHooks" in ln and "fix: remove disableAllHooks" in ln for ln in fails(lines))


def test_plugin_counts_as_installed(world: Path, capsys: pytest.CaptureFixture[str]) -> None:
    user = world / "home" / ".claude" / "settings.json"
    user.parent.mkdir(parents=True)
    user.write_text(json.dumps({"enabledPlugins": {"ctxlifed@ctxlifed-local": True}}))
    _code, lines = doctor(capsys)
    assert any(ln.startswith("ok    hooks") and "plugin enabled" in ln for ln in lines)
    assert not any(ln.startswith("FAIL  hooks") for ln in lines)
    # Plugin hooks run the system python3: it cannot start the daemon, so a service is advised.
    assert any(ln.startswith("warn  service") and ln.endswith("fix: ctxlifectl service install") for ln in lines)


def test_runtime_dir_permissions(world: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = world / "run" / "ctxlifed"
    d.mkdir(parents=True)
    os.chmod(d, 0o755)
    _code, lines = doctor(capsys)
    assert any(ln.startswith("FAIL  runtime") and f"fix: chmod 700 {d}" in ln for ln in lines)
    os.chmod(d, 0o700)
    _code, lines = doctor(capsys)
    assert any(ln.startswith("ok    runtime") and "private" in ln for ln in lines)


class HelloDaemon:
    def __init__(self, path: str, version: str, status: dict[str, Any] | None = None) -> None:
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.bind(path)
        self.s.listen(4)
        self.version = version
        self.status = status
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        while True:
            try:
                c, _ = self.s.accept()
            except OSError:
                return
            with c:
                req = json.loads(c.makefile("rb").readline())
                res = {"version": self.version, "protocol": 1, "pid": 4242, "compatible": True}
                if req["method"] == "status" and self.status is not None:
                    res = self.status
                c.sendall(json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": res}).encode() + b"\n")


@pytest.fixture
def old_daemon(world: Path) -> Iterator[HelloDaemon]:
    p = Path(os.environ["CTXLIFED_SOCKET"])
    p.parent.mkdir(parents=True, mode=0o700)
    d = HelloDaemon(str(p), "0.0.9")
    yield d
    d.s.close()


def test_version_mismatch(old_daemon: HelloDaemon, capsys: pytest.CaptureFixture[str]) -> None:
    _code, lines = doctor(capsys)
    (ln,) = [x for x in lines if x.startswith("FAIL  daemon")]
    assert "runs ctxlifed 0.0.9 but this client is 0.1.0" in ln
    assert ln.endswith("fix: ctxlifectl daemon stop && ctxlifectl daemon start")


def test_disk_and_spool(world: Path) -> None:
    (bad,) = D.check_disk(min_free_mb=1 << 40)
    assert bad.level == "FAIL" and "fix:" in bad.line()
    data = world / "data"
    data.mkdir()
    (data / "spool.jsonl").write_text('{"rid":"x","payload":{}}\n')
    out = D.check_disk()
    assert out[0].level == "ok"
    assert out[1].level == "warn" and out[1].check == "spool" and "ctxlifectl daemon start" in out[1].fix


def test_sqlite_has_fts5_and_trigram_here() -> None:
    (f,) = D.check_sqlite()
    assert f.level in ("ok", "warn") and "FTS5" in f.message


def test_config_problems_are_reported(world: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = Path(os.environ["CTXLIFED_CONFIG"])
    cfg.parent.mkdir(parents=True)
    cfg.write_text('zones = "10/10/10/10"\nbogus = 1\n')
    _code, lines = doctor(capsys)
    cl = [ln for ln in fails(lines) if ln.startswith("FAIL  config")]
    assert len(cl) == 2 and all(f"fix: $EDITOR {cfg}" in ln for ln in cl)


def test_installed_service_that_is_not_active(world: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    unit_dir = world / "cfg" / "systemd" / "user"
    unit_dir.mkdir(parents=True)
    from ctxlifed.cli import service as S

    for path, text in S.planned_files("systemd", S.service_python()).items():
        Path(path).write_text(text)
    fake = world / "bin" / "systemctl"
    fake.write_text("#!/bin/sh\necho inactive\nexit 3\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{world / 'bin'}:{os.environ['PATH']}")
    _code, lines = doctor(capsys)
    assert any(ln.startswith("FAIL  service") and "fix: systemctl --user enable --now ctxlifed.socket" in ln for ln in lines)
    assert any(ln.startswith("FAIL  daemon") and "fix: systemctl --user start ctxlifed.socket" in ln for ln in lines)


def test_failed_maintenance_is_a_warning_with_its_error(world: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A daemon whose index maintenance keeps failing (a damaged store, a full disk) still answers;
    doctor says so, with the last error and what to check."""
    from ctxlifed import __version__

    p = Path(os.environ["CTXLIFED_SOCKET"])
    p.parent.mkdir(parents=True, mode=0o700)
    d = HelloDaemon(str(p), __version__, status={"maintenance_failed": 7, "maintenance_error": "DatabaseError('malformed')",
                                                  "derive_failed": 2})
    try:
        _code, lines = doctor(capsys)
    finally:
        d.s.close()
    assert any(ln.startswith("ok    daemon") for ln in lines)
    (m,) = [ln for ln in lines if ln.startswith("warn  store") and "maintenance" in ln]
    assert "7 index maintenance steps failed" in m and "malformed" in m and "integrity_check" in m
    assert any(ln.startswith("warn  store") and "2 events could not be derived" in ln for ln in lines)


def test_plugin_and_install_together_fail(world: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["install", "--with-plugin"]) == 0
    cfg = world / "home" / ".claude" / "settings.json"
    data = json.loads(cfg.read_text())
    data["enabledPlugins"] = {"ctxlifed@ctxlifed-local": True}
    cfg.write_text(json.dumps(data))
    capsys.readouterr()
    code, lines = doctor(capsys)
    assert code == 1
    assert any(ln.startswith("FAIL  hooks") and "twice" in ln for ln in lines), lines


def test_commands_named_in_briefings_are_checked(world: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxlifed.runtime.ctl import ctl_command

    _code, lines = doctor(capsys)
    assert any(ln.startswith("ok    commands") and ctl_command() in ln for ln in lines), lines
    monkeypatch.setattr("ctxlifed.runtime.ctl.ctl_command", lambda: "ctxlifectl")
    _code, lines = doctor(capsys)
    assert any(ln.startswith("FAIL  commands") for ln in lines), lines


def test_an_installed_plugin_copy_with_bare_commands_fails(world: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    from ctxlifed.cli import plugin as PL

    cache = world / "home" / ".claude" / "plugins" / "cache" / "ctxlifed-local" / "ctxlifed" / "0.1.0"
    shutil.copytree(PL.template_dir(), cache)
    _code, lines = doctor(capsys)
    assert any(ln.startswith("FAIL  plugin") and "bare" in ln for ln in lines), lines
    PL.render_plugin(str(cache), python=sys.executable, ctl=PL.ctl_command())
    _code, lines = doctor(capsys)
    assert not any(ln.startswith("FAIL  plugin") for ln in lines), lines


def test_a_status_line_on_a_missing_interpreter_fails(world: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ctxlifed.cli import install as I

    cfg = world / "home" / ".claude" / "settings.json"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(json.dumps({"statusLine": I.statusline_entry("/gone/venv/bin/python")}))
    _code, lines = doctor(capsys)
    assert any(ln.startswith("FAIL  statusline") and "/gone/venv/bin/python" in ln for ln in lines), lines


def test_read_ahead_is_ok_with_inotify_and_a_warning_without() -> None:
    (f,) = D.check_read_ahead()
    assert f.level == "ok" and "inotify" in f.message  # Linux
    (f,) = D.check_read_ahead(lambda: None)
    assert f.level == "warn" and "while its hook waits" in f.message and "max_user_instances" in f.fix
