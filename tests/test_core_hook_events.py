"""core.hook_events: every real payload decodes to its typed event; a wrong-typed field falls back to its
default and keeps the others; unknown events and fields are tolerated; nothing raises on a JSON object."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxlifed.core import hook_events as H
from ctxlifed.core.hook_events import (
    HOOK_EVENTS,
    PostToolUse,
    PostToolUseFailure,
    PreCompact,
    SessionStart,
    Stop,
    SubagentStop,
    ToolHook,
    UnknownHook,
    decode_hook,
    decode_hook_json,
)

FIXTURES = Path(__file__).parent / "fixtures" / "claude-code"
SPEC_EVENTS = {  # the hooks spec's catalogue (section 1.1, CLI 2.1.328) and 2.1.332's addition
    "SessionStart", "Setup", "InstructionsLoaded", "UserPromptSubmit", "UserPromptExpansion", "MessageDisplay",
    "PreToolUse", "PermissionRequest", "PermissionDenied", "PostToolUse", "PostToolUseFailure", "PostToolBatch",
    "Notification", "SubagentStart", "SubagentStop", "TaskCreated", "TaskCompleted", "Stop", "StopFailure",
    "TeammateIdle", "ConfigChange", "CwdChanged", "DirectoryAdded", "FileChanged", "WorktreeCreate",
    "WorktreeRemove", "PreCompact", "PostCompact", "PreModelSwitch", "PostModelSwitch", "Elicitation",
    "ElicitationResult", "SessionEnd", "PreSkillShellCommand",
}


def fixture_payloads() -> list[dict[str, Any]]:
    out = [v["payload"] for v in json.loads((FIXTURES / "event_samples.json").read_text()).values()]
    for path in sorted((FIXTURES / "runs").glob("*/hooks.jsonl")):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if isinstance(rec.get("payload"), dict):
                out.append(rec["payload"])
    return out


PAYLOADS = fixture_payloads()


def field_values(event: Any) -> dict[str, Any]:
    return {f.name: getattr(event, f.name) for f in msgspec.structs.fields(type(event))}


def test_every_spec_event_has_its_class() -> None:
    assert set(HOOK_EVENTS) == SPEC_EVENTS
    for name, cls in HOOK_EVENTS.items():
        assert cls.__name__ == name and cls(session_id="s").hook_event_name == name


def test_every_fixture_payload_decodes_to_its_event_with_every_field() -> None:
    assert len(PAYLOADS) > 300
    names = set()
    for p in PAYLOADS:
        ev = decode_hook(p)
        names.add(ev.hook_event_name)
        assert type(ev) is HOOK_EVENTS[p["hook_event_name"]]
        # every key of a real payload is a typed field: nothing Claude Code sends is left unread
        encoded = {f.encode_name: f.name for f in msgspec.structs.fields(type(ev))}
        assert set(p) - {"hook_event_name"} <= set(encoded), set(p) - set(encoded)
        for key, value in p.items():
            if key != "hook_event_name":
                assert getattr(ev, encoded[key]) == value
        assert decode_hook_json(msgspec.json.encode(p)) == ev
    assert {"SessionStart", "PostToolUse", "PostToolUseFailure", "PreCompact", "PostCompact", "Stop", "SubagentStop",
            "UserPromptSubmit", "SessionEnd", "Notification", "PostToolBatch"} <= names


def test_fixture_fields_are_typed() -> None:
    samples = {k: v["payload"] for k, v in json.loads((FIXTURES / "event_samples.json").read_text()).items()}
    resume = decode_hook(samples["SessionStart:resume"])
    assert isinstance(resume, SessionStart) and resume.source == "resume"
    assert isinstance(resume.context_tokens, int) and isinstance(resume.prompt_cache_likely_expired, bool)
    bash = decode_hook(samples["PostToolUse:Bash"])
    assert isinstance(bash, PostToolUse) and isinstance(bash, ToolHook)
    assert bash.tool_name == "Bash" and bash.input_text("command") and bash.tool_use_id.startswith("toolu_")
    assert isinstance(bash.tool_response, dict) and bash.input_text("no such key") == ""
    failure = decode_hook(samples["PostToolUseFailure:Bash"])
    assert isinstance(failure, PostToolUseFailure) and failure.error
    auto = decode_hook(samples["PreCompact:auto"])
    assert isinstance(auto, PreCompact) and auto.trigger == "auto" and auto.custom_instructions is None
    sub = decode_hook(samples["SubagentStop:agent_type=''"])
    assert isinstance(sub, SubagentStop) and not isinstance(sub, Stop) and sub.agent_type == ""


def test_persisted_output_fields() -> None:
    ev = decode_hook({"hook_event_name": "PostToolUse", "tool_name": "Bash",
                      "tool_response": {"stdout": "x", "persistedOutputPath": "/p/o.txt", "persistedOutputSize": 90000}})
    assert isinstance(ev, PostToolUse)
    assert ev.persisted_output_path == "/p/o.txt" and ev.persisted_output_size == 90000
    odd = decode_hook({"hook_event_name": "PostToolUse", "tool_response": {"persistedOutputPath": 3,
                                                                           "persistedOutputSize": True}})
    assert isinstance(odd, PostToolUse) and odd.persisted_output_path == "" and odd.persisted_output_size is None
    assert PostToolUse(tool_response="text").persisted_output_path == ""


def _wrong_value(typ: Any) -> Any | None:
    """A JSON value of the wrong type for a field of type ``typ`` (None when every value fits)."""
    for candidate in ({"wrong": 1}, ["wrong"], "wrong", 1.5, True):
        try:
            msgspec.convert(candidate, typ)
        except msgspec.ValidationError:
            return candidate
    return None


def _full_sample(cls: type) -> dict[str, Any]:
    """A payload of ``cls`` with every field set to a valid non-default value."""
    sample = {"str": "v", "int": 7, "float": 2.5, "bool": True}
    p: dict[str, Any] = {"hook_event_name": cls.__name__}
    for f in msgspec.structs.fields(cls):
        t = f.type
        args = getattr(t, "__args__", ())
        origin = getattr(t, "__origin__", None)
        base = next((a for a in (t, *args) if isinstance(a, type) and a.__name__ in sample), None)
        if t is Any:
            p[f.encode_name] = {"any": [1, "x"]}
        elif origin is dict:
            p[f.encode_name] = {"k": "v"}
        elif origin is list:
            p[f.encode_name] = [{"k": "v"}] if args and getattr(args[0], "__origin__", None) is dict else ["v"]
        elif base is not None:  # str, int, float, bool, or one of them | None
            p[f.encode_name] = sample[base.__name__]
        else:
            raise AssertionError(f"no sample for {cls.__name__}.{f.name}: {t}")
    return p


@pytest.mark.parametrize("name", sorted(HOOK_EVENTS))
def test_a_wrong_typed_field_gets_its_default_and_the_others_stay(name: str) -> None:
    cls = HOOK_EVENTS[name]
    good = _full_sample(cls)
    whole = decode_hook(good)
    assert type(whole) is cls
    expected = field_values(whole)
    assert all(v not in ("", None, [], {}, 0, False) for v in expected.values())  # every field set
    checked = 0
    for f in msgspec.structs.fields(cls):
        wrong = _wrong_value(f.type)
        if wrong is None:
            continue  # an Any field takes every value
        ev = decode_hook({**good, f.encode_name: wrong})
        assert type(ev) is cls
        got = field_values(ev)
        default = f.default if f.default is not msgspec.NODEFAULT else f.default_factory()
        assert got[f.name] == default
        assert {k: v for k, v in got.items() if k != f.name} == {k: v for k, v in expected.items() if k != f.name}
        assert decode_hook_json(msgspec.json.encode({**good, f.encode_name: wrong})) == ev
        checked += 1
    assert checked >= 8  # the common fields at least


def test_several_wrong_fields_at_once() -> None:
    ev = decode_hook({"hook_event_name": "PostToolUse", "tool_name": 5, "tool_input": ["x"], "cwd": "/w",
                      "tool_use_id": "toolu_1", "tool_response": {"stdout": "ok"}, "duration_ms": "slow",
                      "session_id": None})
    assert ev == PostToolUse(cwd="/w", tool_use_id="toolu_1", tool_response={"stdout": "ok"})


def test_unknown_events_and_fields() -> None:
    ev = decode_hook({"hook_event_name": "FutureEvent", "session_id": "s1", "cwd": 3, "novel": {"a": 1}})
    assert ev == UnknownHook(hook_event_name="FutureEvent", session_id="s1")
    assert decode_hook({"session_id": "s1"}) == UnknownHook(session_id="s1")
    assert decode_hook({"hook_event_name": 42, "cwd": "/w"}) == UnknownHook(cwd="/w")
    assert decode_hook({"hook_event_name": "Stop", "last_assistant_message": "hi", "brand_new": [1]}) == Stop(
        last_assistant_message="hi")
    for not_an_object in ([], "Stop", 3, None, b"{}"):
        assert decode_hook(not_an_object) == UnknownHook()
    assert decode_hook_json(b'{"hook_event_name":"Nope","prompt_id":"p"}') == UnknownHook(hook_event_name="Nope",
                                                                                           prompt_id="p")
    with pytest.raises(msgspec.DecodeError):
        decode_hook_json(b"{not json")


def test_the_typed_path_needs_no_copy_of_large_texts() -> None:
    body = "x" * 1_000_000
    ev = decode_hook({"hook_event_name": "PostToolUse", "tool_name": "Write", "tool_input": {"content": body},
                      "tool_response": {"content": body}})
    assert isinstance(ev, PostToolUse)
    assert ev.tool_input["content"] is body and ev.tool_response["content"] is body


_KEYS = st.sampled_from(sorted({f.encode_name for cls in HOOK_EVENTS.values() for f in msgspec.structs.fields(cls)}
                               | {"hook_event_name", "other"})) | st.text(max_size=8)
# Every JSON value. JSON has no infinity or NaN (msgspec writes them as null), so the floats are finite:
# the JSON decode below must see the same payload as the dict decode.
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=6), kids, max_size=4),
    max_leaves=12,
)
_NAMES = st.sampled_from(sorted(HOOK_EVENTS)) | st.text(max_size=12) | _JSON


@settings(max_examples=400, deadline=None)
@given(name=_NAMES, body=st.dictionaries(_KEYS, _JSON, max_size=10))
def test_decode_never_raises_on_a_json_object(name: Any, body: dict[str, Any]) -> None:
    payload = {**body, "hook_event_name": name}
    ev = decode_hook(payload)
    assert isinstance(ev, (H.HookEvent, UnknownHook))
    if isinstance(name, str) and name in HOOK_EVENTS:
        assert type(ev) is HOOK_EVENTS[name]
        # a field that had the right type is kept as sent
        for f in msgspec.structs.fields(type(ev)):
            if f.encode_name in payload:
                try:
                    want = msgspec.convert(payload[f.encode_name], f.type)
                except msgspec.ValidationError:
                    continue
                assert getattr(ev, f.name) == want
    else:
        assert isinstance(ev, UnknownHook) and ev.hook_event_name == (name if isinstance(name, str) else "")
    assert decode_hook_json(msgspec.json.encode(payload)) == ev


def test_the_module_is_pure_msgspec() -> None:
    import ast

    tree = ast.parse(Path(H.__file__).read_text(encoding="utf-8"))
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert names <= {"__future__", "dataclasses", "typing", "msgspec"}, names


# --------------------------------------------------------------------------- typed consumers

def test_core_consumers_read_typed_events_built_without_a_dict() -> None:
    from ctxlifed.core.events import elements_from_event
    from ctxlifed.core.lessons import classify_hook
    from ctxlifed.core.model import Kind

    run = PostToolUse(tool_name="Bash", tool_input={"command": "pytest -q"}, tool_use_id="toolu_9", cwd="/w",
                      tool_response={"stdout": "FAILED tests/t.py::test_x - assert 1 == 2\n1 failed in 0.1s",
                                     "stderr": "", "interrupted": False})
    [el] = elements_from_event(run, ts=3.0)
    assert el.kind is Kind.TEST_RESULT and el.uid == "toolu_9" and el.command == "pytest -q"
    ev = classify_hook(run, event_id=4, ts=3.0)
    assert ev is not None and ev.kind == "fail" and ev.command == "pytest -q"
    failure = PostToolUseFailure(tool_name="Read", tool_input={"file_path": "/w/src/a.py"}, error="File not found",
                                 cwd="/w", tool_use_id="toolu_8")
    [el] = elements_from_event(failure, ts=1.0)
    assert el.kind is Kind.ERROR and el.is_error and "File not found" in el.text
    got = classify_hook(failure, event_id=5, ts=1.0)
    assert got is not None and got.kind == "fail" and got.file_path == "src/a.py"
    assert classify_hook(PostToolUseFailure(tool_name="Bash", is_interrupt=True), event_id=1, ts=0.0) is None
    assert classify_hook(UnknownHook(hook_event_name="PostToolUse"), event_id=1, ts=0.0) is None
    assert elements_from_event(SubagentStop(agent_type="", last_assistant_message="summary"), ts=0.0) == []
    [msg] = elements_from_event(SubagentStop(agent_type="general-purpose", last_assistant_message="done"), ts=0.0)
    assert msg.kind is Kind.ASSISTANT
    assert elements_from_event(PreCompact(trigger="auto"), ts=0.0) == []
    [ci] = elements_from_event(PreCompact(trigger="manual", custom_instructions="keep the API"), ts=0.0)
    assert ci.text == "/compact keep the API"


def test_the_stored_payload_decodes_to_the_event_the_acknowledgement_read_on_every_fixture() -> None:
    """A deferred derivation re-reads a payload from the store (``decode_hook_json``) when the backlog
    did not keep its event (``service/derive.py``): it must derive exactly what the kept event would."""
    from ctxlifed.core.events import elements_from_event
    from ctxlifed.core.lessons import classify_hook

    archived = classified = 0
    for p in PAYLOADS:
        ev = decode_hook(p)
        again = decode_hook_json(msgspec.json.encode(p))
        assert again == ev
        els = elements_from_event(ev, ts=1.0)
        assert els == elements_from_event(again, ts=1.0)
        archived += len(els)
        got = classify_hook(ev, event_id=1, ts=1.0)
        assert got == classify_hook(again, event_id=1, ts=1.0)
        classified += got is not None
    assert archived > 50 and classified > 20
