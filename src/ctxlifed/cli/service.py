"""``ctxlifectl service install|uninstall|status``: run ctxlifed under systemd (user units) or launchd.

Rules:
- Linux: ``ctxlifed.socket`` (socket activation, ``ListenStream=%t/ctxlifed/ctxlifed.sock``,
  ``SocketMode=0600``, ``DirectoryMode=0700``) + ``ctxlifed.service`` (``Type=notify``) in
  ``$XDG_CONFIG_HOME/systemd/user``; enabled with ``systemctl --user enable --now ctxlifed.socket``.
  macOS: ``~/Library/LaunchAgents/dev.ctxlifed.plist`` loaded with ``launchctl bootstrap gui/<uid>``.
- The unit texts below are the single source of truth; ``systemd/`` in the repository holds the same
  templates for packagers (a test keeps them equal). ``@PYTHON@`` becomes the absolute interpreter
  running ctxlifectl, ``@LOG@`` the launchd log file.
- Every action is printed, with the exact command; a failing command is reported with the fix and
  the exit code is non-zero. ``--dry-run`` prints what would be done and does nothing.
- Stdlib only; never imports the server side.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from typing import Any
from xml.sax.saxutils import escape

from ..runtime import paths as P
from .client import DaemonUnavailable, RemoteError, call

LABEL = "dev.ctxlifed"

SOCKET_UNIT = """\
# ctxlifed: per-user socket for the context-lifecycle daemon of Claude Code.
# Written by `ctxlifectl service install` into ~/.config/systemd/user/ctxlifed.socket.
[Unit]
Description=ctxlifed socket (context-lifecycle daemon for Claude Code)
Documentation=man:systemd.socket(5)

[Socket]
# Same path the hook shim and ctxlifectl use: $XDG_RUNTIME_DIR/ctxlifed/ctxlifed.sock
ListenStream=%t/ctxlifed/ctxlifed.sock
SocketMode=0600
DirectoryMode=0700
RemoveOnStop=true

[Install]
WantedBy=sockets.target
"""

SERVICE_UNIT = """\
# ctxlifed: the context-lifecycle daemon for Claude Code, started on the first connection.
# Written by `ctxlifectl service install` into ~/.config/systemd/user/ctxlifed.service.
[Unit]
Description=ctxlifed (context-lifecycle daemon for Claude Code)
Requires=ctxlifed.socket
After=ctxlifed.socket

[Service]
Type=notify
NotifyAccess=main
ExecStart=@PYTHON@ -m ctxlifed
Environment=PYTHONUNBUFFERED=1
UMask=0077
Restart=on-failure
RestartSec=2
TimeoutStopSec=20
NoNewPrivileges=true

[Install]
Also=ctxlifed.socket
"""

LAUNCHD_PLIST = """\
<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<!-- ctxlifed: per-user launchd agent, written by `ctxlifectl service install` into
     ~/Library/LaunchAgents/dev.ctxlifed.plist -->
<plist version="1.0">
<dict>
  <key>Label</key>
  <string>dev.ctxlifed</string>
  <key>ProgramArguments</key>
  <array>
    <string>@PYTHON@</string>
    <string>-m</string>
    <string>ctxlifed</string>
  </array>
  <key>RunAtLoad</key>
  <true/>
  <key>KeepAlive</key>
  <dict>
    <key>SuccessfulExit</key>
    <false/>
  </dict>
  <key>ProcessType</key>
  <string>Background</string>
  <key>EnvironmentVariables</key>
  <dict>
    <key>PYTHONUNBUFFERED</key>
    <string>1</string>
  </dict>
  <key>StandardOutPath</key>
  <string>@LOG@</string>
  <key>StandardErrorPath</key>
  <string>@LOG@</string>
</dict>
</plist>
"""


def platform_kind(override: str | None = None) -> str:
    p = override or sys.platform
    return "launchd" if p == "darwin" or p == "launchd" else "systemd"


def _systemd_quote(arg: str) -> str:
    if arg and all(c.isalnum() or c in "/._-+:@" for c in arg):
        return arg
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_socket() -> str:
    return SOCKET_UNIT


def render_service(python: str) -> str:
    return SERVICE_UNIT.replace("@PYTHON@", _systemd_quote(python))


def render_plist(python: str, log: str) -> str:
    return LAUNCHD_PLIST.replace("@PYTHON@", escape(python)).replace("@LOG@", escape(log))


def systemd_user_dir(env: dict[str, str] | None = None) -> str:
    e = os.environ if env is None else env
    base = e.get("XDG_CONFIG_HOME") or os.path.join(e.get("HOME") or os.path.expanduser("~"), ".config")
    return os.path.join(base, "systemd", "user")


def launchd_dir(env: dict[str, str] | None = None) -> str:
    e = os.environ if env is None else env
    return os.path.join(e.get("HOME") or os.path.expanduser("~"), "Library", "LaunchAgents")


def service_python() -> str:
    return os.path.abspath(sys.executable)


def planned_files(kind: str, python: str) -> dict[str, str]:
    """path -> content of the files `service install` writes."""
    if kind == "launchd":
        log = os.path.join(P.data_dir(), P.LOG_NAME)  # the daemon rotates it (stderr is that file)
        return {os.path.join(launchd_dir(), f"{LABEL}.plist"): render_plist(python, log)}
    d = systemd_user_dir()
    return {os.path.join(d, "ctxlifed.socket"): render_socket(),
            os.path.join(d, "ctxlifed.service"): render_service(python)}


def _commands(kind: str, action: str) -> list[list[str]]:
    if kind == "launchd":
        plist = os.path.join(launchd_dir(), f"{LABEL}.plist")
        dom = f"gui/{os.getuid()}"
        if action == "install":
            return [["launchctl", "bootout", f"{dom}/{LABEL}"], ["launchctl", "bootstrap", dom, plist],
                    ["launchctl", "enable", f"{dom}/{LABEL}"]]
        if action == "uninstall":
            return [["launchctl", "bootout", f"{dom}/{LABEL}"]]
        return [["launchctl", "print", f"{dom}/{LABEL}"]]
    if action == "install":
        return [["systemctl", "--user", "daemon-reload"],
                ["systemctl", "--user", "enable", "--now", "ctxlifed.socket"]]
    if action == "uninstall":
        return [["systemctl", "--user", "disable", "--now", "ctxlifed.socket", "ctxlifed.service"],
                ["systemctl", "--user", "daemon-reload"]]
    return []


def _run(argv: list[str], timeout: float = 30.0) -> tuple[int, str]:
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        return 127, f"{argv[0]}: command not found"
    except subprocess.TimeoutExpired:
        return 124, f"{shlex.join(argv)}: timed out after {timeout:.0f}s"
    out = (r.stdout + r.stderr).strip()
    return r.returncode, out


def _warn_socket_env(kind: str) -> str | None:
    if kind != "systemd":
        return None
    want = P.socket_path()
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    unit_sock = os.path.join(xdg, "ctxlifed", P.SOCKET_NAME) if xdg else None
    if unit_sock and os.path.abspath(unit_sock) != want:
        return (f"note: the socket unit listens on {unit_sock} but this shell uses {want} (CTXLIFED_SOCKET?):"
                " unset CTXLIFED_SOCKET so hooks and ctxlifectl use the socket unit")
    if not xdg:
        return "note: XDG_RUNTIME_DIR is not set in this shell; systemd --user sets it for its units"
    return None


def cmd_service(ns: argparse.Namespace, sock: str) -> int:
    kind = platform_kind(getattr(ns, "platform", None))
    python = service_python()
    action = ns.action
    if action == "status":
        info = status_info(kind, sock)
        if ns.json:
            print(json.dumps(info, indent=2))
        else:
            for line in info["lines"]:
                print(line)
        return 0 if info["ok"] else 1
    files = planned_files(kind, python)
    cmds = _commands(kind, action)
    rc = 0
    if action == "install":
        for path, text in files.items():
            try:
                with open(path, encoding="utf-8") as f:
                    same = f.read() == text
            except OSError:
                same = False
            if ns.dry_run:
                print(f"would write {path}" + (" (unchanged)" if same else ""))
                if not same:
                    print("".join("    " + ln for ln in text.splitlines(keepends=True)), end="")
                continue
            if same:
                print(f"unchanged {path}")
                continue
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = path + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, path)
            print(f"wrote {path}")
        if ns.no_enable:
            cmds = cmds[:1] if kind == "systemd" else []
    for argv in cmds:
        shown = shlex.join(argv)
        if ns.dry_run:
            print(f"would run {shown}")
            continue
        code, out = _run(argv)
        tolerated = kind == "launchd" and argv[1] == "bootout" and action == "install"
        print(f"ran {shown}: " + ("ok" if code == 0 else f"exit {code}") + (f"\n    {out}" if out and code else ""))
        if code != 0 and not tolerated:
            rc = 1
    if action == "uninstall":
        for path in files:
            if ns.dry_run:
                print(f"would remove {path}" + ("" if os.path.exists(path) else " (absent)"))
                continue
            try:
                os.unlink(path)
                print(f"removed {path}")
            except FileNotFoundError:
                print(f"absent {path}")
    if rc and not ns.dry_run:
        if kind == "systemd":
            print("systemctl --user failed (no user session bus? e.g. in a container or over plain ssh:"
                  " `loginctl enable-linger $USER`, then log in again). The unit files are in place;"
                  " without the service the hook shim starts the daemon on demand.", file=sys.stderr)
        else:
            print("launchctl failed; the plist is in place: try `launchctl bootstrap gui/$(id -u) "
                  f"{os.path.join(launchd_dir(), LABEL + '.plist')}`", file=sys.stderr)
    warn = _warn_socket_env(kind) if action == "install" else None
    if warn:
        print(warn)
    return rc


def status_info(kind: str, sock: str) -> dict[str, Any]:
    """What is installed and running. ``ok`` = installed, enabled/loaded, daemon answering."""
    python = service_python()
    files = planned_files(kind, python)
    lines: list[str] = []
    problems: list[tuple[str, str]] = []
    installed = all(os.path.exists(p) for p in files)
    for path, text in files.items():
        if not os.path.exists(path):
            lines.append(f"missing   {path}")
            continue
        try:
            with open(path, encoding="utf-8") as f:
                cur = f.read()
        except OSError as exc:
            lines.append(f"unreadable {path}: {exc}")
            continue
        if cur == text:
            lines.append(f"installed {path}")
        else:
            lines.append(f"differs   {path} (another interpreter or an older ctxlifed)")
            problems.append((f"{path} differs from what this ctxlifectl would write", "ctxlifectl service install"))
    state: dict[str, str] = {}
    if installed:
        if kind == "systemd":
            for what, argv in (("socket enabled", ["systemctl", "--user", "is-enabled", "ctxlifed.socket"]),
                               ("socket active", ["systemctl", "--user", "is-active", "ctxlifed.socket"]),
                               ("service active", ["systemctl", "--user", "is-active", "ctxlifed.service"])):
                code, out = _run(argv, timeout=5)
                state[what] = (out.splitlines()[0] if out else "") or ("yes" if code == 0 else f"exit {code}")
                lines.append(f"{what:<15}{state[what]}")
            if state.get("socket enabled") != "enabled" or state.get("socket active") != "active":
                problems.append(("the ctxlifed.socket unit is not enabled and active",
                                 "systemctl --user enable --now ctxlifed.socket"))
        else:
            code, out = _run(_commands(kind, "status")[0], timeout=5)
            state["loaded"] = "yes" if code == 0 else "no"
            lines.append(f"agent loaded   {state['loaded']}")
            if code != 0:
                problems.append((f"the launchd agent {LABEL} is not loaded", "ctxlifectl service install"))
    else:
        lines.append("service not installed (the hook shim starts the daemon on demand); to install: ctxlifectl service install")
    try:
        r = call(sock, "ping", {}, timeout=1.0)
        lines.append(f"daemon         answering (pid {r.get('pid')}, version {r.get('version')}) at {sock}")
        running = True
    except (DaemonUnavailable, RemoteError) as exc:
        lines.append(f"daemon         not answering at {sock}: {exc}")
        running = False
    return {"kind": kind, "installed": installed, "files": list(files), "state": state, "daemon": running,
            "problems": problems, "ok": installed and not problems and running, "lines": lines}


def register(sub: Any, add: Any) -> None:
    p = add("service", "install | uninstall | status of the systemd user units / launchd agent")
    p.add_argument("action", choices=["install", "uninstall", "status"])
    p.add_argument("--dry-run", action="store_true", help="print what would be written and run")
    p.add_argument("--no-enable", action="store_true", help="write the files only (install)")
    p.add_argument("--platform", choices=["linux", "darwin"], help=argparse.SUPPRESS)
    p.set_defaults(fn=cmd_service)
