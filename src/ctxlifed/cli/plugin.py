"""``ctxlifectl plugin``: write the Claude Code plugin with this installation's absolute paths.

The packaged plugin (``ctxlifed/_plugin``) is a template: its hooks run ``python3`` and its slash
command and skill name ``ctxlifectl``, which are on PATH only in some installs (not after
``make run`` + ``.venv/bin/ctxlifectl install``, nor for an IDE's Claude Code). This command renders it
into a folder with every command made absolute, so what the plugin puts before the model runs.

Rules:
- Every command the plugin runs or names is absolute: hook ``command`` = the interpreter running
  ctxlifectl (it can also start the daemon on demand, which the system ``python3`` cannot); the
  shim is the plugin's own copy (``${CLAUDE_PLUGIN_ROOT}`` is substituted by Claude Code);
  ``ctxlifectl`` in commands and skills = :func:`ctxlifed.runtime.ctl.ctl_command`.
- The rendered folder is ctxlifed's own (default ``<data dir>/plugin``): it is replaced as a whole,
  atomically enough for a reader (written beside it, then renamed), never merged into.
- One source for the shim: the template holds no copy of it. Rendering copies the files of
  ``ctxlifed/_shim/`` (the script ``ctxlifed_hook.py`` and the shim proper it loads) into ``hooks/``
  as real files (a marketplace install copies the plugin without following symlinks), so the plugin
  always runs the shim of this installation.
- Stdlib only; never imports the server side.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
from importlib import resources
from typing import Any

from ..runtime import paths as P
from ..runtime.ctl import ctl_command
from . import install as I

PLUGIN_DIRNAME = "plugin"
SHIM_MODULE_FILE = "ctxlifed_shim.py"  # what the script loads (_shim/ctxlifed_hook.py: SHIM_FILE)
# A bare `ctxlifectl` at a word start in a text the model or a `!` line runs; never one already absolute.
_BARE_CTL = re.compile(r"(?<![\w/.-])ctxlifectl(?=[\s`:*)])")


def template_dir() -> str:
    return os.path.abspath(str(resources.files("ctxlifed") / "_plugin"))


def shim_source() -> str:
    """The one shim source (the script hooks run), which the rendered plugin carries a copy of."""
    return os.path.abspath(str(resources.files("ctxlifed") / "_shim" / I.SHIM_NAME))


def shim_files() -> list[str]:
    """Every file of the shim: the script and the module it loads from its own folder."""
    return [shim_source(), os.path.join(os.path.dirname(shim_source()), SHIM_MODULE_FILE)]


def default_dir() -> str:
    return os.path.join(P.data_dir(), PLUGIN_DIRNAME)


def absolute_ctl_text(text: str, ctl: str) -> str:
    """``text`` with every bare ``ctxlifectl`` command replaced by ``ctl`` (an absolute, quoted path)."""
    return _BARE_CTL.sub(lambda _m: ctl, text)


def render_hooks(data: dict[str, Any], python: str) -> dict[str, Any]:
    """hooks.json with the interpreter made absolute in every one of ctxlifed's handlers."""
    new = json.loads(json.dumps(data))
    for groups in (new.get("hooks") or {}).values():
        for g in groups:
            for h in g.get("hooks", []):
                if I.is_ours(h):
                    h["command"] = python
    return new


def render_plugin(dest: str, *, python: str, ctl: str) -> None:
    """Write the plugin into ``dest`` (replaced as a whole) with absolute commands."""
    src = template_dir()
    parent = os.path.dirname(os.path.abspath(dest))
    os.makedirs(parent, mode=0o700, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".plugin-", dir=parent)
    try:
        out = os.path.join(tmp, "p")
        shutil.copytree(src, out, symlinks=False, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for f in shim_files():  # the script where hooks.json names it, and the module next to it
            shutil.copyfile(f, os.path.join(out, "hooks", os.path.basename(f)))
        hooks = os.path.join(out, "hooks", "hooks.json")
        with open(hooks, encoding="utf-8") as f:
            data = json.load(f)
        with open(hooks, "w", encoding="utf-8") as f:
            f.write(json.dumps(render_hooks(data, python), indent=2) + "\n")
        for root, _dirs, files in os.walk(out):
            for name in files:
                if name.endswith(".md"):
                    path = os.path.join(root, name)
                    with open(path, encoding="utf-8") as f:
                        text = f.read()
                    with open(path, "w", encoding="utf-8") as f:
                        f.write(absolute_ctl_text(text, ctl))
        old = None
        if os.path.lexists(dest):
            old = os.path.join(tmp, "old")
            os.rename(dest, old)
        os.rename(out, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def bare_commands(plugin_dir: str) -> list[str]:
    """Files of a plugin folder that still run a bare ``ctxlifectl`` or ``python3`` (for doctor)."""
    bad: list[str] = []
    for root, _dirs, files in os.walk(plugin_dir):
        for name in files:
            path = os.path.join(root, name)
            if name.endswith(".md"):
                try:
                    with open(path, encoding="utf-8") as f:
                        if _BARE_CTL.search(f.read()):
                            bad.append(path)
                except (OSError, UnicodeDecodeError):
                    continue
            elif name == "hooks.json":
                try:
                    with open(path, encoding="utf-8") as f:
                        data = json.load(f)
                except (OSError, ValueError):
                    continue
                for groups in (data.get("hooks") or {}).values() if isinstance(data, dict) else ():
                    for g in groups if isinstance(groups, list) else ():
                        for h in g.get("hooks", []) if isinstance(g, dict) else ():
                            if I.is_ours(h) and not os.path.isabs(str(h.get("command", ""))):
                                bad.append(path)
    return sorted(set(bad))


def installed_plugin_dirs(config_dir: str | None = None) -> list[str]:
    """Folders under Claude Code's plugin cache that hold a copy of the ctxlifed plugin."""
    base = os.path.join(config_dir or I.claude_config_dir(), "plugins")
    found: list[str] = []
    if not os.path.isdir(base):
        return found
    for root, dirs, files in os.walk(base):
        if root[len(base):].count(os.sep) > 6:
            dirs[:] = []
            continue
        if "plugin.json" in files and os.path.basename(root) == ".claude-plugin":
            try:
                with open(os.path.join(root, "plugin.json"), encoding="utf-8") as f:
                    if json.load(f).get("name") == "ctxlifed":
                        found.append(os.path.dirname(root))
            except (OSError, ValueError, AttributeError):
                continue
    return sorted(found)


def cmd_plugin(ns: argparse.Namespace, sock: str) -> int:
    dest = os.path.abspath(os.path.expanduser(ns.dir or default_dir()))
    ctl = ctl_command()
    if not os.path.isabs(shlex.split(ctl)[0]):
        print("ctxlifectl plugin: cannot find the ctxlifectl script of this installation"
              f" (looked next to {sys.executable} and on PATH); reinstall ctxlifed", file=sys.stderr)
        return 1
    try:
        render_plugin(dest, python=I.interpreter(), ctl=ctl)
    except OSError as exc:
        print(f"ctxlifectl plugin: cannot write {dest}: {exc}", file=sys.stderr)
        return 1
    if ns.json:
        print(json.dumps({"dir": dest, "python": I.interpreter(), "ctl": ctl}))
        return 0
    q = shlex.quote(dest)
    print(f"wrote the ctxlifed plugin to {dest}")
    print(f"  hooks run   {I.interpreter()}")
    print(f"  commands    {ctl}")
    print("Use it for one session:   claude --plugin-dir " + q)
    print("or install it for good:   claude plugin marketplace add " + q
          + " && claude plugin install ctxlifed@ctxlifed-local")
    print("Use the plugin or `ctxlifectl install`, not both: each event would reach the daemon twice.")
    return 0


def register(sub: Any, add: Any) -> None:
    p = add("plugin", "write the Claude Code plugin (hooks, /ctxlifed:recall, skill) with absolute commands")
    p.add_argument("--dir", help=f"where to write it (default: {default_dir()})")
    p.set_defaults(fn=cmd_plugin)
