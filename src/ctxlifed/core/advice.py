"""When advice pays: /compact, /clear, /rewind and a subagent, each with its reason (docs/advice.md).

Rules:
- Pure: no I/O, no clock (times are passed in). Same input -> same output.
- ``/compact`` (:func:`compact_cause`): near Claude Code's auto-compaction (it will compact anyway: choose
  the focus), or at level L0→L1 or above (Working past the first threshold), or at a task boundary (a
  phase switch, tests green again) only when :func:`compaction_pays`: the Working tokens a compaction
  frees, re-read at the cache-read price every later turn, repay the compaction within
  :data:`PAYBACK_TURNS` turns. Its cost, in input-token equivalents (base input = 1): the compaction
  request reads the whole context (cache read, :data:`CACHE_READ`) and writes a summary (output,
  :data:`OUTPUT` per token, :data:`SUMMARY_TOKENS`); the next request writes the cache again for the
  summary and what is re-attached or re-read (:data:`CACHE_WRITE`, :data:`REREAD_TOKENS`). Nothing
  below that Working size is advised at a boundary (:func:`boundary_min_working`).
- ``/rewind`` (:func:`rewind_due`): the same failure :data:`REWIND_AFTER` times in a row (a pass or
  another failure resets the count). What "the same" is (:func:`failure_key`): a test run is the same
  failure when the same tests fail, whatever their assertion figures ("9 != 10", then "8 != 10": a flaky
  test is still failing); any other failure, by its error signature.
- ``/clear`` (:func:`unrelated_task`): a prompt that asks for a task (at least :data:`TASK_MIN_WEIGHT`
  of significant tokens) sharing less than :data:`UNRELATED_BELOW` of them with the session's work,
  while Working holds at least :data:`CLEAR_MIN_WORKING` tokens.
- Subagent (:func:`sweep_due`): :data:`SWEEP_READS` exploration calls in a row (Read / Grep / Glob ...)
  over at least :data:`SWEEP_FILES` distinct files or patterns; or, when the prompt asked for a sweep
  (:func:`asks_for_sweep`: "across all our services", "read through the handlers", 所有服务, 通读 ...),
  :data:`SWEEP_ASKED_READS` of them over as many distinct targets: the sweep is announced and has begun
  in the main window, so the advice comes before most of it is read, when it still pays.
- Each :class:`Advice` has a ``key`` (its cause: delivered once per key), a ``kind`` (debounced: one of a
  kind per :data:`DEBOUNCE_S`, unless more urgent), an ``urgency`` (one advice slot: the more urgent
  wins) and a ``reason`` (plain words, with the figures that justify it; other modules may append a
  cost figure to it). Its text is the reason, then the command to run.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

import msgspec

from ctxlifed.core.mustsurvive import coverage

__all__ = [
    "CACHE_READ",
    "CACHE_WRITE",
    "CLEAR_MIN_WORKING",
    "DEBOUNCE_S",
    "OUTPUT",
    "PAYBACK_TURNS",
    "REREAD_TOKENS",
    "REWIND_AFTER",
    "SUMMARY_TOKENS",
    "SWEEP_ASKED_READS",
    "SWEEP_FILES",
    "SWEEP_READS",
    "Advice",
    "asks_for_sweep",
    "boundary_min_working",
    "compact_cause",
    "compaction_cost",
    "compaction_pays",
    "debounced",
    "failure_key",
    "rewind_due",
    "saving_per_turn",
    "sweep_due",
    "unrelated_task",
]

AdviceKind = Literal["compact", "clear", "rewind", "subagent"]
CompactCause = Literal["near", "level", "boundary"]

# Prices relative to one base input token (Anthropic's published multipliers).
CACHE_READ = 0.1
CACHE_WRITE = 1.25
OUTPUT = 5.0
SUMMARY_TOKENS = 3_000  # what a compaction summary adds back
REREAD_TOKENS = 10_000  # files and skills re-attached or re-read after it
PAYBACK_TURNS = 10  # turns a boundary compaction must repay itself within
REWIND_AFTER = 3
CLEAR_MIN_WORKING = 40_000
TASK_MIN_WEIGHT = 4
UNRELATED_BELOW = 0.15
SWEEP_READS = 6
SWEEP_FILES = 5
SWEEP_ASKED_READS = 3
DEBOUNCE_S = 600.0

URGENCY: dict[str, int] = {"near": 5, "level": 4, "rewind": 3, "clear": 3, "subagent": 2, "boundary": 1}


class Advice(msgspec.Struct, frozen=True, kw_only=True):
    """One piece of advice for the user (systemMessage) and for ``status``."""

    kind: str  # AdviceKind
    key: str  # its cause: never delivered twice
    reason: str  # why, with figures; other modules may append to it (a cost figure)
    command: str  # what to run: "/compact <focus>", "/clear", "/rewind", a subagent
    urgency: int = 1

    @property
    def text(self) -> str:
        return f"ctxlifed: {self.reason}\n{self.command}"

    @property
    def line(self) -> str:
        """One line for ``status``."""
        return f"{self.reason}: {self.command}"


# --------------------------------------------------------------------------- /compact


def compaction_cost(context_tokens: int) -> float:
    """Input-token equivalents one compaction costs (module rules)."""
    return (CACHE_READ * max(0, context_tokens) + OUTPUT * SUMMARY_TOKENS
            + CACHE_WRITE * (SUMMARY_TOKENS + REREAD_TOKENS))


def saving_per_turn(working_tokens: int) -> float:
    """Input-token equivalents each later turn saves: the freed tokens, not re-read from cache."""
    return CACHE_READ * max(0, working_tokens - SUMMARY_TOKENS - REREAD_TOKENS)


def compaction_pays(working_tokens: int, fixed_tokens: int, *, turns: int = PAYBACK_TURNS) -> bool:
    """The saving over ``turns`` later turns is at least the compaction's cost."""
    return turns * saving_per_turn(working_tokens) >= compaction_cost(fixed_tokens + working_tokens)


def boundary_min_working(fixed_tokens: int, *, turns: int = PAYBACK_TURNS) -> int:
    """The least Working size at which a boundary compaction pays (solves :func:`compaction_pays`)."""
    kept = SUMMARY_TOKENS + REREAD_TOKENS
    num = (CACHE_READ * fixed_tokens + OUTPUT * SUMMARY_TOKENS + CACHE_WRITE * kept + turns * CACHE_READ * kept)
    return int(-(-num // (CACHE_READ * (turns - 1))))


def compact_cause(*, level: int, near_autocompact: bool, at_boundary: bool, working_tokens: int,
                  fixed_tokens: int) -> CompactCause | None:
    """Why a ``/compact`` is worth suggesting now, or None (module rules)."""
    if near_autocompact:
        return "near"
    if level >= 1:
        return "level"
    if at_boundary and compaction_pays(working_tokens, fixed_tokens):
        return "boundary"
    return None


# --------------------------------------------------------------------------- /rewind, /clear, subagent


def rewind_due(same_failure_count: int) -> bool:
    return same_failure_count >= REWIND_AFTER


def failure_key(failing_tests: Sequence[str], signature: str) -> str:
    """What makes two failures "the same" for :func:`rewind_due`: the set of failing tests of a test run
    (``tests|<ids>``), else the error signature."""
    ids = sorted({t for t in failing_tests if t})
    return "tests|" + ", ".join(ids) if ids else signature


# A prompt that asks for a sweep over many files: "across all our services", "read through the handlers",
# "every module", 所有服务, 通读, 逐个看 ...
_SWEEP_UNITS = (r"services?|modules?|packages?|files?|repos?|repositories|handlers?|endpoints?|components?|crates?"
                r"|apps?|controllers?|routes?|plugins?|microservices?|projects?|directories|folders?")
_SWEEP_ASK_RE = re.compile(
    r"\b(?:across|throughout)\s+(?:all|every|each|the\s+(?:whole|entire))\b"
    r"|\b(?:read|go|look|dig|comb|walk)\s+through\s+(?:all\s+|every\s+|each\s+|the\s+)?(?:\w+\s+)?(?:" + _SWEEP_UNITS + r")\b"
    r"|\b(?:all|every|each)\s+(?:of\s+)?(?:our|the|these|those)?\s*(?:" + _SWEEP_UNITS + r")\b"
    r"|\b(?:survey|audit|inventory)\b"
    r"|(?:所有|全部|每个|每一个|各个)(?:的)?(?:服务|模块|文件|接口|处理器|组件|仓库|项目|目录|包)|通读|逐个(?:看|读|检查)|挨个(?:看|读|检查)|遍历(?:一下)?(?:所有|全部)",
    re.I,
)


def asks_for_sweep(prompt: str) -> bool:
    """True when a prompt asks to read through many files or services (module rules)."""
    return bool(_SWEEP_ASK_RE.search((prompt or "")[:4000]))


def unrelated_task(prompt: str, session_text: str, working_tokens: int) -> bool:
    """A new task unrelated to the session's work, after a large context (module rules)."""
    if working_tokens < CLEAR_MIN_WORKING or not session_text.strip() or not prompt.strip():
        return False
    share, weight = coverage(prompt, session_text)
    return weight >= TASK_MIN_WEIGHT and share < UNRELATED_BELOW


def sweep_due(reads_in_a_row: int, distinct_targets: int, *, asked: bool = False) -> bool:
    """A read sweep is under way in the main window (module rules; ``asked``: the prompt asked for one)."""
    if asked and reads_in_a_row >= SWEEP_ASKED_READS and distinct_targets >= SWEEP_ASKED_READS:
        return True
    return reads_in_a_row >= SWEEP_READS and distinct_targets >= SWEEP_FILES


# --------------------------------------------------------------------------- delivery


def debounced(advice: Advice, *, delivered: Sequence[str], last_of_kind: float | None, now: float,
              pending: Advice | None) -> bool:
    """True when ``advice`` must not be queued: its key was delivered, one of its kind was delivered
    within :data:`DEBOUNCE_S` (level and near-auto-compaction advice excepted), or a more urgent one waits."""
    if advice.key in delivered:
        return True
    if last_of_kind is not None and now - last_of_kind < DEBOUNCE_S and advice.urgency < URGENCY["level"]:
        return True
    return pending is not None and pending.urgency > advice.urgency
