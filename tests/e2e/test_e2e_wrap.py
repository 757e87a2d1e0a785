"""End-to-end, the opt-in PreToolUse wrapper (issue 17 item 4) with the real Claude Code CLI in its DEFAULT
permission mode: with ``wrap_failing_commands`` on and an allow rule ``Bash(pytest:*)``, a failing pytest run
goes through ``ctxlifectl run`` with no prompt, the model's tool_result is the digest and the call still
fails (PostToolUseFailure); without an allow rule, with an ask rule or with a deny rule on the original,
ctxlifed does not wrap and Claude Code decides alone (in ``-p``: the call is refused, the command never runs).
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

SUITE = """import os
import pytest

open(os.path.join(os.path.dirname(__file__), "RAN"), "a").close()  # the command really ran


@pytest.mark.parametrize("i", range(600))
def test_case(i):
    assert i * 2 != {bad} or i * 2 == i * 2 + 1, "case %d mismatch" % i
"""
FAILING = 417
COMMAND = "pytest -v test_suite.py"
SCRIPT: dict[str, Any] = {
    "turns": [
        {"tool_use": {"name": "Bash", "input": {"command": COMMAND, "description": "Run the test suite"}}},
        {"text": "Done."},
    ],
    "default_text": "OK.",
}


def _last_tool_result(req: Any) -> tuple[str, bool]:
    for m in reversed((req.body or {}).get("messages") or []):
        if m.get("role") == "user" and isinstance(m.get("content"), list):
            for b in m["content"]:
                if b.get("type") == "tool_result":
                    c = b.get("content")
                    text = c if isinstance(c, str) else "\n".join(x.get("text", "") for x in c if isinstance(x, dict))
                    return text, bool(b.get("is_error"))
    raise AssertionError("no tool_result")


def _world(cc: ClaudeEnv, permissions: dict[str, list[str]] | None, *, wrap: bool = True) -> None:
    (cc.project / "test_suite.py").write_text(SUITE.replace("{bad}", str(FAILING * 2)))
    (cc.project / "RAN").unlink(missing_ok=True)
    if permissions is not None:
        d = cc.project / ".claude"
        d.mkdir(exist_ok=True)
        (d / "settings.local.json").write_text(json.dumps({"permissions": permissions}))
    cc.daemon.stop()
    cfg = cc.daemon.env["CTXLIFED_CONFIG"]
    os.makedirs(os.path.dirname(cfg), exist_ok=True)
    with open(cfg, "w") as f:
        f.write(f"wrap_failing_commands = {'true' if wrap else 'false'}\n")
    cc.install()  # adds (or removes) the PreToolUse(Bash) hook
    cc.daemon.start()


def _run(cc: ClaudeEnv) -> Any:
    # pytest from this interpreter's venv, first on Claude Code's PATH
    path = os.path.dirname(sys.executable) + ":/usr/local/bin:/usr/bin:/bin"
    run = cc.run("Run the test suite", SCRIPT, skip_permissions=False, env={"PATH": path})
    assert run.rc == 0, run.stderr[-3000:]
    no_hook_errors(run)
    return run


def _pre_answers(run: Any) -> list[dict[str, Any]]:
    out = []
    for e in run.hooks():
        if e.get("hook_name") == "PreToolUse:Bash" and (e.get("stdout") or "").strip().startswith("{"):
            out.append(json.loads(e["stdout"]))
    return out


def test_allowed_failing_run_goes_through_the_wrapper_without_a_prompt(cc: ClaudeEnv) -> None:
    _world(cc, {"allow": ["Bash(pytest:*)"]})
    run = _run(cc)
    answers = _pre_answers(run)
    assert len(answers) == 1, run.hooks()
    hso = answers[0]["hookSpecificOutput"]
    assert hso["permissionDecision"] == "allow"
    assert hso["updatedInput"]["command"].endswith(f" run --session {run.session_id} -- {COMMAND}")
    assert (cc.project / "RAN").exists()  # no prompt: it ran
    text, is_error = _last_tool_result(run.api.of_kind("main")[1])
    assert is_error, text[:500]  # the command's own status: the call failed
    assert "[ctxlifed digest" in text and "requires approval" not in text, text[:800]
    lines = text.split("\n")
    assert any(ln.startswith(f"FAILED test_suite.py::test_case[{FAILING}]") for ln in lines), text
    assert "1 failed, 599 passed" in text and "test_case[300] PASSED" not in text
    assert ("PostToolUseFailure", run.session_id) in run.fired  # status preserved: the failure hook fired
    aid = int(re.search(r"recall --id (\d+)", text).group(1))
    full = json.loads(cc.ctl("recall", "--id", str(aid), "--json").stdout)
    assert "test_case[300] PASSED" in json.dumps(full)
    path = re.search(r"Read (\S+) with offset=", text).group(1)
    assert "test_case[300] PASSED" in Path(path).read_text()


@pytest.mark.parametrize("permissions", [
    None,  # (b) no allow rule: Claude Code would ask
    {"allow": ["Bash(pytest:*)"], "ask": ["Bash(pytest:*)"]},  # (c) an ask rule on the original
    {"allow": ["Bash(pytest:*)"], "deny": ["Bash(pytest:*)"]},  # (d) a deny rule on the original
], ids=["no-allow", "ask", "deny"])
def test_without_a_sure_allow_ctxlifed_does_not_wrap(cc: ClaudeEnv, permissions: dict[str, list[str]] | None) -> None:
    _world(cc, permissions)
    run = _run(cc)
    assert _pre_answers(run) == []  # ctxlifed answered nothing: Claude Code decides alone
    assert not (cc.project / "RAN").exists()  # refused in -p: it never ran
    text, is_error = _last_tool_result(run.api.of_kind("main")[1])
    assert is_error and "ctxlifed" not in text, text[:500]
    # The same as with the wrapper off (Claude Code on its own).
    _world(cc, permissions, wrap=False)
    base = _run(cc)
    assert not (cc.project / "RAN").exists()
    btext, berr = _last_tool_result(base.api.of_kind("main")[1])
    assert berr and btext == text, (btext[:300], text[:300])
