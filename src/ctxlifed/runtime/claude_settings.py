"""Claude Code's permission rules, read from the settings files it loads (for ``core/wrap_policy.py``).

Rules:
- Sources: the user's ``settings.json`` in Claude Code's config folder (the one holding the session's
  transcript: ``<config>/projects/<encoded launch dir>/<session>.jsonl``), the launch dir's
  ``.claude/settings.json`` and ``.claude/settings.local.json``, and the managed policy files
  (``managed-settings.json`` and ``managed-settings.d/*.json`` under ``/etc/claude-code`` on Linux,
  ``/Library/Application Support/ClaudeCode`` on macOS).
- The launch dir (where Claude Code reads project settings) is the working directory or the ancestor
  of it whose encoded name (``core.paths.encode_project_dir``) is the transcript's folder; when none
  is, the rules are incomplete.
- Every read is bounded (:data:`MAX_SETTINGS_BYTES`), non-blocking and of a regular file only (a FIFO,
  a device or a folder in a settings path is a fault); a symlink is resolved first, like Claude Code
  does, and the resolved file opened with ``O_NOFOLLOW`` (no swap between the check and the open).
  An absent file is read (it holds no rules). A file that cannot be read, is not JSON, or holds a
  ``permissions`` entry of the wrong shape makes the rules incomplete: the caller must not wrap.
- Another PreToolUse hook in any of these files (a handler that is not ctxlifed's shim), or an enabled
  plugin other than ctxlifed's (its hooks are not read here), is reported as ``Rules.other_hooks``.
- ``allowManagedPermissionRulesOnly`` in a managed file: only the managed allow rules count (deny and
  ask rules are collected from every source anyway).
- Claude Code's command line (:func:`cli_rules`, Linux ``/proc``): for every running Claude Code process of
  this user (it cannot tell which one runs the session, so it takes all), the deny and ask rules of its
  ``--disallowedTools`` / ``--disallowed-tools`` and of its ``--settings`` (a file, relative to that
  process's folder, or JSON text), whose hooks and plugins count as other hooks too; ``--plugin-dir`` is
  another hook; ``--setting-sources`` (some files not loaded, so an allow read here may not hold) or a
  value that cannot be read makes the rules incomplete. Allow rules from the command line are not used
  (a wrap fewer, never one more). Without ``/proc`` the command line cannot be seen: incomplete.
- Not visible (a wrap fewer, never one more): approvals granted for the session only, and allow rules
  kept elsewhere (``~/.claude.json``).
"""

from __future__ import annotations

import json
import os
import sys

from ..core.paths import encode_project_dir
from ..core.wrap_policy import Rules
from .bounded_read import Refused, read_bounded

MAX_SETTINGS_BYTES = 1 << 20
MAX_MANAGED_FILES = 64


def managed_dirs() -> tuple[str, ...]:
    if sys.platform == "darwin":
        return ("/Library/Application Support/ClaudeCode",)
    return ("/etc/claude-code",)


class Unreadable(Exception):
    """A settings file that is there but cannot be used (not a regular file, too large, not a JSON object)."""


def read_json(path: str, max_bytes: int = MAX_SETTINGS_BYTES) -> dict[str, object] | None:
    """The JSON object in ``path``; None when absent; :class:`Unreadable` otherwise (see the rules)."""
    try:
        data, _st = read_bounded(os.path.realpath(path), max_bytes)
    except Refused as exc:
        if exc.missing:
            return None
        raise Unreadable(f"{path}: {exc}") from None
    if not data.strip():
        return {}
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError):
        raise Unreadable(f"{path}: not JSON") from None
    if not isinstance(obj, dict):
        raise Unreadable(f"{path}: not a JSON object")
    return obj


def launch_dir(cwd: str, transcript_path: str) -> str | None:
    """The folder Claude Code was started in: ``cwd`` or its nearest ancestor named by the transcript's folder."""
    if not cwd or not transcript_path or not os.path.isabs(cwd):
        return None
    want = os.path.basename(os.path.dirname(transcript_path))
    d = os.path.normpath(cwd)
    while True:
        if encode_project_dir(d) == want:
            return d
        up = os.path.dirname(d)
        if up == d:
            return None
        d = up


def _managed_files() -> list[str]:
    out: list[str] = []
    for base in managed_dirs():
        out.append(os.path.join(base, "managed-settings.json"))
        dd = os.path.join(base, "managed-settings.d")
        try:
            names = sorted(n for n in os.listdir(dd) if n.endswith(".json"))
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise Unreadable(f"{dd}: {exc.strerror or exc}") from None
        if len(names) > MAX_MANAGED_FILES:
            raise Unreadable(f"{dd}: more than {MAX_MANAGED_FILES} files")
        out += [os.path.join(dd, n) for n in names]
    return out


def _rules_of(path: str, obj: dict[str, object]) -> tuple[list[str], list[str], list[str], bool]:
    perms = obj.get("permissions", {})
    if not isinstance(perms, dict):
        raise Unreadable(f"{path}: permissions is not an object")
    lists = []
    for key in ("allow", "ask", "deny"):
        v = perms.get(key, [])
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise Unreadable(f"{path}: permissions.{key} is not a list of strings")
        lists.append(list(v))
    sb = obj.get("sandbox")
    sandbox = isinstance(sb, dict) and sb.get("enabled") not in (None, False)
    return lists[0], lists[1], lists[2], sandbox


SHIM_NAME = "ctxlifed_hook.py"


def _other_hooks(path: str, obj: dict[str, object]) -> str:
    hooks = obj.get("hooks")
    groups = hooks.get("PreToolUse") if isinstance(hooks, dict) else None
    if groups:
        if not isinstance(groups, list):
            return f"{path}: hooks.PreToolUse"
        for g in groups:
            hs = g.get("hooks") if isinstance(g, dict) else None
            for h in hs if isinstance(hs, list) else [None]:
                text = json.dumps(h) if h is not None else ""
                if SHIM_NAME not in text:
                    return f"{path}: a PreToolUse hook"
    plugins = obj.get("enabledPlugins")
    if isinstance(plugins, dict):
        for name, on in plugins.items():
            if on not in (False, None) and not str(name).startswith("ctxlifed@"):
                return f"{path}: the plugin {name}"
    return ""


PROC = "/proc"
MAX_PROCESSES = 4096
MAX_CMDLINE = 256 << 10
_DENY_FLAGS = ("--disallowedTools", "--disallowed-tools")
_SETTINGS_FLAG = "--settings"
_REFUSE_FLAGS = ("--setting-sources",)
_HOOK_FLAGS = ("--plugin-dir",)


def is_claude(argv: list[str]) -> bool:
    """Is this argv a Claude Code CLI process (the native binary, or node running its package)?"""
    if not argv:
        return False
    if os.path.basename(argv[0]) in ("claude", "claude.exe"):
        return True
    return any("@anthropic-ai/claude-code" in a for a in argv[:3])


def split_tools(value: str) -> list[str]:
    """``--disallowedTools`` values: rules separated by commas or spaces outside parentheses."""
    out: list[str] = []
    depth, cur = 0, []
    for ch in value:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        if depth == 0 and (ch == "," or ch.isspace()):
            if cur:
                out.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    if cur:
        out.append("".join(cur))
    return out


def _flag_values(argv: list[str], names: tuple[str, ...], *, variadic: bool) -> list[str]:
    vals: list[str] = []
    i = 1
    while i < len(argv):
        a = argv[i]
        name, eq, inline = a.partition("=")
        if name in names:
            if eq:
                vals.append(inline)
            else:
                j = i + 1
                while j < len(argv) and not argv[j].startswith("-"):
                    vals.append(argv[j])
                    j += 1
                    if not variadic:
                        break
                i = j - 1
        i += 1
    return vals


def rules_of_argv(argv: list[str], proc_cwd: str) -> tuple[list[str], list[str], bool, str]:
    """(deny, ask, other hooks, why incomplete) from one Claude Code command line (see the module rules)."""
    deny: list[str] = []
    ask: list[str] = []
    other = False
    for a in argv[1:]:
        name = a.partition("=")[0]
        if name in _REFUSE_FLAGS:
            return [], [], False, f"a Claude Code process runs with {name}"
        if name in _HOOK_FLAGS:
            other = True
    for v in _flag_values(argv, _DENY_FLAGS, variadic=True):
        deny += split_tools(v)
    for v in _flag_values(argv, (_SETTINGS_FLAG,), variadic=False):
        if v.lstrip().startswith("{"):
            try:
                obj = json.loads(v)
            except (ValueError, RecursionError):
                return [], [], False, "--settings: not JSON"
            if not isinstance(obj, dict):
                return [], [], False, "--settings: not a JSON object"
            where = "--settings"
        else:
            where = v if os.path.isabs(v) else os.path.join(proc_cwd, v)
            if not os.path.isabs(where):
                return [], [], False, "--settings: a relative file of a process whose folder is unknown"
            obj = read_json(where)
            if obj is None:
                continue
        _a, k, d, _sb = _rules_of(where, obj)
        deny += d
        ask += k
        other = other or bool(_other_hooks(where, obj))
    return deny, ask, other, ""


def cli_rules(proc: str = PROC) -> tuple[list[str], list[str], bool]:
    """(deny, ask, other hooks) from the command lines of this user's running Claude Code processes;
    :class:`Unreadable` when they cannot be seen or read (see the module rules)."""
    if not os.path.isdir(os.path.join(proc, "self")):
        raise Unreadable("Claude Code's command line cannot be seen here (no /proc)")
    uid = os.geteuid()
    deny: list[str] = []
    ask: list[str] = []
    other = False
    pids = [n for n in os.listdir(proc) if n.isdigit()]
    if len(pids) > MAX_PROCESSES:
        raise Unreadable(f"more than {MAX_PROCESSES} processes")
    for pid in pids:
        base = os.path.join(proc, pid)
        try:
            if os.stat(base).st_uid != uid:
                continue
            with open(os.path.join(base, "cmdline"), "rb") as f:
                raw = f.read(MAX_CMDLINE + 1)
        except OSError:
            continue  # gone, or not ours to read
        if len(raw) > MAX_CMDLINE:
            raise Unreadable(f"process {pid}: command line too long")
        argv = [x.decode("utf-8", "surrogateescape") for x in raw.split(b"\0") if x]
        if not is_claude(argv):
            continue
        try:
            proc_cwd = os.readlink(os.path.join(base, "cwd"))
        except OSError:
            proc_cwd = ""
        d, k, o, why = rules_of_argv(argv, proc_cwd)
        if why:
            raise Unreadable(f"process {pid}: {why}")
        deny += d
        ask += k
        other = other or o
    return deny, ask, other


def read_rules(cwd: str, transcript_path: str, *, managed: list[str] | None = None,
               proc: str | None = PROC) -> Rules:
    """Every permission rule Claude Code loads for a session started with this transcript, from ``cwd``."""
    try:
        launch = launch_dir(cwd, transcript_path)
        if launch is None:
            return Rules(complete=False, why_incomplete="the launch folder is not known from the transcript path")
        config = os.path.dirname(os.path.dirname(os.path.dirname(transcript_path)))
        allow: list[str] = []
        ask: list[str] = []
        deny: list[str] = []
        sandbox = False
        managed_only = False
        other = ""
        for path in (_managed_files() if managed is None else managed):
            obj = read_json(path)
            if obj is None:
                continue
            a, k, d, sb = _rules_of(path, obj)
            allow += a
            ask += k
            deny += d
            sandbox |= sb
            managed_only |= obj.get("allowManagedPermissionRulesOnly") is True
            other = other or _other_hooks(path, obj)
        for path in (os.path.join(config, "settings.json"), os.path.join(launch, ".claude", "settings.json"),
                     os.path.join(launch, ".claude", "settings.local.json")):
            obj = read_json(path)
            if obj is None:
                continue
            a, k, d, sb = _rules_of(path, obj)
            if not managed_only:
                allow += a
            ask += k
            deny += d
            sandbox |= sb
            other = other or _other_hooks(path, obj)
        if proc is not None:
            d, k, o = cli_rules(proc)
            deny += d
            ask += k
            other = other or ("a Claude Code process's command line (--settings hooks or plugins, --plugin-dir)"
                              if o else "")
        return Rules(allow=tuple(allow), ask=tuple(ask), deny=tuple(deny), sandbox=sandbox, other_hooks=other)
    except Unreadable as exc:
        return Rules(complete=False, why_incomplete=str(exc))
