"""``ctxlifectl statusline``: one short line for Claude Code's status bar.

    <python> -I -m ctxlifed.cli.statusline      (what ``ctxlifectl install --statusline`` wires in)

Claude Code runs the status-line command after each message with its status JSON on stdin
(``session_id``, ``cwd``, ``model``, ``context_window``…) and shows the first line of stdout.

Rules:
- Fast: imports only socket/json/os/stat/struct via ``cli.client`` and ``runtime.paths``, and
  ``core.figures`` (stdlib ``math``; no argparse, no msgspec); one ``status`` call with a 0.3 s deadline, to a socket ``cli.client``
  trusts (folder, socket and listener ours; otherwise the line is empty).
- Silent fallback: daemon down, slow, unknown session or bad input -> an empty line and exit 0.
  Never a traceback, never stderr noise.
- Output: ``ctx: <phase> · W <working %> · <level>``, the percentage formatted by ``core.figures``
  like every other figure (so it equals ``status``); the level is ``L0`` below the first
  threshold, else the transition in progress (``L0→L1``, ``L1→L2``, ``L2→L3``).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from ..core.figures import percent

TIMEOUT_S = 0.3
LEVELS = {0: "L0", 1: "L0→L1", 2: "L1→L2", 3: "L2→L3"}
MAX_STDIN = 1 << 20


def render(view: dict[str, Any]) -> str:
    parts = [f"ctx: {view.get('phase') or 'planning'}"]
    if view.get("zones") or view.get("context_tokens") is not None:
        parts.append(f"W {percent(float(view.get('working_pct') or 0.0))}")
        lvl = view.get("level", 0)
        parts.append(LEVELS.get(lvl, f"L{lvl}") if isinstance(lvl, int) else "L0")
    if view.get("ended"):
        parts.append("ended")
    return " · ".join(parts)


def line(stdin_text: str, sock: str | None = None, timeout: float = TIMEOUT_S) -> str:
    """The status line for this status JSON, or '' when anything is missing or down."""
    try:
        data = json.loads(stdin_text) if stdin_text.strip() else {}
    except ValueError:
        return ""
    if not isinstance(data, dict):
        return ""
    sid = data.get("session_id")
    if not isinstance(sid, str) or not sid:
        return ""
    from ..runtime import paths as P
    from .client import DaemonUnavailable, RemoteError, call

    try:
        r = call(sock or P.socket_path(), "status", {"session": sid, "limit": 1}, timeout=timeout)
    except (DaemonUnavailable, RemoteError, OSError, ValueError):
        return ""
    sessions = r.get("sessions") if isinstance(r, dict) else None
    if not isinstance(sessions, list) or not sessions or not isinstance(sessions[0], dict):
        return ""
    return render(sessions[0])


def run(sock: str | None = None) -> int:
    try:
        raw = sys.stdin.buffer.read(MAX_STDIN) if sys.stdin is not None else b""
        text = line(raw.decode("utf-8", "replace"), sock)
    except Exception:  # noqa: BLE001 - a status line never fails loudly
        text = ""
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except OSError:
        pass
    return 0


def cmd_statusline(ns: Any, sock: str) -> int:
    return run(sock)


def register(sub: Any, add: Any) -> None:
    p = add("statusline", "one short line for Claude Code's status bar (reads its status JSON on stdin)")
    p.set_defaults(fn=cmd_statusline)


if __name__ == "__main__":
    code = run(os.environ.get("CTXLIFED_SOCKET") or None)
    sys.stdout.flush()
    os._exit(code)
