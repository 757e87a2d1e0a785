"""Project memory a team can keep: no page for a session that settled nothing, old session pages roll up
into history.md (``memory.prune``, ``ctxlifectl memory prune``, and after SessionEnd), nothing edited
by hand is deleted. Through the real daemon, except the pure roll-up rules (core/rollup.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from ctxlifed.core import render as R
from ctxlifed.core import rollup as RU
from test_engine import Session, eventually


def _log(daemon: Any) -> str:
    return daemon.log.read_text(errors="replace") if daemon.log.exists() else ""


def _folders(project: Path) -> list[str]:
    d = project / "docs" / "memory" / "sessions"
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


def _short_session(daemon: Any, n: int, *, work: bool = True) -> Session:
    """One short session: a decision and an edit (work), or only a /recall (no work); then SessionEnd."""
    s = Session(daemon, sid=f"{n:08d}-2222-3333-4444-555555555555")
    s.hook("SessionStart", source="startup")
    if work:
        s.prompt(f"We decided to use strategy number {n} for the exporter.")
        s.tool("Edit", {"file_path": str(s.project / f"m{n}.py"), "old_string": "a", "new_string": "b"})
    else:
        s.prompt("/recall exporter")
        s.tool("Bash", {"command": "ctxlifectl recall exporter"}, {"stdout": "No results.", "stderr": ""})
        s.usage(21_000, text="Nothing was recorded about the exporter yet.")
    s.hook("Stop", stop_hook_active=False)
    s.hook("SessionEnd", reason="other")
    return s


def test_a_session_that_settled_nothing_writes_no_ledger(daemon_factory: Any) -> None:
    d = daemon_factory(CTXLIFED_MEMORY_KEEP="0").start()
    s = _short_session(d, 1, work=False)
    eventually(lambda: "ledger_skipped" in _log(d))
    assert _folders(s.project) == []
    # One that decided something writes its page, and the decision reaches decisions.md.
    s2 = _short_session(d, 2)
    eventually(lambda: _folders(s2.project) == [s2.sid])
    eventually(lambda: (s2.project / "docs/memory/decisions.md").exists())
    assert "strategy number 2" in (s2.project / "docs/memory/decisions.md").read_text()


def test_memory_prune_rolls_old_sessions_into_history(daemon_factory: Any) -> None:
    d = daemon_factory(CTXLIFED_MEMORY_KEEP="0").start()
    sessions = []
    for n in range(1, 5):
        sessions.append(_short_session(d, n))
        sid = sessions[-1].sid
        eventually(lambda sid=sid: sid in _folders(sessions[0].project))
    project = sessions[0].project
    mem = project / "docs" / "memory"
    assert _folders(project) == sorted(s.sid for s in sessions)
    # A page edited by hand in an old session is never deleted.
    edited = next((mem / "sessions" / sessions[1].sid).glob("phase-*.md"))
    edited.write_text(edited.read_text() + "\nNote from Alice: keep strategy 2 for the EU.\n")

    dry = d.call("memory.prune", {"cwd": str(project), "keep": 2, "dry_run": True})
    assert dry["sessions"] == [sessions[0].sid, sessions[1].sid]
    assert len(dry["rolled_up"]) == 1 and dry["history"] == ""
    assert _folders(project) == sorted(s.sid for s in sessions)  # nothing changed
    assert not (mem / "history.md").exists()

    r = d.call("memory.prune", {"cwd": str(project), "keep": 2})
    assert r["kept"] == [{"path": str(edited.resolve()), "why": "edited by hand"}]
    assert _folders(project) == sorted([sessions[1].sid, sessions[2].sid, sessions[3].sid])
    assert edited.exists()
    history = (mem / "history.md").read_text()
    assert history.startswith(RU.HISTORY_HEADER)
    lines = [ln for ln in history.splitlines() if ln.startswith("- ")]
    assert len(lines) == 1 and sessions[0].sid[:8] in lines[0] and "1 file" in lines[0]
    # The whole page is still one command away, and what the session decided is in decisions.md.
    aid = int(re.search(r"`ctxlifectl recall --id (\d+)`", lines[0]).group(1))
    page = d.call("recall", {"id": aid})["text"]
    assert page.startswith("<!-- ctxlifed:ledger v1 session=" + sessions[0].sid)
    decisions = (mem / "decisions.md").read_text()
    assert all(f"strategy number {n}" in decisions for n in range(1, 5))

    # Again: nothing left to roll up; the CLI says so.
    env = dict(d.env)
    out = subprocess.run([sys.executable, "-m", "ctxlifed.cli.main", "memory", "prune", "--keep", "2"],
                         cwd=project, env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "rolled up 0 pages" in out.stdout and "edited by hand" in out.stdout
    assert (mem / "history.md").read_text() == history


def test_session_end_rolls_up_beyond_the_configured_number(daemon_factory: Any) -> None:
    d = daemon_factory(CTXLIFED_MEMORY_KEEP="2").start()
    sessions = [_short_session(d, n) for n in range(1, 4)]
    project = sessions[0].project
    eventually(lambda: "memory_pruned" in _log(d) and len(_folders(project)) == 2
               and (project / "docs/memory/history.md").exists())
    eventually(lambda: _folders(project) == sorted([sessions[1].sid, sessions[2].sid]))


def test_prune_outside_a_repository_says_why(daemon: Any, short_tmp: Path) -> None:
    plain = short_tmp / "plain"
    plain.mkdir()
    r = daemon.call("memory.prune", {"cwd": str(plain)})
    assert r["rolled_up"] == [] and "not a git work tree" in r["reason"]
    assert "Nothing pruned" in r["markdown"]
    assert not os.path.exists(plain / "docs")


# -- the pure rules ------------------------------------------------------------------------------
def _page(sid: str, n: int, *, goal: str = "Ship the exporter", files: tuple[str, ...] = ("a.py",)) -> str:
    return R.render_phase_ledger(R.LedgerData(
        session_id=sid, number=n, phase="implementation", start=1_800_000_000.0, end=1_800_000_600.0,
        project="/p", cause="session end", goal=goal, done=(), files_changed=files, decisions=("use X",),
        test_results=(), unresolved=("write docs", "ask Bob"), l2_refs=()))


def test_parse_page_reads_what_history_keeps() -> None:
    p = RU.parse_page(_page("abcdef12-0000", 3))
    assert p is not None
    assert (p.session, p.phase, p.number, p.files, p.decisions, p.unresolved) == (
        "abcdef12-0000", "implementation", 3, 1, 1, 2)
    assert p.goal == "Ship the exporter" and p.start.startswith("2027-01-15")
    assert RU.parse_page("# Notes\n\nmine") is None
    assert RU.parse_page("") is None
    long = RU.parse_page(_page("s", 1, goal="x" * 500))
    assert long is not None and len(long.goal) == RU.GOAL_CHARS


def test_select_keeps_the_newest_and_names_the_rest_oldest_first() -> None:
    folders = [("c", 30.0), ("a", 10.0), ("d", 40.0), ("b", 20.0)]
    assert RU.select(folders, 2) == ["a", "b"]
    assert RU.select(folders, 0) == ["a", "b", "c", "d"]
    assert RU.select(folders, 9) == []
    assert RU.select([("y", 1.0), ("x", 1.0)], 1) == ["x"]  # ties: by session id


def test_history_entry_is_one_line_with_a_resolvable_id() -> None:
    p = RU.parse_page(_page("abcdef1234", 2))
    assert p is not None
    e = RU.history_entry(p, 42)
    assert e.endswith("\n") and e.count("\n") == 1
    assert "session `abcdef12`" in e and "phase 2 implementation" in e and "1 file" in e
    assert "2 open items" in e and e.rstrip().endswith("`ctxlifectl recall --id 42`")
    assert RU.history_text(None, [e]) == RU.HISTORY_HEADER + e
    assert RU.history_text("# mine", [e]) == "# mine\n" + e


def test_memory_keep_is_configurable_and_never_negative() -> None:
    from ctxlifed.runtime.config import load

    assert load(None, env={}).memory_keep_sessions == 10
    assert load(None, env={"CTXLIFED_MEMORY_KEEP": "3"}).memory_keep_sessions == 3
    bad = load(None, env={"CTXLIFED_MEMORY_KEEP": "-1"})
    assert bad.memory_keep_sessions == 10 and any("memory_keep_sessions" in p for p in bad.problems)
