"""The read methods: ``status``, ``recall``, ``pending``, ``lessons``, ``compactions``,
``memory.prune``; and the two control methods next to them, ``phase.set`` and ``forget``.

Rules:
- Each handler receives what it uses (readers, writer, config, clock, the session registry ...), never
  the Service; ``report`` is ``report.py``'s.
- Reads run after the dispatcher's bounded wait for the derivation backlog (``dispatch.py``), so they
  see every acknowledged event, except while derivation is stalled on a storage fault.
- A recall's search runs in the readers' search lane, within its budget; past it the client gets
  ``query_too_broad``. Every ``#id`` a text names resolves with ``ctxlifectl recall --id N``.
- ``forget`` also drops the forgotten sessions from memory and truncates the WAL: nothing of them is
  left on disk or in the daemon.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import msgspec

from .. import PROTOCOL_VERSION, __version__
from ..core import lessons as lesson_rules
from ..core import matrix as matrix_rules
from ..core import pending as pending_rules
from ..core import phase as phases
from ..core import render
from ..core import summarize
from ..core.model import estimate_tokens
from ..core.recall_query import RecallQueryError, parse_recall
from ..protocol import _errors as errors
from ..protocol import _methods as methods
from ..runtime.config import Config
from ..runtime.ctl import ctl_command
from ..runtime.paths import Paths
from ..store import backlog as index_backlog
from ..store import hook_writes, ops, queries, session_reads
from ..store.db import QueryTooBroadError, Readers, Writer
from . import compaction, compress, cost, files
from . import lessons as lessons_svc
from . import residency as residency_svc
from .advice import advice_for
from .derive import Backlog
from .ledger import LedgerWriter
from .sessions import SessionRegistry, session_row
from .state import SessionState, load

Budgeter = Callable[[SessionState], Any]  # the session's Budget, or None before usage figures


def _project_of(p: Any) -> str | None:
    """The project a read names: ``all_projects`` none, else ``project``, else the one holding ``cwd``."""
    return None if p.all_projects else (p.project or (files.project_root(p.cwd) if p.cwd else None))


# -- status ------------------------------------------------------------------------------------
def session_view(row: dict[str, Any], *, live: Mapping[str, SessionState], budget_of: Budgeter, cfg: Config,
                 matrix: matrix_rules.Matrix, where: bool = False, survival: bool = False) -> methods.SessionView:
    """One session as ``status`` shows it: from memory when it is live, else from its stored state."""
    session = live.get(row["session"]) or load(row["state"])
    v = methods.SessionView(session=row["session"], project=row["project"], events=row["events"],
                            first_ts=row["first_ts"], last_ts=row["last_ts"], phase=row["phase"],
                            phase_since=row["phase_since"], model=row["model"], ended=row["ended_ts"] is not None)
    if session is None:
        return v
    v.phase, v.phase_since, v.model = session.phase.phase, session.phase.since, session.model
    b = budget_of(session)
    if b is not None:
        v.window, v.context_tokens, v.estimated = b.window, b.context_tokens, b.estimated
        v.zones = [methods.ZoneView(name=z.name, capacity=z.capacity, used=z.used, pct=round(z.pct, 4))
                   for z in b.zones]
        v.working_pct, v.level = round(b.working_pct, 4), int(b.level)
        v.autocompact_at, v.tokens_to_autocompact = b.autocompact_at, b.tokens_to_autocompact
    v.advice = advice_for(session, b, matrix, reason=cost.compact_reason(session, b, cfg))
    v.cost = cost.view(session, b, cfg)
    v.autocompact_env = cost.overrides(session)
    v.compression = compress.view(session.compressed)
    if where:
        v.where = compaction.where(session)
    if survival:
        v.survival = compaction.survival(session)
    return v


@dataclass(frozen=True)
class DaemonState:
    """What ``status`` reports of the daemon itself and reads its sessions with."""

    paths: Paths
    started: float  # time.monotonic() at start
    spool_ingested: int
    backlog: Backlog
    live: Mapping[str, SessionState]
    budget_of: Budgeter
    cfg: Config
    matrix: matrix_rules.Matrix
    side_work: int = 0  # side jobs (L3 Markdown files) started after a reply, not finished
    read_ahead: tuple[int, int, int] = (0, 0, 0)  # persisted outputs read ahead, used, missed (readahead.py)


async def status(p: methods.StatusParams, *, readers: Readers, writer: Writer,
                 daemon: DaemonState) -> methods.StatusResult:
    """The daemon, its store and backlogs, and the sessions asked for (the first one in full)."""
    paths, backlog = daemon.paths, daemon.backlog
    project = files.project_root(p.cwd) if p.cwd and not p.project else p.project
    rows = await readers.run(partial(queries.sessions, project=project, session=p.session,
                                     limit=max(1, min(p.limit, 200))))
    counts = await readers.run(queries.stats)
    db = paths.db

    def view(row: dict[str, Any]) -> methods.SessionView:
        return session_view(row, live=daemon.live, budget_of=daemon.budget_of, cfg=daemon.cfg, matrix=daemon.matrix,
                            where=p.where, survival=p.survival)

    return methods.StatusResult(
        version=__version__, protocol=PROTOCOL_VERSION, pid=os.getpid(),
        uptime_s=round(time.monotonic() - daemon.started, 3), socket=paths.socket, db_path=db,
        db_bytes=_size(db), wal_bytes=_size(db + "-wal"), archive_items=counts["archive_items"],
        events=counts["events"], spool_ingested=daemon.spool_ingested, fts_trigram=writer.trigram,
        derive_pending=backlog.pending(), index_pending=await readers.run(index_backlog.pending),
        derive_failed=backlog.failed, side_work_pending=daemon.side_work, maintenance_failed=writer.idle_failures,
        maintenance_error=writer.last_idle_error if writer.idle_failures else "",
        read_ahead_made=daemon.read_ahead[0], read_ahead_used=daemon.read_ahead[1],
        read_ahead_missed=daemon.read_ahead[2],
        # the residency block and compact instructions: the first (current) session only (they read files)
        sessions=[await _session_view_full(view(r), r, p, readers=readers, daemon=daemon) if i == 0 else view(r)
                  for i, r in enumerate(rows)],
    )


async def _session_view_full(v: methods.SessionView, row: dict[str, Any], p: methods.StatusParams, *,
                             readers: Readers, daemon: DaemonState) -> methods.SessionView:
    session = (daemon.live.get(row["session"]) or load(row["state"])
               if (p.residency or p.compact_instructions) else None)
    if session is not None and p.residency:
        v.residency = residency_svc.view(await residency_svc.report(
            session, budget=daemon.budget_of, transcript_roots=daemon.cfg.allowed_transcript_roots))
    if session is not None and p.compact_instructions:
        v.compact_instructions = await residency_svc.compact_section(readers, session)
    return v


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


# -- recall ------------------------------------------------------------------------------------
async def recall(p: methods.RecallParams, *, readers: Readers, trigram: bool,
                 clock: Callable[[], float]) -> methods.RecallResult:
    """One archived item by id, the phase timeline, the decisions, or a ranked search."""
    if p.id is not None:
        item = await readers.run(partial(queries.get_archive, aid=p.id))
        if item is None:
            raise errors.NotFound(f"no archived item with id {p.id}")
        md = (f"# #{item['id']} · {item['kind']}" + (f" · {item['phase']}" if item["phase"] else "")
              + f" · session {item['session'][:8]}\n\n{item['text']}")
        return methods.RecallResult(markdown=md, total=1, text=item["text"], hits=[_hit_view(item)])
    try:
        q = parse_recall(p.query)
    except RecallQueryError as exc:
        raise errors.BadQuery(str(exc)) from None
    project = None if q.all_projects else _project_of(p)
    session = p.session or q.session
    if q.id is not None:
        return await recall(methods.RecallParams(id=q.id), readers=readers, trigram=trigram, clock=clock)
    if q.timeline:
        spans = await readers.run(lambda c: session_reads.timeline(c, project=project, session=session,
                                                                   current=session or session_reads.LATEST))
        return methods.RecallResult(markdown=render.render_timeline(spans, clock()), total=len(spans))
    if q.decisions and not q.words and not q.phrases:
        rows = await readers.run(partial(queries.items, project=project, kind="decision", status=None,
                                         session=session, limit=200))
        md = render.render_decisions([(r["archive_id"] or r["id"], r["ts"], r["text"]) for r in rows], p.cap_tokens,
                                     ctl=ctl_command())
        return methods.RecallResult(markdown=md, total=len(rows))
    kinds: tuple[str, ...] | None = None
    if q.decisions:
        kinds = ("decision",)
    elif q.lessons:
        kinds = ("lesson",)
    elif q.kind:
        kinds = (q.kind,)
    try:
        hits, total = await readers.search(partial(
            queries.search, words=q.words, phrases=q.phrases, project=project, session=session, phase=q.phase,
            kinds=kinds, limit=p.limit, trigram=trigram))
    except QueryTooBroadError as exc:
        raise errors.QueryTooBroad(f"query too broad: {exc}; narrow it (fewer or more specific words, a project,"
                                   " a session, a phase: or type: filter)",
                                   data={"reason": exc.reason, "limit": exc.limit}) from None
    capped = total >= queries.TOTAL_CAP
    terms = [*q.words, *q.phrases]
    views = []
    rendered = []
    for h in hits:
        snip = summarize.snippet(h.get("window", ""), terms) if terms else ""
        views.append(methods.RecallHitView(id=h["id"], session=h["session"], project=h["project"], ts=h["ts"],
                                           kind=h["kind"], phase=h["phase"], tool=h["tool"], summary=h["summary"],
                                           snippet=snip, score=round(float(h["score"]), 3),
                                           superseded_by=h.get("superseded_by")))
        rendered.append(render.RecallHit(id=h["id"], session=h["session"], project=h["project"], ts=h["ts"],
                                         kind=h["kind"], phase=h["phase"], tool=h["tool"], summary=h["summary"],
                                         snippet=snip, score=float(h["score"])))
    page = None
    if q.phase and not terms and kinds is None:
        # phase:<p> asks what that phase handed off: its page first, then the archive rows.
        page = await readers.run(partial(queries.phase_page, project=project, session=session, phase=q.phase))
    if page is not None:
        head = render.render_phase_page(page["id"], page["path"], page["text"], cap_tokens=p.cap_tokens // 2,
                                        ctl=ctl_command())
        rest = render.render_recall(rendered, p.query, cap_tokens=p.cap_tokens - estimate_tokens(head) - 2,
                                    total=total, ctl=ctl_command(), total_capped=capped) if rendered else ""
        md = "\n\n".join(x for x in (head, rest) if x)
        views.insert(0, _hit_view({"id": page["id"], "session": page["session"] or "", "project": page["project"],
                                   "ts": page["ts"], "kind": "ledger", "phase": q.phase, "tool": None,
                                   "summary": page["path"]}))
        return methods.RecallResult(markdown=md, total=total + 1, total_capped=capped, hits=views, project=project)
    md = render.render_recall(rendered, p.query, cap_tokens=p.cap_tokens, total=total, ctl=ctl_command(),
                              total_capped=capped)
    return methods.RecallResult(markdown=md, total=total, total_capped=capped, hits=views, project=project)


def _hit_view(item: dict[str, Any]) -> methods.RecallHitView:
    return methods.RecallHitView(id=item["id"], session=item["session"], project=item["project"], ts=item["ts"],
                                 kind=item["kind"], phase=item["phase"], tool=item["tool"], summary=item["summary"])


# -- pending -----------------------------------------------------------------------------------
async def pending(p: methods.PendingParams, *, readers: Readers, writer: Writer, clock: Callable[[], float],
                  is_stale: Callable[[dict[str, Any]], bool]) -> methods.PendingResult:
    """``ctxlifectl pending``: the project's pending items (current, stale; closed with ``all``), or
    close one (``resolve``: the ``#N`` it is shown with)."""
    project = _project_of(p)
    resolved = None
    if p.resolve is not None:
        got = await writer.run(partial(ops.resolve_pending_ref, ref=p.resolve, project=project, ts=clock()))
        if got is None:
            raise errors.NotFound(f"no pending item #{p.resolve}" + (f" in project {project}" if project else ""))
        resolved = p.resolve
    rows = await readers.run(partial(queries.pending_items, project=project, session=p.session,
                                     status=None if p.all else "open", limit=max(1, min(p.limit, 500))))
    views = [methods.PendingView(id=r["ref"], text=r["text"], session=r["session"], project=r["project"],
                                 ts=r["ts"], phase=r["phase"], status=r["status"], resolution=r["resolution"],
                                 stale=r["status"] == "open" and is_stale(r)) for r in rows]
    return methods.PendingResult(markdown=pending_rules.render_pending_list(views, ctl=ctl_command(), resolved=resolved),
                                 items=views, resolved=resolved)


# -- lessons, compactions, report (their modules do the work) ------------------------------------
async def lessons(p: methods.LessonsParams, *, lessons: lessons_svc.Lessons) -> methods.LessonsResult:
    found = await lessons.listing(project=_project_of(p), limit=max(1, min(p.limit, 500)))
    return methods.LessonsResult(markdown=lesson_rules.render_lessons_md(found) if found else "No lessons recorded yet.",
                                 lessons=[msgspec.to_builtins(x) for x in found])


async def compactions(p: methods.CompactionsParams, *, readers: Readers) -> methods.CompactionsResult:
    project = files.project_root(p.cwd) if p.cwd and not p.project and not p.session else p.project
    reps = await compaction.reports(readers, session=p.session, project=project, limit=max(1, min(p.limit, 200)))
    return methods.CompactionsResult(markdown=compaction.render(reps), reports=reps)


# -- memory prune ------------------------------------------------------------------------------
async def memory_prune(p: methods.MemoryPruneParams, *, ledgers: LedgerWriter,
                       keep_sessions: int) -> methods.MemoryPruneResult:
    """Roll old session folders of ``docs/memory/`` up into history.md (``keep_sessions`` by default)."""
    project = p.project or (files.project_root(p.cwd) if p.cwd else None)
    if not project:
        raise errors.InvalidParams("give project or cwd")
    keep = keep_sessions if p.keep is None else p.keep
    if keep < 0:
        raise errors.InvalidParams("keep must not be negative")
    r = await ledgers.prune(project, keep, dry_run=p.dry_run)
    return methods.MemoryPruneResult(
        project=project, rolled_up=r["rolled_up"], sessions=r["sessions"], history=r["history"],
        reason=r["reason"], kept=[methods.MemoryKeptView(path=k["path"], why=k["why"]) for k in r["kept"]],
        markdown=_prune_markdown(r, keep, p.dry_run))


def _prune_markdown(r: dict[str, Any], keep: int, dry_run: bool) -> str:
    """What ``memory prune`` did (or would do), for humans."""
    if r["reason"]:
        return f"Nothing pruned: {r['reason']}."
    verb = "would roll up" if dry_run else "rolled up"
    lines = [f"Kept the {keep} newest session folder{'' if keep == 1 else 's'}; {verb} {len(r['rolled_up'])}"
             f" page{'' if len(r['rolled_up']) == 1 else 's'} of {len(r['sessions'])} older"
             f" session{'' if len(r['sessions']) == 1 else 's'}"
             + (f" into {r['history']}." if r["history"] else ".")]
    for k in r["kept"]:
        lines.append(f"- kept {k['path']}: {k['why']}")
    return "\n".join(lines)


# -- phase.set, forget -------------------------------------------------------------------------
async def phase_set(p: methods.PhaseSetParams, *, registry: SessionRegistry, readers: Readers, writer: Writer,
                    clock: Callable[[], float], ledgers: LedgerWriter,
                    spawn: Callable[..., None]) -> methods.PhaseSetResult:
    """Set a session's phase by hand (the project's latest session by default); a switch is stored
    with the session state, and the ended phase's ledger page is written after the reply."""
    canonical = phases.parse_phase(p.phase)
    if canonical is None:
        raise errors.InvalidParams(f"unknown phase {p.phase!r}; one of planning, design, implementation, testing, review")
    sid = p.session
    if sid is None:
        project = files.project_root(p.cwd) if p.cwd else None
        rows = await readers.run(partial(queries.sessions, project=project, limit=1))
        if not rows:
            raise errors.NotFound("no session known for this project yet; pass --session")
        sid = rows[0]["session"]
    rows = await readers.run(partial(queries.sessions, session=sid, limit=1))
    if not rows and sid not in registry.sessions:
        raise errors.NotFound(f"unknown session {sid}")
    now = clock()
    async with registry.lock(sid):
        session = await registry.state(sid, rows[0]["project"] if rows else "", "", now)
        old = session.phase.phase
        try:
            session.phase, switch = phases.set_phase(session.phase, p.phase, now, cause="manual")
        except ValueError as exc:
            raise errors.InvalidParams(str(exc)) from None
        if switch is not None:
            n, started = session.phase_index, session.phase_started
            session.phase_index += 1
            session.phase_started = now
            await writer.run(partial(hook_writes.store_switch_and_state, session_row(session), switch))
            spawn(ledgers.write_phase, session.session, session.project, n, old, started, now, "manual phase switch")
    return methods.PhaseSetResult(session=sid, phase=session.phase.phase, changed=switch is not None)


async def forget(p: methods.ForgetParams, *, registry: SessionRegistry, writer: Writer, ledgers: LedgerWriter,
                 guarded: Callable[..., Awaitable[Any]]) -> methods.ForgetResult:
    """Delete events and archive rows by id, session or project, and their decisions from decisions.md."""
    if p.id is None and p.session is None and p.project is None:
        raise errors.InvalidParams("forget needs one of id, session, project")
    events, archived, texts = await writer.run(partial(ops.forget, id=p.id, session=p.session, project=p.project))
    if texts:
        await guarded(ledgers.forget_decisions, texts)
    if p.session:
        registry.drop(p.session)
    if p.project:
        registry.drop_project(p.project)
    await writer.checkpoint("TRUNCATE")
    return methods.ForgetResult(events=events, archive=archived)
