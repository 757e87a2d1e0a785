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
  -> ``ClassTest.method``.
- :func:`failure_lines`: ``(id, error line)`` pairs; the error line is the first assertion or error
  line the runner printed for that test (pytest ``E`` lines, ``AssertionError``, ``expected``...),
  "" when none is found.
"""

from __future__ import annotations

import re

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


def _lines(text: str) -> list[str]:
    if len(text) > MAX_SCAN:
        text = text[: MAX_SCAN // 4] + "\n" + text[-(MAX_SCAN * 3 // 4) :]
    text = _ANSI_RE.sub("", text).replace("\r\n", "\n").replace("\r", "\n")
    return [_PREFIX_RE.sub("", ln.rstrip()) for ln in text.split("\n")]


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


def _find_section(lines: list[str], key: str) -> int:
    """Index of the line that opens the report of ``key`` (pytest ``___ test_y ___``, unittest
    ``FAIL: test_y``, jest ``● …``), else -1."""
    for i, ln in enumerate(lines):
        if key in ln and (ln.startswith(("___", "FAIL:", "ERROR:", "  ●", "●", "--- FAIL", "  1)", "1)"))
                          or ln.strip().startswith(("●", "Failures:", "1)"))):
            return i
    return -1


def failure_lines(output: str) -> list[tuple[str, str]]:
    """``(test id, first error line)`` for every failing test the output reports (module rules)."""
    if not output:
        return []
    lines = _lines(output)
    found: dict[str, str] = {}

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
    for i, ln in enumerate(lines):
        s = ln.strip()
        if mocha_pending is not None:
            j, head = mocha_pending
            mocha_pending = None
            c = _MOCHA_CONT_RE.match(ln)
            if c and c.group(2):
                add(f"{head} {c.group(1)}", at=i)
                continue
            if head.endswith(":"):
                add(head[:-1], at=j)
        if m := _PYTEST_RE.match(s):
            node, msg = m.group(1), (m.group(2) or "")
            if msg.endswith("..."):
                msg = ""
            sec = _find_section(lines, node.split("::")[-1]) if "::" in node else -1
            add(node, msg, sec)
        elif m := _PYTEST_V_RE.match(s):
            add(m.group(1))
        elif m := _UNITTEST_RE.match(s):
            add(f"{m.group(2)}.{m.group(1)}", at=i)
        elif m := _GO_RE.match(ln):
            add(m.group(1), _go_error(lines, i, m.group(1)))
        elif m := _CARGO_RE.match(s):
            sec = next((k for k, x in enumerate(lines) if x.startswith(f"---- {m.group(1)} ")), -1)
            add(m.group(1), at=sec)
        elif m := _NEXTEST_RE.match(ln):
            sec = next((k for k, x in enumerate(lines) if m.group(1) in x and "STDERR" in x), i)
            add(m.group(1), at=sec)
        elif m := _VITEST_RE.match(ln):
            add(m.group(2).replace(" > ", " › "), at=i)
        elif m := _JEST_BULLET_RE.match(ln):
            if "Test suite failed to run" not in m.group(1) and not s.startswith("● Console"):
                add(m.group(1).replace(" > ", " › "), at=i)
        elif m := _RSPEC_RE.match(s):
            add(m.group(1), at=_find_section(lines, m.group(2)))
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
    if not found:  # jest / vitest without per-test lines: the failing file
        for ln in lines:
            if m := _JEST_FILE_RE.match(ln):
                add(m.group(1))
    return list(found.items())


def failing_tests(output: str) -> list[str]:
    """The ids of the failing tests ``output`` reports, in order (module rules)."""
    return [tid for tid, _err in failure_lines(output)]
