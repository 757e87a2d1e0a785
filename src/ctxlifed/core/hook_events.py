"""Claude Code's hook payloads as typed events: one msgspec Struct per hook event, tagged by
``hook_event_name``. Pure: msgspec only, no I/O.

Rules:
- :func:`decode_hook` never raises on a JSON object (any dict): unknown fields are ignored; an unknown,
  missing or non-text ``hook_event_name`` gives :class:`UnknownHook` (the name kept, ``""`` when it was
  not text); a field of the wrong type gets its default and every other field is kept. Anything that
  is not a dict gives an empty :class:`UnknownHook`.
- Cost: the class is looked up by name, then one strict conversion of the whole payload to it; only
  when that fails (``ValidationError``) are the fields converted one by one. A well-formed payload pays
  the single pass. (A dict is never converted to the tagged union itself: that is much slower than
  the lookup; JSON text is decoded to the union directly, which is fast.)
- Every field has a default: Claude Code omits fields by event, version and context (docs: the hooks
  spec, sections 1.2-1.3, CLI 2.1.328; ``PreSkillShellCommand`` of 2.1.332). Text defaults to ``""``,
  objects to ``{}``, lists to ``[]``; ``None`` only where absent differs from any value (numbers of a
  resume, ``custom_instructions`` that Claude Code sends as null for auto compaction).
- The event is a view for reading, not the record: what is stored is the (redacted) payload itself
  (``service/pipeline.py``'s ``Incoming`` carries both).
- One class per event, named as the event; shared fields come from private bases that are not events
  themselves, so ``isinstance(e, Stop)`` never matches a SubagentStop. :class:`ToolHook` is the one
  public base (every event about one tool call).
- Tool inputs and tool responses stay JSON values (``dict`` / ``Any``): their shape is per tool and
  per version; :meth:`ToolHook.input_text`, :func:`as_text` and :func:`as_mapping` read them safely.
"""

from __future__ import annotations

from typing import Any, Union

import msgspec

__all__ = [
    "ConfigChange", "CwdChanged", "DirectoryAdded", "Elicitation", "ElicitationResult", "FileChanged",
    "HOOK_EVENTS", "HookEvent", "InstructionsLoaded", "MessageDisplay", "Notification",
    "PermissionDenied", "PermissionRequest", "PostCompact", "PostModelSwitch", "PostToolBatch",
    "PostToolUse", "PostToolUseFailure", "PreCompact", "PreModelSwitch", "PreSkillShellCommand",
    "PreToolUse", "SessionEnd", "SessionStart", "Setup", "Stop", "StopFailure", "SubagentStart",
    "SubagentStop", "TaskCompleted", "TaskCreated", "TeammateIdle", "ToolHook", "UnknownHook",
    "UserPromptExpansion", "UserPromptSubmit", "WorktreeCreate", "WorktreeRemove", "as_mapping",
    "as_text", "decode_hook", "decode_hook_json",
]


def as_text(v: Any) -> str:
    """``v`` when it is a string, else ``""``."""
    return v if isinstance(v, str) else ""


def as_mapping(v: Any) -> dict[str, Any]:
    """``v`` when it is a dict, else ``{}``."""
    return v if isinstance(v, dict) else {}


class _Common(msgspec.Struct, frozen=True, kw_only=True):
    """The fields every hook may carry (spec 1.2)."""

    session_id: str = ""
    transcript_path: str = ""
    cwd: str = ""
    prompt_id: str = ""
    permission_mode: str = ""
    effort: dict[str, Any] = {}
    agent_id: str = ""  # set inside a subagent (and on SubagentStart/SubagentStop)
    agent_type: str = ""  # "" also for compaction's internal agents
    ctxlifed_env: dict[str, str] = {}  # added by the shim: the autocompact overrides it saw (docs/protocol.md)


class HookEvent(_Common, frozen=True, kw_only=True, tag_field="hook_event_name", tag=True):
    """A known hook event; the class name is the ``hook_event_name``."""

    @property
    def hook_event_name(self) -> str:
        return type(self).__struct_config__.tag  # type: ignore[return-value]


class UnknownHook(_Common, frozen=True, kw_only=True):
    """An event this version does not know (or a payload without a usable name)."""

    hook_event_name: str = ""
    tool_name: str = ""  # kept so the stored row of an unknown tool event still names its tool


# --------------------------------------------------------------------------- session

class SessionStart(HookEvent, frozen=True, kw_only=True):
    source: str = ""  # startup | resume | clear | compact | fork
    model: str = ""
    session_title: str = ""
    seconds_since_last_response: float | None = None  # resume / fork only, as the four below
    context_tokens: int | None = None
    prompt_cache_likely_expired: bool | None = None
    estimated_cache_write_usd: float | None = None


class Setup(HookEvent, frozen=True, kw_only=True):
    trigger: str = ""


class SessionEnd(HookEvent, frozen=True, kw_only=True):
    reason: str = ""


class InstructionsLoaded(HookEvent, frozen=True, kw_only=True):
    file_path: str = ""
    memory_type: str = ""
    load_reason: str = ""
    globs: list[str] = []
    trigger_file_path: str = ""
    parent_file_path: str = ""


# --------------------------------------------------------------------------- prompts and messages

class UserPromptSubmit(HookEvent, frozen=True, kw_only=True):
    prompt: str = ""
    source: str = ""
    session_title: str = ""


class UserPromptExpansion(HookEvent, frozen=True, kw_only=True):
    expansion_type: str = ""
    command_name: str = ""
    command_args: str = ""
    command_source: str = ""
    prompt: str = ""


class MessageDisplay(HookEvent, frozen=True, kw_only=True):
    turn_id: str = ""
    message_id: str = ""
    index: int = 0
    final: bool = False
    delta: str = ""


class Notification(HookEvent, frozen=True, kw_only=True):
    message: str = ""
    title: str = ""
    notification_type: str = ""


# --------------------------------------------------------------------------- tools

class ToolHook(HookEvent, frozen=True, kw_only=True):
    """Fields of the events about one tool call."""

    tool_name: str = ""
    tool_input: dict[str, Any] = {}
    tool_use_id: str = ""
    mcp_server: dict[str, Any] = {}

    def input_text(self, key: str) -> str:
        """The text field ``key`` of the tool input, or ``""``."""
        v = self.tool_input.get(key)
        return v if isinstance(v, str) else ""


class PreToolUse(ToolHook, frozen=True, kw_only=True):
    pass


class PermissionRequest(ToolHook, frozen=True, kw_only=True):
    permission_suggestions: list[Any] = []


class PermissionDenied(ToolHook, frozen=True, kw_only=True):
    reason: str = ""


class PostToolUse(ToolHook, frozen=True, kw_only=True):
    tool_response: Any = None  # the tool's structured output; its shape is per tool
    duration_ms: float | None = None

    @property
    def persisted_output_path(self) -> str:
        """Where Claude Code saved a large Bash output (the response then holds its first part), or ``""``."""
        r = self.tool_response
        return as_text(r.get("persistedOutputPath")) if isinstance(r, dict) else ""

    @property
    def persisted_output_size(self) -> int | None:
        """The saved output's size in characters, when Claude Code names it."""
        r = self.tool_response
        v = r.get("persistedOutputSize") if isinstance(r, dict) else None
        return v if isinstance(v, int) and not isinstance(v, bool) else None


class PostToolUseFailure(ToolHook, frozen=True, kw_only=True):
    error: str = ""
    is_interrupt: bool = False
    duration_ms: float | None = None


class PostToolBatch(HookEvent, frozen=True, kw_only=True):
    tool_calls: list[dict[str, Any]] = []  # {tool_name, tool_input, tool_use_id, tool_response?}


# --------------------------------------------------------------------------- agents, turns, tasks

class SubagentStart(HookEvent, frozen=True, kw_only=True):
    pass


class _StopFields(HookEvent, frozen=True, kw_only=True):
    stop_hook_active: bool = False
    last_assistant_message: str = ""
    background_tasks: list[Any] = []
    session_crons: list[Any] = []


class Stop(_StopFields, frozen=True, kw_only=True):
    pass


class SubagentStop(_StopFields, frozen=True, kw_only=True):
    agent_transcript_path: str = ""


class StopFailure(HookEvent, frozen=True, kw_only=True):
    error: str = ""
    error_details: Any = None
    last_assistant_message: str = ""


class _TaskFields(HookEvent, frozen=True, kw_only=True):
    task_id: str = ""
    task_subject: str = ""
    task_description: str = ""
    teammate_name: str = ""
    team_name: str = ""


class TaskCreated(_TaskFields, frozen=True, kw_only=True):
    pass


class TaskCompleted(_TaskFields, frozen=True, kw_only=True):
    pass


class TeammateIdle(HookEvent, frozen=True, kw_only=True):
    teammate_name: str = ""
    team_name: str = ""


# --------------------------------------------------------------------------- compaction

class PreCompact(HookEvent, frozen=True, kw_only=True):
    trigger: str = ""  # manual | auto
    custom_instructions: str | None = None  # the /compact argument; null for auto


class PostCompact(HookEvent, frozen=True, kw_only=True):
    trigger: str = ""
    compact_summary: str = ""


# --------------------------------------------------------------------------- environment

class ConfigChange(HookEvent, frozen=True, kw_only=True):
    source: str = ""
    file_path: str = ""


class CwdChanged(HookEvent, frozen=True, kw_only=True):
    old_cwd: str = ""
    new_cwd: str = ""


class DirectoryAdded(HookEvent, frozen=True, kw_only=True):
    directory: str = ""
    source: str = ""


class FileChanged(HookEvent, frozen=True, kw_only=True):
    file_path: str = ""
    event: str = ""  # change | add | unlink


class WorktreeCreate(HookEvent, frozen=True, kw_only=True):
    name: str = ""


class WorktreeRemove(HookEvent, frozen=True, kw_only=True):
    worktree_path: str = ""


class _ModelSwitchFields(HookEvent, frozen=True, kw_only=True):
    from_model: str = ""
    to_model: str = ""
    requested_model: str | None = None
    source: str = ""
    context_tokens: int | None = None
    prompt_cache_warm: bool | None = None
    cache_ttl: str = ""
    estimated_cache_write_usd: float | None = None
    pricing: str = ""


class PreModelSwitch(_ModelSwitchFields, frozen=True, kw_only=True):
    pass


class PostModelSwitch(_ModelSwitchFields, frozen=True, kw_only=True):
    pass


class Elicitation(HookEvent, frozen=True, kw_only=True):
    mcp_server_name: str = ""
    message: str = ""
    mode: str = ""
    url: str = ""
    elicitation_id: str = ""
    requested_schema: Any = None


class ElicitationResult(HookEvent, frozen=True, kw_only=True):
    mcp_server_name: str = ""
    elicitation_id: str = ""
    mode: str = ""
    action: str = ""  # accept | decline | cancel
    content: Any = None


class PreSkillShellCommand(HookEvent, frozen=True, kw_only=True):
    pass  # 2.1.332; its fields are not confirmed yet


# --------------------------------------------------------------------------- decoding

_EVENT_TYPES: tuple[type[HookEvent], ...] = (
    SessionStart, Setup, SessionEnd, InstructionsLoaded, UserPromptSubmit, UserPromptExpansion,
    MessageDisplay, Notification, PreToolUse, PermissionRequest, PermissionDenied, PostToolUse,
    PostToolUseFailure, PostToolBatch, SubagentStart, SubagentStop, Stop, StopFailure, TaskCreated,
    TaskCompleted, TeammateIdle, PreCompact, PostCompact, ConfigChange, CwdChanged, DirectoryAdded,
    FileChanged, WorktreeCreate, WorktreeRemove, PreModelSwitch, PostModelSwitch, Elicitation,
    ElicitationResult, PreSkillShellCommand,
)
HOOK_EVENTS: dict[str, type[HookEvent]] = {t.__name__: t for t in _EVENT_TYPES}
_AnyEvent = Union[_EVENT_TYPES]  # type: ignore[valid-type]  # noqa: UP007 - a runtime tuple of types
_json_event = msgspec.json.Decoder(_AnyEvent)
_json_any = msgspec.json.Decoder()
# (attribute, payload key, type) of each event's fields, for the field-by-field fallback.
_FIELDS: dict[type, tuple[tuple[str, str, Any], ...]] = {
    t: tuple((f.name, f.encode_name, f.type) for f in msgspec.structs.fields(t))
    for t in (*_EVENT_TYPES, UnknownHook)
}


def _coerce(cls: type[HookEvent] | type[UnknownHook], payload: dict[str, Any]) -> Any:
    """``cls`` from the fields of ``payload`` that have the right type (the others keep their default)."""
    kept: dict[str, Any] = {}
    for name, key, typ in _FIELDS[cls]:
        if key in payload:
            try:
                kept[name] = msgspec.convert(payload[key], typ)
            except (msgspec.ValidationError, RecursionError):
                pass
    return cls(**kept)


def decode_hook(payload: Any) -> HookEvent | UnknownHook:
    """The typed event of one hook payload (a dict as Claude Code sent it). Never raises (see the rules)."""
    if not isinstance(payload, dict):
        return UnknownHook()
    name = payload.get("hook_event_name")
    cls = HOOK_EVENTS.get(name) if isinstance(name, str) else None
    if cls is None:
        return _coerce(UnknownHook, payload)  # type: ignore[no-any-return]
    try:
        # The class by its name, then one conversion to it: converting a dict to the tagged union
        # itself costs far more than the lookup.
        return msgspec.convert(payload, cls)
    except (msgspec.ValidationError, RecursionError):
        return _coerce(cls, payload)  # type: ignore[no-any-return]


def decode_hook_json(data: bytes) -> HookEvent | UnknownHook:
    """The typed event of one payload's JSON text. Never raises on a JSON object; text that is not
    JSON raises ``msgspec.DecodeError``, nesting deeper than msgspec decodes ``RecursionError`` (as
    for the protocol's own decode of the params, which answers both before a payload gets here)."""
    try:
        return _json_event.decode(data)  # type: ignore[no-any-return]
    except msgspec.ValidationError:
        return decode_hook(_json_any.decode(data))
