"""What a Claude Code hook payload contributes to the archive. Pure.

Rules:
- Input is the typed event (``core.hook_events``) of the (already redacted) payload: its fields have
  their types, tool inputs and responses are JSON values of any shape. Nothing here raises on an event:
  wrong shapes yield no text. The caller decodes the payload once (``hook_events.decode_hook``).
- Each searchable piece becomes an :class:`Element` with a readable rendering: prompts, tool inputs
  and outputs, errors, assistant messages, compact summaries. The SubagentStop of compaction's own
  agent (``agent_type: ""``) contributes nothing: its reply is the summary PostCompact carries. PreToolUse and PostToolBatch repeat
  what PostToolUse carries, so they contribute nothing (the raw event is still stored).
- Texts are bounded by ``max_chars``; a cut text ends with a marker naming the original size.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .commands import is_test_command
from .hook_events import (
    HookEvent,
    PostCompact,
    PostToolUse,
    PostToolUseFailure,
    PreCompact,
    Stop,
    SubagentStop,
    ToolHook,
    UnknownHook,
    UserPromptSubmit,
    as_mapping,
    as_text,
)
from .model import Element, Kind, estimate_tokens

_enc = msgspec.json.Encoder()
CODE_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})


def cap(text: str, max_chars: int) -> tuple[str, bool]:
    if len(text) <= max_chars:
        return text, False
    head = max_chars * 3 // 4
    tail = max_chars - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[… {cut} characters cut by ctxlifed; original {len(text)} characters …]\n{text[-tail:]}", True


def _json(v: Any, limit: int = 4000) -> str:
    try:
        out = _enc.encode(v).decode("utf-8", "replace")
    except (TypeError, ValueError, OverflowError):
        return ""
    return out if len(out) <= limit else out[:limit] + "…"


def _content_text(v: Any) -> str:
    """Text of a tool_result-style content: a string or a list of blocks."""
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        parts = []
        for b in v:
            if isinstance(b, dict) and isinstance(b.get("text"), str):
                parts.append(b["text"])
            elif isinstance(b, str):
                parts.append(b)
        return "\n".join(parts)
    return ""


def render_tool_input(tool: str, ti: dict[str, Any]) -> str:
    if tool == "Bash":
        return f"$ {as_text(ti.get('command'))}"
    if tool in ("Read", "Write", "Edit", "MultiEdit", "NotebookEdit"):
        return f"{tool} {as_text(ti.get('file_path')) or as_text(ti.get('notebook_path'))}"
    if tool in ("Grep", "Glob"):
        where = as_text(ti.get("path"))
        return f"{tool} {as_text(ti.get('pattern'))}" + (f" in {where}" if where else "")
    if tool in ("WebFetch", "WebSearch"):
        return f"{tool} {as_text(ti.get('url')) or as_text(ti.get('query'))}"
    if tool in ("Agent", "Task"):
        return f"{tool} ({as_text(ti.get('subagent_type')) or 'agent'}): {as_text(ti.get('description')) or as_text(ti.get('prompt'))[:200]}"
    return f"{tool} {_json(ti, 1000)}"


def render_tool_output(tool: str, ti: dict[str, Any], tr: Any) -> str:
    r = as_mapping(tr)
    if tool == "Bash":
        out = as_text(r.get("stdout"))
        err = as_text(r.get("stderr"))
        return "\n".join(x for x in (out, err and f"[stderr]\n{err}") if x) if r else _content_text(tr)
    if tool == "Write":
        return as_text(ti.get("content")) or as_text(r.get("content"))
    if tool == "Edit":
        old, new = as_text(ti.get("old_string")), as_text(ti.get("new_string"))
        return f"--- old\n{old}\n+++ new\n{new}"
    if tool == "MultiEdit":
        edits = ti.get("edits") if isinstance(ti.get("edits"), list) else []
        return "\n".join(f"--- old\n{as_text(as_mapping(e).get('old_string'))}\n+++ new\n{as_text(as_mapping(e).get('new_string'))}" for e in edits)
    if tool == "NotebookEdit":
        return as_text(ti.get("new_source"))
    if tool == "Read":
        f = as_mapping(r.get("file"))
        return as_text(f.get("content")) or _content_text(tr)
    if tool in ("Agent", "Task"):
        return _content_text(r.get("content")) or _content_text(tr)
    if tool in ("Grep", "Glob"):
        if isinstance(r.get("filenames"), list):
            return "\n".join(x for x in r["filenames"] if isinstance(x, str))
        return as_text(r.get("content")) or _content_text(tr) or _json(tr)
    if isinstance(tr, str):
        return tr
    return _content_text(r.get("content")) or _json(tr, 16000)


def _uid(event: HookEvent | UnknownHook, base: str, ts: float, i: int) -> str:
    # Tool elements use the tool_use_id alone, as the transcript parser does, so the same call
    # seen through a hook and through the transcript is archived once.
    if isinstance(event, (PostToolUse, PostToolUseFailure)) and event.tool_use_id:
        return event.tool_use_id
    name = event.hook_event_name
    return f"{name}:{base}:{i}" if base else f"{name}:{ts:.6f}:{i}"


def elements_from_event(event: HookEvent | UnknownHook, *, ts: float, max_chars: int = 256 * 1024) -> list[Element]:
    """The archive elements of one hook event (may be empty)."""
    uid_base = (event.tool_use_id if isinstance(event, ToolHook) else "") or event.prompt_id
    out: list[tuple[Kind, str, dict[str, Any]]] = []
    if isinstance(event, UserPromptSubmit):
        out.append((Kind.PROMPT, event.prompt, {}))
    elif isinstance(event, PostToolUse):
        tool = event.tool_name or "tool"
        ti = event.tool_input
        head = render_tool_input(tool, ti)
        body = render_tool_output(tool, ti, event.tool_response)
        kind = Kind.CODE_CHANGE if tool in CODE_TOOLS else Kind.TOOL
        meta: dict[str, Any] = {"tool": tool, "file_path": event.input_text("file_path") or None}
        if tool == "Bash":
            cmd = event.input_text("command")
            meta["command"] = cmd
            if is_test_command(cmd):
                kind = Kind.TEST_RESULT
        out.append((kind, f"{head}\n{body}" if body else head, meta))
    elif isinstance(event, PostToolUseFailure):
        tool = event.tool_name or "tool"
        ti = event.tool_input
        cmd = event.input_text("command") if tool == "Bash" else ""
        kind = Kind.TEST_RESULT if cmd and is_test_command(cmd) else Kind.ERROR
        out.append((kind, f"{render_tool_input(tool, ti)}\n[error]\n{event.error}",
                    {"tool": tool, "file_path": event.input_text("file_path") or None, "command": cmd or None,
                     "is_error": True, "passed": False if kind is Kind.TEST_RESULT else None}))
    elif isinstance(event, SubagentStop) and not event.agent_type:
        pass  # compaction's internal agent: its reply is the summary, archived once from PostCompact
    elif isinstance(event, (Stop, SubagentStop)):
        if event.last_assistant_message:
            out.append((Kind.ASSISTANT, event.last_assistant_message, {}))
    elif isinstance(event, PostCompact):
        out.append((Kind.COMPACT_SUMMARY, event.compact_summary, {}))
    elif isinstance(event, PreCompact):
        if event.custom_instructions:
            out.append((Kind.PROMPT, f"/compact {event.custom_instructions}", {}))
    elements = []
    for i, (kind, text, meta) in enumerate(out):
        if not text.strip():
            continue
        text, _cut = cap(text, max_chars)
        elements.append(Element(
            uid=_uid(event, uid_base, ts, i),
            kind=kind, text=text, ts=ts, tool=meta.get("tool"), file_path=meta.get("file_path"),
            command=meta.get("command"), is_error=bool(meta.get("is_error")), passed=meta.get("passed"),
            tokens=estimate_tokens(text),
        ))
    return elements
