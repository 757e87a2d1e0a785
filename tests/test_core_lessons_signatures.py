"""core.lessons.signatures gives the same results as its plain form, faster: the decisive line, the lines it is
read from and the cause, for any text.

Rules:
- The reference forms below are the module's code before it looked for lines by their marks and candidate forms
  (verbatim but for the names; the per-line regexes, which it did not change, are the module's own):
  :func:`describe_error`, :func:`cause_of` and ``_lines`` give what they give.
- Every candidate form (``*_AT``) is a superset of its per-line form: a line the per-line form matches is a
  line the candidate form finds at its "\\n" (hypothesis, per form). The forms spelt for the joined text
  (drop lines, pytest sections, ``E`` lines) give the per-line form's lines exactly.
- Texts are mixes of the shapes the extractors look for, their near misses, blank lines, indentation, trailing
  spaces, \\r, ANSI codes, non-ASCII letters (the ones case-insensitive matching treats specially too) and long
  lines; plus the small and large corpus and the adversarial texts. Hypothesis is derandomized.
"""

from __future__ import annotations

import json
import re
import runpy
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxlifed.core import testfail
from ctxlifed.core.commands import basename
from ctxlifed.core.lessons import signatures as S
from ctxlifed.core.lessons.signatures import (
    CAUSE_MAX,
    EXCERPT_MAX,
    MAX_SCAN,
    SIG_MAX,
    ErrorInfo,
    _family,
    _normalise,
    cause_of,
    describe_error,
)
from ctxlifed.core.lessons.text import clean

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "bench" / "digest_corpus"
_ADV = runpy.run_path(str(ROOT / "bench" / "_adversarial.py"))
ADVERSARIAL = _ADV["ERROR_TEXTS"] + _ADV["DIGEST_TEXTS"]


# --------------------------------------------------------------------------- reference forms (the plain code)

# The per-line forms are the module's own (this change did not touch them): the references below run
# them the plain way.
_ANSI_RE = S._ANSI_RE
_EXIT_LINE_RE = S._EXIT_LINE_RE
_NOISE_LINE_RE = S._NOISE_LINE_RE
_CWD_NOTE_RE = S._CWD_NOTE_RE
_PYTEST_SUMMARY_RE = S._PYTEST_SUMMARY_RE
_PYTEST_NODE_RE = S._PYTEST_NODE_RE
_E_LINE_RE = S._E_LINE_RE
_PYTEST_SECTION_RE = S._PYTEST_SECTION_RE
_UNITTEST_RE = S._UNITTEST_RE
_GO_FAIL_RE = S._GO_FAIL_RE
_GO_MSG_RE = S._GO_MSG_RE
_CARGO_FAIL_RE = S._CARGO_FAIL_RE
_JEST_BULLET_RE = S._JEST_BULLET_RE
_JEST_FAIL_RE = S._JEST_FAIL_RE
_EXC_RE = S._EXC_RE
_EXC_STRICT_RE = S._EXC_STRICT_RE
_COMPILER_RES = S._COMPILER_RES
_NPM_RE = S._NPM_RE
_NPM_TRIVIAL_RE = S._NPM_TRIVIAL_RE
_SHELL_RE = S._SHELL_RE
_GENERIC_RE = S._GENERIC_RE
_MAKE_RE = S._MAKE_RE
_KEYWORD_RE = S._KEYWORD_RE


def _reference_lines(text: str) -> list[str]:
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


def _reference_pytest_section(lines: list[str], node: str) -> list[str]:
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


def _reference_pytest_line(lines: list[str]) -> str | None:
    for ln in lines:
        m = _PYTEST_SUMMARY_RE.match(ln.strip())
        if not m or not _PYTEST_NODE_RE.search(m.group(2)):
            continue
        word, node, msg = m.group(1), m.group(2), (m.group(3) or "").strip()
        if msg.endswith("...") or not msg:
            e_lines = _reference_pytest_section(lines, node)
            if msg:  # cut to the terminal width: complete it from the untruncated E line
                prefix = msg[:-3].rstrip()
                msg = next((e for e in e_lines if e.startswith(prefix)), prefix)
            else:  # e.g. a collection error: the section's exception line says what broke
                msg = next((e for e in e_lines if _EXC_STRICT_RE.match(e)), e_lines[0] if e_lines else "")
        return f"{word} {node} - {msg}" if msg else f"{word} {node}"
    return None


def _reference_exception_line(lines: list[str], *, after_traceback: bool) -> str | None:
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


def _reference_decisive_line(lines: list[str], tool: str) -> str | None:
    if (r := _reference_pytest_line(lines)) is not None:
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
    if (r := _reference_exception_line(lines, after_traceback=True)) is not None:
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
    if (r := _reference_exception_line(lines, after_traceback=False)) is not None:
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


def _reference_describe_error(error_text: str, *, tool: str | None = None, command: str | None = None,
                   file_path: str | None = None) -> ErrorInfo | None:
    """Signature, excerpt (the decisive line, redacted, <= EXCERPT_MAX) and cause of an error text;
    None when it has no error content. Never raises."""
    try:
        if not isinstance(error_text, str) or not error_text.strip():
            return None
        lines = _reference_lines(error_text)
        line = _reference_decisive_line(lines, tool or "")
        if line is None:
            return None
        body = _normalise(line)
        if not body:
            return None
        sig = f"{_family(tool, command, file_path)}|{body}"
        if len(sig) > SIG_MAX:
            sig = sig[:SIG_MAX]
        excerpt = clean(_CWD_NOTE_RE.sub("", line), EXCERPT_MAX)
        return ErrorInfo(sig, excerpt, _reference_cause_of("\n".join([line, *lines[:100], *lines[-100:]])[:MAX_SCAN]))
    except Exception:  # noqa: BLE001 - a signature must never break the hook path
        return None


_REFERENCE_CAUSES: tuple[tuple[re.Pattern[str], str], ...] = (
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


def _reference_cause_of(text: str) -> str:
    """A short cause when the error says it plainly ("missing module requests"), else ''."""
    if not text:
        return ""
    head = text[:MAX_SCAN]
    for rx, fmt in _REFERENCE_CAUSES:
        m = rx.search(head)
        if m:
            groups = [basename(g) if "file" in fmt else g for g in m.groups()]
            return clean(fmt.format(*groups), CAUSE_MAX)
    return ""


# --------------------------------------------------------------------------- texts

_SHAPES = [
    # pytest
    "FAILED tests/unit/test_x.py::test_a - assert 1 == 2", "FAILED tests/x.py::test_b - AssertionError: ass...",
    "FAILED tests/x.py::test_a - assert 1...", "FAILED tests/x.py::T::test_c[1-2] - ValueError: v", "ERROR tests/x.py",
    "ERROR tests/x.py::test_a - boom...", "ERROR tests/x.py::test_a", "  FAILED x.py::t - a", "FAILED", "FAILED notanode - x",
    "FAILED a.py - ...", "test_x.py::test_a FAILED [ 50%]", "ERROR: x", "ERROR ", "FAILED\tt.py::x\t-\tm",
    "___ test_a ___", "____ test_b ____", "___ T.test_c[1-2] ___", "___ ERROR collecting tests/x.py ___",
    "___ ERROR at setup of test_a ___", "___ x", "___  ___ ___", "_ test_a _", "E   assert 1 == 2",
    "E       AssertionError: assert 1 == 2", "E   ModuleNotFoundError: No module named 'yaml'", "E", "E   ", "Ex",
    "E\tValueError: v", "=== short test summary info ===", "==== 1 failed in 0.12s ====", "===x",
    # unittest, go, cargo, jest
    "FAIL: test_x (mod.Cls.test_x)", "ERROR: test_y (m.C)", "FAIL: x", "FAIL: a (b", "--- FAIL: TestX (0.00s)",
    "    x_test.go:12: got 1 want 2", "  --- FAIL: TestY/sub", "--- FAIL:", "test a::b ... FAILED", "test a ... ok",
    "test x ... FAILED  ", "test  x ... FAILED", "● Suite › name", "  ●  Test suite failed to run", "●x",
    "FAIL src/a.test.js", "  × x > y 3ms", "✕ z", "✗ w", "FAIL", "FAILx y", "×",
    # tracebacks, exceptions
    "Traceback (most recent call last):", "  Traceback (most recent call last):", "x Traceback (most recent call last)",
    '  File "x.py", line 3, in <module>', "ValueError: bad value", "KeyError", "a.b.CustomError: m", "  raise ValueError('x')",
    "except KeyError:", "File x", "SystemExit: 2", "KeyboardInterrupt", "UserWarning: w", "Fault", "xFailure:",
    "E   TypeError: t", "ValueError:", "ValueError: ", "1Error: x", "Error", "Error:x", "_Error", "a..Error: x",
    # compilers, npm, shell, generic, make
    "error[E0432]: unresolved import `foo`", "error: aborting due to 2 previous errors", "error: could not compile `x`",
    "error: x", "  error: indented", "src/a.c:3:5: error: x undeclared", "a.c:3: fatal error: y.h: No such file or directory",
    "a.ts(3,5): error TS2304: Cannot find name 'x'.", "a.ts:3:5 - error TS2322: T", "main.go:3:5: undefined: foo",
    "x.go:1:2: y", "x.go:1: y", "a.c:x: error: y", "a:1:error:", "npm ERR! code E404", "npm ERR! 404 Not Found",
    "npm error missing script: x", "npm ERR! A complete log of this run", "npm ERR! ", "npm warn x",
    "bash: foo: command not found", "sh: 1: foo: not found", "zsh: command not found: bar", "x: not found y",
    "cat: x: No such file or directory", "ls: cannot access 'x': Permission denied", "fatal: not a git repository",
    "Error! y", "panic: runtime error", "ERROR : z", "app.mod: FATAL: q", "x-y.z:  Panic!", "errors: 3", "Fatal",
    "make: *** [Makefile:3: all] Error 1", "make[1]: *** x", "gmake: *** y", "make: ***", "cmake: *** z",
    # keywords, some only case-insensitively, CJK
    "it failed", "Invalid value", "timed out", "cannot do", "错误: x", "操作失败", "xerror", "error_count", "ERRORS",
    "Can't", "Segmentation Fault", "İnvalid", "ınvalid", "ſegmentation fault", "panicKed", "DENİED", "unable to",
    "does not exist", "not found", "aborted.", "REFUSED", "Exception", "无法连接", "找不到", "超时",
    # noise the lines drop
    "Exit code 1", "Error: Exit code 2", "  Exit code -3  ", "Exit code 1 x", "Exit code", "Exit code ١٢",
    "[stderr]", " [stderr] ", "[stderr] x", "<persisted-output>abc", "  </persisted-output>", "x<persisted-output>",
    # causes
    "ModuleNotFoundError: No module named 'a.b'", "Error: Cannot find module 'express'", "Cannot find package 'x'",
    "ImportError: cannot import name 'foo' from 'bar.baz'", "No matching distribution found for foo-bar",
    "error[E0432]: unresolved import `a::b`", "cannot find crate for `core`", "NameError: name 'x' is not defined",
    "Cannot find name 'y'", "undefined: foo", "xundefined: foo", "command not found: y", "sh: 12: z: not found",
    "No such file or directory: '/a/b'", "python: can't open file '/x/y.py': [Errno 2]", "cat: /a/b: No such file or directory",
    "SyntaxError: invalid syntax", "IndentationError: unexpected indent", "xSyntaxError", "Permission denied", "EACCES",
    "Connection refused", "ECONNREFUSED", "EADDRINUSE", "Address already in use", "TimeoutError", "it timed outx",
    ": command not found", "a:b: command not found", "': No such file or directory", "unresolved import `a\nb`",
    "No such file or directory: 'a\nb'",
    # filler
    "ok", "some text here", "a: b", "données invalides", "ı", "İ", "ſ", "K", "\x0b", "\x1c", "\u2028", "\x85", "\xa0",
    "https://example.com/a/b?x=1", "/tmp/tmpab12cd34/x.py:12:5", "2026-01-01T10:00:00Z", "0x1f", "12345", "\u3000x",
]
_CUTS = ["", "", "", " ", "  ", "\t", "    ", "\x1b[31m", "\x1b[0m", "\u3000", "\x0c"]
_SEPS = ["\n", "\n", "\n", "\n", "\r\n", "\r", " \n", "\n\n", "\t\n", "\x0b\n", ""]


@st.composite
def texts(draw: st.DrawFn, max_lines: int = 30) -> str:
    shape = st.one_of(st.sampled_from(_SHAPES), st.text(max_size=12),
                      st.builds(lambda c, n: c * n, st.sampled_from(["x", "a.", ":", " ", "ab12", "_", "Error"]),
                                st.sampled_from([1, 3, 40, 400, 1000, 2000, 2001])))
    parts = []
    for ln in draw(st.lists(shape, max_size=max_lines)):
        parts += [draw(st.sampled_from(_CUTS)), ln, draw(st.sampled_from(_CUTS)), draw(st.sampled_from(_SEPS))]
    return "".join(parts)


def _lines_of(text: str) -> list[str]:
    """Single lines (no "\\n") from a text: what the per-line forms are given."""
    return [ln.replace("\n", " ") for ln in text.split("\n")] or [""]


def _same(text: str) -> None:
    for kw in ({"tool": "Bash", "command": "pytest -q"}, {"tool": "Read", "file_path": "/a/b.py"}, {}):
        assert describe_error(text, **kw) == _reference_describe_error(text, **kw), kw  # type: ignore[arg-type]
    assert S._lines(text) == _reference_lines(text)
    assert cause_of(text) == _reference_cause_of(text)


# --------------------------------------------------------------------------- same results

def _corpus() -> list[tuple[str, dict, str]]:
    return [(f"{m.parent.name}/{m.stem}", json.loads(m.read_text()), m.with_suffix(".txt").read_text())
            for m in sorted(CORPUS.glob("*.json")) + sorted((CORPUS / "large").glob("*.json"))]


@pytest.mark.parametrize("name,meta,text", _corpus(), ids=lambda x: x if isinstance(x, str) and len(x) < 60 else "")
def test_same_results_on_the_corpus(name: str, meta: dict, text: str) -> None:
    got = describe_error(text, tool=meta.get("tool"), command=meta.get("command"))
    assert got == _reference_describe_error(text, tool=meta.get("tool"), command=meta.get("command")), name
    _same(text)


def test_same_results_on_the_adversarial_texts() -> None:
    for text in ADVERSARIAL:
        _same(text)


def test_same_results_on_repeated_lines_and_texts_without_a_newline() -> None:
    for shape in _SHAPES:
        _same((shape + "\n") * 30)  # more lines than _MARK_LINES: the candidate form takes over
        _same(shape * 30)
    _same("x" * 100_000 + "\nTraceback (most recent call last):\nKeyError: 'k'\n" + "y" * 60_000)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(texts())
def test_same_results_on_any_mix(text: str) -> None:
    _same(text)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(_SHAPES), min_size=1, max_size=3), st.lists(st.integers(0, 3), min_size=17, max_size=60),
       st.sampled_from(_SHAPES))
def test_same_results_when_many_lines_hold_a_mark(shapes: list[str], picks: list[int], last: str) -> None:
    """More lines holding a mark than _MARK_LINES: the candidate forms take over part way."""
    _same("\n".join(shapes[i % len(shapes)] for i in picks) + "\n" + last)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(_SHAPES + ["\n", "\n", " ", ": ", "'", "`", "\r"]), max_size=40))
def test_same_results_on_spliced_shapes(parts: list[str]) -> None:
    _same("".join(parts))


@settings(max_examples=25, deadline=None, derandomize=True)
@given(texts(max_lines=120), texts(max_lines=120))
def test_same_results_past_the_scan_limit(head: str, tail: str) -> None:
    """Texts over MAX_SCAN (head and tail kept) and cause texts over it."""
    text = head + "\n" + "filler line\n" * (MAX_SCAN // 12) + tail
    assert describe_error(text, tool="Bash") == _reference_describe_error(text, tool="Bash")
    assert cause_of(text) == _reference_cause_of(text)


# Per extractor: lines that hold its marks but are not its lines, and a line that is.
_NEAR_AND_HIT = [
    ("test_x.py::test_a FAILED [ 10%]", "FAILED t.py::test_b - assert 0"),
    ("FAIL: x", "FAIL: test_a (m.C.test_a)"),
    ("x --- FAIL: TestA", "--- FAIL: TestB (0.00s)\n    b_test.go:3: want 1"),
    ("xtest a ... FAILED", "test b ... FAILED"),
    ("x ● y", "● Suite › b"),
    ("the error: is here", "a.c:1:2: error: x"),
    ("x npm ERR! y", "npm ERR! boom"),
    ("    raise ValueError(x)", "KeyError: 'k'"),
    ("x: not found y", "bash: x: command not found"),
    ("the error is", "Panic: boom"),
    ("FAILx", "FAIL a.test.js"),
    ("x: *** y", "make: *** [a] Error 1"),
    ("xerror_count", "it Failed"),
    ("Exit code 1", "Exit code 1 but not alone"),
]


def test_same_results_when_many_lines_hold_a_mark_before_the_decisive_one() -> None:
    for near, hit in _NEAR_AND_HIT:
        for n in (S._MARK_LINES - 1, S._MARK_LINES, S._MARK_LINES + 1, S._MARK_LINES + 5):
            _same("\n".join([near] * n + [hit, near, hit]))
            _same("Traceback (most recent call last):\n" + "\n".join([near] * n + [hit, "xError", hit + "x"]))


@st.composite
def pytest_outputs(draw: st.DrawFn) -> str:
    """A pytest run: report sections (setup errors, collection errors, other tests') with their E lines, then
    summary lines cut at any width."""
    names = draw(st.lists(st.sampled_from(["test_a", "test_b", "T.test_c", "test_d[1-2]", "tests/y.py"]),
                          min_size=1, max_size=4))
    out = ["=== FAILURES ==="]
    for name in names:
        title = draw(st.sampled_from([name, f"ERROR at setup of {name}", f"ERROR collecting {name}", "other"]))
        out.append(f"{'_' * draw(st.integers(3, 5))} {title} {'_' * draw(st.integers(3, 5))}")
        out += draw(st.lists(st.sampled_from([f"E   AssertionError: {name} one", f"E   ValueError: {name} two",
                                              f"E   AssertionError: {name} one", "E   assert 1 == 2", "    def f():",
                                              "===", "E"]), min_size=1, max_size=4))
    out.append("=== short test summary info ===")
    for name in names:
        node = name if "/" in name else "tests/x.py::" + name.replace(".", "::")
        msg = draw(st.sampled_from([f"AssertionError: {name} one", f"ValueError: {name} two", "", "assert 1 == 2"]))
        line = f"{draw(st.sampled_from(['FAILED', 'ERROR']))} {node}" + (f" - {msg}" if msg else "")
        cut = draw(st.integers(10, len(line) + 3))
        out.append(line if cut >= len(line) else line[:cut] + "...")
    return "\n".join(out)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(pytest_outputs())
def test_same_results_on_pytest_runs(text: str) -> None:
    _same(text)


@pytest.mark.parametrize("section", [
    ["E   AssertionError: test_a one", "E   assert 1 == 2"],
    ["    def test_a():", "E   AssertionError: test_a one", "===", "E   assert 1 == 2"],
    ["E   assert 1 == 2", "E   AssertionError: test_a one"],
    ["E   ValueError: v", "E   AssertionError: test_a one"],
])
@pytest.mark.parametrize("summary", ["FAILED tests/x.py::test_a - Asser...", "ERROR tests/x.py::test_a",
                                     "FAILED tests/x.py::test_a - assert 1 ...", "FAILED tests/x.py::test_a - V..."])
def test_same_results_on_truncated_pytest_summaries(section: list[str], summary: str) -> None:
    """The message is completed from the E lines of the test's own section (those right after its title too)."""
    for title in ("___ test_a ___", "____ ERROR at setup of test_a ____", "___ test_b ___"):
        _same("\n".join(["=== FAILURES ===", "___ other ___", "E   other", title, *section, "___ test_z ___",
                         "E   AssertionError: test_a onex", "=== short test summary info ===", summary]))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(["--- FAIL: TestA (0.00s)", "    a_test.go:3: got 1", "  --- FAIL: TestA/sub",
                                 "        a_test.go:9: want 2", "=== RUN   TestA", "FAIL", "ok  \tpkg\t0.1s", ""]),
                min_size=1, max_size=12))
def test_same_results_on_go_runs(lines: list[str]) -> None:
    _same("\n".join(lines))


# --------------------------------------------------------------------------- candidate forms vs per-line forms

def _stripped(rx: re.Pattern[str]) -> Callable[[str], re.Match[str] | None]:
    return lambda ln: rx.match(ln.strip())


_SUPERSETS = [  # (per-line check, candidate form)
    (_stripped(S._PYTEST_SUMMARY_RE), S._PYTEST_SUMMARY_AT),
    (S._UNITTEST_RE.match, S._UNITTEST_AT),
    (S._GO_FAIL_RE.match, S._GO_FAIL_AT),
    (S._CARGO_FAIL_RE.match, S._CARGO_FAIL_AT),
    (S._JEST_BULLET_RE.match, S._JEST_BULLET_AT),
    (S._EXC_STRICT_RE.match, S._EXC_STRICT_AT),
    (lambda ln: any(rx.match(ln.strip()) for rx in S._COMPILER_RES), S._COMPILER_AT),
    (_stripped(S._NPM_RE), S._NPM_AT),
    (S._EXC_RE.match, S._EXC_AT),
    (S._SHELL_RE.search, S._SHELL_AT),
    (_stripped(S._GENERIC_RE), S._GENERIC_AT),
    (S._JEST_FAIL_RE.match, S._JEST_FAIL_AT),
    (_stripped(S._MAKE_RE), S._MAKE_AT),
]
_MARKS = [  # (per-line check, marks one of which every line it matches holds)
    (_stripped(S._PYTEST_SUMMARY_RE), ("FAILED", "ERROR")),
    (S._UNITTEST_RE.match, ("FAIL: ", "ERROR: ")),
    (S._GO_FAIL_RE.match, ("--- FAIL: ",)),
    (S._CARGO_FAIL_RE.match, (" ... FAILED",)),
    (S._JEST_BULLET_RE.match, ("●",)),
    (S._EXC_STRICT_RE.match, S._EXC_WORDS),
    (lambda ln: any(rx.match(ln.strip()) for rx in S._COMPILER_RES), S._COMPILER_MARKS),
    (_stripped(S._NPM_RE), ("npm ",)),
    (S._EXC_RE.match, S._EXC_WORDS),
    (S._SHELL_RE.search, S._SHELL_MARKS),
    (_stripped(S._GENERIC_RE), S._GENERIC_MARKS),
    (S._JEST_FAIL_RE.match, ("FAIL", "×", "✗", "✕")),
    (_stripped(S._MAKE_RE), (": ***",)),
    (lambda ln: S._EXIT_LINE_RE.match(ln.strip()) or S._NOISE_LINE_RE.match(ln.strip()), S._DROP_MARKS),
]
_LOWERED_MARKS = [(S._KEYWORD_RE.search, S._KEYWORD_MARKS + S._KEYWORD_MARKS_CJK)]  # ... in the line _lowered


def _check_supersets(line: str) -> None:
    for check, rx in _SUPERSETS:
        if check(line):
            assert rx.match("\n" + line), (rx.pattern, line)
    for check, marks in _MARKS:
        if check(line):
            assert any(m in line for m in marks), (marks, line)
    low = S._lowered(line)
    for check, marks in _LOWERED_MARKS:
        if check(line):
            assert any(m in low for m in marks), (marks, line)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(texts(max_lines=12))
def test_candidate_forms_and_marks_find_every_line_of_their_per_line_form(text: str) -> None:
    for line in _lines_of(text):
        _check_supersets(line)
        _check_supersets(line.strip())


def test_candidate_forms_and_marks_on_the_shapes_and_corpus() -> None:
    for shape in _SHAPES:
        for line in _lines_of(shape):
            for cut in _CUTS:
                _check_supersets(cut + line + cut)
    for _name, _meta, text in _corpus():
        for line in S._lines(text):
            _check_supersets(line)


def _joined_lines(rx: re.Pattern[str], text: str) -> list[tuple[int, tuple[str | None, ...]]]:
    """(line number, groups) of each match of a form spelt for the joined text ("\\n" + text)."""
    nb = "\n" + text
    return [(nb.count("\n", 0, m.start() + 1), m.groups()) for m in rx.finditer(nb)]


def _per_line(rx: re.Pattern[str], text: str) -> list[tuple[int, tuple[str | None, ...]]]:
    out = []
    for i, ln in enumerate(text.split("\n"), 1):
        if m := rx.match(ln):
            out.append((i, m.groups()))
    return out


@settings(max_examples=200, deadline=None, derandomize=True)
@given(texts(max_lines=20))
def test_joined_forms_give_the_lines_of_their_per_line_forms(text: str) -> None:
    text = text.replace("\r", "\n")
    drop = [(i, ()) for i, ln in enumerate(text.split("\n"), 1)
            if S._EXIT_LINE_RE.match(ln.strip()) or S._NOISE_LINE_RE.match(ln.strip())]
    assert [(i, ()) for i, _g in _joined_lines(S._DROP_LINE_RE, text)] == drop
    assert _joined_lines(S._PYTEST_SECTION_AT, text) == _per_line(S._PYTEST_SECTION_RE, text)
    assert _joined_lines(S._E_LINE_AT, text) == _per_line(S._E_LINE_RE, text)
    ends = [(i, ()) for i, ln in enumerate(text.split("\n"), 1) if S._PYTEST_SECTION_RE.match(ln) or ln.startswith("===")]
    assert [(i, ()) for i, _g in _joined_lines(S._PYTEST_SECTION_END_AT, text)] == ends


def _plain_keyword_line(text: str) -> str | None:
    for ln in text.split("\n"):
        if S._KEYWORD_RE.search(ln):
            return ln.strip()
    return None


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(_SHAPES + ["\n", "\n", " ", "x", "_", "İ", "ẞ", "ǅ", "ΐ", "ﬀ", "Σ"]), max_size=30))
def test_keyword_line_is_the_first_line_with_a_keyword(parts: list[str]) -> None:
    nb = "\n" + "".join(parts)
    low = S._lowered(nb)
    gone = tuple(r for r in S._ROOTS if r not in low)
    assert S._keyword_line(nb, low, gone) == _plain_keyword_line(nb)


def test_case_insensitive_letters_of_the_marks_are_their_lower_case_in_lowered() -> None:
    """Every character (?i) matches to a letter of a keyword mark is that letter in _lowered (so a keyword match
    starts where a mark is in the lowered text), and the text's places stay where lower-casing keeps lengths."""
    letters = sorted({c for m in S._KEYWORD_MARKS for c in m if c.isalpha()})
    every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
    for letter in letters:
        for c in re.findall(f"(?i:{letter})", every):
            assert S._lowered(c) == letter, (letter, hex(ord(c)))
    assert len(S._lowered("İ")) == 1 and S._lowered("ı") == "i" and S._lowered("ſ") == "s"


def _plain_cause_match(rx: re.Pattern[str], text: str) -> tuple[int, tuple[str | None, ...]] | None:
    m = rx.search(text)
    return (m.start(), m.groups()) if m else None


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(_SHAPES + ["\n", "\n", " ", ":", "'", "`", "x", "a b", "\t"]), max_size=30))
def test_cause_patterns_looked_for_by_marks_find_the_plain_first_match(parts: list[str]) -> None:
    text = "".join(parts)
    for rx, _fmt, marks, by_line in S._CAUSES:
        m = S._cause_match(rx, text, marks, by_line)
        assert ((m.start(), m.groups()) if m else None) == _plain_cause_match(rx, text), rx.pattern


def test_cause_patterns_are_the_plain_ones() -> None:
    assert [(rx.pattern, rx.flags, fmt) for rx, fmt, _m, _b in S._CAUSES] == \
        [(rx.pattern, rx.flags, fmt) for rx, fmt in _REFERENCE_CAUSES]


def test_testfail_sees_the_same_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """The decisive line hands testfail the lines joined, as before."""
    seen: list[str] = []
    monkeypatch.setattr(testfail, "failure_lines", lambda t: seen.append(t) or [])
    describe_error("  hello\n\nsome output\t\nExit code 1\n", tool="Bash")
    assert seen == ["  hello\nsome output"]


def test_keyword_line_when_lower_casing_moves_places() -> None:
    nb = "\nİİ x\nİ failed here\nerror"
    assert len(nb.lower()) != len(nb)
    assert S._keyword_line(nb, nb.lower(), ()) == "İ failed here" == _plain_keyword_line(nb)
