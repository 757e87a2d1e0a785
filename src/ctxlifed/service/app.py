"""The Service: the hook path (acknowledge, derive, answer) and the wiring of the modules it runs.

Where each concern lives:
- ``dispatch.py``: method -> handler (one table); ``reads.py``: the read methods, ``phase.set``, ``forget``.
- ``sessions.py``: the live sessions (LRU, locks, snapshot/restore); ``pipeline.py``: the hook pipeline's
  named steps; ``transcript_reader.py``: the transcript's new lines; ``briefing.py``: SessionStart;
  ``advice.py``: advice; ``spool.py``: the shim's spool; ``store/hook_writes.py``,
  ``store/session_reads.py``: their SQL.

Rules:
- A hook answer is computed from what is already in memory and the store: no network, no model.
- Order for every hook event: redact -> ONE writer job that stores the raw (redacted) event ->
  reply. The reply is sent only after COMMIT, so an acknowledged event is durable. Deriving it
  (pure core, then ONE writer job for its archive text, facts, phase switches and the session
  state) follows after the reply (``derive.py``: write-behind), except for the events whose answer
  depends on it (SessionStart, PreCompact, PostCompact, ...), derived inline before answering.
  A PostToolUse whose output is replaced by its digest (live compression, ``compress.py``) stores
  the full original's archive row in that same writer job, so the id the digest names exists when
  the reply is sent; a storage fault on it falls back to the event alone (the output is kept).
- A payload of any shape is accepted: missing or mistyped fields give an empty answer, never an
  error, and the raw event is stored anyway (``session`` falls back to ``_invalid``).
- Replays are idempotent: a request id already stored (spooled, then delivered late) is answered
  without storing anything again.
- A failed inline derivation puts the session back as it was (nothing was acknowledged); a failed
  deferred one too, and is retried on a storage fault, skipped (logged, counted) otherwise.
- Slow side work (L3 Markdown files) runs after the reply, in the background, and is re-derivable
  from the store.
- Texts for the model name ctxlifectl as ``runtime.ctl.ctl_command()`` (passed to the pure renderers);
  their figures come from the same Budget that ``status`` reports.
- The category matrix in use (``Service.matrix``: the default of ``core/matrix.py`` with the config's
  overrides) ranks compression, sizes the must-survive set and writes the ``/compact`` focus line.
- Reads wait for the derivation backlog (bounded; recall not for a burst's: ``scheduler.py``), except
  while it is stalled on a storage fault:
  then they answer at once from what is stored.
- Pending items close on the evidence of the event that brings it (core/pending.py), in that event's
  writer job; only open items that are not stale are injected (SessionStart, the /compact focus line,
  the must-survive set). TodoWrite's open todos are pending items.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import anyio
import anyio.to_thread
import msgspec
import structlog

from .. import PROTOCOL_VERSION, __version__
from ..core import accounting
from ..core import budget as budgets
from ..core import classify, figures, summarize
from ..core import lessons as lesson_rules
from ..core import matrix as matrix_rules
from ..core import pending as pending_rules
from ..core import transcript
from ..core.events import elements_from_event
from ..core.hook_events import (
    HookEvent,
    InstructionsLoaded,
    PostCompact,
    PostToolUse,
    PostToolUseFailure,
    PreToolUse,
    SessionStart,
    UnknownHook,
    UserPromptSubmit,
    decode_hook_json,
)
from ..core.model import Element, Kind, Level, estimate_tokens
from ..protocol import _methods as methods
from ..runtime.config import Config
from ..runtime.ctl import ctl_command
from ..runtime.paths import Paths
from ..scheduler import Scheduler
from ..store import hook_writes, ops, outputs, session_reads
from ..store.db import Readers, StorageFullError, Writer
from . import compaction, compress, cost
from . import derive as derivation
from . import lessons as lessons_svc
from . import report as report_svc
from . import residency as residency_svc
from . import wrap
from .advice import Adviser, near_autocompact, with_reason
from . import briefing, pipeline, reads, spool
from .dispatch import Route, dispatch as dispatch_request
from .readahead import ReadAhead, Reads
from .ledger import LedgerWriter
from .sessions import SessionRegistry, session_row
from .state import SessionState, dump
from .transcript_reader import TranscriptReader

log = structlog.get_logger("ctxlifed.service")

# Events whose JSON answer may carry hookSpecificOutput.additionalContext (spec §1.1 "ctx").
CTX_EVENTS = frozenset({
    "SessionStart", "Setup", "SubagentStart", "UserPromptSubmit", "UserPromptExpansion", "PreToolUse",
    "PostToolUse", "PostToolUseFailure", "PostToolBatch", "Stop", "SubagentStop", "PostModelSwitch",
})
# Events that show a top-level systemMessage to the user (others discard it, spec §2.3).
MSG_EVENTS = frozenset({"UserPromptSubmit", "PostToolUse", "PostToolUseFailure", "Stop", "SessionStart"})
TRANSCRIPT_KINDS = frozenset({Kind.ASSISTANT, Kind.THINKING, Kind.TOOL, Kind.CODE_CHANGE, Kind.ERROR, Kind.TEST_RESULT})
_enc = msgspec.json.Encoder()


class Service:
    def __init__(self, cfg: Config, paths: Paths, writer: Writer, readers: Readers, *,
                 clock: Callable[[], float] = time.time, started: float | None = None,
                 scheduler: Scheduler | None = None) -> None:
        self.cfg = cfg
        self.paths = paths
        self.writer = writer
        self.readers = readers
        self.clock = clock
        self.started = started if started is not None else time.monotonic()
        self.scheduler = scheduler if scheduler is not None else Scheduler()
        self.backlog = derivation.Backlog(self.scheduler)
        self.registry = SessionRegistry(readers, self.backlog.pending)
        self.sessions = self.registry.sessions  # the same mapping: session id -> SessionState
        self.lessons = lessons_svc.Lessons(readers, writer, clock,
                                           on_stored=lambda project: self.spawn(self.ledgers.write_lessons, project))
        self.ledgers = LedgerWriter(writer, readers, config=lambda: self.cfg, clock=clock)
        self.adviser = Adviser(readers, lambda: self.matrix, self.is_stale)
        self.readahead = ReadAhead(Reads(
            roots=lambda: self.cfg.allowed_transcript_roots(), settings=lambda p: compress.settings_for(self.cfg, p),
            edited_paths=lambda sid: st.files_touched if (st := self.sessions.get(sid)) is not None else (),
            redacts=lambda: self.cfg.redact, max_bytes=compress.MAX_PERSISTED_BYTES))
        self.transcripts = TranscriptReader(lambda: self.cfg, self.registry.hook_delivered,
                                            lambda st, post_tokens: compaction.boundary_seen(self.writer, st, post_tokens))
        self.spool_ingested = 0
        self.stop_requested = anyio.Event()
        self._stalled_at = -1  # ``writer.commits`` when a derivation last failed on a storage fault
        self._derive_failed_again = anyio.Event()  # set at each such failure: reads stop waiting
        self._tg: anyio.abc.TaskGroup | None = None
        self.side_work = 0  # side jobs (L3 files) started after a reply and not finished

    # -- plumbing ------------------------------------------------------------------------------
    def bind(self, tg: anyio.abc.TaskGroup, *, derive: bool = True) -> None:
        """Run background work in ``tg``; ``derive=False`` leaves the backlog alone (tests start it)."""
        self._tg = tg
        if derive:
            self.start_deriver()

    def start_deriver(self) -> None:
        assert self._tg is not None
        self._tg.start_soon(self.backlog.run, self._derive)

    async def guarded(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Side work awaited in the request (ordering matters) that must still never fail it."""
        try:
            return await fn(*args)
        except Exception:  # noqa: BLE001
            log.exception("side_work_failed", job=getattr(fn, "__name__", "?"))
            return None

    def spawn(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run side work after the reply; it must never fail the request. ``side_work`` counts the
        jobs started and not finished (``status`` reports it: a client can wait for it to reach 0)."""
        async def guarded() -> None:
            try:
                await fn(*args)
            except Exception:  # noqa: BLE001
                log.exception("background_failed", job=getattr(fn, "__name__", "?"))
            finally:
                self.side_work -= 1

        if self._tg is not None:
            self.side_work += 1
            self._tg.start_soon(guarded)

    @property
    def ratios(self) -> budgets.ZoneRatios:
        z = self.cfg.zones
        return budgets.ZoneRatios(system=z[0], ledger=z[1], working=z[2], buffer=z[3])

    @property
    def thresholds(self) -> budgets.Thresholds:
        t = self.cfg.thresholds
        return budgets.Thresholds(l1=t[0], l2=t[1], l3=t[2])

    async def dispatch(self, method: str, params: bytes, rid: Any = None) -> Any:
        """Answer one request: the route of ``ROUTES`` for ``method``."""
        return await dispatch_request(ROUTES, self, method, params, rid, wait_derived=self.wait_derived,
                                      read_wait=lambda m: self.scheduler.read_wait_s(m, self.backlog.pending()),
                                      hook_began=self.scheduler.hook_began)

    async def recall(self, p: methods.RecallParams) -> methods.RecallResult:
        """``recall`` without the wait for the backlog (tests and in-process callers)."""
        return await reads.recall(p, readers=self.readers, trigram=self.writer.trigram, clock=self.clock)

    @property
    def derive_stalled(self) -> bool:
        """The last derivation failed on a storage fault and nothing was written since."""
        return self._stalled_at == self.writer.commits

    async def wait_derived(self, timeout: float | None) -> None:
        """Wait for the derivation backlog (at most ``timeout``), but not on a derivation stalled by
        a storage fault (a full or unwritable store), which cannot progress: while it is stalled the
        read answers at once from what is stored (status reports what is still pending), and a wait
        in progress ends at the deriver's next failed attempt."""
        if not self.backlog.pending() or self.derive_stalled or timeout == 0:
            return
        failed = self._derive_failed_again
        async with anyio.create_task_group() as tg:
            async def stop_on_failure() -> None:
                await failed.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(stop_on_failure)
            await self.backlog.wait(None, timeout)
            tg.cancel_scope.cancel()

    def _note_derive_fault(self, fault: bool) -> None:
        if fault:
            self._stalled_at = self.writer.commits
            failed, self._derive_failed_again = self._derive_failed_again, anyio.Event()
            failed.set()
        else:
            self._stalled_at = -1

    # -- sessions ------------------------------------------------------------------------------
    # -- hook ----------------------------------------------------------------------------------
    async def hook(self, payload: dict[str, Any], *, rid: str | None = None, source: str = "hook",
                   ts: float | None = None) -> methods.HookResult:
        incoming = pipeline.decode(payload, now=ts if ts is not None else self.clock(), redact=self.cfg.redact,
                                   source=source, rid=rid)
        hook, event, sid, project, cwd, now, row = (incoming.hook, incoming.event, incoming.sid,
                                                    incoming.project, incoming.cwd, incoming.now, incoming.row)
        if not sid:
            await self.writer.run(partial(hook_writes.store_event_only, row))
            return methods.HookResult()
        async with self.registry.ack_lock(sid):
            st = self.registry.touch(sid)
            if source == "hook":  # a live session: watch the folder its large outputs land in (readahead.py)
                if event == "SessionEnd":
                    self.readahead.disarm(sid)
                elif st is not None:
                    self.readahead.arm(session=sid, project=project, transcript_path=st.transcript_path)
            if st is not None and event in derivation.DEFERRABLE:
                await self.backlog.room()  # backpressure: a full backlog slows answers to its pace
                return await self._acknowledge(incoming, st)
            # Inline: what this event's answer depends on must be derived first, in order.
            await self.backlog.wait(sid)
            async with self.registry.lock(sid):
                snapshot = self.registry.snapshot(sid)
                try:
                    return await self._hook_locked(hook, event, sid, project, cwd, now, row)
                except BaseException:
                    # Nothing was acknowledged: put the session back as it was, so a retry (from the
                    # spool) re-reads the same transcript bytes and re-derives the same state.
                    self.registry.restore(sid, snapshot)
                    raise

    async def _acknowledge(self, incoming: pipeline.Incoming, st: SessionState) -> methods.HookResult:
        """The write-behind path: commit the event (pending), answer from memory, queue the rest."""
        hook, event, project, cwd, now, row = (incoming.hook, incoming.event, incoming.project, incoming.cwd,
                                               incoming.now, incoming.row)
        # Alone, the commit runs inline (no thread hops); among concurrent requests it joins the
        # writer thread's group commit, which runs next to the event loop instead of on it.
        pending = None
        if isinstance(hook, PostToolUse) and row.source == "hook":
            pending = await compress.prepare_event(self.cfg, hook, project=project, level=st.level,
                                                   phase=st.phase.phase, edited_paths=st.files_touched,
                                                   transcript_path=st.transcript_path, session=st.session,
                                                   ahead=self.readahead.take)
        if pending is None:
            eid, aid = await self.writer.run(partial(hook_writes.store_ack, row), inline=self.scheduler.alone()), 0
        else:  # the event and the full original's archive row in one commit: the digest names that id
            try:
                eid, aid = await self.writer.run(partial(outputs.store_ack, row, pending.row), inline=self.scheduler.alone())
            except StorageFullError:  # no room for the original: acknowledge the event alone, keep the output
                pending = None
                eid, aid = await self.writer.run(partial(hook_writes.store_ack, row), inline=self.scheduler.alone()), 0
        if not eid:  # a replay of an event already stored
            return methods.HookResult()
        tool_id = hook.tool_use_id if isinstance(hook, (PostToolUse, PostToolUseFailure)) else ""
        if tool_id:
            # Now, not at derivation: a derivation still queued may read this tool's result in the
            # transcript, and must know a hook delivered it.
            self.registry.note_hook_tool(st.session, tool_id)
        lesson = None
        hint = ""
        if event in ("PostToolUse", "PostToolUseFailure") and await self.lessons.may_hint(project):
            lesson = lesson_rules.classify_hook(hook if pending is None or not isinstance(hook, PostToolUse)
                                                else compress.full_event(hook, pending), event_id=eid, ts=now)
            hint = await self.lessons.hint_for(st, lesson)
        replaced = None
        if pending is not None and aid:
            replaced = await compress.finish(pending, aid, ctl=ctl_command(),
                                             max_dir_bytes=self.cfg.compress_files_mb << 20)
            if replaced is not None:
                st.note_compressed(replaced.kind, replaced.original_tokens, replaced.digest_tokens)
                cost.note_live_compression(st, max(0, replaced.original_tokens - replaced.digest_tokens), self.cfg)
        elif isinstance(hook, PostToolUseFailure):
            hint = "\n\n".join(x for x in (hint, compress.failure_note(hook)) if x)
        answer = await self._answer(event, hook, st, now, extra_ctx=hint,
                                    replace=replaced.fields if replaced is not None else None)
        self.backlog.put(derivation.Job(eid=eid, sid=st.session, project=project, cwd=cwd, event=event, ts=now,
                                hook=hook, lesson=lesson))
        return answer

    async def _derive(self, job: derivation.Job) -> None:
        """Derive one acknowledged event (the deriver task; see derive.py)."""
        hook = job.hook
        if hook is None:
            raw = await self.readers.run(partial(session_reads.pending_payload, job.eid))
            if raw is None:
                return  # forgotten, or derived already
            hook = decode_hook_json(raw)
        async with self.registry.lock(job.sid):
            snapshot = self.registry.snapshot(job.sid)
            try:
                await self._hook_locked(hook, job.event, job.sid, job.project, job.cwd, job.ts, None,
                                        eid=job.eid, lesson=job.lesson)
            except StorageFullError:  # full or unwritable (StorageUnavailableError)
                self.registry.restore(job.sid, snapshot)
                self._note_derive_fault(True)
                raise  # kept: retried
            except Exception:  # noqa: BLE001 - one bad event must not wedge the backlog
                self.registry.restore(job.sid, snapshot)
                log.exception("derive_failed", event_id=job.eid, hook_event=job.event)
                self.backlog.failed += 1
                await self.writer.run(partial(ops.finish_pending, eid=job.eid), low=True)
            self._note_derive_fault(False)

    async def recover(self) -> int:
        """Queue the events acknowledged but not derived before the last stop (crash, kill)."""
        rows = await self.readers.run(session_reads.pending_rows)
        for eid, sid, project, cwd, event, ts in rows:
            self.backlog.put(derivation.Job(eid=eid, sid=sid, project=project, cwd=cwd, event=event, ts=ts, hook=None))
        if rows:
            log.info("derive_recovering", events=len(rows))
        return len(rows)

    async def _hook_locked(self, hook: HookEvent | UnknownHook, event: str, sid: str, project: str, cwd: str,
                           now: float, row: ops.EventRow | None, *, eid: int | None = None,
                           lesson: Any = None) -> methods.HookResult:
        """Derive one event and store it (with the raw event when ``row``; else the event ``eid`` was
        acknowledged before: clear its pending mark), then answer (inline only). The steps are named in
        ``pipeline.py``."""
        deferred = eid is not None
        pause = self.backlog.pause if deferred else _no_pause
        st = await self.registry.state(sid, project, cwd, now)
        elements = self._elements_step(st, hook, now)
        switch = pipeline.observe_phase(st, hook, now)
        tdelta = await self._transcript_step(st, event, hook, elements, now, deferred=deferred, pause=pause)
        found = pipeline.findings(st, hook, elements, now)
        edge = pipeline.boundary(st, self._budget(st), switch, bool(tdelta and tdelta.boundaries), event, now)
        stored, saved = await self._store_step(st, row, eid, now, elements, found, edge, switch,
                                               deferred=deferred, pause=pause)
        if stored is None:  # a replay of an event already stored (or forgotten before its derivation)
            return methods.HookResult()
        await self._after_commit(st, event, hook, edge, found.went_green, switch, now)
        hint = await self._lessons_step(st, hook, stored, lesson, now, deferred=deferred, pause=pause)
        answer = methods.HookResult() if deferred else await self._answer(event, hook, st, now, extra_ctx=hint)
        final = dump(st)
        if final != saved:  # only when the answer or side work changed the session (rare per tool call)
            await self.writer.run(partial(hook_writes.save_state, session_row(st, final)), low=deferred)
        return answer

    def _elements_step(self, st: SessionState, hook: HookEvent | UnknownHook, now: float) -> list[Element]:
        """The hook's own elements; the advice signals they carry (main chain only); a tool result a
        hook delivered (its transcript copy is then only counted)."""
        elements = [pipeline.enrich(e) for e in
                    elements_from_event(hook, ts=now, max_chars=self.cfg.archive_max_chars)]
        if not hook.agent_id:
            self.adviser.note_signals(st, hook, elements, now)
        if isinstance(hook, (PostToolUse, PostToolUseFailure)) and hook.tool_use_id:
            self.registry.note_hook_tool(st.session, hook.tool_use_id)
        return elements

    async def _transcript_step(self, st: SessionState, event: str, hook: HookEvent | UnknownHook,
                               elements: list[Element],
                               now: float, *, deferred: bool,
                               pause: Callable[[], Awaitable[None]]) -> transcript.TranscriptDelta | None:
        """The transcript's new lines (usage, model, boundaries, assistant text) and what the event itself
        says of them; the transcript's elements join ``elements``."""
        tpath = hook.transcript_path
        if tpath and not hook.agent_id:
            st.transcript_path = tpath
        await pause()
        tdelta = (await self.transcripts.read(st, behind=self.backlog.pending(st.session) - 1 if deferred else 0,
                                              pause=pause)
                  if derivation.read_before_answer(event, deferred=deferred, transcript=st.transcript_path,
                                                   offset=st.cursor.offset, roots=self.cfg.allowed_transcript_roots)
                  else None)
        await pause()
        if isinstance(hook, SessionStart):
            if hook.context_tokens is not None and st.context_from_boundary:
                # Right after a compaction Claude Code's figure is the boundary's: the compacted
                # messages only; the window also holds the system prompt and tools (transcript_reader).
                st.context_tokens, st.estimated = hook.context_tokens + (st.system_tokens or 0), True
            elif hook.context_tokens is not None:
                st.context_tokens, st.estimated = hook.context_tokens, False
            if hook.model:
                st.model = hook.model
            cost.note_session_start(st, hook)
        cost.note_overrides(st, hook.ctxlifed_env, event)
        if isinstance(hook, InstructionsLoaded):
            compaction.note_instructions(st, hook, now)
        if tdelta is not None:
            for el in tdelta.elements:
                if el.kind in TRANSCRIPT_KINDS and el.text:  # '' = a tool result a hook delivered
                    elements.append(el)
        return tdelta

    async def _store_step(self, st: SessionState, row: ops.EventRow | None, eid: int | None, now: float,
                          elements: list[Element], found: pipeline.Findings, edge: pipeline.Boundary, switch: Any,
                          *, deferred: bool, pause: Callable[[], Awaitable[None]]) -> tuple[int | None, bytes]:
        """ONE writer job: the event (or its pending mark cleared), archive rows, facts, closed pending
        items, the phase switch, the session state. Returns the event id (None: nothing stored) and the
        state stored."""
        phase_now = edge.phase_now
        summaries = []
        for el in elements:  # a transcript slice can hold dozens: the event loop runs between them
            summaries.append(summarize.summarize(el))
            await pause()
        job = partial(hook_writes.store_hook, row=row, eid=eid, now=now, elements=elements, facts=found.facts,
                      phase=phase_now, switch=switch,
                      priority=lambda el: classify.priority(el, phase_now, self.matrix),
                      summaries=summaries, closing=found.closing)
        saved = dump(st)
        stored = await self.writer.run(partial(job, session=session_row(st, saved)), low=deferred)
        return stored, saved

    async def _after_commit(self, st: SessionState, event: str, hook: HookEvent | UnknownHook, edge: pipeline.Boundary,
                            went_green: bool, switch: Any, now: float) -> None:
        """Side work after the commit: ledgers at boundaries, compression when the level rose, advice."""
        budget, phase_now = edge.budget, edge.phase_now
        if isinstance(hook, UserPromptSubmit):
            briefing.prompt_sent(st)
        if edge.ended_phase is not None:
            # Ledger first, then the advice: a /compact at this boundary loses nothing the ledger lacks.
            n, name, started = edge.ended_phase
            written = await self.guarded(self.ledgers.write_phase, st.session, st.project, n, name, started, now,
                                         "phase switch")
            why = f"phase switch {name} → {phase_now}" + ("; ledger written" if written else "")
            await self.adviser.advise_compact(st, budget, "boundary", f"compact:phase:{st.phase_index}", why, now)
        if event == "SessionEnd":
            self.spawn(self._end_ledgers, st.session, st.project, st.phase_index, phase_now, st.phase_started, now)
        if went_green and switch is None and phase_now in ("implementation", "testing"):
            await self.adviser.advise_compact(st, budget, "boundary", f"compact:green:{now:.0f}",
                                       "tests are green again after implementation work: a clean boundary", now)
        if edge.crossed and budget is not None:
            await self._compress(st, Level(int(budget.level)), now)
            st.level = int(budget.level)
            await self.adviser.advise_compact(st, budget, "level", f"compact:level:{int(budget.level)}:{st.compactions}",
                                       f"Working zone at {figures.percent(budget.working_pct)}"
                                       f" (level {figures.level_name(budget.level)})"
                                       + with_reason(cost.compact_reason(st, budget, self.cfg)), now)
        # After the level advice: the more urgent one wins the single advice slot.
        if budget is not None and st.emergency_at != st.compactions and near_autocompact(budget):
            # Auto-compaction is close and no boundary is in sight: checkpoint now, so whatever
            # Claude Code's summary drops is still in L2/L3.
            st.emergency_at = st.compactions
            await self.guarded(self.ledgers.write_phase, st.session, st.project, st.phase_index, phase_now,
                               st.phase_started, now, "emergency checkpoint: auto-compaction is near")
            self.spawn(self.ledgers.write_decisions, st.project)
            await self.adviser.advise_compact(st, budget, "near", f"compact:near:{st.compactions}",
                                       f"auto-compaction is {figures.tokens(budget.tokens_to_autocompact)} tokens away;"
                                       " emergency ledger written", now)
        if not hook.agent_id:
            await self.adviser.advise_release(st, hook.prompt if isinstance(hook, UserPromptSubmit) else None,
                                              budget, now)
        if event == "PreCompact":
            await compaction.record_must_survive(self.readers, st, now, matrix=self.matrix, is_stale=self.is_stale)
            await self._compress(st, Level.L1_L2, now, precompact=True)
            self.spawn(self.ledgers.write_phase, st.session, st.project, st.phase_index, phase_now,
                       st.phase_started, now, "checkpoint before compaction")

    async def _lessons_step(self, st: SessionState, hook: HookEvent | UnknownHook, stored: int, lesson: Any,
                            now: float, *, deferred: bool, pause: Callable[[], Awaitable[None]]) -> str:
        """Lessons from a tool result: advanced behind (the hint went with the acknowledgement), or the
        hint for an inline answer."""
        if not isinstance(hook, (PostToolUse, PostToolUseFailure)):
            return ""
        if deferred:
            await pause()
            await self.lessons.advance(st, lesson if lesson is not None else
                                       lesson_rules.classify_hook(hook, event_id=stored, ts=now), now)
            return ""
        return await self.lessons.on_tool_event(st, hook, stored, now)

    def _budget(self, st: SessionState) -> budgets.Budget | None:
        """The session's four-zone budget (None until usage figures are known)."""
        if st.context_tokens is None:
            return None
        window = budgets.window_for_model(st.model, self.cfg.window)
        return budgets.compute_budget(window=window, context_tokens=st.context_tokens,
                                system_tokens=st.system_tokens or 0, ledger_tokens=st.ledger_tokens,
                                ratios=self.ratios, thresholds=self.thresholds, estimated=st.estimated,
                                autocompact_at=cost.autocompact_at(st, window))

    @property
    def matrix(self) -> matrix_rules.Matrix:
        """The category matrix in use: the design's default with the config's overrides."""
        return _matrix_for(self.cfg.matrix)

    def current_pending(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Open items that are not stale (core/pending.py), in the given order."""
        return [r for r in rows if r["status"] == "open" and not self.is_stale(r)]

    def is_stale(self, row: dict[str, Any]) -> bool:
        return pending_rules.is_stale(row["phases_since"], row["sessions_since"], stale_phases=self.cfg.pending_stale_phases,
                           stale_sessions=self.cfg.pending_stale_sessions)

    # -- compression ---------------------------------------------------------------------------
    async def _compress(self, st: SessionState, level: Level, now: float, *, precompact: bool = False) -> None:
        """Rank what entered since the last boundary; store L1 summaries and categories; promote at L2→L3."""
        rows = await self.readers.run(partial(session_reads.window_rows, st.session, st.boundary_archive_id))
        if not rows:
            return
        els = [_element_from_row(r) for r in rows]
        ranked = classify.rank(els, st.phase.phase, now, self.matrix,
                               superseded=classify.superseded_failures(reversed(els), pipeline.covers))
        plan = classify.plan_compression(ranked, level)
        updates = []
        for rk in ranked:
            aid = int(rk.element.uid)
            summary = summarize.summarize(rk.element, l2_id=aid)
            updates.append((aid, summary, str(rk.category), int(rk.priority)))
        promote = set(getattr(plan, "promote", ()) or ())
        await self.writer.run(partial(hook_writes.apply_compression, updates, int(level)))
        if precompact:
            # What SessionStart(compact) lists: the window's tool output that the matrix keeps or summarizes.
            held = [rk for rk in ranked if rk.element.kind in briefing.COMPACT_LISTED_KINDS and matrix_rules.listed(str(rk.category))]
            st.last_archived = [int(rk.element.uid) for rk in held[:12]]
            st.boundary_archive_id = max(int(r[0]) for r in rows)
            st.compactions += 1
        if level >= Level.L2_L3 or promote:
            self.spawn(self.ledgers.write_decisions, st.project)
            self.spawn(self.ledgers.write_phase, st.session, st.project, st.phase_index, st.phase.phase,
                       st.phase_started, now, "emergency checkpoint (Working zone at L2→L3)")

    # -- answers -------------------------------------------------------------------------------
    async def _answer(self, event: str, hook: HookEvent | UnknownHook, st: SessionState, now: float, *,
                      extra_ctx: str = "", replace: dict[str, Any] | None = None) -> methods.HookResult:
        if isinstance(hook, PostCompact):
            # Plain text: the only PostCompact output that reaches the next model request.
            text = await compaction.post_compact(self.readers, self.writer, st, hook.compact_summary, hook.trigger,
                                                 now, matrix=self.matrix, is_stale=self.is_stale)
            briefing.reinjected(st, text)
            return methods.HookResult(stdout=text)
        ctx = ""
        if isinstance(hook, SessionStart):
            source = hook.source or "startup"
            ctx = await briefing.session_start_context(
                source, st, now, readers=self.readers, cfg=self.cfg, matrix=self.matrix, budget_of=self._budget,
                is_stale=self.is_stale)
            if source == "compact":
                st.compact_injected = ctx
        ctx = "\n\n".join(x for x in (ctx, extra_ctx) if x)
        out: dict[str, Any] = {}
        if ctx and event in CTX_EVENTS:
            out["hookSpecificOutput"] = {"hookEventName": event, "additionalContext": ctx}
            st.note_injected(estimate_tokens(ctx) + 20)
            st.acc = accounting.note_injected(st.acc, ctx, now)
        if isinstance(hook, PreToolUse) and replace is None:  # the opt-in wrapper (wrap.py): allow + updatedInput
            replace = await wrap.pre_tool_use(self.cfg, hook)
        if replace:  # updatedToolOutput / updatedMCPToolOutput, next to any additionalContext
            out.setdefault("hookSpecificOutput", {"hookEventName": event}).update(replace)
        note = (await residency_svc.note(st, event, budget=self._budget,
                                         transcript_roots=self.cfg.allowed_transcript_roots)
                if self.cfg.residency_note else "")
        if (st.pending_advice or note) and event in MSG_EVENTS:
            out["systemMessage"] = "\n\n".join(x for x in (st.pending_advice, note) if x)
            if st.pending_advice:
                st.note_advised(st.pending_advice_key, st.pending_advice_kind, now)
            st.pending_advice, st.pending_advice_key, st.pending_advice_kind = None, "", ""
            st.pending_advice_urgency = 0
        if not out:
            return methods.HookResult()
        return methods.HookResult(stdout=_enc.encode(out).decode())

    async def _end_ledgers(self, session: str, project: str, n: int, phase: str, started: float, now: float) -> None:
        """SessionEnd: the last phase's page, then the roll-up of old session pages (when configured)."""
        await self.ledgers.write_phase(session, project, n, phase, started, now, "session end")
        if self.cfg.memory_keep_sessions > 0:
            await self.ledgers.prune(project, self.cfg.memory_keep_sessions)

    # -- spool ---------------------------------------------------------------------------------
    async def ingest_spool(self) -> int:
        """Ingest events the shim spooled while the daemon was away, from the data dir's spool and the
        runtime dir's fallback spool. Exactly once per request id."""
        n = 0
        for path in dict.fromkeys((self.paths.spool, self.paths.runtime_spool)):
            got, full = await spool.ingest_file(path, partial(self.hook, source="spool"))
            if full:  # storage full: the files are kept and retried later
                self.spool_ingested += got
                break
            n += got
        self.spool_ingested += n
        if n:
            log.info("spool_ingested", events=n)
        return n




@functools.lru_cache(maxsize=8)
def _matrix_for(overrides: tuple[tuple[str, str, str], ...]) -> matrix_rules.Matrix:
    return matrix_rules.with_overrides(matrix_rules.DEFAULT, overrides) if overrides else matrix_rules.DEFAULT


def _element_from_row(r: tuple) -> Element:
    """Rebuild an archived element for ranking: kind, text, and what the classifier's rules need."""
    kind = Kind(r[1]) if r[1] in Kind._value2member_map_ else Kind.TOOL
    text = r[2]
    command = text[2:text.find("\n")] if r[4] == "Bash" and text.startswith("$ ") else None
    is_error = kind is Kind.ERROR or "\n[error]\n" in text[:8192]
    passed = transcript.test_outcome(text, is_error) if kind is Kind.TEST_RESULT else None
    return Element(uid=str(r[0]), kind=kind, text=text, ts=r[3], tool=r[4], file_path=r[5],
                   command=command if command is None or "\n" not in command else command.split("\n", 1)[0],
                   is_error=is_error, passed=passed, tokens=estimate_tokens(text))


async def _no_pause() -> None:
    return None


# -- routes: what each method passes on (dispatch.py) ----------------------------------------------
async def _route_hook(svc: Service, p: Any, rid: Any) -> methods.HookResult:
    return await svc.hook(p, rid=rid if isinstance(rid, str) else None)


async def _route_ping(svc: Service, p: methods.PingParams, rid: Any) -> methods.PingResult:
    return methods.PingResult(version=__version__, pid=os.getpid(), uptime_s=round(time.monotonic() - svc.started, 3))


async def _route_hello(svc: Service, p: methods.HelloParams, rid: Any) -> methods.HelloResult:
    return methods.HelloResult(version=__version__, protocol=PROTOCOL_VERSION, pid=os.getpid(),
                               compatible=p.protocol in (0, PROTOCOL_VERSION))


async def _route_shutdown(svc: Service, p: Any, rid: Any) -> methods.ShutdownResult:
    svc.stop_requested.set()
    return methods.ShutdownResult()


async def _route_status(svc: Service, p: methods.StatusParams, rid: Any) -> methods.StatusResult:
    return await reads.status(p, readers=svc.readers, writer=svc.writer, daemon=reads.DaemonState(
        paths=svc.paths, started=svc.started, spool_ingested=svc.spool_ingested, backlog=svc.backlog,
        live=svc.sessions, budget_of=svc._budget, cfg=svc.cfg, matrix=svc.matrix, side_work=svc.side_work,
        read_ahead=(svc.readahead.made, svc.readahead.used, svc.readahead.missed)))


async def _route_recall(svc: Service, p: methods.RecallParams, rid: Any) -> methods.RecallResult:
    return await reads.recall(p, readers=svc.readers, trigram=svc.writer.trigram, clock=svc.clock)


async def _route_phase_set(svc: Service, p: methods.PhaseSetParams, rid: Any) -> methods.PhaseSetResult:
    return await reads.phase_set(p, registry=svc.registry, readers=svc.readers, writer=svc.writer, clock=svc.clock,
                                 ledgers=svc.ledgers, spawn=svc.spawn)


async def _route_forget(svc: Service, p: methods.ForgetParams, rid: Any) -> methods.ForgetResult:
    return await reads.forget(p, registry=svc.registry, writer=svc.writer, ledgers=svc.ledgers, guarded=svc.guarded)


async def _route_pending(svc: Service, p: methods.PendingParams, rid: Any) -> methods.PendingResult:
    return await reads.pending(p, readers=svc.readers, writer=svc.writer, clock=svc.clock, is_stale=svc.is_stale)


async def _route_lessons(svc: Service, p: methods.LessonsParams, rid: Any) -> methods.LessonsResult:
    return await reads.lessons(p, lessons=svc.lessons)


async def _route_memory_prune(svc: Service, p: methods.MemoryPruneParams, rid: Any) -> methods.MemoryPruneResult:
    return await reads.memory_prune(p, ledgers=svc.ledgers, keep_sessions=svc.cfg.memory_keep_sessions)


async def _route_compactions(svc: Service, p: methods.CompactionsParams, rid: Any) -> methods.CompactionsResult:
    return await reads.compactions(p, readers=svc.readers)


async def _route_report(svc: Service, p: methods.ReportParams, rid: Any) -> methods.ReportResult:
    return await report_svc.report(p, readers=svc.readers, sessions=svc.sessions, thresholds=svc.thresholds,
                                   budget=svc._budget, cfg=svc.cfg)


async def _route_wrap_store(svc: Service, p: methods.WrapStoreParams, rid: Any) -> methods.WrapStoreResult:
    return await wrap.store(p, cfg=svc.cfg, sessions=svc.sessions, writer=svc.writer, clock=svc.clock)


# -- the method table ------------------------------------------------------------------------------
ROUTES: dict[str, Route] = {
    "hook": Route(_route_hook),
    "ping": Route(_route_ping),
    "hello": Route(_route_hello),
    "shutdown": Route(_route_shutdown),
    "status": Route(_route_status, read=True),
    "recall": Route(_route_recall, read=True),
    "phase.set": Route(_route_phase_set, read=True),
    "forget": Route(_route_forget, read=True),
    "pending": Route(_route_pending, read=True),
    "lessons": Route(_route_lessons, read=True),
    "memory.prune": Route(_route_memory_prune, read=True),
    "compactions": Route(_route_compactions, read=True),
    "report": Route(_route_report, read=True),
    "wrap.store": Route(_route_wrap_store),
}
