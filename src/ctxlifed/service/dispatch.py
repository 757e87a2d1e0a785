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
from . import derive

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


def _read(name: str) -> Handler:
    async def handler(svc: Service, p: Any, rid: Any) -> Any:
        return await getattr(svc, name)(p)
    handler.__name__ = name
    return handler


ROUTES: dict[str, Route] = {
    "hook": Route(_hook),
    "ping": Route(_ping),
    "hello": Route(_hello),
    "shutdown": Route(_shutdown),
    "status": Route(_read("status"), derive.READ_WAIT_S),
    "recall": Route(_read("recall"), derive.READ_WAIT_S),
    "phase.set": Route(_read("phase_set"), derive.READ_WAIT_S),
    "forget": Route(_read("forget"), None),
    "pending": Route(_read("pending"), derive.READ_WAIT_S),
    "lessons": Route(_read("lessons"), derive.READ_WAIT_S),
    "memory.prune": Route(_read("memory_prune"), derive.READ_WAIT_S),
    "compactions": Route(_read("compactions"), derive.READ_WAIT_S),
    "report": Route(_read("report"), derive.READ_WAIT_S),
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
