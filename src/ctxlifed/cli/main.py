"""ctxlifectl: status, recall, phase, forget, daemon control, Claude Code install, service, doctor.

Rules:
- Talks to the daemon through ``cli.client`` only; never imports ``server``, ``service`` or
  ``store`` (a test checks it). ``daemon start`` launches ``python -m ctxlifed`` as a process.
- Exit codes: 0 ok; 1 daemon down or a remote error (the message says what to do); 2 usage error.
- ``--json`` prints the daemon's result as JSON for scripts; without it output is for humans.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

from .. import __version__
from ..runtime import paths as P
from .client import DaemonUnavailable, RemoteError, call, pid_alive, wait_ready

PHASES = ("planning", "design", "implementation", "testing", "review")


def _fmt_ts(ts: float | None) -> str:
    if not ts:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def _ago(ts: float | None, now: float) -> str:
    if not ts:
        return "-"
    d = max(0, now - ts)
    if d < 90:
        return f"{d:.0f}s ago"
    if d < 5400:
        return f"{d / 60:.0f}m ago"
    if d < 86400 * 2:
        return f"{d / 3600:.1f}h ago"
    return f"{d / 86400:.0f}d ago"


def _bar(pct: float, width: int = 20) -> str:
    n = max(0, min(width, round(pct * width)))
    return "[" + "#" * n + "-" * (width - n) + "]"


def _human_bytes(n: int) -> str:
    x = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if x < 1024 or unit == "GiB":
            return f"{x:.0f} {unit}" if unit == "B" else f"{x:.1f} {unit}"
        x /= 1024
    return f"{n} B"


LEVELS = {0: "none", 1: "L0→L1", 2: "L1→L2", 3: "L2→L3"}


def render_status(r: dict[str, Any], now: float) -> str:
    lines = [
        f"ctxlifed {r['version']} (protocol {r['protocol']}) · pid {r['pid']} · up {r['uptime_s']:.0f}s",
        f"socket  {r['socket']}",
        f"store   {r['db_path']} · {_human_bytes(r['db_bytes'])} (+WAL {_human_bytes(r['wal_bytes'])})"
        f" · {r['archive_items']:,} archived items · {r['events']:,} events"
        + ("" if r.get("fts_trigram", True) else " · trigram index unavailable (CJK search uses substring scan)"),
    ]
    if r.get("derive_pending") or r.get("index_pending"):
        lines.append(f"behind  {r.get('derive_pending', 0):,} events to derive · {r.get('index_pending', 0):,} rows to"
                     " index for substring search (done between hooks; recall already sees them)")
    if r.get("derive_failed"):
        lines.append(f"failed  {r['derive_failed']:,} events could not be derived (kept as stored; see the daemon log)")
    if r.get("maintenance_failed"):
        lines.append(f"failed  {r['maintenance_failed']:,} index maintenance steps (retried every second);"
                     f" last: {r.get('maintenance_error') or '?'}")
    sessions = r.get("sessions") or []
    if not sessions:
        lines.append("no sessions yet: install the hooks with `ctxlifectl install`, then use Claude Code")
    for s in sessions:
        lines.append("")
        state = "ended" if s.get("ended") else "active"
        lines.append(f"session {s['session']} ({state}, {s['events']} events, last {_ago(s['last_ts'], now)})")
        lines.append(f"  project {s['project']}")
        lines.append(f"  phase   {s['phase']} since {_fmt_ts(s.get('phase_since'))}")
        if s.get("context_tokens") is not None and s.get("zones"):
            est = " (estimate)" if s.get("estimated") else ""
            lines.append(f"  model   {s.get('model') or 'unknown'} · window {s['window']:,} · context {s['context_tokens']:,}{est}")
            for z in s["zones"]:
                lines.append(f"  {z['name']:<8}{_bar(min(z['pct'], 1.0))} {z['used']:>9,} / {z['capacity']:>9,}  {z['pct'] * 100:5.1f}%")
            lines.append(f"  level   {LEVELS.get(s['level'], s['level'])} (Working {s['working_pct'] * 100:.1f}%)"
                         f" · auto-compact at {s['autocompact_at']:,}, {max(0, s['tokens_to_autocompact']):,} tokens away")
        for a in s.get("advice") or []:
            lines.append(f"  advice  {a}")
        if s.get("where"):
            lines.append(render_where(s["where"]))
        if s.get("survival"):
            lines.append(render_survival(s["survival"]))
    return "\n".join(lines)


def render_where(w: dict[str, Any]) -> str:
    """The daemon renders the accounting table (``where.table``); indent it under the session."""
    return "\n".join("  " + line for line in str(w.get("table", "")).splitlines())


def render_survival(sv: dict[str, Any]) -> str:
    lines = sv.get("lines") or ["a /compact now would lose nothing that Claude Code does not re-attach"]
    return "\n".join(["  a /compact now:"] + [f"    {line}" for line in lines])


def _client_params(ns: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    return {k: v for k, v in extra.items() if v is not None}


def cmd_status(ns: argparse.Namespace, sock: str) -> int:
    params = _client_params(ns, session=ns.session, cwd=None if (ns.all or ns.session) else os.getcwd(),
                            where=ns.where or None, survival=ns.survival or None)
    r = call(sock, "status", params)
    if ns.all is False and not r.get("sessions") and not ns.session:
        r = call(sock, "status", {})
    if ns.json:
        print(json.dumps(r, indent=2, ensure_ascii=False))
    else:
        print(render_status(r, time.time()))
    return 0


def cmd_recall(ns: argparse.Namespace, sock: str) -> int:
    params: dict[str, Any] = {"query": " ".join(ns.words), "all_projects": ns.all_projects, "limit": ns.limit}
    if ns.id is not None:
        params = {"id": ns.id}
    else:
        if ns.session:
            params["session"] = ns.session
        if not ns.all_projects:
            params["cwd"] = os.getcwd()
        if ns.cap:
            params["cap_tokens"] = ns.cap
    try:
        r = call(sock, "recall", params)
    except RemoteError as exc:
        if exc.name != "query_too_broad" or ns.json:
            raise
        limit = exc.data.get("limit")
        why = (f"it has more than {limit} words and phrases" if exc.data.get("reason") == "terms"
               else f"the search ran past its {limit} s budget" if exc.data.get("reason") == "time" else exc.message)
        print(f"ctxlifectl: query too broad: {why}. Use fewer, more specific words, or narrow it with"
              " a filter (phase:<name>, type:<kind>, session:<id>) or by leaving out --all", file=sys.stderr)
        return 1
    if ns.json:
        print(json.dumps(r, indent=2, ensure_ascii=False))
    else:
        print(r.get("markdown", ""))
    return 0


def cmd_phase(ns: argparse.Namespace, sock: str) -> int:
    params: dict[str, Any] = {"phase": ns.phase}
    if ns.session:
        params["session"] = ns.session
    else:
        params["cwd"] = os.getcwd()
    r = call(sock, "phase.set", params)
    if ns.json:
        print(json.dumps(r, indent=2))
    else:
        print(f"session {r['session']}: phase {r['phase']}" + ("" if r["changed"] else " (unchanged)"))
    return 0


def cmd_forget(ns: argparse.Namespace, sock: str) -> int:
    params = {k: v for k, v in (("id", ns.id), ("session", ns.session), ("project", ns.project)) if v is not None}
    if len(params) != 1:
        print("ctxlifectl forget: give exactly one of --id, --session, --project", file=sys.stderr)
        return 2
    r = call(sock, "forget", params)
    if ns.json:
        print(json.dumps(r))
    else:
        print(f"forgotten: {r.get('events', 0)} events, {r.get('archive', 0)} archived items (WAL checkpointed)")
    return 0


def cmd_lessons(ns: argparse.Namespace, sock: str) -> int:
    params: dict[str, Any] = {"limit": ns.limit, "all_projects": ns.all_projects}
    if not ns.all_projects:
        params["cwd"] = os.getcwd()
    r = call(sock, "lessons", params)
    print(json.dumps(r["lessons"], indent=2, ensure_ascii=False) if ns.json else r["markdown"])
    return 0


def cmd_compactions(ns: argparse.Namespace, sock: str) -> int:
    params: dict[str, Any] = {"limit": ns.limit}
    if ns.session:
        params["session"] = ns.session
    elif not ns.all:
        params["cwd"] = os.getcwd()
    r = call(sock, "compactions", params)
    print(json.dumps(r, indent=2, ensure_ascii=False) if ns.json else r["markdown"])
    return 0


def _daemon_argv(ns: argparse.Namespace) -> list[str]:
    argv = [sys.executable, "-m", "ctxlifed"]
    if ns.socket:
        argv += ["--socket", ns.socket]
    if ns.data_dir:
        argv += ["--data-dir", ns.data_dir]
    if ns.config:
        argv += ["--config", ns.config]
    return argv


def cmd_daemon(ns: argparse.Namespace, sock: str) -> int:
    if ns.action == "ping":
        t0 = time.perf_counter()
        r = call(sock, "ping", {})
        ms = (time.perf_counter() - t0) * 1000
        if ns.json:
            print(json.dumps({**r, "rtt_ms": round(ms, 3)}))
        else:
            print(f"pong from ctxlifed {r['version']} pid {r['pid']} in {ms:.2f} ms")
        return 0
    if ns.action == "restart":
        ns.action = "stop"
        cmd_daemon(ns, sock)
        ns.action = "start"
        return cmd_daemon(ns, sock)
    if ns.action == "stop":
        try:
            r = call(sock, "ping", {}, timeout=2)
        except DaemonUnavailable:
            print("ctxlifed is not running")
            return 0
        call(sock, "shutdown", {})
        pid = int(r["pid"])
        deadline = time.monotonic() + 15
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        print(f"ctxlifed (pid {pid}) stopped" if not pid_alive(pid) else f"ctxlifed (pid {pid}) is still stopping")
        return 0
    # start
    try:
        r = call(sock, "ping", {}, timeout=2)
        print(f"ctxlifed is already running (pid {r['pid']}) at {sock}")
        return 0
    except DaemonUnavailable:
        pass
    data = P.data_dir(ns.data_dir)
    os.makedirs(data, mode=0o700, exist_ok=True)
    logf = os.path.join(data, "ctxlifed.log")
    fd = os.open(logf, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        proc = subprocess.Popen(_daemon_argv(ns), stdin=subprocess.DEVNULL, stdout=fd, stderr=fd,
                                close_fds=True, start_new_session=True, cwd="/")
    finally:
        os.close(fd)
    if wait_ready(sock, timeout=15):
        print(f"ctxlifed started (pid {proc.pid}) at {sock}; log: {logf}")
        return 0
    print(f"ctxlifed did not become ready; see {logf}", file=sys.stderr)
    return 1


def _version_skew(sock: str) -> str | None:
    """A clear message when the daemon runs another version than this ctxlifectl, else None."""
    from .. import PROTOCOL_VERSION

    try:
        r = call(sock, "hello", {"client": "ctxlifectl", "version": __version__, "protocol": PROTOCOL_VERSION}, timeout=2)
    except (DaemonUnavailable, RemoteError):
        return "the daemon does not understand this request and does not answer `hello`: it is much older or newer; restart it: ctxlifectl daemon restart"
    if r.get("version") != __version__ or not r.get("compatible", True):
        return (f"version skew: the daemon is ctxlifed {r.get('version')} (protocol {r.get('protocol')}), this is ctxlifectl "
                f"{__version__} (protocol {PROTOCOL_VERSION}); restart the daemon: ctxlifectl daemon restart")
    return None


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="ctxlifectl", description="Control and query ctxlifed, the context-lifecycle daemon for Claude Code.")
    ap.add_argument("--socket", help="daemon socket (env CTXLIFED_SOCKET)")
    ap.add_argument("--data-dir", help="data folder (env CTXLIFED_DATA_DIR), for `daemon start`")
    ap.add_argument("--config", help="config file (env CTXLIFED_CONFIG), for `daemon start`")
    ap.add_argument("--version", action="version", version=f"ctxlifectl {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True)

    def add(name: str, help_: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_)
        p.add_argument("--json", action="store_true", help="machine-readable output")
        return p

    p = add("status", "daemon, sessions, phase, the four zones, level, advice")
    p.add_argument("--session")
    p.add_argument("--all", action="store_true", help="every project, not just the current one")
    p.add_argument("--where", action="store_true", help="where the context's tokens went")
    p.add_argument("--survival", action="store_true", help="what a /compact now would lose")
    p.set_defaults(fn=cmd_status)

    p = add("recall", "search the archive: <words> | phase:<p> | type:<t> | decisions | timeline")
    p.add_argument("words", nargs="*")
    p.add_argument("--id", type=int, help="print the full text of one archived item")
    p.add_argument("--session")
    p.add_argument("--all-projects", action="store_true")
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--cap", type=int, help="token cap of the Markdown output (default 1200)")
    p.set_defaults(fn=cmd_recall)

    p = add("phase", "set the task phase of the current session")
    p.add_argument("action", choices=["set"])
    p.add_argument("phase", choices=PHASES)
    p.add_argument("--session")
    p.set_defaults(fn=cmd_phase)

    p = add("forget", "delete archived data (and checkpoint the WAL)")
    p.add_argument("--id", type=int)
    p.add_argument("--session")
    p.add_argument("--project")
    p.set_defaults(fn=cmd_forget)

    p = add("lessons", "errors and the fixes that worked, most frequent first")
    p.add_argument("--all-projects", action="store_true")
    p.add_argument("--limit", type=int, default=100)
    p.set_defaults(fn=cmd_lessons)

    p = add("compactions", "per-compaction reports: tokens before/after, archived, kept, lost, re-injected")
    p.add_argument("--session")
    p.add_argument("--all", action="store_true", help="every project")
    p.add_argument("--limit", type=int, default=20)
    p.set_defaults(fn=cmd_compactions)

    p = add("daemon", "start | stop | restart | ping the daemon")
    p.add_argument("action", choices=["start", "stop", "restart", "ping"])
    p.set_defaults(fn=cmd_daemon)

    from . import extra

    extra.register(sub, add)
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    ns = ap.parse_args(argv)
    sock = P.socket_path(ns.socket)
    try:
        return int(ns.fn(ns, sock) or 0)
    except DaemonUnavailable as exc:
        if getattr(ns, "json", False):
            print(json.dumps({"error": {"name": "daemon_unavailable", "message": str(exc)}}))
        print(f"ctxlifectl: {exc}", file=sys.stderr)
        return 1
    except RemoteError as exc:
        if exc.code in (-32601, -32602):
            skew = _version_skew(sock)
            if skew:
                print(f"ctxlifectl: {skew}", file=sys.stderr)
                return 1
        if getattr(ns, "json", False):
            print(json.dumps({"error": {"code": exc.code, "name": exc.name, "message": exc.message}}))
        print(f"ctxlifectl: {exc.name}: {exc.message}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
