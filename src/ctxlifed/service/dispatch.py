"""JSON-RPC method -> handler: one table of ``Route``s (built in ``app.py``: ``ROUTES``), no chain of
``if method ==``.

Rules:
- Every method of ``protocol/_methods.py`` has exactly one route; a method without one is
  ``MethodNotFound`` (``decode_params`` has refused unknown names before).
- A route's ``wait`` says how long a read waits for the derivation backlog first, so it sees every
  acknowledged event (``Service.wait_derived``): ``NO_WAIT`` for the liveness methods and hooks,
  ``READ_WAIT_S`` (bounded) for reads, ``None`` (until done) for ``forget``, which must find every row
  of what it deletes.
- A handler receives the Service, the decoded params and the request id, and passes on to the
  method's module only what it uses; it returns the result Struct or raises a ``protocol._errors``
  error.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..protocol import _errors as errors
from ..protocol import _methods as methods

NO_WAIT = -1.0  # a route that does not wait for the derivation backlog


@dataclass(frozen=True)
class Route:
    handler: Callable[[Any, Any, Any], Awaitable[Any]]  # (service, params, request id) -> result
    wait: float | None = NO_WAIT  # seconds to wait for the backlog; None: until it is empty


async def dispatch(routes: Mapping[str, Route], service: Any, method: str, params: bytes, rid: Any, *,
                   wait_derived: Callable[[float | None], Awaitable[None]]) -> Any:
    """Decode ``params`` for ``method`` and run its route."""
    p = methods.decode_params(method, params)
    route = routes.get(method)
    if route is None:
        raise errors.MethodNotFound(f"Method not found: {method}")
    if route.wait != NO_WAIT:
        await wait_derived(route.wait)
    return await route.handler(service, p, rid)
