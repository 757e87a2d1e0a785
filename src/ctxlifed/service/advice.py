"""Advice in the session (core/advice.py holds the decisions, docs/advice.md the why): the signals a
hook event carries, ``/compact`` when it pays, ``/rewind``, ``/clear`` and a subagent on their signals;
and the release advice ``status`` lists.

Rules:
- One slot per session, the more urgent wins; recorded as delivered when an answer carries it, never
  delivered twice, debounced per kind (``Adviser.advise``).
- ``/rewind``, ``/clear`` and subagent advice are for the main chain only (the caller checks).
- A ``/clear`` topic is read from the archive, never kept in the session state: forget must leave no
  copy of a prompt behind.
- ``advice_for`` follows the same rules as the advice delivered in the session: what ``status`` lists
  is what the session would be told.
- Figures come from the same Budget ``status`` reports.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from typing import Any

from ..core import advice as advice_rules
from ..core import budget as budgets
from ..core import figures
from ..core import matrix as matrix_rules
from ..core import lessons as lesson_rules
from ..core.commands import EXPLORE_TOOLS, is_test_command
from ..core.hook_events import HookEvent, PostToolUse, PostToolUseFailure, UnknownHook, UserPromptSubmit
from ..core.model import Element, Kind, Level
from ..store import queries, session_reads
from ..store.db import Readers
from . import compaction
from .state import SessionState


def near_autocompact(b: budgets.Budget) -> bool:
    """Claude Code's auto-compaction is close: within 3 % of the window (at least 10,000 tokens)."""
    return b.tokens_to_autocompact <= max(10_000, b.window * 3 // 100)


def with_reason(reason: str) -> str:
    return f"; {reason}" if reason else ""


def advice_for(st: SessionState, b: budgets.Budget | None, matrix: matrix_rules.Matrix = matrix_rules.DEFAULT, *,
               reason: str = "") -> list[str]:
    """Release advice following the chapter's decision tree, most relevant first; the same rules as the
    advice delivered in the session (core/advice.py).

    Need the earlier work? No: /clear (free, cleanest). Yes, but the last steps went wrong: /rewind
    (cache-friendly). Yes: /compact <focus>, only where it pays. Large reads: a subagent, so only its
    summary enters the window.
    ``reason``: what /compact would save (``service.cost.compact_reason``), given with the /compact advice.
    """
    if b is None:
        return ["no usage figures yet (the transcript has no assistant response)"]
    out: list[str] = []
    pct = figures.percent(b.working_pct)
    focus = "/compact " + matrix_rules.focus_line(st.phase.phase, matrix_rules.FocusState(
        files=files_changed(st), failing_tests=list(st.streak_tests)), matrix)
    if near_autocompact(b):
        out.append(f"auto-compaction is {figures.tokens(b.tokens_to_autocompact)} tokens away: {focus} now, at a boundary you choose")
    for kind in ("rewind", "clear", "subagent"):
        if kind in st.advice_lines:
            out.append(st.advice_lines[kind])
    if b.level >= Level.L0_L1:
        out.append(f"Working zone at {pct} ({figures.level_name(b.level)}): {focus}{with_reason(reason)}")
    big = [x for x in st.acc.largest if x.tokens >= 10_000 and x.kind in ("file_reads", "tool")][:1]
    if big and "subagent" not in st.advice_lines:
        out.append(f"large reads ({big[0].label}: {figures.tokens(big[0].tokens)} tokens) cost every turn: "
                   "delegate such reads to a subagent so only its summary enters the window")
    if not out:
        out.append(f"Working zone at {pct}: no action needed")
    return out


def files_changed(st: SessionState) -> list[str]:
    """This phase's changed files, most recent first, relative to the project when inside it."""
    root = st.project.rstrip(os.sep) + os.sep if st.project else ""
    return [f[len(root):] if root and f.startswith(root) else f for f in reversed(st.files_touched)]


def working_tokens(b: budgets.Budget) -> int:
    """What the Working zone holds (uncapped)."""
    return int(b.working_pct * b.zones[2].capacity)


def pending_advice(st: SessionState) -> advice_rules.Advice | None:
    if not st.pending_advice:
        return None
    return advice_rules.Advice(kind=st.pending_advice_kind, key=st.pending_advice_key, reason="", command="",
                      urgency=st.pending_advice_urgency)


class Adviser:
    """Queues advice on a session. ``readers``: the store's readers (focus lines, earlier prompts);
    ``matrix()``: the category matrix in use; ``is_stale(row)``: a pending item is stale."""

    def __init__(self, readers: Readers, matrix: Callable[[], matrix_rules.Matrix],
                 is_stale: Callable[[dict[str, Any]], bool]) -> None:
        self.readers = readers
        self.matrix = matrix
        self.is_stale = is_stale

    def advise(self, st: SessionState, adv: advice_rules.Advice, now: float) -> None:
        """Queue advice for the user: once per cause, debounced per kind, the more urgent one wins the
        single slot (core/advice.py). It is recorded as delivered when an answer carries it."""
        st.advice_lines[adv.kind] = adv.line
        if advice_rules.debounced(adv, delivered=st.advised, last_of_kind=st.advice_at.get(adv.kind), now=now,
                                  pending=pending_advice(st)):
            return
        st.pending_advice, st.pending_advice_key = adv.text, adv.key
        st.pending_advice_kind, st.pending_advice_urgency = adv.kind, adv.urgency

    async def advise_compact(self, st: SessionState, budget: budgets.Budget | None, cause: str, key: str, why: str,
                              now: float) -> None:
        """Suggest ``/compact <focus>`` when it pays (core/advice.py, docs/advice.md)."""
        if budget is None:
            return
        working, fixed = working_tokens(budget), budget.zones[0].used
        got = advice_rules.compact_cause(level=int(budget.level) if cause != "boundary" else 0,
                                         near_autocompact=cause == "near", at_boundary=cause == "boundary",
                                         working_tokens=working, fixed_tokens=fixed)
        if got is None:
            return
        reason = why
        if got == "boundary":
            turns = -(-advice_rules.compaction_cost(fixed + working) // max(1.0, advice_rules.saving_per_turn(working)))
            reason += (f"; Working holds {figures.tokens(working)} tokens, so a compaction repays itself"
                       f" in about {int(turns)} turns")
        focus = matrix_rules.focus_line(st.phase.phase, await self.focus_state(st), self.matrix())
        self.advise(st, advice_rules.Advice(kind="compact", key=key, reason=reason, command=f"/compact {focus}",
                                            urgency=advice_rules.URGENCY[got]), now)

    async def focus_state(self, st: SessionState) -> matrix_rules.FocusState:
        """What a focus line names: files being changed, failing tests, this phase's decisions, the
        session's constraints and open items (most recent first)."""
        rows = await self.readers.run(partial(session_reads.focus_rows, st.session, st.project))
        return matrix_rules.FocusState(
            files=files_changed(st),
            failing_tests=list(st.streak_tests),
            decisions=[r["text"] for r in rows["decision"] if r["ts"] >= st.phase_started - 1e-6],
            constraints=[r["text"] for r in rows["constraint"]],
            pending=await self.pending_texts(st))

    def note_signals(self, st: SessionState, hook: HookEvent | UnknownHook, elements: list[Element],
                     now: float) -> None:
        """Failures in a row (/rewind), read sweeps (subagent), failing test ids (focus line)."""
        if isinstance(hook, UserPromptSubmit):
            st.sweep_reads, st.sweep_targets = 0, []
            st.sweep_asked = advice_rules.asks_for_sweep(hook.prompt)
            return
        if not isinstance(hook, (PostToolUse, PostToolUseFailure)):
            return
        tool = hook.tool_name
        if tool in EXPLORE_TOOLS:
            target = (hook.input_text("file_path") or hook.input_text("pattern") or hook.input_text("path")
                      or hook.input_text("url") or tool)
            if st.sweep_reads == 0:
                st.sweep_start = now
            st.sweep_reads += 1
            if target not in st.sweep_targets:
                st.sweep_targets = [*st.sweep_targets, target[:200]][-32:]
        else:
            st.sweep_reads, st.sweep_targets = 0, []
            st.advice_lines.pop("subagent", None)
        for el in elements:
            failed = el.is_error or el.kind is Kind.ERROR or (el.kind is Kind.TEST_RESULT and el.passed is False)
            if failed:
                test_run = el.kind is Kind.TEST_RESULT or bool(el.command and is_test_command(el.command))
                ids = compaction.failing_ids(el.text) if test_run else []
                sig = advice_rules.failure_key(ids, lesson_rules.signature(el.text, tool=el.tool, command=el.command,
                                                                           file_path=el.file_path)
                                               or f"{el.tool}|{el.command or el.file_path or ''}")
                st.fail_sig, st.fail_count = (sig, st.fail_count + 1) if sig == st.fail_sig else (sig, 1)
                if test_run:
                    st.streak_tests = (ids or [el.command or ""])[:8]
            elif el.kind is Kind.TEST_RESULT and el.passed:
                st.fail_sig, st.fail_count, st.streak_tests = "", 0, []
                st.advice_lines.pop("rewind", None)

    async def advise_release(self, st: SessionState, prompt: str | None, budget: budgets.Budget | None,
                             now: float) -> None:
        """/rewind, /clear and subagent advice (core/advice.py), in the session and in ``status``.
        ``prompt``: the prompt of a UserPromptSubmit, None for any other event."""
        if advice_rules.rewind_due(st.fail_count):
            sig = " ".join(st.fail_sig.split("|", 1)[-1].split())
            sig = sig if len(sig) <= 120 else sig[:119] + "…"
            self.advise(st, advice_rules.Advice(
                kind="rewind", key=f"rewind:{st.fail_sig}", urgency=advice_rules.URGENCY["rewind"],
                reason=f"the same failure {st.fail_count} times in a row ({sig})",
                command="/rewind to before the first attempt (free, keeps the cache), then try another way"), now)
        if advice_rules.sweep_due(st.sweep_reads, len(st.sweep_targets), asked=st.sweep_asked):
            self.advise(st, advice_rules.Advice(
                kind="subagent", key=f"subagent:{st.sweep_start:.3f}", urgency=advice_rules.URGENCY["subagent"],
                reason=f"{st.sweep_reads} reads in a row over {len(st.sweep_targets)} files or patterns"
                       + (" of the sweep this request asks for" if st.sweep_asked else "")
                       + ", all kept in the window and re-read every turn",
                command="ask for a subagent to do the rest of this sweep (only its summary enters the window)"), now)
        if prompt is not None:
            working = working_tokens(budget) if budget is not None else 0
            topic = ""
            if prompt and working >= advice_rules.CLEAR_MIN_WORKING and not prompt.lstrip().startswith("/"):
                # The work so far, read from the archive (never kept in the session state: forget
                # must leave no copy of a prompt behind).
                earlier = await self.readers.run(partial(session_reads.earlier_prompts, st.session))
                topic = "\n".join([*earlier, *st.files_touched, *st.streak_tests])
            if topic and advice_rules.unrelated_task(prompt, topic, working):
                self.advise(st, advice_rules.Advice(
                    kind="clear", key=f"clear:{now:.3f}", urgency=advice_rules.URGENCY["clear"],
                    reason=f"this looks like a new task unrelated to the work so far, and Working holds"
                           f" {figures.tokens(working)} tokens of it",
                    command="/clear before starting it (free; ctxlifed's project memory carries over)"), now)
            else:
                st.advice_lines.pop("clear", None)

    async def pending_texts(self, st: SessionState) -> list[str]:
        """The session's open, current (not stale) pending items, newest first (the focus line)."""
        rows = await self.readers.run(partial(queries.pending_items, project=st.project, session=st.session, limit=20))
        return [r["text"] for r in rows if r["status"] == "open" and not self.is_stale(r)][:5]
