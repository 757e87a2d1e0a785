"""What each method and hook event does: joins the pure core with the store.

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
- A spool line is decoded like a request: a lone surrogate or bytes that are not UTF-8 become U+FFFD
  and the event is stored; only a line that is not JSON at all is skipped.
- Slow side work (L3 Markdown files) runs after the reply, in the background, and is re-derivable
  from the store.
- Texts for the model name ctxlifectl as ``runtime.ctl.ctl_command()`` (passed to the pure renderers);
  their figures come from the same Budget that ``status`` reports. A SessionStart briefing is kept
  (``last_briefing``): a resume gets only what differs from what the context already holds.
- SessionStart(compact) lists only the window's tool output (``COMPACT_LISTED_KINDS``) that the
  category matrix keeps or summarizes in the phase, each with its L1 summary; the conversation is
  what the compaction summary carries, and ctxlifed's own rows (facts, ledgers, lessons) never were
  in the window.
- The category matrix in use (``Service.matrix``: the default of ``core/matrix.py`` with the config's
  overrides) ranks compression, sizes the must-survive set and writes the ``/compact`` focus line.
- Advice (``core/advice.py``, docs/advice.md): ``/compact`` near auto-compaction, at level L0→L1 or
  above, or at a boundary only when it pays; ``/rewind``, ``/clear`` and a subagent on their signals
  (main chain only). One slot per session, the more urgent wins; recorded as delivered when an answer
  carries it, never delivered twice, debounced per kind; ``status`` lists the same advice.
- Reads wait for the derivation backlog (bounded; recall not for a burst's: ``scheduler.py``), except while it is stalled on a storage fault:
  then they answer at once from what is stored. A recall's search runs in the readers' search lane,
  within its budget; past it the client gets ``query_too_broad``.
- Pending items close on the evidence of the event that brings it (core/pending.py), in that event's
  writer job; only open items that are not stale are injected (SessionStart, the /compact focus line,
  the must-survive set). TodoWrite's open todos are pending items.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import os
import re
import sqlite3
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import anyio
import anyio.to_thread
import msgspec
import structlog

from .. import PROTOCOL_VERSION, __version__
from ..core import budget as B
from ..core import figures as F
from ..core import advice as ADV
from ..core import classify, phase as PH, render as R, summarize as SUM
from ..core import matrix as MX
from ..core.commands import EXPLORE_TOOLS, is_test_command
from ..core import pending as PD
from ..core import testfail
from ..core import transcript as T
from ..core.events import d, elements_from_hook, s
from ..core.jsontext import repair as repair_json_text
from ..core.model import Element, Kind, Level, estimate_tokens
from ..core.paths import validate_session_id
from ..core.recall_query import RecallQueryError, parse_recall
from ..core.redact import redact, redact_obj
from ..protocol import _errors as E
from ..protocol import _methods as M
from ..runtime.config import Config
from ..runtime.ctl import ctl_command
from ..runtime.paths import Paths
from ..scheduler import Scheduler
from ..store import backlog as tri_backlog
from ..store import ops, outputs, queries
from ..store.db import QueryTooBroadError, Readers, StorageFullError, Writer
from ..core import accounting as A
from ..core import lessons as LS
from . import compaction, compress, cost as COST, derive as DV, files
from . import wrap
from . import report as report_svc
from . import lessons as lessons_svc
from . import residency as residency_svc
from .ledger import LedgerWriter
from .state import SessionState, dump, load

log = structlog.get_logger("ctxlifed.service")

# Events whose JSON answer may carry hookSpecificOutput.additionalContext (spec §1.1 "ctx").
CTX_EVENTS = frozenset({
    "SessionStart", "Setup", "SubagentStart", "UserPromptSubmit", "UserPromptExpansion", "PreToolUse",
    "PostToolUse", "PostToolUseFailure", "PostToolBatch", "Stop", "SubagentStop", "PostModelSwitch",
})
# Events that show a top-level systemMessage to the user (others discard it, spec §2.3).
MSG_EVENTS = frozenset({"UserPromptSubmit", "PostToolUse", "PostToolUseFailure", "Stop", "SessionStart"})
FACT_KINDS = {Kind.DECISION: "decision", Kind.CONSTRAINT: "constraint", Kind.PENDING: "pending"}
TRANSCRIPT_KINDS = frozenset({Kind.ASSISTANT, Kind.THINKING, Kind.TOOL, Kind.CODE_CHANGE, Kind.ERROR, Kind.TEST_RESULT})
# What the context window itself held (facts, ledgers and lessons are ctxlifed's own rows, never in it).
WINDOW_KINDS = frozenset({Kind.PROMPT, *TRANSCRIPT_KINDS})
# What SessionStart(compact) lists of the compacted window: tool output, the detail a summary drops and
# the model may want back by id. The conversation (prompts, assistant text) is what the summary
# carries, and the facts in it that the summary lost are re-injected one by one at PostCompact.
COMPACT_LISTED_KINDS = frozenset({Kind.TOOL, Kind.CODE_CHANGE, Kind.ERROR, Kind.TEST_RESULT})
MAX_TRANSCRIPT_READ = 1 << 20  # bytes per event, so a long transcript seen late never stalls a hook:
# the rest is read on the next events (a line longer than this is skipped; hooks archived its content,
# and its usage is counted from its head and tail)
SKIP_READS = 32  # reads (of up to MAX_TRANSCRIPT_READ) an event may spend getting past one over-long line
INLINE_READ = 64 << 10  # a usual delta is read on the event loop; a larger one in a worker thread
FOLD_SLICE = 64 << 10  # a larger read is parsed and folded this much at a time, pausing in between
# A derivation with more of its session's jobs queued behind it (catching up after a burst) reads at
# most INLINE_READ of complete lines when those jobs can read the rest: one step then stays a few ms on
# the event loop and in the writer (1 MB of transcript was ~35 ms of parsing and redaction, then ~17 ms
# of archiving, which the hooks arriving meanwhile waited for). The last job reads up to
# MAX_TRANSCRIPT_READ, so the accounting catches up when the backlog does. A transcript seen late (far
# more bytes than the queued jobs would read in slices) is read MAX_TRANSCRIPT_READ an event, as before.
MAX_SESSIONS_IN_MEMORY = 512
HOOK_TOOLS = 256  # tool-use ids per session whose result a hook delivered (the transcript copy is skipped)
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
        # Sessions in memory, least recently used first (``_touch``); at MAX_SESSIONS_IN_MEMORY the
        # least recently used idle one is dropped (its state is in the store: reloaded when it returns).
        self.sessions: collections.OrderedDict[str, SessionState] = collections.OrderedDict()
        self.locks: dict[str, anyio.Lock] = {}  # derive locks: one derivation of a session at a time
        self.ack_locks: dict[str, anyio.Lock] = {}  # one acknowledgement of a session at a time
        self.scheduler = scheduler if scheduler is not None else Scheduler()
        self.backlog = DV.Backlog(self.scheduler)
        self.lessons = lessons_svc.Lessons(readers, writer, clock,
                                           on_stored=lambda project: self.spawn(self.ledgers.write_lessons, project))
        # tool_use_ids a hook already delivered, per session: the transcript's copy of the same tool
        # result is then neither redacted, summarised nor archived again (only counted).
        self.hook_tools: dict[str, dict[str, None]] = {}  # per session: the last HOOK_TOOLS ids, in order
        self.ledgers = LedgerWriter(writer, readers, config=lambda: self.cfg, clock=clock)
        self.spool_ingested = 0
        self.stop_requested = anyio.Event()
        self._stalled_at = -1  # ``writer.commits`` when a derivation last failed on a storage fault
        self._derive_failed_again = anyio.Event()  # set at each such failure: reads stop waiting
        self.background: list[Callable[[], Any]] = []
        self._tg: anyio.abc.TaskGroup | None = None

    # -- plumbing ------------------------------------------------------------------------------
    def bind(self, tg: anyio.abc.TaskGroup, *, derive: bool = True) -> None:
        """Run background work in ``tg``; ``derive=False`` leaves the backlog alone (tests start it)."""
        self._tg = tg
        if derive:
            self.start_deriver()

    def start_deriver(self) -> None:
        assert self._tg is not None
        self._tg.start_soon(self.backlog.run, self._derive)

    async def _guarded(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Side work awaited in the request (ordering matters) that must still never fail it."""
        try:
            return await fn(*args)
        except Exception:  # noqa: BLE001
            log.exception("side_work_failed", job=getattr(fn, "__name__", "?"))
            return None

    def spawn(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run side work after the reply; it must never fail the request."""
        async def guarded() -> None:
            try:
                await fn(*args)
            except Exception:  # noqa: BLE001
                log.exception("background_failed", job=getattr(fn, "__name__", "?"))

        if self._tg is not None:
            self._tg.start_soon(guarded)

    @property
    def ratios(self) -> B.ZoneRatios:
        z = self.cfg.zones
        return B.ZoneRatios(system=z[0], ledger=z[1], working=z[2], buffer=z[3])

    @property
    def thresholds(self) -> B.Thresholds:
        t = self.cfg.thresholds
        return B.Thresholds(l1=t[0], l2=t[1], l3=t[2])

    async def dispatch(self, method: str, params: bytes, rid: Any = None) -> Any:
        p = M.decode_params(method, params)
        if method == "hook":
            return await self.hook(p, rid=rid if isinstance(rid, str) else None)
        if method == "ping":
            return M.PingResult(version=__version__, pid=os.getpid(), uptime_s=round(time.monotonic() - self.started, 3))
        if method == "hello":
            return M.HelloResult(version=__version__, protocol=PROTOCOL_VERSION, pid=os.getpid(),
                                 compatible=p.protocol in (0, PROTOCOL_VERSION))
        if method == "shutdown":
            self.stop_requested.set()
            return M.ShutdownResult()
        if method in ("status", "recall", "phase.set", "forget", "lessons", "compactions", "pending",
                      "memory.prune", "report"):
            # Reads see every acknowledged event: derive what is queued first (bounded wait).
            await self._wait_derived(self.scheduler.read_wait_s(method, self.backlog.pending()))
        if method == "status":
            return await self.status(p)
        if method == "recall":
            return await self.recall(p)
        if method == "phase.set":
            return await self.phase_set(p)
        if method == "forget":
            return await self.forget(p)
        if method == "pending":
            return await self.pending(p)
        if method == "lessons":
            project = None if p.all_projects else (p.project or (files.project_root(p.cwd) if p.cwd else None))
            found = await self.lessons.listing(project=project, limit=max(1, min(p.limit, 500)))
            return M.LessonsResult(markdown=LS.render_lessons_md(found) if found else "No lessons recorded yet.",
                                   lessons=[msgspec.to_builtins(x) for x in found])
        if method == "memory.prune":
            return await self.memory_prune(p)
        if method == "compactions":
            project = files.project_root(p.cwd) if p.cwd and not p.project and not p.session else p.project
            reps = await compaction.reports(self.readers, session=p.session, project=project, limit=max(1, min(p.limit, 200)))
            return M.CompactionsResult(markdown=compaction.render(reps), reports=reps)
        if method == "report":
            return await report_svc.report(p, readers=self.readers, sessions=self.sessions, thresholds=self.thresholds,
                                           budget=self._budget, cfg=self.cfg)
        if method == "wrap.store":
            return await wrap.store(p, cfg=self.cfg, sessions=self.sessions, writer=self.writer, clock=self.clock)
        raise E.MethodNotFound(f"Method not found: {method}")

    @property
    def derive_stalled(self) -> bool:
        """The last derivation failed on a storage fault and nothing was written since."""
        return self._stalled_at == self.writer.commits

    async def _wait_derived(self, timeout: float | None) -> None:
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
    async def _state(self, sid: str, project: str, cwd: str, now: float) -> SessionState:
        st = self._touch(sid)
        if st is None:
            own, last = await self.readers.run(partial(queries.session_or_project_last, session=sid, project=project))
            st = load(own["state"]) if own else None
            if st is None:
                st = SessionState(session=sid, project=project, cwd=cwd, phase_started=now,
                                  phase=PH.PhaseState(since=now), acc=A.Accounting(project_root=project))
                # A new session in a known project starts in the phase the project was last in.
                prev = load(last["state"]) if last else None
                if prev is not None:
                    st.phase = PH.PhaseState(phase=prev.phase.phase, since=now)
            if len(self.sessions) >= MAX_SESSIONS_IN_MEMORY:
                self._evict_one()
            self.sessions[sid] = st
        if cwd:
            st.cwd = cwd
        return st

    def _touch(self, sid: str) -> SessionState | None:
        """The session in memory (None if it is not), marked most recently used."""
        st = self.sessions.get(sid)
        if st is not None:
            self.sessions.move_to_end(sid)
        return st

    def _evict_one(self) -> None:
        """Drop the least recently used session that nothing is using (no job pending, no lock
        held). Not the one whose phase began first: that is the long session in progress, which
        would then be reloaded, and evicted again, at every new session."""
        for k in self.sessions:  # least recently used first
            lk, ack = self.locks.get(k), self.ack_locks.get(k)
            if self.backlog.pending(k) or (lk is not None and lk.locked()) or (ack is not None and ack.locked()):
                continue
            del self.sessions[k]
            self.locks.pop(k, None)
            self.ack_locks.pop(k, None)
            self.hook_tools.pop(k, None)
            return

    def _lock(self, sid: str) -> anyio.Lock:
        lk = self.locks.get(sid)
        if lk is None:
            lk = self.locks[sid] = anyio.Lock()
        return lk

    def _ack_lock(self, sid: str) -> anyio.Lock:
        # Taken on every hook: ``fast_acquire`` takes a free one without a checkpoint (anyio's
        # default yields to the event loop first: one more loop turn per acknowledgement). Fair
        # anyway: a holder always answers (I/O) before its session's next hook takes it again. The
        # derivation lock keeps the checkpoint: a waiter woken by a finished job runs before the
        # deriver takes the next one (derive.py: a sync event's wait ends its urgency first).
        lk = self.ack_locks.get(sid)
        if lk is None:
            lk = self.ack_locks[sid] = anyio.Lock(fast_acquire=True)
        return lk

    # -- hook ----------------------------------------------------------------------------------
    async def hook(self, payload: dict[str, Any], *, rid: str | None = None, source: str = "hook",
                   ts: float | None = None) -> M.HookResult:
        now = ts if ts is not None else self.clock()
        redactions = 0
        if self.cfg.redact:
            payload, redactions = redact_obj(payload)
        event = s(payload.get("hook_event_name")) or "Unknown"
        cwd = s(payload.get("cwd"))
        raw_sid = s(payload.get("session_id"))
        try:
            sid = validate_session_id(raw_sid)
        except ValueError:
            sid = ""
        project = files.project_root(cwd) if cwd else "(unknown)"
        blob = _enc.encode(payload)
        row = ops.EventRow(session=sid or "_invalid", project=project, cwd=cwd, event=event,
                           tool=s(payload.get("tool_name")) or None, ts=now, payload=blob,
                           redactions=redactions, source=source, rid=rid)
        if not sid:
            await self.writer.run(partial(_store_event_only, row))
            return M.HookResult()
        async with self._ack_lock(sid):
            st = self._touch(sid)
            if st is not None and event in DV.DEFERRABLE:
                await self.backlog.room()  # backpressure: a full backlog slows answers to its pace
                return await self._acknowledge(payload, event, st, project, cwd, now, row)
            # Inline: what this event's answer depends on must be derived first, in order.
            await self.backlog.wait(sid)
            async with self._lock(sid):
                before = self.sessions.get(sid)
                snapshot = dump(before) if before is not None else None
                try:
                    return await self._hook_locked(payload, event, sid, project, cwd, now, row)
                except BaseException:
                    # Nothing was acknowledged: put the session back as it was, so a retry (from the
                    # spool) re-reads the same transcript bytes and re-derives the same state.
                    self._restore(sid, snapshot)
                    raise

    def _restore(self, sid: str, snapshot: bytes | None) -> None:
        restored = load(snapshot) if snapshot is not None else None
        if restored is None:
            self.sessions.pop(sid, None)
        else:
            self.sessions[sid] = restored

    async def _acknowledge(self, payload: dict[str, Any], event: str, st: SessionState, project: str, cwd: str,
                           now: float, row: ops.EventRow) -> M.HookResult:
        """The write-behind path: commit the event (pending), answer from memory, queue the rest."""
        # Alone, the commit runs inline (no thread hops); among concurrent requests it joins the
        # writer thread's group commit, which runs next to the event loop instead of on it.
        pending = None
        if event == "PostToolUse" and row.source == "hook":
            pending = await compress.prepare(self.cfg, payload, project=project, level=st.level, phase=st.phase.phase,
                                             edited_paths=st.files_touched, transcript_path=st.transcript_path,
                                             session=st.session)
        if pending is None:
            eid, aid = await self.writer.run(partial(_store_ack, row), inline=self.scheduler.alone()), 0
        else:  # the event and the full original's archive row in one commit: the digest names that id
            try:
                eid, aid = await self.writer.run(partial(outputs.store_ack, row, pending.row), inline=self.scheduler.alone())
            except StorageFullError:  # no room for the original: acknowledge the event alone, keep the output
                pending = None
                eid, aid = await self.writer.run(partial(_store_ack, row), inline=self.scheduler.alone()), 0
        if not eid:  # a replay of an event already stored
            return M.HookResult()
        tool_id = s(payload.get("tool_use_id"))
        if event in ("PostToolUse", "PostToolUseFailure") and tool_id:
            # Now, not at derivation: a derivation still queued may read this tool's result in the
            # transcript, and must know a hook delivered it.
            self._note_hook_tool(st.session, tool_id)
        lesson = None
        hint = ""
        if event in ("PostToolUse", "PostToolUseFailure") and await self.lessons.may_hint(project):
            lesson = LS.classify_event(payload if pending is None else compress.full_payload(payload, pending),
                                       event_id=eid, ts=now)
            hint = await self.lessons.hint_for(st, lesson)
        replaced = None
        if pending is not None and aid:
            replaced = await compress.finish(pending, aid, ctl=ctl_command(),
                                             max_dir_bytes=self.cfg.compress_files_mb << 20)
            if replaced is not None:
                st.note_compressed(replaced.kind, replaced.original_tokens, replaced.digest_tokens)
                COST.note_live_compression(st, max(0, replaced.original_tokens - replaced.digest_tokens), self.cfg)
        elif event == "PostToolUseFailure":
            hint = "\n\n".join(x for x in (hint, compress.failure_note(payload)) if x)
        answer = await self._answer(event, payload, st, now, extra_ctx=hint,
                                    replace=replaced.fields if replaced is not None else None)
        self.backlog.put(DV.Job(eid=eid, sid=st.session, project=project, cwd=cwd, event=event, ts=now,
                                payload=payload, lesson=lesson))
        return answer

    def _note_hook_tool(self, sid: str, tool_id: str) -> None:
        seen = self.hook_tools.setdefault(sid, {})
        if tool_id not in seen:
            seen[tool_id] = None
            if len(seen) > HOOK_TOOLS:
                del seen[next(iter(seen))]

    async def _derive(self, job: DV.Job) -> None:
        """Derive one acknowledged event (the deriver task; see derive.py)."""
        payload = job.payload
        if payload is None:
            raw = await self.readers.run(partial(_pending_payload, job.eid))
            if raw is None:
                return  # forgotten, or derived already
            payload = msgspec.json.decode(raw)
            if not isinstance(payload, dict):
                payload = {}
        async with self._lock(job.sid):
            before = self.sessions.get(job.sid)
            snapshot = dump(before) if before is not None else None
            try:
                await self._hook_locked(payload, job.event, job.sid, job.project, job.cwd, job.ts, None,
                                        eid=job.eid, lesson=job.lesson)
            except StorageFullError:  # full or unwritable (StorageUnavailableError)
                self._restore(job.sid, snapshot)
                self._note_derive_fault(True)
                raise  # kept: retried
            except Exception:  # noqa: BLE001 - one bad event must not wedge the backlog
                self._restore(job.sid, snapshot)
                log.exception("derive_failed", event_id=job.eid, hook_event=job.event)
                self.backlog.failed += 1
                await self.writer.run(partial(ops.finish_pending, eid=job.eid), low=True)
            self._note_derive_fault(False)

    async def recover(self) -> int:
        """Queue the events acknowledged but not derived before the last stop (crash, kill)."""
        rows = await self.readers.run(_pending_rows)
        for eid, sid, project, cwd, event, ts in rows:
            self.backlog.put(DV.Job(eid=eid, sid=sid, project=project, cwd=cwd, event=event, ts=ts, payload=None))
        if rows:
            log.info("derive_recovering", events=len(rows))
        return len(rows)

    async def _hook_locked(self, payload: dict[str, Any], event: str, sid: str, project: str, cwd: str,
                           now: float, row: ops.EventRow | None, *, eid: int | None = None,
                           lesson: Any = None) -> M.HookResult:
        """Derive one event and store it (with the raw event when ``row``; else the event ``eid`` was
        acknowledged before: clear its pending mark), then answer (inline only)."""
        deferred = eid is not None
        pause = self.backlog.pause if deferred else _no_pause
        st = await self._state(sid, project, cwd, now)
        elements = elements_from_hook(payload, ts=now, max_chars=self.cfg.archive_max_chars)
        elements = [self._enrich(e) for e in elements]
        main_chain = not s(payload.get("agent_id"))
        if main_chain:
            self._note_advice_signals(st, event, payload, elements, now)

        # Phase signals.
        signals: list[PH.Signal] = []
        if event == "UserPromptSubmit":
            signals = PH.signals_from_prompt(s(payload.get("prompt")))
        elif event in ("PostToolUse", "PostToolUseFailure") and not s(payload.get("agent_id")):
            signals = PH.signals_from_tool(s(payload.get("tool_name")), d(payload.get("tool_input")))
        switch = None
        if signals:
            st.phase, switch = PH.observe(st.phase, signals, now)

        if event in ("PostToolUse", "PostToolUseFailure") and s(payload.get("tool_use_id")):
            self._note_hook_tool(sid, s(payload.get("tool_use_id")))

        # Transcript: usage, model, boundaries, assistant text.
        tpath = s(payload.get("transcript_path"))
        if tpath and not s(payload.get("agent_id")):
            st.transcript_path = tpath
        await pause()
        tdelta = (await self._read_transcript(st, behind=self.backlog.pending(sid) - 1 if deferred else 0, pause=pause)
                  if DV.read_before_answer(event, deferred=deferred, transcript=st.transcript_path, offset=st.cursor.offset,
                                           roots=self.cfg.allowed_transcript_roots) else None)
        await pause()
        if event == "SessionStart" and isinstance(payload.get("context_tokens"), int):
            st.context_tokens, st.estimated = payload["context_tokens"], False
        if event == "SessionStart" and isinstance(payload.get("model"), str):
            st.model = payload["model"]
        if event == "SessionStart":
            COST.note_session_start(st, payload)
        COST.note_overrides(st, payload, event)
        if event == "InstructionsLoaded":
            compaction.note_instructions(st, payload, now)
        if tdelta is not None:
            for el in tdelta.elements:
                if el.kind in TRANSCRIPT_KINDS and el.text:  # '' = a tool result a hook delivered
                    elements.append(el)

        # Files and tests for the ledger; "tests green again" is a task boundary.
        went_green = False
        passed_tests: list[str] = []
        passed_text: list[str] = []
        for el in elements:
            if el.kind is Kind.CODE_CHANGE and el.file_path:
                st.note_file(el.file_path)
            if el.kind is Kind.TEST_RESULT and el.command:
                st.note_test(("PASS " if el.passed else "FAIL " if el.passed is False else "RAN ") + el.command)
                if el.passed is False:
                    st.tests_red = True
                    st.note_failing(el.command, testfail.failure_lines(el.text))
                elif el.passed:
                    passed_tests += st.clear_failing(el.command, covers=_covers)
                    passed_text.append(f"{el.command}\n{el.text[:PASSED_TEXT_CHARS]}")
                    if st.tests_red:
                        st.tests_red, went_green = False, True

        # Facts: decisions, constraints, pending items from prompts and assistant text.
        facts: list[Element] = []
        for el in elements:
            if el.kind in (Kind.PROMPT, Kind.ASSISTANT):
                for kind, text in classify.detect_facts(el.text):
                    facts.append(Element(uid=f"{el.uid}:fact:{len(facts)}", kind=kind, text=text, ts=now,
                                         tokens=estimate_tokens(text)))
        # The to-do list Claude keeps (TodoWrite): each open todo is a pending item; a completed one
        # closes it (_closing_evidence).
        for i, text in enumerate(_open_todos(event, payload)):
            facts.append(Element(uid=f"{s(payload.get('tool_use_id')) or now}:todo:{i}", kind=Kind.PENDING, text=text,
                                 ts=now, tokens=estimate_tokens(text)))

        closing = _closing_evidence(event, payload, facts, passed_tests, passed_text,
                                    [el.text for el in elements if el.kind in (Kind.PROMPT, Kind.ASSISTANT)])

        budget = self._budget(st)
        crossed = budget is not None and int(budget.level) > st.level
        if budget is not None and int(budget.level) < st.level and (tdelta and tdelta.boundaries):
            st.level = int(budget.level)

        phase_now = st.phase.phase
        ended_phase = None
        if switch is not None:
            ended_phase = (st.phase_index, switch.from_phase, st.phase_started)
            st.phase_index += 1
            st.phase_started = now
            st.files_touched.clear()
            st.tests.clear()
        if event == "SessionEnd":
            st.ended_ts = now

        summaries = [SUM.summarize(el) for el in elements]
        await pause()
        job = partial(_store_hook, row=row, eid=eid, now=now, st=st, elements=elements, facts=facts, phase=phase_now,
                      switch=switch, priority=lambda el: classify.priority(el, phase_now, self.matrix),
                      summaries=summaries, closing=closing)
        saved = dump(st)
        stored = await self.writer.run(partial(job, state_blob=saved), low=deferred)
        if stored is None:  # a replay of an event already stored (or forgotten before its derivation)
            return M.HookResult()

        # After commit: side work and the answer.
        if ended_phase is not None:
            # Ledger first, then the advice: a /compact at this boundary loses nothing the ledger lacks.
            n, name, started = ended_phase
            written = await self._guarded(self.ledgers.write_phase, st.session, st.project, n, name, started, now,
                                          "phase switch")
            why = f"phase switch {name} → {phase_now}" + ("; ledger written" if written else "")
            await self._advise_compact(st, budget, "boundary", f"compact:phase:{st.phase_index}", why, now)
        if event == "SessionEnd":
            self.spawn(self._end_ledgers, st.session, st.project, st.phase_index, phase_now, st.phase_started, now)
        if went_green and switch is None and phase_now in ("implementation", "testing"):
            await self._advise_compact(st, budget, "boundary", f"compact:green:{now:.0f}",
                                       "tests are green again after implementation work: a clean boundary", now)
        if crossed and budget is not None:
            await self._compress(st, Level(int(budget.level)), now)
            st.level = int(budget.level)
            await self._advise_compact(st, budget, "level", f"compact:level:{int(budget.level)}:{st.compactions}",
                                       f"Working zone at {F.percent(budget.working_pct)}"
                                       f" (level {F.level_name(budget.level)})"
                                       + _with_reason(COST.compact_reason(st, budget, self.cfg)), now)
        # After the level advice: the more urgent one wins the single advice slot.
        if budget is not None and st.emergency_at != st.compactions and near_autocompact(budget):
            # Auto-compaction is close and no boundary is in sight: checkpoint now, so whatever
            # Claude Code's summary drops is still in L2/L3.
            st.emergency_at = st.compactions
            await self._guarded(self.ledgers.write_phase, st.session, st.project, st.phase_index, phase_now,
                                st.phase_started, now, "emergency checkpoint: auto-compaction is near")
            self.spawn(self.ledgers.write_decisions, st.project)
            await self._advise_compact(st, budget, "near", f"compact:near:{st.compactions}",
                                       f"auto-compaction is {F.tokens(budget.tokens_to_autocompact)} tokens away;"
                                       " emergency ledger written", now)
        if main_chain:
            await self._advise_release(st, event, payload, budget, now)
        if event == "PreCompact":
            await compaction.record_must_survive(self.readers, st, now, matrix=self.matrix, is_stale=self.is_stale)
            await self._compress(st, Level.L1_L2, now, precompact=True)
            self.spawn(self.ledgers.write_phase, st.session, st.project, st.phase_index, phase_now,
                       st.phase_started, now, "checkpoint before compaction")
        hint = ""
        if event in ("PostToolUse", "PostToolUseFailure"):
            if deferred:  # the hint went with the acknowledgement
                await pause()
                await self.lessons.advance(st, lesson if lesson is not None else
                                           LS.classify_event(payload, event_id=stored, ts=now), now)
            else:
                hint = await self.lessons.on_tool_event(st, payload, stored, now)
        answer = M.HookResult() if deferred else await self._answer(event, payload, st, now, extra_ctx=hint)
        final = dump(st)
        if final != saved:  # only when the answer or side work changed the session (rare per tool call)
            await self.writer.run(partial(_save_state, st, blob=final), low=deferred)
        return answer

    def _enrich(self, el: Element) -> Element:
        if el.kind is Kind.TEST_RESULT and el.passed is None:
            return msgspec.structs.replace(el, passed=T.test_outcome(el.text, el.is_error))
        return el

    async def _read_transcript(self, st: SessionState, *, behind: int,
                               pause: Callable[[], Awaitable[None]]) -> T.TranscriptDelta | None:
        """Read and fold the transcript's new complete lines. ``behind``: this session's jobs queued
        after this derivation (see INLINE_READ); ``pause``: the derivation's pause between slices.
        A line longer than a read (a pasted screenshot) is read past in the same event, up to
        SKIP_READS reads, so the lines after it count at once."""
        if not st.transcript_path:
            return None
        real = files.transcript_allowed(st.transcript_path, self.cfg.allowed_transcript_roots())
        if real is None:
            st.transcript_error = "transcript outside the allowed roots; not read"
            return None
        out: T.TranscriptDelta | None = None
        for _ in range(SKIP_READS):
            data = await self._read_new(st, real, behind)
            if not data:
                break
            if out is None:
                out = T.TranscriptDelta()
            await self._fold_slices(st, data, out, pause)
            if not st.cursor.skipping:
                break
            await pause()
        return out

    async def _read_new(self, st: SessionState, real: str, behind: int) -> bytes | None:
        """The transcript's bytes from ``st.cursor.offset`` (how many: see INLINE_READ). The
        cursor's anchor, the bytes just before the offset, is read with them: when it is not there
        any more the file was rewritten or replaced (a longer one too) and is read again from 0."""
        anchor = len(st.cursor.anchor)
        offset = st.cursor.offset
        raw, size, restarted = files.read_from(real, offset - anchor, INLINE_READ + anchor)
        if size < 0:
            return None
        data = None if restarted else T.resume(st.cursor, raw)
        if data is None:  # shrunk, rewritten or replaced: from the start
            log.info("transcript_restarted", session=st.session, offset=offset, size=size)
            st.cursor = T.TranscriptCursor()
            offset = 0
            if not restarted:
                raw, size, _r = files.read_from(real, 0, INLINE_READ)
            data = raw[:INLINE_READ]
        sliced = behind > 0 and size - offset <= behind * INLINE_READ + MAX_TRANSCRIPT_READ and b"\n" in data
        if len(data) == INLINE_READ and size > offset + INLINE_READ and not sliced:
            more, size, _r = await anyio.to_thread.run_sync(
                files.read_from, real, offset + INLINE_READ, MAX_TRANSCRIPT_READ - INLINE_READ)
            data += more
        return data

    async def _fold_slices(self, st: SessionState, data: bytes, out: T.TranscriptDelta,
                           pause: Callable[[], Awaitable[None]]) -> None:
        """Fold ``data`` FOLD_SLICE of complete lines at a time, with a pause between (a derivation
        yields to replies): 1 MB in one go was ~125 ms on the event loop. Each slice folds exactly as
        a separate read would (reads come in arbitrary chunks anyway); ``out`` gets the elements and
        boundaries of all of them."""
        pos, n = 0, len(data)
        while True:
            end = n
            if n - pos > FOLD_SLICE:
                cut = data.rfind(b"\n", pos, pos + FOLD_SLICE)
                if cut < 0:  # a line longer than a slice: it goes whole
                    cut = data.find(b"\n", pos + FOLD_SLICE)
                end = n if cut < 0 else cut + 1
            delta = await self._fold_transcript(st, data[pos:end])
            out.elements += delta.elements
            out.boundaries += delta.boundaries
            pos = end
            if pos >= n:
                return
            await pause()

    async def _fold_transcript(self, st: SessionState, chunk: bytes) -> T.TranscriptDelta:
        """Parse the complete lines of ``chunk`` (the transcript from ``st.cursor``) and fold them into
        the session: model, usage, context size, accounting, compaction boundaries."""
        # A line must be shorter than a read to be seen whole; a longer one is skipped (its usage
        # counted from its head and tail), never waited for.
        from_start = st.cursor.offset == 0
        st.cursor, delta = T.feed(st.cursor, chunk, max_line=MAX_TRANSCRIPT_READ - 1)
        seen = self.hook_tools.get(st.session)
        if seen:
            delta.elements = [msgspec.structs.replace(e, text="") if e.uid in seen else e for e in delta.elements]
        if self.cfg.redact:
            delta = _redact_delta(delta)
        if delta.model:
            st.model = delta.model
        if delta.first_usage is not None and st.system_tokens is None:
            st.system_tokens = delta.first_usage.context_tokens
        ctx = T.context_after(delta, st.context_tokens)
        if ctx is not None and delta.boundaries and ctx == delta.boundaries[-1].post_tokens and (
                delta.compacted_last or delta.last_usage is None):
            # A boundary's post tokens count the compacted messages only: the next request also
            # carries the system prompt and tools (the fixed part), so the context is their sum.
            st.context_tokens, st.estimated = ctx + (st.system_tokens or 0), True
        elif ctx is not None:
            st.context_tokens, st.estimated = ctx, False
        st.acc = A.fold(st.acc, delta)
        COST.fold(st, delta, self.cfg, from_start=from_start)
        if delta.boundaries:
            st.boundary_ts = delta.boundaries[-1].ts
            st.ledger_tokens = 0
            await compaction.boundary_seen(self.writer, st, delta.boundaries[-1].post_tokens)
        return delta

    def _budget(self, st: SessionState) -> B.Budget | None:
        if st.context_tokens is None:
            return None
        window = B.window_for_model(st.model, self.cfg.window)
        return B.compute_budget(window=window, context_tokens=st.context_tokens,
                                system_tokens=st.system_tokens or 0, ledger_tokens=st.ledger_tokens,
                                ratios=self.ratios, thresholds=self.thresholds, estimated=st.estimated,
                                autocompact_at=COST.autocompact_at(st, window))

    @property
    def matrix(self) -> MX.Matrix:
        """The category matrix in use: the design's default with the config's overrides."""
        return _matrix_for(self.cfg.matrix)

    def _advise(self, st: SessionState, adv: ADV.Advice, now: float) -> None:
        """Queue advice for the user: once per cause, debounced per kind, the more urgent one wins the
        single slot (core/advice.py). It is recorded as delivered when an answer carries it."""
        st.advice_lines[adv.kind] = adv.line
        if ADV.debounced(adv, delivered=st.advised, last_of_kind=st.advice_at.get(adv.kind), now=now,
                         pending=_pending_advice(st)):
            return
        st.pending_advice, st.pending_advice_key = adv.text, adv.key
        st.pending_advice_kind, st.pending_advice_urgency = adv.kind, adv.urgency

    async def _advise_compact(self, st: SessionState, budget: B.Budget | None, cause: str, key: str, why: str,
                              now: float) -> None:
        """Suggest ``/compact <focus>`` when it pays (core/advice.py, docs/advice.md)."""
        if budget is None:
            return
        working, fixed = _working_tokens(budget), budget.zones[0].used
        got = ADV.compact_cause(level=int(budget.level) if cause != "boundary" else 0,
                                near_autocompact=cause == "near", at_boundary=cause == "boundary",
                                working_tokens=working, fixed_tokens=fixed)
        if got is None:
            return
        reason = why
        if got == "boundary":
            turns = -(-ADV.compaction_cost(fixed + working) // max(1.0, ADV.saving_per_turn(working)))
            reason += (f"; Working holds {F.tokens(working)} tokens, so a compaction repays itself"
                       f" in about {int(turns)} turns")
        focus = MX.focus_line(st.phase.phase, await self._focus_state(st), self.matrix)
        self._advise(st, ADV.Advice(kind="compact", key=key, reason=reason, command=f"/compact {focus}",
                                    urgency=ADV.URGENCY[got]), now)

    async def _focus_state(self, st: SessionState) -> MX.FocusState:
        """What a focus line names: files being changed, failing tests, this phase's decisions, the
        session's constraints and open items (most recent first)."""
        rows = await self.readers.run(partial(_focus_rows, st.session, st.project))
        return MX.FocusState(
            files=_files_changed(st),
            failing_tests=list(st.failing_ids),
            decisions=[r["text"] for r in rows["decision"] if r["ts"] >= st.phase_started - 1e-6],
            constraints=[r["text"] for r in rows["constraint"]],
            pending=await self._pending_texts(st))

    def _note_advice_signals(self, st: SessionState, event: str, payload: dict[str, Any], elements: list[Element],
                             now: float) -> None:
        """Failures in a row (/rewind), read sweeps (subagent), failing test ids (focus line)."""
        if event == "UserPromptSubmit":
            st.sweep_reads, st.sweep_targets = 0, []
            st.sweep_asked = ADV.asks_for_sweep(s(payload.get("prompt")))
            return
        if event not in ("PostToolUse", "PostToolUseFailure"):
            return
        tool = s(payload.get("tool_name"))
        if tool in EXPLORE_TOOLS:
            ti = d(payload.get("tool_input"))
            target = s(ti.get("file_path")) or s(ti.get("pattern")) or s(ti.get("path")) or s(ti.get("url")) or tool
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
                sig = ADV.failure_key(ids, LS.signature(el.text, tool=el.tool, command=el.command,
                                                        file_path=el.file_path)
                                      or f"{el.tool}|{el.command or el.file_path or ''}")
                st.fail_sig, st.fail_count = (sig, st.fail_count + 1) if sig == st.fail_sig else (sig, 1)
                if test_run:
                    st.failing_ids = (ids or [el.command or ""])[:8]
            elif el.kind is Kind.TEST_RESULT and el.passed:
                st.fail_sig, st.fail_count, st.failing_ids = "", 0, []
                st.advice_lines.pop("rewind", None)

    async def _advise_release(self, st: SessionState, event: str, payload: dict[str, Any],
                              budget: B.Budget | None, now: float) -> None:
        """/rewind, /clear and subagent advice (core/advice.py), in the session and in ``status``."""
        if ADV.rewind_due(st.fail_count):
            sig = " ".join(st.fail_sig.split("|", 1)[-1].split())
            sig = sig if len(sig) <= 120 else sig[:119] + "…"
            self._advise(st, ADV.Advice(
                kind="rewind", key=f"rewind:{st.fail_sig}", urgency=ADV.URGENCY["rewind"],
                reason=f"the same failure {st.fail_count} times in a row ({sig})",
                command="/rewind to before the first attempt (free, keeps the cache), then try another way"), now)
        if ADV.sweep_due(st.sweep_reads, len(st.sweep_targets), asked=st.sweep_asked):
            self._advise(st, ADV.Advice(
                kind="subagent", key=f"subagent:{st.sweep_start:.3f}", urgency=ADV.URGENCY["subagent"],
                reason=f"{st.sweep_reads} reads in a row over {len(st.sweep_targets)} files or patterns"
                       + (" of the sweep this request asks for" if st.sweep_asked else "")
                       + ", all kept in the window and re-read every turn",
                command="ask for a subagent to do the rest of this sweep (only its summary enters the window)"), now)
        if event == "UserPromptSubmit":
            prompt = s(payload.get("prompt"))
            working = _working_tokens(budget) if budget is not None else 0
            topic = ""
            if prompt and working >= ADV.CLEAR_MIN_WORKING and not prompt.lstrip().startswith("/"):
                # The work so far, read from the archive (never kept in the session state: forget
                # must leave no copy of a prompt behind).
                earlier = await self.readers.run(partial(_earlier_prompts, st.session))
                topic = "\n".join([*earlier, *st.files_touched, *st.failing_ids])
            if topic and ADV.unrelated_task(prompt, topic, working):
                self._advise(st, ADV.Advice(
                    kind="clear", key=f"clear:{now:.3f}", urgency=ADV.URGENCY["clear"],
                    reason=f"this looks like a new task unrelated to the work so far, and Working holds"
                           f" {F.tokens(working)} tokens of it",
                    command="/clear before starting it (free; ctxlifed's project memory carries over)"), now)
            else:
                st.advice_lines.pop("clear", None)

    async def _pending_texts(self, st: SessionState) -> list[str]:
        """The session's open, current (not stale) pending items, newest first (the focus line)."""
        rows = await self.readers.run(partial(queries.pending_items, project=st.project, session=st.session, limit=20))
        return [r["text"] for r in self.current_pending(rows)][:5]

    def current_pending(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Open items that are not stale (core/pending.py), in the given order."""
        return [r for r in rows if r["status"] == "open" and not self.is_stale(r)]

    def is_stale(self, row: dict[str, Any]) -> bool:
        return PD.is_stale(row["phases_since"], row["sessions_since"], stale_phases=self.cfg.pending_stale_phases,
                           stale_sessions=self.cfg.pending_stale_sessions)

    async def pending(self, p: M.PendingParams) -> M.PendingResult:
        """``ctxlifectl pending``: the project's pending items (current, stale; closed with ``all``), or
        close one (``resolve``: the ``#N`` it is shown with)."""
        project = None if p.all_projects else (p.project or (files.project_root(p.cwd) if p.cwd else None))
        resolved = None
        if p.resolve is not None:
            got = await self.writer.run(partial(ops.resolve_pending_ref, ref=p.resolve, project=project, ts=self.clock()))
            if got is None:
                raise E.NotFound(f"no pending item #{p.resolve}" + (f" in project {project}" if project else ""))
            resolved = p.resolve
        rows = await self.readers.run(partial(queries.pending_items, project=project, session=p.session,
                                              status=None if p.all else "open", limit=max(1, min(p.limit, 500))))
        views = [M.PendingView(id=r["ref"], text=r["text"], session=r["session"], project=r["project"], ts=r["ts"],
                               phase=r["phase"], status=r["status"], resolution=r["resolution"],
                               stale=r["status"] == "open" and self.is_stale(r)) for r in rows]
        return M.PendingResult(markdown=PD.render_pending_list(views, ctl=ctl_command(), resolved=resolved),
                               items=views, resolved=resolved)

    # -- compression ---------------------------------------------------------------------------
    async def _compress(self, st: SessionState, level: Level, now: float, *, precompact: bool = False) -> None:
        """Rank what entered since the last boundary; store L1 summaries and categories; promote at L2→L3."""
        rows = await self.readers.run(partial(_window_rows, st.session, st.boundary_archive_id))
        if not rows:
            return
        els = [_element_from_row(r) for r in rows]
        ranked = classify.rank(els, st.phase.phase, now, self.matrix,
                               superseded=classify.superseded_failures(reversed(els), _covers))
        plan = classify.plan_compression(ranked, level)
        updates = []
        for rk in ranked:
            aid = int(rk.element.uid)
            summary = SUM.summarize(rk.element, l2_id=aid)
            updates.append((aid, summary, str(rk.category), int(rk.priority)))
        promote = set(getattr(plan, "promote", ()) or ())
        await self.writer.run(partial(_apply_compression, updates, int(level)))
        if precompact:
            # What SessionStart(compact) lists: the window's tool output that the matrix keeps or summarizes.
            held = [rk for rk in ranked if rk.element.kind in COMPACT_LISTED_KINDS and MX.listed(str(rk.category))]
            st.last_archived = [int(rk.element.uid) for rk in held[:12]]
            st.boundary_archive_id = max(int(r[0]) for r in rows)
            st.compactions += 1
        if level >= Level.L2_L3 or promote:
            self.spawn(self.ledgers.write_decisions, st.project)
            self.spawn(self.ledgers.write_phase, st.session, st.project, st.phase_index, st.phase.phase,
                       st.phase_started, now, "emergency checkpoint (Working zone at L2→L3)")

    # -- answers -------------------------------------------------------------------------------
    async def _answer(self, event: str, payload: dict[str, Any], st: SessionState, now: float, *,
                      extra_ctx: str = "", replace: dict[str, Any] | None = None) -> M.HookResult:
        if event == "PostCompact":
            # Plain text: the only PostCompact output that reaches the next model request.
            return M.HookResult(stdout=await compaction.post_compact(self.readers, self.writer, st, payload, now,
                                                                     matrix=self.matrix, is_stale=self.is_stale))
        ctx = ""
        if event == "SessionStart":
            source = s(payload.get("source")) or "startup"
            ctx = await self._session_start_context(source, st, now)
            if source == "compact":
                st.compact_injected = ctx
        ctx = "\n\n".join(x for x in (ctx, extra_ctx) if x)
        out: dict[str, Any] = {}
        if ctx and event in CTX_EVENTS:
            out["hookSpecificOutput"] = {"hookEventName": event, "additionalContext": ctx}
            st.note_injected(estimate_tokens(ctx) + 20)
            st.acc = A.note_injected(st.acc, ctx, now)
        if event == "PreToolUse" and replace is None:  # the opt-in wrapper (wrap.py): allow + updatedInput, or None
            replace = await wrap.pre_tool_use(self.cfg, payload)
        if replace:  # updatedToolOutput / updatedMCPToolOutput, next to any additionalContext
            out.setdefault("hookSpecificOutput", {"hookEventName": event}).update(replace)
        note = (await residency_svc.note(st, event, budget=self._budget, transcript_roots=self.cfg.allowed_transcript_roots)
                if self.cfg.residency_note else "")
        if (st.pending_advice or note) and event in MSG_EVENTS:
            out["systemMessage"] = "\n\n".join(x for x in (st.pending_advice, note) if x)
            if st.pending_advice:
                st.note_advised(st.pending_advice_key, st.pending_advice_kind, now)
            st.pending_advice, st.pending_advice_key, st.pending_advice_kind = None, "", ""
            st.pending_advice_urgency = 0
        if not out:
            return M.HookResult()
        return M.HookResult(stdout=_enc.encode(out).decode())

    async def _session_start_context(self, source: str, st: SessionState, now: float) -> str:
        data = await self.readers.run(partial(_session_start_rows, st.project, st.session, source, st.last_archived,
                                              is_stale=self.is_stale))
        if source == "startup" and not (data["timeline"] or data["pending"] or data["decisions_count"]
                                        or data["lessons_count"]):
            return ""  # a project with no memory yet: say nothing (it would be billed every turn)
        budget = self._budget(st)
        if source == "compact" and st.phase.phase:
            # The matrix decides what a compacted window is told it still has: what the phase archives
            # stays recallable only.
            if not MX.listed(str(MX.category("pending", st.phase.phase, self.matrix))):
                data["pending"] = []
            if not MX.listed(str(MX.category("decision", st.phase.phase, self.matrix))):
                data["decisions_count"], data["decisions"] = 0, []
        d_ = R.SessionStartData(
            source=source, project=st.project, phase=st.phase.phase, phase_since=st.phase.since,
            timeline=tuple(data["timeline"]), timeline_session=data["timeline_session"],
            pending=tuple(R.PendingItem(text=p["text"], id=p["ref"]) for p in data["pending"]),
            decisions_count=data["decisions_count"],
            archived=tuple(R.ArchivedItem(id=a["id"], kind=a["kind"], phase=a["phase"], ts=a["ts"],
                                          summary=a["summary"], priority=a["priority"]) for a in data["archived"]),
            recent_decisions=tuple(x["text"] for x in data["decisions"]),
            lessons_count=data["lessons_count"],
            working_pct=budget.working_pct if budget else None,
            level=int(budget.level) if budget else 0,
        )
        ctx = R.render_session_start(d_, cap_tokens=self.cfg.inject_cap_tokens, now=now, ctl=ctl_command(),
                                     previous=st.last_briefing if source == "resume" else "")
        if ctx:
            # What the session's context now holds of ours: a resume briefs only what differs from it.
            st.last_briefing = ctx if source != "resume" else _merge_briefing(st.last_briefing, ctx)
        elif source != "resume":
            st.last_briefing = ""
        return ctx

    # -- status --------------------------------------------------------------------------------
    def session_view(self, row: dict[str, Any], *, where: bool = False, survival: bool = False) -> M.SessionView:
        st = self.sessions.get(row["session"]) or load(row["state"])
        v = M.SessionView(session=row["session"], project=row["project"], events=row["events"],
                          first_ts=row["first_ts"], last_ts=row["last_ts"], phase=row["phase"],
                          phase_since=row["phase_since"], model=row["model"], ended=row["ended_ts"] is not None)
        if st is None:
            return v
        v.phase, v.phase_since, v.model = st.phase.phase, st.phase.since, st.model
        b = self._budget(st)
        if b is not None:
            v.window, v.context_tokens, v.estimated = b.window, b.context_tokens, b.estimated
            v.zones = [M.ZoneView(name=z.name, capacity=z.capacity, used=z.used, pct=round(z.pct, 4)) for z in b.zones]
            v.working_pct, v.level = round(b.working_pct, 4), int(b.level)
            v.autocompact_at, v.tokens_to_autocompact = b.autocompact_at, b.tokens_to_autocompact
        v.advice = advice_for(st, b, self.matrix, reason=COST.compact_reason(st, b, self.cfg))
        v.cost = COST.view(st, b, self.cfg)
        v.autocompact_env = COST.overrides(st)
        v.compression = compress.view(st.compressed)
        if where:
            v.where = compaction.where(st)
        if survival:
            v.survival = compaction.survival(st)
        return v

    async def status(self, p: M.StatusParams) -> M.StatusResult:
        project = files.project_root(p.cwd) if p.cwd and not p.project else p.project
        rows = await self.readers.run(partial(queries.sessions, project=project, session=p.session, limit=max(1, min(p.limit, 200))))
        st = await self.readers.run(queries.stats)
        db = self.paths.db
        size = _size(db)
        return M.StatusResult(
            version=__version__, protocol=PROTOCOL_VERSION, pid=os.getpid(),
            uptime_s=round(time.monotonic() - self.started, 3), socket=self.paths.socket, db_path=db,
            db_bytes=size, wal_bytes=_size(db + "-wal"), archive_items=st["archive_items"], events=st["events"],
            spool_ingested=self.spool_ingested, fts_trigram=self.writer.trigram,
            derive_pending=self.backlog.pending(), index_pending=await self.readers.run(tri_backlog.pending),
            derive_failed=self.backlog.failed, maintenance_failed=self.writer.idle_failures,
            maintenance_error=self.writer.last_idle_error if self.writer.idle_failures else "",
            # the residency block and compact instructions: the first (current) session only (they read files)
            sessions=[await self._session_view_full(r, p) if i == 0 else
                      self.session_view(r, where=p.where, survival=p.survival) for i, r in enumerate(rows)],
        )

    async def _session_view_full(self, row: dict[str, Any], p: M.StatusParams) -> M.SessionView:
        v = self.session_view(row, where=p.where, survival=p.survival)
        st = self.sessions.get(row["session"]) or load(row["state"]) if (p.residency or p.compact_instructions) else None
        if st is not None and p.residency:
            v.residency = residency_svc.view(await residency_svc.report(
                st, budget=self._budget, transcript_roots=self.cfg.allowed_transcript_roots))
        if st is not None and p.compact_instructions:
            v.compact_instructions = await residency_svc.compact_section(self.readers, st)
        return v

    # -- recall --------------------------------------------------------------------------------
    async def recall(self, p: M.RecallParams) -> M.RecallResult:
        if p.id is not None:
            item = await self.readers.run(partial(queries.get_archive, aid=p.id))
            if item is None:
                raise E.NotFound(f"no archived item with id {p.id}")
            md = (f"# #{item['id']} · {item['kind']}" + (f" · {item['phase']}" if item["phase"] else "")
                  + f" · session {item['session'][:8]}\n\n{item['text']}")
            return M.RecallResult(markdown=md, total=1, text=item["text"], hits=[_hit_view(item)])
        try:
            q = parse_recall(p.query)
        except RecallQueryError as exc:
            raise E.BadQuery(str(exc)) from None
        project = None if (p.all_projects or q.all_projects) else (p.project or (files.project_root(p.cwd) if p.cwd else None))
        session = p.session or q.session
        if q.id is not None:
            return await self.recall(M.RecallParams(id=q.id))
        if q.timeline:
            spans = await self.readers.run(lambda c: _timeline(c, project=project, session=session,
                                                               current=session or LATEST))
            return M.RecallResult(markdown=R.render_timeline(spans, self.clock()), total=len(spans))
        if q.decisions and not q.words and not q.phrases:
            rows = await self.readers.run(partial(queries.items, project=project, kind="decision", status=None,
                                                  session=session, limit=200))
            md = R.render_decisions([(r["archive_id"] or r["id"], r["ts"], r["text"]) for r in rows], p.cap_tokens,
                                    ctl=ctl_command())
            return M.RecallResult(markdown=md, total=len(rows))
        kinds: tuple[str, ...] | None = None
        if q.decisions:
            kinds = ("decision",)
        elif q.lessons:
            kinds = ("lesson",)
        elif q.kind:
            kinds = (q.kind,)
        try:
            hits, total = await self.readers.search(partial(
                queries.search, words=q.words, phrases=q.phrases, project=project, session=session, phase=q.phase,
                kinds=kinds, limit=p.limit, trigram=self.writer.trigram))
        except QueryTooBroadError as exc:
            raise E.QueryTooBroad(f"query too broad: {exc}; narrow it (fewer or more specific words, a project,"
                                  " a session, a phase: or type: filter)",
                                  data={"reason": exc.reason, "limit": exc.limit}) from None
        terms = [*q.words, *q.phrases]
        views = []
        rh = []
        for h in hits:
            snip = SUM.snippet(h.get("window", ""), terms) if terms else ""
            views.append(M.RecallHitView(id=h["id"], session=h["session"], project=h["project"], ts=h["ts"],
                                         kind=h["kind"], phase=h["phase"], tool=h["tool"], summary=h["summary"],
                                         snippet=snip, score=round(float(h["score"]), 3),
                                         superseded_by=h.get("superseded_by")))
            rh.append(R.RecallHit(id=h["id"], session=h["session"], project=h["project"], ts=h["ts"], kind=h["kind"],
                                  phase=h["phase"], tool=h["tool"], summary=h["summary"], snippet=snip,
                                  score=float(h["score"])))
        page = None
        if q.phase and not terms and kinds is None:
            # phase:<p> asks what that phase handed off: its page first, then the archive rows.
            page = await self.readers.run(partial(queries.phase_page, project=project, session=session, phase=q.phase))
        if page is not None:
            head = R.render_phase_page(page["id"], page["path"], page["text"], cap_tokens=p.cap_tokens // 2,
                                       ctl=ctl_command())
            rest = R.render_recall(rh, p.query, cap_tokens=p.cap_tokens - estimate_tokens(head) - 2, total=total,
                                   ctl=ctl_command()) if rh else ""
            md = "\n\n".join(x for x in (head, rest) if x)
            views.insert(0, _hit_view({"id": page["id"], "session": page["session"] or "", "project": page["project"],
                                       "ts": page["ts"], "kind": "ledger", "phase": q.phase, "tool": None,
                                       "summary": page["path"]}))
            return M.RecallResult(markdown=md, total=total + 1, hits=views, project=project)
        md = R.render_recall(rh, p.query, cap_tokens=p.cap_tokens, total=total, ctl=ctl_command())
        return M.RecallResult(markdown=md, total=total, hits=views, project=project)

    # -- phase / forget ------------------------------------------------------------------------
    async def phase_set(self, p: M.PhaseSetParams) -> M.PhaseSetResult:
        canonical = PH.parse_phase(p.phase)
        if canonical is None:
            raise E.InvalidParams(f"unknown phase {p.phase!r}; one of planning, design, implementation, testing, review")
        sid = p.session
        if sid is None:
            project = files.project_root(p.cwd) if p.cwd else None
            rows = await self.readers.run(partial(queries.sessions, project=project, limit=1))
            if not rows:
                raise E.NotFound("no session known for this project yet; pass --session")
            sid = rows[0]["session"]
        rows = await self.readers.run(partial(queries.sessions, session=sid, limit=1))
        if not rows and sid not in self.sessions:
            raise E.NotFound(f"unknown session {sid}")
        now = self.clock()
        async with self._lock(sid):
            st = await self._state(sid, rows[0]["project"] if rows else "", "", now)
            old = st.phase.phase
            try:
                st.phase, switch = PH.set_phase(st.phase, p.phase, now, cause="manual")
            except ValueError as exc:
                raise E.InvalidParams(str(exc)) from None
            if switch is not None:
                n, started = st.phase_index, st.phase_started
                st.phase_index += 1
                st.phase_started = now
                await self.writer.run(partial(_store_switch_and_state, st, switch))
                self.spawn(self.ledgers.write_phase, st.session, st.project, n, old, started, now, "manual phase switch")
        return M.PhaseSetResult(session=sid, phase=st.phase.phase, changed=switch is not None)

    async def _end_ledgers(self, session: str, project: str, n: int, phase: str, started: float, now: float) -> None:
        """SessionEnd: the last phase's page, then the roll-up of old session pages (when configured)."""
        await self.ledgers.write_phase(session, project, n, phase, started, now, "session end")
        if self.cfg.memory_keep_sessions > 0:
            await self.ledgers.prune(project, self.cfg.memory_keep_sessions)

    async def memory_prune(self, p: M.MemoryPruneParams) -> M.MemoryPruneResult:
        project = p.project or (files.project_root(p.cwd) if p.cwd else None)
        if not project:
            raise E.InvalidParams("give project or cwd")
        keep = self.cfg.memory_keep_sessions if p.keep is None else p.keep
        if keep < 0:
            raise E.InvalidParams("keep must not be negative")
        r = await self.ledgers.prune(project, keep, dry_run=p.dry_run)
        return M.MemoryPruneResult(
            project=project, rolled_up=r["rolled_up"], sessions=r["sessions"], history=r["history"],
            reason=r["reason"], kept=[M.MemoryKeptView(path=k["path"], why=k["why"]) for k in r["kept"]],
            markdown=_prune_markdown(r, keep, p.dry_run))

    async def forget(self, p: M.ForgetParams) -> M.ForgetResult:
        if p.id is None and p.session is None and p.project is None:
            raise E.InvalidParams("forget needs one of id, session, project")
        ev, ar, texts = await self.writer.run(partial(ops.forget, id=p.id, session=p.session, project=p.project))
        if texts:
            await self._guarded(self.ledgers.forget_decisions, texts)
        if p.session:
            self.sessions.pop(p.session, None)
        if p.project:
            for k in [k for k, v in self.sessions.items() if v.project == p.project]:
                self.sessions.pop(k, None)
        await self.writer.checkpoint("TRUNCATE")
        return M.ForgetResult(events=ev, archive=ar)

    # -- spool ---------------------------------------------------------------------------------
    async def ingest_spool(self) -> int:
        """Ingest events the shim spooled while the daemon was away, from the data dir's spool and the
        runtime dir's fallback spool. Exactly once per request id."""
        n = 0
        for path in dict.fromkeys((self.paths.spool, self.paths.runtime_spool)):
            got = await self._ingest_spool_file(path)
            if got is None:
                break  # storage full: both files are kept and retried later
            n += got
        self.spool_ingested += n
        if n:
            log.info("spool_ingested", events=n)
        return n

    async def _ingest_spool_file(self, path: str) -> int | None:
        """Ingest one spool file; None when storage filled up (the rest of the file is kept)."""
        work = path + ".ingesting"
        if not os.path.exists(work):
            try:
                if os.path.getsize(path) == 0:
                    return 0
                os.rename(path, work)
            except FileNotFoundError:
                return 0
        n = 0
        with open(work, "rb") as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    rec = _decode_spool_line(line)
                    payload = rec["payload"]
                    if not isinstance(payload, dict):
                        continue
                    rid = rec.get("rid") if isinstance(rec.get("rid"), str) else None
                    ts = float(rec.get("ts")) if isinstance(rec.get("ts"), (int, float)) else None
                except (msgspec.DecodeError, KeyError, TypeError, ValueError):
                    log.warning("spool_line_skipped", reason="unreadable")
                    continue
                try:
                    await self.hook(payload, rid=rid, source="spool", ts=ts)
                    n += 1
                except StorageFullError:
                    log.warning("spool_ingest_paused", reason="storage_full")
                    self.spool_ingested += n
                    return None  # keep the file: retried later (request ids make the replay exact)
        os.unlink(work)
        return n


PASSED_TEXT_CHARS = 16 * 1024  # of a passing run's output searched for the test names of pending items
OPEN_ITEMS_CHECKED = 200  # newest open items of a project checked against one event's evidence


def _covers(success_cmd: str, failure_cmd: str) -> bool:
    """A passing run of ``success_cmd`` shows ``failure_cmd``'s failures gone (lessons' test targets)."""
    if success_cmd == failure_cmd:
        return True
    return LS.covers(LS.target_of("Bash", success_cmd), LS.target_of("Bash", failure_cmd))


MAX_TODOS = 16  # open todos of one TodoWrite call kept as pending items


def _open_todos(event: str, payload: dict[str, Any]) -> list[str]:
    """The todos a main-agent TodoWrite call lists as not completed (one line each, bounded)."""
    if event != "PostToolUse" or s(payload.get("agent_id")) or s(payload.get("tool_name")) != "TodoWrite":
        return []
    todos = d(payload.get("tool_input")).get("todos")
    out = []
    for t in todos if isinstance(todos, list) else []:
        if isinstance(t, dict) and t.get("status") in ("pending", "in_progress") and s(t.get("content")).strip():
            text = " ".join(s(t.get("content")).split())
            out.append(text if len(text) <= classify.MAX_FACT_CHARS else text[: classify.MAX_FACT_CHARS - 1] + "…")
    return out[:MAX_TODOS]


def _closing_evidence(event: str, payload: dict[str, Any], facts: list[Element], passed_tests: list[str],
                      passed_text: list[str], said: list[str]) -> PD.Evidence:
    """What this event says about open pending items (core/pending.py routes); ``said``: the texts of
    its prompts and assistant messages."""
    todos: list[str] = []
    edits: list[tuple[str, str]] = []
    done: list[str] = []
    answers: list[str] = []
    settled = [t for text in said[:PD.MAX_EVIDENCE] for t in PD.settled_topics(text)]
    if event == "PostToolUse" and not s(payload.get("agent_id")):
        tool, ti = s(payload.get("tool_name")), d(payload.get("tool_input"))
        if tool == "TodoWrite" and isinstance(ti.get("todos"), list):
            todos = [s(t.get("content")) for t in ti["todos"]
                     if isinstance(t, dict) and t.get("status") == "completed" and s(t.get("content"))]
        elif tool == "Edit":
            edits = [(s(ti.get("old_string")), s(ti.get("new_string")))]
        elif tool == "MultiEdit" and isinstance(ti.get("edits"), list):
            edits = [(s(e.get("old_string")), s(e.get("new_string"))) for e in ti["edits"] if isinstance(e, dict)]
    elif event == "UserPromptSubmit":
        done = PD.done_statements(s(payload.get("prompt")))
        answers = PD.answer_clauses(s(payload.get("prompt")))
    return PD.Evidence(completed_todos=tuple(todos[:64]), decisions=tuple(f.text for f in facts if f.kind is Kind.DECISION),
                       passed_tests=tuple(passed_tests), passed_text="\n".join(passed_text),
                       edits=tuple(edits[:64]), done=tuple(done), settled=tuple(settled), answers=tuple(answers))


def _close_pending(conn: sqlite3.Connection, project: str, ev: PD.Evidence, now: float) -> int:
    """Close the project's open pending items this event's evidence settles (not those it just stated)."""
    rows = conn.execute("SELECT id, text FROM items WHERE project = ? AND kind = 'pending' AND status = 'open'"
                        " AND ts < ? ORDER BY id DESC LIMIT ?", (project, now, OPEN_ITEMS_CHECKED)).fetchall()
    closed = PD.closing([(int(r[0]), r[1]) for r in rows], ev)
    return ops.resolve_items(conn, closed, now) if closed else 0


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


def _decode_spool_line(line: bytes) -> Any:
    """One spool line; text that is not valid Unicode (a lone surrogate, bytes that are not UTF-8:
    the shim writes what Claude Code gave it) is decoded with U+FFFD, as over the socket."""
    try:
        return msgspec.json.decode(line)
    except msgspec.DecodeError:
        fixed = repair_json_text(line)
        if fixed is None:
            raise
        return msgspec.json.decode(fixed)


def near_autocompact(b: B.Budget) -> bool:
    """Claude Code's auto-compaction is close: within 3 % of the window (at least 10,000 tokens)."""
    return b.tokens_to_autocompact <= max(10_000, b.window * 3 // 100)


def _with_reason(reason: str) -> str:
    return f"; {reason}" if reason else ""


def advice_for(st: SessionState, b: B.Budget | None, matrix: MX.Matrix = MX.DEFAULT, *,
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
    pct = F.percent(b.working_pct)
    focus = "/compact " + MX.focus_line(st.phase.phase, MX.FocusState(
        files=_files_changed(st), failing_tests=list(st.failing_ids)), matrix)
    if near_autocompact(b):
        out.append(f"auto-compaction is {F.tokens(b.tokens_to_autocompact)} tokens away: {focus} now, at a boundary you choose")
    for kind in ("rewind", "clear", "subagent"):
        if kind in st.advice_lines:
            out.append(st.advice_lines[kind])
    if b.level >= Level.L0_L1:
        out.append(f"Working zone at {pct} ({F.level_name(b.level)}): {focus}{_with_reason(reason)}")
    big = [x for x in st.acc.largest if x.tokens >= 10_000 and x.kind in ("file_reads", "tool")][:1]
    if big and "subagent" not in st.advice_lines:
        out.append(f"large reads ({big[0].label}: {F.tokens(big[0].tokens)} tokens) cost every turn: "
                   "delegate such reads to a subagent so only its summary enters the window")
    if not out:
        out.append(f"Working zone at {pct}: no action needed")
    return out


@functools.lru_cache(maxsize=8)
def _matrix_for(overrides: tuple[tuple[str, str, str], ...]) -> MX.Matrix:
    return MX.with_overrides(MX.DEFAULT, overrides) if overrides else MX.DEFAULT


def _files_changed(st: SessionState) -> list[str]:
    """This phase's changed files, most recent first, relative to the project when inside it."""
    root = st.project.rstrip(os.sep) + os.sep if st.project else ""
    return [f[len(root):] if root and f.startswith(root) else f for f in reversed(st.files_touched)]


def _working_tokens(b: B.Budget) -> int:
    """What the Working zone holds (uncapped)."""
    return int(b.working_pct * b.zones[2].capacity)


def _pending_advice(st: SessionState) -> ADV.Advice | None:
    if not st.pending_advice:
        return None
    return ADV.Advice(kind=st.pending_advice_kind, key=st.pending_advice_key, reason="", command="",
                      urgency=st.pending_advice_urgency)


def _earlier_prompts(session: str, conn: sqlite3.Connection) -> list[str]:
    """The session's last prompts before the newest one (the one being answered)."""
    rows = conn.execute("SELECT text FROM archive WHERE session = ? AND kind = 'prompt' ORDER BY id DESC"
                        " LIMIT 4 OFFSET 1", (session,)).fetchall()
    return [r[0][:2000] for r in rows]


def _focus_rows(session: str, project: str, conn: sqlite3.Connection) -> dict[str, list[dict[str, Any]]]:
    return {kind: queries.items(conn, project=project, kind=kind, status="open" if kind == "pending" else None,
                                session=session, limit=8)
            for kind in ("decision", "constraint", "pending")}


def _redact_delta(delta: T.TranscriptDelta) -> T.TranscriptDelta:
    """Transcripts hold secrets too: redact every text a delta carries before it is kept anywhere."""
    def red(text: str) -> str:
        return redact(text)[0] if text else text

    delta.elements = [msgspec.structs.replace(e, text=red(e.text), command=red(e.command) if e.command else e.command)
                      for e in delta.elements]
    delta.compact_summaries = [red(x) for x in delta.compact_summaries]
    delta.injected = [msgspec.structs.replace(i, text=red(i.text)) for i in delta.injected]
    return delta


def _element_from_row(r: tuple) -> Element:
    """Rebuild an archived element for ranking: kind, text, and what the classifier's rules need."""
    kind = Kind(r[1]) if r[1] in Kind._value2member_map_ else Kind.TOOL
    text = r[2]
    command = text[2:text.find("\n")] if r[4] == "Bash" and text.startswith("$ ") else None
    is_error = kind is Kind.ERROR or "\n[error]\n" in text[:8192]
    passed = T.test_outcome(text, is_error) if kind is Kind.TEST_RESULT else None
    return Element(uid=str(r[0]), kind=kind, text=text, ts=r[3], tool=r[4], file_path=r[5],
                   command=command if command is None or "\n" not in command else command.split("\n", 1)[0],
                   is_error=is_error, passed=passed, tokens=estimate_tokens(text))


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _hit_view(item: dict[str, Any]) -> M.RecallHitView:
    return M.RecallHitView(id=item["id"], session=item["session"], project=item["project"], ts=item["ts"],
                           kind=item["kind"], phase=item["phase"], tool=item["tool"], summary=item["summary"])


# -- writer jobs (run on the writer thread, inside its transaction) ---------------------------
def _store_event_only(row: ops.EventRow, conn: sqlite3.Connection) -> int:
    eid = ops.insert_event(conn, row)
    if eid:
        ops.touch_session(conn, session=row.session, project=row.project, cwd=row.cwd, transcript_path=None, ts=row.ts)
    return eid


def _store_ack(row: ops.EventRow, conn: sqlite3.Connection) -> int:
    """The acknowledgement's whole write: the event, pending (its session row follows with the derivation)."""
    return ops.insert_event(conn, dataclasses.replace(row, pending=True))


def _store_hook(conn: sqlite3.Connection, *, row: ops.EventRow | None, eid: int | None, now: float, st: SessionState,
                elements: list[Element], facts: list[Element], phase: str, switch: Any,
                priority: Callable[[Element], int], summaries: list[str], state_blob: bytes,
                closing: PD.Evidence | None = None) -> int | None:
    if row is not None:
        eid = ops.insert_event(conn, row)
        if eid == 0:
            return None
    elif eid is None or not ops.finish_pending(conn, eid):
        return None
    ops.touch_session(conn, session=st.session, project=st.project, cwd=st.cwd,
                      transcript_path=st.transcript_path, ts=now)
    for el, summ in zip(elements, summaries, strict=True):
        ops.insert_archive(conn, ops.ArchiveRow(
            session=st.session, project=st.project, ts=el.ts or now, kind=str(el.kind), text=el.text,
            summary=summ, phase=phase, tool=el.tool, file_path=el.file_path, uid=el.uid, event_id=eid,
            priority=priority(el), level=0, truncated="characters cut by ctxlifed" in el.text))
    for f in facts:
        aid, _ = ops.insert_archive(conn, ops.ArchiveRow(
            session=st.session, project=st.project, ts=now, kind=str(f.kind), text=f.text, phase=phase,
            uid=f.uid, event_id=eid, priority=priority(f), level=0, summary=f.text[:280]))
        ops.upsert_item(conn, project=st.project, session=st.session, kind=FACT_KINDS.get(f.kind, str(f.kind)),
                        text=f.text, ts=now, phase=phase, archive_id=aid)
    if closing is not None and not closing.empty():
        _close_pending(conn, st.project, closing, now)
    if switch is not None:
        ops.insert_phase_switch(conn, session=st.session, project=st.project, ts=switch.ts,
                                from_phase=switch.from_phase, to_phase=switch.to_phase, cause=switch.cause,
                                evidence=msgspec.json.encode(list(switch.evidence)).decode())
    _save_state(st, conn, blob=state_blob)
    return eid


def _save_state(st: SessionState, conn: sqlite3.Connection, *, blob: bytes | None = None) -> None:
    ops.save_session_state(conn, session=st.session, phase=st.phase.phase, phase_since=st.phase.since,
                           model=st.model, state=blob if blob is not None else dump(st), ended_ts=st.ended_ts)


def _store_switch_and_state(st: SessionState, switch: Any, conn: sqlite3.Connection) -> None:
    ops.insert_phase_switch(conn, session=st.session, project=st.project, ts=switch.ts,
                            from_phase=switch.from_phase, to_phase=switch.to_phase, cause=switch.cause,
                            evidence=msgspec.json.encode(list(switch.evidence)).decode())
    _save_state(st, conn)


def _apply_compression(updates: list[tuple[int, str, str, int]], level: int, conn: sqlite3.Connection) -> None:
    conn.executemany("UPDATE archive SET summary=?, category=?, priority=?, level=max(level, ?) WHERE id=?",
                     [(sm, cat, pr, 1 if cat in ("summarize", "keep") else 2, aid) for aid, sm, cat, pr in updates])


# -- read jobs ---------------------------------------------------------------------------------
def _pending_payload(eid: int, conn: sqlite3.Connection) -> bytes | None:
    row = conn.execute("SELECT payload FROM events WHERE id = ? AND pending = 1", (eid,)).fetchone()
    return None if row is None else bytes(row[0])


def _pending_rows(conn: sqlite3.Connection) -> list[tuple]:
    return conn.execute("SELECT id, session, project, cwd, event, ts FROM events WHERE pending = 1"
                        " ORDER BY id").fetchall()


async def _no_pause() -> None:
    return None


def _window_rows(session: str, after_id: int, conn: sqlite3.Connection) -> list[tuple]:
    return conn.execute(
        "SELECT id, kind, substr(text, 1, 65536), ts, tool, file_path FROM archive"
        " WHERE session = ? AND id > ? ORDER BY id DESC LIMIT 5000", (session, after_id)).fetchall()


def _merge_briefing(previous: str, delta: str) -> str:
    """The briefings a resumed session holds: the earlier ones and the delta just given (bounded)."""
    both = f"{previous}\n{delta}" if previous else delta
    return both[-2 * R.MAX_CHARS:]


LATEST = "\x00latest"  # _timeline: the most recently active session is the current one
_L2_TRAILER = re.compile(r"\s*\[L2 #\d+\]\s*$")


def _session_spans(session: str, switches: list[dict[str, Any]], first_phase: str | None, first_ts: float | None,
                   last_end: float | None) -> list[R.PhaseSpan]:
    """One session's phases, oldest first: the phase it began in (the first switch's ``from_phase``,
    or the only phase when it never switched) from the session's first event, then one span per
    switch. ``last_end``: when the last phase ended (None while it is the current one)."""
    spans: list[R.PhaseSpan] = []
    begin = switches[0]["from_phase"] if switches else first_phase
    if begin and first_ts is not None and (not switches or first_ts < switches[0]["ts"]):
        spans.append(R.PhaseSpan(phase=begin, start=first_ts, cause=f"start of session {session[:8]}"))
    spans += [R.PhaseSpan(phase=x["to_phase"], start=x["ts"], cause=x["cause"] or "") for x in switches]
    if spans and last_end is not None:
        spans[-1] = msgspec.structs.replace(spans[-1], end=max(last_end, spans[-1].start))
    return spans


def _timeline(conn: sqlite3.Connection, *, project: str | None, session: str | None, current: str | None,
              max_sessions: int = 50) -> list[R.PhaseSpan]:
    """The phase timeline of one session, or of a project's (every project's) sessions, oldest first.
    Only ``current`` (the session asking; ``LATEST``: the most recently active one) may end in an open
    span; another session's last phase ends at its end, or its last event."""
    rows = queries.sessions(conn, project=project, session=session, limit=max_sessions)
    if current == LATEST:
        current = rows[0]["session"] if rows else None
    spans: list[R.PhaseSpan] = []
    for row in sorted(rows, key=lambda r: r["first_ts"] or 0):
        sw = queries.phase_switches(conn, project=None, session=row["session"], limit=200)
        end = None if row["session"] == current and row["ended_ts"] is None else (row["ended_ts"] or row["last_ts"])
        spans += _session_spans(row["session"], sw, row["phase"], row["first_ts"], end)
    return sorted(spans, key=lambda x: x.start)


def _session_start_rows(project: str, session: str, source: str, archived: list[int],
                        conn: sqlite3.Connection, *, is_stale: Callable[[dict[str, Any]], bool] | None = None
                        ) -> dict[str, Any]:
    timeline: list[R.PhaseSpan] = []
    timeline_session = ""
    if source != "clear":
        timeline = _timeline(conn, project=None, session=session, current=session)
        if source == "startup":
            # A new session has one phase so far: where the project's last session went says more.
            earlier = [r for r in queries.sessions(conn, project=project, limit=2) if r["session"] != session]
            if earlier:
                timeline = _timeline(conn, project=None, session=earlier[0]["session"], current=None)
                timeline_session = earlier[0]["session"]
            elif len(timeline) < 2:
                timeline = []
    pending = [p for p in queries.pending_items(conn, project=project, status="open", limit=64)
               if not (is_stale and is_stale(p))][:8]
    decisions = queries.items(conn, project=project, kind="decision", status=None, limit=5)
    arch = []
    if source == "compact" and archived:
        marks = ",".join("?" * len(archived))
        kinds = sorted(str(k) for k in COMPACT_LISTED_KINDS)
        rows = conn.execute(
            f"SELECT id, kind, phase, ts, summary, priority FROM archive WHERE id IN ({marks})"
            f" AND kind IN ({','.join('?' * len(kinds))}) ORDER BY priority DESC, id DESC",
            (*archived, *kinds)).fetchall()
        arch = [dict(zip(("id", "kind", "phase", "ts", "summary", "priority"), r, strict=True)) for r in rows]
        for a in arch:
            a["summary"] = _L2_TRAILER.sub("", a["summary"] or "")  # the list names the id itself
    return {
        "timeline": timeline, "timeline_session": timeline_session, "pending": pending, "decisions": decisions,
        "archived": arch, "decisions_count": queries.count_items(conn, project=project, kind="decision"),
        "lessons_count": conn.execute("SELECT count(*) FROM lessons WHERE project = ?", (project,)).fetchone()[0],
    }
