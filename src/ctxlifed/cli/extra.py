"""Registration point for the Claude Code integration commands (install, plugin, statusline, service, doctor, run).

Rules:
- Each command lives in its own module with a ``register(sub, add)``; all are stdlib-only and never
  import the server side (``server``, ``service``, ``store``).
"""

from __future__ import annotations

from typing import Any


def register(sub: Any, add: Any) -> None:
    from . import doctor, install, plugin, residency, run, service, statusline

    install.register(sub, add)
    plugin.register(sub, add)
    statusline.register(sub, add)
    service.register(sub, add)
    doctor.register(sub, add)
    residency.register(sub, add)
    run.register(sub, add)
