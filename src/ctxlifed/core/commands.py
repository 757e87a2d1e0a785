"""Shell commands parsed, and tool-name families: shared by the phase tracker, the classifier and lessons.

Rules:
- Pure: regexes compiled at import, no I/O. This is the canonical home of :data:`TEST_COMMAND_RE` /
  :func:`is_test_command`; other modules import them from here instead of keeping a copy.
- A command is split into segments on ``&&``, ``||``, ``;``, ``|``, newlines and parentheses; a family
  matches when one segment *starts* with it, after optional wrappers (``VAR=x``, ``sudo``, ``env``,
  ``time``, ``npx`` and their options such as ``npx --no-install``, ``timeout N``,
  ``uv/poetry/pipenv/pdm/hatch/rye/pixi run``, ``python -m``,
  ``ctxlifectl run [--session S] --``: the opt-in PreToolUse wrapper, ``cli/run.py``) and a
  path prefix (``.venv/bin/pytest``). So ``cd x && uv run pytest -q`` is a test run, while
  ``pip install pytest`` or ``grep pytest setup.cfg`` is not.
- Families are checked test -> review -> build; a command is in at most one of them as seen by callers
  that check in that order (``make test`` is a test run, not a build).
- The ``*_RE`` patterns match ONE segment (``pattern.match(segment)``); use the ``is_*`` functions on
  a whole command line. Only the first :data:`MAX_COMMAND` characters are looked at.
- This is the one command parser. Two questions, two views of the same wrappers (``_SIMPLE_WRAPPERS``,
  ``_RUN_WRAPPERS``, ``python -m``, a path prefix):
    families -- does some segment *start* with a family? The ``*_RE`` patterns over the segments above.
    tokens   -- what program runs, with which arguments? :func:`split_segments` splits on ``&&``, ``||``,
                ``;`` and newlines and cuts each segment at its first single ``|`` (a pipe filter is not the
                command); :func:`shell_tokens` undoes shell quoting and drops redirections;
                :func:`strip_wrappers` drops wrappers and ``VAR=x`` and normalises the program (basename,
                version suffix dropped: ``python3.11`` -> ``python``, ``py.test`` -> ``pytest``, ``python -m
                pytest`` -> ``pytest``); it also drops ``nohup``, which the family patterns do not.
                :func:`main_segment` is the segment that decides a command's identity (the first test
                run, else the last segment that is not setup: :data:`SETUP_PROGRAMS`, ``cd``, ``export``,
                ``echo`` ...); :func:`command_family` its program (``bash`` when unknown).
"""

from __future__ import annotations

import re
import shlex

__all__ = [
    "BUILD_COMMAND_RE",
    "COMMAND_PREFIX",
    "EDIT_TOOLS",
    "EXPLORE_TOOLS",
    "MAX_COMMAND",
    "READONLY_COMMAND_RE",
    "REVIEW_COMMAND_RE",
    "SETUP_PROGRAMS",
    "TEST_COMMAND_RE",
    "any_segment",
    "basename",
    "command_family",
    "is_build_command",
    "is_readonly_command",
    "is_review_command",
    "is_test_command",
    "main_segment",
    "shell_tokens",
    "split_segments",
    "strip_wrappers",
]

MAX_COMMAND = 4096

EXPLORE_TOOLS = frozenset({"Read", "Grep", "Glob", "LS", "WebSearch", "WebFetch", "NotebookRead"})
EDIT_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})

_SEGMENT_SPLIT_RE = re.compile(r"&&|\|\||[;|\n()]")
# The wrappers both parsers skip: the family regexes below and :func:`strip_wrappers`.
_SIMPLE_WRAPPERS = frozenset({"sudo", "env", "time", "nice", "command", "exec", "npx", "pnpx", "bunx"})
_RUN_WRAPPERS = frozenset({"uv", "poetry", "pipenv", "pdm", "hatch", "rye", "pixi"})
# Skipped by :func:`strip_wrappers` only (a ``nohup pytest`` is not a test run for the family regexes).
_TOKEN_ONLY_WRAPPERS = frozenset({"nohup"})
_WRAPPERS = r"""
    (?: (?:[A-Za-z_]\w*=\S*|(?:""" + "|".join(sorted(_SIMPLE_WRAPPERS)) + r""")(?:\s+-\S+)*|timeout\s+(?:-\S+\s+)*\S+
          |(?:""" + "|".join(sorted(_RUN_WRAPPERS)) + r""")\s+run(?:\s+-\S+)*
          |(?:pnpm|yarn)\s+(?:exec|dlx)|\S*python[\d.]*(?:\s+-\S+)*?\s+-m
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
      | (?:npm|pnpm|yarn|bun)\s+(?:run\s+)?test(?::\S+)? | npm\s+t | node(?:\s+-\S+)*?\s+--test
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


# --------------------------------------------------------------------------- tokens: program and arguments


def basename(path: str) -> str:
    """The last component of a ``/`` or ``\\`` path (the path itself when it has none)."""
    parts = [p for p in re.split(r"[/\\]+", path) if p]
    return parts[-1] if parts else path


_SEG_SPLIT_RE = re.compile(r"&&|\|\||;|\n")
SETUP_PROGRAMS = frozenset({"cd", "pushd", "popd", "source", ".", "export", "set", "unset", "echo", "printf",
                            "true", "false", ":", "clear", "sleep", "alias"})
_REDIRECT_RE = re.compile(r"^(?:\d*>>?&?\d*|&>>?|\d*<|<<<?|\d*>&-)$|^\d*>>?&?\S+$|^&>\S+$|^\d+<\S+$")
_VERSIONED_RE = re.compile(r"^(python|pip|pypy|node|ruby|perl|php|pytest)(?:[\d.]+)$")


def split_segments(cmd: str) -> list[str]:
    """Command segments (``&&``, ``||``, ``;``, newline), each cut at its first single ``|``."""
    out = []
    for seg in _SEG_SPLIT_RE.split(cmd[:MAX_COMMAND]):
        seg = seg.split("|", 1)[0].replace("(", " ").replace(")", " ").strip()
        if seg:
            out.append(seg)
    return out


def shell_tokens(seg: str) -> list[str]:
    """The words of one segment (shell quoting undone); redirections (``2>&1``, ``> file``) dropped."""
    try:
        toks = shlex.split(seg, comments=False, posix=True)
    except ValueError:
        toks = seg.split()
    out: list[str] = []
    skip = False
    for t in toks:
        if skip:
            skip = False
            continue
        if _REDIRECT_RE.match(t):
            if re.fullmatch(r"\d*>>?|&>>?|\d*<", t):
                skip = True  # "> file": the file goes too
            continue
        out.append(t)
    return out


def _norm_prog(tok: str) -> str:
    p = basename(tok).lower()
    if p == "py.test":
        return "pytest"
    m = _VERSIONED_RE.match(p)
    return m.group(1) if m else p


def strip_wrappers(toks: list[str]) -> list[str]:
    """Tokens from the real program on: wrappers, env assignments and ``python -m`` removed; the
    program normalised (basename, version suffix dropped; ``python -m pytest`` -> ``pytest``)."""
    i = 0
    n = len(toks)
    while i < n:
        t = toks[i]
        low = t.lower()
        if re.match(r"^[A-Za-z_]\w*=", t):
            i += 1
        elif low in _SIMPLE_WRAPPERS or low in _TOKEN_ONLY_WRAPPERS:
            i += 1
            while i < n and toks[i].startswith("-"):
                i += 1
        elif low == "timeout":
            i += 1
            while i < n and toks[i].startswith("-"):
                i += 1
            i += 1  # the duration
        elif low in _RUN_WRAPPERS and i + 1 < n and toks[i + 1] == "run":
            i += 2
            while i < n and toks[i].startswith("-"):
                i += 1
        elif low in ("pnpm", "yarn") and i + 1 < n and toks[i + 1] in ("exec", "dlx"):
            i += 2
        elif _norm_prog(t) == "ctxlifectl" and i + 1 < n and toks[i + 1] == "run":
            # ctxlifed's own wrapper (``ctxlifectl run [--session S] -- CMD``): the command is CMD
            j = i + 2
            if j + 1 < n and toks[j] == "--session":
                j += 2
            if j < n and toks[j] == "--":
                i = j + 1
            else:
                break
        else:
            break
    rest = toks[i:]
    if not rest:
        return []
    prog = _norm_prog(rest[0])
    rest = [prog, *rest[1:]]
    if prog in ("python", "pypy"):
        j = 1
        while j < len(rest) and rest[j].startswith("-") and rest[j] != "-m":
            j += 1
        if j + 1 < len(rest) and rest[j] == "-m":
            return [_norm_prog(rest[j + 1]), *rest[j + 2 :]]
    return rest


def main_segment(cmd: str) -> tuple[str, list[str]] | None:
    """The segment that decides a command's identity: the first test run, else the last segment
    that is not setup (``cd``, ``source``, ``export``, ``echo`` ...). Returns (segment, tokens)."""
    segs = split_segments(cmd)
    for seg in segs:
        if TEST_COMMAND_RE.match(seg):
            toks = strip_wrappers(shell_tokens(seg))
            if toks:
                return seg, toks
    for seg in reversed(segs):
        toks = strip_wrappers(shell_tokens(seg))
        if toks and toks[0] not in SETUP_PROGRAMS:
            return seg, toks
    return None


def command_family(cmd: str) -> str:
    """The program a command is about (``pytest``, ``pip``, ``npm`` ...); ``bash`` when unknown."""
    m = main_segment(cmd)
    if m is None:
        return "bash"
    fam = re.sub(r"[^\w.+-]", "", m[1][0])[:40]
    return fam or "bash"
