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
"""

from __future__ import annotations

import os
import sqlite3
from functools import partial
from typing import TYPE_CHECKING, Any

import msgspec

from ..core import accounting as A
from ..core import classify
from ..core import matrix as MX
from ..core import mustsurvive as MS
from ..core import survival as SV
from ..core import testfail
from ..core.events import s
from ..core.model import estimate_tokens
from ..runtime.ctl import ctl_command
from ..store import queries

if TYPE_CHECKING:
    from .app import Service
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


def note_instructions(st: SessionState, payload: dict[str, Any], now: float) -> None:
    path = s(payload.get("file_path"))
    if not path or not os.path.isabs(path):
        return
    globs = payload.get("globs") if isinstance(payload.get("globs"), list) else None
    st.acc = A.note_instructions(st.acc, path, s(payload.get("memory_type")) or None,
                                 s(payload.get("load_reason")) or None, instruction_tokens(path), now,
                                 globs=[g for g in globs or [] if isinstance(g, str)] or None)


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


async def record_must_survive(svc: Service, st: SessionState, now: float) -> None:
    data = await svc.readers.run(partial(_must_survive_rows, st.session, st.project, st.phase_started,
                                         is_stale=svc.is_stale))
    failing = failing_tests(st)
    active = list(reversed(st.files_touched[-5:]))
    st.must_survive = MS.build(phase=st.phase.phase, goal=data["goal"], decisions=data["decisions"],
                               constraints=data["constraints"], failing_tests=failing, pending=data["pending"],
                               active_files=active, limits=MX.survive_limits(st.phase.phase, svc.matrix))
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
            try:
                with open(r.path, encoding="utf-8", errors="replace") as f:
                    texts.append(f.read(INSTRUCTION_READ_CAP))
            except OSError:
                continue
    kept_skills = [f.name for f in sim.kept if f.kind == "skill"]
    return MS.reattached_from(sim.files_back(), kept_skills, instructions_text="\n".join(texts),
                              injected_text=st.compact_injected or "")


async def post_compact(svc: Service, st: SessionState, payload: dict[str, Any], now: float) -> str:
    """The diff at PostCompact; returns the plain text to print (possibly empty) and stores the report."""
    summary = s(payload.get("compact_summary"))
    items = list(st.must_survive)
    if not items:  # PreCompact was skipped (Claude Code can skip it): record the set now
        await record_must_survive(svc, st, now)
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
        ts=now, trigger=s(payload.get("trigger")) or None, pre_tokens=st.pre_compact_tokens, post_tokens=None,
        archived=len(st.last_archived), kept=kept, lost=lost, reinjected=plan.ids,
        suppressed_items=MS.suppressed(items, kept, lost), dropped_skills=sim.dropped_skills())
    st.last_report_id = await svc.writer.run(partial(_insert_report, st.session, st.project, now, _enc.encode(report)))
    st.must_survive = []
    if plan.text:
        st.acc = A.note_injected(st.acc, plan.text, now)
        st.note_injected(estimate_tokens(plan.text))
    return plan.text


async def boundary_seen(svc: Service, st: SessionState, post_tokens: int | None) -> None:
    """The transcript's compact boundary arrived after PostCompact: complete the report's post tokens."""
    if st.last_report_id and post_tokens is not None:
        await svc.writer.run(partial(_set_post_tokens, st.last_report_id, post_tokens))
        st.last_report_id = 0


async def reports(svc: Service, *, session: str | None, project: str | None, limit: int) -> list[dict[str, Any]]:
    rows = await svc.readers.run(partial(queries.compactions, session=session, project=project, limit=limit))
    return [msgspec.json.decode(r[3]) | {"session": r[1], "project": r[2]} for r in rows]


def render(reps: list[dict[str, Any]]) -> str:
    return MS.render_report([msgspec.convert({k: v for k, v in r.items() if k not in ("session", "project")},
                                             MS.CompactionReport) for r in reps])


# -- store jobs ---
GOAL_PROMPTS = 64  # a session's first prompts searched for its substantive request


def session_goal(conn: sqlite3.Connection, session: str, until: float | None = None) -> str | None:
    """The session's task: its substantive request (``classify.pick_goal``: not "go ahead"; a prompt
    that starts another task replaces it), else its first prompt, without the sentences that are facts
    of their own (``classify.goal_text``); ``until``: only prompts up to that time."""
    q = "SELECT substr(text, 1, 4000) FROM archive WHERE session = ? AND kind = 'prompt'"
    args: tuple[Any, ...] = (session,)
    if until is not None:
        q += " AND ts <= ?"
        args = (session, until)
    prompts = [r[0] for r in conn.execute(q + f" ORDER BY id LIMIT {GOAL_PROMPTS}", args)]
    goal = classify.pick_goal(prompts) or (prompts[0] if prompts else None)
    return classify.goal_text(goal) if goal else None


def _insert_report(session: str, project: str, ts: float, blob: bytes, conn: sqlite3.Connection) -> int:
    cur = conn.execute("INSERT INTO compactions(session, project, ts, report) VALUES (?,?,?,?)",
                       (session, project, ts, blob))
    return int(cur.lastrowid or 0)


def _set_post_tokens(rid: int, post: int, conn: sqlite3.Connection) -> None:
    row = conn.execute("SELECT report FROM compactions WHERE id = ?", (rid,)).fetchone()
    if row:
        rep = msgspec.json.decode(row[0])
        rep["post_tokens"] = post
        conn.execute("UPDATE compactions SET report = ? WHERE id = ?", (_enc.encode(rep), rid))


def _must_survive_rows(session: str, project: str, phase_started: float, conn: sqlite3.Connection, *,
                       is_stale: Any = None) -> dict[str, Any]:
    goal = session_goal(conn, session)

    def texts(kind: str, open_only: bool) -> list[str]:
        q = "SELECT text FROM items WHERE session = ? AND kind = ?" + (" AND status = 'open'" if open_only else "")
        return [r[0] for r in conn.execute(q + " ORDER BY id DESC LIMIT 8", (session, kind)).fetchall()]

    pending = [r["text"] for r in queries.pending_items(conn, project=project, session=session, limit=32)
               if not (is_stale and is_stale(r))][:8]  # open and current: closed and stale items never survive
    return {"goal": (goal[:400] if goal else None), "decisions": texts("decision", False),
            "constraints": texts("constraint", False), "pending": pending}
