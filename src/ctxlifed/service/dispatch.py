"""JSON-RPC method -> handler: one table (``ROUTES``), no chain of ``if method ==``.

Rules:
- Every method of ``protocol/_methods.py`` has exactly one route here; a method without one is
  ``MethodNotFound`` (``decode_params`` has refused unknown names before).
- A route's ``wait`` says how long a read waits for the derivation backlog first, so it sees every
  acknowledged event (``Service.wait_derived``): ``NO_WAIT`` for the liveness methods and hooks,
  ``READ_WAIT_S`` (bounded) for reads, ``None`` (until done) for ``forget``, which must find every row
  of what it deletes.
- A handler receives the Service, the decoded params and the request id; it returns the result
  Struct or raises a ``protocol._errors`` error.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import PROTOCOL_VERSION, __version__
from ..protocol import _errors as errors
from ..protocol import _methods as methods
from . import derive, reads

if TYPE_CHECKING:
    from .app import Service

Handler = Callable[["Service", Any, Any], Awaitable[Any]]
NO_WAIT = -1.0  # a route that does not wait for the derivation backlog


@dataclass(frozen=True)
class Route:
    handler: Handler
    wait: float | None = NO_WAIT  # seconds to wait for the backlog; None: until it is empty


async def _hook(svc: Service, p: Any, rid: Any) -> methods.HookResult:
    return await svc.hook(p, rid=rid if isinstance(rid, str) else None)


async def _ping(svc: Service, p: methods.PingParams, rid: Any) -> methods.PingResult:
    return methods.PingResult(version=__version__, pid=os.getpid(), uptime_s=round(time.monotonic() - svc.started, 3))


async def _hello(svc: Service, p: methods.HelloParams, rid: Any) -> methods.HelloResult:
    return methods.HelloResult(version=__version__, protocol=PROTOCOL_VERSION, pid=os.getpid(),
                               compatible=p.protocol in (0, PROTOCOL_VERSION))


async def _shutdown(svc: Service, p: Any, rid: Any) -> methods.ShutdownResult:
    svc.stop_requested.set()
    return methods.ShutdownResult()


async def _status(svc: Service, p: methods.StatusParams, rid: Any) -> methods.StatusResult:
    return await reads.status(svc, p)


async def _recall(svc: Service, p: methods.RecallParams, rid: Any) -> methods.RecallResult:
    return await reads.recall(p, readers=svc.readers, trigram=svc.writer.trigram, clock=svc.clock)


async def _phase_set(svc: Service, p: methods.PhaseSetParams, rid: Any) -> methods.PhaseSetResult:
    return await reads.phase_set(p, registry=svc.registry, readers=svc.readers, writer=svc.writer, clock=svc.clock,
                                 ledgers=svc.ledgers, spawn=svc.spawn)


async def _forget(svc: Service, p: methods.ForgetParams, rid: Any) -> methods.ForgetResult:
    return await reads.forget(p, registry=svc.registry, writer=svc.writer, ledgers=svc.ledgers, guarded=svc.guarded)


async def _pending(svc: Service, p: methods.PendingParams, rid: Any) -> methods.PendingResult:
    return await reads.pending(p, readers=svc.readers, writer=svc.writer, clock=svc.clock, is_stale=svc.is_stale)


async def _lessons(svc: Service, p: methods.LessonsParams, rid: Any) -> methods.LessonsResult:
    return await reads.lessons(svc, p)


async def _memory_prune(svc: Service, p: methods.MemoryPruneParams, rid: Any) -> methods.MemoryPruneResult:
    return await reads.memory_prune(p, ledgers=svc.ledgers, keep_sessions=svc.cfg.memory_keep_sessions)


async def _compactions(svc: Service, p: methods.CompactionsParams, rid: Any) -> methods.CompactionsResult:
    return await reads.compactions(svc, p)


async def _report(svc: Service, p: methods.ReportParams, rid: Any) -> methods.ReportResult:
    return await reads.report(svc, p)


ROUTES: dict[str, Route] = {
    "hook": Route(_hook),
    "ping": Route(_ping),
    "hello": Route(_hello),
    "shutdown": Route(_shutdown),
    "status": Route(_status, derive.READ_WAIT_S),
    "recall": Route(_recall, derive.READ_WAIT_S),
    "phase.set": Route(_phase_set, derive.READ_WAIT_S),
    "forget": Route(_forget, None),
    "pending": Route(_pending, derive.READ_WAIT_S),
    "lessons": Route(_lessons, derive.READ_WAIT_S),
    "memory.prune": Route(_memory_prune, derive.READ_WAIT_S),
    "compactions": Route(_compactions, derive.READ_WAIT_S),
    "report": Route(_report, derive.READ_WAIT_S),
}


async def dispatch(svc: Service, method: str, params: bytes, rid: Any = None) -> Any:
    """Decode ``params`` for ``method`` and run its route."""
    p = methods.decode_params(method, params)
    route = ROUTES.get(method)
    if route is None:
        raise errors.MethodNotFound(f"Method not found: {method}")
    if route.wait != NO_WAIT:
        await svc.wait_derived(route.wait)
    return await route.handler(svc, p, rid)
