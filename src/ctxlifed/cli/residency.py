"""``ctxlifectl doctor --context`` and ``ctxlifectl compact-instructions [--write]``.

Rules:
- ``doctor --context`` reads the user's and the project's files itself (``runtime/residency_files``)
  and checks them (``core/residency``): it works without a daemon. When a daemon knows a session of
  this project, the System zone it measured and the zone's size join the MCP check. Exit 0 (advice,
  not failures).
- ``compact-instructions`` prints a ``# Compact instructions`` section built by the daemon from the
  current session's phase, decisions, pending items, failing tests and changed files, for the user to
  paste into CLAUDE.md. It writes ``<project>/CLAUDE.md`` only with ``--write`` (atomically, the
  section replaced or appended, the rest of the file kept, its mode kept), and says that Claude Code
  reads it at the next ``/clear`` or ``/compact``.
- Imports the estimator (``core.model``, msgspec) only when these commands run; never the server side.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from ..runtime.atomic import write_atomic
from ..runtime.ctl import ctl_command
from .client import DaemonUnavailable, RemoteError, call


def project_dir(start: str) -> str:
    """The git top level above ``start`` (first ``.git`` up the tree), else ``start``."""
    d = os.path.abspath(start)
    while True:
        if os.path.exists(os.path.join(d, ".git")):
            return d
        up = os.path.dirname(d)
        if up == d:
            return os.path.abspath(start)
        d = up


def _session_figures(sock: str, project: str) -> tuple[int | None, int | None, str]:
    """(measured System tokens, System zone capacity, transcript-free note) from the daemon, if any."""
    try:
        r = call(sock, "status", {"cwd": project, "where": True, "limit": 1}, timeout=3)
    except (DaemonUnavailable, RemoteError, OSError):
        return None, None, ""
    sessions = r.get("sessions") or []
    if not sessions:
        return None, None, ""
    v = sessions[0]
    cap = next((z.get("capacity") for z in v.get("zones") or [] if str(z.get("name", "")).lower() == "system"), None)
    where = v.get("where") or {}
    system = next((row.get("tokens") for row in where.get("rows") or [] if row.get("kind") == "system"), None)
    return (system if isinstance(system, int) else None), (cap if isinstance(cap, int) else None), v.get("session", "")


def cmd_context(ns: argparse.Namespace, sock: str) -> int:
    from ..core import residency as R
    from ..runtime import residency_files as RF

    project = project_dir(ns.project_dir or os.getcwd())
    system, cap, session = _session_figures(sock, project)
    rep = RF.gather(project, system_tokens=system, system_capacity=cap)
    if ns.json:
        print(json.dumps({"project": project, "session": session or None, "estimated": True,
                          "listing_tokens": rep.listing_tokens, "instruction_tokens": rep.instruction_tokens,
                          "mcp_tokens": rep.mcp_tokens, "system_tokens": system, "skills": rep.skills,
                          "findings": [f.__dict__ for f in rep.findings]}, indent=2, ensure_ascii=False))
        return 0
    print(f"project {project}")
    print("\n".join(R.render_lines(rep)))
    if rep.warnings:
        print(f"a # Compact instructions section for CLAUDE.md: {ctl_command()} compact-instructions")
    return 0


def cmd_compact_instructions(ns: argparse.Namespace, sock: str) -> int:
    from ..core import residency as R

    params: dict[str, Any] = {"compact_instructions": True, "limit": 1}
    if ns.session:
        params["session"] = ns.session
    else:
        params["cwd"] = os.getcwd()
    r = call(sock, "status", params)
    sessions = r.get("sessions") or []
    if not sessions or not sessions[0].get("compact_instructions"):
        print("ctxlifectl compact-instructions: ctxlifed knows no session of this project yet; run Claude Code here"
              " with ctxlifed's hooks first (see `ctxlifectl doctor`)", file=sys.stderr)
        return 1
    v = sessions[0]
    section = v["compact_instructions"]
    target = os.path.join(v["project"], "CLAUDE.md")
    if ns.json:
        print(json.dumps({"session": v["session"], "project": v["project"], "section": section,
                          "written": target if ns.write else None}, indent=2, ensure_ascii=False))
    if not ns.write:
        if not ns.json:
            print(section, end="")
            print(f"\n(paste it into {target}, or write it there: {ctl_command()} compact-instructions --write)",
                  file=sys.stderr)
        return 0
    if not os.path.isdir(v["project"]):
        print(f"ctxlifectl compact-instructions: {v['project']} is not a folder here", file=sys.stderr)
        return 1
    try:
        with open(target, encoding="utf-8") as f:
            old = f.read()
        mode = os.stat(target).st_mode & 0o777
    except FileNotFoundError:
        old, mode = "", 0o644
    write_atomic(target, R.with_compact_instructions(old, section), mode)
    if not ns.json:
        print(f"wrote the # Compact instructions section into {target}; Claude Code reads it at the next /clear or"
              " /compact (or a new session)")
    return 0


def register(sub: Any, add: Any) -> None:
    p = add("compact-instructions", "a # Compact instructions section for CLAUDE.md from the phase, decisions and"
            " failing tests (printed; --write puts it into CLAUDE.md)")
    p.add_argument("--session")
    p.add_argument("--write", action="store_true", help="write it into the project's CLAUDE.md")
    p.set_defaults(fn=cmd_compact_instructions)
