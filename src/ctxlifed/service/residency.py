"""Residency hygiene inside the daemon: the ``status`` block and the once-per-session note.

Rules:
- The files are read by ``runtime/residency_files.py`` in a worker thread, never on the event loop;
  the checks are ``core/residency.py``. A session's own figures join them: the System zone as the
  accounting measured it, the System zone's capacity, the instruction files the session loaded
  (InstructionsLoaded) with their load time, and the session's transcript (only when it lies under
  the allowed transcript roots) for the MCP tool definitions of its last request.
- The in-session note is a ``systemMessage`` for the user, never context for the model: at the
  session's first SessionStart (any source), only when a finding is a ``warn``, once per session
  (``SessionState.residency_noted``), and whatever the outcome the flag is set.
- A CLAUDE.md or rule changed after the session loaded it is named once per file and change (the
  file's mtime is remembered in ``SessionState.instructions_warned``), at the next Stop, SessionStart
  or UserPromptSubmit answer; a later ``InstructionsLoaded`` for that file (``/compact``, ``/clear``)
  makes it current again.
- Never fails a hook: any error reading the files gives no note (logged).
- :func:`compact_section`: the ``# Compact instructions`` text from the session's phase, its open
  decisions and pending items (the store, ``store/compactions.py``), its failing tests and the files
  it changed.
- Receives only what it uses (readers, a budget function, the transcript roots), never the Service.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio.to_thread
import structlog

from ..core import residency as R
from ..core.survival import display_path
from ..runtime import residency_files as RF
from ..runtime.ctl import ctl_command
from ..store import compactions as store
from ..store.db import Readers
from . import files

if TYPE_CHECKING:
    from ..core.budget import Budget
    from .state import SessionState

BudgetOf = Callable[["SessionState"], "Budget | None"]  # the session's four-zone budget (None: no figures yet)
Roots = Callable[[], tuple[str, ...]]  # the allowed transcript roots, from the live config

log = structlog.get_logger("ctxlifed.residency")

NOTE_EVENTS = frozenset({"SessionStart", "Stop", "UserPromptSubmit"})
MAX_WARNED = 64


def _loaded(st: SessionState) -> list[tuple[str, float]]:
    return [(r.path, r.ts) for r in st.acc.instructions.values()]


def _changed(loaded: list[tuple[str, float]]) -> list[R.LoadedInstruction]:
    out = []
    for path, ts in loaded:
        try:
            m: float | None = os.stat(path).st_mtime
        except OSError:
            m = None
        out.append(R.LoadedInstruction(path=path, loaded_ts=ts, mtime=m))
    return out


def _system(budget: BudgetOf, st: SessionState) -> tuple[int | None, int | None]:
    measured = st.acc.system
    b = budget(st)
    cap = next((z.capacity for z in b.zones if z.name.lower() == "system"), None) if b is not None else None
    return measured, cap


def _transcript(transcript_roots: Roots, st: SessionState) -> str:
    if not st.transcript_path:
        return ""
    return files.transcript_allowed(st.transcript_path, transcript_roots()) or ""


async def report(st: SessionState, *, budget: BudgetOf, transcript_roots: Roots) -> R.Report:
    """The residency report of the session's project, with the session's own figures."""
    system, cap = _system(budget, st)
    loaded, transcript, project = _loaded(st), _transcript(transcript_roots, st), st.project

    def work() -> R.Report:
        inputs = RF.read_inputs(project, transcript=transcript)
        return R.check(**inputs, loaded=_changed(loaded), system_tokens=system, system_capacity=cap)

    return await anyio.to_thread.run_sync(work)


def view(rep: R.Report) -> dict[str, Any]:
    """The ``status`` block: figures (estimated), findings, the human lines."""
    return {"estimated": True, "listing_tokens": rep.listing_tokens, "instruction_tokens": rep.instruction_tokens,
            "mcp_tokens": rep.mcp_tokens, "skills": rep.skills, "warnings": len(rep.warnings),
            "findings": [{"code": f.code, "level": f.level, "subject": f.subject, "path": f.path, "tokens": f.tokens,
                          "message": f.message, "fix": f.fix} for f in rep.findings],
            "lines": R.render_lines(rep)}


async def note(st: SessionState, event: str, *, budget: BudgetOf, transcript_roots: Roots) -> str:
    """The user message due at this event ("" when none): the first SessionStart's residency note,
    and instruction files changed since the session loaded them (once per file and change)."""
    if event not in NOTE_EVENTS:
        return ""
    first = event == "SessionStart" and not st.residency_noted
    if first:
        st.residency_noted = True
    try:
        if first:
            rep = await report(st, budget=budget, transcript_roots=transcript_roots)
            changed = [f for f in rep.warnings if f.code == "instructions_changed"]
        else:
            loaded = _loaded(st)
            if not loaded:
                return ""
            rep = None
            changed = R.check(loaded=await anyio.to_thread.run_sync(_changed, loaded)).warnings
    except Exception as exc:  # a file we cannot read must never fail a hook
        log.warning("residency_failed", error=repr(exc)[:200])
        return ""
    fresh = []
    for f in changed:
        m = _mtime_of(f.path)
        if m is not None and st.instructions_warned.get(f.path) != m:
            st.instructions_warned[f.path] = m
            fresh.append(f)
    while len(st.instructions_warned) > MAX_WARNED:
        del st.instructions_warned[next(iter(st.instructions_warned))]
    parts = []
    if rep is not None:
        others = R.Report(findings=tuple(f for f in rep.findings if f.code != "instructions_changed"),
                          listing_tokens=rep.listing_tokens, instruction_tokens=rep.instruction_tokens,
                          mcp_tokens=rep.mcp_tokens, skills=rep.skills)
        parts.append(R.note_text(others, ctl=ctl_command()))
    if fresh:
        parts.append("ctxlifed: changed after this session loaded it, so the session still follows the old text"
                     " (the change applies after /clear or /compact): " + ", ".join(f.path for f in fresh))
    return "\n\n".join(p for p in parts if p)


def _mtime_of(path: str) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


async def compact_section(readers: Readers, st: SessionState) -> str:
    rows = await readers.run(partial(store.compact_facts, st.project, st.session))
    failing = [t[5:] for t in st.tests if t.startswith("FAIL ")]
    return R.compact_instructions(phase=st.phase.phase, decisions=rows["decisions"], failing_tests=failing,
                                  active_files=[display_path(p, st.project) for p in reversed(st.files_touched[-8:])],
                                  pending=rows["pending"])


__all__ = ["compact_section", "note", "report", "view"]
