"""The hook pipeline's decode step (``service/pipeline.py``): the payload is decoded once into its
typed event; the stored row keeps the (redacted) payload itself and the routing fields come from the
typed event."""

from __future__ import annotations

import msgspec

from ctxlifed.core.hook_events import PostToolUseFailure, UnknownHook
from ctxlifed.service import pipeline

SID = "0b7f3c1e-2a4d-4c6b-9e8f-1a2b3c4d5e6f"


def test_decode_routes_on_the_typed_event_and_stores_the_payload_itself() -> None:
    payload = {"hook_event_name": "PostToolUseFailure", "session_id": SID, "cwd": "/nonexistent/p",
               "tool_name": "Bash", "tool_input": {"command": "pytest"}, "error": "boom", "extra": [1, 2]}
    inc = pipeline.decode(payload, now=5.0, redact=False, source="hook", rid="r1")
    assert isinstance(inc.hook, PostToolUseFailure) and inc.hook.error == "boom"
    assert (inc.event, inc.sid, inc.cwd, inc.row.tool, inc.row.session) == ("PostToolUseFailure", SID, "/nonexistent/p",
                                                                            "Bash", SID)
    assert msgspec.json.decode(inc.row.payload) == payload  # unknown fields kept in what is stored


def test_an_unknown_event_keeps_its_tool_in_the_stored_row() -> None:
    payload = {"hook_event_name": "PostToolUseSomeday", "session_id": SID, "tool_name": "Bash"}
    inc = pipeline.decode(payload, now=0.0, redact=False, source="hook", rid=None)
    assert inc.hook == UnknownHook(hook_event_name="PostToolUseSomeday", session_id=SID, tool_name="Bash")
    assert (inc.event, inc.row.tool) == ("PostToolUseSomeday", "Bash")
    bad = pipeline.decode({"hook_event_name": "Stop", "session_id": "not a session", "tool_name": 3}, now=0.0,
                          redact=False, source="hook", rid=None)
    assert (bad.event, bad.sid, bad.row.session, bad.row.tool) == ("Stop", "", "_invalid", None)
