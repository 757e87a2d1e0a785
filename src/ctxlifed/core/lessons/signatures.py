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
- Causes (:func:`cause_of`): a short cause when the error says it plainly (``missing module requests``,
  ``command not found: x``, ``missing file f``, ``syntax error`` ...), else ''; at most :data:`CAUSE_MAX`
  characters. :func:`cause_subject` is the thing a cause names (``requests``), '' when none.
"""

from __future__ import annotations

import re

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
_CWD_NOTE_RE = re.compile(r"\s?Note: your current working directory is \S+?\.?(?=\s|$)")

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
_GENERIC_RE = re.compile(r"^(?:[\w.\-]+:\s+)?(?:fatal|error|panic|FATAL|ERROR|Error|Fatal|Panic)\b\s*[:!]")
_MAKE_RE = re.compile(r"^(?:g?make)(?:\[\d+\])?: \*\*\*")
_KEYWORD_RE = re.compile(
    r"(?i:\b(?:error|errors|failed|failure|fatal|exception|denied|not found|cannot|can't|unable to|invalid|"
    r"refused|timed out|panic|panicked|aborted|segmentation fault|does not exist)\b)"
    r"|错误|失败|异常|无法|找不到|不存在|拒绝|超时"
)


def _lines(text: str) -> list[str]:
    if len(text) > MAX_SCAN:
        text = text[: MAX_SCAN // 4] + "\n" + text[-(MAX_SCAN * 3 // 4) :]
    text = _ANSI_RE.sub("", text).replace("\r\n", "\n").replace("\r", "\n")
    out = []
    for ln in text.split("\n"):
        ln = ln.rstrip()
        if not ln.strip() or _EXIT_LINE_RE.match(ln.strip()) or _NOISE_LINE_RE.match(ln.strip()):
            continue
        out.append(ln if len(ln) <= 2000 else f"{ln[:1000]} … {ln[-1000:]}")
    return out


def _pytest_section(lines: list[str], node: str) -> list[str]:
    """The ``E`` lines of the report section of ``node`` (``___ test_y ___``, ``___ ERROR collecting
    tests/x.py ___``, ``___ ERROR at setup of test_y ___``); all ``E`` lines when no section matches."""
    key = node.split("::", 1)[1].replace("::", ".") if "::" in node else node
    out: list[str] = []
    inside = False
    for ln in lines:
        h = _PYTEST_SECTION_RE.match(ln)
        if h:
            title = h.group(1)
            inside = title == key or title.endswith((" " + key, " of " + key))
            continue
        if ln.startswith("==="):
            inside = False
        elif inside and (em := _E_LINE_RE.match(ln)):
            out.append(em.group(1))
    return out or [em.group(1) for ln in lines if (em := _E_LINE_RE.match(ln))]


def _pytest_line(lines: list[str]) -> str | None:
    for ln in lines:
        m = _PYTEST_SUMMARY_RE.match(ln.strip())
        if not m or not _PYTEST_NODE_RE.search(m.group(2)):
            continue
        word, node, msg = m.group(1), m.group(2), (m.group(3) or "").strip()
        if msg.endswith("...") or not msg:
            e_lines = _pytest_section(lines, node)
            if msg:  # cut to the terminal width: complete it from the untruncated E line
                prefix = msg[:-3].rstrip()
                msg = next((e for e in e_lines if e.startswith(prefix)), prefix)
            else:  # e.g. a collection error: the section's exception line says what broke
                msg = next((e for e in e_lines if _EXC_STRICT_RE.match(e)), e_lines[0] if e_lines else "")
        return f"{word} {node} - {msg}" if msg else f"{word} {node}"
    return None


def _exception_line(lines: list[str], *, after_traceback: bool) -> str | None:
    if after_traceback:
        starts = [i for i, ln in enumerate(lines) if ln.lstrip().startswith("Traceback (most recent call last)")]
        if not starts:
            return None
        found = None
        for ln in lines[starts[-1] :]:
            if not ln.startswith((" ", "\t")) and _EXC_STRICT_RE.match(ln):
                found = ln.strip()
        return found
    for ln in lines:
        m = _EXC_RE.match(ln)
        if m and not ln.lstrip().startswith(("raise ", "except ", "File ")):
            return m.group(1)
    return None


def _decisive_line(lines: list[str], tool: str) -> str | None:
    if (r := _pytest_line(lines)) is not None:
        return r
    for ln in lines:
        if m := _UNITTEST_RE.match(ln):
            return f"{m.group(1)}: {m.group(2)} ({m.group(3)})"
    for i, ln in enumerate(lines):
        if m := _GO_FAIL_RE.match(ln):
            nxt = _GO_MSG_RE.match(lines[i + 1]) if i + 1 < len(lines) else None
            return f"--- FAIL: {m.group(1)}" + (f" {nxt.group(1)}" if nxt else "")
    for ln in lines:
        if m := _CARGO_FAIL_RE.match(ln):
            return f"FAILED {m.group(1)}"
    for ln in lines:
        if (m := _JEST_BULLET_RE.match(ln)) and "Test suite failed to run" not in m.group(1):
            return f"● {m.group(1)}"
    if fails := testfail.failure_lines("\n".join(lines)):  # mocha, rspec, phpunit, dotnet, Maven, Gradle ...
        tid, err = fails[0]
        return f"FAILED {tid} - {err}" if err else f"FAILED {tid}"
    if (r := _exception_line(lines, after_traceback=True)) is not None:
        return r
    for ln in lines:
        for rx in _COMPILER_RES:
            if m := rx.match(ln.strip()):
                return m.group(1)
    npm_first = None
    for ln in lines:
        if m := _NPM_RE.match(ln.strip()):
            if not _NPM_TRIVIAL_RE.match(m.group(1)):
                return f"npm ERR! {m.group(1)}"
            npm_first = npm_first or f"npm ERR! {m.group(1)}"
    if npm_first:
        return npm_first
    if (r := _exception_line(lines, after_traceback=False)) is not None:
        return r
    for ln in lines:
        if _SHELL_RE.search(ln):
            return ln.strip()
    make_line = None
    for ln in lines:
        s = ln.strip()
        if _MAKE_RE.match(s):
            make_line = make_line or s
        elif _GENERIC_RE.match(s):
            return s
    for ln in lines:
        if m := _JEST_FAIL_RE.match(ln):
            return f"FAIL {m.group(1).strip()}"
    if make_line:
        return make_line
    for ln in lines:
        if _KEYWORD_RE.search(ln):
            return ln.strip()
    if tool and tool != "Bash":
        return lines[0].strip() if lines else None
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
        line = _decisive_line(lines, tool or "")
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


_CAUSES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"No module named '([\w.]+)'"), "missing module {0}"),
    (re.compile(r"Cannot find module '([^'\s]+)'"), "missing module {0}"),
    (re.compile(r"Cannot find package '([^'\s]+)'"), "missing package {0}"),
    (re.compile(r"cannot import name '(\w+)' from '([\w.]+)'"), "cannot import {0} from {1}"),
    (re.compile(r"No matching distribution found for (\S+)"), "package not found: {0}"),
    (re.compile(r"(?:unresolved import|cannot find crate for) `([^`]+)`"), "unresolved import {0}"),
    (re.compile(r"NameError: name '(\w+)' is not defined"), "undefined name {0}"),
    (re.compile(r"Cannot find name '(\w+)'"), "undefined name {0}"),
    (re.compile(r"\bundefined: (\w+)"), "undefined name {0}"),
    (re.compile(r"command not found: ([^\s:]+)"), "command not found: {0}"),
    (re.compile(r"(?<![^\s:])([^\s:]+): command not found"), "command not found: {0}"),
    (re.compile(r"^\S+: \d+: ([^\s:]+): not found", re.M), "command not found: {0}"),
    (re.compile(r"No such file or directory:? '([^']+)'"), "missing file {0}"),
    (re.compile(r"can't open file '([^']+)'"), "missing file {0}"),
    (re.compile(r"(?<![^\s:'])([^\s:']+): No such file or directory"), "missing file {0}"),
    (re.compile(r"\bSyntaxError\b"), "syntax error"),
    (re.compile(r"\bIndentationError\b"), "indentation error"),
    (re.compile(r"Permission denied|EACCES"), "permission denied"),
    (re.compile(r"Connection refused|ECONNREFUSED"), "connection refused"),
    (re.compile(r"Address already in use|EADDRINUSE"), "address already in use"),
    (re.compile(r"\bTimeoutError\b|\btimed out\b"), "timeout"),
)


def cause_of(text: str) -> str:
    """A short cause when the error says it plainly ("missing module requests"), else ''."""
    if not text:
        return ""
    head = text[:MAX_SCAN]
    for rx, fmt in _CAUSES:
        m = rx.search(head)
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
