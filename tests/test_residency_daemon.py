"""Residency hygiene in a running daemon: the once-per-session note, the changed-instructions warning,
the ``status`` block and the compact-instructions section (real daemon, real socket, fixture HOME)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SID = "7d0c6a52-2f57-4f8e-9a57-3f3b7d1f0c11"


def _w(p: Path, text: str) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p


class Sess:
    def __init__(self, daemon: Any) -> None:
        self.d = daemon
        self.home = Path(daemon.env["HOME"])
        self.project = daemon.base / "proj"
        (self.project / ".git").mkdir(parents=True, exist_ok=True)
        tdir = daemon.base / "projects" / "-proj"
        tdir.mkdir(parents=True, exist_ok=True)
        self.transcript = tdir / f"{SID}.jsonl"
        self.transcript.touch()
        self.n = 0

    def hook(self, event: str, **kw: Any) -> dict[str, Any]:
        r = self.d.call("hook", {"session_id": SID, "transcript_path": str(self.transcript),
                                 "cwd": str(self.project), "hook_event_name": event, **kw})
        return json.loads(r["stdout"]) if r["stdout"] else {}

    def stop(self) -> dict[str, Any]:
        self.d.call("status", {"session": SID})  # reads wait for the backlog
        return self.hook("Stop", stop_hook_active=False)


def _tree(s: Sess) -> None:
    _w(s.home / ".claude" / "skills" / "deploy-prod" / "SKILL.md",
       "---\nname: deploy-prod\ndescription: Deploy the current branch to production\n---\nRun the deploy.\n")
    _w(s.project / "CLAUDE.md", "# Proj\n\nUse cents for money.\n")
    _w(s.project / ".claude" / "rules" / "api.md", "---\npaths: src/api/**\n---\nproblem+json\n")


def test_note_once_per_session_at_the_first_session_start(daemon: Any) -> None:
    s = Sess(daemon)
    _tree(s)
    first = s.hook("SessionStart", source="startup")
    msg = first.get("systemMessage", "")
    assert "1 residency issue" in msg and "skill deploy-prod (user)" in msg
    assert "disable-model-invocation: true" in msg and msg.rstrip().endswith("doctor --context")
    assert "residency" not in json.dumps(first.get("hookSpecificOutput", {}))  # for the user, not the model
    assert "residency" not in s.hook("SessionStart", source="resume").get("systemMessage", "")
    assert "residency" not in s.stop().get("systemMessage", "")


def test_no_note_when_nothing_needs_a_fix(daemon: Any) -> None:
    s = Sess(daemon)
    _w(s.project / "CLAUDE.md", "# Proj\n")
    assert "systemMessage" not in s.hook("SessionStart", source="startup")


def test_claude_md_changed_mid_session_is_named_once_per_change(daemon: Any) -> None:
    s = Sess(daemon)
    _tree(s)
    md = s.project / "CLAUDE.md"
    s.hook("SessionStart", source="startup")
    s.hook("InstructionsLoaded", file_path=str(md), memory_type="Project", load_reason="session_start")
    assert "changed after this session loaded it" not in s.stop().get("systemMessage", "")
    later = os.stat(md).st_mtime + 3600  # edited after the load (a clock-independent mtime)
    os.utime(md, (later, later))
    msg = s.stop().get("systemMessage", "")
    assert "changed after this session loaded it" in msg and str(md) in msg and "/clear or /compact" in msg
    assert "changed after" not in s.stop().get("systemMessage", "")  # once per change
    os.utime(md, (later + 60, later + 60))
    assert str(md) in s.stop().get("systemMessage", "")  # a new change is named again


def test_status_residency_block_and_compact_instructions(daemon: Any) -> None:
    s = Sess(daemon)
    _tree(s)
    s.hook("SessionStart", source="startup")
    s.hook("UserPromptSubmit", prompt="We decided to use PostgreSQL advisory locks for the cart. Let's implement it")
    s.hook("PostToolUseFailure", tool_name="Bash", tool_input={"command": "pytest -q tests/test_cart.py"},
           error="Exit code 1\nFAILED tests/test_cart.py::test_total - AssertionError\n1 failed", tool_use_id="toolu_1")
    r = s.d.call("status", {"session": SID, "residency": True, "compact_instructions": True})
    v = r["sessions"][0]
    res = v["residency"]
    assert res["estimated"] is True and res["warnings"] == 1
    codes = {f["code"] for f in res["findings"]}
    assert {"skill_side_effects", "path_rule_dropped", "reattached"} <= codes
    assert res["lines"][0].startswith("resident every turn (estimated)")
    sec = v["compact_instructions"]
    assert sec.startswith("# Compact instructions\n")
    assert "PostgreSQL advisory locks" in sec and "`pytest -q tests/test_cart.py`" in sec
    # without the flags: neither is computed
    plain = s.d.call("status", {"session": SID})["sessions"][0]
    assert plain["residency"] is None and plain["compact_instructions"] is None


def test_cli_compact_instructions_prints_and_writes_only_when_asked(daemon: Any) -> None:
    s = Sess(daemon)
    _tree(s)
    s.hook("SessionStart", source="startup")
    s.hook("UserPromptSubmit", prompt="We decided to keep the v1 API.")
    s.d.call("status", {"session": SID})
    md = s.project / "CLAUDE.md"
    before = md.read_text()

    def ctl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "ctxlifed.cli.main", "compact-instructions", *args],
                              cwd=s.project, env=daemon.env, capture_output=True, text=True, timeout=60)

    r = ctl()
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("# Compact instructions\n") and "keep the v1 API" in r.stdout
    assert md.read_text() == before  # printed, not written
    w = ctl("--write")
    assert w.returncode == 0, w.stderr
    text = md.read_text()
    assert text.startswith(before.rstrip("\n")) and text.count("# Compact instructions") == 1
    assert "keep the v1 API" in text and "/clear or /compact" in w.stdout
    assert ctl("--write").returncode == 0 and md.read_text() == text  # idempotent


def test_cli_status_shows_the_residency_block(daemon: Any) -> None:
    s = Sess(daemon)
    _tree(s)
    s.hook("SessionStart", source="startup")
    r = subprocess.run([sys.executable, "-m", "ctxlifed.cli.main", "status"], cwd=s.project, env=daemon.env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "residency  resident every turn (estimated)" in r.stdout
    assert "skill deploy-prod (user)" in r.stdout and "doctor --context" in r.stdout


def test_reloaded_instructions_are_current_again(daemon: Any) -> None:
    """After /compact Claude Code re-reads CLAUDE.md (InstructionsLoaded load_reason compact): an edit
    before that reload is in the session now, so only the file not reloaded is named."""
    s = Sess(daemon)
    _tree(s)
    md = s.project / "CLAUDE.md"
    rule = _w(s.project / ".claude" / "rules" / "style.md", "Tabs.\n")
    s.hook("SessionStart", source="startup")
    for f in (md, rule):
        s.hook("InstructionsLoaded", file_path=str(f), memory_type="Project", load_reason="session_start")
    edited = time.time()  # after both loads were answered
    for f in (md, rule):
        os.utime(f, (edited, edited))
    s.hook("InstructionsLoaded", file_path=str(md), memory_type="Project", load_reason="compact")
    msg = s.stop().get("systemMessage", "")
    assert str(rule) in msg and str(md) not in msg


def test_note_can_be_turned_off(daemon_factory: Any) -> None:
    d = daemon_factory(CTXLIFED_RESIDENCY_NOTE="0").start()
    s = Sess(d)
    _tree(s)
    assert "systemMessage" not in s.hook("SessionStart", source="startup")
    v = d.call("status", {"session": SID, "residency": True})["sessions"][0]
    assert v["residency"]["warnings"] == 1  # status still shows it
