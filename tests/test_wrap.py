"""The opt-in PreToolUse wrapper (issue 17 item 4): config, the settings reader, the daemon's PreToolUse answer,
``wrap.store`` and ``ctxlifectl run`` against a real daemon."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxlifed.cli.run import Captured, fit
from ctxlifed.core.paths import encode_project_dir
from ctxlifed.runtime import claude_settings as CS
from ctxlifed.runtime import config as C

SID = "7a0b0000-0000-0000-0000-00000000000"
FAILING_SCRIPT = (
    "import sys\n"
    "for i in range(3000):\n"
    "    print('tests/test_mod.py::test_case_%04d PASSED' % i)\n"
    "print('tests/test_mod.py::test_case_2222 FAILED')\n"
    "print('E       AssertionError: assert 4444 == 4445')\n"
    "print('FAILED tests/test_mod.py::test_case_2222 - AssertionError: assert 4444 == 4445')\n"
    "print('========== 1 failed, 2999 passed in 9.99s ==========')\n"
    "sys.exit(1)\n"
)


class World:
    """A project, a Claude Code config folder with a transcript for the project, and a daemon."""

    def __init__(self, daemon: Any, n: int = 1) -> None:
        self.d = daemon
        self.sid = f"{SID}{n}"
        self.project = daemon.base / "proj"
        (self.project / ".git").mkdir(parents=True, exist_ok=True)
        self.config = daemon.base / "cc"
        tdir = self.config / "projects" / encode_project_dir(str(self.project))
        tdir.mkdir(parents=True, exist_ok=True)
        self.transcript = tdir / f"{self.sid}.jsonl"
        self.transcript.touch()

    def settings(self, where: str, permissions: dict[str, list[str]]) -> None:
        path = self.config / "settings.json" if where == "user" else self.project / ".claude" / where
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"permissions": permissions}))

    def pre(self, command: str, mode: str = "default", **extra: Any) -> dict[str, Any]:
        r = self.d.call("hook", {"session_id": self.sid, "transcript_path": str(self.transcript),
                                 "cwd": str(self.project), "hook_event_name": "PreToolUse", "tool_name": "Bash",
                                 "permission_mode": mode, "tool_use_id": "toolu_1",
                                 "tool_input": {"command": command, "description": "Run the tests", **extra}})
        return json.loads(r["stdout"]) if r["stdout"] else {}

    def ctl_run(self, *argv: str, socket: str | None = None) -> subprocess.CompletedProcess[bytes]:
        env = {**self.d.env, "CTXLIFED_SOCKET": socket or self.d.socket, "CTXLIFED_DAEMON_CMD": "/bin/true"}
        return subprocess.run([sys.executable, "-m", "ctxlifed.cli.main", "run", "--session", self.sid, "--", *argv],
                              cwd=self.project, env=env, capture_output=True, timeout=60, check=False)


# -- config -----------------------------------------------------------------------------------------
def test_wrap_is_off_by_default_and_set_per_project(tmp_path: Path) -> None:
    assert C.Config().wrap_mode("/x") is False and not C.Config().wrap_anywhere()
    f = tmp_path / "c.toml"
    f.write_text('[projects."/p/on"]\nwrap_failing_commands = true\n[projects."/p/bad"]\nwrap_failing_commands = "yes"\n')
    c = C.load(str(f), env={})
    assert c.wrap_mode("/p/on") is True and c.wrap_mode("/p/other") is False and c.wrap_anywhere()
    assert any("wrap_failing_commands 'yes'" in p for p in c.problems)
    assert C.load(None, env={"CTXLIFED_WRAP_FAILING_COMMANDS": "1"}).wrap_mode("/any") is True


def test_install_adds_the_pretooluse_hook_only_while_wrapping_is_on(tmp_path: Path) -> None:
    from ctxlifed.cli import install as I

    cfg = tmp_path / "c.toml"
    assert I.WRAP_HOOK not in I.wanted_hooks(str(cfg))
    cfg.write_text("wrap_failing_commands = true\n")
    specs = I.wanted_hooks(str(cfg))
    assert I.WRAP_HOOK in specs and I.WRAP_HOOK.matcher == "Bash"
    new, _ = I.merge({}, "/py", "/x/ctxlifed_hook.py", specs=specs)
    assert new["hooks"]["PreToolUse"][0]["matcher"] == "Bash"
    off, _ = I.merge(new, "/py", "/x/ctxlifed_hook.py")  # turned off again: the hook goes
    assert "PreToolUse" not in off["hooks"]


# -- the settings reader ------------------------------------------------------------------------------
def _layout(tmp_path: Path) -> tuple[Path, Path, Path]:
    proj = tmp_path / "proj"
    (proj / "sub").mkdir(parents=True)
    tdir = tmp_path / "cc" / "projects" / encode_project_dir(str(proj))
    tdir.mkdir(parents=True)
    t = tdir / "s.jsonl"
    t.touch()
    return proj, tmp_path / "cc", t


def test_rules_come_from_user_project_local_and_managed_files(tmp_path: Path) -> None:
    proj, cc, t = _layout(tmp_path)
    (cc / "settings.json").write_text(json.dumps({"permissions": {"allow": ["Bash(pytest:*)"], "deny": ["Bash(rm:*)"]}}))
    (proj / ".claude").mkdir()
    (proj / ".claude" / "settings.json").write_text(json.dumps({"permissions": {"ask": ["Bash(make:*)"]}}))
    (proj / ".claude" / "settings.local.json").write_text(json.dumps({"permissions": {"allow": ["Bash(tox)"]}}))
    managed = tmp_path / "managed.json"
    managed.write_text(json.dumps({"permissions": {"deny": ["Bash(curl:*)"]}}))
    r = CS.read_rules(str(proj / "sub"), str(t), managed=[str(managed)], proc=None)  # cwd below the launch dir
    assert r.complete, r.why_incomplete
    assert r.allow == ("Bash(pytest:*)", "Bash(tox)") and r.ask == ("Bash(make:*)",)
    assert set(r.deny) == {"Bash(rm:*)", "Bash(curl:*)"}
    managed.write_text(json.dumps({"allowManagedPermissionRulesOnly": True, "permissions": {"allow": ["Bash(go test:*)"]}}))
    r = CS.read_rules(str(proj), str(t), managed=[str(managed)], proc=None)
    assert r.allow == ("Bash(go test:*)",) and "Bash(rm:*)" in r.deny


@pytest.mark.parametrize("content, why", [
    ("{not json", "not JSON"),
    ('{"permissions": {"deny": "Bash(rm:*)"}}', "permissions.deny is not a list"),
    ('{"permissions": []}', "permissions is not an object"),
    ("[]", "not a JSON object"),
])
def test_a_settings_file_that_cannot_be_read_makes_the_rules_incomplete(tmp_path: Path, content: str, why: str) -> None:
    proj, cc, t = _layout(tmp_path)
    (cc / "settings.json").write_text(content)
    r = CS.read_rules(str(proj), str(t), managed=[], proc=None)
    assert not r.complete and why in r.why_incomplete


def test_fifo_oversize_unknown_launch_dir_and_sandbox(tmp_path: Path) -> None:
    proj, cc, t = _layout(tmp_path)
    os.mkfifo(cc / "settings.json")  # never blocks: opened non-blocking, refused as not a regular file
    r = CS.read_rules(str(proj), str(t), managed=[], proc=None)
    assert not r.complete and "not a regular file" in r.why_incomplete
    os.unlink(cc / "settings.json")
    (cc / "settings.json").write_text(" " * (CS.MAX_SETTINGS_BYTES + 1))
    assert not CS.read_rules(str(proj), str(t), managed=[], proc=None).complete
    (cc / "settings.json").write_text(json.dumps({"sandbox": {"enabled": True}}))
    assert CS.read_rules(str(proj), str(t), managed=[], proc=None).sandbox
    other = tmp_path / "elsewhere"
    other.mkdir()
    r = CS.read_rules(str(other), str(t), managed=[], proc=None)
    assert not r.complete and "launch folder" in r.why_incomplete
    # Another PreToolUse hook or an enabled plugin could rewrite the same call: reported; ctxlifed's own is not.
    ours = {"type": "command", "command": "/py", "args": ["-I", "-S", "/x/ctxlifed_hook.py"]}
    (cc / "settings.json").write_text(json.dumps({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [ours]}]},
                                                  "enabledPlugins": {"ctxlifed@ctxlifed-local": True, "x@y": False}}))
    assert CS.read_rules(str(proj), str(t), managed=[], proc=None).other_hooks == ""
    (cc / "settings.json").write_text(json.dumps({"hooks": {"PreToolUse": [{"hooks": [ours, {"type": "command",
                                                                                            "command": "rtk-rewrite"}]}]}}))
    assert "a PreToolUse hook" in CS.read_rules(str(proj), str(t), managed=[], proc=None).other_hooks
    (cc / "settings.json").write_text(json.dumps({"enabledPlugins": {"rewriter@market": True}}))
    assert "rewriter@market" in CS.read_rules(str(proj), str(t), managed=[], proc=None).other_hooks
    # A symlinked settings file is read where it points (as Claude Code does).
    real = tmp_path / "dotfiles.json"
    real.write_text(json.dumps({"permissions": {"deny": ["Bash"]}}))
    os.unlink(cc / "settings.json")
    os.symlink(real, cc / "settings.json")
    assert CS.read_rules(str(proj), str(t), managed=[], proc=None).deny == ("Bash",)


# -- Claude Code's command line ---------------------------------------------------------------------------
def fake_process(proc: Path, pid: str, argv: list[str], cwd: str = "/") -> None:
    d = proc / pid
    d.mkdir()
    (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    os.symlink(cwd, d / "cwd")


def test_command_line_rules_of_running_claude_processes(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    fake_process(proc, "1", ["/usr/bin/python3", "--disallowedTools", "Bash"])  # not Claude Code: ignored
    fake_process(proc, "2", ["/x/claude", "-p", "hi", "--disallowedTools", "Bash(rm:*) Edit", "Bash(make:*)", "-c"])
    fake_process(proc, "3", ["node", "/n/@anthropic-ai/claude-code/cli.js", "--settings=s.json"], cwd=str(tmp_path))
    (tmp_path / "s.json").write_text(json.dumps({"permissions": {"ask": ["Bash(tox)"], "allow": ["Bash"]}}))
    assert CS.cli_rules(str(proc)) == (["Bash(rm:*)", "Edit", "Bash(make:*)"], ["Bash(tox)"], False)
    fake_process(proc, "4", ["claude", "--settings", '{"hooks": {"PreToolUse": [{"hooks": [{"command": "x"}]}]}}'])
    assert CS.cli_rules(str(proc))[2] is True
    fake_process(proc, "5", ["claude", "--setting-sources", "user"])
    with pytest.raises(CS.Unreadable):
        CS.cli_rules(str(proc))
    assert not CS.read_rules("/nowhere", "/x/projects/-nowhere/s.jsonl", managed=[], proc=str(proc)).complete
    with pytest.raises(CS.Unreadable):
        CS.cli_rules(str(tmp_path / "no-proc"))
    assert CS.split_tools("Bash(git commit:*),Edit Read(a b)") == ["Bash(git commit:*)", "Edit", "Read(a b)"]


# -- the daemon's PreToolUse answer ----------------------------------------------------------------------
def test_pretooluse_wraps_only_what_would_have_run_without_a_prompt(daemon_factory: Any, short_tmp: Path) -> None:
    proc = short_tmp / "fakeproc"  # no Claude Code process but the ones a test plants
    (proc / "self").mkdir(parents=True)
    d = daemon_factory(CTXLIFED_WRAP_FAILING_COMMANDS="1", CTXLIFED_PROC_ROOT=str(proc)).start()
    w = World(d)
    assert w.pre("pytest -x") == {}  # no allow rule: Claude Code would ask; ctxlifed stays out
    w.settings("settings.local.json", {"allow": ["Bash(pytest:*)"]})
    hso = w.pre("pytest -x")["hookSpecificOutput"]
    assert hso["hookEventName"] == "PreToolUse" and hso["permissionDecision"] == "allow"
    cmd = hso["updatedInput"]["command"]
    assert re.fullmatch(rf"\S*ctxlifectl run --session {w.sid} -- pytest -x", cmd), cmd
    assert hso["updatedInput"]["description"] == "Run the tests"
    assert w.pre("pytest -x | tee log") == {}  # compound: not evaluated, not wrapped
    assert w.pre("pytest -x", run_in_background=True) == {}
    assert w.pre("pytest -x", mode="plan") == {}
    assert w.pre("pytest --token=ghp_abcdefghijklmnopqrstuvwxyz0123456789AB") == {}  # redacted: never run that
    w.settings("user", {"ask": ["Bash(pytest -x)"]})
    assert w.pre("pytest -x") == {}  # an ask stays an ask
    w.settings("user", {"deny": ["Bash(pytest:*)"]})
    assert w.pre("pytest -x") == {}
    assert w.pre("pytest -x", mode="bypassPermissions") == {}  # deny wins in every mode
    w.settings("user", {})
    assert "updatedInput" in w.pre("pytest -q", mode="bypassPermissions")["hookSpecificOutput"]
    # A deny rule given on a running Claude Code's command line counts too.
    fake_process(proc, "101", ["claude", "-p", "--disallowedTools", "Edit,Bash(pytest:*)", "go"])
    assert w.pre("pytest -q", mode="bypassPermissions") == {}


def test_pretooluse_is_left_alone_when_wrapping_is_off(daemon: Any) -> None:
    w = World(daemon)
    w.settings("settings.local.json", {"allow": ["Bash"]})
    assert w.pre("pytest -x") == {}


# -- ctxlifectl run ---------------------------------------------------------------------------------------
def test_run_prints_the_digest_keeps_the_status_and_the_full_output(daemon: Any) -> None:
    w = World(daemon)
    (w.project / "big.py").write_text(FAILING_SCRIPT)
    daemon.call("hook", {"session_id": w.sid, "transcript_path": str(w.transcript), "cwd": str(w.project),
                         "hook_event_name": "SessionStart", "source": "startup"})
    r = w.ctl_run(sys.executable, "big.py")
    assert r.returncode == 1, r.stderr
    out = r.stdout.decode()
    assert out.startswith("[ctxlifed digest"), out[:500]
    assert "FAILED tests/test_mod.py::test_case_2222 - AssertionError: assert 4444 == 4445" in out.split("\n")
    assert "test_case_0100 PASSED" not in out and len(out) < 8000
    aid = int(re.search(r"recall --id (\d+)", out).group(1))
    assert "test_case_0100 PASSED" in daemon.call("recall", {"id": aid})["text"]
    path = re.search(r"Read (\S+) with offset", out).group(1)
    assert path == str(w.transcript.parent / w.sid / "ctxlifed-outputs" / f"{aid}.txt")
    full = subprocess.run([sys.executable, "big.py"], cwd=w.project, capture_output=True, text=True).stdout
    assert Path(path).read_text() == full
    assert daemon.call("status", {"session": w.sid})["sessions"][0]["compression"]["replaced"] == 1


def test_run_prints_a_small_output_as_it_is(daemon: Any) -> None:
    w = World(daemon)
    r = w.ctl_run(sys.executable, "-c", "import sys; print('1 failed'); sys.exit(2)")
    assert r.returncode == 2 and r.stdout == b"1 failed\n"


def test_run_without_the_daemon_prints_the_whole_output_and_keeps_the_status(daemon: Any) -> None:
    w = World(daemon)
    (w.project / "big.py").write_text(FAILING_SCRIPT)
    daemon.stop()
    r = w.ctl_run(sys.executable, "big.py")
    full = subprocess.run([sys.executable, "big.py"], cwd=w.project, capture_output=True).stdout
    assert r.returncode == 1 and r.stdout == full


def test_run_of_a_missing_program_or_a_signal_gives_the_shells_status(daemon: Any) -> None:
    w = World(daemon)
    r = w.ctl_run("no-such-program-xyz")
    assert r.returncode == 127 and b"command not found" in r.stdout
    r = w.ctl_run("sh", "-c", "kill -TERM $$")
    assert r.returncode == 128 + 15


def test_capture_is_bounded_and_marks_the_cut() -> None:
    cap = Captured(head=10, tail=20)
    for i in range(100):
        cap.add(b"%03d\n" % i)
    data = cap.data()
    assert data.startswith(b"000\n001\n00") and data.endswith(b"095\n096\n097\n098\n099\n")
    assert cap.dropped == 400 - 30 and b"[370 bytes cut by ctxlifectl run]" in data
    text = "x\n" * 600_000
    small = fit(text, limit=100_000)
    assert len(json.dumps(small)) <= 100_000 and "characters cut by ctxlifectl run" in small


def test_doctor_names_the_missing_pretooluse_hook_while_wrapping_is_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxlifed.cli import doctor as D, install as I

    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    cfg = tmp_path / "c.toml"
    monkeypatch.setenv("CTXLIFED_CONFIG", str(cfg))
    new, _ = I.merge({}, I.interpreter(), I.shim_path())  # installed while wrapping was off
    (home / ".claude" / "settings.json").write_text(json.dumps(new))
    assert not [f for f in D.check_hooks(str(tmp_path)) if f.level == "FAIL"]
    cfg.write_text("wrap_failing_commands = true\n")
    fails = [f.message for f in D.check_hooks(str(tmp_path)) if f.level == "FAIL"]
    assert any("no ctxlifed hook for PreToolUse" in m for m in fails), fails
