"""Failing tests in a test runner's output: their ids and first error lines, for every common runner.

Rules:
- Pure: no I/O; regexes compiled at import; ANSI colour codes dropped; at most :data:`MAX_SCAN`
  characters read (head and tail), at most :data:`MAX_FAILS` ids returned, each at most
  :data:`MAX_ID` characters, deduplicated, in order of appearance.
- A wrapper (make, npm/pnpm/yarn test, tox, nox, uv run, just, Maven, Gradle) prints the runner's own
  lines, possibly behind a prefix it adds (``[ERROR]`` of Maven, ``py311: `` of tox, ``nox > ``), so
  lines are matched wherever they appear and such prefixes are cut first.
- Ids per runner (the form a user would type to run the test again where there is one):
  pytest ``FAILED|ERROR tests/x.py::test_y`` -> ``tests/x.py::test_y``; unittest ``FAIL: test_y
  (mod.Class...)`` -> ``mod.Class.test_y``; go ``--- FAIL: TestX`` -> ``TestX``; cargo ``test a::b ...
  FAILED`` and nextest ``FAIL [ 0.01s] crate a::b`` -> ``a::b``; jest/vitest ``● Suite › name`` and
  ``FAIL|× file > suite > name`` -> ``Suite › name`` (the file alone when only ``FAIL file`` is there);
  mocha ``1) suite`` + indented name -> ``suite name``; rspec ``rspec ./spec/x_spec.rb:12 # desc`` ->
  ``./spec/x_spec.rb:12``; phpunit ``1) Tests\\FooTest::testBar`` -> ``Tests\\FooTest::testBar``;
  dotnet ``Failed Ns.Class.Method [12 ms]`` -> ``Ns.Class.Method``; Maven surefire ``Class.method:12``
  lines under ``Failures:`` / ``Errors:`` -> ``Class.method``; Gradle ``ClassTest > method() FAILED``
  -> ``ClassTest.method``; TAP (``node --test`` in a pipe, tap, prove) ``not ok 2 - name`` -> ``name``,
  ``suite › name`` when nested under ``# Subtest: suite``; a ``# TODO``/``# SKIP`` line is not a
  failure, nor a suite that fails only through its subtests (node's ``failureType: 'subtestsFailed'``).
- :func:`failure_lines`: ``(id, error line)`` pairs; the error line is the first assertion or error
  line the runner printed for that test (pytest ``E`` lines, ``AssertionError``, ``expected``...; TAP:
  the ``error:`` of the test's YAML block, a block scalar's lines joined), "" when none is found.
- Linear in the output: a line is run through the runners' forms only when it holds one of their marks
  (:data:`_MARKS`: every form needs one of these words somewhere on its line), or when the line before
  left a state the next line completes (a mocha title, a Maven list); the places a test's report starts
  (pytest/rspec section heads, cargo ``---- name`` blocks, nextest ``STDERR`` heads, TAP ``# Subtest:``
  heads) are indexed once, when first needed; the scan stops at :data:`MAX_FAILS` ids (no
  later line can change the result). A wrapper's prefix is cut only from the lines that start with one.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right

__all__ = ["MAX_FAILS", "failing_tests", "failure_lines"]

MAX_SCAN = 256 * 1024
MAX_FAILS = 16
MAX_ID = 200
MAX_ERR = 200

_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_PREFIX_RE = re.compile(r"^(?:\[(?:ERROR|INFO|WARNING)\]\s+|[\w.-]+:\s+(?=FAILED |ERROR )|nox > )")

_PYTEST_RE = re.compile(r"^(?:FAILED|ERROR)\s+(\S+?\.py(?:::\S+)?)(?:\s+-\s+(.*))?$")
_PYTEST_V_RE = re.compile(r"^(\S+\.py::\S+)\s+(?:FAILED|ERROR)\b")
_UNITTEST_RE = re.compile(r"^(?:FAIL|ERROR): (\w+) \(([\w.]+?)(?:\.\1)?\)")
_GO_RE = re.compile(r"^\s*--- FAIL: (\S+)")
_CARGO_RE = re.compile(r"^test (\S+) \.\.\. FAILED\s*$")
_NEXTEST_RE = re.compile(r"^\s*(?:FAIL|SIGSEGV|SIGABRT|TIMEOUT) \[\s*[\d.]+s\]\s+(?:\(\s*\d+/\d+\)\s+)?(?:\S+\s+)?(\S+::\S+|\S+)$")
_JEST_BULLET_RE = re.compile(r"^\s*● (.+?)\s*$")
_VITEST_RE = re.compile(r"^\s*(?:FAIL|×|✗|✕)\s+(\S+\.(?:[cm]?[jt]sx?))\s+>\s+(.+?)(?:\s+\d+ms)?\s*$")
_JEST_FILE_RE = re.compile(r"^\s*FAIL\s+(\S+\.(?:[cm]?[jt]sx?))\s*(?:\(.*\))?$")
_MOCHA_RE = re.compile(r"^\s{2}(\d+)\) (.+?)(:)?\s*$")
_MOCHA_CONT_RE = re.compile(r"^\s{5,}(\S.*?)(:)?\s*$")
_RSPEC_RE = re.compile(r"^rspec (\S+:\d+) # (.+)$")
_PHPUNIT_RE = re.compile(r"^\d+\) ([\w\\]+::\w+)(?: with data set .*)?$")
_DOTNET_RE = re.compile(r"^\s*Failed ([\w.+`<>]+(?:\(.*\))?) \[[^\]]+\]\s*$")
_MAVEN_HEAD_RE = re.compile(r"^(?:Failed tests|Tests in error|Failures|Errors):\s*$")
_MAVEN_RE = re.compile(r"^\s*(?:Run \d+: )?([\w$.]+)\.(\w+)(?::\d+)?(?:\s+(.*))?$")
_MAVEN_OLD_RE = re.compile(r"^\s*(\w+)\(([\w$.]+)\)(?::\s*(.*))?$")
_GRADLE_RE = re.compile(r"^([\w$.]+) > (.+?)(?:\(\))? FAILED$")
_TAP_RE = re.compile(r"^([ \t]*)not ok \d+(?:[ \t]+-)?[ \t]*(.*?)[ \t]*$")
_TAP_COMMENT_RE = re.compile(r"[ \t]*(?<!\\)#")  # a description ends at an unescaped "#"
_TAP_DIRECTIVE_RE = re.compile(r"[ \t]*(?:todo|skip)\b", re.I)
_TAP_SUBTEST_RE = re.compile(r"^([ \t]*)# Subtest: (.+)$")
_TAP_KEY_RE = re.compile(r"^([ \t]*)(error|message|failureType):[ \t]*(.*)$")
TAP_BLOCK = 80  # lines of a TAP test's YAML block read for its error

_ERR_RE = re.compile(
    r"^\s*E\s+(\S.*)$"
    r"|^\s*((?:[\w.]+\.)?\w*(?:Error|Exception|Failure|Failed)\b:?.*\S)$"
    r"|^\s*(expected[: ].*\S|Expected[: ].*\S|assert(?:ion)?\b.*\S|panicked at .*\S|thread '.*' panicked.*)$"
    r"|^\s*(\S+\.go:\d+: .*\S)$"
)


_LABEL_RE = re.compile(r"^\s*(?:Error Message|Stack Trace|Failure/Error):?\s*$")
_GO_RUN_RE = re.compile(r"^=== RUN\s+(\S+)")


def _go_error(lines: list[str], i: int, name: str) -> str:
    """go test: the message is indented right after ``--- FAIL`` (plain), or printed before it,
    after ``=== RUN   <name>`` (``-v``)."""
    for ln in lines[i + 1 : i + 20]:
        if not ln.startswith((" ", "\t")) or ln.lstrip().startswith("--- "):
            break
        if m := _ERR_RE.match(ln):
            return _clip(next(g for g in m.groups() if g), MAX_ERR)
    for k in range(i - 1, max(-1, i - 200), -1):
        r = _GO_RUN_RE.match(lines[k])
        if r:
            if r.group(1) != name:
                continue
            for ln in lines[k + 1 : i]:
                if (m := _ERR_RE.match(ln)) and not ln.lstrip().startswith(("--- ", "=== ")):
                    return _clip(next(g for g in m.groups() if g), MAX_ERR)
            break
    return ""


# Every runner form above needs one of these marks on its line: FAILED/FAIL/Failed/Failures,
# ERROR/Errors, Tests in error, TIMEOUT, SIGSEGV/SIGABRT, ``rspec ``, a ``1) `` number, ``not ok ``, and
# (in a text that is not all ASCII) a × ✗ ✕ ● mark. A line without any of them matches none. Each mark
# is found by its own literal (the engine's fast literal scan; one alternation would be tried at every
# character), and a match takes the rest of its line, so each pattern matches a line at most once.
_MARKS = (r"F(?:AIL|ail)", r"E(?:RROR|rrors)", r"T(?:ests in error|IMEOUT)", r"SIG(?:SEGV|ABRT)", r"rspec ",
          r"\) (?<=\d\) )", r"not ok ")
_MARK_RES = tuple(re.compile(mark + r"[^\n]*+") for mark in _MARKS)
_WIDE_MARK_RES = _MARK_RES + tuple(re.compile(mark + r"[^\n]*+") for mark in "×✗✕●")
# A wrapper's prefix (``_PREFIX_RE``) starts a line with ``[ERROR]``/``[INFO]``/``[WARNING]`` or ``nox > ``,
# or is a ``name: `` before ``FAILED ``/``ERROR `` (a marked line): the lines it is cut from.
_PREFIXED_RES = (re.compile(r"\n\[(?=(?:ERROR|INFO|WARNING)\])"), re.compile(r"\nnox > "))


def _tap_name(description: str) -> str:
    """A failing TAP test's name: its description up to an unescaped ``#`` (what follows is a directive or a
    comment such as ``# time=12ms``); '' when there is none, or when the directive is TODO or SKIP (an
    expected failure, not one)."""
    parts = _TAP_COMMENT_RE.split(description, 1)
    if len(parts) == 2 and _TAP_DIRECTIVE_RE.match(parts[1]):
        return ""
    return parts[0].strip()


def _tap_unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1].replace("''", "'")
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return value


def _tap_error(lines: list[str], i: int) -> str | None:
    """The error of the TAP test reported on line ``i``, from the YAML block after it (``---`` ... ``...``):
    ``error:`` (a quoted or plain value, or a block scalar's lines joined), else ``message:``, else "".
    None when the block says the test failed only through its subtests."""
    if i + 1 >= len(lines) or lines[i + 1].strip() != "---":
        return ""
    found: dict[str, str] = {}
    key, indent, block = "", -1, []
    for ln in lines[i + 2 : i + 2 + TAP_BLOCK]:
        if ln.strip() == "...":
            break
        if key:  # inside a block scalar: its lines are indented past its key
            if not ln.strip() or len(ln) - len(ln.lstrip()) > indent:
                if ln.strip():
                    block.append(ln.strip())
                continue
            found.setdefault(key, " ".join(block))
            key = ""
        m = _TAP_KEY_RE.match(ln)
        if m is None:
            continue
        name, value = m.group(2), m.group(3).strip()
        if value in ("|", "|-", "|+", ">", ">-", ">+"):
            key, indent, block = name, len(m.group(1)), []
        else:
            found.setdefault(name, _tap_unquote(value))
    if key:
        found.setdefault(key, " ".join(block))
    if found.get("failureType") == "subtestsFailed":
        return None
    return found.get("error") or found.get("message") or ""


def _clean(text: str) -> str:
    """The text read: its head and tail past MAX_SCAN, without ANSI codes, with ``\\n`` line ends."""
    if len(text) > MAX_SCAN:
        text = text[: MAX_SCAN // 4] + "\n" + text[-(MAX_SCAN * 3 // 4) :]
    if "\x1b" in text:
        text = _ANSI_RE.sub("", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def _split(text: str, marked: list[int]) -> list[str]:
    """The lines of a cleaned text, right-stripped, a wrapper's prefix cut (``marked``: the marked lines)."""
    lines = [ln.rstrip() for ln in text.split("\n")]
    nb = "\n" + text
    prefixed = _rows(nb, [m.start() for rx in _PREFIXED_RES for m in rx.finditer(nb)])
    for i in sorted(set(marked).union(prefixed)):
        lines[i] = _PREFIX_RE.sub("", lines[i])
    return lines


def _marked(text: str) -> list[int]:
    """The indexes of the lines holding a runner's mark, ascending."""
    rxs = _MARK_RES if text.isascii() else _WIDE_MARK_RES
    return _rows(text, [m.start() for rx in rxs for m in rx.finditer(text)])


def _rows(text: str, offsets: list[int]) -> list[int]:
    """The distinct line indexes, ascending, of the ``offsets`` in ``text``: an offset is on the line
    numbered by the newlines before it (in ``"\\n" + text``, the offset of a newline names the line that
    newline starts)."""
    rows: list[int] = []
    row = prev = 0
    for p in sorted(offsets):
        row += text.count("\n", prev, p)
        prev = p
        if not rows or rows[-1] != row:
            rows.append(row)
    return rows


def _clip(s: str, n: int) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1] + "…"


def _error_after(lines: list[str], i: int, stop: int = 40) -> str:
    for ln in lines[i + 1 : i + 1 + stop]:
        if _LABEL_RE.match(ln):
            continue
        m = _ERR_RE.match(ln)
        if m:
            return _clip(next(g for g in m.groups() if g), MAX_ERR)
    return ""


_SECTION_HEADS = ("___", "FAIL:", "ERROR:", "  ●", "●", "--- FAIL", "  1)", "1)")
_SECTION_HEADS_STRIPPED = ("●", "Failures:", "1)")


class _Sections:
    """Where a failing test's report starts, looked up by key; each index is built once, when first
    needed (most outputs need none of them)."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self._heads: list[tuple[int, str]] | None = None
        self._cargo: dict[str, int] | None = None
        self._stderr: list[tuple[int, str]] | None = None
        self._subtests: tuple[list[int], list[int], list[str], list[int]] | None = None
        self._section_of: dict[str, int] = {}
        self._stderr_of: dict[str, int] = {}

    def section(self, key: str) -> int:
        """Index of the line that opens the report of ``key`` (pytest ``___ test_y ___``, unittest
        ``FAIL: test_y``, jest ``● …``), else -1: the first such head holding ``key``."""
        if key not in self._section_of:
            if self._heads is None:
                self._heads = [(i, ln) for i, ln in enumerate(self.lines)
                               if ln.startswith(_SECTION_HEADS) or ln.strip().startswith(_SECTION_HEADS_STRIPPED)]
            self._section_of[key] = next((i for i, ln in self._heads if key in ln), -1)
        return self._section_of[key]

    def cargo(self, name: str) -> int:
        """cargo: the line ``---- <name> stdout ----`` (the first starting ``---- <name> ``), else -1."""
        if self._cargo is None:
            self._cargo = {}
            for i, ln in enumerate(self.lines):
                if ln.startswith("---- "):
                    j = ln.find(" ", 5)
                    if j > 5:
                        self._cargo.setdefault(ln[5:j], i)
        return self._cargo.get(name, -1)

    def tap_id(self, i: int, indent: str, name: str) -> str:
        """The TAP test ``name`` on line ``i``, behind the ``# Subtest:`` names it is nested in (``suite ›
        name``): the nearest head above it indented less, then that head's own, and so on."""
        if not indent:
            return name
        if self._subtests is None:
            rows: list[int] = []
            depths: list[int] = []
            names: list[str] = []
            parents: list[int] = []  # per head, the nearest head above it indented less (-1: none)
            open_: list[int] = []
            for k, ln in enumerate(self.lines):
                if "# Subtest: " in ln and (m := _TAP_SUBTEST_RE.match(ln)) is not None:
                    depth = len(m.group(1))
                    while open_ and depths[open_[-1]] >= depth:
                        open_.pop()
                    parents.append(open_[-1] if open_ else -1)
                    open_.append(len(rows))
                    rows.append(k)
                    depths.append(depth)
                    names.append(m.group(2).strip())
            self._subtests = (rows, depths, names, parents)
        rows, depths, names, parents = self._subtests
        parts = [name]
        depth = len(indent)
        h = bisect_left(rows, i) - 1
        while h >= 0 and depth > 0:  # up the chain of heads: a head indented as deep or deeper is a sibling's
            if depths[h] < depth:
                parts.append(names[h])
                depth = depths[h]
            h = parents[h]
        return " › ".join(reversed(parts))

    def nextest(self, name: str, default: int) -> int:
        """nextest: the first ``STDERR`` head naming ``name``, else ``default``."""
        if name not in self._stderr_of:
            if self._stderr is None:
                self._stderr = [(i, ln) for i, ln in enumerate(self.lines) if "STDERR" in ln]
            self._stderr_of[name] = next((i for i, ln in self._stderr if name in ln), -1)
        found = self._stderr_of[name]
        return default if found < 0 else found


def failure_lines(output: str) -> list[tuple[str, str]]:
    """``(test id, first error line)`` for every failing test the output reports (module rules)."""
    if not output:
        return []
    text = _clean(output)
    marked = _marked(text)
    lines = _split(text, marked)
    sections = _Sections(lines)
    found: dict[str, str] = {}

    def wanted(tid: str) -> str:
        """``tid`` as stored when one more line about it could change the result, else ''."""
        tid = _clip(tid.strip(), MAX_ID)
        if not tid or (tid in found and found[tid]):
            return ""
        return tid

    def add(tid: str, err: str = "", at: int = -1) -> None:
        tid = _clip(tid.strip(), MAX_ID)
        if not tid or len(found) >= MAX_FAILS:
            return
        if not err and at >= 0:
            err = _error_after(lines, at)
        if tid not in found or (err and not found[tid]):
            found[tid] = _clip(err, MAX_ERR) if err else ""

    maven = False
    mocha_pending: tuple[int, str] | None = None
    n = len(lines)
    k = 0  # marked[k] is the next marked line

    def next_line(i: int) -> int:
        """The line read after line ``i``: the next one while a state spans lines, else the next marked one."""
        nonlocal k
        if maven or mocha_pending is not None:
            return i + 1
        k = bisect_right(marked, i, k)
        return marked[k] if k < len(marked) else n

    i = next_line(-1)
    while i < n and len(found) < MAX_FAILS:
        ln = lines[i]
        s = ln.strip()
        if mocha_pending is not None:
            j, head = mocha_pending
            mocha_pending = None
            c = _MOCHA_CONT_RE.match(ln)
            if c and c.group(2):
                add(f"{head} {c.group(1)}", at=i)
                i = next_line(i)
                continue
            if head.endswith(":"):
                add(head[:-1], at=j)
        if m := _PYTEST_RE.match(s):
            node, msg = m.group(1), (m.group(2) or "")
            if msg.endswith("..."):
                msg = ""
            if wanted(node):
                sec = sections.section(node.split("::")[-1]) if "::" in node and not msg else -1
                add(node, msg, sec)
        elif m := _PYTEST_V_RE.match(s):
            add(m.group(1))
        elif m := _UNITTEST_RE.match(s):
            add(f"{m.group(2)}.{m.group(1)}", at=i)
        elif m := _GO_RE.match(ln):
            if wanted(m.group(1)):
                add(m.group(1), _go_error(lines, i, m.group(1)))
        elif m := _TAP_RE.match(ln):
            if name := _tap_name(m.group(2)):
                tid = sections.tap_id(i, m.group(1), name)
                if wanted(tid) and (err := _tap_error(lines, i)) is not None:
                    add(tid, err)
        elif m := _CARGO_RE.match(s):
            if wanted(m.group(1)):
                add(m.group(1), at=sections.cargo(m.group(1)))
        elif m := _NEXTEST_RE.match(ln):
            if wanted(m.group(1)):
                add(m.group(1), at=sections.nextest(m.group(1), i))
        elif m := _VITEST_RE.match(ln):
            add(m.group(2).replace(" > ", " › "), at=i)
        elif m := _JEST_BULLET_RE.match(ln):
            if "Test suite failed to run" not in m.group(1) and not s.startswith("● Console"):
                add(m.group(1).replace(" > ", " › "), at=i)
        elif m := _RSPEC_RE.match(s):
            if wanted(m.group(1)):
                add(m.group(1), at=sections.section(m.group(2)))
        elif m := _PHPUNIT_RE.match(s):
            add(m.group(1), at=i)
        elif m := _DOTNET_RE.match(ln):
            add(m.group(1), at=i)
        elif m := _GRADLE_RE.match(s):
            add(f"{m.group(1)}.{m.group(2)}", at=i)
        elif _MAVEN_HEAD_RE.match(s):
            maven = True
        elif maven and (m := _MAVEN_RE.match(ln)) and not s.startswith(("at ", "Tests run")):
            add(f"{m.group(1)}.{m.group(2)}", m.group(3) or "")
        elif maven and (m := _MAVEN_OLD_RE.match(ln)):
            add(f"{m.group(2)}.{m.group(1)}", m.group(3) or "")
        elif m := _MOCHA_RE.match(ln):
            mocha_pending = (i, m.group(2) + (":" if m.group(3) else ""))
        elif maven and (not s or s.startswith("Tests run")):
            maven = False
        i = next_line(i)
    if not found:  # jest / vitest without per-test lines: the failing file
        for i in marked:
            if m := _JEST_FILE_RE.match(lines[i]):
                add(m.group(1))
    return list(found.items())


def failing_tests(output: str) -> list[str]:
    """The ids of the failing tests ``output`` reports, in order (module rules)."""
    return [tid for tid, _err in failure_lines(output)]
