"""Advice through a real daemon: /compact only when it pays, with a focus line naming the session's real
state; /rewind, /clear and subagent advice in the session (systemMessage) and in ``status``; each once."""

from __future__ import annotations

from typing import Any

from test_engine import Session

FAIL_OUT = ("Exit code 1\n============ FAILURES ============\n___ test_burst ___\nE   assert 3 == 2\n"
            "FAILED tests/test_limiter.py::test_burst - assert 3 == 2\n1 failed, 4 passed in 0.2s")


def _messages(s: Session, n: int = 3) -> list[str]:
    """The systemMessages of the next ``n`` answers (each after what was sent is derived)."""
    out = []
    for i in range(n):
        ans = s.next_answer() if i == 0 else s.prompt(f"ok {i}")
        out.append(ans.get("systemMessage", ""))
    s.d.call("status", {"session": s.sid})
    out.append(s.hook("Stop", stop_hook_active=False).get("systemMessage", ""))
    return [m for m in out if m]


def test_no_compact_advice_at_a_phase_switch_with_small_working_use(daemon: Any) -> None:
    """The issue's case: Working at 1.5 % of a 1M window; a phase switch and tests turning green advise
    nothing, and status says no action is needed."""
    s = Session(daemon, sid="a1a1a1a1-2222-3333-4444-555555555555", model="claude-sonnet-4-5[1m]")
    s.usage(20_000)
    s.hook("SessionStart", source="startup")
    s.prompt("We need rate limiting for the login API. TODO: decide the store")
    s.usage(20_000 + 9_750)  # Working 9,750 of 650,000 = 1.5 %
    s.prompt("Good plan. Go ahead and implement it.")
    assert s.status()["phase"] == "implementation"
    s.tool("Edit", {"file_path": str(s.project / "limiter.py"), "old_string": "a", "new_string": "b"})
    s.fail("Bash", {"command": "pytest -q"}, FAIL_OUT)
    s.tool("Bash", {"command": "pytest -q"}, {"stdout": "5 passed in 0.2s", "stderr": ""})
    st = s.status()
    assert st["working_pct"] < 0.02
    assert not any("/compact" in m for m in _messages(s))
    assert st["advice"] == ["Working zone at 1.5%: no action needed"]


def test_compact_advice_past_level_1_names_files_tests_and_decisions(daemon: Any) -> None:
    """Past level 1 the advice's focus line names the files being changed, the failing test and this
    phase's decision and constraint, from the session's real state; it is delivered once."""
    s = Session(daemon, sid="a2a2a2a2-2222-3333-4444-555555555555")
    s.usage(20_000)
    s.prompt("Let's implement it. We decided to use a token bucket in Redis. It must not break existing tokens.")
    s.tool("Edit", {"file_path": str(s.project / "src" / "limiter.py"), "old_string": "a", "new_string": "b"})
    s.tool("Write", {"file_path": str(s.project / "src" / "api.py"), "content": "x = 1"})
    s.fail("Bash", {"command": "pytest -q tests/test_limiter.py"}, FAIL_OUT)
    s.status()  # derived before the transcript grows (a derivation reads the transcript as it is then)
    s.usage(20_000 + 80_000)  # Working 80k of 130k: level 1
    s.prompt("continue")
    msgs = _messages(s)
    assert len(msgs) == 1, msgs
    reason, command = msgs[0].split("\n")
    assert reason.startswith("ctxlifed: Working zone at 61.5%")
    assert command.startswith("/compact Keep the implementation work; failing tests: tests/test_limiter.py::test_burst"), msgs
    for part in ("src/api.py", "src/limiter.py", "token bucket in Redis", "must not break existing tokens"):
        assert part in command, part
    assert len(command) <= len("/compact ") + 300
    assert any("/compact Keep the implementation work" in a for a in s.status()["advice"])


def test_compact_advice_at_a_boundary_that_pays(daemon: Any) -> None:
    """A phase switch with 70k tokens in Working (below level 1): the compaction pays within its payback
    horizon, so it is advised once, with the figures that justify it."""
    s = Session(daemon, sid="a3a3a3a3-2222-3333-4444-555555555555")
    s.usage(20_000)
    s.prompt("We need rate limiting for the login API.")
    s.status()
    s.usage(20_000 + 70_000)
    s.prompt("Looks good, let's implement it.")
    msgs = _messages(s)
    assert len(msgs) == 1, msgs
    assert "phase switch planning → implementation" in msgs[0]
    assert "Working holds 70,000 tokens, so a compaction repays itself in about" in msgs[0]


def test_rewind_after_the_same_failure_three_times(daemon: Any) -> None:
    """The same failing test three times in a row: /rewind is suggested once, with its reason, and status
    lists it until a run passes."""
    s = Session(daemon, sid="a4a4a4a4-2222-3333-4444-555555555555")
    s.usage(20_000)
    s.prompt("let's implement the limiter")
    for i in range(3):
        s.tool("Edit", {"file_path": str(s.project / "limiter.py"), "old_string": f"{i}", "new_string": f"{i + 1}"})
        s.fail("Bash", {"command": "pytest -q tests/test_limiter.py"}, FAIL_OUT)
    msgs = _messages(s)
    assert len(msgs) == 1 and "/rewind" in msgs[0] and "the same failure 3 times in a row" in msgs[0], msgs
    assert any("/rewind" in a for a in s.status()["advice"])
    s.fail("Bash", {"command": "pytest -q tests/test_limiter.py"}, FAIL_OUT)
    assert not _messages(s)  # delivered once
    s.tool("Bash", {"command": "pytest -q tests/test_limiter.py"}, {"stdout": "5 passed in 0.2s", "stderr": ""})
    assert not any("/rewind" in a for a in s.status()["advice"])


def test_subagent_before_a_read_sweep(daemon: Any) -> None:
    """Six reads of different files in a row: a subagent is suggested once; status lists it while the
    sweep goes on."""
    s = Session(daemon, sid="a5a5a5a5-2222-3333-4444-555555555555")
    s.usage(20_000)
    s.prompt("how does the auth flow work?")
    for i in range(6):
        s.tool("Read", {"file_path": str(s.project / f"m{i}.py")}, {"file": {"content": "x = 1"}})
    st = s.status()
    assert any("subagent" in a for a in st["advice"])
    grep = s.tool("Grep", {"pattern": "token"}, {"content": "m1.py: token"})  # its answer may carry it
    msgs = [m for m in [grep.get("systemMessage", ""), *_messages(s)] if m]
    assert len(msgs) == 1 and "subagent" in msgs[0] and "6 reads in a row" in msgs[0], msgs


def test_clear_before_an_unrelated_task_after_a_large_context(daemon: Any) -> None:
    """A prompt unrelated to the work so far, with 60k tokens in Working: /clear is suggested once; a
    related follow-up is not."""
    s = Session(daemon, sid="a6a6a6a6-2222-3333-4444-555555555555")
    s.usage(20_000)
    s.prompt("Add rate limiting to the login API with a token bucket in Redis")
    s.tool("Edit", {"file_path": str(s.project / "limiter.py"), "old_string": "a", "new_string": "b"})
    s.status()
    s.usage(20_000 + 60_000)
    s.prompt("add a test for the limiter burst in the login API")
    assert not any("/clear" in m for m in _messages(s, 1))
    s.prompt("Write a release announcement blog post about the kubernetes helm chart upgrade")
    assert any("/clear" in a for a in s.status()["advice"])
    msgs = _messages(s)
    assert len(msgs) == 1 and "/clear" in msgs[0] and "unrelated" in msgs[0], msgs


def test_session_start_compact_lists_what_the_matrix_keeps(daemon: Any) -> None:
    """SessionStart(compact) lists the window's tool output that the phase keeps or summarizes: in
    planning the exploratory reads are archived, so not listed, and stay recallable; the prompt's open
    item is carried as an unresolved item (the conversation itself is the summary's to carry)."""
    s = Session(daemon, sid="a7a7a7a7-2222-3333-4444-555555555555")
    s.usage(30_000)
    s.hook("SessionStart", source="startup")
    s.prompt("We need an importer for the quarterly CSV exports. TODO: handle quoted newlines")
    for i in range(2):
        s.tool("Read", {"file_path": str(s.project / f"legacy{i}.py")}, {"file": {"content": f"def legacy{i}(): pass"}})
    assert s.status()["phase"] == "planning"
    s.hook("PreCompact", trigger="manual", custom_instructions="")
    ctx = s.hook("SessionStart", source="compact")["hookSpecificOutput"]["additionalContext"]
    assert "quoted newlines" in ctx and "[prompt]" not in ctx
    assert "legacy0" not in ctx and "legacy1" not in ctx
    assert s.recall("legacy0")["total"] >= 1


def test_matrix_override_drives_compact_content(daemon_factory: Any) -> None:
    """CTXLIFED_MATRIX="planning.pending=archive": in planning neither SessionStart(compact) nor
    PostCompact's re-injection presents the open item; in implementation (not overridden) it is listed."""
    d = daemon_factory(CTXLIFED_MATRIX="planning.pending=archive").start()

    def run(sid: str, prompt: str, phase: str) -> tuple[str, str]:
        s = Session(d, sid=sid)
        s.usage(30_000)
        s.hook("SessionStart", source="startup")
        s.prompt(prompt)
        assert s.status()["phase"] == phase
        s.hook("PreCompact", trigger="manual", custom_instructions="")
        ctx = s.hook("SessionStart", source="compact")["hookSpecificOutput"]["additionalContext"]
        r = d.call("hook", s.base("PostCompact", trigger="manual", compact_summary="We talked about CSV."))
        return ctx, r["stdout"]

    ctx, post = run("a8a8a8a8-2222-3333-4444-555555555555",
                    "We need an importer for the quarterly CSV exports. TODO: handle quoted newlines", "planning")
    assert "quarterly CSV exports" in post  # the goal the summary lost is re-injected
    assert "Unresolved items" not in ctx and "Pending:" not in post
    ctx, post = run("a9a9a9a9-2222-3333-4444-555555555555",
                    "Let's implement the importer for the CSV exports. TODO: handle quoted newlines", "implementation")
    assert "Unresolved items (1):\n- TODO: handle quoted newlines" in ctx


def test_rewind_when_a_flaky_test_keeps_failing_with_other_figures(daemon: Any) -> None:
    """The same test failing three times, its assertion figures changing ("9 != 10", "8 != 10"), is the
    same failure: /rewind is suggested, naming the test."""
    s = Session(daemon, sid="a8a8a8a8-2222-3333-4444-555555555555")
    s.usage(20_000)
    s.prompt("Fix the flaky test_parallel_upload, find the race.")
    for i, got in enumerate((9, 8, 9)):
        s.tool("Edit", {"file_path": str(s.project / "pool.py"), "old_string": f"{i}", "new_string": f"{i + 1}"})
        s.fail("Bash", {"command": "pytest -q tests/test_upload.py -k parallel"},
               f"Exit code 1\nFAILED tests/test_upload.py::test_parallel_upload - AssertionError: {got} != 10\n"
               "1 failed, 12 deselected in 0.52s")
    msgs = _messages(s)
    assert len(msgs) == 1 and "/rewind" in msgs[0], msgs
    assert "the same failure 3 times in a row (tests/test_upload.py::test_parallel_upload)" in msgs[0]


def test_subagent_when_the_request_asks_for_a_sweep(daemon: Any) -> None:
    """A request to read through all the services: three reads show the sweep under way in the main window,
    and a subagent is suggested then, once; the same reads after an ordinary question advise nothing."""
    s = Session(daemon, sid="a9a9a9a9-2222-3333-4444-555555555555")
    s.usage(20_000)
    s.prompt("How is authentication done across all our services? Read through the handlers and tell me.")
    for name in ("gateway", "billing", "accounts"):
        s.tool("Read", {"file_path": str(s.project / name / "handlers.py")}, {"file": {"content": "x = 1"}})
    msgs = _messages(s)
    assert len(msgs) == 1 and "subagent" in msgs[0] and "of the sweep this request asks for" in msgs[0], msgs
    s.prompt("how does the gateway check tokens?")
    for name in ("a", "b", "c"):
        s.tool("Read", {"file_path": str(s.project / name / "tokens.py")}, {"file": {"content": "x = 1"}})
    assert not any("subagent" in m for m in _messages(s))


def test_session_start_compact_leaves_out_a_failure_that_has_passed_since(daemon: Any) -> None:
    """A red run that a later green run of the same tests covers is history: SessionStart(compact) does
    not list it as something the window held (it stays recallable)."""
    s = Session(daemon, sid="aaaaaaaa-2222-3333-4444-555555555555")
    s.usage(20_000)
    s.prompt("Let's implement the incremental index.")
    s.tool("Edit", {"file_path": str(s.project / "index.py"), "old_string": "a", "new_string": "b"})
    s.fail("Bash", {"command": "pytest -q tests/test_index.py"},
           "Exit code 1\nFAILED tests/test_index.py::test_update_one - sqlite3.OperationalError: no such table\n"
           "1 failed in 0.30s")
    s.tool("Edit", {"file_path": str(s.project / "schema.py"), "old_string": "", "new_string": "CREATE TABLE t"})
    s.tool("Bash", {"command": "pytest -q tests/test_index.py"}, {"stdout": "1 passed in 0.28s", "stderr": ""})
    s.status()
    s.hook("PreCompact", trigger="manual", custom_instructions="")
    ctx = s.hook("SessionStart", source="compact")["hookSpecificOutput"]["additionalContext"]
    assert "schema.py" in ctx and "index.py" in ctx
    assert "FAILED" not in ctx and "test_update_one" not in ctx
    assert s.recall("test_update_one")["total"] >= 1
