"""The SessionStart briefing: what a new, resumed, cleared or compacted session is told it has.

Rules:
- A startup in a project with no memory yet says nothing (it would be billed every turn).
- SessionStart(compact) lists only the window's tool output (``COMPACT_LISTED_KINDS``) that the
  category matrix keeps or summarizes in the phase, each with its L1 summary; the conversation is
  what the compaction summary carries, and ctxlifed's own rows (facts, ledgers, lessons) never were in
  the window. What the phase archives (pending items, decisions) stays recallable only.
- A briefing is kept (``last_briefing``): a resume gets only what differs from what the context
  already holds (bounded by ``merge_briefing``): the briefings given since the session started or was
  compacted, and PostCompact's re-injected facts. A compaction keeps the briefings given since the last
  prompt (``unsent_briefing``): they are attached after its summary (model_view, resume then /compact).
- Figures come from the same Budget that ``status`` reports; ctxlifectl is named as ``ctl_command()``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from ..core import matrix as matrix_rules
from ..core import render
from ..core.model import Kind
from ..runtime.config import Config
from ..runtime.ctl import ctl_command
from ..store import session_reads
from ..store.db import Readers
from .state import SessionState

# What SessionStart(compact) lists of the compacted window: tool output, the detail a summary drops and
# the model may want back by id. The conversation (prompts, assistant text) is what the summary
# carries, and the facts in it that the summary lost are re-injected one by one at PostCompact.
COMPACT_LISTED_KINDS = frozenset({Kind.TOOL, Kind.CODE_CHANGE, Kind.ERROR, Kind.TEST_RESULT})


async def session_start_context(source: str, st: SessionState, now: float, *, readers: Readers, cfg: Config,
                                matrix: matrix_rules.Matrix, budget_of: Callable[[SessionState], Any],
                                is_stale: Callable[[dict[str, Any]], bool]) -> str:
    """The SessionStart briefing for ``source`` (startup, resume, clear, compact); kept in
    ``st.last_briefing`` (a resume gets only what differs from it)."""
    data = await readers.run(partial(session_reads.session_start_rows, st.project, st.session, source,
                                     st.last_archived, listed_kinds=[str(k) for k in COMPACT_LISTED_KINDS],
                                     is_stale=is_stale))
    if source == "startup" and not (data["timeline"] or data["pending"] or data["decisions_count"]
                                    or data["lessons_count"]):
        return ""  # a project with no memory yet: say nothing (it would be billed every turn)
    budget = budget_of(st)
    if source == "compact" and st.phase.phase:
        # The matrix decides what a compacted window is told it still has: what the phase archives
        # stays recallable only.
        if not matrix_rules.listed(str(matrix_rules.category("pending", st.phase.phase, matrix))):
            data["pending"] = []
        if not matrix_rules.listed(str(matrix_rules.category("decision", st.phase.phase, matrix))):
            data["decisions_count"], data["decisions"] = 0, []
    briefing = render.SessionStartData(
        source=source, project=st.project, phase=st.phase.phase, phase_since=st.phase.since,
        timeline=tuple(data["timeline"]), timeline_session=data["timeline_session"],
        pending=tuple(render.PendingItem(text=p["text"], id=p["ref"]) for p in data["pending"]),
        decisions_count=data["decisions_count"],
        archived=tuple(render.ArchivedItem(id=a["id"], kind=a["kind"], phase=a["phase"], ts=a["ts"],
                                           summary=a["summary"], priority=a["priority"]) for a in data["archived"]),
        recent_decisions=tuple(x["text"] for x in data["decisions"]),
        lessons_count=data["lessons_count"],
        working_pct=budget.working_pct if budget else None,
        level=int(budget.level) if budget else 0,
        working_estimated=bool(budget.estimated) if budget else False,
    )
    ctx = render.render_session_start(briefing, cap_tokens=cfg.inject_cap_tokens, now=now, ctl=ctl_command(),
                                      previous=st.last_briefing if source == "resume" else "")
    # What the session's context now holds of ours: a resume briefs only what differs from it. A
    # compaction drops the briefings the summarised history held, but not those given since the last
    # prompt: Claude Code attaches them, with the compact one, after the summary.
    held = {"resume": st.last_briefing, "compact": st.unsent_briefing}.get(source, "")
    st.last_briefing = merge_briefing(held, ctx) if ctx else held
    st.unsent_briefing = merge_briefing(st.unsent_briefing, ctx) if ctx else st.unsent_briefing
    return ctx


def prompt_sent(st: SessionState) -> None:
    """A prompt went to the model: the briefings given before it are in the history from now on."""
    st.unsent_briefing = ""


def reinjected(st: SessionState, text: str) -> None:
    """PostCompact's text is in the compacted context: a resume does not repeat what it says."""
    if text:
        st.last_briefing = merge_briefing(st.last_briefing, text)


def merge_briefing(previous: str, delta: str) -> str:
    """The briefings a resumed session holds: the earlier ones and the delta just given (bounded)."""
    both = f"{previous}\n{delta}" if previous else delta
    return both[-2 * render.MAX_CHARS:]
