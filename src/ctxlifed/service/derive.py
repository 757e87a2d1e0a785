"""Write-behind derivation: a hook is acknowledged once its redacted event is committed; deriving
what it means (transcript delta, archive and word index, summaries, facts, phase, budget, lessons,
ledgers) follows off the reply path, in a single background task.

Rules:
- The ack path (``Service.hook``) commits the event row with ``pending = 1`` and answers from
  memory: advice queued by earlier events and a lesson hint computed from the payload. Only events
  whose answer never depends on their own derivation take it (``DEFERRABLE``), and only for a
  session already in memory; the rest (SessionStart, PreCompact, PostCompact, SessionEnd, ...) wait
  for their session's backlog and run the whole path inline.
- One deriver, jobs in commit order (so in order per session), each under the session's derive
  lock; the writer job that stores the derived rows clears ``pending`` in the same transaction, so
  an event is derived exactly once, and a crash leaves it pending for the next start (``recover``).
- Priority to replies: before a job and between its steps (``pause``) the deriver asks the
  daemon's ``Scheduler`` for its turn (the rules are written there: no request being answered and
  none began for ``scheduler.DERIVE_QUIET_S``, unless somebody waits for the backlog: then it runs
  flat out). Its writer jobs are low priority: they go before idle work (trigram indexing, index
  merges), which fills the writer's gaps meanwhile (rule 4). The backlog tells the scheduler how
  many jobs are queued.
  Under a sustained burst the backlog grows (to ``MAX_BACKLOG``, then backpressure) and drains
  when the burst ends; Claude Code's own pace leaves gaps of a process start between hooks.
- SessionStart answers before it reads a transcript it is far behind on (``read_before_answer``):
  a resumed session the daemon has never seen, or lost track of, can hold MBs of lines, and parsing
  them inline delayed Claude Code's briefing by as long (bench/bench_cli_hooks.py). More than ``SESSION_START_READ``
  unread bytes are left to the session's next events (read ``MAX_TRANSCRIPT_READ`` an event, as a
  transcript met late always was); the briefing then has no figure from them yet, never a stale one.
  Every other inline event (PreCompact, PostCompact, SessionEnd) reads all it can, as before.
- Reads (recall, status, lessons, compactions, forget) wait for the backlog first, each at most
  ``Scheduler.read_wait_s`` (rule 2 in ``scheduler.py``: forget for all of it; recall not for a
  burst's backlog: it answers from what is stored; status reports what is still pending).
- Bounded: at ``MAX_BACKLOG`` jobs an acknowledgement first waits for room (``room``: the deriver
  runs flat out meanwhile), so a sustained overload slows answers to the derivation rate instead of
  growing the queue. The first ``KEEP_PAYLOADS`` jobs keep their typed event in memory; later ones
  re-read the stored payload and decode it again. A session somebody waits for (a sync event) is
  derived ahead of the others.
- A job whose derivation raises (a bug, never input: the pure core accepts any payload) is logged
  and its event left as stored raw (``pending`` cleared): one bad event never wedges the backlog.
  A full disk keeps the job and retries after ``RETRY_S``.
"""

from __future__ import annotations

import collections
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.lowlevel
import structlog

from ..core.hook_events import HookEvent, UnknownHook
from ..scheduler import Scheduler
from ..store.db import StorageFullError
from . import files

log = structlog.get_logger("ctxlifed.derive")

# Events answered before they are derived: their answer is advice or a lesson hint, never a
# function of what this event itself changes.
DEFERRABLE = frozenset({
    "PreToolUse", "PostToolUse", "PostToolUseFailure", "PostToolBatch", "UserPromptSubmit",
    "UserPromptExpansion", "Stop", "StopFailure", "SubagentStart", "SubagentStop", "Notification",
    "PermissionRequest", "PermissionDenied", "TaskCreated", "TaskCompleted", "TeammateIdle",
    "CwdChanged", "FileChanged", "ConfigChange", "Elicitation", "ElicitationResult",
    "WorktreeCreate", "WorktreeRemove", "PostModelSwitch",
})
# At most this many unread transcript bytes are read before a SessionStart answer (a usual resume
# or compaction has a few KB to read; a transcript seen for the first time can have MBs).
SESSION_START_READ = 64 << 10
MAX_BACKLOG = 20_000  # ~0.5 KB of memory a job: bounded to ~10 MB
KEEP_PAYLOADS = 256
YIELD_S = 0.001  # a pause runs the event loop once if it has not run for this long
RETRY_S = 1.0


@dataclass(slots=True)
class Job:
    eid: int
    sid: str
    project: str
    cwd: str
    event: str
    ts: float
    hook: HookEvent | UnknownHook | None  # the typed event; None: its payload read back from the store
    lesson: Any = None  # the classified tool event (core.lessons.Ev) the ack path already made
    done: bool = False  # derived (or skipped): left in the global queue, dropped when reached


class Backlog:
    def __init__(self, scheduler: Scheduler | None = None) -> None:
        self.scheduler = scheduler if scheduler is not None else Scheduler()
        self.jobs: collections.deque[Job] = collections.deque()  # commit order, all sessions
        self.by_session: dict[str, collections.deque[Job]] = {}  # the same jobs, per session
        self.queued = 0  # jobs not derived yet (``jobs`` may hold done ones until they are reached)
        self.first: collections.Counter[str] = collections.Counter()  # sessions somebody waits for: first
        self.derived = 0
        self.failed = 0
        self._yielded = 0.0  # monotonic time a pause last let the event loop run
        self._wake = anyio.Event()
        self._changed = anyio.Event()

    def __len__(self) -> int:
        return self.queued

    def full(self) -> bool:
        return self.queued >= MAX_BACKLOG

    def put(self, job: Job) -> None:
        if self.queued >= KEEP_PAYLOADS:
            job.hook = None
        self.jobs.append(job)
        self.by_session.setdefault(job.sid, collections.deque()).append(job)
        self.queued += 1
        self.scheduler.derivations_queued(self.queued)
        self._wake.set()

    def pending(self, sid: str | None = None) -> int:
        if sid is None:
            return self.queued
        q = self.by_session.get(sid)
        return len(q) if q else 0

    async def pause(self) -> None:
        """Let replies go first: wait for the scheduler's turn (``Scheduler.derive_turn``). A pause
        also lets the event loop run when ``YIELD_S`` passed since the last one did: a request that
        arrived meanwhile is not seen (accepted, counted as in progress) until the loop gets to it."""
        now = time.monotonic()
        if now - self._yielded >= YIELD_S:
            self._yielded = now
            await anyio.lowlevel.checkpoint()
        await self.scheduler.derive_turn()

    async def wait(self, sid: str | None = None, timeout: float | None = None) -> bool:
        """Wait until ``sid``'s jobs (all jobs with None) are derived; False on timeout. A session
        waited for is derived first, ahead of older jobs of other sessions."""
        if not self.pending(sid):
            return True
        if sid is not None:
            self.first[sid] += 1
        try:
            with self.scheduler.waiting_for_derivation(), anyio.move_on_after(timeout):
                while self.pending(sid):
                    await self._changed.wait()
                return True
            return False
        finally:
            if sid is not None:
                self.first[sid] -= 1
                if self.first[sid] <= 0:
                    del self.first[sid]

    async def room(self) -> None:
        """Backpressure: while the backlog is full, wait (deriving flat out) until it is not."""
        if not self.full():
            return
        with self.scheduler.waiting_for_derivation():
            while self.full():
                await self._changed.wait()

    def _next(self) -> Job | None:
        for sid in self.first:
            q = self.by_session.get(sid)
            if q:
                return q[0]
        while self.jobs and self.jobs[0].done:
            self.jobs.popleft()
        return self.jobs[0] if self.jobs else None

    def _done(self, job: Job) -> None:
        job.done = True
        q = self.by_session[job.sid]
        q.popleft()  # ``_next`` only ever takes a session's oldest job
        if not q:
            del self.by_session[job.sid]
        self.queued -= 1
        while self.jobs and self.jobs[0].done:
            self.jobs.popleft()
        self._changed.set()
        self._changed = anyio.Event()
        self.scheduler.derivations_queued(self.queued)

    async def run(self, derive: Callable[[Job], Awaitable[None]]) -> None:
        """The deriver: forever, oldest job first (a waited-for session's first)."""
        while True:
            if not self.queued:
                self._wake = anyio.Event()
                await self._wake.wait()
                continue
            await self.pause()
            job = self._next()
            if job is None:
                continue
            try:
                await derive(job)
            except StorageFullError:
                log.warning("derive_paused", reason="storage_full", pending=self.queued)
                await anyio.sleep(RETRY_S)
                continue  # the same job again
            except Exception:  # noqa: BLE001 - derive handles its own failures; this is a last guard
                log.exception("derive_failed", event_id=job.eid)
                self.failed += 1
            self.derived += 1
            self._done(job)


def read_before_answer(event: str, *, deferred: bool, transcript: str | None, offset: int,
                       roots: Callable[[], tuple[str, ...]]) -> bool:
    """Whether deriving ``event`` reads its transcript's new lines now: never for PreToolUse (its
    PostToolUse reads them); for an inline SessionStart only when at most SESSION_START_READ bytes
    are unread (see the module rules); always otherwise."""
    if event == "PreToolUse":
        return False
    if deferred or event != "SessionStart" or not transcript:
        return True
    real = files.transcript_allowed(transcript, roots())
    if real is None:
        return True  # the read records why it cannot
    try:
        size = os.stat(real).st_size
    except OSError:
        return True
    unread = size - offset if size >= offset else size  # shrunk: read again from the start
    if unread <= SESSION_START_READ:
        return True
    log.info("transcript_read_after_answer", hook_event=event, unread=unread)
    return False
