"""Shell-command and tool-name families shared by the phase tracker, the classifier and the parser.

Rules:
- Pure: regexes compiled at import, no I/O. This is the canonical home of :data:`TEST_COMMAND_RE` /
  :func:`is_test_command`; other modules import them from here instead of keeping a copy.
- A command is split into segments on ``&&``, ``||``, ``;``, ``|``, newlines and parentheses; a family
  matches when one segment *starts* with it, after optional wrappers (``VAR=x``, ``sudo``, ``env``,
  ``time``, ``timeout N``, ``uv/poetry/pipenv/pdm/hatch/rye/pixi run``, ``npx``, ``python -m``,
  ``ctxlifectl run [--session S] --``: the opt-in PreToolUse wrapper, ``cli/run.py``) and a
  path prefix (``.venv/bin/pytest``). So ``cd x && uv run pytest -q`` is a test run, while
  ``pip install pytest`` or ``grep pytest setup.cfg`` is not.
- Families are checked test -> review -> build; a command is in at most one of them as seen by callers
  that check in that order (``make test`` is a test run, not a build).
- The ``*_RE`` patterns match ONE segment (``pattern.match(segment)``); use the ``is_*`` functions on
  a whole command line. Only the first :data:`MAX_COMMAND` characters are looked at.
"""

from __future__ import annotations

import re

__all__ = [
    "BUILD_COMMAND_RE",
    "COMMAND_PREFIX",
    "EDIT_TOOLS",
    "EXPLORE_TOOLS",
    "MAX_COMMAND",
    "READONLY_COMMAND_RE",
    "REVIEW_COMMAND_RE",
    "TEST_COMMAND_RE",
    "any_segment",
    "is_build_command",
    "is_readonly_command",
    "is_review_command",
    "is_test_command",
]

MAX_COMMAND = 4096

EXPLORE_TOOLS = frozenset({"Read", "Grep", "Glob", "LS", "WebSearch", "WebFetch", "NotebookRead"})
EDIT_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})

_SEGMENT_SPLIT_RE = re.compile(r"&&|\|\||[;|\n()]")
_WRAPPERS = r"""
    (?: (?:[A-Za-z_]\w*=\S*|sudo|env|time|nice|command|exec|timeout\s+(?:-\S+\s+)*\S+
          |(?:uv|poetry|pipenv|pdm|hatch|rye|pixi)\s+run(?:\s+-\S+)*
          |npx|pnpx|bunx|(?:pnpm|yarn)\s+(?:exec|dlx)|\S*python[\d.]*(?:\s+-\S+)*?\s+-m
          |\S*ctxlifectl\s+run(?:\s+--session\s+\S+)?\s+--
        )\s+ )*
    (?:\S*/)?
"""
_END = r"(?=\s|$)"
# The start of a segment up to its program name (wrappers and a path prefix skipped): other modules build
# their own families as ``re.compile(COMMAND_PREFIX + r"(?: ... )(?=\s|$)", re.X)``.
COMMAND_PREFIX = r"^\s*" + _WRAPPERS

TEST_COMMAND_RE = re.compile(
    r"^\s*" + _WRAPPERS + r"""
    (?: pytest | py\.test | unittest | nose2? | tox | nox | jest | vitest | mocha | ava | karma | rspec
      | phpunit | ctest | playwright\s+test | cypress\s+run
      | (?:npm|pnpm|yarn|bun)\s+(?:run\s+)?test(?::\S+)? | npm\s+t
      | (?:go|cargo|deno|dotnet|mix|swift|zig|flutter|dart|bazel)\s+test
      | cargo\s+nextest
      | make\s+(?:-C\s+\S+\s+|-\S+\s+)*(?:test|check)[\w-]*
      | just\s+(?:-\S+\s+)*(?:test|check)[\w-]*
      | (?:mvn|gradle|gradlew)\b.*?\btest
      | bundle\s+exec\s+(?:rspec|rake\s+test) | rake\s+test | rails\s+test
    )""" + _END,
    re.X,
)

REVIEW_COMMAND_RE = re.compile(
    r"^\s*" + _WRAPPERS + r"""
    (?: git\s+(?:-C\s+\S+\s+|--no-pager\s+|-c\s+\S+\s+)*(?:diff|log|show|blame|range-diff|shortlog)
      | gh\s+pr\s+(?:view|diff|review|checks)
    )""" + _END,
    re.X,
)

BUILD_COMMAND_RE = re.compile(
    r"^\s*" + _WRAPPERS + r"""
    (?: make | cmake | ninja | tsc | webpack | esbuild | rollup
      | (?:npm|pnpm|yarn|bun)\s+(?:run\s+)?(?:build|compile|bundle)(?::\S+)?
      | (?:npm|pnpm|yarn|bun)\s+(?:install|i|ci|add)
      | cargo\s+(?:build|check|b) | go\s+(?:build|install|vet)
      | (?:vite|next|nuxt|meson|zig|swift|bazel|docker|podman|dotnet)\s+(?:build|compile)
      | (?:gradle|gradlew)\s+(?:assemble|build)\w* | mvn\b.*?\b(?:compile|package|install)
      | build | pip[\d.]*\s+install | uv\s+(?:sync|build|pip\s+install) | poetry\s+(?:install|build)
    )""" + _END,
    re.X,
)

READONLY_COMMAND_RE = re.compile(
    r"^\s*" + _WRAPPERS + r"""
    (?: cd | ls | cat | head | tail | less | more | find | fd | grep | rg | ag | tree | wc | file | stat
      | pwd | du | which | git\s+(?:status|grep|ls-files|branch)
    )""" + _END,
    re.X,
)


def any_segment(pattern: re.Pattern[str], cmd: str) -> bool:
    """True when ``pattern`` matches the start of one segment of ``cmd`` (see the module rules)."""
    if not cmd:
        return False
    return any(pattern.match(seg) for seg in _SEGMENT_SPLIT_RE.split(cmd[:MAX_COMMAND]))


_any_segment = any_segment


def is_test_command(cmd: str) -> bool:
    """True when one segment runs a test suite (pytest, npm/pnpm/yarn test, go/cargo test, make test,
    unittest, jest, vitest, ...), possibly behind ``cd x &&``, env vars, ``uv run``, ``python -m``."""
    return _any_segment(TEST_COMMAND_RE, cmd)


def is_review_command(cmd: str) -> bool:
    """True when one segment inspects history or a change: ``git diff|log|show|blame``, ``gh pr view|diff``."""
    return _any_segment(REVIEW_COMMAND_RE, cmd)


def is_build_command(cmd: str) -> bool:
    """True when one segment builds or installs (make, npm run build, cargo build, go build, tsc, pip
    install, ...) and no segment runs tests (``make && make test`` is a test run)."""
    return _any_segment(BUILD_COMMAND_RE, cmd) and not is_test_command(cmd)


def is_readonly_command(cmd: str) -> bool:
    """True when every segment only looks around (ls, cat, grep, find, git status, ...)."""
    if not cmd or not cmd.strip():
        return False
    segs = [s for s in _SEGMENT_SPLIT_RE.split(cmd[:MAX_COMMAND]) if s.strip()]
    return all(READONLY_COMMAND_RE.match(s) for s in segs)
