"""core.compress_policy: keep or digest per output; never-compress cases; answers in the original's shape;
fail safe on unknown shapes."""

from __future__ import annotations

import pytest

from ctxlifed.core.compress_policy import (
    BASH_KEYS,
    CompressSettings,
    asked_verbatim,
    decide,
    output_text,
    post_tool_use_answer,
    saved_output,
    worth_replacing,
)
from ctxlifed.core.hook_events import PostToolUse, decode_hook


def post(tool: str, tool_input: object, tool_response: object) -> PostToolUse:
    """The typed event of a PostToolUse payload with these fields (decoded as the daemon decodes)."""
    ev = decode_hook({"hook_event_name": "PostToolUse", "tool_name": tool, "tool_input": tool_input,
                      "tool_response": tool_response})
    assert isinstance(ev, PostToolUse)
    return ev


def bash(stdout: str, **extra: object) -> dict:
    return {"stdout": stdout, "stderr": "", "interrupted": False, "isImage": False, "noOutputExpected": False, **extra}


LOG = "".join(f"2026-12-01 10:00:{i % 60:02d} INFO step {i} done fine\n" for i in range(2000))  # ~14k tokens
MID = "".join(f"row {i}: value {i * 3} and some words\n" for i in range(400))  # ~3.5k tokens


def test_level_thresholds() -> None:
    cmd = {"command": "python run.py"}
    assert decide(post("Bash", cmd, bash(MID)), level=0, phase=None) is None  # under the level-0 threshold
    d = decide(post("Bash", cmd, bash(MID)), level=1, phase=None)
    assert d is not None and d.kind == "other" and not d.cut_by_claude
    assert decide(post("Bash", cmd, bash("x\n" * 100)), level=3, phase=None) is None  # tiny: never
    assert decide(post("Bash", cmd, bash(MID)), level=1, phase=None, settings=CompressSettings(compress_outputs="off")) is None


def test_level_0_replaces_what_claude_code_would_cut() -> None:
    big = "word " * 7000  # 35,000 chars: Claude Code shows a 2 KB preview
    d = decide(post("Bash", {"command": "python gen.py"}, bash(big)), level=0, phase=None)
    assert d is not None and d.cut_by_claude
    persisted = bash(MID[:30000], persistedOutputPath="/home/u/.claude/projects/p/s/tool-results/a.txt",
                     persistedOutputSize=90000)
    d = decide(post("Bash", {"command": "python gen.py"}, persisted), level=0, phase=None)
    assert d is not None and d.cut_by_claude and not d.complete and d.original_tokens >= 90000 // 4
    d = decide(post("Bash", {"command": "python gen.py"}, persisted), level=0, phase=None, full_text=LOG)
    assert d is not None and d.complete and d.text == LOG


# Claude Code 2.1.328's whole tool_response for an MCP result over its token limit (first lines, verbatim).
MCP_SAVED_PATH = "/home/u/.claude/projects/-p/0e1b/tool-results/mcp-logs-tail-1796263540160-sa8jcf.txt"
MCP_SAVED = (f"Error: result (115,369 characters across 2,001 lines) exceeds maximum allowed tokens. Output has been"
             f" saved to {MCP_SAVED_PATH}.\nFormat: Plain text\nUse offset and limit parameters to read specific"
             " portions of the file, search within it for specific content, and jq to make structured queries.\n"
             "REQUIREMENTS FOR SUMMARIZATION/ANALYSIS/REVIEW:\n- You MUST read the content from the file at"
             f" {MCP_SAVED_PATH} in sequential chunks until 100% of the content has been read.\n")


@pytest.mark.parametrize("response", [MCP_SAVED, [{"type": "text", "text": MCP_SAVED}]])
def test_an_mcp_result_claude_code_saved_to_a_file_is_replaced_from_that_file(response: object) -> None:
    ev = post("mcp__logs__tail", {"n": 2000}, response)
    assert saved_output(ev) == (MCP_SAVED_PATH, 115_369)
    d = decide(ev, level=0, phase="testing")
    assert d is not None and d.cut_by_claude and not d.complete and d.original_tokens >= 115_369 // 4
    d = decide(ev, level=0, phase="testing", full_text=LOG)
    assert d is not None and d.complete and d.text == LOG and d.kind == "log"
    assert post_tool_use_answer("mcp__logs__tail", response, "digest") is not None


@pytest.mark.parametrize("tool,response", [
    ("Bash", bash(MCP_SAVED)),  # a Bash output that prints the notice is just text
    ("mcp__logs__tail", MCP_SAVED.replace("Error: result", "Note: result")),
    ("mcp__logs__tail", "see " + MCP_SAVED),
    ("mcp__logs__tail", MCP_SAVED + "x" * 20_000),  # not the notice: too long
    ("mcp__logs__tail", [{"type": "text", "text": MCP_SAVED}, {"type": "text", "text": "more"}]),
    ("mcp__logs__tail", MCP_SAVED.replace(MCP_SAVED_PATH, "relative/path.txt")),
])
def test_only_claude_codes_own_notice_names_a_saved_mcp_result(tool: str, response: object) -> None:
    ev = post(tool, {"command": "echo"} if tool == "Bash" else {}, response)
    assert saved_output(ev) == ("", None)


def test_phase_matrix_keeps_failing_tests_and_compiler_errors_longer() -> None:
    failing = "".join(f"tests/t.py::test_{i} PASSED\n" for i in range(700)) + "FAILED tests/t.py::test_x - assert 1\n"
    cmd = {"command": "pytest -v"}
    assert decide(post("Bash", cmd, bash(failing)), level=1, phase="implementation") is not None
    assert decide(post("Bash", cmd, bash(failing)), level=1, phase="testing") is None  # kept verbatim up to the cap
    errors = "".join(f"a.c:{i}:1: error: bad {i} thing in the code here\n" for i in range(300))
    assert decide(post("Bash", {"command": "make"}, bash(errors)), level=1, phase="implementation") is None
    assert decide(post("Bash", {"command": "make"}, bash(errors)), level=1, phase="design") is not None
    assert decide(post("Bash", {"command": "make"}, bash(errors)), level=3, phase="implementation",
                  settings=CompressSettings(keep_errors_tokens=1000)) is not None
    # a cut output is replaced whatever the phase: verbatim it would be a head-only preview
    huge = failing * 2
    assert len(huge) > 30000
    assert decide(post("Bash", cmd, bash(huge)), level=1, phase="testing") is not None


@pytest.mark.parametrize("command", [
    "cat src/app.py", "cd repo && cat README.md", "sed -n '1,200p' a.py", "head -n 100 big.log", "tail -50 x.log",
    "cat a.py | head -40", "pytest -v 2>&1 | tail -80", "git diff src/app.py", "git diff -- a.py b.py",
    "git show HEAD:src/app.py", "nl -ba f.py", "cat 'unbalanced",
])
def test_never_compress_what_the_model_asked_to_see(command: str) -> None:
    assert asked_verbatim(command, edited_paths={"/w/repo/b.py"})
    assert decide(post("Bash", {"command": command}, bash(LOG)), level=3, phase=None, edited_paths={"/w/repo/b.py"}) is None


@pytest.mark.parametrize("command", [
    "cat *.log", "git diff", "git diff HEAD~3 -- src", "pytest -v", "grep -rn foo .", "cat a.log | grep ERROR | sort",
    "git log -n 50", "find . -name '*.py'",
])
def test_other_commands_are_not_verbatim_requests(command: str) -> None:
    assert not asked_verbatim(command)
    assert decide(post("Bash", {"command": command}, bash(LOG)), level=1, phase=None) is not None


def test_git_diff_of_an_edited_file_is_kept() -> None:
    assert asked_verbatim("git diff -- src/a.py src/b.py", edited_paths={"/w/src/b.py"})
    assert not asked_verbatim("git diff -- src/a.py src/b.py", edited_paths={"/w/src/c.py"})


@pytest.mark.parametrize("tool,response", [
    ("Read", {"type": "text", "file": {"content": LOG}}),
    ("Bash", bash(LOG, interrupted=True)),
    ("Bash", bash(LOG, isImage=True)),
    ("Bash", {"stdout": LOG}),  # no interrupted key is fine ... see below
    ("Bash", {**bash(LOG), "somethingNew": 1}),
    ("Bash", {**bash(LOG), "stdout": 5}),
    ("Bash", "just a string"),
    ("mcp__srv__tool", [{"type": "image", "data": "AAAA", "mimeType": "image/png"}, {"type": "text", "text": LOG}]),
    ("mcp__srv__tool", {"content": [{"type": "text", "text": LOG}], "structuredContent": {"a": 1}}),
    ("mcp__srv__tool", {"result": LOG}),
    ("mcp__srv__tool", 42),
    ("mcp__srv__tool", [{"type": "text", "text": LOG, "extra": 1}]),
])
def test_unknown_or_protected_shapes_keep_the_original(tool: str, response: object) -> None:
    d = decide(post(tool, {"command": "python x.py"}, response), level=3, phase=None)
    answer = post_tool_use_answer(tool, response, "digest")
    if tool == "Bash" and response == {"stdout": LOG}:
        assert d is not None and answer is not None  # a Bash output without the flags is still Bash text
        return
    assert d is None
    assert answer is None


def test_bash_answer_has_exactly_the_bash_shape() -> None:
    resp = bash(LOG, persistedOutputPath="/p/a.txt", persistedOutputSize=99999, noOutputExpected=False)
    a = post_tool_use_answer("Bash", resp, "the digest")
    assert a == {"hookSpecificOutput": {"hookEventName": "PostToolUse", "updatedToolOutput": {
        "stdout": "the digest", "stderr": "", "interrupted": False, "isImage": False, "noOutputExpected": False}}}
    assert tuple(a["hookSpecificOutput"]["updatedToolOutput"]) == BASH_KEYS


def test_answer_carries_additional_context_too() -> None:
    a = post_tool_use_answer("Bash", bash(LOG), "d", additional_context="Lesson: run make venv first.")
    assert a is not None
    hso = a["hookSpecificOutput"]
    assert hso["additionalContext"] == "Lesson: run make venv first." and hso["updatedToolOutput"]["stdout"] == "d"


def test_mcp_answer_keeps_the_original_type() -> None:
    assert post_tool_use_answer("mcp__s__t", LOG, "d") == {
        "hookSpecificOutput": {"hookEventName": "PostToolUse", "updatedMCPToolOutput": "d"}}
    blocks = [{"type": "text", "text": LOG[:100]}, {"type": "text", "text": LOG[100:]}]
    assert output_text("mcp__s__t", blocks) == LOG[:100] + "\n" + LOG[100:]
    a = post_tool_use_answer("mcp__s__t", blocks, "d")
    assert a is not None and a["hookSpecificOutput"]["updatedMCPToolOutput"] == [{"type": "text", "text": "d"}]
    obj = {"content": [{"type": "text", "text": LOG}], "isError": False}
    a = post_tool_use_answer("mcp__s__t", obj, "d")
    assert a is not None and a["hookSpecificOutput"]["updatedMCPToolOutput"] == {
        "content": [{"type": "text", "text": "d"}], "isError": False}
    d = decide(post("mcp__s__t", {"q": 1}, obj), level=1, phase=None)
    assert d is not None and d.kind == "log" and not d.cut_by_claude


def test_worth_replacing_needs_a_real_saving() -> None:
    assert worth_replacing(1000, 500)
    assert not worth_replacing(1000, 800)
    assert not worth_replacing(0, 0)


def test_empty_output_is_kept() -> None:
    assert decide(post("Bash", {"command": "true"}, bash("")), level=3, phase=None) is None
    assert decide(post("Bash", {"command": "true"}, bash("   \n\n")), level=3, phase=None) is None


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=30)),
    lambda kids: st.one_of(st.lists(kids, max_size=4), st.dictionaries(
        st.sampled_from(["stdout", "stderr", "interrupted", "isImage", "noOutputExpected", "content", "type", "text",
                         "isError", "persistedOutputPath", "persistedOutputSize", "x"]), kids, max_size=6)),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(tool=st.sampled_from(["Bash", "mcp__a__b", "Read", ""]), response=_JSON, tool_input=_JSON,
       level=st.integers(-2, 9), phase=st.sampled_from([None, "testing", "implementation", "review", "x"]))
def test_any_payload_shape_never_raises(tool: str, response: object, tool_input: object, level: int, phase: str | None) -> None:
    """Unknown shapes give None (keep the original); known ones give a decision or None; nothing raises."""
    decide(post(tool, tool_input, response), level=level, phase=phase, settings=CompressSettings(compress_outputs="aggressive"))
    a = post_tool_use_answer(tool, response, "digest")
    if a is not None:
        hso = a["hookSpecificOutput"]
        assert hso["hookEventName"] == "PostToolUse"
        assert ("updatedToolOutput" in hso) == (tool == "Bash")
        if tool == "Bash":
            assert tuple(hso["updatedToolOutput"]) == BASH_KEYS
