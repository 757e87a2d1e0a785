"""End-to-end live compression (issue 17) with the real Claude Code CLI: a long test run whose output is
piped through ``tee`` reaches PostToolUse; ctxlifed answers ``updatedToolOutput`` with its digest, so the
next request holds the failing tests verbatim and not the whole log; the model then ``Read``s the file
the digest names, with offset/limit, in Claude Code's DEFAULT permission mode, and gets the original lines.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from .ccenv import ClaudeEnv, no_hook_errors

pytestmark = pytest.mark.e2e

FAILING = (137, 512, 871)
SUITE = f"""import unittest


class T(unittest.TestCase):
    pass


def make(i):
    def t(self):
        if i in {FAILING!r}:
            self.assertEqual(i * 2, i * 2 + 1, "case %d mismatch" % i)
    return t


for i in range(900):
    setattr(T, "test_case_%04d" % i, make(i))
"""
RUN = "python3 -m unittest -v test_suite 2>&1 | tee unittest.log"

BIG = {"cache_read_input_tokens": 100_000}
SCRIPT: dict[str, Any] = {
    "turns": [
        # The first request sets the fixed part (system); from the second on the context is big: with a
        # 200k window the Working zone is past 60 % (level >= 1), far from Claude Code's auto-compaction.
        {"text": "Warming up.", "tool_use": {"name": "Bash", "input": {"command": "echo warm", "description": "warm"}}},
        {"usage": BIG, "tool_use": {"name": "Bash", "input": {"command": "echo warmer", "description": "warmer"}}},
        {"usage": BIG, "tool_use": {"name": "Bash", "input": {"command": RUN, "description": "Run the test suite"}}},
        {"usage": BIG, "tool_use": {"name": "Read", "input": {
            "file_path": "{{LAST:Read (\\S+) with offset=}}",
            "offset": "{{LAST_INT:\\[L(\\d+)(?:-\\d+)?\\]\\nFAIL: test_case_0512}}", "limit": 6}}},
        {"usage": BIG, "text": "Case 512 fails its equality assertion."},
    ],
    "default_text": "OK.",
}


def _tool_results(req: Any) -> list[str]:
    out = []
    for m in (req.body or {}).get("messages") or []:
        if m.get("role") != "user" or not isinstance(m.get("content"), list):
            continue
        for b in m["content"]:
            if b.get("type") == "tool_result":
                c = b.get("content")
                out.append(c if isinstance(c, str) else "\n".join(x.get("text", "") for x in c if isinstance(x, dict)))
    return out


def test_long_test_log_reaches_the_model_as_its_digest_and_the_file_reads_back(cc: ClaudeEnv) -> None:
    (cc.project / "test_suite.py").write_text(SUITE)
    cc.daemon.stop()
    cfg = cc.daemon.env["CTXLIFED_CONFIG"]
    os.makedirs(os.path.dirname(cfg), exist_ok=True)
    with open(cfg, "a") as f:
        f.write("window = 200000\n")
    cc.daemon.start()
    run = cc.run("Run the test suite and tell me what fails", SCRIPT, skip_permissions=False,
                 args=("--allowedTools", "Bash"))
    assert run.rc == 0, run.stderr[-3000:]
    no_hook_errors(run)
    assert run.api.turns_used == len(SCRIPT["turns"])
    full = (cc.project / "unittest.log").read_text()
    assert len(full) > 30_000 and "FAILED (failures=3)" in full
    main = run.api.of_kind("main")
    # Request 4 (after the test run): its last tool_result is the digest, not the log nor Claude Code's preview.
    dg = _tool_results(main[3])[-1]
    assert dg.startswith("[ctxlifed digest of a test run of "), dg[:300]
    assert "<persisted-output>" not in dg and len(dg) < len(full) / 4
    lines = set(dg.split("\n"))
    for i in FAILING:
        assert f"FAIL: test_case_{i:04d} (test_suite.T.test_case_{i:04d})" in lines
        assert f"AssertionError: {i * 2} != {i * 2 + 1} : case {i} mismatch" in lines
    assert "FAILED (failures=3)" in lines
    assert "test_case_0300 (test_suite.T.test_case_0300) ... ok" not in dg  # the bulk stayed out
    for r in main[3:]:
        assert "test_case_0300 (test_suite.T.test_case_0300) ... ok" not in r.text()
    # The archive id it names resolves to the full original.
    aid = int(re.search(r"recall --id (\d+)", dg).group(1))
    rec = json.loads(cc.ctl("recall", "--id", str(aid), "--json").stdout)
    assert "test_case_0300 (test_suite.T.test_case_0300) ... ok" in json.dumps(rec)
    # Request 5: the Read of the named file with offset/limit returned the original lines (no prompt).
    path = re.search(r"Read (\S+) with offset=", dg).group(1)
    assert "/.claude/projects/" in path and path.endswith(f"/ctxlifed-outputs/{aid}.txt")
    got = _tool_results(main[4])[-1]
    assert "haven't granted" not in got and "permission" not in got.lower(), got
    at = int(re.search(r"\[L(\d+)(?:-\d+)?\]\nFAIL: test_case_0512", dg).group(1))
    want = full.split("\n")[at - 1: at - 1 + 6]
    assert [ln.split("\t", 1)[1] for ln in got.strip("\n").split("\n")[:6]] == want
    assert "FAIL: test_case_0512" in want[0]
    # status: the saving, measured, by kind; the level was >= 1.
    st = cc.status(run.session_id)
    comp = st["compression"]
    assert comp["replaced"] >= 1 and comp["by_kind"]["test"]["saved_tokens"] > 5_000
    # The persisted log was read, redacted and digested when Claude Code wrote it, before its hook came
    # (service/readahead.py); that hook took the work (the digest checked above is the one it made).
    daemon = json.loads(cc.ctl("status", "--json").stdout)
    assert daemon["read_ahead_made"] >= 1 and daemon["read_ahead_used"] == 1, (daemon, cc.daemon.log.read_text()[-5000:])
    assert st["level"] >= 1, {k: st[k] for k in ("level", "working_pct", "context_tokens", "window", "zones")}


def test_failing_long_run_gets_a_note_of_what_claude_codes_cut_removed(cc: ClaudeEnv) -> None:
    """Without ``tee`` the run exits 1: PostToolUseFailure, whose output Claude Code cuts to its first and
    last 5,000 characters and which no hook can replace; the note says what is gone and what is visible."""
    (cc.project / "test_suite.py").write_text(SUITE)
    script = {"turns": [{"tool_use": {"name": "Bash", "input": {"command": "python3 -m unittest -v test_suite",
                                                                "description": "Run the test suite"}}},
                        {"text": "Three cases fail."}], "default_text": "OK."}
    run = cc.run("Run the test suite", script)
    assert run.rc == 0, run.stderr[-3000:]
    no_hook_errors(run)
    text = run.api.of_kind("main")[1].text()
    m = re.search(r"Claude Code cut ([\d,]+) characters from the middle of this failing command's output", text)
    assert m, text[-3000:]
    assert f"... [{m.group(1).replace(',', '')} characters truncated] ..." in text  # Claude Code's own mark
    # The visible part ends inside the run: the failures at the end are gone; the note names the failing
    # test the visible part shows (unittest -v: "name (id) ... FAIL"), not the others.
    visible = [i for i in FAILING if f"test_case_{i:04d} (test_suite.T.test_case_{i:04d}) ... FAIL" in text.split(m.group(0))[0]]
    assert visible == [512], visible  # 137 is in the cut middle, 871 past the first 30,000 characters
    note = text[m.start():]
    for i in FAILING:
        named = f"test_case_{i:04d} (test_suite.T.test_case_{i:04d}) ... FAIL" in note
        assert named == (i in visible), (i, visible, note[:1500])
    assert "tee" in note


def _ask_the_logs(cc: ClaudeEnv, lines: int) -> tuple[Any, str]:
    """One session whose model calls the logs MCP server's ``tail`` (``lines`` log lines, one ERROR): the run
    and the tool_result the model received."""
    server = Path(__file__).with_name("_mcp_logs.py")
    cfg = cc.base / "mcp.json"
    cfg.write_text(json.dumps({"mcpServers": {"logs": {"type": "stdio", "command": sys.executable,
                                                       "args": [str(server), str(lines)]}}}))
    script = {"turns": [{"tool_use": {"name": "mcp__logs__tail", "input": {"n": lines}}},
                        {"text": "Worker 7 lost its connection."}], "default_text": "OK."}
    run = cc.run("What went wrong in the logs?", script, args=("--mcp-config", str(cfg), "--strict-mcp-config"))
    assert run.rc == 0, run.stderr[-3000:]
    no_hook_errors(run)
    return run, _tool_results(run.api.of_kind("main")[1])[-1]


def test_mcp_output_is_replaced_through_updated_mcp_tool_output(cc: ClaudeEnv) -> None:
    """An MCP tool's bulky text output reaches the model as its digest (``updatedMCPToolOutput``)."""
    run, got = _ask_the_logs(cc, 1200)
    assert got.startswith("[ctxlifed digest of a log of 1,201 lines"), got[:500]
    assert "2026-11-29 10:01:00 ERROR worker 7 failed: connection reset by peer" in got.split("\n")
    assert "INFO worker 600 processed" not in got
    comp = cc.status(run.session_id)["compression"]
    assert comp["by_kind"]["log"]["replaced"] == 1
    with cc.db() as c:  # the shape Claude Code sends: a list of text blocks
        (raw,) = c.execute("SELECT payload FROM events WHERE event = 'PostToolUse' AND tool = 'mcp__logs__tail'").fetchone()
    tr = json.loads(raw)["tool_response"]
    assert isinstance(tr, list) and tr[0]["type"] == "text", str(tr)[:300]


def test_an_mcp_result_claude_code_saved_to_a_file_reaches_the_model_as_its_digest(cc: ClaudeEnv) -> None:
    """Over its token limit an MCP result reaches the hook only as Claude Code's notice naming the file it
    saved (the model is told to read all of it, in chunks); ctxlifed answers with the digest of that file
    instead, read ahead when Claude Code wrote it (the session's prompt armed the read-ahead)."""
    run, got = _ask_the_logs(cc, 2000)
    assert got.startswith("[ctxlifed digest of a log of 2,001 lines"), got[:500]
    assert "2026-11-29 10:01:00 ERROR worker 7 failed: connection reset by peer" in got.split("\n")
    assert "exceeds maximum allowed tokens" not in got and "INFO worker 600 processed" not in got
    path = re.search(r"Read (\S+) with offset=", got).group(1)
    assert Path(path).read_text().count("\n") == 2001  # the whole result, as the MCP server sent it
    aid = int(re.search(r"recall --id (\d+)", got).group(1))
    assert "worker 600 processed" in cc.ctl("recall", "--id", str(aid), "--json").stdout
    with cc.db() as c:  # what Claude Code sent: its notice, a string
        (raw,) = c.execute("SELECT payload FROM events WHERE event = 'PostToolUse' AND tool = 'mcp__logs__tail'").fetchone()
    assert json.loads(raw)["tool_response"].startswith("Error: result (115,369 characters across 2,001 lines)")
    assert cc.status(run.session_id)["compression"]["by_kind"]["log"]["replaced"] == 1
    daemon = json.loads(cc.ctl("status", "--json").stdout)
    assert daemon["read_ahead_used"] == 1 and daemon["read_ahead_missed"] == 0, daemon
