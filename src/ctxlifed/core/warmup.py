"""Start-up work paid before the daemon says READY, not by the first hook that arrives.

The hot path compiles its regular expressions on first use (redaction rules, test-output and
command parsers, fact detection, phase signals, the transcript parser): in a fresh process the first
events of a session paid that, on top of the hook Claude Code was waiting for (usually SessionStart).
``warm_up`` compiles every redaction rule and runs the pure hot path once on a small synthetic
session, so those patterns exist (and are frozen with the other start-up objects) before the first
request.

Rules:
- Pure: no I/O, no state kept beyond what the functions it calls cache themselves (compiled
  patterns, memoised key checks); its results are thrown away.
- Synthetic data only, shaped like Claude Code's hook payloads and transcript lines.
- Never fails the start: a function that raises on this input is a bug to fix, not a reason to
  stay down; the caller logs it and goes on.
"""

from __future__ import annotations

from typing import Any

from . import classify, phase, summarize
from . import lessons as LS
from . import transcript as T
from .events import elements_from_event
from .hook_events import PostToolUse, PostToolUseFailure, UserPromptSubmit, decode_hook
from .redact import compile_all, redact_obj

_SID = "00000000-0000-4000-8000-000000000000"
_CWD = "/nonexistent/warmup"
_FAILING = ("F.\n======================================================================\n"
            "FAIL: test_bulk (test_pricing.T.test_bulk)\n"
            "----------------------------------------------------------------------\n"
            "Traceback (most recent call last):\n  File \"test_pricing.py\", line 9, in test_bulk\n"
            "    self.assertEqual(total([('pen', 10, 150)]), 1350)\nAssertionError: 1500 != 1350\n\n"
            "----------------------------------------------------------------------\nRan 2 tests in 0.001s\n\n"
            "FAILED (failures=1)\n")
_PASSING = "..\n----------------------------------------------------------------------\nRan 2 tests in 0.001s\n\nOK\n"


def _payload(event: str, **kw: Any) -> dict[str, Any]:
    return {"session_id": _SID, "transcript_path": f"{_CWD}/t.jsonl", "cwd": _CWD, "hook_event_name": event, **kw}


SAMPLES: tuple[dict[str, Any], ...] = (
    _payload("SessionStart", source="startup", model="claude-sonnet-4-5"),
    _payload("UserPromptSubmit", prompt="We decided to keep amounts in integer cents; they must not become floats. "
                                        "TODO: document the rule. export API_TOKEN=warmup-not-a-secret password=x"),
    _payload("PostToolUse", tool_name="Read", tool_use_id="toolu_w1", tool_input={"file_path": f"{_CWD}/pricing.py"},
             tool_response={"type": "text", "file": {"filePath": f"{_CWD}/pricing.py",
                                                     "content": "def total(items):\n    return 0\n"}}),
    _payload("PostToolUse", tool_name="Bash", tool_use_id="toolu_w2",
             tool_input={"command": "python3 -m unittest test_pricing", "description": "Run the tests"},
             tool_response={"stdout": _FAILING, "stderr": "", "interrupted": False}),
    _payload("PostToolUseFailure", tool_name="Bash", tool_use_id="toolu_w3",
             tool_input={"command": "pytest -q tests/test_pricing.py"}, error="Exit code 1\n" + _FAILING),
    _payload("PostToolUse", tool_name="Edit", tool_use_id="toolu_w4",
             tool_input={"file_path": f"{_CWD}/pricing.py", "old_string": "return 0", "new_string": "return 1"},
             tool_response={"filePath": f"{_CWD}/pricing.py", "structuredPatch": []}),
    _payload("PostToolUse", tool_name="Bash", tool_use_id="toolu_w5",
             tool_input={"command": "git status --short && npm test"}, tool_response={"stdout": _PASSING, "stderr": ""}),
    _payload("Stop", stop_hook_active=False),
)

_LINE = (b'{"type":"assistant","uuid":"w-1","timestamp":"2026-01-01T00:00:00.000Z","sessionId":"' + _SID.encode()
         + b'","message":{"id":"msg_w","type":"message","role":"assistant","model":"claude-sonnet-4-5",'
         b'"content":[{"type":"text","text":"Done: the tests pass."}],"usage":{"input_tokens":10,'
         b'"cache_creation_input_tokens":0,"cache_read_input_tokens":1000,"output_tokens":5}}}\n')


def warm_up() -> int:
    """Compile every redaction rule and run the hot path once on the synthetic session; returns the
    number of elements it derived."""
    compile_all()
    n = 0
    for raw in SAMPLES:
        payload, _ = redact_obj(raw)
        event = decode_hook(payload)
        elements = elements_from_event(event, ts=0.0)
        for el in elements:
            classify.detect_facts(el.text)
            classify.priority(el, "implementation")
            summarize.summarize(el)
        n += len(elements)
        LS.classify_hook(event, event_id=0, ts=0.0)
        if isinstance(event, UserPromptSubmit):
            phase.signals_from_prompt(event.prompt)
        elif isinstance(event, (PostToolUse, PostToolUseFailure)):
            phase.signals_from_tool(event.tool_name, event.tool_input)
    _cursor, delta = T.feed(T.TranscriptCursor(), _LINE)
    for el in delta.elements:
        classify.detect_facts(el.text)
        summarize.summarize(el)
    return n + len(delta.elements)
