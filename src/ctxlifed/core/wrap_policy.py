"""May a test or build command be run through ``ctxlifectl run`` (issue 17 item 4)? Pure decision, no I/O.

A PreToolUse hook may answer ``updatedInput`` (the wrapped command) with ``permissionDecision: "allow"``.
Measured with Claude Code 2.1.328: that allow runs the rewritten command with no prompt and overrides
the user's ask AND deny rules on the original command (docs/claude-code.md). So ctxlifed wraps a command
only when the ORIGINAL would have run without a prompt anyway, and it can tell so with certainty.

Rules:
- Permission modes: ``bypassPermissions`` runs every command that no deny or ask rule matches;
  ``default``, ``acceptEdits`` and ``dontAsk`` run a Bash command without a prompt only when an allow
  rule matches it (acceptEdits auto-allows file edits and a few filesystem commands, never a test
  runner; dontAsk denies what would ask). ``plan``, ``auto`` (a classifier decides), a missing or
  unknown mode: never wrap.
- In every mode: no deny rule and no ask rule may match, an unreadable settings source
  (``Rules.complete`` False), a sandbox (``Rules.sandbox``) or another PreToolUse hook or an enabled
  plugin that could rewrite the same call (``Rules.other_hooks``: with several ``updatedInput`` the
  last to finish wins, and ctxlifed's allow would then cover a command it never checked) means no wrap.
- Only a simple command: literal words (unquoted ``[A-Za-z0-9_./:=@%+,-]``, or '…' / "…" without
  ``$`` `` ` `` ``\\`` ``!``), no operators (``&& || ; | &``), no redirection, no substitution, no glob,
  no comment, no newline, no leading ``VAR=value``, no wrapper program first (``timeout``, ``env``,
  ``sudo``, ...), no absolute path outside the working directory and no ``..`` in an argument (Claude
  Code checks paths of some commands on its own). Then bash gives ``ctxlifectl run --`` exactly the
  argv the original would have had, and a rule can be matched against the command string for sure.
- Only a command that runs tests or builds (``core.commands``): where bulky failing output comes from.
- Rule matching (Claude Code's Bash rules): ``Bash`` / ``Bash(*)`` matches every command; ``Bash(cmd)``
  the command itself; ``Bash(prefix:*)`` the prefix alone or followed by a space and more;
  ``Bash(… * …)`` a wildcard (``*`` any text; ``cmd *`` also ``cmd`` alone). Where the exact semantics
  could be wider or narrower, an ALLOW rule is matched narrowly (the strict reading) and a DENY or ASK
  rule broadly (every plausible reading, on the raw and the whitespace-normalised command, and on its
  words unquoted): a doubt never widens what is allowed. A Bash rule this module cannot parse, in deny
  or ask, refuses the wrap; in allow it is ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .commands import is_build_command, is_test_command

ALLOW_BY_RULE_MODES = frozenset({"default", "acceptEdits", "dontAsk"})
BYPASS_MODE = "bypassPermissions"
MAX_COMMAND = 2000  # longer commands are not wrapped (nor matched)
WRAPPER_PROGRAMS = frozenset({
    "timeout", "env", "sudo", "doas", "nice", "nohup", "time", "command", "exec", "builtin", "stdbuf", "xargs",
    "ionice", "chrt", "taskset", "watch", "script", "unbuffer", "eval", "source", ".", "bash", "sh", "zsh",
    "ctxlifectl",  # already wrapped
})

_UNQUOTED = re.compile(r"[A-Za-z0-9_./:=@%+,-]+")
_SQ = re.compile(r"'([^'\n]*)'")
_DQ = re.compile(r'"([^"$`\\!\n]*)"')
_PROGRAM = re.compile(r"[A-Za-z0-9_./+-]+")


@dataclass(frozen=True, slots=True)
class Rules:
    """The user's permission rules from every settings source ctxlifed reads."""

    allow: tuple[str, ...] = ()
    ask: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    complete: bool = True  # every source was read (absent counts as read); False: do not wrap
    sandbox: bool = False  # a settings source enables the Bash sandbox: do not wrap
    other_hooks: str = ""  # another PreToolUse hook may rewrite the command too (what and where): do not wrap
    why_incomplete: str = ""


@dataclass(frozen=True, slots=True)
class Verdict:
    wrap: bool
    reason: str


def simple_argv(command: str) -> list[str] | None:
    """The words of ``command`` when it is a simple command of literal words (module rules), else None."""
    if not command or len(command) > MAX_COMMAND:
        return None
    words: list[str] = []
    i, n = 0, len(command)
    while i < n:
        while i < n and command[i] in " \t":
            i += 1
        if i >= n:
            break
        word: list[str] = []
        while i < n and command[i] not in " \t":
            c = command[i]
            m = _SQ.match(command, i) if c == "'" else _DQ.match(command, i) if c == '"' else _UNQUOTED.match(command, i)
            if m is None:
                return None
            word.append(m.group(1) if c in "'\"" else m.group(0))
            i = m.end()
        words.append("".join(word))
    if not words or not _PROGRAM.fullmatch(command.split(None, 1)[0]):
        return None  # the program word must be unquoted (no "VAR=value", no quoting tricks)
    return words


def _normalised(command: str) -> str:
    return " ".join(command.split())


@dataclass(frozen=True, slots=True)
class BashRule:
    kind: str  # any | exact | prefix | wildcard
    text: str = ""


def parse_rule(rule: object) -> BashRule | None | bool:
    """A Bash rule; None for a rule of another tool; False for a Bash rule this module cannot read."""
    if not isinstance(rule, str):
        return False
    r = rule.strip()
    if r == "Bash":
        return BashRule("any")
    if not r.startswith("Bash("):
        head = re.match(r"[A-Za-z0-9_*-]*", r)
        name = head.group(0) if head else ""
        # "Bash" under another spelling or a tool-name wildcard could cover Bash: unreadable.
        return False if (name.lower() == "bash" or "*" in name or not name) else None
    if not r.endswith(")"):
        return False
    body = r[len("Bash("):-1]
    if "\\" in body or "(" in body or ")" in body:
        return False  # escapes or nested parentheses: not a form this module evaluates
    if body.strip() in ("", "*"):
        return BashRule("any")
    if body.endswith(":*") and "*" not in body[:-2]:
        return BashRule("prefix", body[:-2])
    if "*" in body:
        return BashRule("wildcard", body)
    return BashRule("exact", body)


def _wildcard_re(pattern: str, *, optional_tail: bool) -> re.Pattern[str]:
    if optional_tail and pattern.endswith(" *"):  # "cmd *" read as "cmd" alone too
        return re.compile(".*".join(re.escape(p) for p in pattern[:-2].split("*")) + "(?: .*)?", re.S)
    return re.compile(".*".join(re.escape(p) for p in pattern.split("*")), re.S)


def matches_narrowly(rule: BashRule, command: str) -> bool:
    """The strict reading of ``rule`` against the raw command (used for allow rules)."""
    c = command.strip()
    if rule.kind == "any":
        return True
    if rule.kind == "exact":
        return c == rule.text.strip()
    if rule.kind == "prefix":
        p = rule.text.strip()
        return bool(p) and (c == p or c.startswith(p + " "))
    return _wildcard_re(rule.text, optional_tail=False).fullmatch(c) is not None


def matches_broadly(rule: BashRule, command: str, argv: list[str]) -> bool:
    """Every plausible reading of ``rule`` against the command in several spellings (deny and ask rules)."""
    if rule.kind == "any":
        return True
    spellings = {command, command.strip(), _normalised(command), " ".join(argv)}
    for c in spellings:
        if rule.kind == "exact":
            t = rule.text
            if c == t or c.strip() == t.strip() or _normalised(c) == _normalised(t):
                return True
            tw = simple_argv(t.strip())
            if tw is not None and tw == argv:
                return True
        elif rule.kind == "prefix":
            p = rule.text
            for pp in {p, p.strip(), _normalised(p)}:
                if c.startswith(pp) or _normalised(c).startswith(pp):
                    return True
            pw = simple_argv(p.strip())
            if pw is not None and argv[:len(pw)] == pw:
                return True
            if pw is not None and pw and len(argv) >= len(pw) and argv[:len(pw) - 1] == pw[:-1] \
                    and argv[len(pw) - 1].startswith(pw[-1]):
                return True
        else:
            for pat in {rule.text, _normalised(rule.text)}:
                rx = _wildcard_re(pat, optional_tail=True)
                if rx.fullmatch(c) or rx.fullmatch(_normalised(c)):
                    return True
    return False


def wrappable_command(command: str, argv: list[str], cwd: str) -> str:
    """'' when ``command`` is a test or build run of the simple form; else why not."""
    if argv[0] in WRAPPER_PROGRAMS or argv[0].rsplit("/", 1)[-1] in WRAPPER_PROGRAMS:
        return f"starts with the wrapper program {argv[0]!r}"
    if not (is_test_command(command) or is_build_command(command)):
        return "neither a test run nor a build"
    base = cwd.rstrip("/") + "/"
    for a in argv[1:]:
        for part in (a.split("=", 1)[1] if a.startswith("-") and "=" in a else a,):
            if ".." in part.split("/"):
                return f"argument {a!r} names a parent folder"
            if part.startswith("/") and not (cwd and (part + "/").startswith(base)):
                return f"argument {a!r} is a path outside the working directory"
            if part.startswith("~"):
                return f"argument {a!r} names a home folder"
    return ""


def precheck(command: object, permission_mode: object, cwd: str = "") -> str:
    """Why ``command`` is not wrapped whatever the rules say ('' when the rules decide): the cheap checks,
    run before any settings file is read."""
    if not isinstance(command, str) or not command.strip():
        return "no command"
    if permission_mode != BYPASS_MODE and permission_mode not in ALLOW_BY_RULE_MODES:
        return f"permission mode {permission_mode!r}: cannot tell whether it would ask"
    argv = simple_argv(command)
    if argv is None:
        return "not a simple command of literal words"
    return wrappable_command(command, argv, cwd)


def decide(command: object, permission_mode: object, rules: Rules, cwd: str = "") -> Verdict:
    """Wrap ``command`` (run it through ``ctxlifectl run`` with an allow) or not, and why. See the rules."""
    why = precheck(command, permission_mode, cwd)
    if why:
        return Verdict(False, why)
    argv = simple_argv(command) if isinstance(command, str) else None
    if not isinstance(command, str) or argv is None:  # precheck ruled these out; kept for the type checker
        return Verdict(False, "not a simple command of literal words")
    if not rules.complete:
        return Verdict(False, f"settings not fully read: {rules.why_incomplete}")
    if rules.sandbox:
        return Verdict(False, "the Bash sandbox is enabled")
    if rules.other_hooks:
        return Verdict(False, f"another hook may rewrite the call too: {rules.other_hooks}")
    for kind, listed in (("deny", rules.deny), ("ask", rules.ask)):
        for raw in listed:
            r = parse_rule(raw)
            if r is False:
                return Verdict(False, f"{kind} rule {raw!r} cannot be evaluated")
            if isinstance(r, BashRule) and matches_broadly(r, command, argv):
                return Verdict(False, f"{kind} rule {raw!r} matches")
    if permission_mode == BYPASS_MODE:
        return Verdict(True, "bypassPermissions, no deny or ask rule matches")
    for raw in rules.allow:
        r = parse_rule(raw)
        if isinstance(r, BashRule) and matches_narrowly(r, command):
            return Verdict(True, f"allow rule {raw!r} matches, no deny or ask rule does")
    return Verdict(False, "no allow rule matches: Claude Code would ask")


def wrapped_command(ctl: str, session: str, command: str) -> str:
    """The command Claude Code runs instead: ``<ctl> run --session <id> -- <original verbatim>``."""
    return f"{ctl} run --session {session} -- {command.strip()}"
