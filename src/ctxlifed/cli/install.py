"""``ctxlifectl install`` / ``uninstall``: merge ctxlifed's hooks into Claude Code's settings.json.

Rules:
- Scopes: ``user`` = ``$CLAUDE_CONFIG_DIR/settings.json`` or ``~/.claude/settings.json``;
  ``project`` = ``<dir>/.claude/settings.json``; ``local`` = ``<dir>/.claude/settings.local.json``.
- Every other key and every other hook is kept; ctxlifed's handlers are recognised by the shim's file
  name (``ctxlifed_hook.py``) in the command or its args, so a stale install (moved venv) is replaced,
  not duplicated, and ``uninstall`` removes exactly those handlers and nothing else.
- Idempotent: when the merged result equals the file, nothing is written (no backup either).
- A file that is not a JSON object with the expected shapes is refused with a clear message and
  left untouched. Writes are atomic (temp file + rename), keep the file's mode, and refuse when the
  file changed under us. Before overwriting, a timestamped backup is written next to it.
- Hook commands use the exec form: the absolute interpreter running ctxlifectl with ``-I -S`` and
  the absolute shim path (stdlib-only shim, so no site-packages are needed at hook time).
- Sync vs async (measured with Claude Code 2.1.328, docs/claude-code.md): an ``async`` hook does not
  delay the turn, but in ``-p`` mode every async hook still running at the end of the session gets
  SIGTERM. So events whose answer matters, or that come last in a session (Stop, SessionEnd), or
  that must finish before Claude Code goes on (PreCompact), are synchronous; only mid-session
  ingest-only events are async.
- Never both: when the ctxlifed plugin is enabled in any scope, install refuses (every hook and
  briefing would run twice) unless asked with ``--with-plugin``.
- A status line of ours always follows the interpreter doing the install (a reinstall from another
  venv must not leave it pointing at the old one), even without ``--statusline``.
- Stdlib only; never imports the server side.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import shlex
import shutil
import site
import sys
import time
from dataclasses import dataclass
from importlib import resources
from typing import Any

from ..runtime.atomic import write_atomic

SHIM_NAME = "ctxlifed_hook.py"
STATUSLINE_MODULE = "ctxlifed.cli.statusline"
SCOPES = ("user", "project", "local")


@dataclass(frozen=True)
class HookSpec:
    event: str
    timeout: int
    is_async: bool = False
    matcher: str | None = None
    why: str = ""


# The events ctxlifed listens to. PreToolUse and PostToolBatch are deliberately absent: the daemon
# archives nothing from them (PostToolUse/PostToolUseFailure carry the same input and the output),
# and one more process per tool call is pure cost.
HOOKS: tuple[HookSpec, ...] = (
    HookSpec("SessionStart", 5, matcher="startup|resume|clear|compact",
             why="answers with the project's state (re-injected after /compact and /clear)"),
    HookSpec("UserPromptSubmit", 5, why="archives the prompt; phase signals; may carry advice"),
    HookSpec("PostToolUse", 5, why="archives tool output; updates the budget; may carry advice"),
    HookSpec("PostToolUseFailure", 5, why="archives the error"),
    HookSpec("Stop", 5, why="last event of a turn: must not be killed at -p teardown"),
    HookSpec("PreCompact", 10, why="archives and checkpoints before Claude Code compacts"),
    HookSpec("PostCompact", 5, why="archives the compaction summary"),
    HookSpec("SessionEnd", 2, why="closes the session and writes its ledger (Claude Code allows 1.5 s)"),
    HookSpec("SubagentStart", 5, is_async=True, why="ingest only"),
    HookSpec("SubagentStop", 5, is_async=True, why="ingest only"),
    HookSpec("InstructionsLoaded", 5, is_async=True, why="ingest only"),
    HookSpec("CwdChanged", 5, is_async=True, why="ingest only"),
    HookSpec("Notification", 5, is_async=True, why="ingest only"),
)

# Added only while ``wrap_failing_commands`` is on (globally or for a project, runtime/config.py): the opt-in
# PreToolUse wrapper of test and build runs (service/wrap.py). Bash only, so other tools pay nothing.
WRAP_HOOK = HookSpec("PreToolUse", 5, matcher="Bash",
                     why="wrap_failing_commands: runs test/build commands through `ctxlifectl run`")


def wanted_hooks(config: str | None = None) -> tuple[HookSpec, ...]:
    """The hooks ``install`` writes: :data:`HOOKS`, plus :data:`WRAP_HOOK` when the config turns wrapping on."""
    from ..runtime import config as C, paths as P

    try:
        on = C.load(P.config_path(config)).wrap_anywhere()
    except Exception:  # noqa: BLE001 - a config that cannot be read turns nothing on
        on = False
    return HOOKS + (WRAP_HOOK,) if on else HOOKS


class SettingsError(Exception):
    """The settings file cannot be used safely; nothing was written."""


# -- locations -------------------------------------------------------------------------------------
def shim_path() -> str:
    """Absolute path of the shim inside the installed package (wheel or checkout)."""
    return os.path.abspath(str(resources.files("ctxlifed") / "_shim" / SHIM_NAME))


def interpreter() -> str:
    """The interpreter running ctxlifectl, absolute, symlinks kept (a venv's python must stay the venv's)."""
    return os.path.abspath(sys.executable)


def claude_config_dir(env: dict[str, str] | None = None) -> str:
    e = os.environ if env is None else env
    d = e.get("CLAUDE_CONFIG_DIR")
    if d:
        return os.path.abspath(os.path.expanduser(d))
    home = e.get("HOME") or os.path.expanduser("~")
    return os.path.join(home, ".claude")


def settings_path(scope: str, project_dir: str | None = None, env: dict[str, str] | None = None) -> str:
    if scope == "user":
        return os.path.join(claude_config_dir(env), "settings.json")
    base = os.path.abspath(project_dir or os.getcwd())
    name = "settings.json" if scope == "project" else "settings.local.json"
    return os.path.join(base, ".claude", name)


def all_settings_paths(project_dir: str | None = None, env: dict[str, str] | None = None) -> list[tuple[str, str]]:
    return [(s, settings_path(s, project_dir, env)) for s in SCOPES]


# -- recognising our entries -------------------------------------------------------------------------
def is_ours(handler: Any) -> bool:
    if not isinstance(handler, dict) or handler.get("type", "command") != "command":
        return False
    parts: list[Any] = [handler.get("command")]
    if isinstance(handler.get("args"), list):
        parts += handler["args"]
    for p in parts:
        if isinstance(p, str) and SHIM_NAME in p:
            return True
    return False


def statusline_is_ours(sl: Any) -> bool:
    return isinstance(sl, dict) and isinstance(sl.get("command"), str) and (
        STATUSLINE_MODULE in sl["command"] or "ctxlifectl statusline" in sl["command"])


def hook_handler(spec: HookSpec, python: str, shim: str) -> dict[str, Any]:
    h: dict[str, Any] = {"type": "command", "command": python, "args": ["-I", "-S", shim], "timeout": spec.timeout}
    if spec.is_async:
        h["async"] = True
    return h


def hook_group(spec: HookSpec, python: str, shim: str) -> dict[str, Any]:
    g: dict[str, Any] = {}
    if spec.matcher:
        g["matcher"] = spec.matcher
    g["hooks"] = [hook_handler(spec, python, shim)]
    return g


def isolated_flag_ok() -> bool:
    """``-I`` drops the user site: only safe when ctxlifed is not installed there (``pip --user``)."""
    try:
        user_site = site.getusersitepackages()
    except Exception:  # noqa: BLE001
        return True
    here = os.path.dirname(os.path.abspath(__file__))
    return not (user_site and here.startswith(os.path.abspath(user_site) + os.sep))


def statusline_entry(python: str) -> dict[str, Any]:
    flags = ["-I"] if isolated_flag_ok() else ["-E"]
    return {"type": "command", "command": shlex.join([python, *flags, "-m", STATUSLINE_MODULE]), "padding": 0}


# -- reading and checking --------------------------------------------------------------------------
def read_settings(path: str) -> tuple[str | None, dict[str, Any]]:
    """(original text or None when absent, parsed object). Raises SettingsError when unusable."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None, {}
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"cannot read {path}: {exc}") from None
    if not text.strip():
        return text, {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SettingsError(
            f"cannot parse {path}: {exc.msg} at line {exc.lineno} column {exc.colno}. "
            "Fix the file (or move it away) and run the command again; nothing was written.") from None
    if not isinstance(data, dict):
        raise SettingsError(f"{path} is not a JSON object (it holds a {type(data).__name__}); nothing was written.")
    _check_shape(path, data)
    return text, data


def _check_shape(path: str, data: dict[str, Any]) -> None:
    hooks = data.get("hooks")
    if hooks is None:
        return
    if not isinstance(hooks, dict):
        raise SettingsError(f"{path}: \"hooks\" is not an object; fix it by hand; nothing was written.")
    for ev, groups in hooks.items():
        if not isinstance(groups, list):
            raise SettingsError(f"{path}: hooks.{ev} is not a list; fix it by hand; nothing was written.")
        for i, g in enumerate(groups):
            if not isinstance(g, dict) or not isinstance(g.get("hooks", []), list):
                raise SettingsError(f"{path}: hooks.{ev}[{i}] is not a {{matcher, hooks: [...]}} object; "
                                    "fix it by hand; nothing was written.")


def render(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


# -- merging ---------------------------------------------------------------------------------------
def _strip_ours(groups: list[Any]) -> tuple[list[Any], int | None, int]:
    """Remove our handlers. Returns (groups left, index where our first group was, handlers removed)."""
    out: list[Any] = []
    first: int | None = None
    removed = 0
    for g in groups:
        hs = g.get("hooks", []) if isinstance(g, dict) else []
        mine = [h for h in hs if is_ours(h)]
        if not mine:
            out.append(g)
            continue
        removed += len(mine)
        if first is None:
            first = len(out)
        rest = [h for h in hs if not is_ours(h)]
        if rest:
            out.append({**g, "hooks": rest})
    return out, first, removed


def merge(data: dict[str, Any], python: str, shim: str, *, statusline: str | None = None,
          specs: tuple[HookSpec, ...] = HOOKS) -> tuple[dict[str, Any], list[str]]:
    """Return a new settings object with ctxlifed's hooks (and optionally its status line).

    ``statusline``: None = leave it alone; "add" = add unless the user has one; "replace" = replace.
    """
    notes: list[str] = []
    new = json.loads(json.dumps(data))  # deep copy, JSON types only
    hooks = new.get("hooks")
    if not isinstance(hooks, dict):
        hooks = {}
    wanted = {s.event: s for s in specs}
    for ev in list(hooks):
        if ev in wanted:
            continue
        left, first, removed = _strip_ours(hooks[ev])
        if removed:  # an event we no longer install (older version): drop our handler
            if left:
                hooks[ev] = left
            else:
                del hooks[ev]
    for spec in specs:
        groups = hooks.get(spec.event, [])
        left, first, _removed = _strip_ours(groups)
        pos = len(left) if first is None else first
        left.insert(pos, hook_group(spec, python, shim))
        hooks[spec.event] = left
    new["hooks"] = hooks
    cur = new.get("statusLine")
    if statusline_is_ours(cur) and cur != statusline_entry(python):
        new["statusLine"] = statusline_entry(python)  # ours, from another interpreter: follow this install
    if statusline:
        mine = statusline_entry(python)
        if cur is None or statusline_is_ours(cur):
            new["statusLine"] = mine
        elif statusline == "replace":
            new["statusLine"] = mine
            notes.append("replaced your status line (uninstall puts it back)")
        else:
            notes.append("kept your existing status line; use --replace-statusline to use ctxlifed's instead")
    if new.get("disableAllHooks") is True:
        notes.append("warning: \"disableAllHooks\": true in this file turns every hook off, ctxlifed's included")
    return new, notes


def remove(data: dict[str, Any], *, previous_statusline: Any = None) -> tuple[dict[str, Any], int]:
    """Return (settings without ctxlifed's handlers and status line, number of things removed)."""
    new = json.loads(json.dumps(data))
    count = 0
    hooks = new.get("hooks")
    if isinstance(hooks, dict):
        for ev in list(hooks):
            left, _first, removed = _strip_ours(hooks[ev])
            count += removed
            if removed:
                if left:
                    hooks[ev] = left
                else:
                    del hooks[ev]
        if count and not hooks:
            del new["hooks"]
    if statusline_is_ours(new.get("statusLine")):
        count += 1
        if previous_statusline is not None:
            new["statusLine"] = previous_statusline
        else:
            del new["statusLine"]
    return new, count


def installed_handlers(data: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """event -> our handlers found in a settings object (for doctor)."""
    out: dict[str, list[dict[str, Any]]] = {}
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return out
    for ev, groups in hooks.items():
        if not isinstance(groups, list):
            continue
        for g in groups:
            for h in (g.get("hooks", []) if isinstance(g, dict) else []):
                if is_ours(h):
                    out.setdefault(ev, []).append(h)
    return out


def plugin_enabled(data: dict[str, Any]) -> bool:
    """Whether a settings object enables the ctxlifed plugin (from any marketplace)."""
    ep = data.get("enabledPlugins")
    return isinstance(ep, dict) and any(isinstance(k, str) and k.split("@")[0] == "ctxlifed" and v for k, v in ep.items())


def _plugin_enabled_in(path: str) -> bool:
    try:
        return plugin_enabled(read_settings(path)[1])
    except SettingsError:
        return False


# -- writing ---------------------------------------------------------------------------------------
def diff(path: str, old: str | None, new: str) -> str:
    return "".join(difflib.unified_diff((old or "").splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=path if old is not None else "/dev/null", tofile=path))


def backup_path(path: str, now: float | None = None) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now if now is not None else time.time()))
    cand = f"{path}.ctxlifed-{stamp}.bak"
    n = 1
    while os.path.lexists(cand):
        n += 1
        cand = f"{path}.ctxlifed-{stamp}-{n}.bak"
    return cand


def write_settings(path: str, old: str | None, new: str) -> str | None:
    """Atomically replace ``path`` with ``new``; back up the old file first. Returns the backup path."""
    d = os.path.dirname(path)
    os.makedirs(d, exist_ok=True)
    current: str | None
    try:
        with open(path, encoding="utf-8") as f:
            current = f.read()
    except FileNotFoundError:
        current = None
    if current != old:
        raise SettingsError(f"{path} changed while ctxlifectl was working on it; nothing was written: run the command again.")
    bak = None
    mode = 0o666 & ~_umask()
    if old is not None:
        bak = backup_path(path)
        shutil.copy2(path, bak)
        mode = os.stat(path).st_mode & 0o7777
    write_atomic(path, new, mode, prefix=".settings-")
    return bak


def _umask() -> int:
    m = os.umask(0o022)
    os.umask(m)
    return m


# -- state kept for uninstall (a replaced status line) ---------------------------------------------
def _state_file() -> str:
    from ..runtime import paths as P

    return os.path.join(P.data_dir(), "install-state.json")


def _load_state() -> dict[str, Any]:
    try:
        with open(_state_file(), encoding="utf-8") as f:
            v = json.load(f)
        return v if isinstance(v, dict) else {}
    except (OSError, ValueError):
        return {}


def _save_state(state: dict[str, Any]) -> None:
    path = _state_file()
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    write_atomic(path, json.dumps(state, indent=2), 0o600, prefix=".state-")


# -- commands --------------------------------------------------------------------------------------
def _target(ns: argparse.Namespace) -> str:
    return settings_path(ns.scope, ns.project_dir)


def cmd_install(ns: argparse.Namespace, sock: str) -> int:
    path = _target(ns)
    python, shim = interpreter(), shim_path()
    if not os.path.isfile(shim):
        print(f"ctxlifectl install: the shim is missing from the package ({shim}); reinstall ctxlifed", file=sys.stderr)
        return 1
    try:
        old, data = read_settings(path)
    except SettingsError as exc:
        print(f"ctxlifectl install: {exc}", file=sys.stderr)
        return 1
    plugin_at = [p for _s, p in all_settings_paths(ns.project_dir) if _plugin_enabled_in(p)]
    if plugin_at and not ns.with_plugin:
        print("ctxlifectl install: the ctxlifed plugin is enabled in " + ", ".join(plugin_at)
              + "; installing the hooks as well would send every event and every briefing twice. Nothing was"
              " written. Disable the plugin (claude plugin disable ctxlifed@ctxlifed-local) and run this again,"
              " or pass --with-plugin to install anyway.", file=sys.stderr)
        return 1
    mode = "replace" if ns.replace_statusline else ("add" if ns.statusline else None)
    specs = wanted_hooks(getattr(ns, "config", None))
    new_obj, notes = merge(data, python, shim, statusline=mode, specs=specs)
    new = render(new_obj)
    unchanged = old is not None and new_obj == data
    if ns.dry_run:
        if unchanged:
            print(f"{path}: ctxlifed is already installed; nothing would change")
        else:
            sys.stdout.write(diff(path, old, new))
        for n in notes:
            print(n)
        return 0
    if unchanged:
        print(f"{path}: ctxlifed is already installed; nothing changed")
        for n in notes:
            print(n)
        return 0
    try:
        bak = write_settings(path, old, new)
    except (SettingsError, OSError) as exc:
        print(f"ctxlifectl install: {exc}", file=sys.stderr)
        return 1
    if mode == "replace" and isinstance(data.get("statusLine"), dict) and not statusline_is_ours(data["statusLine"]):
        st = _load_state()
        st.setdefault("previous_statusline", {})[path] = data["statusLine"]
        _save_state(st)
    n_async = sum(1 for s in specs if s.is_async)
    if ns.json:
        print(json.dumps({"path": path, "backup": bak, "events": [s.event for s in specs], "notes": notes}))
        return 0
    print(f"installed ctxlifed's hooks into {path} ({len(specs)} events, {n_async} of them async)")
    if WRAP_HOOK in specs:
        print("  wrapper     PreToolUse(Bash): wrap_failing_commands is on (test/build runs go through `ctxlifectl run`)")
    print(f"  interpreter {python}")
    print(f"  shim        {shim}")
    if bak:
        print(f"  backup      {bak}")
    if statusline_is_ours(new_obj.get("statusLine")):
        print(f"  status line {new_obj['statusLine']['command']}")
    from ..runtime.ctl import ctl_command

    print(f"  commands    {ctl_command()} (the path ctxlifed's briefings name)")
    for n in notes:
        print(f"  {n}")
    if ns.scope == "project":
        print("  note: .claude/settings.json is usually committed; these absolute paths are this machine's"
              " (use --scope local for a personal install)")
    print("  memory      ctxlifed keeps project memory in <repo>/docs/memory/: commit it (decisions, lessons and a"
          " rolled-up history are the team's; old session pages roll up, `ctxlifectl memory prune`), or ignore"
          " docs/memory/sessions/ to keep your session pages to yourself")
    print("The daemon starts on the first hook event; `ctxlifectl service install` runs it under systemd/launchd instead."
          " Check everything with `ctxlifectl doctor`.")
    return 0


def cmd_uninstall(ns: argparse.Namespace, sock: str) -> int:
    path = _target(ns)
    try:
        old, data = read_settings(path)
    except SettingsError as exc:
        print(f"ctxlifectl uninstall: {exc}", file=sys.stderr)
        return 1
    st = _load_state()
    prev = (st.get("previous_statusline") or {}).get(path)
    new_obj, count = remove(data, previous_statusline=prev)
    if old is None or count == 0:
        print(f"{path}: ctxlifed is not installed there; nothing changed")
        return 0
    new = render(new_obj)
    if ns.dry_run:
        sys.stdout.write(diff(path, old, new))
        return 0
    try:
        bak = write_settings(path, old, new)
    except (SettingsError, OSError) as exc:
        print(f"ctxlifectl uninstall: {exc}", file=sys.stderr)
        return 1
    if prev is not None:
        st["previous_statusline"].pop(path, None)
        _save_state(st)
    if ns.json:
        print(json.dumps({"path": path, "backup": bak, "removed": count}))
        return 0
    print(f"removed {count} ctxlifed entr{'y' if count == 1 else 'ies'} from {path}" + (f" (backup {bak})" if bak else ""))
    return 0


def register(sub: Any, add: Any) -> None:
    for name, fn, help_ in (("install", cmd_install, "add ctxlifed's hooks to Claude Code's settings.json"),
                            ("uninstall", cmd_uninstall, "remove exactly what `install` added")):
        p = add(name, help_)
        p.add_argument("--scope", choices=SCOPES, default="user",
                       help="user: ~/.claude/settings.json (default); project: .claude/settings.json; "
                            "local: .claude/settings.local.json")
        p.add_argument("--project-dir", help="project folder for --scope project|local (default: the current directory)")
        p.add_argument("--dry-run", action="store_true", help="print the diff, write nothing")
        if name == "install":
            p.add_argument("--statusline", action="store_true", help="also wire `ctxlifectl statusline` in (keeps yours)")
            p.add_argument("--replace-statusline", action="store_true", help="use ctxlifed's status line even if you have one")
            p.add_argument("--with-plugin", action="store_true",
                           help="install even though the ctxlifed plugin is enabled (every event is then sent twice)")
        p.set_defaults(fn=fn)
