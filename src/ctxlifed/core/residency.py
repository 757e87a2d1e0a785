"""Residency hygiene: what the user's and the project's files keep resident in every Claude Code turn.

Design 13.3 (context lifecycle) as advice, checked against file contents the caller read:

- Skill listing: ``description`` + ``when_to_use`` are cut at :data:`LISTING_CUT` = 1,536 characters in
  the listing that stays resident; what is past the cut never reaches the model, so key words go first.
- Skill bodies: after a compaction each invoked body comes back cut to its first
  :data:`~ctxlifed.core.survival.SKILL_MAX_TOKENS` = 5,000 tokens (the rest is lost).
- ``context: fork`` for large read-only sweeps (only the result enters the main context);
  ``disable-model-invocation: true`` for skills with side effects (user-only, zero resident cost).
- CLAUDE.md (user, project, local), auto memory (``MEMORY.md``) and rules without ``paths:`` are
  resident every turn and re-read from disk after a compaction; rules with ``paths:`` are lost at a compaction until a matching file
  is read again.
- MCP servers: their tool definitions sit in the System zone; itemized per server when measured (a
  request's tool list); with tool search (Claude Code's default) only their names are listed
  (``deferred_tools_delta``) until Claude searches for a tool.
- CLAUDE.md or a rule changed after it was loaded applies only after ``/clear`` or ``/compact``.

Rules:
- Pure: no I/O, no clock, no logging; stdlib only (plus the project's token estimator). The caller
  passes file texts and metadata (``runtime/residency_files.py`` reads them).
- Every figure is an estimate by :func:`~ctxlifed.core.model.estimate_tokens` unless the input says
  it was measured; human lines say "estimated" / "est.".
- Findings are ``warn`` (costs tokens every turn or loses content at a compaction: worth a fix) or
  ``info`` (what is resident and what a compaction re-attaches or drops). Each warn names its fix.
- Order is deterministic: findings sorted by level (warn first), then :data:`CODES` order; within a
  code, skills by (scope, name), instructions as given, MCP servers by tokens (largest first).
- Bounded: at most :data:`MAX_FINDINGS` findings; texts are read only up to what a caller passed.
- :func:`compact_instructions` builds a ``# Compact instructions`` section from the project's phase,
  decisions, failing tests and active files; :func:`with_compact_instructions` returns a CLAUDE.md
  text with that section replaced or appended (writing it is the caller's, and only when asked).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ctxlifed.core.figures import tokens as fmt_tokens
from ctxlifed.core.model import estimate_tokens
from ctxlifed.core.survival import SKILL_MAX_TOKENS

__all__ = [
    "CODES",
    "LISTING_CUT",
    "Finding",
    "Instruction",
    "LoadedInstruction",
    "McpServer",
    "Report",
    "Skill",
    "check",
    "compact_instructions",
    "mcp_server_of",
    "mcp_tools_from_shape",
    "note_text",
    "parse_frontmatter",
    "render_lines",
    "with_compact_instructions",
]

LISTING_CUT = 1_536  # characters of description + when_to_use kept in the skill listing
INSTRUCTIONS_WARN_TOKENS = 5_000  # always-resident CLAUDE.md + unscoped rules above this: warn
INSTRUCTION_FILE_WARN_LINES = 200  # one CLAUDE.md longer than this: warn
MCP_DOMINATES = 0.5  # MCP tool definitions above this share of the measured System zone: warn
MAX_FINDINGS = 60
MAX_ITEMS = 8  # decisions / tests / files listed in a compact-instructions section
COMPACT_HEADING = "# Compact instructions"

CODES = (
    "instructions_changed",
    "skill_description_cut",
    "skill_body_over_5k",
    "skill_side_effects",
    "skill_should_fork",
    "mcp_system_zone",
    "instructions_size",
    "path_rule_dropped",
    "reattached",
    "mcp_server",
)


@dataclass(frozen=True)
class Skill:
    name: str  # directory name (the invocation name)
    path: str
    scope: str  # user | project | plugin:<name>
    text: str  # SKILL.md, frontmatter included


@dataclass(frozen=True)
class Instruction:
    path: str
    kind: str  # user | project | local | memory (auto memory MEMORY.md) | rule
    text: str


@dataclass(frozen=True)
class McpServer:
    name: str
    scope: str  # user | project | local | plugin:<name>
    source: str  # the config file that declares it
    tools: tuple[tuple[str, int], ...] | None = None  # (tool name, estimated tokens) when seen in a request
    deferred: tuple[str, ...] = ()  # its tool names listed behind tool search (definitions not loaded)


@dataclass(frozen=True)
class LoadedInstruction:
    """An instruction file the session loaded (InstructionsLoaded) and its file's current mtime."""

    path: str
    loaded_ts: float
    mtime: float | None  # None: the file is gone


@dataclass(frozen=True)
class Finding:
    code: str
    level: str  # warn | info
    subject: str
    path: str
    tokens: int  # estimated tokens the finding is about (0 when not a token figure)
    message: str
    fix: str = ""

    def line(self) -> str:
        return f"{self.level:<5} {self.subject}: {self.message}" + (f" — fix: {self.fix}" if self.fix else "")


@dataclass(frozen=True)
class Report:
    findings: tuple[Finding, ...]
    listing_tokens: int  # estimated: the resident skill listing of these skills
    instruction_tokens: int  # estimated: CLAUDE.md files + unscoped rules, resident every turn
    mcp_tokens: int | None  # estimated from the last request's tool definitions; None: not seen
    skills: int
    truncated: int = 0  # findings left out (over MAX_FINDINGS)
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.level == "warn"]


# -- frontmatter ---------------------------------------------------------------------------------

_KEY_RE = re.compile(r"^([A-Za-z_][\w-]*)\s*:\s*(.*)$")
_TRUE = frozenset({"true", "yes", "on", "1"})


def _unquote(v: str) -> str:
    v = v.strip()
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
        return v[1:-1]
    return v


def parse_frontmatter(text: str) -> tuple[dict[str, object], str]:
    """The YAML frontmatter subset Claude Code skills and rules use, and the body after it.

    Scalars (quoted or not), block scalars (``|``/``>`` with indented lines), lists (``- x`` lines or
    ``[a, b]``). No frontmatter: ``({}, text)``. Never raises."""
    if not text.startswith("---"):
        return {}, text
    lines = text.split("\n")
    if lines[0].strip() != "---":
        return {}, text
    end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
    if end is None:
        return {}, text
    meta: dict[str, object] = {}
    i = 1
    while i < end:
        m = _KEY_RE.match(lines[i])
        i += 1
        if not m:
            continue
        key, raw = m.group(1), m.group(2).strip()
        if raw in ("|", ">", "|-", ">-", "|+", ">+", ""):
            block: list[str] = []
            while i < end and (not lines[i].strip() or lines[i][:1] in (" ", "\t")):
                block.append(lines[i].strip())
                i += 1
            items = [b[1:].strip() for b in block if b.startswith("-")]
            if raw == "" and items and len(items) == len([b for b in block if b]):
                meta[key] = [_unquote(x) for x in items]
            elif raw.startswith(">"):
                meta[key] = " ".join(b for b in block if b)
            else:
                meta[key] = "\n".join(block).strip("\n")
        elif raw.startswith("[") and raw.endswith("]"):
            meta[key] = [_unquote(x) for x in raw[1:-1].split(",") if x.strip()]
        else:
            meta[key] = _unquote(raw)
    return meta, "\n".join(lines[end + 1:])


def _flag(meta: dict[str, object], key: str) -> bool:
    v = meta.get(key)
    return isinstance(v, bool) and v or isinstance(v, str) and v.strip().lower() in _TRUE


def _text(meta: dict[str, object], key: str) -> str:
    v = meta.get(key)
    if isinstance(v, list):
        return " ".join(str(x) for x in v)
    return str(v) if v is not None else ""


def _tools(meta: dict[str, object]) -> list[str]:
    v = meta.get("allowed-tools")
    if isinstance(v, list):
        return [str(x).strip() for x in v if str(x).strip()]
    if isinstance(v, str):
        # "Read Grep Bash(git log *)" or "Read, Grep": split outside parentheses
        out, cur, depth = [], "", 0
        for ch in v:
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0 and ch in " ,":
                if cur.strip():
                    out.append(cur.strip())
                cur = ""
            else:
                cur += ch
        if cur.strip():
            out.append(cur.strip())
        return out
    return []


# -- skills --------------------------------------------------------------------------------------

_READ_ONLY_TOOLS = frozenset({"Read", "Grep", "Glob", "LS", "WebFetch", "WebSearch", "NotebookRead", "ToolSearch"})
_WRITE_TOOLS = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit"})
_READ_ONLY_BASH = re.compile(r"^Bash\((?:git (?:log|show|diff|status|grep|blame)|grep|rg|find|ls|cat|head|tail|wc|tree)\b")
# A sweep: many reads for one answer. Strong words flag a skill on their own (when it writes nothing);
# the weak ones only when its allowed-tools are declared and all read-only.
_SWEEP_STRONG = re.compile(
    r"\b(?:research\w*|investigat\w*|explor\w*|audit\w*|sweep\w*|crawl\w*|find (?:all|every)|"
    r"across the (?:code ?base|repo\w*)|every file|all files|whole (?:code ?base|repo\w*))\b|调研|扫描|排查",
    re.IGNORECASE)
_SWEEP_WEAK = re.compile(r"\b(?:survey\w*|scan\w*|analy[sz]\w*|inventor\w*|review\w*|search\w*)\b|搜索|审查",
                         re.IGNORECASE)
_SIDE_EFFECT = re.compile(
    r"\b(?:deploy\w*|publish\w*|git push|push(?:es|ing)? to|git commit|commit(?:s|ting)? (?:the|all|staged|changes)|"
    r"send\w* (?:a |an |the )?(?:message|mail|email|e-mail|notification)s?|post\w* (?:a message )?to (?:slack|teams|"
    r"discord|the channel)|notify\w*|run (?:the )?migrations?|migrate (?:the )?(?:db|database|schema)|"
    r"drop (?:table|database)|rm -rf|kubectl (?:apply|delete)|terraform (?:apply|destroy)|"
    r"gh (?:pr|release) (?:create|merge)|npm publish|twine upload|(?:cut|create|tag) (?:a |the )?release)\b"
    r"|部署|发布|推送|发送|提交",
    re.IGNORECASE)


def _listing_entry(name: str, meta: dict[str, object]) -> tuple[str, int]:
    """(description + when_to_use as listed, total characters before the cut)."""
    desc = " ".join(x for x in (_text(meta, "description").strip(), _text(meta, "when_to_use").strip()) if x)
    return desc, len(desc)


def _invocation(sk: Skill, name: str) -> str:
    """How the user types it: ``name``, or ``plugin:name`` for a plugin's skill."""
    return f"{sk.scope[7:]}:{name}" if sk.scope.startswith("plugin:") else name


def _skill_findings(sk: Skill) -> tuple[list[Finding], int]:
    meta, body = parse_frontmatter(sk.text)
    name = _text(meta, "name").strip() or sk.name
    subject = f"skill {name}" + (f" ({sk.scope})" if sk.scope else "")
    desc, n = _listing_entry(name, meta)
    no_model = _flag(meta, "disable-model-invocation")
    listing = 0 if no_model else estimate_tokens(f"- {name}: {desc[:LISTING_CUT]}")
    out: list[Finding] = []
    if n > LISTING_CUT and not no_model:
        cut = desc[LISTING_CUT:]
        out.append(Finding(
            "skill_description_cut", "warn", subject, sk.path, estimate_tokens(cut),
            f"description + when_to_use is {n:,} characters; the listing keeps the first {LISTING_CUT:,},"
            f" so the last {n - LISTING_CUT:,} (\"{cut[:40].strip()}…\") never reach the model",
            f"put the key words first and cut it to {LISTING_CUT:,} characters"))
    body_tokens = estimate_tokens(body.strip())
    if body_tokens > SKILL_MAX_TOKENS:
        out.append(Finding(
            "skill_body_over_5k", "warn", subject, sk.path, body_tokens,
            f"body is {fmt_tokens(body_tokens)} tokens (estimated): after a compaction only its first"
            f" {fmt_tokens(SKILL_MAX_TOKENS)} come back, the last {fmt_tokens(body_tokens - SKILL_MAX_TOKENS)} are lost",
            "put the rules that must hold first, move reference material into files the skill reads on demand"))
    tools = _tools(meta)
    forked = _text(meta, "context").strip().lower() == "fork"
    text_for_intent = f"{name} {desc} {body[:2000]}"
    side = _SIDE_EFFECT.search(f"{name} {desc} {' '.join(tools)}")
    if side and not no_model:
        out.append(Finding(
            "skill_side_effects", "warn", subject, sk.path, listing,
            f"has side effects (\"{side.group(0)}\") yet Claude may invoke it on its own; its listing entry costs"
            f" {fmt_tokens(listing)} tokens (estimated) every turn",
            "add `disable-model-invocation: true` to its frontmatter (only you run it, with /" + _invocation(sk, name)
            + "; zero resident cost)"))
    read_only = not (set(t.split("(")[0] for t in tools) & _WRITE_TOOLS) and all(
        t in _READ_ONLY_TOOLS or _READ_ONLY_BASH.match(t) for t in tools)
    sweep = _SWEEP_STRONG.search(text_for_intent) or (_SWEEP_WEAK.search(text_for_intent) if tools else None)
    if not forked and not side and read_only and sweep:
        out.append(Finding(
            "skill_should_fork", "warn", subject, sk.path, body_tokens,
            f"a read-only sweep (\"{sweep.group(0)}\"): its body ({fmt_tokens(body_tokens)} tokens, estimated) and"
            " everything it reads stay in the main context for the rest of the session",
            "add `context: fork` (and `agent: Explore`) to its frontmatter: it runs in a subagent and only its"
            " result comes back"))
    return out, listing


# -- instructions --------------------------------------------------------------------------------

def _rule_paths(meta: dict[str, object]) -> list[str]:
    v = meta.get("paths")
    if isinstance(v, list):
        return [str(x) for x in v if str(x).strip()]
    if isinstance(v, str) and v.strip():
        return [x.strip() for x in v.split(",") if x.strip()]
    return []


def _instruction_findings(instructions: list[Instruction]) -> tuple[list[Finding], int]:
    out: list[Finding] = []
    resident: list[tuple[Instruction, int]] = []
    for ins in instructions:
        t = estimate_tokens(ins.text)
        if ins.kind == "rule":
            meta, _ = parse_frontmatter(ins.text)
            globs = _rule_paths(meta)
            if globs:
                shown = ", ".join(globs[:3]) + (" …" if len(globs) > 3 else "")
                out.append(Finding(
                    "path_rule_dropped", "info", f"rule {ins.path.rsplit('/', 1)[-1]}", ins.path, t,
                    f"scoped to {shown}: loaded when a matching file is read; a compaction drops it"
                    f" ({fmt_tokens(t)} tokens, estimated) until a matching file is read again",
                    "remove `paths:` if it must hold for the whole session"))
                continue
        resident.append((ins, t))
        lines = ins.text.count("\n") + (1 if ins.text and not ins.text.endswith("\n") else 0)
        if ins.kind in ("user", "project", "local") and lines > INSTRUCTION_FILE_WARN_LINES:
            out.append(Finding(
                "instructions_size", "warn", f"{ins.kind} CLAUDE.md", ins.path, t,
                f"{lines:,} lines, {fmt_tokens(t)} tokens (estimated), billed every turn and re-read after every"
                " compaction",
                f"keep it under {INSTRUCTION_FILE_WARN_LINES} lines: move procedures into skills or path-scoped"
                " rules"))
    total = sum(t for _, t in resident)
    if resident:
        names = ", ".join(f"{i.path} ({fmt_tokens(t)})" for i, t in resident)
        if total > INSTRUCTIONS_WARN_TOKENS:
            out.append(Finding(
                "instructions_size", "warn", "always-resident instructions", "", total,
                f"CLAUDE.md files and unscoped rules hold {fmt_tokens(total)} tokens (estimated), billed every"
                f" turn: {names}",
                f"trim them below {fmt_tokens(INSTRUCTIONS_WARN_TOKENS)} tokens: procedures into skills,"
                " file-specific rules under `paths:`"))
        out.append(Finding(
            "reattached", "info", "after a compaction", "", total,
            f"re-read from disk and re-attached: {names} = {fmt_tokens(total)} tokens (estimated)"))
    return out, total


# -- MCP -----------------------------------------------------------------------------------------

def mcp_server_of(tool: str) -> str | None:
    """``mcp__<server>__<tool>`` -> server (``mcp__plugin_<p>_<s>__t`` -> ``plugin_<p>_<s>``)."""
    if not tool.startswith("mcp__"):
        return None
    rest = tool[5:]
    server, sep, _ = rest.partition("__")
    return server if sep and server else None


def mcp_tools_from_shape(tools: object) -> dict[str, list[tuple[str, int]]]:
    """Group the tool definitions of one API request (a transcript ``api-request-shape`` record's
    ``shape.tools``: a list of tool objects) by MCP server: {server: [(tool, estimated tokens)]}.
    Anything else gives {}."""
    import json

    out: dict[str, list[tuple[str, int]]] = {}
    if not isinstance(tools, list):
        return out
    for t in tools:
        if not isinstance(t, dict):
            continue
        name = t.get("name")
        if not isinstance(name, str):
            continue
        server = mcp_server_of(name)
        if server is None:
            continue
        out.setdefault(server, []).append(
            (name, estimate_tokens(json.dumps(t, ensure_ascii=False, separators=(",", ":")))))
    return out


def _mcp_findings(servers: list[McpServer], system_tokens: int | None,
                  system_capacity: int | None) -> tuple[list[Finding], int | None]:
    out: list[Finding] = []
    measured = [s for s in servers if s.tools is not None]
    total = sum(t for s in measured for _, t in (s.tools or ())) if measured else None
    for s in sorted(servers, key=lambda s: (-(sum(t for _, t in s.tools) if s.tools else -1), s.name)):
        if s.tools is None and s.deferred:
            names = estimate_tokens("\n".join(s.deferred))
            out.append(Finding("mcp_server", "info", f"MCP {s.name} ({s.scope})", s.source, names,
                               f"{len(s.deferred)} tools deferred behind tool search: only their names are resident"
                               f" ({fmt_tokens(names)} tokens, estimated); a definition loads when Claude searches for"
                               " it and then stays until /clear or /compact"))
            continue
        if s.tools is None:
            out.append(Finding("mcp_server", "info", f"MCP {s.name} ({s.scope})", s.source, 0,
                               "configured; its tool definitions were not seen in this project's last request"
                               " (not connected, deferred behind tool search, or no session yet)"))
            continue
        t = sum(x for _, x in s.tools)
        biggest = ", ".join(f"{n.rsplit('__', 1)[-1]} {fmt_tokens(x)}"
                            for n, x in sorted(s.tools, key=lambda z: (-z[1], z[0]))[:3])
        out.append(Finding("mcp_server", "info", f"MCP {s.name} ({s.scope})", s.source, t,
                           f"{len(s.tools)} tool definitions, {fmt_tokens(t)} tokens (estimated) in the System zone"
                           + (f"; largest: {biggest}" if biggest else "")))
    if total:
        share = total / system_tokens if system_tokens else None
        over_share = share is not None and share > MCP_DOMINATES
        over_zone = bool(system_capacity) and total > (system_capacity or 0)
        if over_share or over_zone:
            what = (f"{round(share * 100)}% of the System zone's measured {fmt_tokens(system_tokens or 0)}"
                    if share is not None else f"more than the System zone's {fmt_tokens(system_capacity or 0)}")
            top = ", ".join(f"{s.name} {fmt_tokens(sum(x for _, x in s.tools or ()))}"
                            for s in sorted(measured, key=lambda s: -sum(x for _, x in s.tools or ()))[:5])
            out.append(Finding(
                "mcp_system_zone", "warn", "MCP tool definitions", "", total,
                f"{fmt_tokens(total)} tokens (estimated) of tool definitions, {what}, billed every turn: {top}",
                "disconnect the servers this project does not use (`claude mcp remove <name>` or disable them"
                " with /mcp), or keep tool search on so definitions load only when needed"))
    return out, total


# -- mid-session changes -------------------------------------------------------------------------

def _changed_findings(loaded: list[LoadedInstruction]) -> list[Finding]:
    out = []
    for x in loaded:
        if x.mtime is not None and x.mtime > x.loaded_ts:
            out.append(Finding(
                "instructions_changed", "warn", x.path.rsplit("/", 1)[-1], x.path, 0,
                "changed after this session loaded it: the session still runs on the old text",
                "the change applies only after /clear or /compact (or a new session)"))
    return out


# -- the report ----------------------------------------------------------------------------------

def check(*, skills: list[Skill] = (), instructions: list[Instruction] = (),  # type: ignore[assignment]
          mcp: list[McpServer] = (), loaded: list[LoadedInstruction] = (),  # type: ignore[assignment]
          system_tokens: int | None = None, system_capacity: int | None = None) -> Report:
    """Every residency finding for these files. ``system_tokens``: the measured System zone (tokens)
    when a session gave it; ``system_capacity``: the System zone's size for the session's window."""
    found: list[Finding] = []
    listing = 0
    for sk in sorted(skills, key=lambda s: (s.scope, s.name)):
        f, n = _skill_findings(sk)
        found += f
        listing += n
    f, instr_total = _instruction_findings(list(instructions))
    found += f
    f, mcp_total = _mcp_findings(list(mcp), system_tokens, system_capacity)
    found += f
    found += _changed_findings(list(loaded))
    order = {c: i for i, c in enumerate(CODES)}
    found.sort(key=lambda x: (x.level != "warn", order.get(x.code, len(order))))  # stable: input order within a code
    return Report(findings=tuple(found[:MAX_FINDINGS]), listing_tokens=listing, instruction_tokens=instr_total,
                  mcp_tokens=mcp_total, skills=len(skills), truncated=max(0, len(found) - MAX_FINDINGS))


def render_lines(rep: Report) -> list[str]:
    """Human lines for ``doctor --context`` and ``status``: a summary, then one line per finding."""
    mcp = f", MCP tool definitions {fmt_tokens(rep.mcp_tokens)}" if rep.mcp_tokens is not None else ""
    head = (f"resident every turn (estimated): skill listing {fmt_tokens(rep.listing_tokens)} tokens"
            f" ({rep.skills} skill{'s' if rep.skills != 1 else ''}), CLAUDE.md + unscoped rules"
            f" {fmt_tokens(rep.instruction_tokens)}{mcp}; {len(rep.warnings)} to fix")
    lines = [head] + [f.line() for f in rep.findings]
    if rep.truncated:
        lines.append(f"… {rep.truncated} more findings not shown")
    return lines


def note_text(rep: Report, *, ctl: str = "ctxlifectl", max_items: int = 4) -> str:
    """The once-per-session message for the user ("" when nothing needs a fix): the warn findings,
    most important first, and the command that lists them all."""
    warns = rep.warnings
    if not warns:
        return ""
    items = [f"- {f.subject}: {f.message}" + (f" (fix: {f.fix})" if f.fix else "") for f in warns[:max_items]]
    more = f"\n- … {len(warns) - max_items} more" if len(warns) > max_items else ""
    return (f"ctxlifed: {len(warns)} residency issue{'s' if len(warns) != 1 else ''} in your skills / CLAUDE.md /"
            f" rules / MCP servers:\n" + "\n".join(items) + more + f"\nAll of them: {ctl} doctor --context")


# -- compact instructions ------------------------------------------------------------------------

def _one_line(s: str, n: int = 160) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1] + "…"


def compact_instructions(*, phase: str, decisions: list[str] = (), failing_tests: list[str] = (),  # type: ignore[assignment]
                         active_files: list[str] = (), pending: list[str] = ()) -> str:  # type: ignore[assignment]
    """A ``# Compact instructions`` section for CLAUDE.md (Markdown, ends with a newline)."""
    keep = [f"the current task phase ({phase}) and what is left to do in it"]
    lines = [COMPACT_HEADING, "", "When compacting, keep:"]
    lines += [f"- {k}" for k in keep]
    if failing_tests:
        lines.append("- the failing tests and their errors, verbatim:")
        lines += [f"  - `{_one_line(t, 120)}`" for t in list(dict.fromkeys(failing_tests))[:MAX_ITEMS]]
    else:
        lines.append("- any failing test and its error, verbatim")
    if decisions:
        lines.append("- these decisions, as decided (do not reopen them):")
        lines += [f"  - {_one_line(x)}" for x in list(dict.fromkeys(decisions))[:MAX_ITEMS]]
    else:
        lines.append("- every architecture decision taken, with its reason")
    if active_files:
        lines.append("- the paths of the files being changed: " + ", ".join(
            f"`{p}`" for p in list(dict.fromkeys(active_files))[:MAX_ITEMS]))
    else:
        lines.append("- the paths of the files being changed")
    if pending:
        lines.append("- open items:")
        lines += [f"  - {_one_line(x)}" for x in list(dict.fromkeys(pending))[:MAX_ITEMS]]
    lines += ["", "You may drop: passing test output, successful build logs, restatements of finished steps.", ""]
    return "\n".join(lines)


_HEADING_RE = re.compile(r"^#{1,6}\s")


def with_compact_instructions(claude_md: str, section: str) -> str:
    """``claude_md`` with its ``# Compact instructions`` section (up to the next heading of the same or
    a higher level) replaced by ``section``, or ``section`` appended after a blank line."""
    lines = claude_md.split("\n")
    start = next((i for i, ln in enumerate(lines) if ln.strip().lower() == COMPACT_HEADING.lower()), None)
    sec = section.rstrip("\n").split("\n")
    if start is None:
        base = claude_md.rstrip("\n")
        return (base + "\n\n" if base else "") + "\n".join(sec) + "\n"
    end = next((i for i in range(start + 1, len(lines)) if re.match(r"^#\s", lines[i])), len(lines))
    tail = lines[end:]
    out = lines[:start] + sec + ([""] + tail if tail else [])
    return "\n".join(out).rstrip("\n") + "\n"
