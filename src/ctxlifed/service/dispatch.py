"""JSON-RPC method -> handler: one table of ``Route``s (built in ``app.py``: ``ROUTES``), no chain of
``if method ==``.

Rules:
- Every method of ``protocol/_methods.py`` has exactly one route; a method without one is
  ``MethodNotFound`` (``decode_params`` has refused unknown names before).
- A read route (``read=True``) waits for the derivation backlog first, so it sees every acknowledged
  event (``Service.wait_derived``), as long as the scheduler says (``scheduler.read_wait_s``: bounded;
  ``forget`` until done, recall not for a burst's backlog); the liveness methods, hooks and
  ``wrap.store`` do not wait.
- Every other route is told to the scheduler before it runs (``hook_began``): idle work keeps a
  quiet spell after hooks, not after reads (rule 4 of ``scheduler.py``).
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

@dataclass(frozen=True)
class Route:
    handler: Callable[[Any, Any, Any], Awaitable[Any]]  # (service, params, request id) -> result
    read: bool = False  # waits for the derivation backlog first


async def dispatch(routes: Mapping[str, Route], service: Any, method: str, params: bytes, rid: Any, *,
                   read_wait: Callable[[str], float | None],
                   wait_derived: Callable[[float | None], Awaitable[None]],
                   hook_began: Callable[[], None] = lambda: None) -> Any:
    """Decode ``params`` for ``method`` and run its route."""
    route = routes.get(method)
    if route is None or not route.read:
        hook_began()  # also an unknown method or bad params: only a known read is exempt
    p = methods.decode_params(method, params)
    if route is None:
        raise errors.MethodNotFound(f"Method not found: {method}")
    if route.read:
        await wait_derived(read_wait(method))
    return await route.handler(service, p, rid)
