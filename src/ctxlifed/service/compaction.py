"""Compaction survival: accounting, the /compact simulator, the must-survive set and its diff.

Rules:
- PreCompact records the must-survive set (phase, the session's goal (its substantive request, the
  facts stated with it left to their own items), decisions, constraints, failing
  tests by id and first error line, open pending items that are not stale, active files) with stable
  ids, before Claude Code compacts; how many of each kind the category matrix decides for the phase
  (``core.matrix.survive_limits``).
- The diff is made at PostCompact from its ``compact_summary`` (the transcript gets the summary only
  after PostCompact ran). What Claude Code re-attaches itself (root CLAUDE.md and unscoped rules
  re-read from disk, recent files, skills within 5k/25k) and what ctxlifed already injected at
  SessionStart(compact) count as carried, so nothing is delivered twice.
- Only lost items are re-injected, as PostCompact's plain-text stdout (the route that reaches the
  next model request; JSON ``additionalContext`` is rejected there), under a cap; delivered ids (by
  the re-injection, or by our SessionStart(compact) text) are remembered for the session and never
  delivered again.
- One report per compaction (pre/post tokens, archived, kept, lost, re-injected), kept in the store.
- Receives only what it uses (readers, writer, the category matrix, the staleness rule); the SQL is
  ``store/compactions.py``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import msgspec

from ..core import accounting as A
from ..core import matrix as MX
from ..core import mustsurvive as MS
from ..core import survival as SV
from ..core import testfail
from ..core.hook_events import InstructionsLoaded
from ..core.model import estimate_tokens
from ..runtime.residency_files import read_head
from ..runtime.ctl import ctl_command
from ..store import compactions as store
from ..store import queries
from ..store.db import Readers, Writer

if TYPE_CHECKING:
    from .state import SessionState

REINJECT_CAP_TOKENS = 600
MAX_DELIVERED = 256
INSTRUCTION_READ_CAP = 64 * 1024
_enc = msgspec.json.Encoder()


def instruction_tokens(path: str) -> int:
    """Estimated tokens of an instruction file, from its size (never read whole)."""
    try:
        return max(0, os.path.getsize(path) // 4)
    except OSError:
        return 0


def note_instructions(st: SessionState, event: InstructionsLoaded, now: float) -> None:
    path = event.file_path
    if not path or not os.path.isabs(path):
        return
    st.acc = A.note_instructions(st.acc, path, event.memory_type or None, event.load_reason or None,
                                 instruction_tokens(path), now, globs=list(event.globs) or None)


def simulate(st: SessionState) -> SV.SurvivalReport:
    return SV.simulate(**A.survival_inputs(st.acc))


def where(st: SessionState) -> dict[str, Any]:
    rep = A.report(st.acc)
    rep["table"] = A.render_where(rep)
    return rep


def survival(st: SessionState) -> dict[str, Any]:
    rep = simulate(st)
    return {"lines": rep.lines, "lost": [f.name for f in rep.lost], "dropped_skills": rep.dropped_skills(),
            "files_back": rep.files_back(), "kept_tokens": rep.kept_tokens, "lost_tokens": rep.lost_tokens}


async def record_must_survive(readers: Readers, st: SessionState, now: float, *, matrix: MX.Matrix,
                              is_stale: Callable[[dict[str, Any]], bool]) -> None:
    data = await readers.run(partial(store.must_survive_rows, st.session, st.project, st.phase_started,
                                     is_stale=is_stale))
    failing = failing_tests(st)
    active = list(reversed(st.files_touched[-5:]))
    st.must_survive = MS.build(phase=st.phase.phase, goal=data["goal"], decisions=data["decisions"],
                               constraints=data["constraints"], failing_tests=failing, pending=data["pending"],
                               active_files=active, limits=MX.survive_limits(st.phase.phase, matrix))
    st.pre_compact_tokens = st.context_tokens


def failing_ids(output: str) -> list[str]:
    """Failing test ids named in a test run's output, in order, unique (``core.testfail``: pytest,
    unittest, jest, vitest, mocha, go, cargo, nextest, rspec, phpunit, dotnet, Maven, Gradle)."""
    return [tid[:200] for tid in testfail.failing_tests(output[:200_000])][:16]


def failing_tests(st: SessionState) -> list[str]:
    """What is red now: each failing test by its id and first error line (``testfail``), newest run
    first; a failing command whose output named no test, by its command."""
    out = [f"{tid} — {err}" if err else tid for _cmd, tid, err in reversed(st.failing)]
    named = {cmd for cmd, _tid, _err in st.failing}
    return out + [cmd for cmd in _failing_commands(st.tests) if cmd[:500] not in named]


def _failing_commands(tests: list[str]) -> list[str]:
    """Commands whose latest run failed."""
    last: dict[str, bool] = {}
    for line in tests:
        verdict, _, cmd = line.partition(" ")
        last[cmd] = verdict == "FAIL"
    return [cmd for cmd, failed in last.items() if failed]


def _reattached(st: SessionState, sim: SV.SurvivalReport) -> MS.ReAttached:
    texts = []
    for r in st.acc.instructions.values():
        if r.kind in ("root", "unscoped_rule", "auto_memory", "user"):
            text = read_head(r.path, INSTRUCTION_READ_CAP)  # a path from the transcript: bounded, no FIFO
            if text is not None:
                texts.append(text)
    kept_skills = [f.name for f in sim.kept if f.kind == "skill"]
    return MS.reattached_from(sim.files_back(), kept_skills, instructions_text="\n".join(texts),
                              injected_text=st.compact_injected or "")


async def post_compact(readers: Readers, writer: Writer, st: SessionState, summary: str, trigger: str, now: float,
                       *, matrix: MX.Matrix, is_stale: Callable[[dict[str, Any]], bool]) -> str:
    """The diff at PostCompact (``summary``, ``trigger``: its typed fields); returns the plain text to
    print (possibly empty) and stores the report."""
    items = list(st.must_survive)
    if not items:  # PreCompact was skipped (Claude Code can skip it): record the set now
        await record_must_survive(readers, st, now, matrix=matrix, is_stale=is_stale)
        items = list(st.must_survive)
    sim = simulate(st)
    reattached = _reattached(st, sim)
    kept, lost = MS.diff(items, summary, reattached, st.delivered)
    plan = MS.plan_reinjection(lost, REINJECT_CAP_TOKENS, ctl=ctl_command())
    # Items our SessionStart(compact) text carried were delivered by it, as the re-injection would have.
    without_ours = msgspec.structs.replace(reattached, injected_text="")
    ours = [i.id for i in kept if reattached.injected_text and not MS.carried(i, summary, without_ours)]
    st.delivered = list(dict.fromkeys(st.delivered + ours + plan.ids))[-MAX_DELIVERED:]
    report = MS.compaction_report(
        ts=now, trigger=trigger or None, pre_tokens=st.pre_compact_tokens, post_tokens=None,
        archived=len(st.last_archived), kept=kept, lost=lost, reinjected=plan.ids,
        suppressed_items=MS.suppressed(items, kept, lost), dropped_skills=sim.dropped_skills())
    st.last_report_id = await writer.run(partial(store.insert_report, st.session, st.project, now,
                                                      _enc.encode(report)))
    st.must_survive = []
    if plan.text:
        st.acc = A.note_injected(st.acc, plan.text, now)
        st.note_injected(estimate_tokens(plan.text))
    return plan.text


async def boundary_seen(writer: Writer, st: SessionState, post_tokens: int | None) -> None:
    """The transcript's compact boundary arrived after PostCompact: complete the report's post tokens."""
    if st.last_report_id and post_tokens is not None:
        await writer.run(partial(store.set_post_tokens, st.last_report_id, post_tokens))
        st.last_report_id = 0


async def reports(readers: Readers, *, session: str | None, project: str | None, limit: int) -> list[dict[str, Any]]:
    rows = await readers.run(partial(queries.compactions, session=session, project=project, limit=limit))
    return [msgspec.json.decode(r[3]) | {"session": r[1], "project": r[2]} for r in rows]


def render(reps: list[dict[str, Any]]) -> str:
    return MS.render_report([msgspec.convert({k: v for k, v in r.items() if k not in ("session", "project")},
                                             MS.CompactionReport) for r in reps])
