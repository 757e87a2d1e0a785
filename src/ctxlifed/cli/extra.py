"""Registration point for the Claude Code integration commands (install, statusline, service, doctor)."""

from __future__ import annotations

from typing import Any


def register(sub: Any, add: Any) -> None:
    return None
