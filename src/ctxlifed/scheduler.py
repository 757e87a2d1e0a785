"""Latency priority: who waits for whom, written down once. One ``Scheduler`` per daemon, handed to
the server, the writer, the derivation backlog and the service in their constructors.

Rules (highest priority first):
1. **Hook answers** wait for nothing below them. The server tells the scheduler when it begins
   and ends answering a frame (``request_began``/``request_ended``) and how many connections are
   open (``connection_opened``/``connection_closed``). A request that begins interrupts idle work
   at once (the idle worker's ``preempt``). A connection alone on the daemon (``alone``) may have
   its acknowledgement committed inline, on the event loop, instead of queued to the writer thread.
2. **Reads** (recall, status, lessons, ...) come next. A read first waits for the derivation
   backlog, at most ``read_wait_s(method)``, and while anybody waits for it (a read, a sync event
   such as SessionStart or PreCompact, room in a full backlog, the shutdown:
   ``waiting_for_derivation``) the deriver is *urgent*: it runs flat out, replies or not.
   ``forget`` waits for all of it (nothing acknowledged may escape it); the other reads at most
   ``READ_WAIT_S``. A ``recall`` waits only for a backlog of at most ``RECALL_WAIT_JOBS`` jobs
   (what Claude Code's hooks leave between them: then it sees every acknowledged event); a longer
   one (after a burst) it does not wait for at all: it answers at once from what is stored, and
   the deriver stays behind it (a read being answered is a request in progress: rule 3).
   Staleness bound of a recall: it sees every event whose derivation finished, which is every
   event acknowledged before the oldest job of the backlog; what it may miss is that backlog, only
   when it is longer than ``RECALL_WAIT_JOBS`` (at most ``derive.MAX_BACKLOG`` events; ``status``
   shows it as ``derive_pending``; it drains at the derivation rate, measured in ``bench/RESULTS.md``).
3. **The derivation backlog** runs only when no frame is being answered and none began for
   ``DERIVE_QUIET_S`` (``derive_delay``), unless urgent. When the last reply ends it is woken. A
   connection waiting in a listening socket's queue counts too (the server's probe,
   ``attach_arrival_probe``): the deriver shares the event loop, so the server sees a connection
   only when the deriver lets the loop run; at its next pause the deriver waits for it to begin
   (``DERIVE_QUIET_S`` at most, then as above) instead of running another step first.
4. **Idle work** (the writer's trigram indexing and index merges; checkpoints run from their own
   thread and connection) runs only when no frame is being answered and no hook began for
   ``IDLE_QUIET_S`` (``idle_allowed``), in the writer's gaps: a derivation's writer job queued
   goes first (``db.py``), but idle work does not wait for the whole derivation backlog: a burst's
   catch-up would otherwise write its many small transactions into the word index with no merge
   between them (segments every search walks) and leave the trigram backlog (scanned by substring
   searches meanwhile) for the end. A hook is any frame that is not a read (the dispatcher tells:
   ``hook_began``); a read needs no writer, so reads do not hold idle work off between them (steady
   recalls would leave the backlog to the lag guarantee below alone), though a read that begins
   still stops the step in progress like any frame (``preempt``). The idle
   worker is woken (``wake``) when that becomes true by an event (the last reply ended, the
   backlog emptied); otherwise it asks again on its own poll, and under a load that never goes
   quiet it still runs every ``Writer.IDLE_MAX_LAG_S`` (so its backlog always drains).

The decisions (``derive_delay``, ``idle_allowed``, ``alone``) are pure functions of the counts and
the clock, so tests drive them with a fake clock. The counts change on the event loop;
``idle_allowed`` is also read from the writer thread (plain reads of ints and a float).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from typing import Protocol

import anyio

# Claude Code's hooks pause for the model's turn (hundreds of ms and more) but come ~15-30 ms apart
# in a burst of tool calls: idle work goes to the pauses, not between the hooks of a burst.
IDLE_QUIET_S = 0.05
# Requests of a busy daemon come closer than this; Claude Code's never do (each hook is a process
# start apart): the deriver runs between hooks, not between the frames of a pipelining client.
DERIVE_QUIET_S = 0.002
READ_WAIT_S = 5.0  # a read's wait for the derivation backlog (status then reports what is pending)
RECALL_WAIT_JOBS = 16  # a longer backlog a recall does not wait for (rule 2)


class IdleWorker(Protocol):
    """What the scheduler tells the worker doing idle work (the writer)."""

    def preempt(self) -> None:
        """A request began: stop the idle step in progress."""

    def nudge(self) -> None:
        """Idle work may run now (instead of at the worker's next poll)."""


class Scheduler:
    def __init__(self, *, clock: Callable[[], float] = time.monotonic,
                 idle_quiet_s: float = IDLE_QUIET_S, derive_quiet_s: float = DERIVE_QUIET_S) -> None:
        self.clock = clock
        self.idle_quiet_s = idle_quiet_s
        self.derive_quiet_s = derive_quiet_s
        self.answering = 0  # frames being handled or answered (until the reply is written)
        self.last_request = -math.inf  # clock time the last frame began to be handled
        self.last_hook = -math.inf  # clock time the last frame that is not a read was dispatched
        self.connections = 0  # connections open on the server
        self.derivations = 0  # derivation jobs queued (the backlog tells)
        self.urgent = 0  # waiters for the derivation backlog: while > 0 the deriver runs flat out
        self._arrival_probe: Callable[[], bool] = lambda: False
        self._workers: list[IdleWorker] = []
        self._go: anyio.Event | None = None  # a paused deriver waits on it (made lazily: no loop needed)

    # -- the pure decisions ----------------------------------------------------------------------
    def alone(self) -> bool:
        """At most one connection open (the one asking): nobody else's reply waits behind it."""
        return self.connections <= 1

    def derive_delay(self, now: float, arriving: bool = False) -> float | None:
        """How long the deriver must still wait: 0 = run now; None = until the replies in progress
        end (``request_ended`` wakes it); else that many seconds (or until woken). ``arriving``: a
        connection waits to be accepted (the probe's answer)."""
        if self.urgent:
            return 0.0
        if self.answering:
            return None
        if arriving:
            return self.derive_quiet_s  # let it begin (then: until its reply ends)
        since = now - self.last_request
        return 0.0 if since >= self.derive_quiet_s else self.derive_quiet_s - since

    @staticmethod
    def read_wait_s(method: str, backlog: int) -> float | None:
        """How long a read waits for a derivation backlog of ``backlog`` jobs before it answers
        (None: until it is derived; 0: not at all)."""
        if method == "forget":
            return None
        if method == "recall" and backlog > RECALL_WAIT_JOBS:
            return 0.0
        return READ_WAIT_S

    def idle_allowed(self, now: float | None = None) -> bool:
        """Idle work may run: no reply, no hook for ``idle_quiet_s`` (reads between them do not
        count; queued derivations neither: rule 4)."""
        if self.answering:
            return False
        return (self.clock() if now is None else now) - self.last_hook >= self.idle_quiet_s

    # -- told by the server ------------------------------------------------------------------------
    def request_began(self) -> None:
        self.answering += 1
        self.last_request = self.clock()
        for w in self._workers:
            w.preempt()  # idle work yields to replies: stop now

    def hook_began(self) -> None:
        """The frame being handled is not a read (a hook, ``wrap.store``, ...): idle work waits for
        ``idle_quiet_s`` after it (rule 4). Told by the dispatcher, once the method is known."""
        self.last_hook = self.clock()

    def request_ended(self) -> None:
        self.answering -= 1
        if self.answering == 0:
            self._quiet()

    def attach_arrival_probe(self, probe: Callable[[], bool]) -> None:
        """``probe()``: True while a connection waits in a listening socket's queue (rule 3)."""
        self._arrival_probe = probe

    def connection_opened(self) -> None:
        self.connections += 1

    def connection_closed(self) -> None:
        self.connections -= 1

    # -- told by the derivation backlog ------------------------------------------------------------
    def derivations_queued(self, n: int) -> None:
        self.derivations = n
        if n == 0:
            self._quiet()

    @contextlib.contextmanager
    def waiting_for_derivation(self) -> Iterator[None]:
        """Somebody waits for the backlog (a sync event, room in a full backlog, the shutdown):
        the deriver runs flat out meanwhile."""
        self.urgent += 1
        self._wake_deriver()
        try:
            yield
        finally:
            self.urgent -= 1

    async def derive_turn(self) -> None:
        """Return when the deriver may run its next job or step (``derive_delay``)."""
        probed = False  # one wait per turn for a connection on its way: a queue that stays full
        while True:  # (a server out of descriptors) never stops the deriver
            arriving = not probed and self._arrival_probe()
            probed = probed or arriving
            delay = self.derive_delay(self.clock(), arriving)
            if delay == 0.0:
                return
            self._go = go = anyio.Event()
            if delay is None:
                await go.wait()
            else:
                with anyio.move_on_after(delay):
                    await go.wait()  # an urgent waiter cuts the wait short

    # -- the idle worker ---------------------------------------------------------------------------
    def attach_idle_worker(self, worker: IdleWorker) -> None:
        """The worker doing idle work (the writer) is told when to stop and when it may go."""
        self._workers.append(worker)

    # -- notifications -----------------------------------------------------------------------------
    def _wake_deriver(self) -> None:
        if self._go is not None:
            self._go.set()

    def _quiet(self) -> None:
        """No reply in progress (or no derivation left): wake the deriver, and the idle worker if
        idle work may run now."""
        self._wake_deriver()
        if self._workers and self.idle_allowed():
            for w in self._workers:
                w.nudge()
