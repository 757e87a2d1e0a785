"""Advice texts that do not depend on the store: the release advice ``status`` lists, and the small
rules the hook path's advice shares with it (core/advice.py holds the decisions, docs/advice.md the why).

Rules:
- ``advice_for`` follows the same rules as the advice delivered in the session: what ``status`` lists
  is what the session would be told.
- Figures come from the same Budget ``status`` reports.
"""

from __future__ import annotations

import os

from ..core import advice as advice_rules
from ..core import budget
from ..core import figures
from ..core import matrix as matrix_rules
from ..core.model import Level
from .state import SessionState


def near_autocompact(b: budget.Budget) -> bool:
    """Claude Code's auto-compaction is close: within 3 % of the window (at least 10,000 tokens)."""
    return b.tokens_to_autocompact <= max(10_000, b.window * 3 // 100)


def with_reason(reason: str) -> str:
    return f"; {reason}" if reason else ""


def advice_for(st: SessionState, b: budget.Budget | None, matrix: matrix_rules.Matrix = matrix_rules.DEFAULT, *,
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
        files=files_changed(st), failing_tests=list(st.failing_ids)), matrix)
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


def working_tokens(b: budget.Budget) -> int:
    """What the Working zone holds (uncapped)."""
    return int(b.working_pct * b.zones[2].capacity)


def pending_advice(st: SessionState) -> advice_rules.Advice | None:
    if not st.pending_advice:
        return None
    return advice_rules.Advice(kind=st.pending_advice_kind, key=st.pending_advice_key, reason="", command="",
                      urgency=st.pending_advice_urgency)
