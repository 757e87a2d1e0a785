"""End-to-end: the real Claude Code CLI (headless) + ctxlifed's hooks + a real daemon + tests/fakeapi.py.

Each scenario asserts on what the fake Messages API received and on ctxlifed's store.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from .ccenv import ClaudeEnv, no_hook_errors

pytestmark = pytest.mark.e2e

BASH_MARK = "e2e-bash-output-7f3a9c"

TOOLS_SCRIPT: dict[str, Any] = {
    "turns": [
        {"text": "Running the parser check.",
         "tool_use": {"name": "Bash", "input": {"command": f"echo {BASH_MARK} && echo parser-check-ok",
                                                "description": "Check the parser"}}},
        {"tool_use": {"name": "Write", "input": {"file_path": "{{PROJECT}}/parser.py",
                                                 "content": "def parse(line):\n    return line.split(',')\n"}}},
        {"tool_use": {"name": "Read", "input": {"file_path": "{{PROJECT}}/parser.py"}}},
        {"tool_use": {"name": "Edit", "input": {"file_path": "{{PROJECT}}/parser.py",
                                                "old_string": "line.split(',')",
                                                "new_string": "[f.strip() for f in line.split(',')]"}}},
        {"text": "Done: the parser splits and strips fields."},
    ],
    "default_text": "Nothing more to do.",
}

BASH_SCRIPT: dict[str, Any] = {
    "turns": [
        {"tool_use": {"name": "Bash", "input": {"command": "echo step-two-output", "description": "Step two"}}},
        {"text": "Step two done."},
    ],
    "default_text": "OK.",
}


def fired(run: Any, session: str | None = None) -> Counter[str]:
    """Hook events Claude Code ran during this run (logged by a hook next to ctxlifed's)."""
    return Counter(e for e, s in run.fired if session is None or s == session)


def stored(cc: ClaudeEnv, *sessions: str) -> Counter[str]:
    c: Counter[str] = Counter()
    for s in sessions:
        c.update(e for e, _src in cc.stored_events(s))
    return c


def ok(run: Any) -> None:
    assert run.rc == 0, f"claude exited {run.rc}\n{run.stderr[-3000:]}"
    assert run.result.get("subtype") == "success" and not run.result.get("is_error"), run.result


# -- 1 ------------------------------------------------------------------------------------------------
def test_tool_session_is_archived_and_recallable(cc: ClaudeEnv) -> None:
    (cc.project / "CLAUDE.md").write_text("# Project\nA CSV parser.\n")
    run = cc.run("Write the parser and check it", TOOLS_SCRIPT)
    ok(run)
    no_hook_errors(run)
    assert run.api.turns_used == len(TOOLS_SCRIPT["turns"])
    sid = run.session_id
    got = fired(run)
    for ev in ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop", "SessionEnd", "InstructionsLoaded"):
        assert got[ev] >= 1, (ev, got)
    assert got["PostToolUse"] == 4
    # Every event Claude Code fired is in the store, exactly once.
    assert stored(cc, sid) == got
    with cc.db() as c:
        tools = {t for (t,) in c.execute("SELECT tool FROM events WHERE session = ? AND event = 'PostToolUse'", (sid,))}
    assert tools == {"Bash", "Write", "Read", "Edit"}
    # The model saw the Bash output, and recall finds it in the archive.
    assert any(BASH_MARK in r.text() for r in run.api.of_kind("main"))
    rec = json.loads(cc.ctl("recall", BASH_MARK, "--json").stdout)
    assert rec["total"] >= 1 and any(h.get("tool") == "Bash" for h in rec["hits"]), rec
    assert BASH_MARK in cc.ctl("recall", BASH_MARK).stdout
    st = cc.status(sid)
    assert st["events"] == sum(got.values())


# -- 2 ------------------------------------------------------------------------------------------------
def test_session_start_context_reaches_the_next_request(cc: ClaudeEnv) -> None:
    # ctxlifed says nothing at startup in a project without memory; a decision gives it some.
    first = cc.run("Write the parser and check it. Decision: we will use the csv module for parsing.", TOOLS_SCRIPT)
    ok(first)
    run = cc.run("What is the state of the parser?", {"turns": [{"text": "It is done."}]})
    ok(run)
    no_hook_errors(run)
    assert run.session_id != first.session_id
    ctx = run.hook_context("SessionStart:startup")
    assert ctx.strip(), "ctxlifed gave no SessionStart context for a project with a recorded decision"
    assert "decision" in ctx.lower() and "ctxlifectl recall" in ctx
    (req, *_rest) = run.api.of_kind("main")
    assert "SessionStart hook additional context:" in req.text()
    assert ctx.strip() in req.text()


def test_the_model_runs_the_recall_command_the_briefing_names(cc: ClaudeEnv) -> None:
    """The briefing names ctxlifectl by an absolute path; the scripted model runs that very command through
    Bash, with Claude Code's PATH (which holds no ctxlifectl), and it answers with the decision."""
    from ctxlifed.runtime.ctl import ctl_command

    first = cc.run("Write the parser and check it. Decision: we will use the csv module for parsing.", TOOLS_SCRIPT)
    ok(first)
    named = f"{ctl_command()} recall "  # the briefing: "<ctl> recall <words> | phase:<p> | … | decisions"
    cmd = named + "csv module"
    script = {"turns": [{"tool_use": {"name": "Bash", "input": {"command": cmd, "description": "Recall decisions"}}},
                        {"text": "The parser uses the csv module."}], "default_text": "OK."}
    run = cc.run("What did we decide about parsing?", script)
    ok(run)
    no_hook_errors(run)
    ctx = run.hook_context("SessionStart:startup")
    assert named + "<words>" in ctx, ctx  # the briefing names the command the model runs, by its absolute path
    later = run.api.of_kind("main")[1].text()  # the request carrying the Bash tool_result
    assert "command not found" not in later and "Exit code 127" not in later
    assert "csv module" in later.split(cmd, 1)[-1]


# -- 3 ------------------------------------------------------------------------------------------------
def test_compact_archives_first_and_reinjects_what_was_archived(cc: ClaudeEnv) -> None:
    a = cc.run("Write the parser and check it", TOOLS_SCRIPT)
    ok(a)
    sid = a.session_id
    b = cc.run("/compact keep the parser work", {}, resume=sid)
    ok(b)
    no_hook_errors(b)
    assert b.session_id == sid
    (compact_req,) = b.api.of_kind("compact")
    assert "keep the parser work" in compact_req.last_user_text()
    events = cc.stored_events(sid)
    names = [e for e, _ in events]
    assert "PreCompact" in names and "PostCompact" in names
    assert names.index("PreCompact") < names.index("PostCompact")
    ctx = b.hook_context("SessionStart:compact")
    assert ctx.strip(), "no SessionStart(compact) context from ctxlifed"
    ids = [int(x) for x in re.findall(r"#(\d+)", ctx)]
    assert ids, f"the compact context names no archived item:\n{ctx}"
    with cc.db() as conn:
        known = {i for (i,) in conn.execute("SELECT id FROM archive WHERE session = ?", (sid,))}
    assert set(ids) <= known, (ids, known)
    # The first request after the compaction carries it.
    c = cc.run("Continue with the parser", {"turns": [{"text": "Continuing."}]}, resume=sid)
    ok(c)
    no_hook_errors(c)
    (first_after,) = c.api.of_kind("main")[:1]
    assert "This session is being continued" in first_after.text()
    assert ctx.strip() in first_after.text()


# -- 4 ------------------------------------------------------------------------------------------------
def _clear(cc: ClaudeEnv) -> tuple[str, str]:
    a = cc.run("Write the parser and check it", TOOLS_SCRIPT)
    ok(a)
    old = a.session_id
    b = cc.run("/clear", {}, resume=old)
    assert b.rc == 0, b.stderr[-2000:]
    no_hook_errors(b)
    assert b.reset_session_id(), "no conversation_reset in the stream"
    # The new session is the one SessionStart(clear) fired for (the stream's new_conversation_id is not it).
    (new,) = {s for e, s in b.fired if e == "SessionStart" and s != old}
    assert ("SessionEnd", old) in b.fired
    return old, new


def test_clear_starts_a_new_session_and_closes_the_old(cc: ClaudeEnv) -> None:
    old, new = _clear(cc)
    assert cc.status(old)["ended"] is True
    with cc.db() as c:
        ends = [json.loads(p)["reason"] for (p,) in c.execute(
            "SELECT payload FROM events WHERE session = ? AND event = 'SessionEnd' ORDER BY id", (old,))]
        starts = [json.loads(p)["source"] for (p,) in c.execute(
            "SELECT payload FROM events WHERE session = ? AND event = 'SessionStart'", (new,))]
    assert ends[-1] == "clear" and starts == ["clear"]
    # In -p mode the process ends right after /clear, so the new session ends too (reason "other").
    assert cc.status(new)["events"] >= 1


def test_clear_writes_the_old_sessions_ledger(cc: ClaudeEnv) -> None:
    old, _new = _clear(cc)
    ledger_dir = cc.project / "docs" / "memory" / "sessions" / old
    files = cc.wait_for(f"a ledger in {ledger_dir}", lambda: sorted(ledger_dir.glob("*.md")) if ledger_dir.is_dir() else [],
                        timeout=5)
    assert any("parser" in f.read_text() for f in files)


# -- 5 ------------------------------------------------------------------------------------------------
def _spool(cc: ClaudeEnv) -> list[dict[str, Any]]:
    p = cc.daemon.data_dir / "spool.jsonl"
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()] if p.exists() else []


def test_daemon_stopped_session_completes_and_events_are_spooled_then_ingested(cc: ClaudeEnv) -> None:
    a = cc.run("Write the parser and check it", TOOLS_SCRIPT)
    ok(a)
    sid = a.session_id
    before = stored(cc, sid)
    assert cc.daemon.stop() == 0
    b = cc.run("Run step two", BASH_SCRIPT, resume=sid)
    ok(b)
    no_hook_errors(b)
    assert b.session_id == sid
    assert any("step-two-output" in r.text() for r in b.api.of_kind("main"))
    spooled = Counter(x["payload"]["hook_event_name"] for x in _spool(cc))
    assert spooled == fired(b)
    cc.daemon.start()  # ingests the spool before READY=1
    assert stored(cc, sid) == before + fired(b)
    with cc.db() as c:
        n = c.execute("SELECT count(*) FROM events WHERE session = ? AND source = 'spool'", (sid,)).fetchone()[0]
    assert n == sum(fired(b).values())


def _sigstopped(cc: ClaudeEnv) -> tuple[str, Counter[str]]:
    """A session continued while the daemon is SIGSTOPped; returns (session, expected stored events)."""
    a = cc.run("Write the parser and check it", TOOLS_SCRIPT)
    ok(a)
    sid = a.session_id
    before = stored(cc, sid)
    assert cc.daemon.proc is not None
    os.kill(cc.daemon.proc.pid, signal.SIGSTOP)
    try:
        # A shorter shim deadline keeps the test fast; the behaviour is the same at the default 1.5 s.
        b = cc.run("Run step two", BASH_SCRIPT, resume=sid, env={"CTXLIFED_HOOK_DEADLINE": "0.4"})
        spooled = Counter(x["payload"]["hook_event_name"] for x in _spool(cc))  # before the daemon wakes up
    finally:
        os.kill(cc.daemon.proc.pid, signal.SIGCONT)
    ok(b)
    no_hook_errors(b)
    assert b.session_id == sid
    assert any("step-two-output" in r.text() for r in b.api.of_kind("main"))
    assert spooled == fired(b)
    expected = before + fired(b)
    cc.wait_for("the spooled events to be ingested", lambda: stored(cc, sid) >= expected)
    return sid, expected


def test_daemon_sigstopped_session_completes_and_events_are_ingested(cc: ClaudeEnv) -> None:
    sid, expected = _sigstopped(cc)
    assert stored(cc, sid) >= expected


def test_daemon_sigstopped_events_are_stored_exactly_once(cc: ClaudeEnv) -> None:
    sid, expected = _sigstopped(cc)
    assert stored(cc, sid) == expected, cc.stored_events(sid)


# -- 6 ------------------------------------------------------------------------------------------------
def test_installed_with_ctxlifectl_into_a_temporary_home_like_a_user(cc_bare: ClaudeEnv) -> None:
    cc = cc_bare
    log = cc.base / "user-hook.log"
    settings = cc.home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    user = {
        "includeCoAuthoredBy": False,
        "env": {"MY_SETTING": "kept"},
        "hooks": {"PostToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": f"echo ran >> {log}"}]}]},
        "statusLine": {"type": "command", "command": "echo my-status"},
    }
    settings.write_text(json.dumps(user, indent=4))
    exe = Path(sys.executable).with_name("ctxlifectl")
    argv = [str(exe)] if exe.exists() else None
    r = cc.ctl("install", "--statusline", exe=argv)
    assert "kept your existing status line" in r.stdout and "backup" in r.stdout
    again = cc.ctl("install", "--statusline", exe=argv)
    assert "already installed" in again.stdout
    cc.daemon.start()
    run = cc.run("Run step two", BASH_SCRIPT)
    ok(run)
    no_hook_errors(run)
    assert log.read_text().strip() == "ran"  # the user's own hook still runs
    assert stored(cc, run.session_id) == fired(run) - Counter({"PostToolUse": 0})
    doc = cc.ctl("doctor", check=False)
    assert "FAIL  hooks" not in doc.stdout and "FAIL  daemon" not in doc.stdout, doc.stdout
    cc.ctl("uninstall", exe=argv)
    assert json.loads(settings.read_text()) == user


# -- plugin -----------------------------------------------------------------------------------------
def test_plugin_dir_hooks_and_recall_command(cc_bare: ClaudeEnv) -> None:
    """The plugin as `ctxlifectl plugin` writes it works with a PATH that holds no ctxlifectl."""
    cc = cc_bare
    cc.daemon.start()
    plugin = str(cc.base / "plugin")
    cc.ctl("plugin", "--dir", plugin)
    bare = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
    assert shutil.which("ctxlifectl", path=bare["PATH"]) is None
    a = cc.run("Write the parser and check it", TOOLS_SCRIPT, args=("--plugin-dir", plugin), env=bare)
    ok(a)
    no_hook_errors(a)
    assert stored(cc, a.session_id) == fired(a)
    # /ctxlifed:recall runs `<abs>/ctxlifectl recall` before the prompt reaches the model.
    b = cc.run(f"/ctxlifed:recall {BASH_MARK}", {"turns": [{"text": "Found it."}]}, args=("--plugin-dir", plugin),
               env=bare)
    ok(b)
    (req,) = b.api.of_kind("main")[:1]
    assert "ctxlifed archive results" in req.text()
    assert BASH_MARK in req.text()
    assert "command not found" not in req.text()


def test_recall_id_prints_an_archived_item(cc: ClaudeEnv) -> None:
    run = cc.run("Write the parser and check it", TOOLS_SCRIPT)
    ok(run)
    rec = json.loads(cc.ctl("recall", BASH_MARK, "--json").stdout)
    hit = next(h for h in rec["hits"] if h.get("tool") == "Bash")
    full = json.loads(cc.ctl("recall", "--id", str(hit["id"]), "--json").stdout)
    assert BASH_MARK in (full.get("text") or "")
