"""Targets: what "the same command, test or file operation" means for lessons (:func:`target_of`, :func:`covers`).

Rules:
- Pure: no I/O. Commands are parsed by :mod:`ctxlifed.core.commands` (segments, tokens, wrappers,
  the main segment); this module only decides identity and coverage. Every part is bounded
  (:data:`MAX_TARGET_PART` characters, :data:`MAX_SCOPE` scope items).
- Kinds:
    test    -- runner (``pytest``; ``npm test``, ``go test``, ``cargo test``, ``make test`` ...) after
               stripping wrappers (``VAR=x``, ``sudo``, ``uv run``, ``python -m``, ``.venv/bin/``,
               ``python3.11`` -> ``python``), plus a *selector* (``-k``/``-m`` for pytest; ``-run``, ``-t``,
               ``--grep``, ``-p`` ... for others) and a *scope* (the positional test targets; other flags
               and their values are ignored, so ``pytest tests/x.py`` ~ ``pytest -q tests/x.py``).
               A success covers a failure of the same runner when its selector is empty or equal and
               its scope is empty (whole suite) or contains every failing target as itself or as a
               parent (``tests`` covers ``tests/x.py``; ``tests/x.py`` covers ``tests/x.py::test_y``;
               ``pkg`` covers ``pkg.mod``). A narrower success never covers a wider failure.
    command -- the command itself, normalised: ``cd``/``source``/``export``/``echo`` segments, pipe
               filters (``| tail``) and redirections (``2>&1``) dropped, programs normalised as above.
               Equality.
    file    -- ``read:<path>`` for Read, ``edit:<path>`` for Write/Edit/MultiEdit/NotebookEdit. Equality.
    tool    -- any other tool: its name and main input. Equality.
- :func:`display_command`: a command as a lesson shows it (leading ``cd x &&``, trailing output
  filters and ``2>&1`` / ``>/dev/null`` dropped, otherwise verbatim), at most :data:`STEP_MAX` characters.
"""

from __future__ import annotations

import re
from typing import Literal

import msgspec

from ctxlifed.core.commands import (
    EDIT_TOOLS,
    SETUP_PROGRAMS,
    TEST_COMMAND_RE,
    main_segment,
    shell_tokens,
    split_segments,
    strip_wrappers,
)
from ctxlifed.core.lessons.text import WS_RE, one_line

__all__ = ["MAX_SCOPE", "MAX_TARGET_PART", "STEP_MAX", "Target", "TargetKind", "covers", "display_command",
           "target_of"]

STEP_MAX = 200  # characters of one fix step (an edit's ``before → after`` included)
MAX_TARGET_PART = 200  # characters of a target name / scope item
MAX_SCOPE = 16  # scope items of a test target

TargetKind = Literal["test", "command", "file", "tool"]


class Target(msgspec.Struct, frozen=True):
    """What a call operated on; see the module rules for :func:`covers`."""

    kind: TargetKind
    name: str
    selector: str = ""
    scope: tuple[str, ...] = ()


_PYTEST_SELECTORS = frozenset({"-k", "-m"})
_PYTEST_VALUES = frozenset({"-p", "-c", "-o", "-W", "-r", "-n", "--tb", "--maxfail", "--durations", "--cov",
                            "--cov-report", "--deselect", "--ignore", "--ignore-glob", "--rootdir", "--confcutdir",
                            "--junitxml", "--junit-xml", "--timeout", "--log-level", "--log-cli-level",
                            "--basetemp", "--color", "--import-mode", "--capture", "--dist", "--cov-config",
                            "--override-ini", "--count", "--reruns", "--html", "--json-report-file"})
_OTHER_SELECTORS = frozenset({"-run", "--run", "-t", "--testNamePattern", "--grep", "-g", "--filter", "-p",
                              "--package", "-k", "-m", "--tests", "--test", "--bench"})
_OTHER_VALUES = frozenset({"-count", "-timeout", "-parallel", "-coverprofile", "-covermode", "-tags", "-C",
                           "--reporter", "--config", "-c", "--project", "--features", "--target",
                           "--maxWorkers", "-w", "--shard", "--test-threads", "-j", "--jobs", "--manifest-path"})


_SUBCOMMAND_PROGS = frozenset({"npm", "pnpm", "yarn", "bun", "go", "cargo", "deno", "dotnet", "mix", "swift", "zig",
                               "flutter", "dart", "bazel", "make", "rake", "rails", "playwright", "cypress",
                               "bundle", "mvn", "gradle", "gradlew"})


def _scope_item(tok: str) -> str:
    t = tok.strip()
    while t.startswith("./"):
        t = t[2:]
    if t.endswith("/..."):
        t = t[:-4]
    t = t.rstrip("/")
    return "" if t in ("", ".", "...") else t[:MAX_TARGET_PART]


def _test_target(toks: list[str]) -> Target:
    prog = toks[0]
    i = 1
    name = prog
    if prog in _SUBCOMMAND_PROGS:
        while i < len(toks) and toks[i].startswith("-"):
            i += 2 if prog == "make" and toks[i] in ("-C", "-f", "--directory", "--file") else 1
        if i < len(toks):
            sub = toks[i]
            i += 1
            if sub == "run" and i < len(toks):
                sub = f"run {toks[i]}"
                i += 1
            name = f"{prog} {sub}"
    selectors_set = _PYTEST_SELECTORS if prog in ("pytest", "unittest") else _OTHER_SELECTORS
    values_set = _PYTEST_VALUES if prog in ("pytest", "unittest") else _OTHER_VALUES
    sel: list[str] = []
    scope: list[str] = []
    rest = toks[i:]
    j = 0
    while j < len(rest):
        t = rest[j]
        j += 1
        if t == "--":
            continue
        if t.startswith("-"):
            flag, eq, val = t.partition("=")
            if flag in selectors_set:
                if not eq and j < len(rest):
                    val = rest[j]
                    j += 1
                sel.append(f"{flag}={val}")
            elif flag in values_set and not eq:
                j += 1
            continue
        if prog == "vitest" and t in ("run", "watch") and not scope:
            continue  # "vitest run" is the runner's verb, not a test target
        item = _scope_item(t)
        if item:
            scope.append(item)
        else:
            scope = []  # "." / "./..." is the whole suite
            break
    return Target("test", name[:MAX_TARGET_PART], " ".join(sel)[:MAX_TARGET_PART],
                  tuple(sorted(set(scope)))[:MAX_SCOPE])


_CD_PREFIX_RE = re.compile(r"^\s*(?:cd|pushd)\s+(?:\"[^\"]*\"|'[^']*'|\S+)\s*(?:&&|;)\s*")
_FILTER_TAIL_RE = re.compile(r"(?<!\s)\s*(?:\d?>&\d\s*)?\|\s*(?:tail|head|grep|less|more|tee|sort|uniq|wc|cat)\b[^|&;]*$")
_REDIR_NOISE_RE = re.compile(r"(?<!\s)\s+(?:\d?>&\d|[12&]?>\s*/dev/null)(?=\s|$)")


def display_command(cmd: str) -> str:
    """A command as shown in a lesson: leading ``cd x &&`` dropped, trailing output filters (``| tail -5``)
    and ``2>&1`` / ``>/dev/null`` dropped, otherwise verbatim; one line, bounded."""
    out = cmd.strip()
    while m := _CD_PREFIX_RE.match(out):
        out = out[m.end() :]
    prev = None
    while prev != out:
        prev = out
        out = _FILTER_TAIL_RE.sub("", out)
    out = _REDIR_NOISE_RE.sub("", out)
    return one_line(out, STEP_MAX) or one_line(cmd, STEP_MAX)


def target_of(tool: str, command: str = "", file_path: str = "", *, key: str = "") -> Target:
    """The target of a call (see module rules). ``key`` is the main input of a non-file, non-Bash tool."""
    if tool == "Bash" or (not tool and command):
        m = main_segment(command)
        if m is not None and TEST_COMMAND_RE.match(m[0]):
            return _test_target(m[1])
        norm = []
        for seg in split_segments(command):
            toks = strip_wrappers(shell_tokens(seg))
            if toks and toks[0] not in SETUP_PROGRAMS:
                norm.append(" ".join(toks))
        name = " && ".join(norm) or WS_RE.sub(" ", command).strip()
        return Target("command", name[:MAX_TARGET_PART])
    if tool == "Read":
        return Target("file", f"read:{file_path}"[:MAX_TARGET_PART])
    if tool in EDIT_TOOLS:
        return Target("file", f"edit:{file_path}"[:MAX_TARGET_PART])
    return Target("tool", f"{tool}:{key or file_path}"[:MAX_TARGET_PART])


def _within(f: str, s: str) -> bool:
    return f == s or f.startswith((s + "::", s + "/", s + "."))


def covers(success: Target, failure: Target) -> bool:
    """Whether a success of ``success`` shows that ``failure`` no longer fails (module rules)."""
    if success.kind != failure.kind or success.name != failure.name:
        return False
    if success.kind != "test":
        return success.selector == failure.selector and success.scope == failure.scope
    if success.selector and success.selector != failure.selector:
        return False
    if not success.scope:
        return True
    if not failure.scope:
        return False
    return all(any(_within(f, s) for s in success.scope) for f in failure.scope)
