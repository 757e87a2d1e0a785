"""Incremental, pure parser of Claude Code transcript JSONL (spec §5, CLI 2.1.x).

Rules:
- Pure: no I/O, no clock, no logging. The caller reads the file and passes the bytes that start at
  ``cursor.offset``; :func:`feed` returns a new cursor and what the new lines said.
- Whole lines only: a line is consumed when it ends with ``\\n``; a trailing partial line is left for the
  next call (``offset`` stops before it) unless ``final=True``. A line longer than ``max_line`` is consumed
  and counted in ``skipped``; a partial line already longer than ``max_line`` is consumed too and the rest
  of it is discarded on later calls (``cursor.skipping``), so memory stays bounded. The caller must pass
  more than ``max_line`` bytes when it has them (read size > ``max_line``), else such a line is never
  seen as over-long and the cursor stops before it for good.
- An over-long line is not parsed, but its usage is still counted (a main-chain ``assistant`` response
  with its image or file inside): the head (``OVERSIZED_HEAD`` bytes: top-level fields, then
  ``message``'s role, model and id before its content) and the tail (``OVERSIZED_TAIL`` bytes: the
  ``"usage":{...}`` object after the content, the timestamp) are scanned, never the whole line. While
  a line is skipped across calls the cursor carries its head and the latest tail (bounded).
- Never raises on content: a line that is not JSON, not an object, or has an unknown ``type`` is skipped
  and counted; blank lines are ignored (not counted); known bookkeeping types (``api-request*``,
  ``queue-operation``, ``last-prompt``, ``progress``, ...) are ignored silently. Invalid UTF-8 and lone
  surrogate escapes (``JSON.stringify`` cutting an emoji) are replaced by U+FFFD (``core.jsontext``, only
  after the strict decode failed).
- Rewrites: ``cursor.anchor`` holds the last ``ANCHOR`` bytes consumed. A caller that reads from
  ``cursor.offset - len(cursor.anchor)`` checks with :func:`resume` that they are still there; when they
  are not, the file was rewritten or replaced (even by a longer one) and is read again from 0.
- Main chain only: every record with ``isSidechain: true`` is ignored (subagent work is not in the window).
- Usage (§5.3): from main-chain ``assistant`` records whose model is not ``<synthetic>``. All records of
  one API response share ``message.id``; the last record per id wins. When ``usage.iterations`` is
  non-empty the last ``message`` iteration is used. ``last_usage`` is the latest response in the chunk,
  ``first_usage`` the first, ``usages`` one per id in order of appearance. A response whose records
  straddle two chunks appears in both deltas: merge ``usages`` by ``message_id`` (last wins) to get
  exactly what one whole feed gives.
- Model: ``message.model`` of main-chain responses (``requestedModel`` when it carries a ``[..]`` suffix
  such as ``[1m]``) and the ``model`` attachment's ``identity.modelId`` (which does not replace a
  ``[..]`` variant of the same id).
- Elements (uid = record uuid, ``uuid:i`` for the i-th block > 0, or the tool_use_id):
  user text -> PROMPT, except ``isMeta`` records, slash-command / local-command records
  (``<command-name>``, ``<local-command-...>``) and ``[Request interrupted ...]`` notes, which are skipped;
  ``<task-notification>`` (a background agent's result) -> TOOL with ``tool="task-notification"``;
  ``isCompactSummary`` -> COMPACT_SUMMARY (also in ``compact_summaries``); assistant text -> ASSISTANT
  (ERROR when ``isApiErrorMessage``); thinking -> THINKING.
- Tool calls: a ``tool_use`` is remembered (name, file path, command, short input summary; at most 512
  pending, oldest evicted) and becomes ONE element when its ``tool_result`` arrives, with ``ts`` of the
  result. Kind: Bash running a test command -> TEST_RESULT (``passed`` from :func:`test_outcome`); else an
  error (``is_error``, a non-zero exit code, ``Exit code N``) -> ERROR; else Write/Edit/MultiEdit/
  NotebookEdit -> CODE_CHANGE; else TOOL. Text = ``"<Tool>: <command|path|input>\\n<result>"`` (edits show
  the patch from ``toolUseResult``), capped at 65,536 chars (head + tail, with a marker). ``tokens`` estimates
  the uncapped text. A result whose call is unknown still yields an element (``tool=None``).
- Compaction (§5.4): ``system/compact_boundary`` -> :class:`CompactBoundary`; :func:`context_after` gives
  the current context size (last usage, or ``postTokens`` of a later boundary).
- Hooks: ``hook_additional_context`` attachments and ``hook_success`` attachments that were rendered into
  the context (plain-text stdout of SessionStart/UserPromptSubmit) -> :class:`Injected`.
- Skills: an ``isMeta`` user record starting with "Base directory for this skill:" -> :class:`SkillUse`;
  its name comes from the preceding ``<command-name>`` record or ``Skill`` tool call, else from the
  directory's last segment.
- Files: successful Read -> op "read", Write -> "write", Edit/MultiEdit/NotebookEdit -> "edit", and
  ``file`` attachments (files re-read into context, e.g. after compaction) -> "read".
- Instructions: an ``instructions`` attachment (CLAUDE.md / rules / memory files rendered into the window)
  -> one :class:`InstructionFile` per file, tokens estimated from ``"Contents of <path>:\n\n<content>"``.
- Listings: a ``skill_listing`` attachment -> :class:`Listing` (``initial`` = ``isInitial``; tokens from the
  rendered reminder, else from ``content``).
- Order across lists: :class:`Marks` record how many entries every list held at a point of the chunk.
  ``boundary_marks[i]`` is taken when ``boundaries[i]`` is read, ``first_usage_marks`` when the chunk's
  first usage is read (before that response's own blocks), so a consumer can tell what came before what
  (timestamps are not monotonic in the file).
- Token figures other than ``usage`` are :func:`~ctxlifed.core.model.estimate_tokens` estimates.
- :func:`open_bash_commands` reads a transcript's last bytes on their own (no cursor): the main chain's
  Bash calls that have no result yet, i.e. the commands running now (Claude Code records a call before
  it runs it).
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime
from typing import Any, Literal

import msgspec

from ctxlifed.core.commands import is_test_command
from ctxlifed.core.jsontext import repair_surrogates, repair_utf8
from ctxlifed.core.model import Element, Kind, Usage, estimate_tokens

__all__ = [
    "CompactBoundary",
    "FileTouch",
    "Injected",
    "InstructionFile",
    "Listing",
    "Marks",
    "marks_of",
    "resume",
    "PendingTool",
    "SkillUse",
    "TranscriptCursor",
    "TranscriptDelta",
    "context_after",
    "feed",
    "is_test_command",
    "open_bash_commands",
    "test_outcome",
]

MAX_PENDING = 512
MAX_TEXT = 64 * 1024  # characters kept in an element's text
MAX_SUMMARY = 1024  # characters of a pending call's input summary
MAX_COMMAND = 4096  # characters of a Bash command kept
OVERSIZED_HEAD = 4096  # bytes of an over-long line scanned for its record fields and message id
OVERSIZED_TAIL = 8192  # bytes at its end scanned for its usage object
ANCHOR = 64  # bytes before the offset that must still be there when reading on

EDIT_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
_FILE_OPS: dict[str, Literal["read", "edit", "write"]] = {
    "Read": "read",
    "Write": "write",
    "Edit": "edit",
    "MultiEdit": "edit",
    "NotebookEdit": "edit",
}
# Record types we know and deliberately ignore (spec §5.2); anything else unknown is counted as skipped.
_IGNORED_TYPES = frozenset(
    """queue-operation last-prompt api-request api-request-shape api-request-blob tools-used cost-state
    atis-latch mode permission-mode custom-title ai-title tag agent-name agent-color pr-link relocated
    worktree-state file-history-snapshot file-history-delta content-replacement summary progress""".split()
)
_LOCAL_PREFIXES = (
    "<local-command-caveat>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<command-name>",
    "<command-message>",
    "[Request interrupted",
)
_SKILL_PREFIX = "Base directory for this skill:"
_COMMAND_NAME_RE = re.compile(r"<command-name>\s*/?([^<\s]*)\s*</command-name>")
_EXIT_RE = re.compile(r"^(?:Error: )?Exit code (-?\d+)\s*$", re.M)


# --------------------------------------------------------------------------- public types


class PendingTool(msgspec.Struct, frozen=True, array_like=True):
    """A tool call whose result has not been seen yet (kept in the cursor)."""

    id: str
    name: str
    file_path: str | None = None
    command: str | None = None
    summary: str = ""


class TranscriptCursor(msgspec.Struct, frozen=True):
    """Where feeding stopped, plus the small bounded state carried between feeds (JSON-serialisable)."""

    offset: int = 0  # bytes of the file consumed so far (whole lines only)
    model: str | None = None  # latest main-chain model id
    skipping: bool = False  # inside an over-long line: discard up to the next newline
    pending: tuple[PendingTool, ...] = ()  # unanswered tool calls, oldest first
    skill_hint: str | None = None  # name of a slash command / Skill call awaiting its skill body
    anchor: bytes = b""  # the last ANCHOR bytes consumed (the file's bytes before ``offset``)
    skip_head: bytes = b""  # while skipping: the first OVERSIZED_HEAD bytes of the over-long line
    skip_tail: bytes = b""  # while skipping: the last OVERSIZED_TAIL bytes of it discarded so far


class CompactBoundary(msgspec.Struct, frozen=True):
    """A ``compact_boundary`` record: the window was compacted from ``pre_tokens`` to ``post_tokens``."""

    uuid: str
    ts: float
    trigger: str | None  # "auto" | "manual"
    pre_tokens: int | None
    post_tokens: int | None


class Injected(msgspec.Struct, frozen=True):
    """Context a hook injected (``additionalContext`` or plain stdout rendered into the window)."""

    hook_event: str
    hook_name: str
    text: str
    tokens: int  # estimate of the rendered reminder
    ts: float
    source: Literal["additional_context", "stdout"] = "additional_context"


class SkillUse(msgspec.Struct, frozen=True):
    """A skill body loaded into the window."""

    name: str
    tokens: int
    ts: float


class FileTouch(msgspec.Struct, frozen=True):
    """A file read into, or changed from, the conversation."""

    path: str
    tokens: int
    ts: float
    op: Literal["read", "edit", "write"]


class InstructionFile(msgspec.Struct, frozen=True):
    """A CLAUDE.md / rules / memory file rendered into the window by an ``instructions`` attachment."""

    path: str
    memory_type: str  # the file entry's ``type``: "Project" | "User" | "Local" | "Managed" | ... ("" unknown)
    tokens: int  # estimate
    ts: float


class Listing(msgspec.Struct, frozen=True):
    """A resident listing attachment (``skill_listing``): the skills' names and descriptions."""

    kind: str  # the attachment type, "skill_listing"
    tokens: int  # estimate of the rendered reminder (or of ``content``)
    ts: float
    initial: bool = True  # ``isInitial``: a full listing that replaces earlier ones (else an addition)
    count: int | None = None  # ``skillCount``


class Marks(msgspec.Struct, frozen=True, array_like=True):
    """How many entries each list of a :class:`TranscriptDelta` held at one point of the chunk."""

    elements: int = 0
    usages: int = 0
    injected: int = 0
    skills: int = 0
    file_reads: int = 0
    instructions: int = 0
    listings: int = 0


def marks_of(d: TranscriptDelta, *, usages: int) -> Marks:
    """The lengths of ``d``'s lists now (``usages`` is passed: mid-chunk it is not ``len(d.usages)``)."""
    return Marks(elements=len(d.elements), usages=usages, injected=len(d.injected), skills=len(d.skills),
                 file_reads=len(d.file_reads), instructions=len(d.instructions), listings=len(d.listings))


class TranscriptDelta(msgspec.Struct):
    """What one :func:`feed` call found in the newly consumed lines."""

    elements: list[Element] = msgspec.field(default_factory=list)
    last_usage: Usage | None = None
    first_usage: Usage | None = None
    usages: list[Usage] = msgspec.field(default_factory=list)  # one per message id, last record wins
    model: str | None = None
    boundaries: list[CompactBoundary] = msgspec.field(default_factory=list)
    compact_summaries: list[str] = msgspec.field(default_factory=list)
    skipped: int = 0
    injected: list[Injected] = msgspec.field(default_factory=list)
    skills: list[SkillUse] = msgspec.field(default_factory=list)
    file_reads: list[FileTouch] = msgspec.field(default_factory=list)
    compacted_last: bool = False  # a compact boundary came after the chunk's last usage
    instructions: list[InstructionFile] = msgspec.field(default_factory=list)
    listings: list[Listing] = msgspec.field(default_factory=list)
    boundary_marks: list[Marks] = msgspec.field(default_factory=list)  # one per boundary, same order
    first_usage_marks: Marks | None = None  # where the chunk's first usage was read


def context_after(delta: TranscriptDelta, previous: int | None) -> int | None:
    """Current context size after ``delta``: the last usage's ``context_tokens``, or the ``post_tokens``
    of a compact boundary newer than it (``None`` if that boundary has no figure); ``previous`` when the
    chunk said nothing about size."""
    if delta.boundaries and (delta.compacted_last or delta.last_usage is None):
        return delta.boundaries[-1].post_tokens
    if delta.last_usage is not None:
        return delta.last_usage.context_tokens
    return previous


def resume(cursor: TranscriptCursor, data: bytes) -> bytes | None:
    """``data`` read from ``cursor.offset - len(cursor.anchor)``, minus the anchor: the new bytes from
    ``cursor.offset``. None when the anchor is not there any more: the file was rewritten (read it
    again from 0 with a fresh cursor)."""
    k = len(cursor.anchor)
    if data[:k] != cursor.anchor:
        return None
    return data[k:]


# --------------------------------------------------------------------------- test helpers

TEST_TAIL = 8192  # bytes of a test run's output that decide its outcome (the summary is at the end)
TEST_TAIL_LINES = 40
_FAIL_RE = re.compile(
    r"\b[1-9]\d*\s+(?:failed|failing|failures?|errors?)\b"
    r"|^(?:--- )?FAIL(?:ED|URES?)?\b"
    r"|^ERROR\b"
    r"|test result: FAILED"
    r"|^Tests?:.*\b[1-9]\d*\s+failed"
    r"|\b(?:Failures|Errors|Failed):\s+[1-9]|^\s*Failed!|\bBUILD FAIL(?:ED|URE)\b"
    r"|^# fail [1-9]",  # TAP (node --test)
    re.M,
)
_PASS_RE = re.compile(
    r"\b[1-9]\d*\s+(?:passed|passing)\b"
    r"|^OK\b"
    r"|^ok\s"
    r"|test result: ok"
    r"|^PASS\b"
    r"|(?i:\ball tests passed\b)"
    r"|^\s*Passed!|\bBUILD SUCCESS(?:FUL)?\b|\b\d+ examples?, 0 failures\b",
    re.M,
)


def test_outcome(output: str, is_error: bool) -> bool | None:
    """Deduce a test run's outcome: False on a failure marker ("1 failed", "FAILED", "--- FAIL", ...) or a
    failed command; True on a pass marker ("3 passed", "OK", "ok  pkg", "test result: ok", "PASS");
    None when the output says neither."""
    if is_error:
        return False
    # Runners print their verdict at the end: look at the tail only, and only run a pattern when its
    # cheap substring pre-check matches (these scans run on every test command's output).
    return _tail_outcome(output[-TEST_TAIL:])


@functools.lru_cache(maxsize=32)
def _tail_outcome(tail: str) -> bool | None:
    # Cached: one tool output reaches this from the hook payload, the transcript and the lessons
    # classifier. Every marker sits within a line, so only lines holding a marker's keyword run a
    # pattern (a test log is mostly lines of neither kind).
    lines = tail.rsplit("\n", TEST_TAIL_LINES)[-TEST_TAIL_LINES:]
    fails = [ln for ln in lines if "fail" in ln or "FAIL" in ln or "Fail" in ln or "ERROR" in ln or "error" in ln
             or "Error" in ln]
    if fails and any(_FAIL_RE.search(ln) for ln in fails):
        return False
    passes = [ln for ln in lines if "pass" in ln or "PASS" in ln or "ok" in ln or "OK" in ln or "Pass" in ln]
    if passes and any(_PASS_RE.search(ln) for ln in passes):
        return True
    return None


test_outcome.__test__ = False  # type: ignore[attr-defined]  # not a pytest test when imported


# --------------------------------------------------------------------------- decoding


class _Rec(msgspec.Struct):
    """Top-level fields we read; big nested values stay raw until they are needed."""

    type: Any = None
    subtype: Any = None
    uuid: Any = None
    timestamp: Any = None
    isSidechain: Any = False
    isMeta: Any = False
    isCompactSummary: Any = False
    isApiErrorMessage: Any = False
    requestedModel: Any = None
    sourceToolUseID: Any = None
    compactMetadata: Any = None
    message: msgspec.Raw = msgspec.Raw()
    attachment: msgspec.Raw = msgspec.Raw()
    toolUseResult: msgspec.Raw = msgspec.Raw()
    rendered: msgspec.Raw = msgspec.Raw()


class _AttHead(msgspec.Struct):
    type: Any = None


_REC_DECODER = msgspec.json.Decoder(_Rec)
_HEAD_DECODER = msgspec.json.Decoder(_AttHead)
_ANY_DECODER = msgspec.json.Decoder()
_WANTED_ATTACHMENTS = frozenset(
    {"hook_additional_context", "hook_success", "file", "model", "instructions", "skill_listing"}
)


def _raw(raw: msgspec.Raw) -> Any:
    return _ANY_DECODER.decode(raw) if len(raw) else None


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _ts(v: Any) -> float:
    """ISO-8601 timestamp -> epoch seconds (naive = UTC); 0.0 when absent or invalid."""
    if not isinstance(v, str) or not v:
        return 0.0
    try:
        dt = datetime.fromisoformat(v)
    except ValueError:
        return 0.0
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


_CUT_AT = " \n\t\"',;"
_CUT_WINDOW = 4096  # how far a cut moves back (or forward) to reach a word boundary


def _cap(text: str, limit: int = MAX_TEXT) -> str:
    """Keep head and tail of an over-long text with a marker in between. The cuts fall on word
    boundaries (within ``_CUT_WINDOW``): a token cut in half (a secret, say) could leave a fragment
    that redaction, which runs on the capped text, no longer recognises."""
    if len(text) <= limit:
        return text
    head, tail = limit * 3 // 4, limit // 4
    lo = head - _CUT_WINDOW
    back = max(text.rfind(c, lo, head) for c in _CUT_AT)
    if back > lo:
        head = back + 1
    start = len(text) - tail
    hi = start + _CUT_WINDOW
    fwd = [i for i in (text.find(c, start, hi) for c in _CUT_AT) if i >= 0]
    if fwd:
        start = min(fwd)
    return f"{text[:head]}\n…[{start - head} chars truncated]…\n{text[start:]}"


def _text_and_tokens(full: str) -> tuple[str, int]:
    text = _cap(full)
    tokens = estimate_tokens(text)
    if len(text) < len(full) and text:
        tokens = tokens * len(full) // len(text)
    return text, tokens


def _blocks_text(content: Any) -> str:
    """Text of a message / tool_result content: a string or a list of blocks."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for b in content:
        if isinstance(b, dict):
            t = b.get("type")
            if t == "text" and isinstance(b.get("text"), str):
                parts.append(b["text"])
            elif t == "image":
                parts.append("[image]")
        elif isinstance(b, str):
            parts.append(b)
    return "\n".join(parts)


def _rendered_text(rendered: Any) -> str:
    """Text of an attachment's ``rendered`` list (``[{"content": "<system-reminder>..."}]``)."""
    if not isinstance(rendered, list):
        return ""
    return "\n".join(c for r in rendered if isinstance(r, dict) and isinstance(c := r.get("content"), str))


def _usage_of(msg_id: str, model: str | None, u: dict[str, Any], ts: float) -> Usage:
    src = u
    it = u.get("iterations")
    if isinstance(it, list) and it:
        msgs = [x for x in it if isinstance(x, dict) and x.get("type", "message") == "message"]
        if msgs:
            src = msgs[-1]
    return Usage(
        message_id=msg_id,
        model=model,
        input_tokens=_int(src.get("input_tokens")) or 0,
        cache_creation_input_tokens=_int(src.get("cache_creation_input_tokens")) or 0,
        cache_read_input_tokens=_int(src.get("cache_read_input_tokens")) or 0,
        output_tokens=_int(src.get("output_tokens")) or 0,
        ts=ts,
    )


def _summarize_input(name: str, inp: dict[str, Any]) -> str:
    if name == "Edit":
        return _cap(f"- {inp.get('old_string', '')}\n+ {inp.get('new_string', '')}", MAX_SUMMARY)
    if name == "Skill":
        return _str(inp.get("skill")) or _str(inp.get("command")) or ""
    if name in ("Write", "Read", "Bash"):
        return ""  # path / command are kept separately; Write content comes back in toolUseResult
    try:
        return _cap(msgspec.json.encode(inp).decode(), MAX_SUMMARY)
    except (TypeError, msgspec.EncodeError):
        return ""


def _patch_text(tur: dict[str, Any]) -> str:
    patch = tur.get("structuredPatch")
    if not isinstance(patch, list) or not patch:
        return ""
    out: list[str] = []
    for h in patch:
        if not isinstance(h, dict):
            continue
        out.append(f"@@ -{h.get('oldStart')},{h.get('oldLines')} +{h.get('newStart')},{h.get('newLines')} @@")
        lines = h.get("lines")
        if isinstance(lines, list):
            out.extend(x for x in lines if isinstance(x, str))
    return "\n".join(out)


def _exit_code(output: str, tur: Any) -> int | None:
    if isinstance(tur, dict):
        for key in ("exitCode", "exit_code", "returnCode"):
            code = _int(tur.get(key))
            if code is not None:
                return code
    m = _EXIT_RE.search(output[:200])
    if m is None and isinstance(tur, dict) and isinstance(tur.get("stderr"), str):
        m = _EXIT_RE.search(tur["stderr"][:200])
    return int(m.group(1)) if m else None


# --------------------------------------------------------------------------- state machine


class _State:
    """Mutable working copy of the cursor state plus the delta being built."""

    def __init__(self, cursor: TranscriptCursor) -> None:
        self.model = cursor.model
        self.pending: dict[str, PendingTool] = {p.id: p for p in cursor.pending}
        self.skill_hint = cursor.skill_hint
        self.delta = TranscriptDelta()
        self.chunk_usages: dict[str, Usage] = {}
        self.saw_usage_since_boundary = False

    def cursor(self, offset: int, skipping: bool, anchor: bytes, head: bytes = b"", tail: bytes = b"") -> TranscriptCursor:
        return TranscriptCursor(
            offset=offset,
            model=self.model,
            skipping=skipping,
            pending=tuple(self.pending.values()),
            skill_hint=self.skill_hint,
            anchor=anchor,
            skip_head=head,
            skip_tail=tail,
        )

    def marks(self) -> Marks:
        return marks_of(self.delta, usages=len(self.chunk_usages))

    def finish(self) -> TranscriptDelta:
        d = self.delta
        d.usages = list(self.chunk_usages.values())
        d.first_usage = d.usages[0] if d.usages else None
        d.compacted_last = bool(d.boundaries) and not self.saw_usage_since_boundary
        return d

    # ---- records

    def handle(self, rec: _Rec) -> bool:
        """Process one record; False when its type is unknown."""
        t = rec.type
        if rec.isSidechain is True:
            return True
        if t == "assistant":
            self._assistant(rec)
        elif t == "user":
            self._user(rec)
        elif t == "attachment":
            self._attachment(rec)
        elif t == "system":
            if rec.subtype == "compact_boundary":
                self._boundary(rec)
        elif t not in _IGNORED_TYPES:
            return False
        return True

    def _set_model(self, model: str) -> None:
        self.model = model
        self.delta.model = model

    def _assistant(self, rec: _Rec) -> None:
        msg = _raw(rec.message)
        if not isinstance(msg, dict):
            return
        ts = _ts(rec.timestamp)
        uuid = _str(rec.uuid) or ""
        self.skill_hint = None
        self._response(_str(msg.get("model")), _str(rec.requestedModel), _str(msg.get("id")), msg.get("usage"), ts)
        content = msg.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            return
        is_api_error = rec.isApiErrorMessage is True
        for i, b in enumerate(content):
            if not isinstance(b, dict):
                continue
            uid = uuid if i == 0 else f"{uuid}:{i}"
            bt = b.get("type")
            if bt == "text":
                text = _str(b.get("text"))
                if text and text.strip():
                    kind = Kind.ERROR if is_api_error else Kind.ASSISTANT
                    self._element(uid, kind, text, ts, is_error=is_api_error)
            elif bt == "thinking":
                text = _str(b.get("thinking"))
                if text and text.strip():
                    self._element(uid, Kind.THINKING, text, ts)
            elif bt == "tool_use":
                self._tool_use(b)

    def _response(self, model: str | None, requested: str | None, msg_id: str | None, usage: Any, ts: float) -> None:
        """The model and usage of a main-chain response (``<synthetic>`` ones say nothing)."""
        if not model or model == "<synthetic>":
            return
        if requested and requested.endswith("]") and "[" in requested:
            model = requested
        self._set_model(model)
        if msg_id and isinstance(usage, dict):
            u = _usage_of(msg_id, model, usage, ts)
            if not self.chunk_usages:
                self.delta.first_usage_marks = self.marks()
            self.delta.last_usage = u
            self.saw_usage_since_boundary = True
            self.chunk_usages[msg_id] = u

    def oversized(self, head: bytes, tail: bytes) -> None:
        """Count the usage of an over-long line from its head and tail only (never parsed whole)."""
        found = _oversized_response(head, tail)
        if found is not None:
            self._response(*found)

    def _tool_use(self, b: dict[str, Any]) -> None:
        tid = _str(b.get("id"))
        if not tid:
            return
        name = _str(b.get("name")) or "?"
        inp = b.get("input")
        if not isinstance(inp, dict):
            inp = {}
        path = _str(inp.get("file_path")) or _str(inp.get("notebook_path"))
        command = _str(inp.get("command")) if name == "Bash" else None
        self.pending.pop(tid, None)
        self.pending[tid] = PendingTool(
            id=tid,
            name=name,
            file_path=path,
            command=command[:MAX_COMMAND] if command is not None else None,
            summary=_summarize_input(name, inp),
        )
        if len(self.pending) > MAX_PENDING:
            del self.pending[next(iter(self.pending))]

    def _user(self, rec: _Rec) -> None:
        msg = _raw(rec.message)
        if not isinstance(msg, dict):
            return
        content = msg.get("content")
        ts = _ts(rec.timestamp)
        uuid = _str(rec.uuid) or ""
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in content
        ):
            results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
            tur_raw = rec.toolUseResult if len(results) == 1 else msgspec.Raw()
            for i, b in enumerate(results):
                self._tool_result(b, tur_raw, ts, f"{uuid}:{i}")
            return
        text = _blocks_text(content)
        if rec.isCompactSummary is True:
            self.delta.compact_summaries.append(text)
            self._element(uuid, Kind.COMPACT_SUMMARY, text, ts)
            return
        stripped = text.lstrip()
        if rec.isMeta is True:
            if stripped.startswith(_SKILL_PREFIX):
                self._skill(stripped, ts)
            return
        if stripped.startswith(_LOCAL_PREFIXES):
            m = _COMMAND_NAME_RE.search(stripped[:2000])
            self.skill_hint = m.group(1) if m and m.group(1) else None
            return
        if stripped.startswith(_SKILL_PREFIX):  # skill body without isMeta (stream-json style)
            self._skill(stripped, ts)
            return
        self.skill_hint = None
        if not stripped:
            return
        if stripped.startswith("<task-notification>"):
            self._element(uuid, Kind.TOOL, text, ts, tool="task-notification")
        else:
            self._element(uuid, Kind.PROMPT, text, ts)

    def _skill(self, text: str, ts: float) -> None:
        name = self.skill_hint
        if not name:
            first = text.split("\n", 1)[0][len(_SKILL_PREFIX) :].strip().rstrip("/\\")
            name = re.split(r"[/\\]", first)[-1] if first else "?"
        self.skill_hint = None
        self.delta.skills.append(SkillUse(name=name, tokens=estimate_tokens(_cap(text)), ts=ts))

    def _tool_result(self, b: dict[str, Any], tur_raw: msgspec.Raw, ts: float, fallback_uid: str) -> None:
        tid = _str(b.get("tool_use_id")) or ""
        call = self.pending.pop(tid, None) if tid else None
        name = call.name if call else None
        result = _blocks_text(b.get("content"))
        is_error = b.get("is_error") is True
        tur: Any = None
        if name in ("Bash", "Write", "Edit", "MultiEdit", "NotebookEdit"):
            try:
                tur = _raw(tur_raw)
            except msgspec.DecodeError:
                tur = None
        command = call.command if call else None
        path = call.file_path if call else None
        kind = Kind.TOOL
        passed: bool | None = None

        if name == "Bash":
            if not result and isinstance(tur, dict):
                result = "\n".join(s for s in (_str(tur.get("stdout")), _str(tur.get("stderr"))) if s)
            code = _exit_code(result, tur)
            if code is not None and code != 0:
                is_error = True
            if isinstance(tur, dict) and tur.get("interrupted") is True:
                result += "\n[interrupted]"
            body = f"Bash: {command or ''}\n{result}"
            if command and is_test_command(command):
                kind = Kind.TEST_RESULT
                passed = test_outcome(_cap(result), is_error)
            elif is_error:
                kind = Kind.ERROR
        else:
            detail = ""
            if not is_error and isinstance(tur, dict):
                if name in ("Edit", "MultiEdit", "NotebookEdit"):
                    detail = _patch_text(tur)
                elif name == "Write":
                    detail = _str(tur.get("content")) or ""
            if not detail and call and call.summary:
                detail = call.summary
            head = path or (call.summary if call and name not in EDIT_TOOLS else "") or ""
            label = name or "tool_result"
            body = f"{label}: {head}\n" + (f"{detail}\n{result}" if detail and detail != head else result)
            if is_error:
                kind = Kind.ERROR
            elif name in EDIT_TOOLS:
                kind = Kind.CODE_CHANGE
        text, tokens = _text_and_tokens(body)
        self.delta.elements.append(
            Element(
                uid=tid or fallback_uid,
                kind=kind,
                text=text,
                ts=ts,
                tool=name,
                file_path=path,
                command=command,
                is_error=is_error,
                passed=passed,
                tokens=tokens,
            )
        )
        if name == "Skill" and call and call.summary and not is_error:
            self.skill_hint = call.summary
        op = _FILE_OPS.get(name or "")
        if op and path and not is_error:
            self.delta.file_reads.append(FileTouch(path=path, tokens=tokens, ts=ts, op=op))

    def _attachment(self, rec: _Rec) -> None:
        if not len(rec.attachment):
            return
        head = _HEAD_DECODER.decode(rec.attachment)
        if head.type not in _WANTED_ATTACHMENTS:
            return
        att = _raw(rec.attachment)
        if not isinstance(att, dict):
            return
        ts = _ts(rec.timestamp)
        kind = head.type
        if kind == "model":
            ident = att.get("identity")
            model = _str(ident.get("modelId")) if isinstance(ident, dict) else None
            if model and not (self.model or "").startswith(model + "["):  # keep a "[1m]" variant
                self._set_model(model)
            return
        rendered = _rendered_text(_raw(rec.rendered)) if len(rec.rendered) else ""
        if kind == "instructions":
            self._instructions(att, ts)
            return
        if kind == "skill_listing":
            content = att.get("content")
            if not rendered:
                rendered = content if isinstance(content, str) else ""
            count = _int(att.get("skillCount"))
            self.delta.listings.append(
                Listing(
                    kind=kind,
                    tokens=estimate_tokens(_cap(rendered)),
                    ts=ts,
                    initial=att.get("isInitial") is not False,
                    count=count,
                )
            )
            return
        if kind == "file":
            path = _str(att.get("filename"))
            if path:
                tokens = estimate_tokens(_cap(rendered)) if rendered else 0
                self.delta.file_reads.append(FileTouch(path=path, tokens=tokens, ts=ts, op="read"))
            return
        content = att.get("content")
        text = (
            "\n".join(x for x in content if isinstance(x, str))
            if isinstance(content, list)
            else (_str(content) or "")
        )
        if kind == "hook_success" and not (rendered.strip() and text.strip()):
            return  # hook ran but nothing reached the window
        if not text and not rendered:
            return
        self.delta.injected.append(
            Injected(
                hook_event=_str(att.get("hookEvent")) or "",
                hook_name=_str(att.get("hookName")) or "",
                text=text,
                tokens=estimate_tokens(_cap(rendered or text)),
                ts=ts,
                source="stdout" if kind == "hook_success" else "additional_context",
            )
        )

    def _instructions(self, att: dict[str, Any], ts: float) -> None:
        files = att.get("files")
        if not isinstance(files, list):
            return
        for f in files:
            if not isinstance(f, dict):
                continue
            path = _str(f.get("path"))
            if not path:
                continue
            content = _str(f.get("content")) or ""
            self.delta.instructions.append(
                InstructionFile(
                    path=path,
                    memory_type=_str(f.get("type")) or "",
                    tokens=estimate_tokens(_cap(f"Contents of {path}:\n\n{content}")),
                    ts=ts,
                )
            )

    def _boundary(self, rec: _Rec) -> None:
        meta = rec.compactMetadata if isinstance(rec.compactMetadata, dict) else {}
        self.delta.boundary_marks.append(self.marks())
        self.delta.boundaries.append(
            CompactBoundary(
                uuid=_str(rec.uuid) or "",
                ts=_ts(rec.timestamp),
                trigger=_str(meta.get("trigger")),
                pre_tokens=_int(meta.get("preTokens")),
                post_tokens=_int(meta.get("postTokens")),
            )
        )
        self.saw_usage_since_boundary = False

    def _element(
        self,
        uid: str,
        kind: Kind,
        full: str,
        ts: float,
        *,
        tool: str | None = None,
        is_error: bool = False,
    ) -> None:
        text, tokens = _text_and_tokens(full)
        self.delta.elements.append(
            Element(uid=uid, kind=kind, text=text, ts=ts, tool=tool, is_error=is_error, tokens=tokens)
        )


# --------------------------------------------------------------------------- over-long lines

# Whitespace-tolerant: Claude Code writes compact JSON, other writers may not.
_MESSAGE_KEY = re.compile(rb'"message"\s*:\s*\{')
_USAGE_KEY = re.compile(rb'"usage"\s*:\s*\{')
_CONTENT_KEY = re.compile(rb'"content"\s*:')
_SIDECHAIN = re.compile(rb'"isSidechain"\s*:\s*true')
_ROLE_ASSISTANT = re.compile(rb'"role"\s*:\s*"assistant"')
_FIELD_RES = {
    key: re.compile(rb'"' + key.encode() + rb'"\s*:\s*"((?:[^"\\]|\\.){1,256})"')
    for key in ("model", "id", "timestamp", "requestedModel")
}


def _field(key: str, data: bytes) -> str | None:
    m = _FIELD_RES[key].search(data)
    if m is None:
        return None
    try:
        v = _ANY_DECODER.decode(b'"' + m.group(1) + b'"')
    except msgspec.DecodeError:
        return None
    return v if isinstance(v, str) else None


def _object_at(data: bytes, start: int) -> bytes | None:
    """The JSON object that opens at ``data[start]`` (``{``), or None if it does not close in ``data``."""
    depth, in_str, esc = 0, False, False
    for i in range(start, len(data)):
        c = data[i]
        if in_str:
            if esc:
                esc = False
            elif c == 0x5C:  # backslash
                esc = True
            elif c == 0x22:
                in_str = False
        elif c == 0x22:
            in_str = True
        elif c == 0x7B:
            depth += 1
        elif c == 0x7D:
            depth -= 1
            if depth == 0:
                return data[start : i + 1]
    return None


def _oversized_response(head: bytes, tail: bytes) -> tuple[str | None, str | None, str | None, Any, float] | None:
    """(model, requestedModel, message id, usage, ts) of an over-long main-chain assistant line, from its
    head and tail; None when they do not show one. Claude Code writes the top-level fields, then
    ``message`` (model, id, type, role, then content: the big part, then usage), then ``type``,
    ``uuid`` and ``timestamp``."""
    m = _MESSAGE_KEY.search(head)
    if m is None:
        return None
    top = head[: m.start()]
    if _SIDECHAIN.search(top):
        return None
    msg_head = head[m.end() :]
    c = _CONTENT_KEY.search(msg_head)
    msg_head = msg_head[: c.start()] if c else msg_head
    if not _ROLE_ASSISTANT.search(msg_head):
        return None
    raw, end = None, 0
    for u in _USAGE_KEY.finditer(tail):  # the message's usage follows its content: the last one not
        if u.start() < end:  # nested in the one before
            continue
        obj = _object_at(tail, u.end() - 1)
        if obj is not None:
            raw, end = obj, u.end() - 1 + len(obj)
    if raw is None:
        return None
    try:
        usage = _ANY_DECODER.decode(raw)
    except msgspec.DecodeError:
        return None
    after = tail[end:]
    if _SIDECHAIN.search(after):  # written after the message by another writer
        return None
    ts = _ts(_field("timestamp", after) or _field("timestamp", top))
    requested = _field("requestedModel", after) or _field("requestedModel", top)
    return _field("model", msg_head), requested, _field("id", msg_head), usage, ts


def _keep_head(previous: bytes, data: bytes) -> bytes:
    """The first OVERSIZED_HEAD bytes of ``previous + data``."""
    if len(previous) >= OVERSIZED_HEAD:
        return previous
    return previous + data[: OVERSIZED_HEAD - len(previous)]


def _keep_tail(previous: bytes, data: bytes) -> bytes:
    """The last OVERSIZED_TAIL bytes of ``previous + data``."""
    if len(data) >= OVERSIZED_TAIL:
        return data[-OVERSIZED_TAIL:]
    return (previous + data)[-OVERSIZED_TAIL:]


def _anchor(previous: bytes, data: bytes, consumed: int) -> bytes:
    """The last ANCHOR bytes of the file once ``data[:consumed]`` followed ``previous``."""
    if consumed >= ANCHOR:
        return data[consumed - ANCHOR : consumed]
    return (previous + data[:consumed])[-ANCHOR:]


# --------------------------------------------------------------------------- feed


def _line(state: _State, line: bytes) -> None:
    """Decode and process one complete line; count it as skipped when it cannot be used."""
    if not line or line.isspace():
        return
    if not line.isascii():
        line = repair_utf8(line) or line
    try:
        try:
            rec = _REC_DECODER.decode(line)
        except msgspec.DecodeError:
            fixed = repair_surrogates(line)  # a lone surrogate escape; else the line is not JSON
            if fixed is None:
                raise
            rec = _REC_DECODER.decode(fixed)
        ok = state.handle(rec)
    except (msgspec.MsgspecError, ValueError, TypeError, AttributeError, KeyError, IndexError, RecursionError):
        ok = False
    if not ok:
        state.delta.skipped += 1


def feed(
    cursor: TranscriptCursor,
    data: bytes,
    *,
    final: bool = False,
    max_line: int = 4 << 20,
) -> tuple[TranscriptCursor, TranscriptDelta]:
    """Consume the complete lines of ``data`` (the file's bytes from ``cursor.offset``).

    Returns the advanced cursor and what the consumed lines contained. O(len(data)).
    """
    n = len(data)
    pos = 0
    state = _State(cursor)
    if cursor.skipping:  # discard the rest of an over-long line
        nl = data.find(b"\n")
        if nl < 0:
            head, tail = _keep_head(cursor.skip_head, data), _keep_tail(cursor.skip_tail, data)
            if not final:
                return msgspec.structs.replace(
                    cursor, offset=cursor.offset + n, anchor=_anchor(cursor.anchor, data, n), skip_head=head,
                    skip_tail=tail,
                ), TranscriptDelta()
            state.oversized(head, tail)
            state.delta.skipped = 1
            return state.cursor(cursor.offset + n, False, _anchor(cursor.anchor, data, n)), state.finish()
        head = _keep_head(cursor.skip_head, data[: min(nl, OVERSIZED_HEAD)])
        state.oversized(head, _keep_tail(cursor.skip_tail, data[max(0, nl - OVERSIZED_TAIL) : nl]))
        state.delta.skipped = 1
        pos = nl + 1
    end = max(data.rfind(b"\n") + 1, pos)
    tail = n - end
    if end == pos and not final and tail <= max_line and pos == 0:  # nothing complete to parse
        return cursor, TranscriptDelta()

    if end > pos:
        for line in data[pos : end - 1].split(b"\n"):
            if len(line) > max_line:
                state.oversized(line[:OVERSIZED_HEAD], line[-OVERSIZED_TAIL:])
                state.delta.skipped += 1
            else:
                _line(state, line)
    consumed, skipping, head, kept = end, False, b"", b""
    if tail:
        over = tail > max_line
        if over:  # its head and tail: scanned now (final) or carried while the rest is skipped
            head, kept = data[end : end + OVERSIZED_HEAD], data[max(end, n - OVERSIZED_TAIL) :]
        if final:
            if over:
                state.oversized(head, kept)
                state.delta.skipped += 1
                head, kept = b"", b""
            else:
                _line(state, data[end:])
            consumed = n
        elif over:
            consumed, skipping = n, True
    anchor = _anchor(cursor.anchor, data, consumed)
    return state.cursor(cursor.offset + consumed, skipping, anchor, head, kept), state.finish()


# --------------------------------------------------------------------------- calls running now

class _TailBlock(msgspec.Struct):
    type: str = ""
    id: str = ""
    name: str = ""
    input: Any = None
    tool_use_id: str = ""


class _TailMessage(msgspec.Struct):
    content: list[_TailBlock] | str | None = None


class _TailRecord(msgspec.Struct):
    isSidechain: bool = False
    message: _TailMessage | None = None


_tail_decoder = msgspec.json.Decoder(_TailRecord)


def open_bash_commands(tail: bytes, *, cut: bool) -> list[str]:
    """The commands of the main chain's Bash calls in ``tail`` (the end of a transcript; ``cut`` when it
    starts inside a line, which is then skipped) that no result follows, in call order. A call whose
    record is not in ``tail`` is not known; a line that does not decode is skipped."""
    lines = tail.split(b"\n")
    if cut:
        lines = lines[1:]
    calls: dict[str, str] = {}
    for line in lines:
        if b'"tool_use' not in line:  # both a call ("tool_use") and a result ("tool_use_id")
            continue
        try:
            rec = _tail_decoder.decode(line)
        except msgspec.DecodeError:
            continue
        if rec.isSidechain or rec.message is None or not isinstance(rec.message.content, list):
            continue
        for b in rec.message.content:
            if b.type == "tool_use" and b.name == "Bash" and b.id and isinstance(b.input, dict):
                command = b.input.get("command")
                if isinstance(command, str):
                    calls[b.id] = command
            elif b.type == "tool_result" and b.tool_use_id:
                calls.pop(b.tool_use_id, None)
    return list(calls.values())
