"""Error signatures: the decisive line of an error text, normalised, and its plain cause.

Rules:
- Pure: no I/O, no clock. :func:`describe_error` / :func:`signature` never raise.
- Redaction: the signature, excerpt and cause go through :func:`~ctxlifed.core.redact.redact` here.
- Signatures (:func:`signature`): ``"<family>|<decisive error line>"``, at most :data:`SIG_MAX` chars.
  Family: :func:`~ctxlifed.core.commands.command_family`, the test runner or program of the command's
  main segment (first test segment, else last non-setup segment), ``<tool>:<basename>`` for file tools, the lower-cased tool name otherwise.
  Decisive line, first extractor that finds one: pytest summary ``FAILED|ERROR <node> - <msg>`` (a
  terminal-truncated ``msg...`` is completed from the matching ``E   `` line); unittest ``FAIL: x (y)``;
  go ``--- FAIL: TestX`` (+ its first message line); cargo ``test x ... FAILED``; jest/vitest ``●``;
  any other runner's first failing test (:mod:`~ctxlifed.core.testfail`: ``FAILED <id> - <error>``);
  the last ``XError: msg`` line after a Python traceback; compiler lines (rustc ``error[E0432]: ..``,
  gcc/clang/mypy ``f:1:2: error: ..``, tsc ``error TS2304``, go ``f.go:1:2: ..``); ``npm ERR!`` /
  ``npm error``; the first ``XError: msg`` line (pytest ``E`` lines, node ``Error: Cannot find module``);
  shell (``command not found``, ``No such file or directory``, ``Permission denied``); generic
  ``error:`` / ``fatal:`` / ``panic:`` lines; an error word (also 错误/失败/异常/无法/找不到/不存在);
  for a non-Bash tool, its first line. None when there is no error content (``Exit code 1`` alone,
  grep's exit 1).
  Normalisation (in this order): redaction; URLs -> their last path segment (the host when none);
  UUIDs -> ``<hex>``; ISO dates and clock times -> ``<t>``; durations (``0.12s``, ``35 ms``) -> ``<t>``;
  paths (anything with ``/`` or ``\\``) -> their basename, so directories, temp dirs and node-id
  directories go (``tests/unit/test_x.py::test_y`` -> ``test_x.py::test_y``: the basename is part of
  the error's identity); temp names (``tmpk3j2_9x1``, ``tmp.AbC123``, ``pytest-of-u``) -> ``<tmp>``,
  ``pytest-7`` -> ``pytest-<n>``; ``0x..`` and hex words of 7+ chars with a digit and a letter ->
  ``<hex>``; random tokens (16+ alnum chars, 2+ digits) -> ``<id>``; positions (``x.py:12:5``,
  ``a.ts(3,5)``, ``line 12``, ``sh: 1:``, ``Makefile:3``) -> ``<n>``; ids -> ``<n>``: a number after
  pid/process/worker/thread/port/job/id/request/session/attempt/task/build/run/connection, ``#123``,
  and any standalone number of 5+ digits. Shorter standalone numbers are kept, inside quotes too:
  they are values (``404`` vs ``500``, ``assert 3 == 4``); digits inside a name (``foo2``, ``E0432``,
  ``py311``) are always kept, and so are quoted names (modules, files, keys). Whitespace collapsed.
  Deterministic and never raises. Bounded work: at most :data:`MAX_SCAN` characters are scanned, a
  line over 2,000 characters keeps its head and tail, and patterns are anchored or start at a token
  or whitespace-run boundary, so long words and runs cannot make them backtrack quadratically.
- Lines are looked at only where they can match (the results are those of every per-line form on every
  line): the lines are joined, each behind a "\\n", and an extractor reads with its per-line form only its
  candidate lines, in order: the lines holding one of its marks (literals one of which every line it takes
  holds: a text without them is not read further), and once more than :data:`_MARK_LINES` did, the lines
  its candidate form finds (a pattern at a line's "\\n" that every line of the per-line form matches).
  ``Exit code`` and noise lines are dropped the same way. The keyword line is looked for only where a
  keyword starts in the text lower-cased (:func:`_lowered`). Each of these patterns and marks has a
  hypothesis test against its per-line form (tests/test_core_lessons_signatures.py).
- Causes (:func:`cause_of`): a short cause when the error says it plainly (``missing module requests``,
  ``command not found: x``, ``missing file f``, ``syntax error`` ...), else ''; at most :data:`CAUSE_MAX`
  characters. :func:`cause_subject` is the thing a cause names (``requests``), '' when none. A cause
  pattern is searched only in a text holding its mark, and one with no literal start (which the engine
  would try at every position) only in the lines holding it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import msgspec

from ctxlifed.core import testfail
from ctxlifed.core.commands import basename, command_family
from ctxlifed.core.lessons.text import WS_RE, clean
from ctxlifed.core.redact import redact

__all__ = ["CAUSE_MAX", "EXCERPT_MAX", "MAX_SCAN", "SIG_MAX", "ErrorInfo", "cause_of", "cause_subject",
           "describe_error", "signature"]

SIG_MAX = 300  # characters of a signature
EXCERPT_MAX = 300  # characters of a lesson's error excerpt
CAUSE_MAX = 120
MAX_SCAN = 64_000  # characters of an error text scanned for a signature (head 16k + tail 48k)

_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
_EXIT_LINE_RE = re.compile(r"^(?:Error: )?Exit code -?\d+\s*$")
_NOISE_LINE_RE = re.compile(r"^\[stderr\]$|^<persisted-output>|^</persisted-output>")
_DROP_MARKS = ("Exit code", "[stderr]", "persisted-output>")  # one is in every line the two above drop
_LINE_MAX = 2000  # characters of a line kept whole; a longer one keeps its head and tail
_MARK_LINES = 16  # lines holding a mark looked at one by one before a candidate form takes over
_CWD_NOTE_RE = re.compile(r"\s?Note: your current working directory is \S+?\.?(?=\s|$)")

# Per-line forms: each is matched on one line, as the module rules say ...
_PYTEST_SUMMARY_RE = re.compile(r"^(FAILED|ERROR)\s+(\S+)(?:\s+-\s+(.*))?$")
_PYTEST_NODE_RE = re.compile(r"\.py(?:$|::|\[)|::")
_E_LINE_RE = re.compile(r"^E\s+(.*\S)")
_PYTEST_SECTION_RE = re.compile(r"^_{3,} (.+?) _{3,}$")
_UNITTEST_RE = re.compile(r"^(FAIL|ERROR): (\S+) \(([^)]*)\)")
_GO_FAIL_RE = re.compile(r"^\s*--- FAIL: (\S+)")
_GO_MSG_RE = re.compile(r"^\s+(\S+\.go:\d+: .*\S)")
_CARGO_FAIL_RE = re.compile(r"^test (\S+) \.\.\. FAILED\s*$")
_JEST_BULLET_RE = re.compile(r"^\s*●\s+(.*\S)")
_JEST_FAIL_RE = re.compile(r"^\s*(?:FAIL|×|✗|✕)\s+(\S.*)$")
_TRACEBACK = "Traceback (most recent call last)"
_EXC_WORDS = ("Error", "Exception", "Exit", "Interrupt", "Warning", "Fault", "Failure")
_EXC_RE = re.compile(
    r"^\s*(?:E\s+)?((?:[A-Za-z_]\w*\.)*[A-Za-z_]*(?:Error|Exception|Exit|Interrupt|Warning|Fault|Failure)"
    r"(?::\s*.*\S)?)\s*$"
)
_EXC_STRICT_RE = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Za-z_]*(?:Error|Exception|Exit|Interrupt|Warning|Fault|Failure)"
                            r"(?::|$)")
_COMPILER_RES = (
    re.compile(r"^(error(?:\[[A-Z]?\d+\])?: (?!aborting due to|could not compile|Recipe)(?:.*\S))"),
    re.compile(r"^(\S+?:\d+(?::\d+)?:\s*(?:fatal )?error:\s*.*\S)"),
    re.compile(r"^(\S+?\(\d+,\d+\): error TS\d+: .*\S)"),
    re.compile(r"^(\S+?:\d+:\d+ - error TS\d+: .*\S)"),
    re.compile(r"^(\S+\.go:\d+:\d+: .*\S)"),
)
_NPM_RE = re.compile(r"^npm (?:ERR!|error) (.*\S)")
_NPM_TRIVIAL_RE = re.compile(r"^(?:code\b|errno\b|syscall\b|A complete log|Log files were|\s*$|path\b)")
_SHELL_RE = re.compile(r"command not found|: not found\s*$|No such file or directory|Permission denied")
_SHELL_MARKS = ("command not found", ": not found", "No such file or directory", "Permission denied")
_GENERIC_RE = re.compile(r"^(?:[\w.\-]+:\s+)?(?:fatal|error|panic|FATAL|ERROR|Error|Fatal|Panic)\b\s*[:!]")
_MAKE_RE = re.compile(r"^(?:g?make)(?:\[\d+\])?: \*\*\*")
_KEYWORD_RE = re.compile(
    r"(?i:\b(?:error|errors|failed|failure|fatal|exception|denied|not found|cannot|can't|unable to|invalid|"
    r"refused|timed out|panic|panicked|aborted|segmentation fault|does not exist)\b)"
    r"|错误|失败|异常|无法|找不到|不存在|拒绝|超时"
)
# Every match of _KEYWORD_RE starts with one of these (in the text lower-cased as _lowered does) ...
_KEYWORD_MARKS = ("error", "failed", "failure", "fatal", "exception", "denied", "not found", "cannot", "can't",
                  "unable to", "invalid", "refused", "timed out", "panic", "aborted", "segmentation fault",
                  "does not exist")
_KEYWORD_MARKS_CJK = ("错误", "失败", "异常", "无法", "找不到", "不存在", "拒绝", "超时")
# ... as (?i) matches a letter of them by its lower case, or these (the engine's own equivalences: ı~i, ſ~s).
_CASE_FIXES = (("ı", "i"), ("ſ", "s"), ("İ", "i"))
# Lower-cased, these are in many marks of the later extractors: a text without one has none of those marks.
_ROOTS = ("fail", "error", "fatal", "panic")

# ... and the candidate forms that find those lines in the joined text: each starts at the "\n" before a line
# and asks what the per-line form requires from the line's start (``\s`` inside a line is ``[^\S\n]``), so
# every line the per-line form matches is a candidate; each candidate is then checked by the per-line form.
_WS = r"[^\S\n]"
# The lines _EXIT_LINE_RE and _NOISE_LINE_RE drop (their rule spelt for the joined text), each from its "\n":
# the rest of a text in which many lines hold a drop mark.
_DROP_LINE_RE = re.compile(
    rf"\n{_WS}*+(?:(?:Error: )?Exit code -?\d++|\[stderr\]|</?persisted-output>[^\n]*+){_WS}*+(?=\n|\Z)"
)
_EXC_END = r"(?<=rror|tion|Exit|rupt|ning|ault|lure)"  # the last four letters of each of _EXC_WORDS
_PYTEST_SUMMARY_AT = re.compile(rf"\n{_WS}*+(?:FAILED|ERROR){_WS}")
# A section title line, a section's end (a title or a === rule), an E line: the per-line forms spelt for the
# joined text.
_PYTEST_SECTION_AT = re.compile(r"\n_{3,} (.+?) _{3,}(?=\n|\Z)")
_PYTEST_SECTION_END_AT = re.compile(r"\n(?:_{3,} .+? _{3,}(?=\n|\Z)|===)")
_E_LINE_AT = re.compile(rf"\nE{_WS}+(.*\S)")
_UNITTEST_AT = re.compile(r"\n(?:FAIL|ERROR): ")
_GO_FAIL_AT = re.compile(rf"\n{_WS}*+--- FAIL: ")
_CARGO_FAIL_AT = re.compile(r"\ntest \S+ \.\.\. FAILED")
_JEST_BULLET_AT = re.compile(rf"\n{_WS}*+●{_WS}")
# An exception name ends the [\w.] run it is in (a ':', a space or the line's end follows it).
_EXC_STRICT_AT = re.compile(r"\n[\w.]*+" + _EXC_END)
_EXC_AT = re.compile(rf"\n{_WS}*+(?:E{_WS}+)?[\w.]*+" + _EXC_END)
_COMPILER_MARKS = ("error:", "error[", "error TS", ".go:")  # each form holds one
# The first token, walked once, then what follows it in each compiler form.
_COMPILER_AT = re.compile(
    rf"\n{_WS}*+(?:error(?:\[[A-Z]?\d+\])?: |\S+?(?::\d+(?::\d+)?:{_WS}*(?:fatal )?error:|\(\d+,\d+\): error TS"
    r"|:\d+:\d+ - error TS|\.go:\d+:\d+: ))"
)
_NPM_AT = re.compile(rf"\n{_WS}*+npm (?:ERR!|error) ")
_GENERIC_AT = re.compile(
    rf"\n{_WS}*+(?:[\w.\-]++:{_WS}+)?(?:fatal|error|panic|FATAL|ERROR|Error|Fatal|Panic)\b{_WS}*[:!]"
)
_GENERIC_MARKS = ("fatal", "error", "panic", "FATAL", "ERROR", "Error", "Fatal", "Panic")
_SHELL_AT = re.compile(
    rf"\n[^\n]*?(?:command not found|: not found{_WS}*+(?=\n|\Z)|No such file or directory|Permission denied)"
)
_MAKE_AT = re.compile(rf"\n{_WS}*+g?make(?:\[\d+\])?: \*\*\*")
_JEST_FAIL_AT = re.compile(rf"\n{_WS}*+(?:FAIL|×|✗|✕){_WS}")


def _holding(text: str, marks: tuple[str, ...], pos: int = 0) -> Iterator[tuple[int, int]]:
    """Start and end of each line of ``text`` that holds one of ``marks`` (none holds a "\\n") from ``pos`` on,
    in order."""
    nxt = [text.find(mark, pos) for mark in marks]
    while found := [p for p in nxt if p >= 0]:
        p = min(found)
        s = text.rfind("\n", 0, p) + 1
        e = text.find("\n", p)
        if e < 0:
            e = len(text)
        yield s, e
        nxt = [q if q < 0 or q >= e else text.find(mark, e) for q, mark in zip(nxt, marks, strict=True)]


def _lines(text: str) -> list[str]:
    """The text's non-blank lines, right-stripped, without ``Exit code N`` and noise marks, long ones cut."""
    if len(text) > MAX_SCAN:
        text = text[: MAX_SCAN // 4] + "\n" + text[-(MAX_SCAN * 3 // 4) :]
    if "\x1b" in text:
        text = _ANSI_RE.sub("", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = "\n" + text
    parts, last = [], 0  # a dropped line's text goes, so it is blank
    for n, (s, e) in enumerate(_holding(text, _DROP_MARKS)):
        if n == _MARK_LINES:  # many: the rest in one engine pass (``last`` is at a "\n")
            parts.append(_DROP_LINE_RE.sub("\n", text[last:]))
            last = len(text)
            break
        ln = text[s:e].strip()
        if _EXIT_LINE_RE.match(ln) or _NOISE_LINE_RE.match(ln):
            parts.append(text[last:s])
            last = e
    if parts:
        parts.append(text[last:])
        text = "".join(parts)
    out = list(filter(None, map(str.rstrip, text.split("\n"))))
    if max(map(len, out), default=0) > _LINE_MAX:
        out = [ln if len(ln) <= _LINE_MAX else f"{ln[:1000]} … {ln[-1000:]}" for ln in out]
    return out


def _at(rx: re.Pattern[str], text: str, pos: int = 0) -> Iterator[tuple[int, int]]:
    """Start and end of each line of ``text`` (lines each behind a "\\n") at whose "\\n" the candidate
    form ``rx`` matches, from ``pos`` on, in order."""
    search = rx.search
    while (m := search(text, pos)) is not None:
        s = m.start() + 1
        pos = text.find("\n", s)
        if pos < 0:
            yield s, len(text)
            return
        yield s, pos


def _candidates(text: str, marks: tuple[str, ...], rx: re.Pattern[str], pos: int = 0) -> Iterator[tuple[int, int]]:
    """The candidate lines of a per-line form, in order, from the "\\n" at ``pos`` on: the lines holding one of
    ``marks`` (every line the form matches holds one) for the first :data:`_MARK_LINES`, then the lines its
    candidate form ``rx`` finds (one engine pass when many lines hold a mark)."""
    n = 0
    for s, e in _holding(text, marks, pos):
        yield s, e
        n += 1
        if n == _MARK_LINES:
            yield from _at(rx, text, e)
            return


def _line_of(text: str, p: int) -> str:
    e = text.find("\n", p)
    return text[text.rfind("\n", 0, p) + 1 : e if e >= 0 else len(text)]


def _pytest_section(text: str, node: str) -> list[str]:
    """The ``E`` lines of the report section of ``node`` (``___ test_y ___``, ``___ ERROR collecting
    tests/x.py ___``, ``___ ERROR at setup of test_y ___``); all ``E`` lines when no section matches.
    A section runs from its title line to the next title or ``===`` line."""
    key = node.split("::", 1)[1].replace("::", ".") if "::" in node else node
    out: list[str] = []
    for h in _PYTEST_SECTION_AT.finditer(text):
        title = h.group(1)
        if title == key or title.endswith((" " + key, " of " + key)):
            end = _PYTEST_SECTION_END_AT.search(text, h.end())
            out += _E_LINE_AT.findall(text, h.end(), end.start() if end else len(text))
    return out or _E_LINE_AT.findall(text)


def _pytest_line(text: str) -> str | None:
    for s, e in _candidates(text, ("FAILED", "ERROR"), _PYTEST_SUMMARY_AT):
        m = _PYTEST_SUMMARY_RE.match(text[s:e].strip())
        if not m or not _PYTEST_NODE_RE.search(m.group(2)):
            continue
        word, node, msg = m.group(1), m.group(2), (m.group(3) or "").strip()
        if msg.endswith("...") or not msg:
            e_lines = _pytest_section(text, node)
            if msg:  # cut to the terminal width: complete it from the untruncated E line
                prefix = msg[:-3].rstrip()
                msg = next((e for e in e_lines if e.startswith(prefix)), prefix)
            else:  # e.g. a collection error: the section's exception line says what broke
                msg = next((e for e in e_lines if _EXC_STRICT_RE.match(e)), e_lines[0] if e_lines else "")
        return f"{word} {node} - {msg}" if msg else f"{word} {node}"
    return None


def _traceback_line(text: str) -> str | None:
    """The last unindented ``XError: msg`` line from the last traceback on; None without a traceback."""
    p = text.rfind(_TRACEBACK)
    while p >= 0:
        s = text.rfind("\n", 0, p) + 1
        if _line_of(text, p).lstrip().startswith(_TRACEBACK):
            break
        p = text.rfind(_TRACEBACK, 0, s)
    if p < 0:
        return None
    found = None
    for s, e in _candidates(text, _EXC_WORDS, _EXC_STRICT_AT, text.rfind("\n", 0, p)):
        ln = text[s:e]
        if not ln.startswith((" ", "\t")) and _EXC_STRICT_RE.match(ln):
            found = ln.strip()
    return found


def _lowered(text: str) -> str:
    """``text`` lower-cased, ı and ſ first made i and s (and İ i): a letter (?i) matches to an ASCII
    letter is that letter here."""
    if text.isascii():
        return text.lower()
    for a, b in _CASE_FIXES:
        text = text.replace(a, b)
    return text.lower()


def _without(marks: tuple[str, ...], gone: tuple[str, ...]) -> tuple[str, ...]:
    """``marks`` less those that hold (lower-cased) a root the text does not hold (lower-cased): those are
    not in the text either."""
    return tuple(mark for mark in marks if not any(root in mark.lower() for root in gone)) if gone else marks


def _keyword_line(text: str, low: str, gone: tuple[str, ...]) -> str | None:
    """The first line with a _KEYWORD_RE match: the engine is tried only where a mark starts in ``low``
    (the text :func:`_lowered`), which has the text's places when it has its length, nearest first."""
    if len(low) != len(text):  # a letter whose lower case is longer: places would move
        m = _KEYWORD_RE.search(text)
        return _line_of(text, m.start()).strip() if m else None
    marks = _without(_KEYWORD_MARKS if text.isascii() else _KEYWORD_MARKS + _KEYWORD_MARKS_CJK, gone)
    best = len(text)
    for mark in marks:
        p = low.find(mark, 0, best + len(mark) - 1)
        while p >= 0:
            if _KEYWORD_RE.match(text, p):
                best = p
                break
            p = low.find(mark, p + 1, best + len(mark) - 1)
    return _line_of(text, best).strip() if best < len(text) else None


def _decisive_line(text: str, tool: str) -> str | None:
    """The decisive line of ``text`` (the lines of :func:`_lines`, each behind a "\\n"): the first extractor
    of the module rules that finds one. An extractor runs only on a text holding what its lines need, and
    looks only at its candidate lines."""
    if (r := _pytest_line(text)) is not None:
        return r
    for s, e in _candidates(text, ("FAIL: ", "ERROR: "), _UNITTEST_AT):
        if m := _UNITTEST_RE.match(text[s:e]):
            return f"{m.group(1)}: {m.group(2)} ({m.group(3)})"
    for s, e in _candidates(text, ("--- FAIL: ",), _GO_FAIL_AT):
        if m := _GO_FAIL_RE.match(text[s:e]):
            nxt = _GO_MSG_RE.match(_line_of(text, e + 1)) if e < len(text) else None
            return f"--- FAIL: {m.group(1)}" + (f" {nxt.group(1)}" if nxt else "")
    for s, e in _candidates(text, (" ... FAILED",), _CARGO_FAIL_AT):
        if m := _CARGO_FAIL_RE.match(text[s:e]):
            return f"FAILED {m.group(1)}"
    for s, e in _candidates(text, ("●",), _JEST_BULLET_AT):
        if (m := _JEST_BULLET_RE.match(text[s:e])) and "Test suite failed to run" not in m.group(1):
            return f"● {m.group(1)}"
    if fails := testfail.failure_lines(text[1:]):  # mocha, rspec, phpunit, dotnet, Maven, Gradle ...
        tid, err = fails[0]
        return f"FAILED {tid} - {err}" if err else f"FAILED {tid}"
    if (r := _traceback_line(text)) is not None:
        return r
    low = _lowered(text)
    gone = tuple(root for root in _ROOTS if root not in low)
    for s, e in _candidates(text, _without(_COMPILER_MARKS, gone), _COMPILER_AT):
        ln = text[s:e].strip()
        for rx in _COMPILER_RES:
            if m := rx.match(ln):
                return m.group(1)
    npm_first = None
    for s, e in _candidates(text, ("npm ",), _NPM_AT):
        if m := _NPM_RE.match(text[s:e].strip()):
            if not _NPM_TRIVIAL_RE.match(m.group(1)):
                return f"npm ERR! {m.group(1)}"
            npm_first = npm_first or f"npm ERR! {m.group(1)}"
    if npm_first:
        return npm_first
    for s, e in _candidates(text, _without(_EXC_WORDS, gone), _EXC_AT):
        ln = text[s:e]
        m = _EXC_RE.match(ln)
        if m and not ln.lstrip().startswith(("raise ", "except ", "File ")):
            return m.group(1)
    for s, e in _candidates(text, _SHELL_MARKS, _SHELL_AT):
        if _SHELL_RE.search(ln := text[s:e]):
            return ln.strip()
    for s, e in _candidates(text, _without(_GENERIC_MARKS, gone), _GENERIC_AT):
        ln = text[s:e].strip()
        if not _MAKE_RE.match(ln) and _GENERIC_RE.match(ln):
            return ln
    for s, e in _candidates(text, _without(("FAIL", "×", "✗", "✕"), gone), _JEST_FAIL_AT):
        if m := _JEST_FAIL_RE.match(text[s:e]):
            return f"FAIL {m.group(1).strip()}"
    for s, e in _candidates(text, (": ***",), _MAKE_AT):
        if _MAKE_RE.match(ln := text[s:e].strip()):
            return ln
    if (r := _keyword_line(text, low, gone)) is not None:
        return r
    if tool and tool != "Bash":
        return _line_of(text, 1).strip() if len(text) > 1 else None
    return None


# normalisation
_URL_RE = re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]*://([^/\s'\"`<>]+)((?:/[^\s'\"`<>?#]*)?)(?:[?#][^\s'\"`<>]*)?")
_UUID_RE = re.compile(r"(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
_ISO_RE = re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b")
_CLOCK_RE = re.compile(r"(?<![\w:.])\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?(?![\w:])")
_DURATION_RE = re.compile(
    r"(?<![\w.])\d+(?:\.\d+)?\s?(?:ms|us|µs|ns|s|sec|secs|seconds?|min|mins|minutes?|h|hrs?|hours?)(?![\w])"
)
_PATH_RE = re.compile(  # starts only at a token start, so a long word cannot make it quadratic
    r"(?<![\w.@+\-/\\~:])(?:(?:[A-Za-z]:)?(?:~|\.{1,2})?[/\\]*(?:[\w.@+\-]+[/\\]+)+[\w.@+\-]*"
    r"|(?:[A-Za-z]:)?[/\\]+[\w.@+\-]+)"
)
_TMP_RE = re.compile(r"\btmp[a-z0-9_]{8}\b|\btmp\.[A-Za-z0-9]{6,}\b|\bpytest-of-[\w.\-]+|\b(?:tmp|temp)[-_]?\d+\b")
_PYTEST_N_RE = re.compile(r"\bpytest-\d+\b")
_HEX0X_RE = re.compile(r"\b0x[0-9a-fA-F]+\b")
_HEXWORD_RE = re.compile(r"(?<![\w<])(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{7,}(?![\w>])")
_RANDOM_ID_RE = re.compile(r"(?<![A-Za-z0-9])(?=(?:[A-Za-z]*\d){2})(?=[0-9]*[A-Za-z])[A-Za-z0-9]{16,}(?![A-Za-z0-9])")
_POS_EXT_RE = re.compile(r"(\.[A-Za-z][A-Za-z0-9]{0,7})((?::\d+)+)")
_POS_PAREN_RE = re.compile(r"(\.[A-Za-z][A-Za-z0-9]{0,7})\((\d+)(?:,\s*(\d+))?\)")
_POS_WORD_RE = re.compile(r"(?i)\b(lines?|lineno|column|col|offset|position|pos|row)(\s*[=:]?\s*)\d+(?:\s*-\s*\d+)?")
_POS_SH_RE = re.compile(r"^(\w[\w.\-]*): \d+: ")
_POS_NOEXT_RE = re.compile(r"\b((?:GNU)?[Mm]akefile|Dockerfile|Containerfile|Gemfile|Rakefile|Jenkinsfile|Vagrantfile|"
                           r"Procfile|Justfile|justfile)((?::\d+)+)")
_ID_WORD_RE = re.compile(r"(?i)\b(pid|process|proc|worker|thread|tid|port|job|id|request|req|session|attempt|retry|"
                         r"task|build|run|connection|conn)(\s*[#=:]?\s*)\d+\b")
_HASH_NUM_RE = re.compile(r"(?<![\w&])#\d+\b")
_LONG_NUM_RE = re.compile(r"(?<![\w.<])\d{5,}(?![\w>])")


def _path_sub(m: re.Match[str]) -> str:
    tok = m.group(0)
    base = basename(tok)
    return base or tok


def _normalise(line: str) -> str:
    s = redact(line)[0]
    s = _CWD_NOTE_RE.sub("", s)
    s = _URL_RE.sub(lambda m: basename(m.group(2)) or m.group(1), s)
    s = _UUID_RE.sub("<hex>", s)
    s = _ISO_RE.sub("<t>", s)
    s = _CLOCK_RE.sub("<t>", s)
    s = _DURATION_RE.sub("<t>", s)
    s = _PATH_RE.sub(_path_sub, s)
    s = _TMP_RE.sub("<tmp>", s)
    s = _PYTEST_N_RE.sub("pytest-<n>", s)
    s = _HEX0X_RE.sub("<hex>", s)
    s = _HEXWORD_RE.sub("<hex>", s)
    s = _RANDOM_ID_RE.sub("<id>", s)
    s = _POS_EXT_RE.sub(lambda m: m.group(1) + ":<n>" * m.group(2).count(":"), s)
    s = _POS_PAREN_RE.sub(lambda m: m.group(1) + ("(<n>,<n>)" if m.group(3) else "(<n>)"), s)
    s = _POS_WORD_RE.sub(lambda m: f"{m.group(1)}{m.group(2) or ' '}<n>", s)
    s = _POS_SH_RE.sub(r"\1: <n>: ", s)
    s = _POS_NOEXT_RE.sub(lambda m: m.group(1) + ":<n>" * m.group(2).count(":"), s)
    s = _ID_WORD_RE.sub(lambda m: f"{m.group(1)}{m.group(2) or ' '}<n>", s)
    s = _HASH_NUM_RE.sub("#<n>", s)
    s = _LONG_NUM_RE.sub("<n>", s)
    return WS_RE.sub(" ", s).strip()


def _family(tool: str | None, command: str | None, file_path: str | None) -> str:
    if command:
        return command_family(command)
    if tool and tool != "Bash":
        fam = re.sub(r"[^\w.+:-]", "", tool.lower())[:60] or "tool"
        if file_path:
            fam += ":" + _normalise(basename(file_path))[:80]
        return fam
    return "bash" if tool == "Bash" else "err"


class ErrorInfo(msgspec.Struct, frozen=True):
    """What :func:`describe_error` finds in an error text."""

    signature: str
    excerpt: str
    cause: str


def describe_error(error_text: str, *, tool: str | None = None, command: str | None = None,
                   file_path: str | None = None) -> ErrorInfo | None:
    """Signature, excerpt (the decisive line, redacted, <= EXCERPT_MAX) and cause of an error text;
    None when it has no error content. Never raises."""
    try:
        if not isinstance(error_text, str) or not error_text.strip():
            return None
        lines = _lines(error_text)
        line = _decisive_line("\n" + "\n".join(lines), tool or "")
        if line is None:
            return None
        body = _normalise(line)
        if not body:
            return None
        sig = f"{_family(tool, command, file_path)}|{body}"
        if len(sig) > SIG_MAX:
            sig = sig[:SIG_MAX]
        excerpt = clean(_CWD_NOTE_RE.sub("", line), EXCERPT_MAX)
        return ErrorInfo(sig, excerpt, cause_of("\n".join([line, *lines[:100], *lines[-100:]])[:MAX_SCAN]))
    except Exception:  # noqa: BLE001 - a signature must never break the hook path
        return None


def signature(error_text: str, *, tool: str | None = None, command: str | None = None,
              file_path: str | None = None) -> str | None:
    """``"<family>|<normalised decisive error line>"`` (module rules), None without error content."""
    info = describe_error(error_text, tool=tool, command=command, file_path=file_path)
    return info.signature if info else None


# (pattern, cause, marks, by line): every match of the pattern holds one of its marks, so a text without them
# has none; "by line" when the pattern has no literal start (the engine would try it at every position) and a
# match never spans a line: it is then searched only in the lines holding a mark, each on its own.
_CAUSES: tuple[tuple[re.Pattern[str], str, tuple[str, ...], bool], ...] = (
    (re.compile(r"No module named '([\w.]+)'"), "missing module {0}", ("No module named '",), False),
    (re.compile(r"Cannot find module '([^'\s]+)'"), "missing module {0}", ("Cannot find module '",), False),
    (re.compile(r"Cannot find package '([^'\s]+)'"), "missing package {0}", ("Cannot find package '",), False),
    (re.compile(r"cannot import name '(\w+)' from '([\w.]+)'"), "cannot import {0} from {1}",
     ("cannot import name '",), False),
    (re.compile(r"No matching distribution found for (\S+)"), "package not found: {0}",
     ("No matching distribution found for ",), False),
    (re.compile(r"(?:unresolved import|cannot find crate for) `([^`]+)`"), "unresolved import {0}",
     ("unresolved import `", "cannot find crate for `"), False),
    (re.compile(r"NameError: name '(\w+)' is not defined"), "undefined name {0}", ("NameError: name '",), False),
    (re.compile(r"Cannot find name '(\w+)'"), "undefined name {0}", ("Cannot find name '",), False),
    (re.compile(r"\bundefined: (\w+)"), "undefined name {0}", ("undefined: ",), True),
    (re.compile(r"command not found: ([^\s:]+)"), "command not found: {0}", ("command not found: ",), False),
    (re.compile(r"(?<![^\s:])([^\s:]+): command not found"), "command not found: {0}", (": command not found",),
     True),
    (re.compile(r"^\S+: \d+: ([^\s:]+): not found", re.M), "command not found: {0}", (": not found",), True),
    (re.compile(r"No such file or directory:? '([^']+)'"), "missing file {0}", ("No such file or directory",), False),
    (re.compile(r"can't open file '([^']+)'"), "missing file {0}", ("can't open file '",), False),
    (re.compile(r"(?<![^\s:'])([^\s:']+): No such file or directory"), "missing file {0}",
     (": No such file or directory",), True),
    (re.compile(r"\bSyntaxError\b"), "syntax error", ("SyntaxError",), True),
    (re.compile(r"\bIndentationError\b"), "indentation error", ("IndentationError",), True),
    (re.compile(r"Permission denied|EACCES"), "permission denied", ("Permission denied", "EACCES"), True),
    (re.compile(r"Connection refused|ECONNREFUSED"), "connection refused", ("Connection refused", "ECONNREFUSED"),
     True),
    (re.compile(r"Address already in use|EADDRINUSE"), "address already in use",
     ("Address already in use", "EADDRINUSE"), True),
    (re.compile(r"\bTimeoutError\b|\btimed out\b"), "timeout", ("TimeoutError", "timed out"), True),
)


def _cause_match(rx: re.Pattern[str], text: str, marks: tuple[str, ...], by_line: bool) -> re.Match[str] | None:
    """``rx.search(text)``, looked for only where a mark is (see :data:`_CAUSES`)."""
    if not by_line:
        return rx.search(text) if any(mark in text for mark in marks) else None
    for s, e in _holding(text, marks):  # the line's neighbours are seen by look-arounds, ^, $ and \b as before
        if m := rx.search(text, s, e):
            return m
    return None


def cause_of(text: str) -> str:
    """A short cause when the error says it plainly ("missing module requests"), else ''."""
    if not text:
        return ""
    head = text[:MAX_SCAN]
    for rx, fmt, marks, by_line in _CAUSES:
        m = _cause_match(rx, head, marks, by_line)
        if m:
            groups = [basename(g) if "file" in fmt else g for g in m.groups()]
            return clean(fmt.format(*groups), CAUSE_MAX)
    return ""


def cause_subject(cause: str) -> str:
    """What a :func:`cause_of` cause names (``requests`` for "missing module requests.adapters"), else ''."""
    m = re.match(r"(?:missing module|missing package|missing file|command not found:|package not found:|"
                 r"unresolved import|undefined name|cannot import \S+ from) (\S+)", cause)
    if not m:
        return ""
    return m.group(1).split(".")[0].lower() if "module" in cause else m.group(1).lower()
