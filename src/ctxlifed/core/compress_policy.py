"""Live compression on PostToolUse: keep a tool's output, or replace it with its L1 digest; and the answer
object that replaces it.

Rules:
- Pure: no I/O, no clock. :func:`decide` reads the typed PostToolUse event (``core.hook_events``);
  the answer builders take its ``tool_name`` and ``tool_response``. The caller reads the file Claude Code
  saved the output to (:func:`saved_output`: a Bash ``persistedOutputPath``, or the file an MCP result
  over Claude Code's token limit was saved to, whose response is then only Claude Code's notice naming
  it: ``Error: result (N characters across M lines) exceeds maximum allowed tokens. Output has been saved
  to <path>.``, 2.1.328, a string or one text block) and passes its text as ``full_text``; the caller
  archives the original (L2) before answering.
- Only Bash outputs (``tool_response`` ``{stdout, stderr, interrupted, isImage, noOutputExpected, ...}``)
  and MCP outputs (``mcp__*``: a string, a list of ``{"type": "text", "text": ...}`` blocks, or a
  ``{"content": [...], "isError"?: ...}`` object) are ever replaced. Never: other tools, interrupted calls,
  images (``isImage``, or any MCP block that is not text), an MCP object with ``structuredContent`` or
  other keys, an empty output, and output the model asked to see verbatim (:func:`asked_verbatim`):
  * a pipeline that prints named files: ``cat``/``bat``/``less``/``more``/``nl``/``head``/``tail``/
    ``sed -n``/``awk``/``xxd``/``od``/``jq`` with at least one file argument and no wildcard (``cat *.log``
    is not a request for verbatim text), optionally piped through head/tail/sed -n/nl/cut/grep;
  * any pipeline whose last stage is ``head``/``tail``/``sed -n`` (the model already chose its window);
  * ``git diff``/``git show``/``git log -p`` limited to paths (after ``--`` or path-like arguments) when
    one of them is a file edited in this session (``edited_paths``, compared by suffix) or there is
    exactly one path and it names a file (``a/b.py``, not ``src``); ``git show <rev>:<path>``;
  * a command that cannot be parsed (``shlex``): kept, to be safe. Leading ``cd x &&`` is ignored.
- Thresholds (:class:`CompressSettings`), in estimated tokens of the output: at Working-zone level 0
  only outputs of ``min_tokens[0]`` or more, every Bash output Claude Code would cut to a head-only
  preview (``stdout`` of ``cut_chars`` = 30,000 characters or more, or a ``persistedOutputPath``) and
  every MCP result it saved to a file (the model would otherwise be told to read the whole file, in
  chunks); from level 1 on, ``min_tokens[level]``. ``aggressive`` uses ``aggressive_min_tokens``;
  ``off`` never replaces.
- Phase matrix (raises the threshold, never for an output Claude Code would cut anyway): testing keeps
  failing-test output verbatim up to ``keep_failing_tests_tokens`` and build errors up to
  ``keep_errors_tokens``; implementation keeps compiler/linter errors up to ``keep_errors_tokens`` and
  failing tests up to half of ``keep_failing_tests_tokens``; review keeps diffs up to
  ``keep_diff_tokens``; planning and design add nothing. ``aggressive`` halves these caps.
- A digest replaces the original only when it saves at least ``min_saving`` of its tokens
  (:func:`worth_replacing`).
- :func:`post_tool_use_answer` keeps the original's shape: Bash gets exactly ``{stdout, stderr: "",
  interrupted: false, isImage: false, noOutputExpected}`` under ``updatedToolOutput``; MCP gets
  ``updatedMCPToolOutput`` of the same type as the original (string, block list, or object with
  ``content`` and its ``isError``). An ``additionalContext`` to carry as well goes in the same
  ``hookSpecificOutput``. Any unknown shape: None (the original stays).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection, Mapping
from typing import Any, Literal

import msgspec

from ctxlifed.core.digest import OutputKind, output_kind
from ctxlifed.core.hook_events import PostToolUse
from ctxlifed.core.model import estimate_tokens

__all__ = [
    "CompressMode",
    "CompressSettings",
    "DEFAULT_SETTINGS",
    "Decision",
    "asked_verbatim",
    "decide",
    "output_text",
    "post_tool_use_answer",
    "saved_output",
    "worth_replacing",
]

CompressMode = Literal["auto", "off", "aggressive"]

BASH_KEYS = ("stdout", "stderr", "interrupted", "isImage", "noOutputExpected")
# Keys a Bash tool_response may carry besides BASH_KEYS; any other key is an unknown shape (kept).
_BASH_KNOWN = frozenset({*BASH_KEYS, "persistedOutputPath", "persistedOutputSize", "returnCodeInterpretation",
                         "backgroundTaskId", "dangerouslyDisableSandbox"})
_MCP_OBJECT_KEYS = frozenset({"content", "isError", "_meta"})


class CompressSettings(msgspec.Struct, frozen=True, kw_only=True):
    """``compress_outputs`` and its thresholds (estimated tokens)."""

    compress_outputs: CompressMode = "auto"
    min_tokens: tuple[int, int, int, int] = (7_500, 2_000, 1_000, 500)  # by Working-zone level 0..3
    aggressive_min_tokens: tuple[int, int, int, int] = (2_000, 1_000, 500, 250)
    cut_chars: int = 30_000  # Claude Code keeps a Bash output this long only as a 2 KB preview + a file
    keep_failing_tests_tokens: int = 8_000
    keep_errors_tokens: int = 6_000
    keep_diff_tokens: int = 6_000
    min_saving: float = 0.3
    digest_budget_tokens: int = 600  # digest(budget_tokens=...)
    # digest(max_tokens=...): must-keep lines past it are counted, not shown (the digest is what stays in the
    # window). Claude Code's 10,000-character cap on hook output strings (spec 2.5) does not apply to
    # updatedToolOutput: a 17,699-character replacement reached the model whole (2.1.328, docs/claude-code.md).
    digest_max_tokens: int = 2_000


DEFAULT_SETTINGS = CompressSettings()


class Decision(msgspec.Struct, frozen=True, kw_only=True):
    """Replace this output with a digest of ``text`` (of kind ``kind``)."""

    kind: OutputKind
    reason: str  # why: "level 2 >= 1000 tokens", "cut by Claude Code", ...
    text: str  # the whole original as known: ``full_text`` or the payload's output
    original_tokens: int
    cut_by_claude: bool  # Claude Code would show only a preview (>= cut_chars, or persisted)
    complete: bool  # False when the output was persisted and ``full_text`` was not given


# ---------------------------------------------------------------- verbatim requests

_SPLIT_RE = re.compile(r"&&|\|\||;|\n")
_FILE_PRINTERS = frozenset({"cat", "bat", "batcat", "less", "more", "nl", "head", "tail", "sed", "awk", "xxd", "od",
                            "jq", "hexdump", "strings", "view"})
_WINDOW_STAGES = frozenset({"head", "tail", "sed", "nl", "cut", "grep", "cat", "less", "more"})
_WILDCARD = re.compile(r"[*?\[]")
_ENV_RE = re.compile(r"^[A-Za-z_]\w*=")


def _words(stage: str) -> list[str]:
    words = shlex.split(stage, posix=True)
    while words and (_ENV_RE.match(words[0]) or words[0] in ("sudo", "env", "command", "time", "nice")):
        words.pop(0)
    if words:
        words[0] = words[0].rsplit("/", 1)[-1]
    return words


def _file_args(words: list[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for w in words[1:]:
        if skip:
            skip = False
            continue
        if w in ("-n", "-c", "-e", "-f", "--lines", "--bytes") and words[0] in ("head", "tail"):
            skip = True
            continue
        if w.startswith("-") or w.startswith(">") or w.startswith("2>"):
            continue
        out.append(w)
    if words[0] in ("sed", "awk", "jq") and out:
        out = out[1:]  # the script / filter comes first
    return out


def _is_window(words: list[str]) -> bool:
    if not words:
        return False
    if words[0] == "sed":
        return "-n" in words
    return words[0] in ("head", "tail")


def _git_paths(words: list[str]) -> list[str] | None:
    """Paths a ``git diff/show/log -p`` is limited to, or None when ``words`` is not one."""
    i = 1
    while i < len(words) and words[i] in ("-C", "-c", "--no-pager"):
        i += 2 if words[i] in ("-C", "-c") else 1
    if i >= len(words) or words[i] not in ("diff", "show", "log"):
        return None
    sub = words[i]
    args = words[i + 1:]
    if sub == "log" and not ({"-p", "--patch"} & set(args)):
        return None
    if "--" in args:
        return [a for a in args[args.index("--") + 1:] if a]
    if sub == "show" and any(":" in a and not a.startswith("-") for a in args):
        return ["<rev:path>"]
    return [a for a in args if not a.startswith("-") and ("/" in a or "." in a) and ".." not in a]


def asked_verbatim(command: str, edited_paths: Collection[str] = ()) -> bool:
    """True when ``command`` prints what the model asked to see verbatim (see the module rules)."""
    segs = [s.strip() for s in _SPLIT_RE.split(command or "") if s.strip()]
    try:
        while segs and _words(segs[0])[:1] in (["cd"], ["pushd"]):
            segs.pop(0)
        if not segs:
            return False
        for seg in segs:
            stages = [_words(s) for s in seg.split("|") if s.strip()]
            if not stages or not stages[0]:
                continue
            if _is_window(stages[-1]) and len(stages) > 1:
                return True
            first = stages[0]
            if first[0] in _FILE_PRINTERS:
                files = _file_args(first)
                if files and not any(_WILDCARD.search(f) for f in files) and all(
                        st and st[0] in _WINDOW_STAGES for st in stages[1:]):
                    return True
            if first[0] == "git":
                paths = _git_paths(first)
                if paths:
                    if paths == ["<rev:path>"] or (len(paths) == 1 and "." in paths[0].rstrip("/").rsplit("/", 1)[-1]):
                        return True
                    if any(p.endswith(e) or e.endswith(p) for p in paths for e in edited_paths if p and e):
                        return True
    except ValueError:
        return True  # unbalanced quotes etc.: cannot tell, keep the original
    return False


# ---------------------------------------------------------------- shapes

def _mcp_blocks_text(blocks: list[Any]) -> str | None:
    parts: list[str] = []
    for b in blocks:
        if not isinstance(b, Mapping) or b.get("type") != "text" or not isinstance(b.get("text"), str):
            return None
        if set(b) - {"type", "text", "annotations"}:
            return None
        parts.append(b["text"])
    return "\n".join(parts)


def output_text(tool_name: str, tool_response: Any) -> str | None:
    """The text of a replaceable output, or None when its shape is not one ctxlifed replaces."""
    if tool_name == "Bash":
        if not isinstance(tool_response, Mapping):
            return None
        out, err = tool_response.get("stdout"), tool_response.get("stderr", "")
        if not isinstance(out, str) or not isinstance(err, str) or set(tool_response) - _BASH_KNOWN:
            return None
        if tool_response.get("interrupted") is not False and "interrupted" in tool_response:
            return None
        if tool_response.get("isImage"):
            return None
        return out + ("\n" + err if err else "")
    if tool_name.startswith("mcp__"):
        if isinstance(tool_response, str):
            return tool_response
        if isinstance(tool_response, list):
            return _mcp_blocks_text(tool_response)
        if isinstance(tool_response, Mapping) and isinstance(tool_response.get("content"), list):
            if set(tool_response) - _MCP_OBJECT_KEYS:
                return None
            return _mcp_blocks_text(tool_response["content"])
    return None


# ---------------------------------------------------------------- saved outputs

# Claude Code's notice in place of an MCP result over its token limit (the module rules).
_MCP_SAVED_RE = re.compile(r"Error: result \(([\d,]{1,20}) characters across [\d,]{1,20} lines?\) exceeds maximum"
                           r" allowed tokens\. Output has been saved to (/[^\n]{1,4096}?)\.\n")
_MCP_NOTICE_MAX = 16_384  # characters: the notice is about 1,300


def saved_output(event: PostToolUse) -> tuple[str, int | None]:
    """The file Claude Code saved this output to and the output's size in characters (see the module
    rules); ``("", None)`` when it saved none."""
    if event.tool_name == "Bash":
        return event.persisted_output_path, event.persisted_output_size
    if not event.tool_name.startswith("mcp__"):
        return "", None
    r = event.tool_response
    if isinstance(r, list) and len(r) == 1 and isinstance(r[0], Mapping) and r[0].get("type") == "text":
        r = r[0].get("text")
    if not isinstance(r, str) or len(r) > _MCP_NOTICE_MAX:
        return "", None
    m = _MCP_SAVED_RE.match(r)
    return (m.group(2), int(m.group(1).replace(",", ""))) if m else ("", None)


# ---------------------------------------------------------------- the decision

_FAILING_TEST_RE = re.compile(r"\bFAILED\b|\bFAIL\b|\bfailed\b|\bnot ok \d|\bpanicked at\b|^E\s|\bERROR\b", re.M)
_ERROR_RE = re.compile(r"\berror\b|\bError\b|\bERROR\b|error(?:\[\w+\])?:|error TS\d")


# Every match of _FAILING_TEST_RE / _ERROR_RE contains one of these.
_FAILING_TEST_WORDS = ("FAIL", "failed", "not ok", "panicked at", "\nE", "ERROR")
_ERROR_WORDS = ("rror", "RROR")


def _phase_cap(phase: str | None, kind: OutputKind, text: str, s: CompressSettings) -> int:
    head, tail = text[:65536], text[-65536:]

    def has(rx: re.Pattern[str]) -> bool:
        # A literal scan first: the patterns' ``\b`` alternations defeat the regex engine's own
        # prefix search, and most outputs hold none of their words.
        words = _FAILING_TEST_WORDS if rx is _FAILING_TEST_RE else _ERROR_WORDS
        if not any(w in head or w in tail for w in words) and not (rx is _FAILING_TEST_RE and "E" in (head[:1], tail[:1])):
            return False
        return bool(rx.search(tail) or rx.search(head))

    cap = 0
    if phase == "testing":
        if kind == "test" and has(_FAILING_TEST_RE):
            cap = s.keep_failing_tests_tokens
        elif kind == "build" and has(_ERROR_RE):
            cap = s.keep_errors_tokens
    elif phase == "implementation":
        if kind == "build" and has(_ERROR_RE):
            cap = s.keep_errors_tokens
        elif kind == "test" and has(_FAILING_TEST_RE):
            cap = s.keep_failing_tests_tokens // 2
    elif phase == "review" and kind == "diff":
        cap = s.keep_diff_tokens
    return cap // 2 if s.compress_outputs == "aggressive" else cap


def decide(
    event: PostToolUse,
    *,
    level: int,
    phase: str | None,
    settings: CompressSettings = DEFAULT_SETTINGS,
    edited_paths: Collection[str] = (),
    full_text: str | None = None,
) -> Decision | None:
    """Replace this output with a digest (a :class:`Decision`), or keep it (None). See the module rules."""
    s = settings
    if s.compress_outputs == "off":
        return None
    tool_name, tool_response = event.tool_name, event.tool_response
    payload_text = output_text(tool_name, tool_response)
    if payload_text is None:
        return None
    command = ""
    persisted = False
    stdout_len = len(payload_text)
    if tool_name == "Bash":
        command = event.input_text("command")
        if command and asked_verbatim(command, edited_paths):
            return None
        persisted = isinstance(tool_response.get("persistedOutputPath"), str)
        stdout_len = len(tool_response.get("stdout") or "")
    else:  # an MCP result over Claude Code's token limit: its response only names the file
        persisted = bool(saved_output(event)[0])
    text = full_text if isinstance(full_text, str) and full_text else payload_text
    if not text.strip():
        return None
    tokens = estimate_tokens(text)
    if persisted and not full_text:
        size = saved_output(event)[1]
        if size is not None and size > len(text):
            tokens = max(tokens, size // 4)
    cut = persisted or (tool_name == "Bash" and stdout_len >= s.cut_chars)
    kind = output_kind(text, command or None)
    lvl = min(3, max(0, int(level)))
    table = s.aggressive_min_tokens if s.compress_outputs == "aggressive" else s.min_tokens
    if cut:
        reason = "cut by Claude Code (persisted or >= %d chars)" % s.cut_chars
    else:
        if tokens < table[lvl]:
            return None  # below the level's threshold: the phase matrix only raises it
        threshold = max(table[lvl], _phase_cap(phase, kind, text, s))
        if tokens < threshold:
            return None
        reason = f"level {lvl}: {tokens} >= {threshold} tokens"
    return Decision(kind=kind, reason=reason, text=text, original_tokens=tokens, cut_by_claude=cut,
                    complete=not (persisted and not full_text))


def worth_replacing(original_tokens: int, digest_tokens: int, settings: CompressSettings = DEFAULT_SETTINGS) -> bool:
    """True when the digest saves at least ``settings.min_saving`` of the original's tokens."""
    return original_tokens > 0 and digest_tokens <= original_tokens * (1.0 - settings.min_saving)


# ---------------------------------------------------------------- the answer

def _mcp_replacement(tool_response: Any, text: str) -> Any:
    if isinstance(tool_response, str):
        return text
    if isinstance(tool_response, list):
        return [{"type": "text", "text": text}]
    if isinstance(tool_response, Mapping):
        out: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
        if "isError" in tool_response:
            out["isError"] = tool_response["isError"]
        return out
    return None


def post_tool_use_answer(
    tool_name: str,
    tool_response: Any,
    replacement: str,
    *,
    additional_context: str | None = None,
) -> dict[str, Any] | None:
    """The PostToolUse hook answer that replaces the output with ``replacement`` (and carries
    ``additional_context``), or None when the output's shape is unknown (see the module rules)."""
    if not isinstance(replacement, str) or output_text(tool_name, tool_response) is None:
        return None
    hso: dict[str, Any] = {"hookEventName": "PostToolUse"}
    if tool_name == "Bash":
        hso["updatedToolOutput"] = {
            "stdout": replacement,
            "stderr": "",
            "interrupted": False,
            "isImage": False,
            "noOutputExpected": bool(tool_response.get("noOutputExpected", False)),
        }
    else:
        value = _mcp_replacement(tool_response, replacement)
        if value is None:
            return None
        hso["updatedMCPToolOutput"] = value
    if additional_context:
        hso["additionalContext"] = additional_context
    return {"hookSpecificOutput": hso}
