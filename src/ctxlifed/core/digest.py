"""Extractive, deterministic digests of a tool's output, by kind of output: what replaces a bulky output
in the window (an L1 digest), with the way back to the full original (L2).

Rules:
- Pure: no I/O, no clock; stdlib + msgspec. The same (text, command, references, budgets) always gives the
  same digest, byte for byte.
- A digest is made of lines of the original copied VERBATIM (never rewritten, never re-indented), grouped
  in runs under a ``[LA-B]`` marker that gives their 1-based line numbers in the original, so the
  model can ``Read`` the file with ``offset=A`` and a ``limit``. Around them, lines written by ctxlifed
  are in square brackets: one header (kind, original size in lines and estimated tokens, what was kept,
  counts such as warnings by flag, matches by file or the failing tests named by the runners recognised,
  see below) and one footer (how to get all or part of it:
  ``<ctl> recall --id <archive_id>`` and, when ``full_path`` is given, ``Read <full_path>``).
  :func:`digest_body` makes all of it but the footer, from the text alone (the archive id exists only once
  the original is stored); :func:`with_footer` adds the footer. ``digest`` is the two in one.
- Kind of output (:func:`output_kind`): from the command first (test run, install, build/compile/lint/type
  check, diff, search/listing, log), then from the text (a runner's summary, ``file:line: error:``,
  ``Successfully installed``, ``diff --git``, timestamped/levelled lines, ``path:line:`` matches);
  anything else is ``other``. ``test`` > ``install`` > ``build`` > ``diff`` > ``log`` > ``search``.
- Lines are chosen in tiers, each tier filled before the next:
  0. verdicts: a runner's summary line (pytest ``N failed, M passed in Xs``, unittest ``Ran N tests``
     + ``OK``/``FAILED (...)``, cargo ``test result:``, go ``ok``/``FAIL``, jest/vitest ``Tests:``, node
     ``# pass N``/``ℹ fail N``, mocha ``N passing``), a tool's totals (``Found N errors``, ``make: ***``,
     ``error: could not compile``), an install's final state (``Successfully installed``, ``added N
     packages``), ``git status``'s branch and section lines, and the last non-blank line;
  1. must-keep: every failing test id (pytest ``FAILED``/``::x FAILED``/``___ test ___``, unittest
     ``FAIL:``/``ERROR:``, cargo ``test x ... FAILED``, go ``--- FAIL:``, jest ``●``/``✕``, node
     ``not ok``/``✖``) with its assertion and error lines (pytest ``E`` lines and ``file.py:N: Error``,
     cargo ``panicked at`` + the message line after it, ``left:``/``right:``, Python exception lines and
     ``File "...", line N`` frames, node ``error:``/``location:``/``expected:``/``actual:``), every
     compiler/linter/type-checker error with its ``file:line`` (gcc/clang ``f.c:3:5: error:``, mypy
     ``f.py:3: error:``, tsc ``error TS2322``, rustc ``error[E0308]:`` + its ``-->`` line, ruff
     ``F401 ...`` + its ``-->`` line or ``f.py:1:8: F401``, linker ``undefined reference``), install
     errors (``ERROR:``, ``npm error``, ``error:``, ``×``), error lines of logs and of other outputs
     (``ERROR``/``FATAL``/``CRITICAL``, ``Traceback``, exception lines, ``error:``, ``panic:``,
     ``fatal:``), a search tool's own errors (``grep: x: No such file``);
  2. context: source/caret lines after a compiler error, the failing source line (pytest ``>``), the
     first warnings, the lines around a log's error, the first entries of each ``git status`` section,
     hunk headers of a diff;
  3. the head and tail of the output (more of the head for searches and listings: their first matches).
  For a test run, only the patterns of the runners whose marks are in the output's first or last
  :data:`RUNNER_MARKS_SCAN` characters are used (pytest, unittest, cargo, go, node/jest/vitest/mocha),
  all of them when none is recognised. A line-start pattern's white space is ``[ \t]``: a match never
  starts on one line and ends on the next.
  Tiers 0 and 1 are kept whatever their size up to ``max_tokens``, tier 0 first and its last lines
  first (then the rest are counted, not shown: the header says how many); tiers 2 and 3 only within
  ``budget_tokens`` and while the chosen lines stay within :data:`CONTEXT_SHARE` of the original's
  tokens (at least :data:`MIN_CONTEXT_TOKENS` while the must-keep lines take less than that). Tier 0/1
  lines are never cut; a tier 2/3 line longer than :data:`MAX_LINE_CHARS` is cut with
  ``… [+N chars]`` (so it is not verbatim, and says so).
- Bounded: at most :data:`MAX_SCAN` characters are scanned (its first and last halves; the line numbers
  of the tail stay those of the original); the digest's size is bounded by ``max_tokens`` plus its
  header, footer and run markers.
- Token figures are :func:`~ctxlifed.core.model.estimate_tokens` estimates (labelled ``~``).
- Speed (the digest runs on the hook's path): every pattern is run once over the scanned text by the regex
  engine, never per line from Python; the line-start patterns of a kind are one joined regex whose
  branches that start alike share that start (see the comment above :func:`_compile`); no pattern
  backtracks through a line where a possessive form is equivalent, except a greedy ``[^\n]*`` that steps
  back to a literal (the engine's fast step back beats a walk of a class). An all-ASCII text is scanned by
  ASCII twins of the patterns (see the comment above :func:`_ascii_form`); a scan that starts with a long
  literal runs only on a text that holds it (:data:`_MIN_NEEDLE`); a log's words are counted in a few
  passes, each searched for one character its words hold (:func:`_word_passes`: one regex of all of them
  tests every position), that give each match as its text, with no match object, and only the words with a
  tier that were found are looked for again (:func:`_count_words`); the error words of an output of no known
  kind that share a capital are looked for in one pass rooted at it (:func:`_word_rooted`), and the
  lower-case ``word: `` phrases of a log or such an output in one pass from their ``": "``
  (:func:`_colon_rooted`); a test run's runners are recognised by one pass of all
  their line-start marks (:func:`_runners_marked`), and so are the kinds of output by theirs
  (:func:`_first_kind_marked`, test alone first); marks that share a literal inside them are rooted at it, what
  comes before checked behind (:func:`_rooted_at`), and searched only from the line of the first match of a
  cheaper gate every match holds; so are a build's and an install's rare phrases, several at a letter they all
  hold (one search for them, where each took a search or a ``str.find``); a count that cannot reach its
  threshold (too few of the letters every match holds, counted in C) is not made, and one that may is made on
  the first half of its sample first (:func:`_reaches`); ``git status`` entries are found a section (a run of
  them) at a time and counted by label in C (:func:`_status_entries`). The
  facts skip a pass that cannot reach its threshold, and start it on the line of the first character it
  needs (:func:`_files_by_first_colon`, :func:`_path_dirs`), and count one-character or empty groups, not
  new strings (a diff's signs); a failing-test form that may be indented is found by its literal, its line's
  start checked after (:func:`_fail_names`). A scan not at a line start has a run form that takes a list of
  lines one after another (a type checker's errors) as one match, its lines marked as ranges
  (:func:`_run_form`; a match per line cost more in Python than the engine's walk of it); rows are counted
  from the match offsets themselves. Any such rewrite keeps the same matches, or puts the same lines in the
  same best tiers (tested against the plain forms). A cheaper form is kept only when it is cheaper in time
  too: ``str.find``/``in`` with a needle of two or more characters is slower than the engine's own literal
  search, though it runs fewer instructions (one of one character is fast). Matches become line indexes and
  tiers through map/accumulate/set operations, not a Python step per match; lines are chosen per tier by
  bisecting the running cost of a prefix costed a chunk at a time, the lines after it passed over by their
  length (:func:`_fit`). Phrases that a line-start pattern of the same tier already finds where they usually stand
  are not looked for there again (a lookbehind), so a long list of them is matched once.
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterable, Iterator
from itertools import accumulate, chain, compress, islice, repeat
from operator import add, attrgetter, le, not_, rshift, sub
from typing import Literal

import msgspec

from ctxlifed.core.commands import COMMAND_PREFIX, any_segment, is_build_command, is_test_command
from ctxlifed.core.model import estimate_tokens

__all__ = [
    "CONTEXT_SHARE",
    "KINDS",
    "MAX_LINE_CHARS",
    "MAX_SCAN",
    "Digest",
    "DigestBody",
    "OutputKind",
    "digest",
    "digest_body",
    "kept_verbatim",
    "output_kind",
    "token_estimate",
    "with_footer",
]

OutputKind = Literal["test", "build", "install", "search", "diff", "log", "other"]
KINDS: tuple[OutputKind, ...] = ("test", "build", "install", "search", "diff", "log", "other")

MAX_SCAN = 2 * 1024 * 1024  # characters scanned: the first and the last MAX_SCAN // 2
MAX_LINE_CHARS = 400  # a context (tier 2/3) line longer than this is cut
CONTEXT_SHARE = 0.25  # tiers 2/3 fill the digest up to this share of the original's tokens
MIN_CONTEXT_TOKENS = 120  # ... but may always use this many
HEAD_LINES = {"search": 12, "diff": 6}  # head lines offered per kind (default 5)
TAIL_LINES = 4

_KIND_LABEL: dict[str, str] = {
    "test": "test run",
    "build": "build/compiler/linter output",
    "install": "install output",
    "search": "search/listing output",
    "diff": "diff",
    "log": "log",
    "other": "command output",
}


class Digest(msgspec.Struct, frozen=True, kw_only=True):
    """An L1 digest of one output. ``text`` is what the model sees instead of the original."""

    kind: str  # one of KINDS
    text: str
    original_lines: int
    original_tokens: int
    tokens: int  # estimate_tokens(text)
    kept_lines: int  # original lines shown verbatim (or cut, for context lines)
    must_lines: int  # tier 0/1 lines found
    must_omitted: int  # tier 0/1 lines not shown because of max_tokens (0 normally)


# ---------------------------------------------------------------- kind of output

_INSTALL_RE = re.compile(
    COMMAND_PREFIX
    + r"""(?: (?:pip[\d.]*|uv\s+pip|pipx|conda|mamba|gem|brew|apt(?:-get)?|dnf|yum|apk)\s+(?:install|add|sync)
      | (?:npm|pnpm|yarn|bun)\s+(?:install|i|ci|add|update|upgrade)
      | uv\s+(?:sync|add) | poetry\s+(?:install|add|update) | cargo\s+(?:install|fetch|update) | go\s+(?:get|mod\s+download)
    )(?=\s|$)""",
    re.X,
)
_LINT_RE = re.compile(
    COMMAND_PREFIX
    + r"""(?: ruff | mypy | pyright | basedpyright | flake8 | pylint | pyflakes | eslint | biome | tsc | vue-tsc
      | gcc | g\+\+ | cc | c\+\+ | clang(?:\+\+)? | rustc | javac | kotlinc | swiftc
      | cargo\s+(?:clippy|check|build|b|c) | go\s+(?:vet|build) | golangci-lint | shellcheck | hadolint
      | black\s+--check | stylelint | markdownlint | yamllint | pre-commit | tox\s+-e\s+lint
    )(?=\s|$)""",
    re.X,
)
_DIFF_RE = re.compile(
    COMMAND_PREFIX + r"(?:git\s+(?:-C\s+\S+\s+|--no-pager\s+|-c\s+\S+\s+)*(?:diff|show|format-patch)|diff)(?=\s|$)", re.X
)
_LOG_RE = re.compile(
    COMMAND_PREFIX
    + r"""(?: journalctl | (?:docker|podman|kubectl|oc)\s+(?:compose\s+)?logs | dmesg
      | (?:tail|head|less|cat|grep|rg)\s+(?:[^|;&\n]*\s)?\S+\.log\b
    )""",
    re.X,
)
_SEARCH_RE = re.compile(
    COMMAND_PREFIX
    + r"""(?: grep | egrep | rg | ag | ack | find | fd | ls | tree | du | locate
      | git\s+(?:-C\s+\S+\s+|--no-pager\s+)*(?:log|status|grep|ls-files|branch|tag|shortlog|reflog|blame)
      | (?:pip[\d.]*|uv\s+pip)\s+(?:list|freeze) | (?:npm|pnpm|yarn)\s+(?:ls|list|outdated) | cargo\s+tree
    )(?=\s|$)""",
    re.X,
)

_TEXT_TEST = [("t0",
               r"test session starts|\nRan \d+ tests? in |\ntest result: |\n--- FAIL: |\n(?:ok|FAIL)\s+\S+\s+[\d.]+s"
               r"|\nTests?:\s+\d+|\n(?:#|ℹ) (?:tests|pass|fail) \d+|\n[ \t]*\d+ passing \("
               r"|\n=+ [^\n]*\b(?:passed|failed)\b[^\n]* in [\d.]+s")]
_TEXT_BUILD = [("t0",
                r":\d++:\d++: (?:fatal )?(?:error|warning):|\.py:\d++: error:|\): error TS\d+|\n(?:error|warning)\[E?\d+\]: "
                r"|\nerror: could not compile|\nFound \d+ errors? in|\nmake(?:\[\d+\])?: \*\*\*|\n[ \t]+--> \S+:\d+:\d+")]
_TEXT_INSTALL = [("t0",
                  r"\nSuccessfully installed |\nRequirement already satisfied: |\nnpm (?:ERR!|error) |\nadded \d+ packages?"
                  r"|\nERROR: (?:Could not find a version|No matching distribution)")]
# a diff: "diff --git a/" (a plain substring test), or a unified header, found from its literal start (the two
# as one alternation would test every character against both first letters)
_TEXT_DIFF_HEADER_RE = re.compile(r"--- a/\S+\n\+\+\+ b/")
# hh:mm:ss, found from its first ":" (a literal the engine searches fast) and checked behind
_CLOCK_RE = re.compile(r":\d\d:\d\d(?<=\d\d:\d\d:\d\d)")
# ``path:line:`` or a path alone on its line. Every run is taken possessively: what must follow it (":",
# "/", the line's end) is a character it cannot match, so giving characters back never helps (the same
# matches as ``\n[^\s:]+:\d+[:-]|\n\.{0,2}/?[\w.@+-]+(?:/[\w.@+ -]+)+/?(?=\n)``)
_MATCH_LINE_RE = re.compile(r"\n[^\s:]++:\d+[:-]|\n\.{0,2}/?[\w.@+-]++(?:/[\w.@+ -]++)++/?(?=\n)")
_LEVEL_RE = re.compile(r"(?:DEBUG|INFO|NOTICE|WARN(?:ING)?|ERROR|CRITICAL|FATAL|TRACE)\b")
# every level word holds one of these letters, and matches do not overlap: a sample holding fewer of them
# than half its lines cannot have a level on half its lines (counted in C, without the regex)
_LEVEL_LETTERS = ("E", "A", "I")
TEXT_HEAD = 32 * 1024  # a kind is recognised from the text by its marks in this many first characters
TEXT_TAIL = 8 * 1024  # ... or, for a test run or an install (their summaries come last), in this many last


def output_kind(text: str, command: str | None = None) -> OutputKind:
    """The kind of output ``text`` is (see the module rules); ``command`` is the Bash command, if any."""
    cmd = command or ""
    if cmd:
        if is_test_command(cmd):
            return "test"
        if any_segment(_INSTALL_RE, cmd):
            return "install"
        if is_build_command(cmd) or any_segment(_LINT_RE, cmd):
            return "build"
        if any_segment(_DIFF_RE, cmd):
            return "diff"
        if any_segment(_LOG_RE, cmd):
            return "log"
        if any_segment(_SEARCH_RE, cmd):
            return "search"
    head = "\n" + text[:TEXT_HEAD]
    tail = "\n" + text[-TEXT_TAIL:] if len(text) > TEXT_HEAD else ""
    # the most important of test, install, build marked at a line start in the head (test alone first: most
    # texts that reach here with test marks have them early), then in the tail (test and install only, and
    # only those more important than the head's)
    if _first_kind_marked(head, _TEXT_KINDS_TEST) == _K_TEST:
        return "test"
    in_head = _first_kind_marked(head, _TEXT_KINDS_NOT_TEST)
    in_tail = _first_kind_marked(tail, frozenset(range(min(in_head, _K_BUILD)))) if tail else _K_NONE
    if in_tail == _K_TEST or _found(_TEXT_LOOSE[_K_TEST], head) or (tail and _found(_TEXT_LOOSE[_K_TEST], tail)):
        return "test"
    if _K_INSTALL in (in_head, in_tail):
        return "install"
    if in_head == _K_BUILD or _build_loose_marked(head):
        return "build"
    diff_head = head[:4096]
    if "diff --git a/" in diff_head or _TEXT_DIFF_HEADER_RE.search(diff_head):
        return "diff"
    sample = head[:8192]
    n = sample.count("\n")
    if n >= 8:
        ascii_only = sample.isascii()
        # half the lines timestamped or levelled (the levels are not counted when the stamps are enough;
        # nor when the sample has too few of the letters one of them must hold, see _LEVEL_LETTERS)
        if _reaches(_CLOCK_ARE if ascii_only else _CLOCK_RE, sample, (n + 1) // 2) or (
                sum(map(sample.count, _LEVEL_LETTERS)) * 2 >= n
                and len((_LEVEL_ARE if ascii_only else _LEVEL_RE).findall(sample)) * 2 >= n):
            return "log"
        if len((_MATCH_LINE_ARE if ascii_only else _MATCH_LINE_RE).findall(sample)) * 5 >= n * 3:
            return "search"
    return "other"


# ---------------------------------------------------------------- patterns per kind
# Every pattern runs on "\n" + text. A pattern that starts with "\n" is anchored at a line start (a
# literal first character lets the engine skip ahead); others are searched anywhere and widened to
# their line. Group names: ``t<tier>`` or ``t<tier>n<k>`` (the k lines after the match's line join
# the same tier) or ``t<tier>c<k>`` (the k lines after it join tier 2, as context); k is one digit.
_MAX_FOLLOW = 9

# A Python exception line: ``[pkg.]NameError[: message]``, i.e. the line's first word run (after an optional
# dotted prefix) starts with a capital and ends in Error/Exception/Exit/Interrupt/Failure; the line does not
# start with a digit (no Python name does: a line of numbers is turned away on its first character). Written
# so that nothing backtracks: the prefix up to the last dot and the name are taken possessively, then the
# ending is checked behind (the same lines as
# ``\n(?!\d)(?:[\w.]+\.)?[A-Z]\w*(?:Error|...|Failure)\b(?::[^\n]*)?(?=\n|$)``).
# A gate after the first character runs the line's first [\w.] run to its end and checks what follows it
# and how it ends first: a line whose first run cannot be an exception's name (most lines; a pytest progress
# line of dots) fails there, in one pass, instead of backtracking through it.
_EXC_ENDS = r"(?:(?<=\wError)|(?<=\wException)|(?<=\wExit)|(?<=\wInterrupt)|(?<=\wFailure))"
# cheapest checks first: the run is followed by ":" or the line's end, its last letter is one of the endings'
_EXC_GATE = r"(?=[\w.]*+(?![^:\n])(?<=[rnte])" + _EXC_ENDS + ")"
# One branch for both forms (a dotted prefix, or none and the name's first letter a capital): the line is
# entered once.
_PY_EXC = (r"\n[\w.](?<!\d)" + _EXC_GATE + r"(?:(?:\w*\.)++[A-Z]|(?<=[A-Z]))\w*+" + _EXC_ENDS
           + r"(?::[^\n]*)?(?=\n|$)")
_PY_FRAME = r'\n[ \t]+File "[^"\n]+", line \d+'
_LEADING_WORD_RE = re.compile(r"\\b([A-Za-z_]\w*)(?![\w*+?{])")  # a branch's leading ``\bword`` (not quantified)


def _word_rooted(alts: list[str], root: str) -> str:
    """The regex branches ``alts``, each ``\\bWord...`` with ``root`` in its word, as one branch that starts with
    ``root``: each is matched from the first ``root`` of its word, what comes before checked behind
    (``\\bFATAL\\b`` -> ``TAL(?<=FATAL)(?<!\\wFATAL)\\b`` after the ``A``), so that they share one search for it
    where each took a pass of its own. A match is on the line of the plain form's, from the same word."""
    rests = []
    for alt in alts:
        lead = _LEADING_WORD_RE.match(alt)
        assert lead is not None and root in lead.group(1), f"{alt} is not a word holding {root!r}"
        word = lead.group(1)
        k = word.index(root)
        rests.append(word[k + 1:] + (f"(?<={word})" if k else "") + f"(?<!\\w{word})" + alt[lead.end():])
    return root + "(?:" + "|".join(rests) + ")"


def _colon_rooted(words: list[str]) -> str:
    """``\\bword: `` for each of ``words`` (lower-case names) as one branch found from its ``": "``, the word
    checked behind (its last letter first): one search of ``": "`` for all of them, where each word took a pass
    of its own. A match is on the line of the plain form's."""
    last = "".join(sorted({w[-1] for w in words}))
    return f": (?<=[{last}]: )(?:" + "|".join(f"(?<={w}: )(?<!\\w{w}: )" for w in words) + ")"


# the error words of an output of no known kind (plain form: _ERRWORDS_PLAIN); the whole words and "Error: "
# rooted at the capital they share (see _word_rooted), the lower-case phrases at their ": " (see _colon_rooted)
_ERRWORDS_PLAIN = (r"\bError: |\berror(?:\[\w+\])?: |\bpanic: |\bfatal: |\bFATAL\b|\bCRITICAL\b|\bERROR\b|\bException\b"
                   r"|Traceback \(most recent call last\)|\bSegmentation fault|\bcommand not found|\bNo such file or directory")
_ERRWORDS = "|".join([
    _word_rooted([r"\bError: ", r"\bERROR\b", r"\bException\b"], "E"),
    _word_rooted([r"\bFATAL\b", r"\bCRITICAL\b"], "A"),
    _colon_rooted(["error", "panic", "fatal"]),
    r"\berror\[\w+\]: |Traceback \(most recent call last\)|\bSegmentation fault|\bcommand not found"
    r"|\bNo such file or directory",
])
_WARNWORDS_PLAIN = r"\bwarning: |\bWARNING\b"
_WARNWORDS = _colon_rooted(["warning"]) + "|" + _word_rooted([r"\bWARNING\b"], "A")

# In a test run, an exception line is found by a cheaper gate first: the line's first [\w.] run is followed by
# ":" or the line's end (one negative lookahead; most lines fail it), then the first character is not a digit,
# then the run's ending (the same lines as _PY_EXC).
_PY_EXC_HEAD = r"\n[\w.](?<!\d)" + _EXC_GATE
assert _PY_EXC.startswith(_PY_EXC_HEAD)
_PY_EXC_NAME = _PY_EXC[len(_PY_EXC_HEAD):]  # the name, its ending and its message, from the second character
_TEST_EXC = r"\n[\w.](?![\w.]*+[^:\n])(?<!\d)(?=[\w.]*+(?<=[rnte])" + _EXC_ENDS + ")" + _PY_EXC_NAME
# pytest's location line ``file.py:N: in f`` / ``file.py:N: Error`` (its path's characters taken possessively,
# then "does it end in .py") and an exception line in ONE branch behind one gate: the line's first
# [\w./\\-] run is followed by ":" or the line's end, and ends in ".py" followed by ":" and a digit or in one
# of the exception endings' last letters (a pytest progress line, a ``x.py::test`` line fail there, once
# instead of once per branch). The two cannot match one line (a run cannot end in both); the same lines as
# ``\n[\w./\\-]+\.py:\d+: (?:in \S+|[A-Za-z_][\w.]*)(?=\n|$)`` and _PY_EXC.
_PY_LOCATION_OR_EXC = (
    r"\n[\w./\\-](?=[\w./\\-]*+(?![^:\n])(?:(?<=\.py):\d|(?<=[rnte])))"
    r"(?:[\w./\\-]*+(?<=[\w./\\-]\.py):\d+: (?:in \S+|[A-Za-z_][\w.]*)(?=\n|$)"
    r"|(?<![\d/\\-])(?=[\w.]*+(?<=[rnte])" + _EXC_ENDS + ")" + _PY_EXC_NAME + ")"
)

# Test runners: each one's patterns are used only when its marks are in the output (fewer branches per
# line); when no runner is recognised, all of them are.
_RUNNERS: dict[str, tuple[str, list[tuple[str, str]]]] = {
    # a ``::name RESULT`` mark's name is taken possessively (a space ends it: giving characters back never
    # helps; a cargo ``tests::name ... ok`` line is left at once)
    "pytest": (r"test session starts|::(?<!:::)\S++ (?:PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b|\n(?:PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) \S+::"
               r"|\n=+ [^\n]* in [\d.]+s|\nE   |\n_{3,} ", [
        # a "=== ... ===" line with one of the words: the words are tried where a word starts, one run of word
        # characters and one of others at a time (the same lines as ``[^\n]*?\b(?:...)\b``, which tried them at
        # every character of every "===" line)
        ("t0", r"\n=+ (?:\w*+[^\w\n]++)*?(?:passed|failed|errors?|no tests ran|skipped|deselected)\b[^\n]*"),
        ("t0", r"\n\d+ (?:passed|failed|errors?)\b[^\n]*"),
        ("t1", r"\nE(?= |\n|$)|\nFAILED |\nERROR |::(?<!:::)\S++ (?:FAILED|ERROR)\b|\n_{3,} [^\n]+ _{3,}(?=\n|$)"),
        # a ``file.py:N: ...`` location line, or a Python exception line (see _PY_LOCATION_OR_EXC)
        ("t1", _PY_LOCATION_OR_EXC),
        ("t2", r"\n>\s"),
    ]),
    "unittest": (r"\nRan \d+ test|\) \.\.\. (?:ok|FAIL|ERROR)\n|\n(?:FAIL|ERROR): ", [
        ("t0", r"\nRan \d+ tests? in [^\n]*|\nOK(?: \([^\n]*\))?(?=\n|$)|\nFAILED(?: \([^\n]*\))?(?=\n|$)"),
        ("t1", r"\nFAIL: |\nERROR: |\.\.\. (?:FAIL|ERROR|FAILED)(?=\n|$)"),
    ]),
    "cargo": (r"\ntest result: |\nrunning \d+ tests?|panicked at ", [
        ("t0", r"\ntest result: |\nerror: test failed"),
        ("t1n1", r"panicked at "),
        ("t1", r"\nassertion [^\n]*failed|\n[ \t]*left: |\n[ \t]*right: "),
        ("t1", r" \.\.\. FAILED(?=\n|$)"),  # a failing test's line (``test x ... FAILED``), found from its end
    ]),
    "go": (r"\n=== RUN|\n--- FAIL|\n(?:ok|FAIL)\s+\S+\s+[\d.]+s|\npanic: ", [
        ("t0", r"\nok\s+\S+\s+(?:[\d.]+s|\(cached\)|\[[^\]\n]*\])|\nFAIL\s+\S+\s+(?:[\d.]+s|\[[^\]\n]*\])|\nPASS(?=\n|$)"
               r"|\nFAIL(?=\n|$)"),
        ("t1", r"\n[ \t]*--- FAIL: |\n[ \t]+\S+_test\.go:\d+: |\npanic: "),
    ]),
    "js": (r"\nTAP version|\n# Subtest|\n(?:#|ℹ) tests \d+|\n[ \t]*Tests?:\s+\d|\n[ \t]*\d+ passing \(|\n[ \t]*[●✕✖] ", [
        ("t0", r"\n[ \t]*Test(?:s|\sSuites|\sFiles):\s+|\n(?:#|ℹ) (?:tests|pass|fail|cancelled) \d+"
               r"|\n[ \t]*\d+ (?:passing|failing)\b"),
        ("t1", r"\n[ \t]*● |\n[ \t]*✕ |\n[ \t]*(?:Expected|Received)(?: \w+)?: |\n✖ |\n[ \t]*not ok \d+"),
        ("t1", r"\n[ \t]+(?:error|location|expected|actual|name): |\n[ \t]*Expected values"),
        ("t2", r"\n[ \t]+at [^\n]*:\d+:\d+\)?(?=\n)"),
    ]),
}
# ``error: ``, ``panic: `` and ``fatal: `` (each a whole word) found in ONE pass from their ": ", the letter
# before it checked first, the words behind it (:func:`_colon_rooted`; the same lines as
# ``\berror: |\bpanic: |\bfatal: ``); rustc's
# ``error[E0308]: `` from its "error[" (the same lines as ``\berror\[\w+\]: ``)
_TEST_ERROR_WORDS = _colon_rooted(["error", "panic", "fatal"]) + r"|error\[(?<!\werror\[)\w+\]: "
_TEST_COMMON = [
    ("t1", _PY_FRAME),
    ("t1", _TEST_ERROR_WORDS + r"|Traceback \(most recent call last\)"),
]


def _test_spec(names: Iterable[str]) -> list[tuple[str, str]]:
    """The patterns of a test run by the runners ``names``: theirs, the exception lines (unless pytest's
    location branch finds them already), then the common ones."""
    spec = [x for name in names for x in _RUNNERS[name][1]]
    return spec + ([] if ("t1", _PY_LOCATION_OR_EXC) in spec else [("t1", _TEST_EXC)]) + _TEST_COMMON


_TEST = _test_spec(_RUNNERS)
_BUILD = [
    ("t0", r"\nFound \d+ errors?|\n\d+ errors? generated|\nerror: could not compile|\nmake(?:\[\d+\])?: \*\*\* "
           r"|\nSuccess: no issues|\n\[\*\] \d+ fixable|\nAll checks passed|\n[ \t]*Finished |\n\d+ problems? \("),
    ("t0", r"\nwarning: [^\n]* generated \d+ warnings?"),
    # file:line[:col]: — the digits are taken possessively (what follows them is a colon or ": ", so
    # giving digits back never helps), which also lets the family share them (see _join_branches); the
    # column is a branch of its own, not an optional group (``:\d++(?::\d++)?+: ``): joined, the family reads
    # ``:<digits>:`` once and then tells its members apart by their first character, where the optional
    # column was tried again by each of them
    ("t1c2", r":\d++: (?:fatal )?error: |:\d++:\d++: (?:fatal )?error: "),
    ("t1", r"\bld returned \d+ exit status|\n[ \t]+\d+:\d+\s+error\s"),
    ("t1n1", r"\nerror(?:\[E\d+\])?: "),
    ("t1n1", r"\n[A-Z]{1,4}\d{2,4} (?:\[\*\] )?[^\n]"),  # ruff/pylint code line, then its --> line
    ("t1", r":\d++:\d++: [A-Z]{1,4}\d{2,4}\b"),  # flake8/ruff concise: f.py:1:8: F401 ...
    ("t2", r":\d++: note: |:\d++:\d++: note: "),
    # phrases found anywhere in a line, each rooted at a letter it holds that is rare in build outputs, what
    # comes before that letter checked behind (see _BUILD_PHRASES_PLAIN): one search of "f" for four of them
    # and one of "T" for two, where each had a search (or a str.find) of its own
    ("t1", r"f(?:atal(?<!\wfatal): |i(?:ned reference to\b(?<=\bundefined reference to)"
           r"|le or directory(?<=\bNo such file or directory))|ound(?<=\bcommand not found))"),
    ("t1", r"T(?:S(?<=error TS)\d|raceback \(most recent call last\))"),
    ("t1", _PY_EXC),
]
# the plain form of _BUILD's rooted phrases (the same lines)
_BUILD_PHRASES_PLAIN = (r"error TS\d+|\bundefined reference to\b|\bfatal: |Traceback \(most recent call last\)"
                        r"|\bcommand not found|\bNo such file or directory")
_INSTALL = [
    ("t0", r"\nSuccessfully (?:installed|built|uninstalled) |\n(?:added|removed|changed|up to date)\b[^\n]*"
           r"|\n(?:\d+ upgraded, \d+ newly installed)"),
    ("t1", r"\nERROR: |\nnpm (?:ERR!|error) |\nerror: |\n[ \t]*× |\nE: "),
    # the phrases are looked for anywhere in a line, except right after a line's "ERROR: ", where that line is
    # tier 1 already (pip's own lines: a long list of them would be found twice); each is rooted at a letter
    # it holds, what comes before that letter checked behind (as _BUILD's; see _INSTALL_PHRASES_PLAIN): one
    # search of "b" for three of them and one of "f" for two, where each had a search of its own
    ("t0", r"b(?:ilit(?<=vulnerabilit))"),
    ("t1", r"b(?:u(?:ild\b(?<=\bFailed to build)(?<!\nERROR: Failed to build)"
           r"|tion\b(?<=\bNo matching distribution)(?<!\nERROR: No matching distribution)))"),
    ("t1", r"f(?:atal(?<!\wfatal): "
           r"|ind a version\b(?<=\bCould not find a version)(?<!\nERROR: Could not find a version))"),
    ("t2", r"\n[ \t]*╰─> |\nWARNING: |\nnpm (?:WARN|warn) "),
]
# the plain forms of _INSTALL's rooted phrases, by tier (the same lines)
_INSTALL_PHRASES_PLAIN = {0: r"vulnerabilit",
                          1: r"\bfatal: |\bFailed(?<!\nERROR: Failed) to build\b"
                             r"|\bCould(?<!\nERROR: Could) not find a version\b|\bNo(?<!\nERROR: No) matching distribution\b"}
_SEARCH = [
    ("t0", r"\nOn branch |\nHEAD detached |\nYour branch |\nChanges (?:to be committed|not staged for commit):"
           r"|\nUntracked files:|\nUnmerged paths:|\nnothing (?:added )?to commit|\nYou have unmerged"),
    ("t1", r"\n[ \t]+both (?:modified|added|deleted):|\n(?:grep|rg|find|ls|fd|tree|du|fatal|error): "),
    ("t1", r"\bPermission denied\b|\bNo such file or directory\b"),
]
_DIFF = [
    ("t0", r"\ndiff --git |\n(?:Binary files) "),
    ("t2", r"\n@@ "),
]
LOG_LEVELS = ("DEBUG", "INFO", "NOTICE", "WARN", "WARNING", "ERROR", "CRITICAL", "FATAL", "TRACE")  # counted


# a log's error phrases (plain form: _LOG_PHRASES_PLAIN)
_LOG_PHRASES_PLAIN = r"\berror: |\bfatal: |\bpanic: "
_LOG_PHRASES = _colon_rooted(["error", "fatal", "panic"])
_LOG = [
    ("t1c3", r"\bERROR\b|\bCRITICAL\b|\bFATAL\b|\bSEVERE\b|\bPANIC\b|\bEMERG\b|\bALERT\b|" + _LOG_PHRASES
             + r"|Traceback \(most recent call last\)|\bException\b"),
    ("t1", _PY_EXC),
    ("t1", _PY_FRAME),
    ("t2", r"\bWARN\b|\bWARNING\b"),
    ("count", r"\bDEBUG\b|\bINFO\b|\bNOTICE\b|\bTRACE\b"),
]
_OTHER = [
    ("t1c2", _ERRWORDS),
    ("t1", _PY_EXC),
    ("t1", _PY_FRAME),
    ("t2", _WARNWORDS),
]


def _outside(rx: str, i: int = 0) -> Iterator[tuple[int, str, int]]:
    """(index, character, group depth after it) of the characters of ``rx`` from ``i`` on that are not in
    an escape or a class; the walk ends at a class that is never closed."""
    depth = 0
    while i < len(rx):
        c = rx[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            n = _first_atom(rx[i:])
            if n == 0:
                return
            i += n
            continue
        depth += (c == "(") - (c == ")")
        yield i, c, depth
        i += 1


def _alternatives(pattern: str) -> list[str]:
    """The top-level alternatives of ``pattern`` (split on ``|`` outside groups and classes)."""
    parts: list[str] = []
    start = 0
    for i, c, depth in _outside(pattern):
        if c == "|" and depth == 0:
            parts.append(pattern[start:i])
            start = i + 1
    parts.append(pattern[start:])
    return parts


# Alternatives anchored at a line start (``\n...``) are joined in one regex ``\n(?:...(?P<g0>)|...)``: the
# engine scans for "\n" once and tries the branches there. Each branch is written so that the engine can
# reject it on the line's first character without entering it (it does so for a branch that starts with a
# literal or a character class): the branch's group is an empty one at its END (``m.lastgroup`` still names
# the branch that matched), and a branch that starts with a quantified atom or an optional group is
# rewritten to an equivalent one that starts with a literal or a class (:func:`_fast_starts`).
# Other alternatives get one regex each: one that starts with a literal is searched with the engine's
# fast literal scan, where a big alternation tries every branch at every position (ten times slower).
# A leading ``\b`` defeats that scan too: it must be followed by a word, and is checked by a lookbehind
# after that word (``\bword`` -> ``word(?<!\wword)``).
# A pattern must use only non-capturing groups.


_JOIN_ANCHORED = True  # see above; False gives one regex per anchored alternative (for measuring)


class _Scan(msgspec.Struct, frozen=True):
    rx: re.Pattern[str]
    # group name (None: whole match) -> tier, follow, as ctx; None for a word that is only counted
    info: dict[str | None, tuple[int, int, bool] | None]
    # the same, grouped: (tier, follow, as ctx) -> the group names that give it (all of them, for one)
    by_info: tuple[tuple[tuple[int, int, bool], frozenset[str | None]], ...] = ()
    # literal characters every match starts with (see _needle): a text without them is not scanned, and a
    # text with them is scanned from their first occurrence
    needle: str = ""
    # a scan of whole words (see _count_words): (word, tier info or None, its regex ``word\b`` checked behind,
    # and that regex's ASCII twin)
    words: tuple[tuple[str, tuple[int, int, bool] | None, re.Pattern[str], re.Pattern[str]], ...] = ()
    arx: re.Pattern[str] | None = None  # ``rx`` for an ASCII-only text (see _ascii_twin)
    # for a scan of words: the passes that count them (see _word_passes), each (regex, its ASCII twin), and the
    # pass that finds each word and the text of its matches there
    count_passes: tuple[tuple[re.Pattern[str], re.Pattern[str]], ...] = ()
    match_text: dict[str, tuple[int, str]] = {}
    # the run form of a scan not at a line start (see _run_form), its ASCII twin, and the names of its run
    # groups (each in ``info`` with its branch's tier info); None when the scan has none
    run_rx: re.Pattern[str] | None = None
    run_arx: re.Pattern[str] | None = None
    run_names: frozenset[str | None] = frozenset()
    # where a match's row is counted from (see _rows): 0, every match starts with the newline before its line
    # (the joined line-start scan); 1, no match holds a newline (:func:`_within_line`); 2, a match may start
    # with one (it is then on the line after it)
    rows_from: int = 2


# A text that is all ASCII (``str.isascii`` is a flag, not a scan) is scanned by ASCII twins of the patterns:
# the same pattern with ``\w`` and ``\d`` (and their negations) written as the classes they are on ASCII
# characters, compiled with re.ASCII (for ``\b``), white space kept Unicode (``(?u:\s)``; in a class, spelled
# out: it is also \x1c-\x1f there). On such a text every match is the same; the engine tests a class of
# plain characters with one bitmap lookup, where a Unicode ``\w`` or ``\d`` calls the Unicode database.
_ASCII_CLASSES = {"w": "0-9A-Za-z_", "d": "0-9", "s": "\\t-\\r\\x1c- "}


def _ascii_form(rx: str) -> str | None:
    """``rx`` with its class escapes spelled for ASCII text (see above); None when it has one inside a class
    that cannot be spelled there (a negated escape such as ``[\\S]``)."""
    out: list[str] = []
    i = 0
    in_class = False
    while i < len(rx):
        c = rx[i]
        if c == "\\" and i + 1 < len(rx):
            esc = rx[i + 1]
            body = _ASCII_CLASSES.get(esc.lower())
            if body is None:
                out.append(rx[i: i + 2])
            elif in_class:
                if not esc.islower():
                    return None
                out.append(body)
            elif esc in "sS":  # the Unicode test of white space is a table lookup already, and a class is slower
                out.append(f"(?u:\\{esc})")
            else:
                out.append(("[" if esc.islower() else "[^") + body + "]")
            i += 2
            continue
        if c == "[" and not in_class:
            in_class = True
            out.append(c)
            i += 1
            for lead in ("^", "]"):  # a leading "^" negates; a "]" right after the opening is a literal
                if rx[i: i + 1] == lead:
                    out.append(lead)
                    i += 1
            continue
        if c == "]" and in_class:
            in_class = False
        out.append(c)
        i += 1
    return "".join(out)


def _ascii_twin(rx: re.Pattern[str]) -> re.Pattern[str]:
    form = None if rx.flags & (re.X | re.I) else _ascii_form(rx.pattern)
    return rx if form is None else re.compile(form, (rx.flags & ~re.U) | re.A)


def _pick(rx: re.Pattern[str], arx: re.Pattern[str] | None, text: str) -> re.Pattern[str]:
    return arx if arx is not None and text.isascii() else rx


def _scan(rx: re.Pattern[str], info: dict[str | None, tuple[int, int, bool] | None],
          needle: str = "", runs: tuple[str, dict[str, tuple[int, int, bool]]] | None = None) -> _Scan:
    """A scan of ``rx``; ``runs``: its run form and the infos of its run groups (:func:`_run_form`)."""
    run_rx = re.compile(runs[0]) if runs is not None else None
    if runs is not None:
        info = {**info, **runs[1]}
    groups: dict[tuple[int, int, bool], set[str | None]] = {}
    for name, inf in info.items():
        if inf is not None:
            groups.setdefault(inf, set()).add(name)
    return _Scan(rx, info, tuple((inf, frozenset(names)) for inf, names in groups.items()),
                 needle if len(needle) >= _MIN_NEEDLE else "", arx=_ascii_twin(rx), run_rx=run_rx,
                 rows_from=1 if _within_line(rx.pattern) else 2,
                 run_arx=_ascii_twin(run_rx) if run_rx is not None else None,
                 run_names=frozenset(runs[1]) if runs is not None else frozenset())


_QUANT_RE = re.compile(r"(\+|\*|\?|\{(\d*)(?:(,)(\d*))?\})(?![?+])")


def _first_atom(alt: str) -> int:
    """The length of ``alt``'s first atom (an escape, a class, a group or one character); 0 when unknown."""
    if not alt:
        return 0
    c = alt[0]
    if c == "\\":
        return 2 if len(alt) > 1 and alt[1] not in "0123456789xuUNpgk" else 0
    if c == "[":
        j = 1
        if j < len(alt) and alt[j] == "^":
            j += 1
        if j < len(alt) and alt[j] == "]":
            j += 1
        while j < len(alt) and alt[j] != "]":
            j += 2 if alt[j] == "\\" else 1
        return j + 1 if j < len(alt) else 0
    if alt.startswith("(?:"):
        return max(_group_end(alt, 0), 0)
    return 0 if c in ".^$*+?{}()|" else 1


def _no_space_start(alt: str) -> bool:
    """True when no match of ``alt`` can start with a white-space character (judged on its first atom)."""
    if not alt:
        return False
    if alt[:2] in (r"\d", r"\w", r"\S"):
        return True
    if alt.startswith("(?:"):
        n = _first_atom(alt)
        return n > 0 and not _QUANT_RE.match(alt, n) and all(_no_space_start(a) for a in _alternatives(alt[3:n - 1]))
    if alt[0] == "[":  # a class without negation, white space or an escape that could stand for one
        n = _first_atom(alt)
        body = alt[1:n - 1]
        if n > 0 and body.startswith("^"):  # [^\s...] excludes white space
            return "\\s" in body.replace("\\\\", "")
        if n == 0 or any(c.isspace() for c in body):
            return False
        j = 0
        while j < len(body):
            if body[j] == "\\":
                esc = body[j + 1: j + 2]
                if not esc or (esc.isalnum() and esc not in "wdS"):  # \s, \t, \W, \x20... may be white space
                    return False
                j += 2
            else:
                j += 1
        return True
    if alt[0] == "\\":  # an escaped punctuation character, \w, \d or \S
        return len(alt) > 1 and (alt[1] in "wdS" or not (alt[1].isalnum() or alt[1].isspace()))
    return alt[0] not in ".^$*+?{}[]()|" and not alt[0].isspace()


def _ends_run(atom: str, after: str) -> bool:
    """True when ``after`` starts with a required character (a literal or a class of a few) that ``atom``
    cannot match: a run of ``atom`` before it never gives characters back in a match."""
    n = _first_atom(after)
    if n == 0 or after[n: n + 1] in ("*", "?", "{"):
        return False
    chars = _chars(after[:n])
    return chars is not None and not any(re.fullmatch(atom, c) for c in chars)


def _fast_starts(alt: str, depth: int = 0) -> list[str]:
    """Branches equivalent, in this order, to the regex branch ``alt`` (same matches, same spans, tried in
    the same order), each starting with a literal or a class where that can be done: ``X+r`` ->
    ``XX*r``, ``X++r`` -> ``XX*+r`` (X one character), ``X{m,n}r`` -> ``XX{m-1,n-1}r``, ``X*r`` -> ``XX*r | r``, ``X?r`` -> ``Xr | r``,
    ``(?:A|B)r`` -> ``Ar | Br`` (and ``(?:A|B)?r`` -> ``Ar | Br | r``)."""
    n = _first_atom(alt)
    if n == 0 or depth > 4:
        return [alt]
    atom, rest = alt[:n], alt[n:]
    q = _QUANT_RE.match(rest)
    quant = q.group(1) if q else ""
    after = rest[q.end():] if q else rest
    if atom.startswith("(?:"):
        if quant not in ("", "?"):
            return [alt]
        inner = [a + after for a in _alternatives(atom[3:-1])]
        out = [b for a in inner for b in _fast_starts(a, depth + 1)]
        return out + (_fast_starts(after, depth + 1) if quant == "?" and after else [] if quant != "?" else [after])
    if not quant:
        if rest.startswith("++") and not atom.startswith("("):  # a possessive run of one character: X++r -> XX*+r
            return [atom + atom + "*+" + rest[2:]]
        return [alt]
    # Leading white space before something that cannot start with white space: giving some of it back
    # cannot help, so it is taken possessively (no retry of the rest at every shorter run).
    # So is a run followed by a character it cannot match (``\d\d* errors`` -> ``\d\d*+ errors``).
    star = "*+" if atom in (r"\s", _HSPACE) and _no_space_start(after) or _ends_run(atom, after) else "*"
    # After a possessive run, what follows is tried once, where the run ends: its own alternatives can be
    # spelled out after the run too (``X*+(?:A|B)r`` -> ``X*+Ar | X*+Br``), so that the branches that
    # share the run can be joined under it and told apart by their first letter (see _join_branches).
    afters = _fast_starts(after, depth + 1) if star == "*+" and after else [after]
    if quant == "+":
        return [atom + atom + star + a for a in afters]
    if quant in ("*", "?"):
        keep = [atom + atom + star + a for a in afters] if quant == "*" else [atom + after]
        return [*keep, *(_fast_starts(after, depth + 1) if after else [after])]
    lo, comma, hi = q.group(2), q.group(3), q.group(4)
    m = int(lo or 0)
    if m == 0 or (hi and int(hi) < m):
        return [alt]
    rep = f"{{{m - 1}{comma or ''}{'' if not comma else (str(int(hi) - 1) if hi else '')}}}"
    return [atom + atom + rep + after]


_HSPACE = r"[ \t]"  # white space within a line: a line-start pattern never reaches into the next line
_INDENT = _HSPACE + _HSPACE + "*+"  # a leading run of it, taken possessively (see _fast_starts)


def _head(branch: str) -> str | None:
    """The part every match of ``branch`` starts with, when it is one unquantified atom (a literal, an
    escape, a class), the possessive indent, or such an atom repeated possessively (``\\d++``, ``\\d*+``:
    the run is the same whatever follows, so branches that start with it can share it): what branches
    are grouped by (None: not groupable)."""
    if branch.startswith(_INDENT):
        return _INDENT
    n = _first_atom(branch)
    if n == 0 or branch[0] == "(":
        return None
    if branch[n:n + 2] in ("++", "*+"):
        return branch[:n + 2]
    if branch[n:n + 1] in ("*", "+", "?", "{"):
        return None
    return branch[:n]


def _first_char(head: str) -> str | None:
    """The one-character atom a head's first character matches (the repeated atom of a run); None when
    the head may match nothing (``X*+``: then the branch starts with whatever follows it)."""
    if head == _INDENT:
        return _HSPACE
    if head.endswith("*+"):
        return None
    return head[:-2] if head.endswith("++") else head


def _chars(atom: str) -> frozenset[str] | None:
    """The characters ``atom`` matches, when they are few and known (a literal, an escaped punctuation
    character, a class of plain characters such as ``[ \t]`` or ``[●✕]``); None otherwise."""
    if len(atom) == 1 and atom not in ".^$*+?{}[]()|\\":
        return frozenset(atom)
    if len(atom) == 2 and atom[0] == "\\" and not atom[1].isalnum():
        return frozenset(atom[1])
    if atom.startswith("[") and not atom.startswith("[^") and "-" not in atom[1:-1]:
        body = atom[1:-1].replace("\\t", "\t")
        return frozenset(body) if "\\" not in body else None
    return None


def _may_share_start(a: str | None, b: str | None) -> bool:
    """Whether a branch headed by ``a`` and one headed by ``b`` may both match at one position (True when
    it cannot be shown that their first characters differ)."""
    a = _first_char(a) if a is not None else None
    b = _first_char(b) if b is not None else None
    if a is None or b is None:
        return True
    ca, cb = _chars(a), _chars(b)
    if ca is not None and cb is not None:
        return bool(ca & cb)
    if ca is not None or cb is not None:
        known, other = (ca, b) if ca is not None else (cb, a)
        return any(re.fullmatch(other, c) for c in known)  # type: ignore[union-attr]
    return True


def _join_branches(branches: list[str], depth: int = 0) -> str:
    """``branches`` as one alternation, tried in the same order with the same result, where branches that
    start with the same head (:func:`_head`) are joined under ONE copy of it, put where the first of
    them was, so the engine tests that head once per position instead of once per branch (a line that
    starts with spaces is entered once, not once per indented branch). A branch joins the group of an
    earlier one only when no branch between them may match where the group does (:func:`_may_share_start`):
    then no branch is moved past one that could have matched first, and the first that matches is the
    same. The branches of a group are joined the same way after their head."""
    groups: list[tuple[str | None, list[str]]] = []
    for branch in branches:
        head = _head(branch)
        if head is not None and depth < 4:
            at = next((j for j in range(len(groups) - 1, -1, -1) if groups[j][0] == head), -1)
            if at >= 0 and not any(_may_share_start(h, head) for h, _m in groups[at + 1:]):
                groups[at][1].append(branch)
                continue
        groups.append((head, [branch]))
    out = []
    for head, members in groups:
        if len(members) == 1 or head is None:
            out.append(members[0])
        else:
            inner = _join_branches([m[len(head):] for m in members], depth + 1)
            out.append(head + (inner if len(_alternatives(inner)) == 1 else "(?:" + inner + ")"))
    return "|".join(out)


_WHOLE_WORD_RE = re.compile(r"\\b([A-Za-z_]\w*)\\b")


def _literal_at(rx: str, i: int, *, controls: bool = False) -> tuple[str, int] | None:
    """The literal character at ``rx[i]`` and the length of its spelling, when it is one and is not
    quantified; ``controls``: ``\\n`` and ``\\t`` count as theirs."""
    c = rx[i]
    if c == "\\" and i + 1 < len(rx) and not rx[i + 1].isalnum():
        char, step = rx[i + 1], 2
    elif controls and c == "\\" and rx[i + 1: i + 2] in ("n", "t"):
        char, step = "\n" if rx[i + 1] == "n" else "\t", 2
    elif c not in ".^$*+?{}[]()|\\":
        char, step = c, 1
    else:
        return None
    if rx[i + step: i + step + 1] in ("*", "+", "?", "{"):
        return None
    return char, step


def _literal_prefix(rx: str) -> str:
    """The characters every match of the regex ``rx`` starts with (its leading unquantified literals)."""
    out = []
    i = 0
    while i < len(rx) and (lit := _literal_at(rx, i)) is not None:
        out.append(lit[0])
        i += lit[1]
    return "".join(out)


# A scan that starts with a literal is only run on a text that holds it: ``str.find`` looks for it several
# times faster than the engine's own literal search, so a text without it (most texts, for most scans)
# costs that search only, and one with it is scanned from its first occurrence (a lookbehind or ``\b`` still
# sees the characters before: the engine checks them against the whole string). A needle shorter than this
# is too common to rule a text out.
_MIN_NEEDLE = 12
_ZERO_WIDTH = ("(?<!", "(?<=", "(?=", "(?!")


def _group_end(rx: str, i: int) -> int:
    """The index after the group that opens at ``rx[i]`` (escapes and classes skipped); -1 when unclosed."""
    return next((j + 1 for j, c, depth in _outside(rx, i) if c == ")" and depth == 0), -1)


def _needle(alt: str) -> str:
    """The characters every match of the regex branch ``alt`` starts with: its leading unquantified literals,
    read through zero-width assertions (lookarounds, ``\b``), which do not move the match along."""
    out = []
    i = 0
    while i < len(alt):
        if alt.startswith(_ZERO_WIDTH, i):
            j = _group_end(alt, i)
            if j < 0 or alt[j: j + 1] in ("*", "+", "?", "{"):
                break
            i = j
            continue
        if alt.startswith("\\b", i):
            i += 2
            continue
        lit = _literal_at(alt, i, controls=True)
        if lit is None:
            break
        out.append(lit[0])
        i += lit[1]
    return "".join(out)


def _common_needle(alts: Iterable[str]) -> str:
    needles = [_needle(a) for a in alts]
    out = needles[0] if needles else ""
    for nd in needles[1:]:
        k = 0
        while k < min(len(out), len(nd)) and out[k] == nd[k]:
            k += 1
        out = out[:k]
    return out


def _class_within_line(cls: str) -> bool:
    """Whether the class ``cls`` (``[...]``) cannot match a newline, judged on its spelling (conservatively)."""
    body = cls[1:-1]
    negated = body.startswith("^")
    body = body[1:] if negated else body
    newline = unsure = False
    j = 0
    while j < len(body):
        if body[j] == "\\":
            esc = body[j + 1: j + 2]
            if esc in ("n", "s"):
                newline = True
            elif esc.isalnum() and esc not in "dwSt":  # \W, \D, \x0a, \u000a...
                unsure = True
            j += 2
            continue
        newline |= body[j] == "\n"
        # a range from below "\n", or from an escape, may hold it
        unsure |= body[j] == "-" and 0 < j < len(body) - 1 and (body[j - 1] <= "\n" or body[j - 2: j - 1] == "\\")
        j += 1
    return newline if negated else not (newline or unsure)


def _within_line(alt: str) -> bool:
    """True when no match of the regex ``alt`` can hold a newline, judged on its spelling (conservatively: an
    escape or class that may match one, an inline flag or a back reference gives False). What lookarounds
    read is not part of the match, and is not judged."""
    i = 0
    while i < len(alt):
        if alt.startswith(_ZERO_WIDTH, i):
            j = _group_end(alt, i)
            if j < 0:
                return False
            i = j
            continue
        c = alt[i]
        if c == "\\":
            esc = alt[i + 1: i + 2]
            if not esc or (esc.isalnum() and esc not in "dwSbBAZt"):  # \n, \s, \W, \D, \x.., \1...
                return False
            i += 2
            continue
        if c == "[":
            n = _first_atom(alt[i:])
            if n == 0 or not _class_within_line(alt[i: i + n]):
                return False
            i += n
            continue
        if c == "\n" or (c == "(" and alt.startswith("(?", i) and not alt.startswith(("(?:", "(?>", "(?P<"), i)):
            return False
        i += 1
    return True


# A scan not at a line start that finds a long list of lines one after another (a type checker's errors, a
# linter's concise lines) gives a match per line, and each match costs far more in Python (a match object,
# its line counted, its tier marked) than the engine's walk of the line. Its run form takes such a list as
# one match: after a match of a branch whose tier info covers every other info of the scan (:func:`_covers`),
# while the next line's first match (every match starts with one character, the first of the scan's literal
# prefix) is of a branch of that info and of no other, it runs on to the end of that line; it ends in an
# empty group of its own (``r<k>``) that names the run. No match of the scan holds a newline
# (:func:`_within_line`), so the plain scan finds on each line of a run a match of that info, and whatever
# else it finds there changes nothing (that info covers it). A lone match takes the rest of its line too (what
# the plain scan finds there is covered the same way; a match that ended where it did would have each later
# match on a long line walk the line again); its group is the plain match's. A line is walked with ``[^\n]``,
# the engine's fastest walk (a class of two characters is tested per character, several times slower), and
# tested only at its first start character (a colon: only the scans that start with one have a run form, see
# _run_form).
def _covers(a: tuple[int, int, bool], b: tuple[int, int, bool]) -> bool:
    """Whether a line marked with the tier info ``a`` (tier, follow, as context; see :func:`_mark`) gets
    everything that marking it with ``b`` too would give: a tier as good, the lines that follow it in a tier
    as good, and (a log's error line, tier 1) the line before it."""
    (ta, fa, ca), (tb, fb, cb) = a, b
    follows = fb == 0 or (fb <= fa and (2 if ca else ta) <= (2 if cb else tb))
    return ta <= tb and follows and (tb != 1 or ta == 1)


def _run_form(members: list[tuple[str, tuple[int, int, bool], str | None]],
              first_run: int) -> tuple[str, dict[str, tuple[int, int, bool]]] | None:
    """The run form of a scan of the branches ``members`` (regex, tier info, its group name or None), in
    their order, with the run groups named from ``r<first_run>`` on, and those names' infos; None when no
    branch's info covers the others, a branch's match may hold a newline, or the branches do not all start
    with a colon (a file:line form, a ``word: `` phrase: in a list of such lines the first colon of each line
    is usually where its match starts; where it is not, as for a unittest line's ``... FAIL``, a run never
    forms and each lone match would pay for trying one)."""
    if not all(_literal_prefix(alt).startswith(":") and _within_line(alt) for alt, _info, _name in members):
        return None
    runs: dict[str, tuple[int, int, bool]] = {}
    branches = []
    for k, (alt, info, name) in enumerate(members, first_run):
        branch = alt + (f"(?P<{name}>)" if name else "")
        if all(_covers(info, inf) for _a, inf, _n in members):
            same = "(?:" + _join_branches([a for a, inf, _n in members if inf == info]) + ")"
            # at the next line's first start character, a branch of this info is the first that matches: no
            # branch of another info that comes before one of this info matches there
            last = max(j for j, (_a, inf, _n) in enumerate(members) if inf == info)
            before = [a for a, inf, _n in members[:last] if inf != info]
            unlike = f"(?!{_join_branches(before)})" if before else ""
            branch += f"[^\\n]*+(?:(?:\\n[^\\n:]*+{unlike}{same}[^\\n]*+)++(?P<r{k}>))?+"
            runs[f"r{k}"] = info
        branches.append(branch)
    return (_join_branches(branches), runs) if runs else None


def _compile(spec: list[tuple[str, str]]) -> list[_Scan]:
    """The scans of a spec: ``(tag, pattern)`` pairs, the tag ``t<tier>[n|c<k>]`` (see above) or ``count``
    (whole words found and counted, that mark no line). Four shapes (see the comment above): the line-start
    alternatives joined in one scan (first); in a spec that counts words, its whole words ``\\bWORD\\b``
    in one scan whose groups name the word (its plain form), counted by a few passes rooted at a character
    each (:func:`_word_passes`; counting each word would take a pass); the other alternatives that start with the same literal joined in one scan (the engine
    finds that literal once and tries each at it; they must not match inside each other's matches);
    every other alternative a scan of its own (a literal is found faster alone than in an alternation).
    A leading ``\\bword`` is checked by a lookbehind after the word, so the literal search still applies."""
    anchored: list[tuple[int, str, tuple[int, int, bool]]] = []
    words: dict[str, tuple[int, int, bool] | None] = {}
    loose: dict[str, list[tuple[str, tuple[int, int, bool]]]] = {}  # by literal prefix
    out: list[_Scan] = []
    counting = any(tag == "count" for tag, _pat in spec)
    for order, (tag, pat) in enumerate(spec):
        m = re.fullmatch(r"t(\d)(?:([nc])(\d))?|count", tag)
        assert m is not None, tag
        info = None if tag == "count" else (int(m.group(1)), int(m.group(3) or 0), m.group(2) == "c")
        for alt in _alternatives(pat):
            if _JOIN_ANCHORED and alt.startswith("\\n") and info is not None:
                anchored.append((info[0] * 1000 + order, alt[2:], info))
                continue
            whole = _WHOLE_WORD_RE.fullmatch(alt) if counting else None
            if whole is not None:
                words.setdefault(whole.group(1), info)  # the first mention of a word gives its tier
                continue
            assert info is not None, f"a count pattern must be whole words: {alt}"
            lead = _LEADING_WORD_RE.match(alt)
            assert lead is not None or not alt.startswith("\\b"), f"a leading \\b must be followed by a word: {alt}"
            if lead is not None:  # \bword...: the word, then "not preceded by a word character"
                word = lead.group(1)
                alt = word + f"(?<!\\w{word})" + alt[lead.end():]
            loose.setdefault(_literal_prefix(alt), []).append((alt, info))
    if anchored:
        anchored.sort(key=lambda a: a[0])  # most important tier first: one branch wins per line
        branches = [(b, info) for _o, alt, info in anchored for b in _fast_starts(alt)]
        names = {f"g{i}": info for i, (_b, info) in enumerate(branches)}
        rx = re.compile("\\n(?:" + _join_branches([f"{b}(?P<g{i}>)" for i, (b, _inf) in enumerate(branches)]) + ")")
        assert rx.groups == len(branches), "anchored patterns must use only non-capturing groups"
        out.insert(0, msgspec.structs.replace(_scan(rx, names), rows_from=0))
    n = 0
    for prefix, alts in loose.items():
        if len(alts) == 1 or not prefix:
            out += [_scan(re.compile(alt), {None: info}, needle=_needle(alt), runs=_run_form([(alt, info, None)], n))
                    for alt, info in alts]
            n += len(alts)
            continue
        names: dict[str | None, tuple[int, int, bool] | None] = {}
        branches = []
        for alt, info in alts:
            names[f"u{n}"] = info
            n += 1
            branches.append(f"{alt}(?P<u{n - 1}>)")
        out.append(_scan(re.compile(_join_branches(branches)), names, needle=_common_needle(alt for alt, _i in alts),
                         runs=_run_form([(alt, info, f"u{k}") for k, (alt, info) in enumerate(alts, n - len(alts))],
                                        n - len(alts))))
    if words:
        # one word matches at a position (the \b after it), so their order does not matter
        rx = re.compile("(?:" + _join_branches([f"{w}(?<!\\w{w})\\b(?P<{w}>)" for w in words]) + ")")
        each = tuple((w, inf, wrx, _ascii_twin(wrx))
                     for w, inf in words.items() for wrx in [re.compile(f"{w}(?<!\\w{w})\\b")])
        passes, match_text = _word_passes(list(words))
        out.append(msgspec.structs.replace(_scan(rx, dict(words)), words=each, match_text=match_text,
                                           count_passes=tuple((p, _ascii_twin(p)) for p in passes)))
    return out


def _finditer(scan: _Scan, nb: str) -> Iterator[tuple[re.Match[str], tuple[int, int, bool]]]:
    info = scan.info
    single = info.get(None)
    for m in scan.rx.finditer(nb):
        yield m, single if single is not None else info[m.lastgroup]


_MATCH_BATCH = 256  # matches alive at once: a long error list never holds thousands (they would set off the GC)


def _where(scan: _Scan, nb: str, with_groups: bool) -> tuple[list[int], list[str | None], list[int]]:
    """The start offsets of ``scan``'s matches in ``nb`` (of its run form, when it has one) and, ``with_groups``
    (always, for a run form), the group each ended in, and the end offsets of the runs (:func:`_run_form`)."""
    offsets: list[int] = []
    groups: list[str | None] = []
    run_ends: list[int] = []
    start = nb.find(scan.needle) if scan.needle else 0
    if start < 0:
        return offsets, groups, run_ends
    runs = scan.run_names
    found = (_pick(scan.run_rx, scan.run_arx, nb) if runs else _pick(scan.rx, scan.arx, nb)).finditer(nb, start)
    while batch := list(islice(found, _MATCH_BATCH)):
        offsets += map(_MATCH_START, batch)
        if runs:
            names = list(map(_LASTGROUP, batch))
            groups += names
            if not runs.isdisjoint(names):
                run_ends += map(_MATCH_END, compress(batch, map(runs.__contains__, names)))
        elif with_groups:
            groups += map(_LASTGROUP, batch)
    return offsets, groups, run_ends


def _word_passes(words: list[str]) -> tuple[list[re.Pattern[str]], dict[str, tuple[int, str]]]:
    """Passes that find every whole word of ``words`` (``\\bWORD\\b``; names of ``[A-Za-z_]\\w*``) once, and for
    each word the pass that finds it and the text of its matches. A pass is rooted at one character: the engine
    looks for it with its fast literal search (one regex of all the words tests every position of the text
    against the set of their first letters, several times slower), and matches each of its words from one
    place of that character in it, what comes before checked behind (``DEBUG`` rooted at ``E``: ``E`` then
    ``BUG(?<=DEBUG)(?<!\\wDEBUG)\\b``). A match's text is its word from that place on, which tells the words of
    a pass apart. The roots are few: each the character that most words not yet rooted hold; a word is
    rooted at the first root it holds, where something of it follows, in a pass where no other word has that
    text (else at its first character, in a pass of its own)."""
    roots: list[str] = []
    left = list(words)
    while left:
        root = max(sorted(set("".join(left))), key=lambda c: sum(c in w for w in left))
        roots.append(root)
        left = [w for w in left if root not in w]
    passes: list[tuple[str, list[str], set[str]]] = [(root, [], set()) for root in roots]  # root, branches, texts
    where: dict[str, tuple[int, str]] = {}
    for w in words:
        places = sorted((k == len(w) - 1, i, k) for k, c in enumerate(w) for i, (root, _b, _t) in enumerate(passes)
                        if c == root)
        i, k = next(((i, k) for _last, i, k in places if w[k:] not in passes[i][2]), (len(passes), 0))
        if i == len(passes):
            passes.append((w[0], [], set()))
        where[w] = (i, w[k:])
        passes[i][2].add(w[k:])
        behind = f"(?<={w})(?<!\\w{w})" if k else f"(?<!\\w{w})"
        passes[i][1].append(f"{w[k + 1:]}{behind}\\b")
    used = [i for i, (_root, alts, _t) in enumerate(passes) if alts]  # a root may have lost its words to others
    return ([re.compile(passes[i][0] + "(?:" + _join_branches(passes[i][1]) + ")") for i in used],
            {w: (used.index(i), text) for w, (i, text) in where.items()})


def _count_words(scan: _Scan, nb: str, words: Counter[str], found: tuple[set[int], ...], is_log: bool) -> None:
    """Count the whole-word matches of ``scan``'s words in ``nb`` and place the lines of those that have a
    tier. A few passes rooted at a character each (:func:`_word_passes`) give each match as its text, counted
    in C: no match object and no Python step per match (a log has a level word on every line). Only the words with a tier that
    were found are looked for again, each alone, for their offsets."""
    ascii_only = nb.isascii()
    # each pass's matches between line ends (no match holds one), each pair apart: a word's count is that of
    # its text between line ends, one count in C per word where a Counter took a step per match
    found_in = []
    for rx, arx in scan.count_passes:
        texts = (arx if ascii_only else rx).findall(nb)
        found_in.append("\n%s\n" % "\n\n".join(texts) if texts else "")
    for word, info, urx, arx in scan.words:
        at, text = scan.match_text[word]
        if not (found_n := found_in[at].count(f"\n{text}\n")):
            continue
        words[word] += found_n
        if info is None:
            continue
        offsets: list[int] = []
        matches = (arx if ascii_only else urx).finditer(nb)
        while batch := list(islice(matches, _MATCH_BATCH)):
            offsets += map(_MATCH_START, batch)
        _mark(found, _rows(nb, offsets, 1), info, is_log)


def _found(scans: list[_Scan], text: str) -> bool:
    for sc in scans:
        start = text.find(sc.needle) if sc.needle else 0
        if start >= 0 and _pick(sc.rx, sc.arx, text).search(text, start) is not None:
            return True
    return False



# The kinds recognised from the text by their marks, most important first (their index is their rank).
_TEXT_KIND_SPECS = (_TEXT_TEST, _TEXT_INSTALL, _TEXT_BUILD)
_K_TEST, _K_INSTALL, _K_BUILD, _K_NONE = range(4)
_TEXT_KINDS_ALL = frozenset((_K_TEST, _K_INSTALL, _K_BUILD))
_TEXT_KINDS_TEST, _TEXT_KINDS_NOT_TEST = frozenset((_K_TEST,)), frozenset((_K_INSTALL, _K_BUILD))


def _rooted_at(alt: str, char: str) -> str:
    """The regex branch ``alt``, whose literal start holds ``char``, rewritten to start at that ``char``
    with what comes before it checked behind: it matches where ``alt`` does, that many characters on
    (``\\.py:\\d`` -> ``:(?<=\\.py:)\\d``), so branches rooted at one literal can share its search."""
    i = 0
    while (lit := _literal_at(alt, i)) is not None and lit[0] != char:
        i += lit[1]
    assert lit is not None, f"{char!r} is not in the literal start of {alt}"
    j = i + lit[1]
    return alt if i == 0 else alt[i:j] + f"(?<={alt[:j]})" + alt[j:]


# The marks not at a line start, per kind: test's by their needle; build's rooted at their first ":" and
# joined in one scan (one search of ":" for all of them, where each had a search of its own)
_TEXT_LOOSE: tuple[list[_Scan], ...] = tuple(
    _compile([(tag, loose) for tag, pat in spec
              if (loose := "|".join(_rooted_at(alt, ":") if k == _K_BUILD else alt
                                    for alt in _alternatives(pat) if not alt.startswith("\\n")))])
    for k, spec in enumerate(_TEXT_KIND_SPECS))
# Every match of build's loose marks holds the ": " of its ``: error``/``: warning`` on its own line: that
# ": " with what follows it and the character before it (a digit, or ")" for tsc) is searched first, and the
# marks only from the line of its first match on (no match is on a line before it). Most texts have no such
# ": ", and many more ":" that each root mark would be tried at. Each branch starts with a literal and checks
# behind after it, so the engine rejects most ": " on the character after them.
_BUILD_LOOSE_GATE_RE = re.compile(r": (?:error(?::(?<=\d: error:)| TS\d(?<=\): error TS\d))|warning:(?<=\d: warning:)"
                                  r"|fatal (?:error:(?<=\d: fatal error:)|warning:(?<=\d: fatal warning:)))")
_CLOCK_ARE, _LEVEL_ARE, _MATCH_LINE_ARE, _BUILD_LOOSE_GATE_ARE = map(
    _ascii_twin, (_CLOCK_RE, _LEVEL_RE, _MATCH_LINE_RE, _BUILD_LOOSE_GATE_RE))


def _reaches(rx: re.Pattern[str], sample: str, need: int) -> bool:
    """Whether ``rx``, whose matches never hold a line end and look behind only within their line, has ``need``
    matches in ``sample``: counted in its first half (up to a line end) first, and in the rest only when those
    are not enough (a log's stamps are on every line: its first half decides)."""
    cut = sample.find("\n", len(sample) // 2) + 1  # just after a line end: no match spans it
    if cut <= 0:
        return len(rx.findall(sample)) >= need
    first = len(rx.findall(sample, 0, cut))
    return first >= need or first + len(rx.findall(sample, cut)) >= need


def _build_loose_marked(part: str) -> bool:
    """Whether a build mark that is not at a line start is in ``part`` (see above)."""
    gate = _pick(_BUILD_LOOSE_GATE_RE, _BUILD_LOOSE_GATE_ARE, part).search(part)
    if gate is None:
        return False
    (scan,) = _TEXT_LOOSE[_K_BUILD]
    return _pick(scan.rx, scan.arx, part).search(part, part.rfind("\n", 0, gate.start()) + 1) is not None


@functools.lru_cache(maxsize=8)
def _text_line_marks(kinds: frozenset[int]) -> _Scan | None:
    """The line-start marks of ``kinds`` joined in one scan whose branches name their kind (``t<rank>``),
    the most important kind's first."""
    spec = [(f"t{k}", "|".join(alt for tag, pat in _TEXT_KIND_SPECS[k] for alt in _alternatives(pat)
                               if alt.startswith("\\n")))
            for k in sorted(kinds)]
    scans = _compile([(tag, pat) for tag, pat in spec if pat])
    return scans[0] if scans else None


def _first_kind_marked(part: str, kinds: frozenset[int]) -> int:
    """The most important of ``kinds`` (lowest rank) with a line-start mark in ``part`` (:data:`_K_NONE` when
    none): ONE pass of all their marks; a match names a kind (the most important one marked there), and the
    pass goes on from it with the more important kinds only (none has a mark before it)."""
    first = _K_NONE
    pos = 0
    while kinds and (scan := _text_line_marks(kinds)) is not None and (
            m := _pick(scan.rx, scan.arx, part).search(part, pos)) is not None:
        first = scan.info[m.lastgroup][0]  # type: ignore[index]  # the tier is the kind's rank
        kinds = frozenset(k for k in kinds if k < first)
        pos = m.start()
    return first

_RUNNER_SCANS = {name: (_compile([("t0", marks)]), _compile(_test_spec([name]))) for name, (marks, _spec) in _RUNNERS.items()}


RUNNER_MARKS_SCAN = 16 * 1024  # a runner is recognised by its marks in this many first or last characters
_RUNNER_NAMES = tuple(_RUNNERS)
# each runner's marks that are not at a line start (one scan each, with its needle)
_RUNNER_LOOSE_MARKS = tuple([sc for sc in _RUNNER_SCANS[name][0] if not sc.rx.pattern.startswith("\\n")]
                            for name in _RUNNER_NAMES)


@functools.lru_cache(maxsize=32)
def _line_start_marks(runners: frozenset[int]) -> _Scan | None:
    """The line-start marks of ``runners`` joined in one scan whose branches name their runner (``t<index>``)."""
    spec = [(f"t{i}", "|".join(alt for alt in _alternatives(_RUNNERS[_RUNNER_NAMES[i]][0]) if alt.startswith("\\n")))
            for i in sorted(runners)]
    scans = _compile([(tag, pat) for tag, pat in spec if pat])
    return scans[0] if scans else None


def _runners_marked(part: str, runners: frozenset[int]) -> set[int]:
    """Which of ``runners`` have a mark in ``part``: their marks that need no line start first (each found by its
    needle), then the line-start marks of the others in ONE pass: each match names a runner, which is then
    left out and the pass goes on from that match (no runner has a mark before it)."""
    seen = {i for i in runners if _found(_RUNNER_LOOSE_MARKS[i], part)}
    left = runners - seen
    pos = 0
    while left and (scan := _line_start_marks(left)) is not None and (
            m := _pick(scan.rx, scan.arx, part).search(part, pos)) is not None:
        i = scan.info[m.lastgroup][0]  # type: ignore[index]  # the tier names the runner
        seen.add(i)
        left = left - {i}
        pos = m.start()
    return seen


def _test_runners(nb: str) -> tuple[str, ...]:
    """The runners whose marks are in ``nb``'s first or last :data:`RUNNER_MARKS_SCAN` characters: a
    runner's banner or first results are at the start of its output, its summary at the end."""
    ends = (nb,) if len(nb) <= 2 * RUNNER_MARKS_SCAN else (nb[:RUNNER_MARKS_SCAN], nb[-RUNNER_MARKS_SCAN:])
    seen: set[int] = set()
    for part in ends:
        seen |= _runners_marked(part, frozenset(range(len(_RUNNER_NAMES))) - seen)
    return tuple(_RUNNER_NAMES[i] for i in sorted(seen))


def _test_scans(found: tuple[str, ...]) -> list[_Scan]:
    """The scans of the runners ``found`` (:func:`_test_runners`), all of them when none is."""
    if len(found) == 1:
        return _RUNNER_SCANS[found[0]][1]
    if not found:
        return _PATTERNS["test"]
    return _runner_mix(found)


@functools.lru_cache(maxsize=32)
def _runner_mix(names: tuple[str, ...]) -> list[_Scan]:
    return _compile(_test_spec(names))


_PATTERNS = {
    "test": _compile(_TEST),
    "build": _compile(_BUILD),
    "install": _compile(_INSTALL),
    "search": _compile(_SEARCH),
    "diff": _compile(_DIFF),
    "log": _compile(_LOG),
    "other": _compile(_OTHER),
}

# Warnings, in one pass found by the word: a line that starts with ``warning[...]: `` (plain), tsc's
# ``warning TS<n>`` (plain), and ``: warning: `` (``at``), where the file:line ones are (counted by their flag
# with _WARN_AT_RE, from the first of them on: most build outputs have none, and need no other pass).
# Each form is told by the one character after what its branch takes (checked ahead there), the one group:
# findall gives each match as ":" (plain), "T" (tsc) or " " (at), counted in C (a one-character string is not a
# new object). The same matches as ``warning(?:(?<=\nwarning)(?:\[\w+\])?(:) | (T)S\d+|(?<=: warning)(:) )``.
_WARN_WORD_RE = re.compile(r"warning(?:(?<=\nwarning)(?:\[\w+\])?(?=: )|(?= TS\d) |(?<=: warning):(?= ))(.)")
_WARN_WORD_ARE = _ascii_twin(_WARN_WORD_RE)
_WARN_PLAIN, _WARN_TS, _WARN_AT = ":", "T", " "
# ``file:line[:col]: warning: `` and its flag (group 1, "" when none): the last `` [-W...`` of the line when the
# line ends with "]", read in a lookahead (a second warning on the same line is still found). The line's end is
# judged first, in one possessive walk of at most _WARN_REST characters: a line that does not end with "]"
# (or runs on past them: its warnings are counted without a flag) is not stepped back through, and a long line
# of many warnings is not read to its end once per warning.
_WARN_REST = 2048
_WARN_AT_RE = re.compile(r":\d++(?::\d++)?+: warning: "
                         r"(?=(?:(?=[^\n]{0,%d}+(?<=\])(?![^\n]))[^\n]* (\[-W[^\n]*+))?)" % (_WARN_REST - 1))
_WARN_AT_ARE = _ascii_twin(_WARN_AT_RE)
# what a ``file:line`` match and a ``file:`` one hold at their line's first colon (see _files_by_first_colon)
_GREP_NUM_RE = re.compile(r":\d++[:-]")
_GREP_NOLINE_MARK_RE = re.compile(r":(?!\d)")
# ``[^:\n]*+`` is possessive: the ":" after it cannot be inside it, so giving characters back never helps
_GREP_FILE_RE = re.compile(r"\n([^\s:][^:\n]*+):\d+[:-]")
_GREP_FILE_NOLINE_RE = re.compile(r"\n([^\s:][^:\n]*+):(?!\d)")
# a path line: its directory (group 1) up to the slash before its last name, which may end with one "/"; that
# slash is the one found first stepping back from the line's end (a fast step back to each "/") that a name
# follows, on a line that ends with a newline and not with "//" (where no slash works). The slash found is
# kept (an atomic group): the line's end is the same for every slash, so a line that fails there is not
# stepped back through slash by slash, each time walking to its end.
# ``\.{0,2}`` before ``/?`` is not written: ``[^\s/]`` takes a leading "." too. Then the name is read as the
# rest of the line (a fast walk).
_PATH_LINE_RE = re.compile(r"\n(?>(/?+[^\s/][^\n]*/)(?=[^\n/]))[^\n]*+(?<!//)(?=\n)")
_COMMIT_RE = re.compile(r"\n(?:commit [0-9a-f]{7,40}\b|[0-9a-f]{7,12} \S)")
# ``Author: <name> <mail>``: the name is its first character and then up to its last non-blank one before "<"
# or the line's end (what a lazy ``[^\n<]+?\s*<`` takes), walked once with no step back
_AUTHOR_RE = re.compile(r"\nAuthor: ([^\n<](?:[^\S\n]*+[^\s<]++)*+)\s*+<")
STATUS_LABELS = ("new file", "modified", "deleted", "renamed", "both modified", "typechange")


# git status entries: the lines that start with a tab and then a non-blank character (``\t<label>:`` or an
# untracked path), found a run of them at a time (a git status lists each section's entries one after another:
# a match is a section, not an entry, which cost more than the walk of its line); the group: the run after its
# first tab
_STATUS_ENTRY = r"(?![\t \n\r\x0b\x0c])[^\n]*+"
_STATUS_RUN_RE = re.compile(r"\n\t(" + _STATUS_ENTRY + r"(?:\n\t" + _STATUS_ENTRY + r")*+)")


def _status_entries(nb: str) -> Counter[str]:
    """``git status`` entries by label: the lines that start with a tab and then a non-blank character,
    ``<label>:`` or an untracked path. The runs of them (:data:`_STATUS_RUN_RE`) are joined, each line after a
    "\n\t", and counted in C: all of them by their newlines, each label by its "\n\t<label>:"."""
    runs = _STATUS_RUN_RE.findall(nb)
    items: Counter[str] = Counter()
    if not runs:
        return items
    entries = "\n\t" + "\n\t".join(runs)
    for label in STATUS_LABELS:
        if found := entries.count(f"\n\t{label}:"):
            items[label] = found
    if (other := entries.count("\n") - sum(items.values())) > 0:
        items["untracked/other"] = other
    return items


_DIFF_FILE_RE = re.compile(r"\ndiff --git a/(\S+) b/")
# a diff's added and removed lines in one pass: a line that starts with "+" or "-" gives that sign, one that
# starts with "+++ " or "--- " (a file's header) gives "" (one-character and empty strings are not new objects)
_DIFF_SIGN_RE = re.compile(r"\n(?:\+\+\+ |--- |([-+]))")
# the lines that name a failing test, per runner: the ids counted are those of the runners the output's
# marks name (as the tiers' patterns are), all of them when none is recognised. A cargo ``test <name> ... ok``
# line is left by a look for "FAILED" in the line (a fast walk to its end and a fast step back to each "F"),
# before the name is walked
_FAIL_FORMS = {
    "pytest": [r"FAILED (?!\()(\S+)"],
    "unittest": [r"FAIL: (\S+)", r"ERROR: (\S+)"],
    "cargo": [r"test (?=[^\n]*FAILED)(\S++) \.\.\. FAILED"],
    "go": [r"[ \t]*+--- FAIL: (\S+)"],
    "js": [r"not ok \d+ - ([^\n]+)", r"[ \t]*+● ([^\n]+)"],
}
assert sorted(_FAIL_FORMS) == sorted(_RUNNERS)


_INDENTED_FORM = "[ \\t]*+"  # a form that may be indented: found by what follows, its line's start checked


def _after_indent(form: str) -> re.Pattern[str]:
    """``form`` (it starts with a literal of plain characters) where a newline, a space or a tab comes before it,
    checked behind that literal (a leading lookbehind would keep the engine from searching for the literal)."""
    lit = _literal_prefix(form)
    assert lit and form.startswith(lit), form
    return re.compile(lit + f"(?<=[\\n \\t]{re.escape(lit)})" + form[len(lit):])


@functools.lru_cache(maxsize=32)
def _fail_names_scans(names: tuple[str, ...]) -> tuple[re.Pattern[str] | None, tuple[re.Pattern[str], ...]]:
    """The failing-test lines of the runners ``names`` (all of them when empty): one regex of the forms at a
    line start, one group per form, one of which holds the id (findall gives "" for the others); and each form
    that may be indented, found by what follows its indent (a rare literal such as "● ": a line-start regex
    whose lines may start with white space is entered on every line), after a newline, space or tab
    (:func:`_after_indent`; :func:`_fail_names` checks the rest of its line's start)."""
    forms = [form for name in _RUNNER_NAMES if not names or name in names for form in _FAIL_FORMS[name]]
    indented = tuple(_after_indent(f[len(_INDENTED_FORM):]) for f in forms if f.startswith(_INDENTED_FORM))
    forms = [f for f in forms if not f.startswith(_INDENTED_FORM)]
    if not forms:
        return None, indented
    # one form: no group around it, so that the engine searches for its literal start
    return re.compile("\\n" + forms[0] if len(forms) == 1 else "\\n(?:" + "|".join(forms) + ")"), indented


def _fail_names(nb: str, names: tuple[str, ...]) -> set[str]:
    """The ids of the failing tests named in ``nb`` by the forms of the runners ``names`` (all when empty): the
    lines of :data:`_FAIL_FORMS`'s forms of those runners."""
    rx, indented = _fail_names_scans(names)
    found: set[str] = set()
    if rx is not None:
        ids = rx.findall(nb)
        found.update(ids if rx.groups == 1 else map("".join, ids))  # one group: findall gives the ids
    for irx in indented:
        for m in irx.finditer(nb):
            at = m.start()
            if not nb[nb.rfind("\n", 0, at) + 1: at].strip(" \t"):  # only an indent before it on its line
                found.add(m.group(1))
    return found


# ---------------------------------------------------------------- helpers

_WORDY_RE = re.compile(r"\w")


def _files_by_first_colon(nb: str, mark: re.Pattern[str], rx: re.Pattern[str]) -> Counter[str]:
    """``rx``'s matches (``\n<file>:...``, the file up to the line's first colon) by file when there are at
    least three (else none). Each match holds ``mark`` at its line's first colon, on a line of its own: with
    fewer than three of them (found by the engine's literal search for ":") no line is walked, and the
    pass starts on the line of the first one."""
    m = mark.search(nb)
    if m is None or (m2 := mark.search(nb, m.end())) is None or mark.search(nb, m2.end()) is None:
        return Counter()
    files = Counter(rx.findall(nb, max(0, nb.rfind("\n", 0, m.start()))))
    return files if sum(files.values()) >= 3 else Counter()


def _path_dirs(nb: str) -> Counter[str]:
    """Path lines by directory, when there are at least three (else none). Each holds a "/" on a line of its
    own: with fewer than three "/" (a one-character find) no line is walked, and the pass starts on the
    line of the first one."""
    first = nb.find("/")
    if first < 0 or (second := nb.find("/", first + 1)) < 0 or nb.find("/", second + 1) < 0:
        return Counter()
    dirs = Counter(_PATH_LINE_RE.findall(nb, max(0, nb.rfind("\n", 0, first))))
    return dirs if sum(dirs.values()) >= 3 else Counter()


def _grep_files(nb: str) -> Counter[str]:
    """``file:line`` matches by file, when there are at least three."""
    return _files_by_first_colon(nb, _GREP_NUM_RE, _GREP_FILE_RE)


def _grep_files_noline(nb: str) -> Counter[str]:
    """``file:`` matches (no line number) by file, when there are at least three."""
    return _files_by_first_colon(nb, _GREP_NOLINE_MARK_RE, _GREP_FILE_NOLINE_RE)


def _fmt(n: int) -> str:
    return f"{n:,}"


def _top(counter: Counter[str], n: int) -> str:
    items = sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = ", ".join(f"{k} {v}" for k, v in items[:n])
    return shown + (f", … {len(items) - n} more" if len(items) > n else "")


def _facts(kind: str, nb: str, words: Counter[str], runners: tuple[str, ...] = ()) -> list[str]:
    """Counts that say what the whole output held (a few short phrases); ``words``: the whole words the
    kind's scans counted (a log's levels); ``runners``: a test run's runners found (:func:`_test_runners`)."""
    out: list[str] = []
    if kind == "test":
        # a set, not a list (no n² membership tests on a long run)
        fails = _fail_names(nb, runners)
        if fails:
            out.append(f"{len(fails)} failing test{'s' if len(fails) != 1 else ''} named")
    elif kind == "build":
        forms = Counter(_pick(_WARN_WORD_RE, _WARN_WORD_ARE, nb).findall(nb))
        warns: Counter[str] = Counter()
        if forms[_WARN_AT]:  # file:line: warning: ...: gcc/clang name the flag at the end ("" for one without)
            warns.update(_pick(_WARN_AT_RE, _WARN_AT_ARE, nb).findall(nb, nb.rfind("\n", 0, nb.find(": warning: "))))
        if plain := warns.pop("", 0) + forms[_WARN_PLAIN] + forms[_WARN_TS]:
            warns["warning"] += plain
        if warns:
            out.append(f"warnings: {sum(warns.values())} ({_top(warns, 6)})")
    elif kind == "install":
        sat = nb.count("\nRequirement already satisfied: ")
        col = nb.count("\nCollecting ")
        if col or sat:
            out.append(f"collected {col}, already satisfied {sat}")
    elif kind == "log":
        levels = Counter({lv: words[lv] for lv in LOG_LEVELS if words[lv]})
        if levels:
            out.append("levels: " + _top(levels, 8))
    elif kind == "diff":
        heads = [(m.start(), m.group(1)) for m in _DIFF_FILE_RE.finditer(nb)]
        if heads:
            # each file's lines from its "diff --git" to the next one's; only the first 12 are named, the rest
            # are counted in one go
            stat: list[str] = []
            adds = dels = 0
            ends = [a for a, _name in heads[1:13]] + [len(nb)]
            for (a, name), b in zip(heads[:12], ends):
                signs = _DIFF_SIGN_RE.findall(nb, a, b)
                plus, minus = signs.count("+"), signs.count("-")
                adds += plus
                dels += minus
                stat.append(f"{name} +{plus} -{minus}")
            if len(heads) > 12:
                signs = _DIFF_SIGN_RE.findall(nb, heads[12][0])
                adds += signs.count("+")
                dels += signs.count("-")
            more = f", … {len(heads) - 12} more" if len(heads) > 12 else ""
            out.append(f"{len(heads)} files, +{adds} -{dels} lines: " + ", ".join(stat) + more)
    elif kind == "search":
        # a log starts with its first commit: a search that does not is not read for commits
        commits = len(_COMMIT_RE.findall(nb)) if _COMMIT_RE.search(nb, 0, 4096) else 0
        if commits >= 2:
            authors = Counter(_AUTHOR_RE.findall(nb))
            out.append(f"{commits} commits" + (f"; authors: {_top(authors, 4)}" if authors else ""))
            return out
        files = _grep_files(nb)
        if files:
            out.append(f"{sum(files.values())} matches in {len(files)} files; most: {_top(files, 6)}")
            return out
        items = _status_entries(nb) if "\t" in nb else Counter()  # one character: a fast test
        if items:
            out.append("status entries: " + _top(items, 6))
            return out
        dirs = _path_dirs(nb)
        if dirs:
            out.append(f"{sum(dirs.values())} paths in {len(dirs)} directories; most: {_top(dirs, 6)}")
            return out
        nol = _grep_files_noline(nb)
        if nol and len(nol) * 2 <= sum(nol.values()):
            out.append(f"{sum(nol.values())} matches in {len(nol)} files; most: {_top(nol, 6)}")
    return out


def _cut_line(line: str) -> tuple[str, bool]:
    if len(line) <= MAX_LINE_CHARS:
        return line, False
    return f"{line[:MAX_LINE_CHARS]}… [+{len(line) - MAX_LINE_CHARS} chars]", True


def _scan_window(text: str) -> tuple[str, int, int]:
    """(text scanned, index in it where the tail half starts or -1, lines skipped between the halves)."""
    if len(text) <= MAX_SCAN:
        return text, -1, 0
    half = MAX_SCAN // 2
    h_end = text.rfind("\n", 0, half) + 1 or half
    t_start = text.find("\n", len(text) - half) + 1 or len(text) - half
    skipped = text.count("\n", h_end, t_start)
    return text[:h_end] + text[t_start:], h_end, skipped


_MATCH_START = re.Match.start
_MATCH_END = re.Match.end
_LASTGROUP = attrgetter("lastgroup")


def _rows(nb: str, offsets: list[int], first: int) -> list[int]:
    """The line indexes of ascending ``offsets`` in ``nb`` (``"\n"`` + the text): the newlines from ``first`` up
    to each offset, counted from the previous offset on (the text is read once). ``first``: 0 for offsets of
    the newline before a line (the one at ``nb[0]`` is counted), 1 for offsets in a line (not of a newline)."""
    return list(accumulate(map(nb.count, repeat("\n"), [first, *offsets[:-1]], offsets)))


def _scan_rows(scan: _Scan, nb: str, offsets: list[int]) -> list[int]:
    """The rows of ``scan``'s match starts ``offsets`` (see ``_Scan.rows_from``)."""
    return _rows(nb, offsets if scan.rows_from < 2 else list(map(add, offsets, repeat(1))), scan.rows_from & 1)


def _run_rows(nb: str, offsets: list[int], groups: list[str | None], run_ends: list[int],
              runs: frozenset[str | None]) -> tuple[list[int], list[tuple[str | None, int, int]]]:
    """The rows of the matches at ``offsets`` (not at a line start) and, for each run among them
    (:func:`_run_form`; ``run_ends`` their ends, in order), its group, first row and last row. The text is
    read once: each run's last character is counted as a point of its own, right after the run's start."""
    is_run = list(map(runs.__contains__, groups))
    at = _rows(nb, sorted([*offsets, *map(sub, run_ends, repeat(1))]), 1)
    places = list(map(add, range(len(offsets)), accumulate(is_run)))  # a match's start among the points
    rows = list(map(at.__getitem__, map(sub, places, is_run)))
    lasts = map(at.__getitem__, compress(places, is_run))
    return rows, list(zip(compress(groups, is_run), compress(rows, is_run), lasts))


def _mark(found: tuple[set[int], ...], rows: list[int], info: tuple[int, int, bool], is_log: bool) -> None:
    """Put the matched lines ``rows`` in their tier, and the lines that follow them (or, for a log's error
    lines, the line before) where ``info`` says; indexes past the ends are dropped later."""
    t, follow, as_ctx = info
    found[t].update(rows)
    for j in range(1, follow + 1):
        found[2 if as_ctx else t].update(map(add, rows, repeat(j)))
    if is_log and t == 1:
        found[2].update(map(sub, rows, repeat(1)))


def _mark_runs(found: tuple[set[int], ...], runs: list[tuple[str | None, int, int]], info: tuple[int, int, bool],
               is_log: bool) -> None:
    """As :func:`_mark`, for the lines of each run ``(group, first row, last row)`` after its first (the first
    is marked with the run's start): a range of rows each."""
    t, follow, as_ctx = info
    for _group, a, b in runs:
        found[t].update(range(a + 1, b + 1))
        if follow:
            found[2 if as_ctx else t].update(range(a + 2, b + follow + 1))
        if is_log and t == 1:
            found[2].update(range(a, b))


def _cut_len(n: int) -> int:
    """The length of a line of ``n`` characters once cut by :func:`_cut_line`."""
    return n if n <= MAX_LINE_CHARS else MAX_LINE_CHARS + len(f"… [+{n - MAX_LINE_CHARS} chars]")


def _shown_lens(lines: list[str], rows: list[int], cut: bool) -> list[int]:
    """The lengths of the lines ``rows`` as shown: once cut (:func:`_cut_line`), for ``cut``."""
    lens = list(map(len, map(lines.__getitem__, rows)))
    if cut and lens and max(lens) > MAX_LINE_CHARS:
        return [m if m <= MAX_LINE_CHARS else _cut_len(m) for m in lens]
    return lens


def _costs(lines: list[str], rows: list[int], exact: bool, cut: bool) -> list[int]:
    """What showing each line of ``rows`` costs: its token estimate (once cut, for ``cut``) and its newline.
    For an ASCII line (all of them, ``exact``: an ASCII text) that is ``(len + 7) >> 2`` of the (cut) length
    (a cut line's mark holds no CJK character), computed without a call per line; the others are estimated."""
    costs = list(map(rshift, map(add, _shown_lens(lines, rows, cut), repeat(7)), repeat(2)))
    if not exact:
        shown = list(map(lines.__getitem__, rows))
        for j in compress(range(len(rows)), map(not_, map(str.isascii, shown))):
            costs[j] = _estimated_cost(shown[j], cut)
    return costs


def _estimated_cost(line: str, cut: bool) -> int:
    """What showing ``line`` costs (see :func:`_costs`), estimated: a line that is not ASCII."""
    return estimate_tokens(_cut_line(line)[0] if cut else line) + 1


# rows costed at once while looking for the longest prefix that fits: one per 16 tokens of room, at least 32
# (then twice as many each time)
_FIT_CHUNK = 32


def _fit(lines: list[str], rows: list[int], room: int, exact: bool, *, cut: bool) -> tuple[list[int], int, int]:
    """Take the lines ``rows`` in order while they fit in ``room``, skipping one that does not and trying the
    next: (rows taken, cost of them, rows skipped); costs as :func:`_costs`.

    The longest prefix that fits is found a chunk at a time (a long list of error lines rarely fits whole:
    the lines after it are not costed). Room only shrinks, so after the prefix a line can be taken only if
    it fits in what is left now: every estimate is at least ``(len + 7) >> 2`` of the (cut) length
    (:func:`~ctxlifed.core.model.tokens_of` counts a CJK character as a whole token), so the lines
    longer than what is left are passed over by their length, and only the others are costed."""
    if room < 2 or not rows:  # a shown line costs at least 2 (a token and its newline)
        return [], 0, len(rows)
    left = room
    k = 0
    step = max(_FIT_CHUNK, room >> 4)
    while k < len(rows):
        cum = list(accumulate(_costs(lines, rows[k: k + step], exact, cut)))
        j = bisect_right(cum, left)
        left -= cum[j - 1] if j else 0
        k += j
        if j < len(cum):
            break
        step *= 2
    taken = rows[:k]
    if k == len(rows) or left < 2:
        return taken, room - left, len(rows) - k
    rest = rows[k + 1:]  # rows[k] did not fit
    lens = _shown_lens(lines, rest, cut)
    for j in compress(range(len(rest)), map(le, lens, repeat(4 * left - 4))):  # (len + 7) >> 2 <= left
        cost = (lens[j] + 7) >> 2 if exact or lines[rest[j]].isascii() else _estimated_cost(lines[rest[j]], cut)
        if cost <= left:
            taken.append(rest[j])
            left -= cost
            if left < 2:
                break
    return taken, room - left, len(rows) - len(taken)


def _mark_scan(scan: _Scan, nb: str, found: tuple[set[int], ...], is_log: bool) -> None:
    """Put the lines of ``scan``'s matches in ``nb`` (and those that follow them) in their tiers ``found``."""
    single = len(scan.by_info) == 1
    offsets, groups, run_ends = _where(scan, nb, with_groups=not single)
    if not offsets:
        return
    if run_ends:
        rows, runs = _run_rows(nb, offsets, groups, run_ends, scan.run_names)
        for info, names in scan.by_info:
            _mark_runs(found, [run for run in runs if run[0] in names], info, is_log)
    else:
        rows = _scan_rows(scan, nb, offsets)
    if single:
        _mark(found, rows, scan.by_info[0][0], is_log)
        return
    if groups.count(groups[0]) == len(groups):  # one branch every time (a long list of one kind)
        _mark(found, rows, scan.info[groups[0]], is_log)  # type: ignore[arg-type]
        return
    # the (tier, follow) kinds of match found: the lines of each are picked out only when there are several
    branches = set(groups)
    present = [(info, names) for info, names in scan.by_info if not names.isdisjoint(branches)]
    if len(present) == 1:  # several branches, all of one kind (git status's section lines)
        _mark(found, rows, present[0][0], is_log)
        return
    for info, names in present:
        _mark(found, list(compress(rows, map(names.__contains__, groups))), info, is_log)


# ---------------------------------------------------------------- the digest

def digest(
    text: str,
    *,
    command: str | None = None,
    kind: OutputKind | None = None,
    archive_id: int,
    full_path: str | None = None,
    ctl: str = "ctxlifectl",
    budget_tokens: int = 600,
    max_tokens: int = 2000,
    original_tokens: int | None = None,
) -> Digest:
    """A deterministic extractive digest of ``text`` (see the module rules).

    ``archive_id`` is the L2 id of the full original (``<ctl> recall --id <archive_id>``); ``full_path`` a
    file holding the original that the model can ``Read`` with offset/limit (line numbers as shown);
    ``budget_tokens`` bounds the context/head/tail lines, ``max_tokens`` the must-keep lines;
    ``original_tokens`` may be passed when the caller already measured the original.
    """
    body = digest_body(text, command=command, kind=kind, budget_tokens=budget_tokens, max_tokens=max_tokens,
                       original_tokens=original_tokens)
    return with_footer(body, archive_id=archive_id, full_path=full_path, ctl=ctl)


class DigestBody(msgspec.Struct, frozen=True, kw_only=True):
    """A digest without its footer (the way back to the original, known only once it is archived). Made
    from the text, ``kind`` (the command counts only through it), ``budget_tokens``, ``max_tokens`` and
    ``original_tokens``: a caller holding one made ahead of time for the same text uses it only when
    :meth:`made_for` those."""

    budget_tokens: int
    max_tokens: int
    kind: str
    text: str  # header, facts and runs of lines; the footer follows
    original_lines: int
    original_tokens: int
    kept_lines: int
    must_lines: int
    must_omitted: int

    def made_for(self, kind: str, budget_tokens: int, max_tokens: int, original_tokens: int) -> bool:
        return (self.kind, self.budget_tokens, self.max_tokens, self.original_tokens) == (
            kind, budget_tokens, max_tokens, original_tokens)


def with_footer(body: DigestBody, *, archive_id: int, full_path: str | None = None,
                ctl: str = "ctxlifectl") -> Digest:
    """The digest: ``body`` and its footer naming ``archive_id`` (and ``full_path`` when given)."""
    foot = f"[full output: {ctl} recall --id {int(archive_id)}"
    if full_path:
        foot += f"; or Read {full_path} with offset=<line> and limit=<lines>"
    foot += "]"
    out = body.text + "\n" + foot
    return Digest(kind=body.kind, text=out, original_lines=body.original_lines, original_tokens=body.original_tokens,
                  tokens=estimate_tokens(out), kept_lines=body.kept_lines, must_lines=body.must_lines,
                  must_omitted=body.must_omitted)


def digest_body(
    text: str,
    *,
    command: str | None = None,
    kind: OutputKind | None = None,
    budget_tokens: int = 600,
    max_tokens: int = 2000,
    original_tokens: int | None = None,
) -> DigestBody:
    """The digest of ``text`` without its footer (see :func:`digest`); the same inputs give the same body."""
    k: OutputKind = kind if kind in KINDS else output_kind(text, command)  # type: ignore[assignment]
    scanned, tail_at, skipped = _scan_window(text)
    lines = scanned.split("\n")
    if lines and lines[-1] == "" and len(lines) > 1:
        lines.pop()  # a final newline ends the last line; it does not start another one
    n = len(lines)
    total_lines = n + skipped
    nb = "\n" + scanned
    tail_line = scanned.count("\n", 0, tail_at) if tail_at >= 0 else n

    # Every scan's matches become line indexes without a Python step per match (the regex engine finds them,
    # map/bisect/set operations place them): a long error list has thousands.
    found: tuple[set[int], ...] = (set(), set(), set(), set())  # line indexes per tier; a line may be in several
    is_log = k == "log"
    words: Counter[str] = Counter()  # whole words found, for the facts
    runners = _test_runners(nb) if k == "test" else ()
    for scan in _test_scans(runners) if k == "test" else _PATTERNS[k]:
        if scan.words:
            _count_words(scan, nb, words, found, is_log)
            continue
        _mark_scan(scan, nb, found, is_log)
    last = next((i for i in range(n - 1, -1, -1) if lines[i].strip()), None)
    if last is not None:
        found[0].add(last)
    head_n = HEAD_LINES.get(k, 5)
    for i in (*range(min(n, head_n)), *range(max(0, n - TAIL_LINES), n)):
        if _WORDY_RE.search(lines[i]):  # a head/tail line of only rules and pipes says nothing
            found[3].add(i)
    # each line in its best tier; blank lines and the indexes that follow/precede past the ends in none
    every = set().union(*found)
    # the indexes past the ends (a log's line before the first, the lines that follow the last): looked up,
    # not found by sorting every index
    outside = every.intersection((-1, *range(n, n + _MAX_FOLLOW + 1)))
    every.difference_update(outside)
    drop = {i for i in every if not lines[i].strip()}  # blank lines (a method called per item by map costs more)
    drop.update(outside)
    t0, t1, t2, t3 = found  # narrowed in place: no new sets
    t0.difference_update(drop)
    t1.difference_update(drop, t0)
    t2.difference_update(drop, t0, t1)
    t3.difference_update(drop, t0, t1, t2)

    orig_tokens = original_tokens if original_tokens is not None else estimate_tokens(text)
    ascii_only = scanned.isascii()  # then a line's estimate is (len + 3) // 4, computed without a call
    # verdicts first, the last first (a run's summary is at its end), within max_tokens like the rest
    c0 = sorted(t0, reverse=True)
    taken, used, omitted_verdicts = _fit(lines, c0, max_tokens, ascii_only, cut=False)
    shown: set[int] = set(taken)
    c1 = sorted(t1)
    taken, spent, omitted = _fit(lines, c1, max_tokens - used, ascii_only, cut=False)
    shown.update(taken)
    used += spent
    must_found = len(t0) + len(c1)
    floor = MIN_CONTEXT_TOKENS if used < MIN_CONTEXT_TOKENS else 0
    room = min(budget_tokens, max(floor, int(orig_tokens * CONTEXT_SHARE) - used))
    c2 = sorted(t2)
    taken, spent, _ = _fit(lines, c2, room, ascii_only, cut=True)
    c3 = sorted(t3, key=lambda i: (i >= head_n, -i if i >= head_n else i))  # head before tail, nearest the ends first
    taken += _fit(lines, c3, room - spent, ascii_only, cut=True)[0]
    shown.update(taken)
    rendered = {i: _cut_line(lines[i])[0] for i in taken if len(lines[i]) > MAX_LINE_CHARS}

    body: list[str] = []
    order = sorted(shown)
    # a run of consecutive lines breaks where the next shown line is not the next line, and where the
    # scanned tail starts (its numbers jump over the lines not scanned)
    cuts = set(compress(range(1, len(order)), map((1).__ne__, map(sub, order[1:], order[:-1]))))
    if tail_at >= 0 and (j := bisect_left(order, tail_line)) < len(order) and order[j] == tail_line and j:
        cuts.add(j)
    bounds = [0, *sorted(cuts), len(order)] if order else [0]
    runs = [(order[a], order[b - 1]) for a, b in zip(bounds, bounds[1:])]
    for a, b in runs:
        la = a + 1 + (skipped if a >= tail_line else 0)  # 1-based line numbers in the original
        lb = b + 1 + (skipped if b >= tail_line else 0)
        body.append(f"[L{la}]" if la == lb else f"[L{la}-{lb}]")
        if rendered:
            body.extend(rendered.get(i, lines[i]) for i in range(a, b + 1))
        else:
            body += lines[a: b + 1]

    label = _KIND_LABEL[k]
    what = _what_kept(k, must_found - omitted - omitted_verdicts, len(shown))
    head = (f"[ctxlifed digest of a {label} of {_fmt(total_lines)} lines, ~{_fmt(orig_tokens)} tokens: {what};"
            " [Ln-m] = line numbers in the original]")
    facts = _facts(k, nb, words, runners)
    extra: list[str] = []
    if facts:
        extra.append("[" + "; ".join(facts) + "]")
    if omitted:
        extra.append(f"[{omitted} more error/failure lines not shown (too many): see the full output]")
    if omitted_verdicts:
        extra.append(f"[{omitted_verdicts} more summary lines not shown (too many): see the full output]")
    if skipped:
        extra.append(f"[only the first and last {_fmt(MAX_SCAN // 2)} characters were scanned]")
    if rendered:
        extra.append(f"[context lines over {MAX_LINE_CHARS} characters are cut: … [+N chars]]")
    return DigestBody(
        budget_tokens=budget_tokens,
        max_tokens=max_tokens,
        kind=k,
        text="\n".join([head, *extra, *body]),
        original_lines=total_lines,
        original_tokens=orig_tokens,
        kept_lines=len(shown),
        must_lines=must_found,
        must_omitted=omitted + omitted_verdicts,
    )


def _what_kept(kind: str, must: int, shown: int) -> str:
    what = {
        "test": "summary, failing tests with their assertions and errors",
        "build": "totals, every error with its file:line",
        "install": "final state and errors",
        "search": "first matches, errors",
        "diff": "files changed and hunk headers",
        "log": "error lines with context",
        "other": "error-looking lines",
    }[kind]
    return f"{_fmt(shown)} lines kept verbatim ({what}, head, tail)"


def kept_verbatim(original: Iterable[str], digest_text: str) -> list[str]:
    """The lines of ``original`` that appear whole, as lines, in ``digest_text`` (for checks and benches)."""
    have = set(digest_text.split("\n"))
    return [line for line in original if line in have]
