"""End-to-end compaction survival: the real Claude Code CLI compacts a session through ``/compact``,
the fake Messages API answers the summary request with a scripted summary that keeps some planted
items and omits others, and ctxlifed re-injects exactly the omitted ones.

Observed with Claude Code 2.1.328 (what the assertions rely on):
- ``claude -p "/compact …" --resume <sid>`` makes one request, the summary request (fakeapi kind
  ``compact``), and no main-loop request. Hooks: SessionStart(resume), PreCompact, SubagentStop
  (agent_type ""), SessionStart(compact), PostCompact, SessionEnd.
- The summary reaches the next request as the user message "This session is being continued …
  Summary: …" with the ``<analysis>`` block removed.
- PostCompact's plain-text stdout reaches the next request inside the ``/compact`` command's
  ``<local-command-stdout>``: "PostCompact [<hook command>] completed successfully: <stdout>", one such
  line per PostCompact hook (ours and the test's logger hook, which prints nothing).
- SessionStart(compact) additionalContext lands in a role "system" message of the same request. In
  this ``-p --resume`` harness the follow-up also fires SessionStart(resume), whose context lists the
  open pending items again: that is the resume route, not the compaction's, so "once" below is
  counted over the compaction's two routes (SessionStart(compact) context and PostCompact text).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxlifed.core import mustsurvive as MS

from .ccenv import ClaudeEnv, Run, no_hook_errors

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from fakeapi import text_of  # noqa: E402

pytestmark = pytest.mark.e2e

PY = sys.executable
GOAL = "Fix the CSV reader so quoted fields parse correctly."

# Planted items: K = carried by the scripted summary, O = omitted by it.
# From the user's prompt (second run):
DECISION_K = "We decided to use the csv module instead of str.split for parsing."
CONSTRAINT_O = "Output files must never be written outside the build folder."
PENDING_K = "TODO: add a --strict flag to the CLI."
# From the assistant's text (first run):
DECISION_O = "We decided to store timestamps as UTC epoch seconds."
CONSTRAINT_K = "The reader must never load the whole input file into memory."
PENDING_O = "TODO: document the quoting rules in the README."
# Two tests that really fail in the temporary project.
TEST_K = "tests/test_csvline.py::test_quoted_fields"
TEST_O = "tests/test_csvline.py::test_crlf_line_endings"
FAILING_K = f"{PY} -m pytest -q -p no:cacheprovider {TEST_K}"
FAILING_O = f"{PY} -m pytest -q -p no:cacheprovider {TEST_O}"

SOURCE = "def parse(line):\n    return line.split(',')\n"
TESTS = '''from csvline import parse


def test_quoted_fields():
    assert parse('a,"b,c"') == ["a", "b,c"]


def test_crlf_line_endings():
    assert parse("a,b\\r\\n") == ["a", "b"]
'''

PLANT_SCRIPT: dict[str, Any] = {
    "turns": [
        {"text": f"{DECISION_O} {CONSTRAINT_K} {PENDING_O}",
         "tool_uses": [{"name": "Bash", "input": {"command": FAILING_K, "description": "Run the quoting test"}},
                       {"name": "Bash", "input": {"command": FAILING_O, "description": "Run the line-ending test"}}]},
        {"text": "Both reader tests fail."},
    ],
    "default_text": "OK.",
}
PROMPT_FACTS = f"{DECISION_K} {CONSTRAINT_O} {PENDING_K}"

# The omitted decision is only in <analysis>, which Claude Code drops from the window: it is lost.
SUMMARY = f"""<analysis>
The user also settled the time format: {DECISION_O[0].lower() + DECISION_O[1:]}
</analysis>
<summary>
1. Primary Request and Intent: {GOAL}
2. Key Technical Concepts: {DECISION_K} {CONSTRAINT_K[:-1]} (a streaming reader).
3. Files and Code Sections: csvline.py, tests/test_csvline.py.
4. Errors and fixes: test_quoted_fields still fails (AssertionError on a quoted comma).
5. Pending Tasks: {PENDING_K}
6. Current Work: investigating quoted field handling.
</summary>"""

_POSTCOMPACT = re.compile(
    r"PostCompact \[(?P<cmd>[^\]\n]*)\] completed successfully: (?P<text>.*?)"
    r"(?=\n(?:PreCompact|PostCompact) \[|</local-command-stdout>)", re.S)


def ok(run: Run) -> None:
    assert run.rc == 0, f"claude exited {run.rc}\n{run.stderr[-3000:]}"
    assert run.result.get("subtype") == "success" and not run.result.get("is_error"), run.result
    no_hook_errors(run)


def postcompact_texts(text: str) -> list[str]:
    """ctxlifed's PostCompact stdout as Claude Code delivered it in a request's text."""
    return [m.group("text") for m in _POSTCOMPACT.finditer(text) if "ctxlifed_hook" in m.group("cmd")]


def items(cc: ClaudeEnv, sid: str) -> set[tuple[str, str]]:
    with cc.db() as c:
        return set(c.execute("SELECT kind, text FROM items WHERE session = ?", (sid,)))


def report(cc: ClaudeEnv, sid: str) -> dict[str, Any]:
    """`ctxlifectl compactions --json`, checked against the `compactions` JSON-RPC method."""
    out = json.loads(cc.ctl("compactions", "--json", "--session", sid).stdout)
    assert out == cc.daemon.call("compactions", {"session": sid})
    return dict(out)


def plant_and_compact(cc: ClaudeEnv) -> tuple[str, Run]:
    """Run 1 (goal, assistant facts, two failing tests), run 2 (facts in a prompt), run 3 (/compact)."""
    (cc.project / "csvline.py").write_text(SOURCE)
    (cc.project / "tests").mkdir()
    (cc.project / "tests" / "test_csvline.py").write_text(TESTS)
    a = cc.run(GOAL, PLANT_SCRIPT)
    ok(a)
    sid = a.session_id
    outputs = [r.text() for r in a.api.of_kind("main")[1:]]
    assert any("1 failed" in t and f"FAILED {TEST_K}" in t for t in outputs), "the quoting test did not fail"
    assert any("1 failed" in t and f"FAILED {TEST_O}" in t for t in outputs), "the line-ending test did not fail"
    b = cc.run(PROMPT_FACTS, {"turns": [{"text": "Noted."}]}, resume=sid)
    ok(b)
    # The daemon detected every planted fact, from the prompt and from the assistant's text.
    planted = {("decision", DECISION_K), ("decision", DECISION_O), ("constraint", CONSTRAINT_K),
               ("constraint", CONSTRAINT_O), ("pending", PENDING_K), ("pending", PENDING_O)}
    assert items(cc, sid) == planted
    c = cc.run("/compact keep the parser work", {"compact_summary": SUMMARY}, resume=sid)
    ok(c)
    assert c.session_id == sid
    (compact_req,) = c.api.requests  # the summary request only: no main-loop turn for /compact
    assert compact_req.kind == "compact" and "keep the parser work" in compact_req.last_user_text()
    fired = [e for e, s in c.fired if s == sid]
    assert fired.index("PreCompact") < fired.index("SessionStart", 1) < fired.index("PostCompact")
    return sid, c


def test_compaction_reinjects_exactly_what_the_summary_omitted(cc: ClaudeEnv) -> None:
    sid, c = plant_and_compact(cc)
    compact_ctx = c.hook_context("SessionStart:compact")
    assert compact_ctx.strip(), "no SessionStart(compact) context from ctxlifed"

    d = cc.run("Continue with the reader", {"turns": [{"text": "Continuing."}]}, resume=sid)
    ok(d)
    first = d.api.of_kind("main")[0]
    text = first.text()

    # Claude Code carried the summary without its <analysis>: the kept items are there, the omitted not.
    (cont,) = [t for m in first.body["messages"] if "This session is being continued" in (t := text_of(m["content"]))]
    for kept in (GOAL, DECISION_K, CONSTRAINT_K[:-1], PENDING_K, "test_quoted_fields"):
        assert kept in cont, kept
    for omitted in (DECISION_O, CONSTRAINT_O, PENDING_O, "test_crlf_line_endings", "<analysis>"):
        assert omitted not in cont, omitted

    # The SessionStart(compact) context lists the window's tool output (the failing test runs, with ids);
    # the omitted facts it does not carry reach the next request, once, as PostCompact text.
    assert "test_crlf_line_endings" in compact_ctx and "[prompt]" not in compact_ctx and "[assistant]" not in compact_ctx
    (post,) = postcompact_texts(text)
    assert post.splitlines() == [
        MS.LEAD,
        f"- Constraint: {CONSTRAINT_O}",
        f"- Decision: {DECISION_O}",
    ], post
    assert text.count(MS.LEAD) == 1
    assert compact_ctx in text  # the SessionStart(compact) context reached the same request

    # None of the kept ones is injected again by either compaction route (the context names only
    # labels and ids for archived items, plus the open pending items).
    for kept in (DECISION_K, CONSTRAINT_K, GOAL):
        assert kept not in post and kept not in compact_ctx, kept
    assert FAILING_K not in post
    # Pending items: carried by the SessionStart(compact) context, so not in the PostCompact text;
    # each is listed there exactly once.
    for pending in (PENDING_K, PENDING_O):
        assert pending not in post
        listed = re.findall(rf"^- {re.escape(pending)} \(L2 #\d+\)$", compact_ctx, re.M)
        assert len(listed) == 1, (pending, compact_ctx)

    # The report says the same: kept / lost / re-injected ids, and the lines shown to the user.
    phase = cc.status(sid)["phase"]
    assert phase == "implementation"  # "Fix the CSV reader …" and its test runs: work, not planning
    lost = [MS.item_id("constraint", CONSTRAINT_O), MS.item_id("decision", DECISION_O)]
    rep = report(cc, sid)
    (one,) = rep["reports"]
    # Failing tests are items "<test id> — <first error line>": both carried (the summary names the
    # quoting test; the SessionStart(compact) list names the line-ending test's run).
    failing_kept = [i for i in one["kept"] if i.startswith("failing_test:")]
    assert len(failing_kept) == 2, one["kept"]
    kept_ids = {MS.item_id("phase", phase), MS.item_id("goal", GOAL), *failing_kept,
                MS.item_id("constraint", CONSTRAINT_K), MS.item_id("decision", DECISION_K),
                MS.item_id("pending", PENDING_K), MS.item_id("pending", PENDING_O)}
    assert one["session"] == sid and one["trigger"] == "manual"
    assert one["lost"] == lost and one["reinjected"] == lost
    assert set(one["kept"]) == kept_ids and len(one["kept"]) == len(kept_ids)
    assert one["suppressed"] == []
    assert one["lost_lines"] == [f"{line[2:]} (re-injected)" for line in post.splitlines()[1:]]
    assert one["pre_tokens"] and one["post_tokens"] and one["post_tokens"] < one["pre_tokens"]
    assert "kept 8  lost 2  re-injected 2" in rep["markdown"]
    assert cc.ctl("compactions", "--session", sid).stdout.strip() == rep["markdown"]


def test_compaction_summary_is_not_harvested_as_new_facts(cc: ClaudeEnv) -> None:
    """The compaction agent's SubagentStop (agent_type "") carries the raw summary; it adds no new facts,
    so a second compaction with the same summary re-injects nothing."""
    sid, c = plant_and_compact(cc)
    before = {MS.item_id("decision", DECISION_O), MS.item_id("constraint", CONSTRAINT_O)}
    # A second compaction with the same summary: what was delivered is not delivered again.
    again = cc.run("/compact keep the parser work", {"compact_summary": SUMMARY}, resume=sid)
    ok(again)
    second, first = report(cc, sid)["reports"]
    # The line-ending test was carried by the SessionStart(compact) list (its test run, with its id),
    # the other two by the PostCompact text: all count as delivered, none is re-injected again.
    assert set(first["reinjected"]) == before
    assert before <= set(second["suppressed"]) and not second["reinjected"]
    problems = []
    if second["reinjected"]:
        problems.append(f"second compaction re-injected again: {second['lost_lines']}")
    ctx = c.hook_context("SessionStart:compact")
    for pending in (PENDING_K, PENDING_O):
        if ctx.count(pending) != 1:
            problems.append(f"SessionStart(compact) lists {pending!r} {ctx.count(pending)} times")
    extra = items(cc, sid) - {("decision", DECISION_K), ("decision", DECISION_O), ("constraint", CONSTRAINT_K),
                              ("constraint", CONSTRAINT_O), ("pending", PENDING_K), ("pending", PENDING_O)}
    if extra:
        problems.append(f"items harvested from the compaction summary: {sorted(extra)}")
    assert not problems, "\n".join(problems)
