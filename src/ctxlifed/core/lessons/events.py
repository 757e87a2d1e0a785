"""Events: one PostToolUse / PostToolUseFailure hook payload as the lesson tracker sees it (:class:`Ev`).

Rules:
- Pure: no I/O, no clock; times and event ids are passed in. :func:`classify_hook` never raises on
  an event of any shape. An :class:`Ev`'s text is bounded (:data:`MAX_EV_TEXT`).
- Events (:func:`classify_hook`, one typed PostToolUse / PostToolUseFailure event of
  ``core.hook_events`` at a time, decoded once by the caller):
    fail    -- PostToolUseFailure (not ``is_interrupt``); a PostToolUse Bash whose ``tool_response``
               carries a non-zero exit code; a PostToolUse Bash test run whose output
               :func:`~ctxlifed.core.transcript.test_outcome` calls failed.
    edit    -- a successful Write / Edit / MultiEdit / NotebookEdit.
    command -- a successful Bash command that is not a test run.
    success -- a successful test run (pass marker, or no marker and no pipe hiding the exit code),
               and a successful call of any other tool (Read, WebFetch, MCP, ...).
  Interrupted calls, Agent/Task calls, a piped test run whose output shows neither outcome, and
  other hook events give None. Paths under the payload's ``cwd`` are made relative to it (in
  ``file_path`` and inside commands).
- What an edit changed (:func:`edit_change`, an edit's part of its fix step): the first changed line of
  each side, ``edit src/x.py: `timeout = 5` → `timeout = 30``` (each side trimmed to
  :data:`CHANGE_SIDE_MAX` characters); ``+ after`` / ``- before`` for an addition / removal.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import msgspec

from ctxlifed.core.commands import EDIT_TOOLS
from ctxlifed.core.hook_events import (
    HookEvent,
    PostToolUse,
    PostToolUseFailure,
    UnknownHook,
    as_mapping,
    as_text,
)
from ctxlifed.core.lessons.signatures import signature
from ctxlifed.core.lessons.targets import MAX_TARGET_PART, Target, target_of
from ctxlifed.core.lessons.text import WS_RE, code_span, cut
from ctxlifed.core.lessons.text import one_line as _one_line  # the name the classifier's body uses
from ctxlifed.core.transcript import test_outcome

__all__ = ["CHANGE_SIDE_MAX", "MAX_EV_TEXT", "Ev", "EvKind", "classify_hook", "edit_change"]

MAX_EV_TEXT = 16_000  # characters of an Ev's text (head 4k + tail 12k)

EvKind = Literal["fail", "success", "edit", "command"]


class Ev(msgspec.Struct, frozen=True, kw_only=True):
    """One tool call as the lesson tracker sees it. ``target``/``signature`` are filled in by
    :func:`classify_hook`; when left empty, :func:`step` derives them from the other fields."""

    kind: EvKind
    ts: float
    event_id: int
    tool: str = ""
    command: str = ""  # Bash command (cwd-relative), else ""
    file_path: str = ""  # file tools (cwd-relative)
    text: str = ""  # fail: the error text (bounded); else a short summary
    change: str = ""  # edit: the changed lines, ``before → after`` trimmed (:func:`edit_change`)
    target: Target | None = None
    signature: str | None = None


def _head_tail(text: str, limit: int, head: int) -> str:
    if len(text) <= limit:
        return text
    return text[:head] + "\n…\n" + text[-(limit - head) :]


def _relativise(text: str, cwd: str) -> str:
    if not cwd or len(cwd) < 2 or not text:
        return text
    c = cwd.rstrip("/")
    out = text.replace(c + "/", "")
    return re.sub(re.escape(c) + r"(?=[\s;&|)'\"]|$)", ".", out)


_IGNORED_TOOLS = frozenset({"Agent", "Task", "TodoWrite", "TaskCreate", "TaskUpdate", "ExitPlanMode",
                            "EnterPlanMode", "AskUserQuestion", "Skill"})
_NONZERO_KEYS = ("exitCode", "exit_code", "returnCode")


def _tool_key(tool: str, ti: dict[str, Any]) -> str:
    for k in ("url", "query", "pattern", "path", "notebook_path", "file_path"):
        v = as_text(ti.get(k))
        if v:
            return v
    try:
        return msgspec.json.encode(ti, order="sorted").decode("utf-8", "replace")[:MAX_TARGET_PART]
    except (TypeError, ValueError, OverflowError):
        return ""


def _exit_code(tr: Any) -> int | None:
    r = as_mapping(tr)
    for k in _NONZERO_KEYS:
        v = r.get(k)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return None


def classify_hook(event: HookEvent | UnknownHook, *, event_id: int, ts: float) -> Ev | None:
    """The :class:`Ev` of one (redacted) PostToolUse / PostToolUseFailure event, or None.
    Never raises on a malformed tool input or response."""
    try:
        return _classify(event, event_id, ts)
    except Exception:  # noqa: BLE001 - hooks must never break on a payload shape
        return None


def _classify(event: HookEvent | UnknownHook, event_id: int, ts: float) -> Ev | None:
    if not isinstance(event, (PostToolUse, PostToolUseFailure)):
        return None
    tool = event.tool_name
    if not tool or tool in _IGNORED_TOOLS:
        return None
    ti = event.tool_input
    cwd = event.cwd
    command = _relativise(event.input_text("command"), cwd)[:4096] if tool == "Bash" else ""
    fp = event.input_text("file_path") or event.input_text("notebook_path")
    if fp and cwd and fp.startswith(cwd.rstrip("/") + "/"):
        fp = fp[len(cwd.rstrip("/")) + 1 :]
    fp = fp[:1024]
    target = target_of(tool, command, fp, key=_relativise(_tool_key(tool, ti), cwd))

    def fail(text: str) -> Ev:
        sig = signature(text, tool=tool, command=command or None, file_path=fp or None)
        return Ev(kind="fail", ts=ts, event_id=event_id, tool=tool, command=command, file_path=fp,
                  text=_head_tail(text, MAX_EV_TEXT, 4000), target=target, signature=sig)

    if isinstance(event, PostToolUseFailure):
        if event.is_interrupt:
            return None
        return fail(event.error)
    tr = event.tool_response
    if tool == "Bash":
        r = as_mapping(tr)
        if r.get("interrupted") is True:
            return None
        out = "\n".join(x for x in (as_text(r.get("stdout")), as_text(r.get("stderr"))) if x) if r else as_text(tr)
        code = _exit_code(tr)
        if code is not None and code != 0:
            return fail(f"Exit code {code}\n{out}")
        if target.kind == "test":
            outcome = test_outcome(out, False)
            if outcome is False:
                return fail(out)
            if outcome is None and "|" in command.replace("||", ""):
                return None  # a pipe hides the runner's exit code and the output says nothing
            return Ev(kind="success", ts=ts, event_id=event_id, tool=tool, command=command, target=target,
                      text=_one_line(out[-200:], 200))
        return Ev(kind="command", ts=ts, event_id=event_id, tool=tool, command=command, target=target)
    if tool in EDIT_TOOLS:
        return Ev(kind="edit", ts=ts, event_id=event_id, tool=tool, file_path=fp, target=target,
                  change=edit_change(tool, ti, tr))
    return Ev(kind="success", ts=ts, event_id=event_id, tool=tool, file_path=fp, target=target)


# --------------------------------------------------------------------------- what an edit changed

CHANGE_SIDE_MAX = 48  # characters of one side of ``before → after``


def _side(line: str, common: int) -> str:
    """One side of a change as a code span: whitespace collapsed, a long shared head elided, bounded."""
    t = WS_RE.sub(" ", line).strip()
    if common > 24 and len(t) > CHANGE_SIDE_MAX:  # keep the difference in view, with what precedes it
        t = "…" + t[max(0, min(common - 12, len(t) - CHANGE_SIDE_MAX + 1)) :].lstrip()
    return code_span(cut(t, CHANGE_SIDE_MAX))


def _changed_lines(old: str, new: str) -> str:
    """``before → after`` of the first changed line of two texts (common lines around it dropped);
    ``+ after`` for an addition, ``- before`` for a removal, and ``(+N more lines)`` when more changed."""
    a = [ln for ln in old.splitlines() if ln.strip()]
    b = [ln for ln in new.splitlines() if ln.strip()]
    i = 0
    while i < len(a) and i < len(b) and a[i].strip() == b[i].strip():
        i += 1
    j = 0
    while j < len(a) - i and j < len(b) - i and a[-1 - j].strip() == b[-1 - j].strip():
        j += 1
    a, b = a[i : len(a) - j], b[i : len(b) - j]
    if not a and not b:
        return ""
    more = max(len(a), len(b)) - 1
    tail = f" (+{more} more line{'s' if more != 1 else ''})" if more > 0 else ""
    if not a:
        return f"+ {_side(b[0], 0)}{tail}"
    if not b:
        return f"- {_side(a[0], 0)}{tail}"
    x, y = WS_RE.sub(" ", a[0]).strip(), WS_RE.sub(" ", b[0]).strip()
    common = 0
    while common < min(len(x), len(y)) and x[common] == y[common]:
        common += 1
    return f"{_side(x, common)} → {_side(y, common)}{tail}"


def edit_change(tool: str, ti: dict[str, Any], tr: Any = None) -> str:
    """What an edit call changed, for a lesson's fix: ``before → after`` of its first changed line
    (Edit; MultiEdit's first edit, ``+N more edits``; a Write's patch when the response carries one),
    ``new file: <first line>`` for a Write without one, ``cell: <first line>`` for NotebookEdit; ''
    when unknown. Redacted by the callers (every lesson text is)."""
    try:
        if tool == "Edit":
            return _changed_lines(as_text(ti.get("old_string")), as_text(ti.get("new_string")))
        if tool == "MultiEdit":
            edits = [e for e in ti.get("edits") or () if isinstance(e, dict)]
            if not edits:
                return ""
            first = _changed_lines(as_text(edits[0].get("old_string")), as_text(edits[0].get("new_string")))
            n = len(edits) - 1
            return first + (f" (+{n} more edit{'s' if n != 1 else ''})" if n and first else "")
        if tool == "Write":
            hunks = as_mapping(tr).get("structuredPatch")
            if isinstance(hunks, list) and hunks:
                lines = [ln for h in hunks if isinstance(h, dict) for ln in (h.get("lines") or ()) if isinstance(ln, str)]
                old = "\n".join(ln[1:] for ln in lines if ln.startswith("-"))
                new = "\n".join(ln[1:] for ln in lines if ln.startswith("+"))
                got = _changed_lines(old, new)
                if got:
                    return got
            first = next((ln for ln in as_text(ti.get("content")).splitlines() if ln.strip()), "")
            return f"new content: {_side(first, 0)}" if first else ""
        if tool == "NotebookEdit":
            first = next((ln for ln in as_text(ti.get("new_source")).splitlines() if ln.strip()), "")
            return f"cell: {_side(first, 0)}" if first else ""
    except (TypeError, ValueError, AttributeError):
        return ""
    return ""


# --------------------------------------------------------------------------- tracker


