"""ctxlifectl: status, recall, phase, forget, pending, memory prune, report, daemon control, Claude Code install, service, doctor.

Rules:
- Figures in ``status`` (percentages, token counts, levels) are formatted by ``core.figures``'
  percent/tokens/level_name, the path every text of the daemon uses, so they equal ``status --json``.
- Talks to the daemon through ``cli.client`` only; never imports ``server``, ``service`` or
  ``store`` (a test checks it). ``daemon start`` launches ``python -m ctxlifed`` as a process.
- ``daemon stop`` returns once the daemon released its locks (``runtime.lock``), not when ``kill -0``
  stops finding it: an exited daemon stays a zombie until its parent (often init) reaps it.
  ``daemon start``/``stop`` find a daemon serving the data dir on another socket through
  ``<data>/ctxlifed.lock``.
- Exit codes: 0 ok; 1 daemon down or a remote error (the message says what to do); 2 usage error.
- ``--json`` prints the daemon's result as JSON for scripts; without it output is for humans.
- ``report --html FILE`` writes one self-contained page (``core.report``), 0600; ``--open`` opens it
  with the platform's browser (a local file: nothing leaves the machine).
- ``status`` also shows what the hook shim left on disk (``cli.shimstate``: events it could keep
  nowhere, its runtime-dir spool, a daemon marked stalled), read client-side; with the daemon down
  those lines go to stderr with the error.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from typing import Any

from .. import __version__
from ..core import figures as F
from ..runtime import paths as P
from ..runtime.ctl import ctl_command
from . import shimstate
from .client import DaemonUnavailable, RemoteError, UntrustedSocket, call, pid_alive, wait_ready

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
            lines.append(f"  model   {s.get('model') or 'unknown'} · window {F.tokens(s['window'])}"
                         f" · context {F.tokens(s['context_tokens'])}{est}")
            for z in s["zones"]:
                lines.append(f"  {z['name']:<8}{_bar(min(z['pct'], 1.0))} {F.tokens(z['used']):>9} /"
                             f" {F.tokens(z['capacity']):>9}  {F.percent(z['pct']):>6}")
            lines.append(f"  level   {F.level_name(s['level'])} (Working {F.percent(s['working_pct'])})"
                         f" · auto-compact at {F.tokens(s['autocompact_at'])},"
                         f" {F.tokens(max(0, s['tokens_to_autocompact']))} tokens away"
                         + (" (" + ", ".join(f"{k}={v}" for k, v in s["autocompact_env"].items()) + ")"
                            if s.get("autocompact_env") else ""))
        if s.get("cost"):
            if s["cost"].get("turns"):  # before any response there is nothing to price yet
                lines += render_cost(s["cost"])
        comp = s.get("compression") or {}
        if comp.get("replaced"):
            kinds = ", ".join(f"{k} {F.tokens(v['saved_tokens'])} ({v['replaced']})"
                              for k, v in (comp.get("by_kind") or {}).items())
            lines.append(f"  digests {F.tokens(comp['saved_tokens'])} tokens kept out of the window:"
                         f" {comp['replaced']} outputs replaced by their digest ({kinds})")
        for a in s.get("advice") or []:
            lines.append(f"  advice  {a}")
        if s.get("where"):
            lines.append(render_where(s["where"]))
        if s.get("survival"):
            lines.append(render_survival(s["survival"]))
    return "\n".join(lines)


def render_cost(c: dict[str, Any]) -> list[str]:
    """The session's cost lines (money through ``core.figures.usd``, as everywhere)."""
    lines = [f"  cost    {F.usd(c['usd'])} so far over {c['turns']} turns · what stays resident costs"
             f" {F.usd(c['resident_turn_usd'])} a turn (cache read) · last turn {F.usd(c['last_turn_usd'])}"
             f" · {F.usd(c['model_price'])}/MTok input ({c['price_source']}, prices of {c['prices_taken']})"]
    if c.get("cache_expired"):
        lines.append("  resume  the prompt cache has likely expired: the next turn re-writes the context"
                     + (f" (≈{F.usd(c['resume_write_usd'])})" if c.get("resume_write_usd") is not None else ""))
    if c.get("live_saved_tokens"):
        lines.append(f"  live    compression kept {F.tokens(c['live_saved_tokens'])} tokens out of the window,"
                     f" saving {F.usd(c['live_saved_usd'])}")
    for sv in c.get("savings") or []:
        lines.append(f"  save    {sv['reason']}" + (" (estimate)" if sv.get("estimated") else ""))
    return lines


def render_where(w: dict[str, Any]) -> str:
    """The daemon renders the accounting table (``where.table``); indent it under the session."""
    return "\n".join("  " + line for line in str(w.get("table", "")).splitlines())


def render_survival(sv: dict[str, Any]) -> str:
    lines = sv.get("lines") or ["a /compact now would lose nothing that Claude Code does not re-attach"]
    return "\n".join(["  a /compact now:"] + [f"    {line}" for line in lines])


def _client_params(ns: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    return {k: v for k, v in extra.items() if v is not None}


def render_shim(st: shimstate.ShimState, now: float) -> list[str]:
    """What the hook shim left behind (read client-side), one line each; none when all is well."""
    lines = []
    if st.dropped:
        lines.append(f"dropped {st.dropped:,} hook events could be kept nowhere (no daemon and no spool could be"
                     f" written; last {_ago(st.dropped_at, now)}): see `ctxlifectl doctor`")
    if st.runtime_spool_bytes:
        lines.append(f"spooled {_human_bytes(st.runtime_spool_bytes)} of events in {st.runtime_spool} (the data folder"
                     " could not be written)")
    if st.stalled_since:
        lines.append(f"stalled the daemon missed a hook's deadline {_ago(st.stalled_since, now)}; hooks spool until"
                     " it answers in time")
    return lines


def render_residency(r: dict[str, Any]) -> list[str]:
    """The current session's residency block (``status``): its summary and what to fix, one line each."""
    sessions = r.get("sessions") or []
    res = sessions[0].get("residency") if sessions else None
    if not res:
        return []
    warns = [f for f in res.get("findings") or [] if f.get("level") == "warn"]
    resident = sum(int(res.get(k) or 0) for k in ("listing_tokens", "instruction_tokens", "mcp_tokens"))
    if not warns and not resident:
        return []  # no skills, instructions or MCP servers resident: nothing to say
    lines = [f"  residency  {res['lines'][0]}" if res.get("lines") else "  residency"]
    lines += [f"    {f['subject']}: {f['message']}" + (f" — fix: {f['fix']}" if f.get("fix") else "") for f in warns[:6]]
    if len(warns) > 6:
        lines.append(f"    … {len(warns) - 6} more")
    if warns:
        lines.append(f"    all of them: {ctl_command()} doctor --context")
    return lines


def cmd_status(ns: argparse.Namespace, sock: str) -> int:
    params = _client_params(ns, session=ns.session, cwd=None if (ns.all or ns.session) else os.getcwd(),
                            where=ns.where or None, survival=ns.survival or None,
                            residency=None if ns.all else True)
    shim = shimstate.read(P.data_dir(ns.data_dir), os.path.dirname(sock))
    try:
        r = call(sock, "status", params)
        if ns.all is False and not r.get("sessions") and not ns.session:
            r = call(sock, "status", {})
    except DaemonUnavailable:
        for line in render_shim(shim, time.time()):
            print(f"ctxlifectl: {line}", file=sys.stderr)
        raise
    if ns.json:
        print(json.dumps({**r, "shim": {"dropped": shim.dropped, "runtime_spool_bytes": shim.runtime_spool_bytes,
                                        "stalled_since": shim.stalled_since}}, indent=2, ensure_ascii=False))
    else:
        print("\n".join([render_status(r, time.time()), *render_residency(r), *render_shim(shim, time.time())]))
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
        if not r.get("total") and r.get("project") and ns.id is None:
            print(f"Searched project {r['project']} only (the project of the current folder); search every project:"
                  f" {ctl_command()} {shlex.join(['recall', '--all-projects', *ns.words])}")
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


def _show(answer: dict[str, Any], *, as_json: bool) -> None:
    """A read's answer as the user asked for it: the whole JSON, or its Markdown."""
    print(json.dumps(answer, indent=2, ensure_ascii=False) if as_json else answer["markdown"])


def cmd_pending(ns: argparse.Namespace, sock: str) -> int:
    params: dict[str, Any] = {"limit": ns.limit, "all": ns.all, "all_projects": ns.all_projects}
    if ns.resolve is not None:
        params["resolve"] = ns.resolve
    if not ns.all_projects:
        params["cwd"] = os.getcwd()
    r = call(sock, "pending", params)
    _show(r, as_json=ns.json)
    return 0


def cmd_compactions(ns: argparse.Namespace, sock: str) -> int:
    params: dict[str, Any] = {"limit": ns.limit}
    if ns.session:
        params["session"] = ns.session
    elif not ns.all:
        params["cwd"] = os.getcwd()
    r = call(sock, "compactions", params)
    _show(r, as_json=ns.json)
    return 0


def cmd_memory(ns: argparse.Namespace, sock: str) -> int:
    if ns.keep is not None and ns.keep < 0:
        print("ctxlifectl memory prune: --keep must not be negative", file=sys.stderr)
        return 2
    params: dict[str, Any] = {"cwd": os.getcwd(), "dry_run": ns.dry_run}
    if ns.keep is not None:
        params["keep"] = ns.keep
    r = call(sock, "memory.prune", params)
    _show(r, as_json=ns.json)
    return 0


def cmd_report(ns: argparse.Namespace, sock: str) -> int:
    from ..core import report as RP

    params: dict[str, Any] = {"session": ns.session} if ns.session else {"cwd": os.getcwd()}
    r = call(sock, "report", params)
    if ns.json:
        print(json.dumps(r, indent=2, ensure_ascii=False))
        return 0
    if not ns.html:
        if ns.open:
            print("ctxlifectl report: --open needs --html FILE", file=sys.stderr)
            return 2
        print(RP.render_terminal(r))
        return 0
    path = os.path.abspath(ns.html)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(RP.render_html(r))
    print(f"report written to {path}")
    if ns.open:
        import webbrowser

        webbrowser.open("file://" + path)
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


def _data_dir_owner(data_dir: str | None) -> tuple[int, str] | None:
    """(pid, socket) of the daemon holding the data dir's lock, or None."""
    from ..runtime.lock import holder

    return holder(os.path.join(P.data_dir(data_dir), P.LOCK_NAME))


def _locks_of(pid: int, sock: str, data_dir: str | None) -> list[str]:
    """The lock files held by daemon ``pid`` (beside its socket, in the data dir): their release
    is its end."""
    from ..runtime.lock import read_owner

    paths = {os.path.join(os.path.dirname(sock), P.LOCK_NAME), os.path.join(P.data_dir(data_dir), P.LOCK_NAME)}
    return [p for p in sorted(paths) if (read_owner(p) or {}).get("pid") == pid]


def _wait_stopped(pid: int, locks: list[str], timeout: float) -> bool:
    """Wait until daemon ``pid`` is gone: its process, or (once it has exited but is not reaped yet,
    when ``kill -0`` still finds it) the locks it held are released."""
    from ..runtime.lock import is_held

    deadline = time.monotonic() + timeout
    while True:
        if not pid_alive(pid) or (locks and not any(is_held(p) for p in locks)):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


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
            r = call(sock, "ping", {}, timeout=2, discover=False)  # a daemon elsewhere: found below, named
        except UntrustedSocket:
            raise  # not "not running": someone else's socket; the message says whose
        except DaemonUnavailable:
            other = _data_dir_owner(ns.data_dir)
            if other is None or other[1] == sock:
                print("ctxlifed is not running")
                return 0
            sock = other[1]  # the daemon of this data dir serves another socket: stop that one
            r = call(sock, "ping", {}, timeout=2)
        pid = int(r["pid"])
        locks = _locks_of(pid, sock, ns.data_dir)
        call(sock, "shutdown", {})
        gone = _wait_stopped(pid, locks, 15.0)
        print(f"ctxlifed (pid {pid}) stopped" if gone else f"ctxlifed (pid {pid}) is still stopping")
        return 0
    # start
    try:
        r = call(sock, "ping", {}, timeout=2, discover=False)  # a daemon elsewhere: found below, named
        print(f"ctxlifed is already running (pid {r['pid']}) at {sock}")
        return 0
    except UntrustedSocket:
        raise  # a daemon of ours would refuse that folder too: say why instead of starting one
    except DaemonUnavailable:
        pass
    other = _data_dir_owner(ns.data_dir)
    if other is not None:
        print(f"ctxlifed is already running (pid {other[0]}) at {other[1]}, on this data directory")
        return 0
    data = P.data_dir(ns.data_dir)
    os.makedirs(data, mode=0o700, exist_ok=True)
    logf = os.path.join(data, P.LOG_NAME)
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

    p = add("pending", "open pending items of this project (stale ones apart); --resolve N closes #N")
    p.add_argument("--resolve", type=int, metavar="N", help="close the pending item shown as #N")
    p.add_argument("--all", action="store_true", help="closed items too, with how they closed")
    p.add_argument("--all-projects", action="store_true")
    p.add_argument("--limit", type=int, default=100)
    p.set_defaults(fn=cmd_pending)

    p = add("compactions", "per-compaction reports: tokens before/after, archived, kept, lost, re-injected")
    p.add_argument("--session")
    p.add_argument("--all", action="store_true", help="every project")
    p.add_argument("--limit", type=int, default=20)
    p.set_defaults(fn=cmd_compactions)

    p = add("memory", "project memory (docs/memory): prune rolls old session pages up into history.md")
    p.add_argument("action", choices=["prune"])
    p.add_argument("--keep", type=int, help="session folders to keep (default: memory_keep_sessions, 10)")
    p.add_argument("--dry-run", action="store_true", help="say what would be rolled up, change nothing")
    p.set_defaults(fn=cmd_memory)

    p = add("report", "one session as a picture: context size, zones, phases, compactions, cost")
    p.add_argument("--session")
    p.add_argument("--html", metavar="FILE", help="write a self-contained HTML page (inline SVG) to FILE")
    p.add_argument("--open", action="store_true", help="open the HTML page in the browser")
    p.set_defaults(fn=cmd_report)

    p = add("daemon", "start | stop | restart | ping the daemon")
    p.add_argument("action", choices=["start", "stop", "restart", "ping"])
    p.set_defaults(fn=cmd_daemon)

    from . import extra

    extra.register(sub, add)
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    ns = ap.parse_args(argv)
    sock = P.socket_path(ns.socket, data=ns.data_dir)
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
