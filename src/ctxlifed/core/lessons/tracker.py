"""The lesson tracker: error -> fix pairs detected from a session's events, and how lessons merge.

Rules:
- Pure: no I/O, no clock, no logging. Every Struct is frozen, msgspec-serialisable and bounded (the
  ``MAX_*`` constants), so the per-session :class:`Tracker` can be persisted between hook events.
- Redaction: every text that ends up in a :class:`Lesson` goes through
  :func:`~ctxlifed.core.redact.redact` here, even when the caller already redacted.
- :func:`step` (one :class:`Ev` at a time): a fail with a signature opens (or refreshes) an open
  failure for its target; a failure without error content (no signature) is not tracked. Successful
  edits and commands (not read-only, not review, not test runs) are remembered as fix steps of every
  open failure (distinct, at most :data:`MAX_STEPS`). A success covering an open failure closes it
  and yields a :class:`Lesson` *only if* something changed in between (a retry that just passes is
  flakiness, not a fix). Failed calls are never fix steps. A failure never fixed yields nothing.
  The fix is the steps since the failure was first seen, steps mentioning the cause's subject first
  (``pip install requests`` for "missing module requests"), at most :data:`FIX_MAX` items. A step
  names the fix itself: the command as run (:func:`~ctxlifed.core.lessons.targets.display_command`),
  or the edit with the changed lines (:func:`~ctxlifed.core.lessons.events.edit_change`).
- Ids: the tracker and ``Lesson.events`` hold stored event ids (internal, JSON ``event_ids``, never
  printed). ``Lesson.evidence`` holds the archive ids of the same items, filled in by the store; it
  is the only id list printed as ``#N`` (:func:`~ctxlifed.core.lessons.render.lesson_text`), so every ``#N`` resolves with
  ``ctxlifectl recall --id N``.
- Lessons merge by signature (:func:`merge`): count adds up, first/last seen widen, the newest cause
  and excerpt win, fixes are united newest first (at most :data:`FIX_MAX`), event ids, evidence ids
  and sessions are kept bounded (newest).
- :func:`rank`: most frequent first, then most recently seen, then by signature.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import msgspec

from ctxlifed.core.commands import (
    SETUP_PROGRAMS,
    is_readonly_command,
    is_review_command,
    is_test_command,
    shell_tokens,
    split_segments,
    strip_wrappers,
)
from ctxlifed.core.lessons.events import Ev
from ctxlifed.core.lessons.signatures import CAUSE_MAX, EXCERPT_MAX, SIG_MAX, cause_subject, describe_error
from ctxlifed.core.lessons.targets import STEP_MAX, Target, covers, display_command, target_of
from ctxlifed.core.lessons.text import clean, one_line

__all__ = ["FIX_MAX", "MAX_EVIDENCE", "MAX_HINTED", "MAX_IDS", "MAX_OPEN", "MAX_SESSIONS", "MAX_STEPS", "FixStep",
           "Lesson", "OpenFailure", "Tracker", "merge", "rank", "step"]

FIX_MAX = 5  # fix items in a lesson
MAX_STEPS = 8  # distinct fix steps remembered per open failure
MAX_OPEN = 16  # open failures per session
MAX_HINTED = 64  # signatures hinted per session
MAX_IDS = 4  # fail / step event ids kept per open failure / step
MAX_EVIDENCE = 32  # event ids kept per lesson
MAX_SESSIONS = 8  # session ids kept per lesson


class FixStep(msgspec.Struct, frozen=True):
    """A change made while a failure was open: ``edit src/x.py`` or ``pip install foo``."""

    kind: Literal["edit", "command"]
    text: str
    ids: tuple[int, ...] = ()  # event ids of its occurrences (last MAX_IDS)


class OpenFailure(msgspec.Struct, frozen=True, kw_only=True):
    target: Target
    signature: str
    excerpt: str = ""
    cause: str = ""
    command: str = ""  # the failing call (command, or tool + path), for the evidence
    fail_ids: tuple[int, ...] = ()  # first fail id, then the latest ones (MAX_IDS in all)
    first_ts: float = 0.0
    last_ts: float = 0.0
    steps: tuple[FixStep, ...] = ()
    more_steps: int = 0  # distinct steps beyond MAX_STEPS


class Tracker(msgspec.Struct, frozen=True, kw_only=True):
    """Per-session state: open failures (oldest first) and the signatures already hinted."""

    session_id: str = ""
    open: tuple[OpenFailure, ...] = ()
    hinted: tuple[str, ...] = ()


class Lesson(msgspec.Struct, frozen=True, kw_only=True):
    """An error and what fixed it. ``count`` = how many times the pair was observed."""

    signature: str
    cause: str = ""
    fix: tuple[str, ...] = ()
    error: str = ""  # excerpt of the original error (redacted, <= EXCERPT_MAX)
    command: str = ""  # the failing call
    # Stored event ids (failures, fix steps, success): internal, never printed as ``#N``.
    events: tuple[int, ...] = msgspec.field(default=(), name="event_ids")
    # Archive ids of the same items, filled in by the store (``ctxlifectl recall --id N``): what ``#N`` names.
    evidence: tuple[int, ...] = ()
    first_seen: float = 0.0
    last_seen: float = 0.0
    count: int = 1
    sessions: tuple[str, ...] = ()


def _bounded_ids(ids: Iterable[int], limit: int) -> tuple[int, ...]:
    """Distinct ids in order, keeping the first and the newest ``limit - 1``."""
    out: list[int] = []
    for i in ids:
        if i not in out:
            out.append(i)
    if len(out) > limit:
        out = [out[0], *out[len(out) - limit + 1 :]]
    return tuple(out)


# --------------------------------------------------------------------------- tracker


def _ev_target(ev: Ev) -> Target:
    return ev.target if ev.target is not None else target_of(ev.tool, ev.command, ev.file_path)


def _fix_step(ev: Ev) -> FixStep | None:
    if ev.kind == "edit":
        if not ev.file_path:
            return None
        verb = "write" if ev.tool == "Write" else "edit"
        what = f"{verb} {ev.file_path}" + (f": {ev.change}" if ev.change else "")
        return FixStep("edit", one_line(what, STEP_MAX), (ev.event_id,))
    if ev.kind == "command":
        cmd = ev.command
        if not cmd.strip() or is_readonly_command(cmd) or is_review_command(cmd) or is_test_command(cmd):
            return None
        segs = [strip_wrappers(shell_tokens(s)) for s in split_segments(cmd)]
        if all(not t or t[0] in SETUP_PROGRAMS for t in segs):
            return None
        return FixStep("command", display_command(cmd), (ev.event_id,))
    return None


def _add_step(o: OpenFailure, st: FixStep) -> OpenFailure:
    for i, old in enumerate(o.steps):
        if old.text == st.text:
            merged = FixStep(old.kind, old.text, _bounded_ids((*old.ids, *st.ids), MAX_IDS))
            return msgspec.structs.replace(o, steps=(*o.steps[:i], merged, *o.steps[i + 1 :]))
    if len(o.steps) >= MAX_STEPS:
        return msgspec.structs.replace(o, more_steps=o.more_steps + 1)
    return msgspec.structs.replace(o, steps=(*o.steps, st))


def _fix_items(o: OpenFailure) -> tuple[str, ...]:
    steps = list(o.steps)
    subj = cause_subject(o.cause)
    if subj:
        steps.sort(key=lambda st: 0 if subj in st.text.lower() else 1)  # stable: chronological otherwise
    texts = [clean(st.text, STEP_MAX) for st in steps]
    texts = [t for t in texts if t]
    extra = o.more_steps
    if len(texts) > FIX_MAX:
        extra += len(texts) - (FIX_MAX - 1)
        texts = texts[: FIX_MAX - 1]
    if extra:
        texts.append(f"… {extra} more change{'s' if extra != 1 else ''}")
    return tuple(texts)


def _lesson(o: OpenFailure, ev: Ev, session_id: str) -> Lesson:
    ids: list[int] = list(o.fail_ids)
    for st in o.steps:
        ids.extend(st.ids)
    ids.append(ev.event_id)
    return Lesson(
        signature=clean(o.signature, SIG_MAX),
        cause=clean(o.cause, CAUSE_MAX),
        fix=_fix_items(o),
        error=clean(o.excerpt, EXCERPT_MAX),
        command=clean(o.command, STEP_MAX),
        events=_bounded_ids(ids, MAX_EVIDENCE),
        first_seen=o.first_ts,
        last_seen=ev.ts,
        count=1,
        sessions=(session_id[:128],) if session_id else (),
    )


def step(tracker: Tracker, ev: Ev) -> tuple[Tracker, list[Lesson]]:
    """Feed one event; returns the new tracker and the lessons this event completed (merged by
    signature, in order of the failures they came from)."""
    target = _ev_target(ev)
    if ev.kind == "fail":
        info = None
        sig = ev.signature
        if sig is None:
            info = describe_error(ev.text, tool=ev.tool or None, command=ev.command or None,
                                  file_path=ev.file_path or None)
            sig = info.signature if info else None
        if not sig:
            return tracker, []
        for i, o in enumerate(tracker.open):
            if o.target == target and o.signature == sig:
                upd = msgspec.structs.replace(o, last_ts=ev.ts, fail_ids=_bounded_ids((*o.fail_ids, ev.event_id),
                                                                                      MAX_IDS))
                return msgspec.structs.replace(tracker, open=(*tracker.open[:i], upd, *tracker.open[i + 1 :])), []
        if info is None:
            info = describe_error(ev.text, tool=ev.tool or None, command=ev.command or None,
                                  file_path=ev.file_path or None)
        what = display_command(ev.command) if ev.command else f"{ev.tool} {ev.file_path}".strip()
        new = OpenFailure(
            target=target, signature=sig, excerpt=info.excerpt if info else clean(ev.text, EXCERPT_MAX),
            cause=info.cause if info else "", command=one_line(what, STEP_MAX), fail_ids=(ev.event_id,),
            first_ts=ev.ts, last_ts=ev.ts,
        )
        opened = (*tracker.open, new)
        if len(opened) > MAX_OPEN:
            oldest = min(range(len(opened)), key=lambda k: (opened[k].last_ts, k))
            opened = opened[:oldest] + opened[oldest + 1 :]
        return msgspec.structs.replace(tracker, open=opened), []

    lessons: dict[str, Lesson] = {}
    still: list[OpenFailure] = []
    for o in tracker.open:
        if covers(target, o.target):
            if o.steps:
                les = _lesson(o, ev, tracker.session_id)
                lessons[les.signature] = merge(lessons[les.signature], les) if les.signature in lessons else les
        else:
            still.append(o)
    st = _fix_step(ev)
    if st is not None:
        still = [_add_step(o, st) for o in still]
    return msgspec.structs.replace(tracker, open=tuple(still)), list(lessons.values())


# --------------------------------------------------------------------------- merging, ranking


def merge(existing: Lesson, new: Lesson) -> Lesson:
    """Fold ``new`` (same signature) into ``existing``: counts add, seen range widens, newest cause and
    excerpt win, fixes united newest first (bounded), evidence and sessions bounded (newest)."""
    fix: list[str] = []
    for f in (*new.fix, *existing.fix):
        if f not in fix and not f.startswith("… "):
            fix.append(f)
    fix = fix[:FIX_MAX]
    def united(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
        out: list[int] = []
        for i in (*a, *b):
            if i not in out:
                out.append(i)
        return tuple(out[-MAX_EVIDENCE:])

    sess: list[str] = []
    for sid in (*existing.sessions, *new.sessions):
        if sid in sess:
            sess.remove(sid)
        sess.append(sid)
    firsts = [t for t in (existing.first_seen, new.first_seen) if t > 0]
    newer = new.last_seen >= existing.last_seen
    return Lesson(
        signature=existing.signature,
        cause=(new.cause or existing.cause) if newer else (existing.cause or new.cause),
        fix=tuple(fix),
        error=(new.error or existing.error) if newer else (existing.error or new.error),
        command=(new.command or existing.command) if newer else (existing.command or new.command),
        events=united(existing.events, new.events),
        evidence=united(existing.evidence, new.evidence),
        first_seen=min(firsts) if firsts else 0.0,
        last_seen=max(existing.last_seen, new.last_seen),
        count=max(1, existing.count) + max(1, new.count),
        sessions=tuple(sess[-MAX_SESSIONS:]),
    )


def rank(lessons: Iterable[Lesson]) -> list[Lesson]:
    """Most frequent first, then most recently seen, then by signature (deterministic)."""
    return sorted(lessons, key=lambda x: (-x.count, -x.last_seen, x.signature))
