"""``ctxlifectl doctor``: check everything ctxlifed needs, one line per finding, with the fix.

Checks: Python version; SQLite with FTS5 and the trigram tokenizer; runtime dir permissions;
daemon reachable and its version matching this client; config problems; hooks installed (settings
files or the plugin) and pointing at an existing shim and interpreter, never both at once; the
``ctxlifectl`` command that briefings name runs, and no installed plugin copy names a bare one; the
status line's interpreter; service state; disk space; spooled events waiting; what the hook shim
left behind (events it could keep nowhere, its runtime-dir spool, a daemon marked stalled). A socket
that clients refuse to trust (its folder or the socket not ours, or writable by others, or a listener
running as another uid) is a FAIL that says which, like the shim's and the CLI's own checks
(``cli.client``).
``doctor --context`` checks residency hygiene instead (``cli/residency.py``).

Rules:
- Each finding is ``ok``, ``warn`` (degraded but working) or ``FAIL`` (something is wrong); every
  warn/FAIL line names the command that fixes it. Exit 1 when any FAIL, else 0.
- Stdlib only (``sqlite3`` for the FTS5 probe, in memory); never imports the server side.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import stat
import sys
from dataclasses import asdict, dataclass
from typing import Any

from .. import PROTOCOL_VERSION, __version__
from ..runtime import paths as P
from . import install as I
from . import service as S
from . import shimstate
from .client import DaemonUnavailable, RemoteError, UntrustedSocket, call, untrusted_fix

MIN_PYTHON = (3, 11)
DEFAULT_MIN_FREE_MB = 64


@dataclass
class Finding:
    level: str  # ok | warn | FAIL
    check: str
    message: str
    fix: str = ""

    def line(self) -> str:
        s = f"{self.level:<5} {self.check:<9} {self.message}"
        return s + (f" — fix: {self.fix}" if self.fix else "")


def check_python() -> list[Finding]:
    v = sys.version_info
    ver = f"{v.major}.{v.minor}.{v.micro}"
    if (v.major, v.minor) < MIN_PYTHON:
        return [Finding("FAIL", "python", f"Python {ver} is too old (need 3.11+)",
                        "pipx install --python python3.12 . (in the ctxlifed checkout)")]
    return [Finding("ok", "python", f"Python {ver} ({sys.executable})")]


def check_sqlite() -> list[Finding]:
    ver = sqlite3.sqlite_version
    conn = sqlite3.connect(":memory:")
    try:
        try:
            conn.execute("CREATE VIRTUAL TABLE f USING fts5(x)")
        except sqlite3.OperationalError as exc:
            return [Finding("FAIL", "sqlite", f"SQLite {ver} has no FTS5 ({exc}); the archive cannot be searched",
                            "use a Python built with a newer SQLite, e.g. pipx install --python python3.12 . (in the ctxlifed checkout)")]
        try:
            conn.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='trigram')")
        except sqlite3.OperationalError:
            return [Finding("warn", "sqlite", f"SQLite {ver} has FTS5 but no trigram tokenizer (needs 3.34+):"
                            " CJK and substring search fall back to a slower scan",
                            "use a Python built with SQLite 3.34 or newer")]
    finally:
        conn.close()
    return [Finding("ok", "sqlite", f"SQLite {ver} with FTS5 and trigram")]


def check_read_ahead(open_watch: Any = None) -> list[Finding]:
    """Whether the daemon can read large outputs ahead of their hook (service/readahead.py needs inotify)."""
    from ..runtime import inotify

    ino = (open_watch or inotify.open_inotify)()
    if ino is None:
        return [Finding("warn", "readahead", "no inotify here (not Linux, or the per-user limit of inotify instances"
                        " is reached): a large output is read, redacted and digested while its hook waits, a few ms"
                        " per 100 KB", "sysctl fs.inotify.max_user_instances")]
    ino.close()
    return [Finding("ok", "readahead", "inotify available: large outputs are digested before their hook comes")]


def check_runtime_dir(sock: str) -> list[Finding]:
    d = os.path.dirname(sock)
    try:
        st = os.stat(d)
    except FileNotFoundError:
        return [Finding("ok", "runtime", f"{d} does not exist yet (created 0700 when the daemon starts)")]
    except OSError as exc:
        return [Finding("FAIL", "runtime", f"cannot inspect {d}: {exc}", f"ls -ld {d}")]
    out = []
    mode = stat.S_IMODE(st.st_mode)
    if not stat.S_ISDIR(st.st_mode):
        return [Finding("FAIL", "runtime", f"{d} is not a directory", f"mv {d} {d}.bak")]
    if st.st_uid != os.geteuid():
        out.append(Finding("FAIL", "runtime", f"{d} belongs to uid {st.st_uid}, not to you: hooks and ctxlifectl"
                           " refuse to talk to a daemon there (another user may have created it first)",
                           untrusted_fix(sock)))
    elif mode & 0o077:
        out.append(Finding("FAIL", "runtime", f"{d} has mode {mode:o}; it must be private (700)", f"chmod 700 {d}"))
    else:
        out.append(Finding("ok", "runtime", f"{d} is private (mode {mode:o})"))
    try:
        sst = os.lstat(sock)
        if not stat.S_ISSOCK(sst.st_mode):
            out.append(Finding("FAIL", "runtime", f"{sock} exists but is not a socket", f"rm {sock}"))
        elif sst.st_uid != os.geteuid():
            out.append(Finding("FAIL", "runtime", f"socket {sock} belongs to uid {sst.st_uid}, not to you: hooks and"
                               " ctxlifectl refuse to talk to it", untrusted_fix(sock)))
        elif stat.S_IMODE(sst.st_mode) & 0o077 and mode & 0o077:
            out.append(Finding("FAIL", "runtime", f"socket {sock} is reachable by other users", f"chmod 600 {sock}"))
    except FileNotFoundError:
        pass
    return out


def check_daemon(sock: str, service_kind: str, service_installed: bool) -> list[Finding]:
    systemd = service_installed and service_kind == "systemd"
    start = "systemctl --user start ctxlifed.socket" if systemd else "ctxlifectl daemon start"
    restart = "systemctl --user restart ctxlifed.service" if systemd else "ctxlifectl daemon stop && ctxlifectl daemon start"
    try:
        r = call(sock, "hello", {"client": "ctxlifectl", "version": __version__, "protocol": PROTOCOL_VERSION}, timeout=3.0,
                 discover=False)  # a daemon on another socket is found and named below
    except UntrustedSocket as exc:
        return [Finding("FAIL", "daemon", f"{exc}; hooks spool their events instead (nothing is sent there)",
                        untrusted_fix(sock))]
    except DaemonUnavailable as exc:
        why = "not running" if "not running" in str(exc) else str(exc)
        from ..runtime.lock import holder

        other = holder(os.path.join(P.data_dir(), P.LOCK_NAME))
        if other is not None and other[1] != sock:
            return [Finding("warn", "daemon", f"not at {sock}, but ctxlifed (pid {other[0]}) serves this data"
                            f" directory at {other[1]}: this shell resolves another socket (XDG_RUNTIME_DIR or"
                            " CTXLIFED_SOCKET differs from the daemon's); hooks and ctxlifectl find it through"
                            f" {P.LOCK_NAME} in the data directory", f"export CTXLIFED_SOCKET={other[1]}")]
        return [Finding("FAIL", "daemon", f"not reachable at {sock} ({why})", start)]
    except RemoteError as exc:
        return [Finding("FAIL", "daemon", f"answered hello with an error: {exc.name}: {exc.message}", restart)]
    if not isinstance(r, dict):
        return [Finding("FAIL", "daemon", "answered hello with something unexpected", restart)]
    ver, proto = r.get("version"), r.get("protocol")
    if proto != PROTOCOL_VERSION or r.get("compatible") is False:
        return [Finding("FAIL", "daemon", f"speaks protocol {proto}, this client {PROTOCOL_VERSION}", restart)]
    if ver != __version__:
        return [Finding("FAIL", "daemon", f"runs ctxlifed {ver} but this client is {__version__} (pid {r.get('pid')})", restart)]
    found = [Finding("ok", "daemon", f"ctxlifed {ver} answering at {sock} (pid {r.get('pid')})")]
    try:  # optional: the daemon answered hello; status may wait for its backlog (READ_WAIT_S, 5 s)
        st = call(sock, "status", {"limit": 1}, timeout=8.0)
    except Exception:  # noqa: BLE001 - a health detail, never a reason for doctor to fail
        return found
    if isinstance(st, dict) and st.get("maintenance_failed"):
        found.append(Finding("warn", "store", f"{st['maintenance_failed']} index maintenance steps failed since start"
                             f" (last: {st.get('maintenance_error') or '?'}); recall still works, substring search slower",
                             "check the disk and the daemon log; `sqlite3 <db> 'PRAGMA integrity_check'`"))
    if isinstance(st, dict) and st.get("derive_failed"):
        found.append(Finding("warn", "store", f"{st['derive_failed']} events could not be derived since start"
                             " (kept as stored)", "see `derive_failed` lines in the daemon log"))
    return found


def check_config() -> list[Finding]:
    from ..runtime.config import load

    path = P.config_path()
    try:
        cfg = load(path)
    except Exception as exc:  # noqa: BLE001
        return [Finding("FAIL", "config", f"cannot load {path}: {exc}", f"$EDITOR {path}")]
    out = [Finding("FAIL", "config", p, f"$EDITOR {path}") for p in cfg.problems]
    if not out:
        out.append(Finding("ok", "config", f"{path}" + ("" if os.path.exists(path) else " (absent: defaults)")))
    return out


def _exe_ok(p: Any) -> bool:
    return isinstance(p, str) and os.path.isabs(p) and os.path.isfile(p) and os.access(p, os.X_OK)


_plugin_enabled = I.plugin_enabled


def check_commands(config_dir: str | None = None) -> list[Finding]:
    """The ctxlifectl command ctxlifed's texts name runs, and no plugin copy names a bare one."""
    import shlex
    import subprocess

    from ..runtime.ctl import ctl_command
    from . import plugin as PL

    out: list[Finding] = []
    ctl = ctl_command()
    argv = shlex.split(ctl)
    if not os.path.isabs(argv[0]):
        out.append(Finding("FAIL", "commands", "no ctxlifectl script next to this interpreter or on PATH: the"
                           " `ctxlifectl recall` commands in ctxlifed's briefings cannot run", "reinstall ctxlifed"))
    else:
        try:
            r = subprocess.run([*argv, "--version"], capture_output=True, text=True, timeout=20,
                               stdin=subprocess.DEVNULL)
            ran = r.returncode == 0
            why = (r.stderr or r.stdout).strip().splitlines()[-1:] or [f"exit {r.returncode}"]
        except (OSError, subprocess.TimeoutExpired) as exc:
            ran, why = False, [str(exc)]
        if ran:
            out.append(Finding("ok", "commands", f"briefings and hints name {ctl} (runs)"))
        else:
            out.append(Finding("FAIL", "commands", f"{ctl} --version failed: {why[0]}", "reinstall ctxlifed"))
    for d in PL.installed_plugin_dirs(config_dir):
        bad = PL.bare_commands(d)
        if bad:
            out.append(Finding("FAIL", "plugin", f"the ctxlifed plugin in {d} runs a bare `ctxlifectl`/`python3`"
                               f" ({os.path.relpath(bad[0], d)}), which need not be on Claude Code's PATH",
                               "ctxlifectl plugin, then claude plugin marketplace update ctxlifed-local"
                               " && claude plugin update ctxlifed@ctxlifed-local"))
    return out


def check_statusline(project_dir: str | None = None) -> list[Finding]:
    out: list[Finding] = []
    for scope, path in I.all_settings_paths(project_dir):
        try:
            _text, data = I.read_settings(path)
        except I.SettingsError:
            continue
        sl = data.get("statusLine")
        if not I.statusline_is_ours(sl):
            continue
        import shlex

        try:
            exe = shlex.split(sl["command"])[0]
        except (ValueError, IndexError):
            exe = ""
        fix = f"ctxlifectl install --scope {scope}"
        if not _exe_ok(exe):
            out.append(Finding("FAIL", "statusline", f"{path}: the status line runs {exe!r}, which is missing", fix))
        elif sl != I.statusline_entry(I.interpreter()):
            out.append(Finding("warn", "statusline", f"{path}: the status line runs another installation ({exe})", fix))
        else:
            out.append(Finding("ok", "statusline", f"{path}: {sl['command']}"))
    return out


def check_hooks(project_dir: str | None = None) -> list[Finding]:
    out: list[Finding] = []
    found_any = False
    wanted = {s.event for s in I.wanted_hooks()}  # PreToolUse too while wrap_failing_commands is on
    for scope, path in I.all_settings_paths(project_dir):
        try:
            text, data = I.read_settings(path)
        except I.SettingsError as exc:
            out.append(Finding("FAIL", "hooks", str(exc), f"$EDITOR {path}"))
            continue
        if text is None:
            continue
        if data.get("disableAllHooks") is True:
            out.append(Finding("FAIL", "hooks", f"{path} sets \"disableAllHooks\": true, so no hook runs",
                               f"remove disableAllHooks from {path}"))
        if _plugin_enabled(data):
            found_any = True
            if shutil.which("python3") is None:
                out.append(Finding("FAIL", "hooks", f"the ctxlifed plugin is enabled in {path} but its hooks run"
                                   " `python3`, which is not on PATH", "ctxlifectl install (hooks with an absolute interpreter)"))
            else:
                out.append(Finding("ok", "hooks", f"ctxlifed plugin enabled in {path}"))
        mine = I.installed_handlers(data)
        if not mine:
            continue
        found_any = True
        fix = f"ctxlifectl install --scope {scope}" + (f" --project-dir {project_dir}" if project_dir and scope != "user" else "")
        bad = []
        for ev, hs in mine.items():
            for h in hs:
                py = h.get("command")
                raw_args = h.get("args")
                args: list[Any] = raw_args if isinstance(raw_args, list) else []
                shim = next((a for a in args if isinstance(a, str) and a.endswith(I.SHIM_NAME)), None)
                if not _exe_ok(py):
                    bad.append(f"{ev}: interpreter {py!r} is missing or not executable")
                if shim is None or not os.path.isfile(shim):
                    bad.append(f"{ev}: shim {shim or '(none)'} does not exist")
        for b in sorted(set(bad))[:5]:
            out.append(Finding("FAIL", "hooks", f"{path}: {b}", fix))
        missing = sorted(wanted - set(mine))
        if missing:
            out.append(Finding("FAIL", "hooks", f"{path}: no ctxlifed hook for {', '.join(missing)}", fix))
        if not bad and not missing:
            cur_py, cur_shim = I.interpreter(), I.shim_path()
            same = all(h.get("command") == cur_py and cur_shim in (h.get("args") or []) for hs in mine.values() for h in hs)
            note = "" if same else " (pointing at another ctxlifed installation)"
            out.append(Finding("ok", "hooks", f"{len(mine)} events hooked in {path} ({scope}){note}"))
    if not found_any:
        out.append(Finding("FAIL", "hooks", "ctxlifed's hooks are not installed in any Claude Code settings file",
                           "ctxlifectl install"))
    return out


def install_kinds(project_dir: str | None = None) -> tuple[bool, bool]:
    """(plugin enabled somewhere, ctxlifed's own hooks in some settings file)."""
    plugin = settings_hooks = False
    for _scope, path in I.all_settings_paths(project_dir):
        try:
            _text, data = I.read_settings(path)
        except I.SettingsError:
            continue
        plugin = plugin or _plugin_enabled(data)
        settings_hooks = settings_hooks or bool(I.installed_handlers(data))
    return plugin, settings_hooks


def check_service(sock: str, kind: str) -> tuple[list[Finding], bool]:
    info = S.status_info(kind, sock)
    if not info["installed"]:
        return [Finding("ok", "service", "not installed (optional: the hook shim starts the daemon on demand;"
                        " `ctxlifectl service install` runs it under "
                        + ("systemd" if kind == "systemd" else "launchd") + ")")], False
    if not info["problems"]:
        return [Finding("ok", "service", f"{kind} units installed and active")], True
    return [Finding("FAIL", "service", what, fix) for what, fix in info["problems"]], True


def check_disk(min_free_mb: int = DEFAULT_MIN_FREE_MB) -> list[Finding]:
    d = P.data_dir()
    probe = d
    while not os.path.exists(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)
    try:
        du = shutil.disk_usage(probe)
    except OSError as exc:
        return [Finding("warn", "disk", f"cannot measure free space at {probe}: {exc}", f"df -h {probe}")]
    free_mb = du.free // (1 << 20)
    db = os.path.join(d, P.DB_NAME)
    size = sum(os.path.getsize(p) for p in (db, db + "-wal") if os.path.exists(p))
    if free_mb < min_free_mb:
        return [Finding("FAIL", "disk", f"only {free_mb} MiB free for {d} (the daemon stops storing below {min_free_mb} MiB)",
                        "free space on that disk, or drop old data: ctxlifectl forget --project <dir>")]
    out = [Finding("ok", "disk", f"{free_mb:,} MiB free for {d}; store {size / (1 << 20):.1f} MiB")]
    spool = os.path.join(d, P.SPOOL_NAME)
    try:
        n = os.path.getsize(spool)
    except OSError:
        n = 0
    if n:
        out.append(Finding("warn", "spool", f"{n:,} bytes of events spooled while the daemon was away ({spool})",
                           "ctxlifectl daemon start (it ingests the spool)"))
    return out


def check_shim(sock: str) -> list[Finding]:
    """What the hook shim left behind: events kept nowhere, its runtime-dir spool, a stalled mark, a
    bytecode folder that it cannot use."""
    import time

    st = shimstate.read(P.data_dir(), os.path.dirname(sock))
    out = []
    if st.dropped:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(st.dropped_at)) if st.dropped_at else "?"
        out.append(Finding("FAIL", "spool", f"{st.dropped:,} hook events could be kept nowhere (no daemon, and no"
                           f" spool could be written: disk full or read-only?); last at {when}",
                           f"free space for {P.data_dir()} (df -h), then ctxlifectl daemon start"))
    if st.runtime_spool_bytes:
        out.append(Finding("warn", "spool", f"{st.runtime_spool_bytes:,} bytes of events spooled in the runtime"
                           f" folder ({st.runtime_spool}) because the data folder could not be written; it is lost"
                           " at logout", f"free space for {P.data_dir()}, then ctxlifectl daemon restart"))
    if st.stalled_since:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(st.stalled_since))
        out.append(Finding("warn", "daemon", f"the daemon missed a hook's deadline at {when}: hooks spool after a"
                           " short probe until it answers in time again", "ctxlifectl daemon restart"))
    if st.cache_problem:
        out.append(Finding("warn", "hooks", f"the shim's bytecode folder {st.cache} {st.cache_problem}: it is not"
                           " used, so every hook compiles the shim (slower hooks)",
                           f"remove {st.cache} (the next hook makes it again, private)"))
    return out


def run_checks(sock: str, project_dir: str | None = None, platform: str | None = None) -> list[Finding]:
    kind = S.platform_kind(platform)
    out: list[Finding] = []
    out += check_python()
    out += check_sqlite()
    out += check_read_ahead()
    out += check_runtime_dir(sock)
    svc, svc_installed = check_service(sock, kind)
    out += check_daemon(sock, kind, svc_installed)
    out += check_config()
    out += check_hooks(project_dir)
    out += check_commands()
    out += check_statusline(project_dir)
    out += svc
    plugin, settings_hooks = install_kinds(project_dir)
    if plugin and settings_hooks:
        out.append(Finding("FAIL", "hooks", "both the ctxlifed plugin and `ctxlifectl install` hooks are active:"
                           " every event and every briefing reaches Claude Code twice",
                           "ctxlifectl uninstall (or disable the plugin)"))
    if plugin and not settings_hooks and not svc_installed:
        out.append(Finding("warn", "service", "the plugin's hooks run the system python3, which cannot start the daemon"
                           " on demand: run it as a service", "ctxlifectl service install"))
    out += check_disk()
    out += check_shim(sock)
    return out


def cmd_doctor(ns: argparse.Namespace, sock: str) -> int:
    if getattr(ns, "context", False):
        from .residency import cmd_context

        return cmd_context(ns, sock)
    findings = run_checks(sock, ns.project_dir, getattr(ns, "platform", None))
    failed = [f for f in findings if f.level == "FAIL"]
    if ns.json:
        print(json.dumps({"ok": not failed, "findings": [asdict(f) for f in findings]}, indent=2))
    else:
        for f in findings:
            print(f.line())
        print(f"{len(failed)} problem{'s' if len(failed) != 1 else ''} found" if failed else "everything looks fine")
    return 1 if failed else 0


def register(sub: Any, add: Any) -> None:
    p = add("doctor", "check Python, SQLite, runtime dir, daemon, hooks, service and disk; print fixes")
    p.add_argument("--project-dir", help="project whose .claude/settings*.json to check (default: current directory)")
    p.add_argument("--platform", choices=["linux", "darwin"], help=argparse.SUPPRESS)
    p.add_argument("--context", action="store_true",
                   help="residency hygiene instead: skills, CLAUDE.md, rules and MCP servers against what stays in context")
    p.set_defaults(fn=cmd_doctor)
