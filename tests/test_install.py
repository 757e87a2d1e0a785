"""ctxlifectl install / uninstall, the plugin shipped in the package, and the wheel carrying both."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from ctxlifed.cli import install as I
from ctxlifed.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "src" / "ctxlifed" / "_plugin"

USER_SETTINGS = {
    "model": "sonnet",
    "env": {"FOO": "1"},
    "permissions": {"allow": ["Bash(ls:*)"]},
    "hooks": {
        "PostToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "echo mine"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done", "timeout": 3}]}],
        "PreToolUse": [{"matcher": "Edit", "hooks": [{"type": "command", "command": "lint.sh"}]}],
    },
}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.setenv("CTXLIFED_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CTXLIFED_SOCKET", str(tmp_path / "none.sock"))
    monkeypatch.chdir(tmp_path)
    return h


def settings(home: Path) -> Path:
    return home / ".claude" / "settings.json"


def write(p: Path, obj: Any) -> str:
    p.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(obj) if not isinstance(obj, str) else obj
    p.write_text(text)
    return text


def backups(p: Path) -> list[Path]:
    return sorted(p.parent.glob(p.name + ".ctxlifed-*.bak"))


def ours(data: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return I.installed_handlers(data)


# -- the hook entries ------------------------------------------------------------------------------
def test_fresh_install_writes_every_event_in_exec_form(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["install"]) == 0
    data = json.loads(settings(home).read_text())
    mine = ours(data)
    assert set(mine) == {s.event for s in I.HOOKS}
    for spec in I.HOOKS:
        (h,) = mine[spec.event]
        assert h["type"] == "command"
        assert os.path.isabs(h["command"]) and h["command"] == os.path.abspath(sys.executable)
        assert h["args"][:2] == ["-I", "-S"]
        assert os.path.isabs(h["args"][2]) and Path(h["args"][2]).is_file()
        assert h["args"][2] == I.shim_path()
        assert h["timeout"] == spec.timeout
        assert h.get("async", False) is spec.is_async
    assert data["hooks"]["SessionStart"][0]["matcher"] == "startup|resume|clear|compact"
    out = capsys.readouterr().out
    assert str(settings(home)) in out and "backup" not in out  # nothing to back up


def test_answering_events_are_synchronous_and_only_ingest_events_async() -> None:
    mode = {s.event: s.is_async for s in I.HOOKS}
    for ev in ("SessionStart", "UserPromptSubmit", "PostToolUse", "PostToolUseFailure", "Stop", "PreCompact",
               "PostCompact", "SessionEnd"):
        assert mode[ev] is False, ev
    assert {e for e, a in mode.items() if a} == {"SubagentStart", "SubagentStop", "InstructionsLoaded", "CwdChanged",
                                                 "Notification"}
    sess_end = next(s for s in I.HOOKS if s.event == "SessionEnd")
    assert sess_end.timeout <= 2  # Claude Code gives all SessionEnd hooks 1.5 s together
    # Every timeout is longer than the shim's own 1.5 s deadline, so the shim gives up (and spools) first.
    assert all(s.timeout > 1.5 for s in I.HOOKS)


def test_merge_keeps_every_other_key_and_hook(home: Path) -> None:
    write(settings(home), USER_SETTINGS)
    assert main(["install"]) == 0
    data = json.loads(settings(home).read_text())
    for k in ("model", "env", "permissions"):
        assert data[k] == USER_SETTINGS[k]
    # The user's handlers are untouched and still first.
    assert data["hooks"]["PostToolUse"][0] == USER_SETTINGS["hooks"]["PostToolUse"][0]
    assert data["hooks"]["Stop"][0] == USER_SETTINGS["hooks"]["Stop"][0]
    assert data["hooks"]["PreToolUse"] == USER_SETTINGS["hooks"]["PreToolUse"]
    assert len(data["hooks"]["PostToolUse"]) == 2


def test_install_is_idempotent_and_backs_up_once(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    original = write(settings(home), USER_SETTINGS)
    assert main(["install"]) == 0
    (bak,) = backups(settings(home))
    assert bak.read_text() == original
    first = settings(home).read_bytes()
    capsys.readouterr()
    assert main(["install"]) == 0
    assert "already installed" in capsys.readouterr().out
    assert settings(home).read_bytes() == first
    assert len(backups(settings(home))) == 1


def test_stale_install_is_replaced_not_duplicated(home: Path) -> None:
    stale = json.loads(json.dumps(USER_SETTINGS))
    stale["hooks"]["PostToolUse"].insert(0, {"hooks": [{"type": "command", "command": "/old/venv/bin/python",
                                                        "args": ["-I", "-S", "/old/ctxlifed_hook.py"], "timeout": 9}]})
    stale["hooks"]["PermissionRequest"] = [{"hooks": [{"type": "command", "command": "/old/python /old/ctxlifed_hook.py"}]}]
    write(settings(home), stale)
    assert main(["install"]) == 0
    data = json.loads(settings(home).read_text())
    (h,) = ours(data)["PostToolUse"]
    assert h["command"] == os.path.abspath(sys.executable)
    assert data["hooks"]["PostToolUse"][0]["hooks"][0] is not None and is_current(data["hooks"]["PostToolUse"][0])
    assert "PermissionRequest" not in data["hooks"]  # an event we do not install any more: our entry removed


def is_current(group: dict[str, Any]) -> bool:
    return group["hooks"][0].get("args", [None, None, None])[2] == I.shim_path()


def test_uninstall_removes_exactly_what_install_added(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(settings(home), USER_SETTINGS)
    assert main(["install", "--statusline"]) == 0
    assert main(["uninstall"]) == 0
    assert json.loads(settings(home).read_text()) == USER_SETTINGS
    capsys.readouterr()
    assert main(["uninstall"]) == 0
    assert "not installed" in capsys.readouterr().out


def test_uninstall_of_a_file_install_created_leaves_no_hooks_key(home: Path) -> None:
    write(settings(home), {"model": "opus"})
    assert main(["install"]) == 0
    assert main(["uninstall"]) == 0
    assert json.loads(settings(home).read_text()) == {"model": "opus"}


@pytest.mark.parametrize("text,why", [
    ('{"hooks": {', "cannot parse"),
    ("[1, 2]", "not a JSON object"),
    ('{"hooks": []}', '"hooks" is not an object'),
    ('{"hooks": {"Stop": {"command": "x"}}}', "hooks.Stop is not a list"),
    ('{"hooks": {"Stop": ["x"]}}', "hooks.Stop[0]"),
    ('{"a": 1, // comment\n}', "cannot parse"),
])
def test_refuses_a_file_it_cannot_parse(home: Path, capsys: pytest.CaptureFixture[str], text: str, why: str) -> None:
    write(settings(home), text)
    before = sorted(p.name for p in settings(home).parent.iterdir())
    for cmd in (["install"], ["uninstall"], ["install", "--dry-run"]):
        assert main(cmd) == 1
        err = capsys.readouterr().err
        assert why in err and str(settings(home)) in err
        assert "nothing was written" in err or "fix it by hand" in err
    assert settings(home).read_text() == text
    assert sorted(p.name for p in settings(home).parent.iterdir()) == before


def test_dry_run_prints_the_diff_and_writes_nothing(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    original = write(settings(home), USER_SETTINGS)
    assert main(["install", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"--- {settings(home)}")
    assert re.search(r'^\+ +"args": \[', out, re.M) and I.shim_path() in out
    assert settings(home).read_text() == original and not backups(settings(home))
    assert main(["install"]) == 0
    capsys.readouterr()
    assert main(["uninstall", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^- .*ctxlifed_hook\.py", out, re.M)
    assert ours(json.loads(settings(home).read_text()))


def test_dry_run_on_absent_file_writes_nothing(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["install", "--dry-run"]) == 0
    assert capsys.readouterr().out.startswith("--- /dev/null")
    assert not settings(home).parent.exists()


def test_scopes_and_claude_config_dir(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    assert main(["install", "--scope", "project", "--project-dir", str(proj)]) == 0
    assert ours(json.loads((proj / ".claude" / "settings.json").read_text()))
    monkeypatch.chdir(proj)
    assert main(["install", "--scope", "local"]) == 0
    assert ours(json.loads((proj / ".claude" / "settings.local.json").read_text()))
    assert not settings(home).exists()
    cfg = tmp_path / "cfgdir"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(cfg))
    assert main(["install"]) == 0
    assert ours(json.loads((cfg / "settings.json").read_text()))
    assert main(["uninstall", "--scope", "local"]) == 0
    assert not ours(json.loads((proj / ".claude" / "settings.local.json").read_text()))


def test_keeps_file_mode(home: Path) -> None:
    write(settings(home), USER_SETTINGS)
    os.chmod(settings(home), 0o600)
    assert main(["install"]) == 0
    assert settings(home).stat().st_mode & 0o777 == 0o600


def test_refuses_when_the_file_changes_underneath(home: Path) -> None:
    text = write(settings(home), USER_SETTINGS)
    settings(home).write_text(text + " ")
    with pytest.raises(I.SettingsError, match="changed while"):
        I.write_settings(str(settings(home)), text, "{}\n")
    assert settings(home).read_text() == text + " "


# -- status line -----------------------------------------------------------------------------------
def test_statusline_added_when_absent(home: Path) -> None:
    assert main(["install", "--statusline"]) == 0
    sl = json.loads(settings(home).read_text())["statusLine"]
    assert sl["type"] == "command" and I.statusline_is_ours(sl)
    assert sl["command"].startswith(os.path.abspath(sys.executable))
    assert sl["command"].endswith("-m ctxlifed.cli.statusline")


def test_statusline_keeps_the_users_unless_asked(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mine = {"type": "command", "command": "~/bin/my-status", "padding": 1}
    write(settings(home), {"statusLine": mine})
    assert main(["install", "--statusline"]) == 0
    assert "kept your existing status line" in capsys.readouterr().out
    assert json.loads(settings(home).read_text())["statusLine"] == mine
    assert main(["install", "--replace-statusline"]) == 0
    assert I.statusline_is_ours(json.loads(settings(home).read_text())["statusLine"])
    assert main(["uninstall"]) == 0
    assert json.loads(settings(home).read_text()) == {"statusLine": mine}


# -- plugin, command, skill ------------------------------------------------------------------------
def test_plugin_manifest_and_hooks_match_the_install_table() -> None:
    manifest = json.loads((PLUGIN / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] == "ctxlifed"
    from ctxlifed import __version__

    assert manifest["version"] == __version__
    hooks = json.loads((PLUGIN / "hooks" / "hooks.json").read_text())["hooks"]
    shim = "${CLAUDE_PLUGIN_ROOT}/hooks/ctxlifed_hook.py"
    assert hooks == {s.event: [I.hook_group(s, "python3", shim)] for s in I.HOOKS}
    mk = json.loads((PLUGIN / ".claude-plugin" / "marketplace.json").read_text())
    assert mk["plugins"][0]["name"] == "ctxlifed" and mk["plugins"][0]["source"] == "./"


def test_plugin_carries_the_current_shim(tmp_path: Path) -> None:
    """One shim source: the template holds no copy; the rendered plugin holds a real file (Claude Code
    copies a plugin without following symlinks) identical to ``_shim/``."""
    from ctxlifed.cli import plugin as PL

    assert not (PLUGIN / "hooks" / "ctxlifed_hook.py").exists()
    dest = tmp_path / "rendered"
    PL.render_plugin(str(dest), python=sys.executable, ctl="/abs/ctxlifectl")
    for name in ("ctxlifed_hook.py", "ctxlifed_shim.py"):  # the script and the module it loads
        assert not (PLUGIN / "hooks" / name).exists()
        copy = dest / "hooks" / name
        assert not copy.is_symlink()
        assert copy.read_bytes() == (ROOT / "src" / "ctxlifed" / "_shim" / name).read_bytes()
    hooks = json.loads((dest / "hooks" / "hooks.json").read_text())["hooks"]
    assert {h["args"][-1] for groups in hooks.values() for g in groups for h in g["hooks"]} == {
        "${CLAUDE_PLUGIN_ROOT}/hooks/ctxlifed_hook.py"}


def test_the_rendered_plugin_runs_its_own_shim(short_tmp: Path) -> None:
    """The plugin's script loads the shim proper from its own folder: run there, it keeps the event."""
    from ctxlifed.cli import plugin as PL
    from ctxlifed.testing import daemon_env

    dest = short_tmp / "rendered"
    PL.render_plugin(str(dest), python=sys.executable, ctl="/abs/ctxlifectl")
    env = daemon_env(short_tmp, CTXLIFED_HOOK_DEADLINE="0.5", CTXLIFED_DAEMON_CMD="/bin/true")
    payload = {"session_id": "plugin-copy", "cwd": "/tmp", "hook_event_name": "UserPromptSubmit", "prompt": "hi"}
    r = subprocess.run([sys.executable, "-I", "-S", str(dest / "hooks" / "ctxlifed_hook.py")],
                       input=json.dumps(payload).encode(), env=env, capture_output=True, timeout=30, check=False)
    assert (r.returncode, r.stdout, r.stderr) == (0, b"", b"")
    spooled = (Path(env["CTXLIFED_DATA_DIR"]) / "spool.jsonl").read_bytes().splitlines()
    assert [json.loads(x)["payload"] for x in spooled] == [payload]


def test_clients_claude_code_is_the_packaged_plugin() -> None:
    link = ROOT / "clients" / "claude-code"
    assert link.is_symlink() and link.resolve() == PLUGIN.resolve()


def _frontmatter(text: str) -> tuple[dict[str, str], str]:
    m = re.match(r"^---\n(.*?)\n---\n(.*)$", text, re.S)
    assert m, "missing frontmatter"
    fm = {}
    for line in m.group(1).splitlines():
        k, _, v = line.partition(":")
        fm[k.strip()] = v.strip()
    return fm, m.group(2)


def test_skill_is_short_standing_instructions() -> None:
    fm, body = _frontmatter((PLUGIN / "skills" / "context-recall" / "SKILL.md").read_text())
    assert fm["name"] == "context-recall"
    assert "ctxlifectl recall" in fm["allowed-tools"]
    assert len(fm["description"]) < 1536
    # Well under 500 tokens (about 4 characters a token), most important first.
    assert len(body) / 4 < 400, len(body)
    first = body.strip().splitlines()[2]
    assert first.startswith("1.") and "ctxlifectl recall" in first
    assert "--id" in body


def test_recall_command() -> None:
    fm, body = _frontmatter((PLUGIN / "commands" / "recall.md").read_text())
    assert fm["description"] and fm["disable-model-invocation"] == "true"
    assert "!`ctxlifectl recall $ARGUMENTS" in body


# -- the package carries shim and plugin ------------------------------------------------------------
def test_cli_never_imports_the_server_side() -> None:
    code = ("import sys, ctxlifed.cli.main as m; m.build_parser();"
            "import ctxlifed.cli.install, ctxlifed.cli.doctor, ctxlifed.cli.service, ctxlifed.cli.statusline;"
            "bad = [n for n in sys.modules if n.split('.')[:2] in (['ctxlifed','server'], ['ctxlifed','service'],"
            " ['ctxlifed','store']) or n in ('msgspec', 'anyio', 'structlog')];"
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stdout + r.stderr


def test_wheel_carries_shim_and_plugin(tmp_path: Path) -> None:
    base = [sys.executable, "-m", "pip", "wheel", str(ROOT), "-w", str(tmp_path), "--no-deps", "-q",
            "--disable-pip-version-check"]
    # Offline first (needs setuptools with bdist_wheel in this venv), else pip's isolated build.
    for extra in (["--no-build-isolation"], []):
        r = subprocess.run(base + extra, capture_output=True, text=True, check=False, timeout=300)
        if r.returncode == 0:
            break
    else:
        pytest.skip(f"cannot build a wheel here: {r.stderr[-500:]}")
    (whl,) = tmp_path.glob("ctxlifed-*.whl")
    with zipfile.ZipFile(whl) as z:
        names = set(z.namelist())
        for n in ("ctxlifed/_shim/ctxlifed_hook.py", "ctxlifed/_plugin/.claude-plugin/plugin.json",
                  "ctxlifed/_plugin/.claude-plugin/marketplace.json", "ctxlifed/_plugin/hooks/hooks.json",
                  "ctxlifed/_plugin/commands/recall.md",
                  "ctxlifed/_plugin/skills/context-recall/SKILL.md"):
            assert n in names, n
        site = tmp_path / "site"
        z.extractall(site)
    # An installed wheel (pipx install dist/ctxlifed-*.whl) installs hooks that point into itself.
    home = tmp_path / "h"
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "CTXLIFED_DATA_DIR": str(tmp_path / "d"),
           "PYTHONPATH": str(site) + os.pathsep + os.pathsep.join(p for p in sys.path if "site-packages" in p)}
    r = subprocess.run([sys.executable, "-c", "import sys; from ctxlifed.cli.main import main; sys.exit(main(['install']))"],
                       env=env, capture_output=True, text=True, check=False, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    data = json.loads((home / ".claude" / "settings.json").read_text())
    shim = data["hooks"]["Stop"][0]["hooks"][0]["args"][2]
    assert shim == str(site / "ctxlifed" / "_shim" / "ctxlifed_hook.py") and Path(shim).is_file()


# -- every command the plugin names runs: `ctxlifectl plugin` ---------------------------------------
def test_rendered_plugin_names_only_absolute_commands_that_run(home: Path, tmp_path: Path) -> None:
    from ctxlifed.cli import plugin as PL
    from ctxlifed.runtime.ctl import ctl_command

    dest = tmp_path / "rendered"
    assert main(["plugin", "--dir", str(dest)]) == 0
    assert PL.bare_commands(str(PL.template_dir()))  # the template names bare commands ...
    assert PL.bare_commands(str(dest)) == []  # ... the rendered plugin none
    ctl = ctl_command()
    fm, body = _frontmatter((dest / "commands" / "recall.md").read_text())
    assert f"!`{ctl} recall $ARGUMENTS" in body
    assert fm["allowed-tools"] == f"Bash({ctl} recall:*)"
    skill = (dest / "skills" / "context-recall" / "SKILL.md").read_text()
    assert f"`{ctl} recall --id <number>`" in skill and " ctxlifectl " not in skill.replace(ctl, "")
    hooks = json.loads((dest / "hooks" / "hooks.json").read_text())["hooks"]
    for groups in hooks.values():
        (h,) = groups[0]["hooks"]
        assert h["command"] == I.interpreter() and h["args"][-1] == "${CLAUDE_PLUGIN_ROOT}/hooks/ctxlifed_hook.py"
    # The command it names runs with no PATH at all, as Claude Code's `!` line would run it.
    r = subprocess.run(f"{ctl} --version", shell=True, env={"PATH": ""}, capture_output=True, text=True, check=False)
    assert r.returncode == 0 and r.stdout.startswith("ctxlifectl "), r.stderr
    # Rendering again replaces the folder as a whole.
    (dest / "stray.txt").write_text("x")
    assert main(["plugin", "--dir", str(dest)]) == 0
    assert not (dest / "stray.txt").exists()


def test_install_refuses_when_the_plugin_is_enabled(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    user = {"enabledPlugins": {"ctxlifed@ctxlifed-local": True}}
    write(settings(home), user)
    assert main(["install"]) == 1
    err = capsys.readouterr().err
    assert "plugin is enabled" in err and "Nothing was written" in err
    assert json.loads(settings(home).read_text()) == user
    assert main(["install", "--with-plugin"]) == 0
    assert ours(json.loads(settings(home).read_text()))


def test_reinstall_moves_our_status_line_to_the_new_interpreter(home: Path) -> None:
    old = I.statusline_entry("/old/venv/bin/python")
    write(settings(home), {"statusLine": old})
    assert main(["install"]) == 0  # no --statusline: ours still follows this installation
    assert json.loads(settings(home).read_text())["statusLine"] == I.statusline_entry(I.interpreter())
