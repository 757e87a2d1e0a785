"""The scheduler's rules (``ctxlifed.scheduler``), driven with a fake clock: no sleeps, no threads."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

import anyio
import pytest

from ctxlifed import scheduler
from ctxlifed.scheduler import Scheduler


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class Worker:
    def __init__(self) -> None:
        self.told: list[str] = []

    def preempt(self) -> None:
        self.told.append("preempt")

    def nudge(self) -> None:
        self.told.append("nudge")


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def sched(clock: Clock) -> Scheduler:
    return Scheduler(clock=clock, idle_quiet_s=0.05, derive_quiet_s=0.002)


def test_a_fresh_scheduler_lets_everything_run(sched: Scheduler, clock: Clock) -> None:
    assert sched.derive_delay(clock()) == 0.0
    assert sched.idle_allowed()
    assert sched.alone()


def test_the_deriver_waits_for_replies_then_for_a_gap(sched: Scheduler, clock: Clock) -> None:
    sched.request_began()
    assert sched.derive_delay(clock()) is None  # a reply in progress: until it ends
    clock.t += 0.0005
    sched.request_ended()
    assert sched.derive_delay(clock()) == pytest.approx(0.0015)  # the rest of the gap
    clock.t += 0.002
    assert sched.derive_delay(clock()) == 0.0


def test_a_waiter_makes_the_deriver_urgent_even_while_replies_run(sched: Scheduler, clock: Clock) -> None:
    sched.request_began()
    with sched.waiting_for_derivation():
        assert sched.derive_delay(clock()) == 0.0
        with sched.waiting_for_derivation():
            assert sched.urgent == 2
        assert sched.derive_delay(clock()) == 0.0
    assert sched.urgent == 0
    assert sched.derive_delay(clock()) is None


def test_idle_work_waits_for_replies_and_a_quiet_spell_after_hooks(sched: Scheduler, clock: Clock) -> None:
    sched.request_began()
    sched.hook_began()
    assert not sched.idle_allowed()
    sched.request_ended()
    clock.t += 0.04
    assert not sched.idle_allowed()  # a hook began less than idle_quiet_s ago
    clock.t += 0.02
    assert sched.idle_allowed()
    sched.derivations_queued(3)
    assert sched.idle_allowed()  # idle work fills the writer's gaps between derivations (their jobs go first)
    sched.derivations_queued(0)
    assert sched.idle_allowed()
    assert not sched.idle_allowed(now=clock() - 0.02)  # the decision is a function of the time given


def test_reads_stop_idle_work_while_answered_but_leave_no_quiet_spell(sched: Scheduler, clock: Clock) -> None:
    # A recall every 20 ms after a burst: idle work (the trigram backlog) runs between them, never
    # while one is answered; a hook still keeps it off for idle_quiet_s.
    w = Worker()
    sched.attach_idle_worker(w)
    for _ in range(5):
        sched.request_began()  # a read: the dispatcher says nothing more
        assert not sched.idle_allowed()
        assert w.told[-1] == "preempt"  # the step in progress stops for it
        clock.t += 0.005
        sched.request_ended()
        assert sched.idle_allowed()
        assert w.told[-1] == "nudge"  # and goes on at once after it
        clock.t += 0.015
    sched.request_began()
    sched.hook_began()
    sched.request_ended()
    assert not sched.idle_allowed()
    clock.t += 0.02
    sched.request_began()  # a read 20 ms after the hook
    sched.request_ended()
    assert not sched.idle_allowed()  # the hook's quiet spell still runs
    clock.t += 0.031
    assert sched.idle_allowed()


def test_the_idle_worker_is_stopped_by_a_request_and_woken_when_it_may_run(sched: Scheduler, clock: Clock) -> None:
    w = Worker()
    sched.attach_idle_worker(w)
    sched.request_began()
    sched.hook_began()
    assert w.told == ["preempt"]
    sched.request_ended()
    assert w.told == ["preempt"]  # quiet, but not for idle_quiet_s: the worker's own poll finds it later
    sched.derivations_queued(1)
    clock.t += 1.0
    sched.derivations_queued(0)  # the backlog emptied after a quiet spell: idle work may go now
    assert w.told == ["preempt", "nudge"]
    sched.request_began()
    sched.hook_began()
    clock.t += 1.0
    sched.request_ended()  # the last reply ended a long time after it began: wake it
    assert w.told == ["preempt", "nudge", "preempt", "nudge"]


def test_reads_wait_for_the_backlog_but_recall_not_for_a_bursts(sched: Scheduler) -> None:
    assert sched.read_wait_s("forget", 10**6) is None  # nothing acknowledged escapes a forget
    assert sched.read_wait_s("status", 10**6) == scheduler.READ_WAIT_S
    assert sched.read_wait_s("recall", scheduler.RECALL_WAIT_JOBS) == scheduler.READ_WAIT_S  # between hooks
    assert sched.read_wait_s("recall", scheduler.RECALL_WAIT_JOBS + 1) == 0.0  # after a burst: not at all


def test_alone_counts_open_connections(sched: Scheduler) -> None:
    sched.connection_opened()
    assert sched.alone()
    sched.connection_opened()
    assert not sched.alone()
    sched.connection_closed()
    assert sched.alone()


async def _deriver_waits_until(sched: Scheduler, release: Callable[[], AbstractContextManager[object]]) -> None:
    """A deriver blocked in ``derive_turn`` behind a reply in progress goes on once ``release`` happens."""
    sched.request_began()
    passed = anyio.Event()

    async def deriver() -> None:
        await sched.derive_turn()
        passed.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(deriver)
        await anyio.wait_all_tasks_blocked()
        assert not passed.is_set()
        with release(), anyio.fail_after(10):  # a deadline against a hang, not a speed check
            await passed.wait()


@pytest.mark.anyio
async def test_derive_turn_returns_when_the_last_reply_ends(sched: Scheduler, clock: Clock) -> None:
    @contextlib.contextmanager
    def reply_ends() -> Iterator[None]:
        clock.t += 1.0  # the gap after the request has passed by the time it ends
        sched.request_ended()
        yield

    await _deriver_waits_until(sched, reply_ends)


@pytest.mark.anyio
async def test_derive_turn_returns_at_once_for_a_waiter(sched: Scheduler) -> None:
    await _deriver_waits_until(sched, sched.waiting_for_derivation)


def test_a_connection_waiting_to_be_accepted_holds_the_deriver_for_the_gap(sched: Scheduler, clock: Clock) -> None:
    """The deriver shares the event loop with the server: a connection still in the listening queue
    (the server's probe) gets the quiet gap to begin, after which the replies rule as usual."""
    assert sched.derive_delay(clock(), arriving=True) == pytest.approx(0.002)
    assert sched.derive_delay(clock(), arriving=False) == 0.0
    sched.request_began()
    assert sched.derive_delay(clock(), arriving=True) is None


@pytest.mark.anyio
async def test_a_queue_that_stays_full_holds_the_deriver_once_per_turn() -> None:
    """A connection that is never accepted (a server out of descriptors) costs the deriver one gap
    per turn, never its progress."""
    sched = Scheduler(derive_quiet_s=0.001)
    asked: list[bool] = []
    sched.attach_arrival_probe(lambda: asked.append(True) or True)
    with anyio.fail_after(10):  # a deadline against a hang, not a speed check
        await sched.derive_turn()
        await sched.derive_turn()
    assert len(asked) == 2
