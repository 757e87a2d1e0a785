"""Read the files that decide what stays resident in a Claude Code session, for ``core.residency``.

Where they live (spec §§3.1, 4.3, 6; Claude Code 2.1.328):
- skills: ``<config>/skills/<name>/SKILL.md`` (user), ``<project>/.claude/skills/<name>/SKILL.md``
  (project), and the skills of each plugin enabled in ``enabledPlugins`` of the user or project
  settings (``<config>/plugins/cache/<marketplace>/<plugin>/<version>/skills/<name>/SKILL.md``, newest
  version folder);
- instructions: ``<config>/CLAUDE.md`` (user), ``<project>/CLAUDE.md`` and ``<project>/.claude/CLAUDE.md``
  (project), ``<project>/CLAUDE.local.md`` (local), auto memory
  ``<config>/projects/<encoded project>/memory/MEMORY.md``, ``<config>/rules/**/*.md`` and
  ``<project>/.claude/rules/**/*.md`` (rules; ``paths:`` in their frontmatter scopes them);
- MCP servers: ``mcpServers`` of ``~/.claude.json`` (user) and of its ``projects[<project>]`` entry
  (local), ``<project>/.mcp.json`` (project);
- MCP tool definitions as sent: the last ``api-request-shape`` record of the project's newest
  transcript (``<config>/projects/<encoded project>/*.jsonl``), or of the transcript passed in; its
  ``deferred_tools_delta`` attachments name the tools held behind tool search (2.1.328's default:
  an MCP tool's definition is sent only after Claude searched for it).
``<config>`` is ``$CLAUDE_CONFIG_DIR`` or ``~/.claude``.

Rules:
- Read-only, stdlib only, never raises on a missing, unreadable or malformed file: it is skipped. A
  file is read with ``bounded_read`` (regular files only: a FIFO named like a rule or CLAUDE.md does
  not block the reader).
- Bounded: at most :data:`MAX_SKILLS` skills and :data:`MAX_RULES` rules, :data:`MAX_FILE_BYTES` of
  each file, a transcript's first and last :data:`MAX_END_BYTES`.
- Files are decoded as UTF-8 with replacement; paths are returned absolute.
"""

from __future__ import annotations

import glob
import json
import os
import re
from typing import Any

from ..core import residency as R
from .bounded_read import Refused, read_bounded

__all__ = ["claude_config_dir", "gather", "read_head", "read_inputs", "transcript_dir"]

MAX_SKILLS = 200
MAX_RULES = 200
MAX_FILE_BYTES = 512 * 1024
MAX_JSON_BYTES = 8 * 1024 * 1024
MAX_END_BYTES = 4 * 1024 * 1024  # of a transcript's head and of its tail


def claude_config_dir(home: str | None = None, env: dict[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    if env.get("CLAUDE_CONFIG_DIR"):
        return env["CLAUDE_CONFIG_DIR"]
    return os.path.join(home or os.path.expanduser("~"), ".claude")


def read_head(path: str, limit: int = MAX_FILE_BYTES) -> str | None:
    """The first ``limit`` bytes of a regular file as text (a symlinked one is followed; a FIFO does not
    block); None when it cannot be read."""
    try:
        data, _st = read_bounded(os.path.realpath(path), limit, cut=True)
    except (Refused, ValueError):
        return None
    return data.decode("utf-8", "replace")


def _json(path: str) -> dict[str, Any]:
    text = read_head(path, MAX_JSON_BYTES)
    if not text:
        return {}
    try:
        v = json.loads(text)
    except ValueError:
        return {}
    return v if isinstance(v, dict) else {}


def _skill_dirs(root: str, scope: str, out: list[R.Skill]) -> None:
    for p in sorted(glob.glob(os.path.join(glob.escape(root), "*", "SKILL.md"))):
        if len(out) >= MAX_SKILLS:
            return
        text = read_head(p)
        if text is not None:
            out.append(R.Skill(name=os.path.basename(os.path.dirname(p)), path=p, scope=scope, text=text))


def _enabled_plugins(config: str, project: str) -> list[str]:
    names: list[str] = []
    for f in (os.path.join(config, "settings.json"), os.path.join(project, ".claude", "settings.json"),
              os.path.join(project, ".claude", "settings.local.json")):
        ep = _json(f).get("enabledPlugins")
        if isinstance(ep, dict):
            for k, v in ep.items():
                if v is True and isinstance(k, str) and k not in names:
                    names.append(k)
    return names


def _plugin_skills(config: str, project: str, out: list[R.Skill]) -> None:
    for pid in _enabled_plugins(config, project):
        plugin, _, market = pid.partition("@")
        if not plugin or not market or "/" in pid or pid.startswith("."):
            continue
        versions = glob.glob(os.path.join(glob.escape(os.path.join(config, "plugins", "cache", market, plugin)), "*"))
        versions = [v for v in versions if os.path.isdir(os.path.join(v, "skills"))]
        if not versions:
            continue
        newest = max(versions, key=lambda v: (os.path.getmtime(v), v))
        _skill_dirs(os.path.join(newest, "skills"), f"plugin:{plugin}", out)


def _rules(root: str, out: list[R.Instruction]) -> None:
    for p in sorted(glob.glob(os.path.join(glob.escape(root), "**", "*.md"), recursive=True)):
        if len(out) >= MAX_RULES:
            return
        text = read_head(p)
        if text is not None:
            out.append(R.Instruction(path=p, kind="rule", text=text))


def _mcp(config_home: str, project: str) -> list[R.McpServer]:
    out: list[R.McpServer] = []
    user_json = os.path.join(config_home, ".claude.json")
    data = _json(user_json)
    servers = data.get("mcpServers")
    if isinstance(servers, dict):
        out += [R.McpServer(name=str(k), scope="user", source=user_json) for k in servers]
    projects = data.get("projects")
    if isinstance(projects, dict) and isinstance(projects.get(project), dict):
        local = projects[project].get("mcpServers")
        if isinstance(local, dict):
            out += [R.McpServer(name=str(k), scope="local", source=user_json) for k in local]
    mcp_json = os.path.join(project, ".mcp.json")
    servers = _json(mcp_json).get("mcpServers")
    if isinstance(servers, dict):
        out += [R.McpServer(name=str(k), scope="project", source=mcp_json) for k in servers]
    return out


def transcript_dir(config: str, project: str) -> str:
    """Where Claude Code keeps the transcripts of sessions launched in ``project``."""
    return os.path.join(config, "projects", re.sub(r"[^A-Za-z0-9]", "-", project))


def _newest_transcript(config: str, project: str) -> str | None:
    files = glob.glob(os.path.join(glob.escape(transcript_dir(config, project)), "*.jsonl"))
    best = None
    for f in files:
        try:
            m = os.path.getmtime(f)
        except OSError:
            continue
        if best is None or (m, f) > best:
            best = (m, f)
    return best[1] if best else None


def _ends(transcript: str) -> list[bytes]:
    """The transcript's head and tail (:data:`MAX_END_BYTES` each, cut at line boundaries), or the
    whole file when it is no larger than both: Claude Code writes a request shape once per distinct
    shape (at the start, and again when the tools change), so the last one is near one end or the other."""
    try:
        with open(transcript, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size <= 2 * MAX_END_BYTES:
                return [f.read(2 * MAX_END_BYTES)]
            head = f.read(MAX_END_BYTES)
            f.seek(size - MAX_END_BYTES)
            tail = f.read(MAX_END_BYTES)
    except OSError:
        return []
    return [head[: head.rfind(b"\n") + 1], tail[tail.find(b"\n") + 1:]]


def deferred_tool_names(transcript: str) -> list[str]:
    """Tool names listed behind tool search (``deferred_tools_delta`` attachments: added minus
    removed, in order) in the transcript's head and tail."""
    names: dict[str, None] = {}
    for part in _ends(transcript):
        for line in part.split(b"\n"):
            if b"deferred_tools_delta" not in line:
                continue
            try:
                rec = json.loads(line.decode("utf-8", "replace"))
            except ValueError:
                continue
            att = rec.get("attachment") if isinstance(rec, dict) else None
            if not isinstance(att, dict) or att.get("type") != "deferred_tools_delta":
                continue
            for n in att.get("addedNames") or []:
                if isinstance(n, str):
                    names[n] = None
            for n in att.get("removedNames") or []:
                if isinstance(n, str):
                    names.pop(n, None)
    return list(names)


def last_request_tools(transcript: str) -> list[Any] | None:
    """``shape.tools`` of the last ``api-request-shape`` record in the transcript's tail, else its
    head; None when neither has one."""
    for part in reversed(_ends(transcript)):
        for line in reversed(part.split(b"\n")):
            if b'"api-request-shape"' not in line:
                continue
            try:
                rec = json.loads(line.decode("utf-8", "replace"))
            except ValueError:
                continue
            shape = rec.get("shape") if isinstance(rec, dict) and rec.get("type") == "api-request-shape" else None
            tools = shape.get("tools") if isinstance(shape, dict) else None
            if isinstance(tools, list):
                return tools
    return None


def read_inputs(project: str, *, home: str | None = None, env: dict[str, str] | None = None,
                transcript: str | None = None) -> dict[str, Any]:
    """Keyword arguments for :func:`ctxlifed.core.residency.check` (skills, instructions, mcp) read
    from disk for ``project`` (absolute) and the user's Claude Code configuration. ``transcript``:
    where to read the last request's tool definitions (None: the project's newest transcript; "":
    none)."""
    home = home or os.path.expanduser("~")
    config = claude_config_dir(home, env)
    project = os.path.abspath(project)
    skills: list[R.Skill] = []
    _skill_dirs(os.path.join(config, "skills"), "user", skills)
    _skill_dirs(os.path.join(project, ".claude", "skills"), "project", skills)
    _plugin_skills(config, project, skills)
    instructions: list[R.Instruction] = []
    for path, kind in ((os.path.join(config, "CLAUDE.md"), "user"), (os.path.join(project, "CLAUDE.md"), "project"),
                       (os.path.join(project, ".claude", "CLAUDE.md"), "project"),
                       (os.path.join(project, "CLAUDE.local.md"), "local"),
                       (os.path.join(transcript_dir(config, project), "memory", "MEMORY.md"), "memory")):
        text = read_head(path)
        if text is not None:
            instructions.append(R.Instruction(path=path, kind=kind, text=text))
    rules: list[R.Instruction] = []
    _rules(os.path.join(config, "rules"), rules)
    _rules(os.path.join(project, ".claude", "rules"), rules)
    mcp = _mcp(home if env is None or not env.get("CLAUDE_CONFIG_DIR") else config, project)
    tpath = _newest_transcript(config, project) if transcript is None else transcript
    return {"skills": skills, "instructions": instructions + rules, "mcp": _with_tools(mcp, tpath)}


def _with_tools(mcp: list[R.McpServer], tpath: str | None) -> list[R.McpServer]:
    """The configured servers with what the transcript's last request shows of their tools; servers
    seen there but configured elsewhere (plugins, managed, ``--mcp-config``) are added."""
    if not tpath:
        return mcp
    tools = last_request_tools(tpath)
    by_server = R.mcp_tools_from_shape(tools) if tools is not None else {}
    deferred: dict[str, list[str]] = {}
    for n in deferred_tool_names(tpath):
        server = R.mcp_server_of(n)
        if server is not None and server not in by_server:
            deferred.setdefault(server, []).append(n)

    def seen(name: str) -> tuple[tuple[tuple[str, int], ...] | None, tuple[str, ...]]:
        return (tuple(by_server[name]) if name in by_server else None), tuple(deferred.get(name, ()))

    out = [R.McpServer(name=s.name, scope=s.scope, source=s.source, tools=seen(s.name)[0], deferred=seen(s.name)[1])
           for s in mcp]
    known = {s.name for s in mcp}
    for name in sorted(set(by_server) | set(deferred)):
        if name not in known:
            out.append(R.McpServer(name=name, scope="plugin" if name.startswith("plugin_") else "other", source=tpath,
                                   tools=seen(name)[0], deferred=seen(name)[1]))
    return out


def gather(project: str, **kw: Any) -> R.Report:
    """Read and check in one call (for ``doctor --context``)."""
    loaded = kw.pop("loaded", ())
    system_tokens = kw.pop("system_tokens", None)
    system_capacity = kw.pop("system_capacity", None)
    return R.check(**read_inputs(project, **kw), loaded=list(loaded), system_tokens=system_tokens,
                   system_capacity=system_capacity)
