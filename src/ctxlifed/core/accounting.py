"""Where did my tokens go: the current context window broken down by kind, folded per transcript delta.

Rules:
- Pure: no I/O, no clock (times come from the transcript or the caller), no logging. Every function
  returns a new :class:`Accounting`; the argument is never changed. The state is msgspec-serialisable
  and bounded (:data:`MAX_TOOLS` tools, :data:`MAX_SKILLS` skills, :data:`MAX_FILES` files,
  :data:`MAX_INSTRUCTIONS` instruction files, :data:`MAX_LARGEST` largest items, :data:`MAX_HISTORY`
  compactions, :data:`MAX_OURS` noted injections, :data:`MAX_SEEN` boundary ids).
- Kinds (what stays resident, design 13.3 §2): ``system`` (system prompt, tool definitions and the
  session attachments not itemised here: environment, model, date, deferred-tool and agent listings),
  ``instructions`` (CLAUDE.md / rules / auto memory, from InstructionsLoaded via
  :func:`note_instructions` and from ``instructions`` attachments; one entry per path, latest wins),
  ``skill_listing`` (a full listing replaces the previous one, an incremental one adds), ``skill`` (one
  row per skill body; a second, different invocation adds a copy), ``file_reads`` (successful Read
  results and ``file`` attachments), ``tool`` (every other tool result, one row per tool; failed Reads
  too), ``thinking``, ``hook_context`` (``ctxlifed`` = text noted by :func:`note_injected` or accepted by
  the ``ours`` predicate, default: text starting with "ctxlifed"; ``other`` = every other hook),
  ``compact_summary`` and ``conversation`` (prompts, assistant text, API error text).
- Figures: every item's tokens are :func:`~ctxlifed.core.model.estimate_tokens` estimates, except
  ``system``: the first request's measured context (input + cache creation + cache read of the first
  usage) minus the estimates of everything this accounting holds at that moment (the prompt and the
  attachments before it); 0 if the estimates exceed it; unknown until the first usage.
- Order: deltas carry :class:`~ctxlifed.core.transcript.Marks`, so what came before a boundary or the
  first usage is told from what came after (timestamps in the file are not monotonic). A delta without
  marks is taken as if its boundaries and first usage came before all its entries.
- Compaction (:func:`at_boundary`, called by :func:`fold` for every boundary, idempotent per boundary
  uuid): ``removed_tokens`` += preTokens - postTokens (when both are known; Claude Code's postTokens
  leaves out the system prompt and tools, so this is what the compaction said it dropped);
  ``system`` and the skill listing stay; instruction files of a surviving kind stay (re-read from
  disk), nested CLAUDE.md and path-scoped rules go; skill bodies are re-attached by
  :func:`~ctxlifed.core.survival.reattach_skills` (5,000 tokens each, 25,000 in all, newest first;
  no 2.1.328 transcript shows re-attached bodies, so they are added here, and a body of the same name
  read after the boundary replaces the re-attached copy instead of adding to it);
  files, tools, thinking, hook context, the summary and the conversation reset. Files re-attached by
  Claude Code arrive after the boundary as ``file`` attachments and are counted then. Noted ctxlifed
  injections newer than the boundary are kept. The messages Claude Code preserves verbatim after the
  summary are not itemised (they fall in the conversation remainder).
- :func:`report`: rows ``{kind, name, tokens, items, estimated, basis}`` sorted by tokens (ties: kind
  order, then name); largest items likewise (ties: newest, kind, label), so the result does not
  depend on how the transcript was cut into deltas. The measured size is the caller's
  ``context_tokens`` or, by default, :func:`measured_total`: the last response's input + cache
  creation + cache read + output (its own blocks are itemised here; None after a boundary until the
  next response). With a measured size and a known ``system``, the ``conversation`` row is the
  remainder (measured size minus every other row) so the rows add up to the measured total; if the
  estimates exceed it the remainder is 0 and the excess is reported as ``overshoot`` (the table then
  adds up to more than the measurement, and says so).
"""

from __future__ import annotations

import hashlib
import posixpath
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import msgspec

from ctxlifed.core.model import Element, Kind, estimate_tokens
from ctxlifed.core.survival import SURVIVING_KINDS, classify_instruction, display_path, reattach_skills
from ctxlifed.core.transcript import (
    CompactBoundary,
    FileTouch,
    Injected,
    InstructionFile,
    Listing,
    Marks,
    SkillUse,
    TranscriptDelta,
    marks_of,
)

__all__ = [
    "KINDS",
    "Accounting",
    "Big",
    "CompactionNote",
    "FileRow",
    "InstrRow",
    "SkillRow",
    "Tally",
    "at_boundary",
    "fold",
    "is_ours_default",
    "measured_total",
    "note_injected",
    "note_instructions",
    "render_where",
    "report",
    "survival_inputs",
]

MAX_TOOLS = 32
MAX_SKILLS = 64
MAX_FILES = 64
MAX_INSTRUCTIONS = 64
MAX_LARGEST = 10
MAX_HISTORY = 8
MAX_OURS = 16
MAX_SEEN = 16
MAX_LABEL = 100
OTHER_TOOLS = "(other tools)"
OURS_PREFIX = "ctxlifed"

KINDS: tuple[str, ...] = (
    "system",
    "instructions",
    "skill_listing",
    "skill",
    "file_reads",
    "tool",
    "thinking",
    "hook_context",
    "compact_summary",
    "conversation",
)
_KIND_ORDER = {k: i for i, k in enumerate(KINDS)}


# --------------------------------------------------------------------------- state


class Tally(msgspec.Struct, frozen=True, array_like=True):
    tokens: int = 0
    items: int = 0

    def add(self, tokens: int, items: int = 1) -> Tally:
        return Tally(self.tokens + max(0, tokens), self.items + items)


class InstrRow(msgspec.Struct, frozen=True):
    path: str
    kind: str  # survival.InstructionKind
    tokens: int
    ts: float
    memory_type: str = ""
    load_reason: str = ""


class SkillRow(msgspec.Struct, frozen=True):
    name: str
    tokens: int  # resident now (all copies; the re-attached cut after a compaction)
    last_tokens: int  # body of the latest invocation (what a compaction re-attaches, before the cut)
    ts: float  # latest invocation
    copies: int = 1
    reattached: bool = False


class FileRow(msgspec.Struct, frozen=True):
    path: str
    tokens: int  # size estimate: latest read / write (an edit keeps the earlier size)
    ts: float
    op: str


class Big(msgspec.Struct, frozen=True, array_like=True):
    kind: str
    label: str
    tokens: int
    ts: float


class CompactionNote(msgspec.Struct, frozen=True):
    uuid: str
    ts: float
    trigger: str | None
    pre_tokens: int | None
    post_tokens: int | None
    removed: int | None  # pre - post
    after: int | None = None  # first measured context after the boundary
    dropped: list[str] = msgspec.field(default_factory=list)  # skills / instruction files it dropped


class _Ours(msgspec.Struct, frozen=True, array_like=True):
    fp: str
    tokens: int
    ts: float


class Accounting(msgspec.Struct, kw_only=True):
    """Per-kind tokens since the last compaction boundary (see the module rules). Treat as immutable."""

    project_root: str = ""
    system: int | None = None
    first_context: int | None = None
    instructions: dict[str, InstrRow] = msgspec.field(default_factory=dict)
    listing: Tally = Tally()
    skills: dict[str, SkillRow] = msgspec.field(default_factory=dict)
    files: dict[str, FileRow] = msgspec.field(default_factory=dict)
    file_reads: Tally = Tally()
    tools: dict[str, Tally] = msgspec.field(default_factory=dict)
    thinking: Tally = Tally()
    hook_ours: Tally = Tally()
    hook_others: Tally = Tally()
    summary: Tally = Tally()
    conversation: Tally = Tally()
    ours_pending: list[_Ours] = msgspec.field(default_factory=list)  # noted, not yet seen in the transcript
    largest: list[Big] = msgspec.field(default_factory=list)
    last_context: int | None = None  # last usage: input + cache creation + cache read (None: compacted since)
    last_output: int = 0  # that response's output tokens
    removed_tokens: int = 0
    compactions: int = 0
    history: list[CompactionNote] = msgspec.field(default_factory=list)
    seen_boundaries: list[str] = msgspec.field(default_factory=list)


def _copy(acc: Accounting) -> Accounting:
    """A working copy whose containers can be changed without touching ``acc`` (leaves are frozen)."""
    return msgspec.structs.replace(
        acc,
        instructions=dict(acc.instructions),
        skills=dict(acc.skills),
        files=dict(acc.files),
        tools=dict(acc.tools),
        ours_pending=list(acc.ours_pending),
        largest=list(acc.largest),
        history=list(acc.history),
        seen_boundaries=list(acc.seen_boundaries),
    )


# --------------------------------------------------------------------------- small helpers


def _norm(path: str) -> str:
    return posixpath.normpath(path.replace("\\", "/")) if path else path


def _fp(text: str) -> str:
    return hashlib.blake2b(" ".join(text.split()).encode("utf-8", "replace"), digest_size=8).hexdigest()


def is_ours_default(text: str) -> bool:
    """ctxlifed's own hook context starts with "ctxlifed" (render.py states facts under that lead)."""
    return text.lstrip().lower().startswith(OURS_PREFIX)


def _label(text: str) -> str:
    s = " ".join(text.split())
    return s if len(s) <= MAX_LABEL else s[: MAX_LABEL - 1] + "…"


def _big_key(b: Big) -> tuple[int, float, str, str]:
    """Largest first; among equals the newest, then by kind and label: a total order, so the kept top
    items do not depend on how the transcript was split into deltas."""
    return (-b.tokens, -b.ts, b.kind, b.label)


def _big(w: Accounting, kind: str, label: str, tokens: int, ts: float) -> None:
    if tokens <= 0:
        return
    w.largest.append(Big(kind, _label(label), tokens, ts))
    w.largest.sort(key=_big_key)
    del w.largest[MAX_LARGEST:]


def _trim_dict(d: dict[str, Any], limit: int, key: Callable[[Any], float]) -> None:
    """Drop the oldest entries (by ``key``) beyond ``limit``."""
    if len(d) <= limit:
        return
    for k, _v in sorted(d.items(), key=lambda kv: key(kv[1]))[: len(d) - limit]:
        del d[k]


def _resident(w: Accounting) -> int:
    """Tokens of every itemised kind (everything but ``system``)."""
    return (
        sum(r.tokens for r in w.instructions.values())
        + w.listing.tokens
        + sum(r.tokens for r in w.skills.values())
        + w.file_reads.tokens
        + sum(t.tokens for t in w.tools.values())
        + w.thinking.tokens
        + w.hook_ours.tokens
        + w.hook_others.tokens
        + w.summary.tokens
        + w.conversation.tokens
        + sum(o.tokens for o in w.ours_pending)
    )


# --------------------------------------------------------------------------- entries


def _element(w: Accounting, e: Element) -> None:
    k = e.kind
    if k is Kind.THINKING:
        w.thinking = w.thinking.add(e.tokens)
        _big(w, "thinking", "thinking block", e.tokens, e.ts)
        return
    if k is Kind.COMPACT_SUMMARY:
        w.summary = w.summary.add(e.tokens)
        _big(w, "compact_summary", "compact summary", e.tokens, e.ts)
        return
    is_tool = e.tool is not None or (
        k in (Kind.TOOL, Kind.TEST_RESULT, Kind.CODE_CHANGE) or (k is Kind.ERROR and e.text.startswith("tool_result:"))
    )
    if not is_tool:
        w.conversation = w.conversation.add(e.tokens)
        what = "prompt" if k is Kind.PROMPT else "assistant" if k is Kind.ASSISTANT else str(k)
        _big(w, "conversation", f"{what}: {e.text[:80]}", e.tokens, e.ts)
        return
    tool = e.tool or "?"
    if tool == "Read" and e.file_path and not e.is_error:
        return  # counted from its FileTouch under file_reads
    if tool not in w.tools and len(w.tools) >= MAX_TOOLS:
        tool = OTHER_TOOLS
    w.tools[tool] = w.tools.get(tool, Tally()).add(e.tokens)
    detail = e.command or e.file_path or e.text.split("\n", 1)[0].partition(": ")[2]
    _big(w, "tool", f"{tool}: {detail}" if detail else tool, e.tokens, e.ts)


def _file(w: Accounting, t: FileTouch) -> None:
    path = _norm(t.path)
    old = w.files.pop(path, None)
    size = t.tokens if t.op in ("read", "write") or old is None else old.tokens
    w.files[path] = FileRow(path=path, tokens=size, ts=max(t.ts, old.ts if old else t.ts), op=t.op)
    _trim_dict(w.files, MAX_FILES, lambda r: r.ts)
    if t.op == "read":
        w.file_reads = w.file_reads.add(t.tokens)
        _big(w, "file_reads", f"Read {display_path(path, w.project_root)}", t.tokens, t.ts)


def _skill(w: Accounting, s: SkillUse) -> None:
    old = w.skills.get(s.name)
    if old is None or old.reattached:
        if old is not None:
            stale = _label(f"skill {s.name} (re-attached)")
            w.largest = [b for b in w.largest if not (b.kind == "skill" and b.label == stale)]
        row = SkillRow(name=s.name, tokens=s.tokens, last_tokens=s.tokens, ts=s.ts)
    else:
        row = SkillRow(name=s.name, tokens=old.tokens + s.tokens, last_tokens=s.tokens, ts=max(s.ts, old.ts),
                       copies=old.copies + 1)  # fmt: skip
    w.skills.pop(s.name, None)
    w.skills[s.name] = row
    _trim_dict(w.skills, MAX_SKILLS, lambda r: r.ts)
    _big(w, "skill", f"skill {s.name}", s.tokens, s.ts)


def _injected(w: Accounting, i: Injected, ours: Callable[[str], bool]) -> None:
    fp = _fp(i.text)
    hit = next((n for n, o in enumerate(w.ours_pending) if o.fp == fp), None)
    if hit is not None:
        del w.ours_pending[hit]
    if hit is not None or ours(i.text):
        w.hook_ours = w.hook_ours.add(i.tokens)
        _big(w, "hook_context", f"ctxlifed {i.hook_event} context", i.tokens, i.ts)
    else:
        w.hook_others = w.hook_others.add(i.tokens)
        _big(w, "hook_context", f"{i.hook_name or i.hook_event or 'hook'} context", i.tokens, i.ts)


def _instruction_file(w: Accounting, f: InstructionFile) -> None:
    path = _norm(f.path)
    old = w.instructions.pop(path, None)
    if old is not None:
        row = msgspec.structs.replace(old, tokens=f.tokens, ts=f.ts, memory_type=old.memory_type or f.memory_type)
    else:
        kind = classify_instruction(path, f.memory_type, None, w.project_root)
        row = InstrRow(path=path, kind=kind, tokens=f.tokens, ts=f.ts, memory_type=f.memory_type)
    w.instructions[path] = row
    _trim_dict(w.instructions, MAX_INSTRUCTIONS, lambda r: r.ts)
    shown = _label(display_path(path, w.project_root))
    w.largest = [b for b in w.largest if not (b.kind == "instructions" and b.label == shown)]
    _big(w, "instructions", shown, row.tokens, row.ts)


def _listing(w: Accounting, li: Listing) -> None:
    items = li.count if li.count is not None else 1
    w.listing = Tally(li.tokens, items) if li.initial else w.listing.add(li.tokens, items)
    w.largest = [b for b in w.largest if b.kind != "skill_listing"]
    _big(w, "skill_listing", "skill listing", w.listing.tokens, li.ts)


def _apply(w: Accounting, d: TranscriptDelta, a: Marks, b: Marks, ours: Callable[[str], bool]) -> None:
    """Apply the entries of ``d`` between positions ``a`` and ``b``."""
    for x in d.instructions[a.instructions : b.instructions]:
        _instruction_file(w, x)
    for li in d.listings[a.listings : b.listings]:
        _listing(w, li)
    for e in d.elements[a.elements : b.elements]:
        _element(w, e)
    for t in d.file_reads[a.file_reads : b.file_reads]:
        _file(w, t)
    for s in d.skills[a.skills : b.skills]:
        _skill(w, s)
    for i in d.injected[a.injected : b.injected]:
        _injected(w, i, ours)


def _key(m: Marks, usages: float) -> tuple[float, ...]:
    return (usages, m.elements, m.injected, m.skills, m.file_reads, m.instructions, m.listings)


# --------------------------------------------------------------------------- public API


def fold(acc: Accounting, delta: TranscriptDelta, *, ours: Callable[[str], bool] | None = None) -> Accounting:
    """Add what one transcript delta brought; apply its compaction boundaries in place (see rules)."""
    pred = ours or is_ours_default
    w = _copy(acc)
    zero = Marks()
    # (order key, tie-break, position, boundary or None for the first usage), in file order
    events: list[tuple[tuple[float, ...], int, Marks, CompactBoundary | None]] = []
    for n, bd in enumerate(delta.boundaries):
        m = delta.boundary_marks[n] if n < len(delta.boundary_marks) else zero
        events.append((_key(m, m.usages), n, m, bd))
    if delta.first_usage is not None and w.system is None:
        m = delta.first_usage_marks or zero
        # usages = 0.5: after boundaries read before any usage, before those read after one
        events.append((_key(m, 0.5), len(events), m, None))
    events.sort(key=lambda e: (e[0], e[1]))
    cur = zero
    for _key_, _n, m, bd in events:
        _apply(w, delta, cur, m, pred)
        cur = m
        if bd is not None:
            w = _boundary(w, bd)
            if m.usages < len(delta.usages) and w.history and w.history[-1].uuid == bd.uuid:
                w.history[-1] = msgspec.structs.replace(w.history[-1], after=delta.usages[m.usages].context_tokens)
        elif delta.first_usage is not None:
            w.first_context = delta.first_usage.context_tokens
            w.system = max(0, w.first_context - _resident(w))
    _apply(w, delta, cur, marks_of(delta, usages=len(delta.usages)), pred)
    if delta.last_usage is not None and not delta.compacted_last:
        w.last_context = delta.last_usage.context_tokens
        w.last_output = delta.last_usage.output_tokens
    if w.history and w.history[-1].after is None and delta.usages and not delta.boundaries:
        w.history[-1] = msgspec.structs.replace(w.history[-1], after=delta.usages[0].context_tokens)
    return w


def _boundary(w: Accounting, b: CompactBoundary) -> Accounting:
    if b.uuid and b.uuid in w.seen_boundaries:
        return w
    if b.uuid:
        w.seen_boundaries.append(b.uuid)
        del w.seen_boundaries[:-MAX_SEEN]
    removed = b.pre_tokens - b.post_tokens if b.pre_tokens is not None and b.post_tokens is not None else None
    dropped: list[str] = []
    instructions: dict[str, InstrRow] = {}
    for path, row in w.instructions.items():
        if row.kind in SURVIVING_KINDS:
            instructions[path] = row
        else:
            dropped.append(display_path(path, w.project_root))
    skills: dict[str, SkillRow] = {}
    fates = reattach_skills(SkillUse(name=r.name, tokens=r.last_tokens, ts=r.ts) for r in w.skills.values())
    for f in sorted(fates, key=lambda f: f.ts):
        if f.fate == "dropped":
            dropped.append(f"skill {f.name}")
        else:
            skills[f.name] = SkillRow(name=f.name, tokens=f.kept_tokens, last_tokens=f.tokens, ts=f.ts, reattached=True)
    note = CompactionNote(uuid=b.uuid, ts=b.ts, trigger=b.trigger, pre_tokens=b.pre_tokens,
                          post_tokens=b.post_tokens, removed=removed, dropped=dropped[:16])  # fmt: skip
    history = [*w.history, note][-MAX_HISTORY:]
    ours_pending = [o for o in w.ours_pending if b.ts <= 0 or o.ts >= b.ts]
    out = Accounting(
        project_root=w.project_root,
        system=w.system,
        first_context=w.first_context,
        instructions=instructions,
        listing=w.listing,
        skills=skills,
        ours_pending=ours_pending,
        last_context=None,
        last_output=0,
        removed_tokens=w.removed_tokens + (removed or 0),
        compactions=w.compactions + 1,
        history=history,
        seen_boundaries=w.seen_boundaries,
    )
    for r in instructions.values():
        _big(out, "instructions", display_path(r.path, out.project_root), r.tokens, r.ts)
    for r in skills.values():
        _big(out, "skill", f"skill {r.name} (re-attached)", r.tokens, r.ts)
    _big(out, "skill_listing", "skill listing", out.listing.tokens, 0.0)
    return out


def at_boundary(acc: Accounting, boundary: CompactBoundary) -> Accounting:
    """What stays resident across a compaction (module rules). Idempotent per boundary uuid;
    :func:`fold` calls it for the boundaries it reads, so the service need not."""
    return _boundary(_copy(acc), boundary)


def note_instructions(
    acc: Accounting,
    path: str,
    memory_type: str | None,
    load_reason: str | None,
    tokens: int,
    ts: float,
    *,
    globs: Sequence[str] | None = None,
) -> Accounting:
    """An InstructionsLoaded event (the service measured ``tokens`` from the file). One entry per path:
    a re-load (e.g. ``load_reason: compact``) replaces the earlier one."""
    if not path:
        return acc
    w = _copy(acc)
    p = _norm(path)
    w.instructions.pop(p, None)
    kind = classify_instruction(p, memory_type, load_reason, w.project_root, globs=globs)
    w.instructions[p] = InstrRow(path=p, kind=kind, tokens=max(0, tokens), ts=ts, memory_type=memory_type or "",
                                 load_reason=load_reason or "")  # fmt: skip
    _trim_dict(w.instructions, MAX_INSTRUCTIONS, lambda r: r.ts)
    shown = _label(display_path(p, w.project_root))
    w.largest = [b for b in w.largest if not (b.kind == "instructions" and b.label == shown)]
    _big(w, "instructions", shown, max(0, tokens), ts)
    return w


def note_injected(acc: Accounting, text: str, ts: float, *, tokens: int | None = None) -> Accounting:
    """ctxlifed injected ``text`` (additionalContext or plain stdout). It is counted as ctxlifed's hook
    context now (estimate) and attributed, not counted again, when the transcript shows it."""
    if not text.strip():
        return acc
    w = _copy(acc)
    n = estimate_tokens(text) if tokens is None else max(0, tokens)
    w.ours_pending.append(_Ours(_fp(text), n, ts))
    del w.ours_pending[:-MAX_OURS]
    return w


def survival_inputs(acc: Accounting) -> dict[str, Any]:
    """Keyword arguments for :func:`ctxlifed.core.survival.simulate` from what the accounting holds."""
    return {
        "files": list(acc.files.values()),
        "skills": [SkillUse(name=r.name, tokens=r.last_tokens, ts=r.ts) for r in acc.skills.values()],
        "instructions": [(r.path, r.kind, r.tokens) for r in acc.instructions.values()],
        "project_root": acc.project_root,
    }


# --------------------------------------------------------------------------- report

_BASIS_EST = "estimate"


def _row(kind: str, name: str, tokens: int, items: int, estimated: bool, basis: str) -> dict[str, Any]:
    return {"kind": kind, "name": name, "tokens": tokens, "items": items, "estimated": estimated, "basis": basis}


def measured_total(acc: Accounting) -> int | None:
    """What the window holds after the last response: its input + cache creation + cache read + output
    (Claude Code's own ``context_tokens`` / ``preTokens`` convention); None when a compaction came after
    it (``postTokens`` leaves out the system prompt and tools, so it cannot be compared with the rows)."""
    if acc.last_context is None:
        return None
    return acc.last_context + acc.last_output


def report(acc: Accounting, context_tokens: int | None = None) -> dict[str, Any]:
    """The table: rows sorted by tokens, the largest items, and what compactions removed (rules).

    ``context_tokens``: the window size to reconcile the rows with; None uses :func:`measured_total`
    (the right figure for the rows: the last response's own blocks are itemised). Never pass a
    boundary's ``postTokens``: it leaves out the system prompt and tools.
    """
    if context_tokens is None:
        context_tokens = measured_total(acc)
    rows: list[dict[str, Any]] = []
    if acc.system is not None:
        rows.append(_row("system", "system prompt, tools, session attachments", acc.system, 1, True,
                         "first request's measured size minus the estimates of its messages"))  # fmt: skip
    if acc.instructions:
        rows.append(_row("instructions", "CLAUDE.md, rules, memory", sum(r.tokens for r in acc.instructions.values()),
                         len(acc.instructions), True, _BASIS_EST))  # fmt: skip
    if acc.listing.items or acc.listing.tokens:
        rows.append(_row("skill_listing", "skill names and descriptions", acc.listing.tokens, acc.listing.items,
                         True, _BASIS_EST))  # fmt: skip
    for r in acc.skills.values():
        basis = "re-attached after compaction (cut)" if r.reattached else _BASIS_EST
        rows.append(_row("skill", r.name, r.tokens, r.copies, True, basis))
    if acc.file_reads.items:
        rows.append(_row("file_reads", "Read results and re-attached files", acc.file_reads.tokens,
                         acc.file_reads.items, True, _BASIS_EST))  # fmt: skip
    for name, t in acc.tools.items():
        rows.append(_row("tool", name, t.tokens, t.items, True, _BASIS_EST))
    if acc.thinking.items:
        rows.append(_row("thinking", "thinking blocks", acc.thinking.tokens, acc.thinking.items, True, _BASIS_EST))
    ours = acc.hook_ours.add(sum(o.tokens for o in acc.ours_pending), len(acc.ours_pending))
    if ours.items:
        rows.append(_row("hook_context", "ctxlifed", ours.tokens, ours.items, True, _BASIS_EST))
    if acc.hook_others.items:
        rows.append(_row("hook_context", "other hooks", acc.hook_others.tokens, acc.hook_others.items, True,
                         _BASIS_EST))  # fmt: skip
    if acc.summary.items:
        rows.append(_row("compact_summary", "compaction summary", acc.summary.tokens, acc.summary.items, True,
                         _BASIS_EST))  # fmt: skip
    others = sum(r["tokens"] for r in rows)
    measured = context_tokens is not None and acc.system is not None
    overshoot = 0
    if measured:
        assert context_tokens is not None
        remainder = context_tokens - others
        overshoot = max(0, -remainder)
        rows.append(_row("conversation", "prompts and assistant text", max(0, remainder), acc.conversation.items,
                         True, "measured context minus the other rows"))  # fmt: skip
    else:
        rows.append(_row("conversation", "prompts and assistant text", acc.conversation.tokens,
                         acc.conversation.items, True, _BASIS_EST))  # fmt: skip
    rows.sort(key=lambda r: (-r["tokens"], _KIND_ORDER.get(r["kind"], 99), r["name"]))
    total = sum(r["tokens"] for r in rows)
    notes: list[str] = []
    if acc.system is None:
        notes.append("system prompt and tools: unknown until the first response is in the transcript")
    if measured:
        notes.append("conversation = measured context minus the other (estimated) rows")
    if overshoot:
        notes.append(f"the estimates exceed the measured context by {overshoot:,} tokens")
    last = acc.history[-1] if acc.history else None
    return {
        "context_tokens": context_tokens,
        "measured": measured,
        "total": total,
        "overshoot": overshoot,
        "conversation_estimate": acc.conversation.tokens,
        "rows": rows,
        "largest": [{"kind": b.kind, "label": b.label, "tokens": b.tokens, "ts": b.ts} for b in acc.largest],
        "removed": {
            "compactions": acc.compactions,
            "tokens": acc.removed_tokens,
            "last": msgspec.to_builtins(last) if last else None,
        },
        "notes": notes,
    }


def render_where(rep: dict[str, Any]) -> str:
    """``ctxlifectl status --where``: the report as a plain-text table."""
    rows: list[dict[str, Any]] = rep.get("rows", [])
    header = ("kind", "name", "tokens", "items", "basis")
    table = [header] + [
        (r["kind"], _label(str(r["name"]))[:40], f"{r['tokens']:,}", str(r["items"]), r["basis"]) for r in rows
    ]
    table.append(("total", "measured" if rep.get("measured") else "estimated", f"{rep.get('total', 0):,}", "", ""))
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    out = []
    for row in table:
        cells = [c.rjust(widths[i]) if i in (2, 3) else c.ljust(widths[i]) for i, c in enumerate(row)]
        out.append("  ".join(cells).rstrip())
    largest: Iterable[dict[str, Any]] = rep.get("largest", [])
    big = [f"  {b['tokens']:>8,}  {b['kind']}: {b['label']}" for b in largest]
    if big:
        out += ["", "Largest items:", *big]
    removed = rep.get("removed") or {}
    n = removed.get("compactions", 0)
    if n:
        line = f"Removed by compaction: {n} compaction{'s' if n != 1 else ''}, {removed.get('tokens', 0):,} tokens"
        last = removed.get("last")
        if last:
            pre, post = last.get("pre_tokens"), last.get("post_tokens")
            size = f"{pre:,} -> {post:,} tokens" if pre is not None and post is not None else "size not recorded"
            line += f" (last: {last.get('trigger') or '?'}, {size}"
            if last.get("dropped"):
                line += f"; dropped {', '.join(last['dropped'][:5])}"
            line += ")"
        out += ["", line]
    for note in rep.get("notes", []):
        out.append(f"Note: {note}")
    return "\n".join(out)
