"""Lessons: error -> fix pairs detected deterministically from hook events, remembered across sessions.

Rules:
- Pure: no I/O, no clock, no logging. Times (epoch seconds) and event ids are passed in. Every
  Struct is frozen, msgspec-serialisable and bounded (limits are the ``MAX_*`` constants).
- Redaction: every text that ends up in a :class:`Lesson`, a signature, ``lessons.md`` or a hint
  goes through :func:`~ctxlifed.core.redact.redact` in this package, even when the caller already redacted.
- One concern per module, each opening with its own rules; this package re-exports the names the rest
  of the code and the tests use (``from ctxlifed.core import lessons as LS`` keeps working):
    :mod:`.targets`    -- what "the same command, test or file operation" means (:func:`target_of`,
                          :func:`covers`, :func:`display_command`); commands are parsed by
                          :mod:`ctxlifed.core.commands`, the one command parser.
    :mod:`.signatures` -- the decisive error line, normalised (:func:`signature`, :func:`describe_error`),
                          and its plain cause (:func:`cause_of`).
    :mod:`.events`     -- one PostToolUse / PostToolUseFailure payload as an :class:`Ev`
                          (:func:`classify_hook`, :func:`edit_change`).
    :mod:`.tracker`    -- the per-session :class:`Tracker` (:func:`step`), lessons merged and ranked.
    :mod:`.render`     -- ``lessons.md`` (render, parse, reconcile), hints, the archive text.
    :mod:`.text`       -- the shared one-line / bounded / redacted text helpers.
  Dependencies point one way: text, targets -> signatures -> events -> tracker -> render.
"""

from __future__ import annotations

from ctxlifed.core.commands import command_family
from ctxlifed.core.lessons.events import CHANGE_SIDE_MAX, MAX_EV_TEXT, Ev, EvKind, classify_hook, edit_change
from ctxlifed.core.lessons.render import (
    HINT_CAP_TOKENS,
    HINT_QUOTE_LABEL,
    LESSON_QUOTE_LABEL,
    MD_MAX_LESSONS,
    hint_for,
    lesson_text,
    parse_lessons_md,
    recall_term,
    reconcile,
    render_hint,
    render_lessons_md,
)
from ctxlifed.core.lessons.signatures import (
    CAUSE_MAX,
    EXCERPT_MAX,
    MAX_SCAN,
    SIG_MAX,
    ErrorInfo,
    cause_of,
    describe_error,
    signature,
)
from ctxlifed.core.lessons.targets import (
    MAX_SCOPE,
    MAX_TARGET_PART,
    STEP_MAX,
    Target,
    TargetKind,
    covers,
    display_command,
    target_of,
)
from ctxlifed.core.lessons.tracker import (
    FIX_MAX,
    MAX_EVIDENCE,
    MAX_HINTED,
    MAX_IDS,
    MAX_OPEN,
    MAX_SESSIONS,
    MAX_STEPS,
    FixStep,
    Lesson,
    OpenFailure,
    Tracker,
    merge,
    rank,
    step,
)

__all__ = [
    # the public API the module had, unchanged (service, CLI, tests)
    "ErrorInfo",
    "Ev",
    "FixStep",
    "Lesson",
    "OpenFailure",
    "Target",
    "Tracker",
    "cause_of",
    "classify_hook",
    "covers",
    "describe_error",
    "display_command",
    "edit_change",
    "hint_for",
    "lesson_text",
    "merge",
    "parse_lessons_md",
    "rank",
    "recall_term",
    "reconcile",
    "render_hint",
    "render_lessons_md",
    "signature",
    "step",
    "target_of",
    # public names the module had outside __all__: the bounds (tests check them) and the labels
    "CAUSE_MAX",
    "CHANGE_SIDE_MAX",
    "EXCERPT_MAX",
    "FIX_MAX",
    "HINT_CAP_TOKENS",
    "HINT_QUOTE_LABEL",
    "LESSON_QUOTE_LABEL",
    "MAX_EVIDENCE",
    "MAX_EV_TEXT",
    "MAX_HINTED",
    "MAX_IDS",
    "MAX_OPEN",
    "MAX_SCAN",
    "MAX_SCOPE",
    "MAX_SESSIONS",
    "MAX_STEPS",
    "MAX_TARGET_PART",
    "MD_MAX_LESSONS",
    "SIG_MAX",
    "STEP_MAX",
    "EvKind",
    "TargetKind",
    "command_family",
]
