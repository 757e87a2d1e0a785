"""The domain vocabulary shared by every pure module in ``ctxlifed.core``.

Rules:
- Pure data. No I/O, no clock, no logging. Times are epoch seconds passed in by the caller.
- Every Struct here is frozen: the core computes new values, it never mutates shared ones.
- Token counts that do not come from the transcript's ``usage`` are estimates made by
  :func:`estimate_tokens` (about 4 characters per token for Latin text, 1 per CJK character).
"""

from __future__ import annotations

import enum
import re
from typing import Literal

import msgspec

PhaseName = Literal["planning", "design", "implementation", "testing", "review"]
PHASES: tuple[PhaseName, ...] = ("planning", "design", "implementation", "testing", "review")


class Kind(enum.StrEnum):
    """What a context element is. Stored as text in the archive's ``kind`` column."""

    PROMPT = "prompt"  # a user prompt
    ASSISTANT = "assistant"  # assistant text
    THINKING = "thinking"  # a thinking block
    TOOL = "tool"  # a tool call with its result (``tool`` names which)
    ERROR = "error"  # a failed tool call, a non-zero exit, an exception
    CODE_CHANGE = "code_change"  # Write / Edit / MultiEdit / NotebookEdit
    DECISION = "decision"  # "we decided / let's go with / 决定 ..."
    CONSTRAINT = "constraint"  # "must / must not / never / 必须 / 不要 ..."
    PENDING = "pending"  # TODO, open item, next step
    TEST_RESULT = "test_result"  # output of a test run (``meta['passed']`` tells)
    COMPACT_SUMMARY = "compact_summary"  # Claude Code's compaction summary
    LEDGER = "ledger"  # an L3 file written by ctxlifed or edited by hand
    LESSON = "lesson"  # an error -> fix pair


class Category(enum.StrEnum):
    """The phase-aware decision for an element at compression time."""

    KEEP = "keep"  # stays in L0
    SUMMARIZE = "summarize"  # L1 summary stays, full text in L2
    ARCHIVE = "archive"  # L2 only, recallable
    DISCARD = "discard"  # not offered by default (full original still in L2)


class Level(enum.IntEnum):
    """Compression level derived from Working-zone usage."""

    NONE = 0
    L0_L1 = 1
    L1_L2 = 2
    L2_L3 = 3


class Element(msgspec.Struct, frozen=True, kw_only=True):
    """One context element parsed from the transcript or a hook event.

    ``uid`` is stable for the same content at the same place (transcript uuid, or tool_use_id,
    plus a suffix); the archive dedups by content hash in addition.
    """

    uid: str
    kind: Kind
    text: str
    ts: float = 0.0
    tool: str | None = None
    file_path: str | None = None
    command: str | None = None
    is_error: bool = False
    passed: bool | None = None  # for TEST_RESULT: True green, False red, None unknown
    tokens: int = 0  # estimate of what the element costs in the window


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    """Token usage of one main-chain assistant response (deduplicated by message id)."""

    message_id: str
    model: str | None
    input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    output_tokens: int = 0
    ts: float = 0.0

    @property
    def context_tokens(self) -> int:
        """What the window holds: input + cache creation + cache read (statusline convention)."""
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens


def _is_cjk(ch: str) -> bool:
    o = ord(ch)
    return (
        0x3040 <= o <= 0x30FF  # kana
        or 0x3400 <= o <= 0x4DBF
        or 0x4E00 <= o <= 0x9FFF
        or 0xAC00 <= o <= 0xD7AF  # hangul
        or 0xF900 <= o <= 0xFAFF
        or 0xFF00 <= o <= 0xFFEF
    )


# The ranges of ``_is_cjk``, counted by one regex scan: never a Python step per character.
_CJK_RE = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")
# UTF-8 lead bytes of U+3000-U+9FFF, U+A000-U+DFFF and U+F000-U+FFFF: every CJK character starts with
# one, so a text without any (most non-ASCII text: '·', '—', '✓', accents) skips the class scan.
_CJK_LEADS = (b"\xe3", b"\xe4", b"\xe5", b"\xe6", b"\xe7", b"\xe8", b"\xe9", b"\xea", b"\xeb", b"\xec", b"\xed",
              b"\xef")
_LEAD_CHECK_CHARS = 256  # shorter texts go straight to the class scan


def cjk_count(text: str) -> int:
    """How many characters of ``text`` are CJK (the ranges of ``_is_cjk``)."""
    if text.isascii():
        return 0
    if len(text) > _LEAD_CHECK_CHARS:
        data = text.encode("utf-8", "surrogatepass")
        if not any(lead in data for lead in _CJK_LEADS):
            return 0
    return len(_CJK_RE.findall(text))


def estimate_tokens(text: str) -> int:
    """Cheap, deterministic token estimate: ceil(latin_chars / 4) + cjk_chars.

    Used only where the transcript gives no usage figure; always labelled an estimate.
    """
    if not text:
        return 0
    return tokens_of(len(text), cjk_count(text))


def tokens_of(chars: int, cjk: int) -> int:
    """:func:`estimate_tokens` of a text of ``chars`` characters, ``cjk`` of them CJK."""
    return cjk + (chars - cjk + 3) // 4
