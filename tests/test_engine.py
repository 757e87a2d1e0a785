"""The context-lifecycle engine through a real daemon: phases, zones, levels, ledgers, injection, recall.

Events are sent with the ``hook`` method exactly as the shim would send them; transcripts are
written by the test with usage figures it controls.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import FIXTURES, load_hooks

SID = "11111111-2222-3333-4444-555555555555"


class Session:
    """A scripted Claude Code session against a daemon: project repo, transcript, hook events."""

    def __init__(self, daemon: Any, sid: str = SID, model: str = "claude-sonnet-4-5") -> None:
        self.d = daemon
        self.sid = sid
        self.model = model
        self.project = daemon.base / "proj"
        (self.project / ".git").mkdir(parents=True, exist_ok=True)
        tdir = daemon.base / "projects" / "-proj"
        tdir.mkdir(parents=True, exist_ok=True)
        self.transcript = tdir / f"{sid}.jsonl"
        self.transcript.touch()
        self.n = 0

    def base(self, event: str, **kw: Any) -> dict[str, Any]:
        return {"session_id": self.sid, "transcript_path": str(self.transcript), "cwd": str(self.project),
                "hook_event_name": event, **kw}

    def hook(self, event: str, **kw: Any) -> dict[str, Any]:
        r = self.d.call("hook", self.base(event, **kw))
        return json.loads(r["stdout"]) if r["stdout"] else {}

    def prompt(self, text: str) -> dict[str, Any]:
        return self.hook("UserPromptSubmit", prompt=text)

    def next_answer(self) -> dict[str, Any]:
        """The next answer the user sees, once what was sent is derived: a hook is answered before it
        is derived (service/derive.py), so advice it causes rides on a later answer (here: Stop,
        where the user can act on it)."""
        self.d.call("status", {"session": self.sid})  # reads wait for the backlog
        return self.hook("Stop", stop_hook_active=False)

    def tool(self, name: str, tool_input: dict[str, Any], response: Any = None) -> dict[str, Any]:
        self.n += 1
        return self.hook("PostToolUse", tool_name=name, tool_input=tool_input, tool_response=response or {},
                         tool_use_id=f"toolu_{self.n:04d}")

    def fail(self, name: str, tool_input: dict[str, Any], error: str) -> dict[str, Any]:
        self.n += 1
        return self.hook("PostToolUseFailure", tool_name=name, tool_input=tool_input, error=error,
                         tool_use_id=f"toolu_{self.n:04d}")

    def usage(self, context: int, output: int = 50, text: str = "ok") -> None:
        """Append one assistant response whose usage makes the window hold ``context`` tokens."""
        self.n += 1
        rec = {"type": "assistant", "uuid": f"a{self.n}", "parentUuid": None, "isSidechain": False,
               "timestamp": "2026-11-29T10:00:00.000Z", "sessionId": self.sid,
               "message": {"id": f"msg_{self.n}", "model": self.model, "role": "assistant",
                           "content": [{"type": "text", "text": text}],
                           "usage": {"input_tokens": 10, "cache_creation_input_tokens": 0,
                                     "cache_read_input_tokens": context - 10, "output_tokens": output}}}
        with open(self.transcript, "a") as f:
            f.write(json.dumps(rec) + "\n")

    def status(self) -> dict[str, Any]:
        return self.d.call("status", {"session": self.sid})["sessions"][0]

    def recall(self, q: str, **kw: Any) -> dict[str, Any]:
        return self.d.call("recall", {"query": q, "cwd": str(self.project), **kw})


def ledgers(project: Path, sid: str) -> list[str]:
    d = project / "docs" / "memory" / "sessions" / sid
    return sorted(p.name for p in d.glob("*.md")) if d.exists() else []


def eventually(cond: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def test_phase_sequence_with_ledgers(daemon: Any) -> None:
    """planning → implementation (handoff) → testing (sustained pytest) → review (handoff); each switch
    writes the ended phase's ledger inside the project, and the timeline shows the causes."""
    s = Session(daemon)
    s.hook("SessionStart", source="startup")
    s.prompt("We need rate limiting for the login API. It must not break existing tokens. TODO: decide the store")
    for f in ("a.py", "b.py"):
        s.tool("Read", {"file_path": str(s.project / f)}, {"file": {"content": "x = 1"}})
    assert s.status()["phase"] == "planning"
    s.prompt("Looks good, let's implement it. We decided to use a token bucket in Redis.")
    assert s.status()["phase"] == "implementation"
    s.tool("Edit", {"file_path": str(s.project / "limiter.py"), "old_string": "a", "new_string": "bucket = Bucket()"})
    s.tool("Read", {"file_path": str(s.project / "c.py")}, {"file": {"content": "y"}})  # a stray read
    assert s.status()["phase"] == "implementation"
    for _ in range(3):
        s.tool("Bash", {"command": "pytest -q tests"}, {"stdout": "3 passed in 0.10s", "stderr": ""})
    assert s.status()["phase"] == "testing"
    s.prompt("review this change please")
    assert s.status()["phase"] == "review"
    # No usage figures, so nothing shows a compaction would pay: the switch advises nothing.
    assert "systemMessage" not in s.next_answer()
    assert "systemMessage" not in s.prompt("ok")
    assert "systemMessage" not in s.next_answer()
    eventually(lambda: len(ledgers(s.project, SID)) >= 3)
    names = ledgers(s.project, SID)
    assert names[:3] == ["phase-1-planning.md", "phase-2-implementation.md", "phase-3-testing.md"]
    impl = (s.project / "docs/memory/sessions" / SID / "phase-2-implementation.md").read_text()
    assert "limiter.py" in impl and "token bucket" in impl.lower()
    eventually(lambda: (s.project / "docs/memory/decisions.md").exists())
    assert "token bucket" in (s.project / "docs/memory/decisions.md").read_text().lower()
    tl = s.recall("timeline")["markdown"]
    assert "implementation" in tl and "testing" in tl and "review" in tl


def test_chinese_handoffs(daemon: Any) -> None:
    """Chinese handoff phrases switch phases: 开始实现 → implementation, 写测试 → testing, 评审 → review."""
    s = Session(daemon, sid="cccccccc-2222-3333-4444-555555555555")
    s.prompt("我们先规划一下鉴权模块")
    s.prompt("好的，开始实现吧")
    assert s.status()["phase"] == "implementation"
    s.prompt("现在写测试")
    assert s.status()["phase"] == "testing"
    s.prompt("请评审这次修改")
    assert s.status()["phase"] == "review"


def test_zones_and_levels_follow_transcript_usage(daemon: Any) -> None:
    """Zone figures come from the transcript's last usage; levels cross at 60/75/90 % of Working, and a
    crossing produces one /compact suggestion for the user (debounced)."""
    s = Session(daemon)
    s.usage(20_000)  # the first request: the fixed System part
    s.hook("SessionStart", source="startup")
    st = s.status()
    assert (st["window"], st["context_tokens"], st["level"]) == (200_000, 20_000, 0)
    assert [z["name"] for z in st["zones"]] == ["System", "Ledger", "Working", "Buffer"]
    assert st["autocompact_at"] == 167_000
    # Working capacity = 65 % of 200k = 130k; System used = 20k.
    s.usage(20_000 + 78_000 + 500)  # Working ≈ 60 %
    s.prompt("continue")
    st = s.status()
    assert st["level"] == 1 and 0.60 <= st["working_pct"] < 0.75
    assert "/compact" in s.next_answer().get("systemMessage", "")
    s.prompt("continue again")
    assert "systemMessage" not in s.next_answer()  # same level: no repeated advice
    s.usage(20_000 + 118_000)  # Working ≈ 90 %
    s.prompt("more")
    assert s.status()["level"] == 3
    assert "/compact" in s.next_answer().get("systemMessage", "")
    assert s.status()["tokens_to_autocompact"] == 167_000 - 138_000


def test_autocompact_fixture_follows_the_boundary(daemon: Any) -> None:
    """On the recorded auto-compaction run, the context size after the boundary is the boundary's
    post-compaction figure or a newer usage, never the stale pre-compaction one."""
    src = FIXTURES / "runs" / "autocompact" / "transcripts"
    dst = daemon.base / "projects"
    import shutil

    shutil.copytree(src, dst, dirs_exist_ok=True)
    hooks = load_hooks("autocompact")
    sid = hooks[0]["payload"]["session_id"]
    tpath = next(dst.rglob(f"{sid}.jsonl"))
    pre = None
    for h in hooks:
        p = dict(h["payload"], transcript_path=str(tpath), cwd=str(daemon.base))
        daemon.call("hook", p)
        if p["hook_event_name"] == "PreCompact":
            pre = daemon.call("status", {"session": sid})["sessions"][0]["context_tokens"]
    st = daemon.call("status", {"session": sid})["sessions"][0]
    recs = [json.loads(x) for x in tpath.read_text().splitlines() if x.strip()]
    boundary = next(r for r in recs if r.get("subtype") == "compact_boundary")
    meta = boundary["compactMetadata"]
    assert st["context_tokens"] != meta["preTokens"]
    assert st["context_tokens"] <= max(meta["postTokens"], pre or 0) or st["context_tokens"] < meta["preTokens"]
    assert st["window"] == 1_000_000


def test_precompact_then_session_start_compact_names_archived_and_pending(daemon: Any) -> None:
    """PreCompact archives the window; SessionStart(compact) answers within the cap with the phase, the
    archived items' L2 ids and the pending items."""
    s = Session(daemon)
    s.usage(30_000)
    s.hook("SessionStart", source="startup")
    s.prompt("Build the CSV importer. TODO: handle quoted newlines. The importer must never drop rows.")
    s.tool("Bash", {"command": "python import.py data.csv"}, {"stdout": "imported 120 rows", "stderr": ""})
    s.fail("Bash", {"command": "python import.py bad.csv"}, "Exit code 1\nValueError: unterminated quote")
    s.hook("PreCompact", trigger="manual", custom_instructions="keep the importer work")
    out = s.hook("SessionStart", source="compact")
    ctx = out["hookSpecificOutput"]["additionalContext"]
    assert out["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert "quoted newlines" in ctx
    assert "L2 #" in ctx
    from ctxlifed.core.model import estimate_tokens

    assert estimate_tokens(ctx) <= 1500 and len(ctx) < 10_000
    import re

    ids = [int(x) for x in re.findall(r"L2 #(\d+)", ctx)]
    assert ids
    for i in ids[:3]:
        assert s.recall("", id=i)["text"]


def test_session_start_for_a_new_project_injects_nothing(daemon: Any) -> None:
    """Token economy: a brand-new project with no memory gets no additionalContext at all."""
    s = Session(daemon, sid="dddddddd-2222-3333-4444-555555555555")
    assert s.hook("SessionStart", source="startup") == {}


def test_clear_gets_project_memory_only(daemon: Any) -> None:
    """After /clear the new session gets project-level memory (decisions, pending), not session detail."""
    s = Session(daemon)
    s.prompt("We decided to use PostgreSQL for storage. TODO: write the migration")
    s.hook("SessionEnd", reason="clear")
    s2 = Session(daemon, sid="eeeeeeee-2222-3333-4444-555555555555")
    ctx = s2.hook("SessionStart", source="clear")["hookSpecificOutput"]["additionalContext"]
    assert "PostgreSQL" in ctx and "migration" in ctx
    assert "Phase" not in ctx.split("\n")[0] or "cleared" in ctx
    eventually(lambda: ledgers(s.project, SID) != [])


def test_every_recall_form(daemon: Any) -> None:
    """words, phrases, phase:, type:, decisions, timeline, id, combined — all answer, bounded."""
    s = Session(daemon)
    s.prompt("We decided to use JWT for auth. The API must return 401 on expiry.")
    s.tool("Bash", {"command": "curl localhost/api"}, {"stdout": "timeout after 30s talking to auth service", "stderr": ""})
    s.fail("Bash", {"command": "curl localhost/login"}, "Exit code 7\nconnection timeout")
    s.prompt("let's implement")
    s.tool("Edit", {"file_path": str(s.project / "auth.py"), "old_string": "a", "new_string": "jwt.decode(token)"})
    assert s.recall("timeout")["total"] >= 2
    assert s.recall('type:tool "talking to auth"')["total"] == 1  # (the ledger page may quote it too)
    assert all(h["kind"] == "error" for h in s.recall("type:error timeout")["hits"])
    assert s.recall("type:error timeout")["total"] == 1, s.recall("type:error timeout")
    assert all(h["phase"] == "implementation" for h in s.recall("phase:implementation jwt")["hits"])
    assert s.recall("phase:implementation jwt")["total"] >= 1
    dec = s.recall("decisions")["markdown"]
    assert "JWT" in dec
    assert "implementation" in s.recall("timeline")["markdown"]
    hit = s.recall("jwt")["hits"][0]
    full = s.recall("", id=hit["id"])
    assert "jwt" in full["text"].lower()
    md = s.recall("a", cap_tokens=60)["markdown"]
    from ctxlifed.core.model import estimate_tokens

    assert estimate_tokens(md) <= 80
    with pytest.raises(Exception) as ei:
        s.recall("phase:nonsense")
    assert "bad_query" in str(getattr(ei.value, "name", "")) or "phase" in str(ei.value)


def test_ledgers_never_leave_the_project(daemon: Any) -> None:
    """A traversal session id is refused for ledgers (stored under _invalid); no file outside the project."""
    bad = "../../escape"
    s = Session(daemon, sid="ffffffff-2222-3333-4444-555555555555")
    daemon.call("hook", dict(s.base("UserPromptSubmit", prompt="let's implement"), session_id=bad))
    daemon.call("hook", dict(s.base("SessionEnd", reason="other"), session_id=bad))
    assert not (daemon.base / "escape").exists()
    assert not list(daemon.base.rglob("escape*"))
    st = daemon.call("status", {"session": "_invalid"})
    assert st["sessions"][0]["events"] == 2


def test_cli_status_renders_zones(daemon: Any) -> None:
    """`ctxlifectl status` prints the phase, the four zones as bars with tokens and percent, level, advice."""
    s = Session(daemon)
    s.usage(100_000)
    s.prompt("hello")
    r = subprocess.run([sys.executable, "-m", "ctxlifed.cli.main", "status", "--session", SID], env=daemon.env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    for word in ("phase", "System", "Ledger", "Working", "Buffer", "level", "advice", "[#"):
        assert word in r.stdout
    # No daemon at that socket, nor one serving that data dir (its lock would name the running one).
    down = dict(daemon.env, CTXLIFED_SOCKET=str(daemon.base / "none.sock"), CTXLIFED_DATA_DIR=str(daemon.base / "nodata"))
    r = subprocess.run([sys.executable, "-m", "ctxlifed.cli.main", "status"], env=down, capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 1 and "ctxlifectl daemon start" in r.stderr


def test_config_env_changes_zones(daemon_factory: Any) -> None:
    """Zone ratios and thresholds come from the environment (and the config file)."""
    d = daemon_factory(CTXLIFED_ZONES="20/10/60/10", CTXLIFED_THRESHOLDS="50/70/85").start()
    s = Session(d)
    s.usage(10_000)
    s.prompt("x")
    st = s.status()
    assert [z["capacity"] for z in st["zones"]][:3] == [40_000, 20_000, 120_000]


def test_project_is_git_toplevel(daemon: Any) -> None:
    """Events from a subfolder belong to the repository's top level."""
    s = Session(daemon)
    sub = s.project / "src" / "pkg"
    sub.mkdir(parents=True)
    daemon.call("hook", dict(s.base("UserPromptSubmit", prompt="hi"), cwd=str(sub)))
    assert s.status()["project"] == str(s.project)



def test_tests_green_after_red_is_a_boundary(daemon: Any) -> None:
    """A failing test run followed by a passing one during implementation, with a Working zone large
    enough for a compaction to pay, suggests /compact once."""
    s = Session(daemon, sid="99999999-2222-3333-4444-555555555555")
    s.usage(20_000)
    s.prompt("let's implement the parser")
    s.usage(20_000 + 70_000)  # Working 70k of 130k: below level 1, above the boundary threshold
    s.fail("Bash", {"command": "pytest -q"}, "Exit code 1\nFAILED tests/test_p.py::test_x - AssertionError\n1 failed")
    s.tool("Bash", {"command": "pytest -q"}, {"stdout": "5 passed in 0.2s", "stderr": ""})
    assert "/compact" in s.next_answer().get("systemMessage", "")
    assert "systemMessage" not in s.prompt("thanks")


def test_emergency_ledger_when_autocompact_is_near(daemon: Any) -> None:
    """Near Claude Code's auto-compact point with no boundary in sight: an emergency ledger is written
    first, then the user is advised once; status carries the same advice."""
    s = Session(daemon, sid="eeee0000-2222-3333-4444-555555555555")
    s.usage(20_000)
    s.prompt("We decided to keep the v1 API. Let's implement the exporter")
    s.tool("Edit", {"file_path": str(s.project / "exporter.py"), "old_string": "a", "new_string": "b"})
    s.usage(160_000)  # 7,000 tokens before 167,000
    s.prompt("continue")
    assert "emergency ledger written" in s.next_answer().get("systemMessage", "")
    pages = ledgers(s.project, s.sid)
    assert pages and "emergency" in (s.project / "docs/memory/sessions" / s.sid / pages[-1]).read_text().lower()
    assert "systemMessage" not in s.prompt("and more")
    assert any("auto-compaction is 7,000 tokens away" in a for a in s.status()["advice"])


def test_a_resume_right_after_a_compaction_counts_the_system_prompt(daemon: Any) -> None:
    """After /compact, Claude Code's SessionStart(resume) ``context_tokens`` is the boundary's figure:
    the compacted messages only. The window also holds the system prompt and tools, so the context
    is their sum (as for the boundary itself), never the messages alone (a 0 % Working zone)."""
    s = Session(daemon)
    s.usage(20_000)  # the first request: the fixed part (system prompt and tools)
    s.hook("SessionStart", source="startup")
    s.usage(150_000)
    s.prompt("go on")
    boundary = {"type": "system", "subtype": "compact_boundary", "uuid": "cb1", "parentUuid": None,
                "timestamp": "2026-11-29T10:05:00.000Z", "sessionId": s.sid, "isSidechain": False,
                "compactMetadata": {"trigger": "manual", "preTokens": 150_000, "postTokens": 3_000}}
    with open(s.transcript, "a") as f:
        f.write(json.dumps(boundary) + "\n")
    s.hook("SessionStart", source="compact")
    after_boundary = s.status()["context_tokens"]
    assert 23_000 <= after_boundary < 25_000  # the boundary's messages + the fixed part (+ what was injected)
    summary = {"type": "user", "uuid": "cs1", "parentUuid": "cb1", "isSidechain": False, "isCompactSummary": True,
               "timestamp": "2026-11-29T10:05:01.000Z", "sessionId": s.sid,
               "message": {"role": "user", "content": "This session is being continued from a previous conversation."}}
    with open(s.transcript, "a") as f:  # lines that say nothing of the size come before the resume
        f.write(json.dumps(summary) + "\n")
    s.hook("SessionStart", source="resume", context_tokens=3_000, seconds_since_last_response=5)
    assert 23_000 <= s.status()["context_tokens"] < 25_000
    s.usage(24_000)  # the next response's usage: a real figure again
    s.prompt("continue")
    s.hook("SessionStart", source="resume", context_tokens=24_000, seconds_since_last_response=5)
    assert 24_000 <= s.status()["context_tokens"] < 25_000  # Claude Code's figure, taken as it is
