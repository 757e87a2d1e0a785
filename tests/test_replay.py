"""A whole recorded Claude Code session replayed through the real shim into a real daemon."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import FIXTURES, load_hooks, run_shim

pytestmark = pytest.mark.skipif(not (FIXTURES / "runs" / "chain_all").exists(), reason="fixtures not available")


def relocate(hooks: list[dict[str, Any]], base: Path) -> list[dict[str, Any]]:
    """Point transcript paths at a copy under ``base`` (an allowed transcript root) and cwd at a repo."""
    src_root = FIXTURES / "runs" / "chain_all" / "transcripts"
    dst_root = base / "projects"
    if not dst_root.exists():
        shutil.copytree(src_root, dst_root)
    project = base / "chain_project"
    (project / ".git").mkdir(parents=True, exist_ok=True)
    out = []
    for h in hooks:
        p = dict(h["payload"])
        tp = p.get("transcript_path", "")
        if "/.claude/projects/" in tp:
            p["transcript_path"] = str(dst_root / tp.split("/.claude/projects/", 1)[1])
        for key in ("cwd",):
            if isinstance(p.get(key), str) and p[key].startswith("/home/dev/exp/chain_project"):
                p[key] = p[key].replace("/home/dev/exp/chain_project", str(project), 1)
        out.append(p)
    return out


def ctl(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ctxlifed.cli.main", *args], env=env, capture_output=True,
                          text=True, timeout=30, cwd=env.get("_CWD"))


def test_chain_all_replay_then_recall(daemon: Any) -> None:
    """Every event of chain_all goes through the shim (exit 0) and is stored; recall finds Bash output,
    an Edit and the compact summary."""
    payloads = relocate(load_hooks("chain_all"), daemon.base)
    for p in payloads:
        r = run_shim(p, daemon.env)
        assert r.returncode == 0, r
        assert r.stderr == b""
        if r.stdout and p["hook_event_name"] == "PostCompact":
            assert not r.stdout.startswith(b"{")  # PostCompact: plain text is the route to the model
        elif r.stdout:
            out = json.loads(r.stdout)
            assert out.get("hookSpecificOutput", {}).get("hookEventName", p["hook_event_name"]) == p["hook_event_name"]
    st = daemon.call("status", {"limit": 50})
    assert st["events"] == len(payloads)
    assert sum(s["events"] for s in st["sessions"]) == len(payloads)

    env = dict(daemon.env, _CWD=str(daemon.base / "chain_project"))
    bash_out = next(p for p in payloads if p["hook_event_name"] == "PostToolUse" and p.get("tool_name") == "Bash")
    word = bash_out["tool_response"]["stdout"].split()[-1]
    r = ctl(env, "recall", "--json", word)
    assert r.returncode == 0, r.stderr
    hits = json.loads(r.stdout)["hits"]
    assert any(h["tool"] == "Bash" for h in hits)

    edit = next(p for p in payloads if p["hook_event_name"] == "PostToolUse" and p.get("tool_name") == "Edit")
    new_text = edit["tool_input"]["new_string"]
    term = max(new_text.replace("(", " ").replace(")", " ").split(), key=len)
    r = ctl(env, "recall", "--json", term)
    assert any(h["kind"] == "code_change" for h in json.loads(r.stdout)["hits"]), r.stdout

    summary = next(p for p in payloads if p["hook_event_name"] == "PostCompact")["compact_summary"]
    sterm = max((w.strip(".,:;()") for w in summary.split()), key=len)
    r = ctl(env, "recall", "--json", "type:compact_summary", sterm)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["hits"], r.stdout

    full = ctl(env, "recall", "--id", str(json.loads(r.stdout)["hits"][0]["id"]))
    assert sterm in full.stdout
