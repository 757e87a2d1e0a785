"""What a Claude Code hook payload contributes to the archive. Pure.

Rules:
- Input is the (already redacted) payload dict exactly as Claude Code sent it; any field may be
  missing or have the wrong type. Nothing here raises on a payload: wrong shapes yield no text.
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
from .model import Element, Kind, estimate_tokens

_enc = msgspec.json.Encoder()
CODE_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})


def s(v: Any) -> str:
    """A string field, or '' for anything else."""
    return v if isinstance(v, str) else ""


def d(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


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
        return f"$ {s(ti.get('command'))}"
    if tool in ("Read", "Write", "Edit", "MultiEdit", "NotebookEdit"):
        return f"{tool} {s(ti.get('file_path')) or s(ti.get('notebook_path'))}"
    if tool in ("Grep", "Glob"):
        where = s(ti.get("path"))
        return f"{tool} {s(ti.get('pattern'))}" + (f" in {where}" if where else "")
    if tool in ("WebFetch", "WebSearch"):
        return f"{tool} {s(ti.get('url')) or s(ti.get('query'))}"
    if tool in ("Agent", "Task"):
        return f"{tool} ({s(ti.get('subagent_type')) or 'agent'}): {s(ti.get('description')) or s(ti.get('prompt'))[:200]}"
    return f"{tool} {_json(ti, 1000)}"


def render_tool_output(tool: str, ti: dict[str, Any], tr: Any) -> str:
    r = d(tr)
    if tool == "Bash":
        out = s(r.get("stdout"))
        err = s(r.get("stderr"))
        return "\n".join(x for x in (out, err and f"[stderr]\n{err}") if x) if r else _content_text(tr)
    if tool == "Write":
        return s(ti.get("content")) or s(r.get("content"))
    if tool == "Edit":
        old, new = s(ti.get("old_string")), s(ti.get("new_string"))
        return f"--- old\n{old}\n+++ new\n{new}"
    if tool == "MultiEdit":
        edits = ti.get("edits") if isinstance(ti.get("edits"), list) else []
        return "\n".join(f"--- old\n{s(d(e).get('old_string'))}\n+++ new\n{s(d(e).get('new_string'))}" for e in edits)
    if tool == "NotebookEdit":
        return s(ti.get("new_source"))
    if tool == "Read":
        f = d(r.get("file"))
        return s(f.get("content")) or _content_text(tr)
    if tool in ("Agent", "Task"):
        return _content_text(r.get("content")) or _content_text(tr)
    if tool in ("Grep", "Glob"):
        if isinstance(r.get("filenames"), list):
            return "\n".join(x for x in r["filenames"] if isinstance(x, str))
        return s(r.get("content")) or _content_text(tr) or _json(tr)
    if isinstance(tr, str):
        return tr
    return _content_text(r.get("content")) or _json(tr, 16000)


def _uid(ev: str, payload: dict[str, Any], base: str, ts: float, i: int) -> str:
    # Tool elements use the tool_use_id alone, as the transcript parser does, so the same call
    # seen through a hook and through the transcript is archived once.
    if ev in ("PostToolUse", "PostToolUseFailure") and s(payload.get("tool_use_id")):
        return s(payload.get("tool_use_id"))
    return f"{ev}:{base}:{i}" if base else f"{ev}:{ts:.6f}:{i}"


def elements_from_hook(payload: dict[str, Any], *, ts: float, max_chars: int = 256 * 1024) -> list[Element]:
    """The archive elements of one hook event (may be empty)."""
    ev = s(payload.get("hook_event_name"))
    uid_base = s(payload.get("tool_use_id")) or s(payload.get("prompt_id")) or ""
    out: list[tuple[Kind, str, dict[str, Any]]] = []
    if ev == "UserPromptSubmit":
        out.append((Kind.PROMPT, s(payload.get("prompt")), {}))
    elif ev == "PostToolUse":
        tool = s(payload.get("tool_name")) or "tool"
        ti = d(payload.get("tool_input"))
        head = render_tool_input(tool, ti)
        body = render_tool_output(tool, ti, payload.get("tool_response"))
        kind = Kind.CODE_CHANGE if tool in CODE_TOOLS else Kind.TOOL
        meta: dict[str, Any] = {"tool": tool, "file_path": s(ti.get("file_path")) or None}
        if tool == "Bash":
            cmd = s(ti.get("command"))
            meta["command"] = cmd
            if is_test_command(cmd):
                kind = Kind.TEST_RESULT
        out.append((kind, f"{head}\n{body}" if body else head, meta))
    elif ev == "PostToolUseFailure":
        tool = s(payload.get("tool_name")) or "tool"
        ti = d(payload.get("tool_input"))
        cmd = s(ti.get("command")) if tool == "Bash" else ""
        kind = Kind.TEST_RESULT if cmd and is_test_command(cmd) else Kind.ERROR
        out.append((kind, f"{render_tool_input(tool, ti)}\n[error]\n{s(payload.get('error'))}",
                    {"tool": tool, "file_path": s(ti.get("file_path")) or None, "command": cmd or None,
                     "is_error": True, "passed": False if kind is Kind.TEST_RESULT else None}))
    elif ev == "SubagentStop" and not s(payload.get("agent_type")):
        pass  # compaction's internal agent: its reply is the summary, archived once from PostCompact
    elif ev in ("Stop", "SubagentStop"):
        msg = s(payload.get("last_assistant_message"))
        if msg:
            out.append((Kind.ASSISTANT, msg, {}))
    elif ev == "PostCompact":
        out.append((Kind.COMPACT_SUMMARY, s(payload.get("compact_summary")), {}))
    elif ev == "PreCompact":
        ci = s(payload.get("custom_instructions"))
        if ci:
            out.append((Kind.PROMPT, f"/compact {ci}", {}))
    elements = []
    for i, (kind, text, meta) in enumerate(out):
        if not text.strip():
            continue
        text, _cut = cap(text, max_chars)
        elements.append(Element(
            uid=_uid(ev, payload, uid_base, ts, i),
            kind=kind, text=text, ts=ts, tool=meta.get("tool"), file_path=meta.get("file_path"),
            command=meta.get("command"), is_error=bool(meta.get("is_error")), passed=meta.get("passed"),
            tokens=estimate_tokens(text),
        ))
    return elements
