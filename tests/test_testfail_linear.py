"""testfail.failure_lines reads only the lines that hold a runner's mark, indexes report heads once and
stops at MAX_FAILS ids: the same result as the plain reading below (every line through every form, a
linear search for each report head), on the runner captures, the digest corpus and random mixes of
runner lines, near-misses, wrapper prefixes, blank lines and states that span lines (mocha, Maven)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxlifed.core import testfail as T

ROOT = Path(__file__).resolve().parent.parent


# ---- the plain reading (the implementation before the gate), the reference form --------------------

def _plain_lines(text: str) -> list[str]:
    if len(text) > T.MAX_SCAN:
        text = text[: T.MAX_SCAN // 4] + "\n" + text[-(T.MAX_SCAN * 3 // 4) :]
    text = T._ANSI_RE.sub("", text).replace("\r\n", "\n").replace("\r", "\n")
    return [T._PREFIX_RE.sub("", ln.rstrip()) for ln in text.split("\n")]


def _plain_find_section(lines: list[str], key: str) -> int:
    for i, ln in enumerate(lines):
        if key in ln and (ln.startswith(("___", "FAIL:", "ERROR:", "  ●", "●", "--- FAIL", "  1)", "1)"))
                          or ln.strip().startswith(("●", "Failures:", "1)"))):
            return i
    return -1


def _plain_tap_id(lines: list[str], i: int, indent: str, name: str) -> str:
    parts, depth = [name], len(indent)
    for k in range(i - 1, -1, -1):
        if depth == 0:
            break
        if (m := T._TAP_SUBTEST_RE.match(lines[k])) is not None and len(m.group(1)) < depth:
            parts.append(m.group(2).strip())
            depth = len(m.group(1))
    return " › ".join(reversed(parts))


def plain_failure_lines(output: str) -> list[tuple[str, str]]:
    if not output:
        return []
    lines = _plain_lines(output)
    found: dict[str, str] = {}

    def add(tid: str, err: str = "", at: int = -1) -> None:
        tid = T._clip(tid.strip(), T.MAX_ID)
        if not tid or len(found) >= T.MAX_FAILS:
            return
        if not err and at >= 0:
            err = T._error_after(lines, at)
        if tid not in found or (err and not found[tid]):
            found[tid] = T._clip(err, T.MAX_ERR) if err else ""

    maven = False
    mocha_pending: tuple[int, str] | None = None
    for i, ln in enumerate(lines):
        s = ln.strip()
        if mocha_pending is not None:
            j, head = mocha_pending
            mocha_pending = None
            c = T._MOCHA_CONT_RE.match(ln)
            if c and c.group(2):
                add(f"{head} {c.group(1)}", at=i)
                continue
            if head.endswith(":"):
                add(head[:-1], at=j)
        if m := T._PYTEST_RE.match(s):
            node, msg = m.group(1), (m.group(2) or "")
            if msg.endswith("..."):
                msg = ""
            sec = _plain_find_section(lines, node.split("::")[-1]) if "::" in node else -1
            add(node, msg, sec)
        elif m := T._PYTEST_V_RE.match(s):
            add(m.group(1))
        elif m := T._UNITTEST_RE.match(s):
            add(f"{m.group(2)}.{m.group(1)}", at=i)
        elif m := T._GO_RE.match(ln):
            add(m.group(1), T._go_error(lines, i, m.group(1)))
        elif m := T._TAP_RE.match(ln):
            if name := T._tap_name(m.group(2)):
                tid = _plain_tap_id(lines, i, m.group(1), name)
                if (err := T._tap_error(lines, i)) is not None:
                    add(tid, err)
        elif m := T._CARGO_RE.match(s):
            sec = next((k for k, x in enumerate(lines) if x.startswith(f"---- {m.group(1)} ")), -1)
            add(m.group(1), at=sec)
        elif m := T._NEXTEST_RE.match(ln):
            sec = next((k for k, x in enumerate(lines) if m.group(1) in x and "STDERR" in x), i)
            add(m.group(1), at=sec)
        elif m := T._VITEST_RE.match(ln):
            add(m.group(2).replace(" > ", " › "), at=i)
        elif m := T._JEST_BULLET_RE.match(ln):
            if "Test suite failed to run" not in m.group(1) and not s.startswith("● Console"):
                add(m.group(1).replace(" > ", " › "), at=i)
        elif m := T._RSPEC_RE.match(s):
            add(m.group(1), at=_plain_find_section(lines, m.group(2)))
        elif m := T._PHPUNIT_RE.match(s):
            add(m.group(1), at=i)
        elif m := T._DOTNET_RE.match(ln):
            add(m.group(1), at=i)
        elif m := T._GRADLE_RE.match(s):
            add(f"{m.group(1)}.{m.group(2)}", at=i)
        elif T._MAVEN_HEAD_RE.match(s):
            maven = True
        elif maven and (m := T._MAVEN_RE.match(ln)) and not s.startswith(("at ", "Tests run")):
            add(f"{m.group(1)}.{m.group(2)}", m.group(3) or "")
        elif maven and (m := T._MAVEN_OLD_RE.match(ln)):
            add(f"{m.group(2)}.{m.group(1)}", m.group(3) or "")
        elif m := T._MOCHA_RE.match(ln):
            mocha_pending = (i, m.group(2) + (":" if m.group(3) else ""))
        elif maven and (not s or s.startswith("Tests run")):
            maven = False
    if not found:
        for ln in lines:
            if m := T._JEST_FILE_RE.match(ln):
                add(m.group(1))
    return list(found.items())


# ---- real outputs -----------------------------------------------------------------------------------

_CAPTURES = sorted([*(ROOT / "tests" / "data" / "runners").glob("*.txt"),
                    *(ROOT / "bench" / "digest_corpus").glob("*.txt"),
                    *(ROOT / "bench" / "digest_corpus" / "large").glob("*.txt")])


def test_the_captures_are_there() -> None:
    assert len(_CAPTURES) > 40


@pytest.mark.parametrize("path", _CAPTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_real_outputs_read_as_the_plain_reading_does(path: Path) -> None:
    text = path.read_text(errors="replace")
    assert T.failure_lines(text) == plain_failure_lines(text)


def test_more_than_max_fails_failures_stop_at_max_fails_with_their_errors() -> None:
    out = "\n".join(f"FAILED tests/test_x.py::test_{i} - AssertionError: {i} != 0" for i in range(200))
    got = T.failure_lines(out)
    assert got == plain_failure_lines(out)
    assert len(got) == T.MAX_FAILS and got[0] == ("tests/test_x.py::test_0", "AssertionError: 0 != 0")


def test_one_failure_repeated_everywhere_stays_linear_and_equal() -> None:
    # every line the same failing id with no message: the plain reading searched the report heads once
    # per line; the index answers after the first
    out = "___ test_a ___\nE   assert 1 == 2\n" + "FAILED tests/t.py::test_a\n" * 3000
    assert T.failure_lines(out) == plain_failure_lines(out) == [("tests/t.py::test_a", "assert 1 == 2")]


# ---- random mixes -----------------------------------------------------------------------------------

_NAMES = st.sampled_from(["test_a", "test_b", "tests::adds", "Suite › adds", "CalcTest", "t/x.py::test_c", "a b"])
_SHAPES = st.one_of(
    _NAMES.map(lambda n: f"FAILED tests/t.py::{n} - AssertionError: x"),
    _NAMES.map(lambda n: f"FAILED tests/t.py::{n}"),
    _NAMES.map(lambda n: f"ERROR tests/t.py::{n} - ..."),
    _NAMES.map(lambda n: f"tests/t.py::{n} FAILED"),
    _NAMES.map(lambda n: f"___ {n} ___"),
    _NAMES.map(lambda n: f"FAIL: {n} (mod.Case)"),
    _NAMES.map(lambda n: f"ERROR: {n} (mod.Case.{n})"),
    _NAMES.map(lambda n: f"--- FAIL: {n} (0.00s)"),
    _NAMES.map(lambda n: f"    --- FAIL: {n}/sub (0.00s)"),
    _NAMES.map(lambda n: f"=== RUN   {n}"),
    _NAMES.map(lambda n: f"    x_test.go:12: got 1 want 2 {n}"),
    _NAMES.map(lambda n: f"test {n} ... FAILED"),
    _NAMES.map(lambda n: f"test {n} ... ok"),
    _NAMES.map(lambda n: f"---- {n} stdout ----"),
    _NAMES.map(lambda n: f"        FAIL [   0.004s] calc {n}"),
    _NAMES.map(lambda n: f"--- STDERR:              calc {n} ---"),
    _NAMES.map(lambda n: f" FAIL  src/calc.test.ts > calc > {n} 3ms"),
    _NAMES.map(lambda n: f"  ● {n}"),
    _NAMES.map(lambda n: f" FAIL  src/{n}.test.js"),
    _NAMES.map(lambda n: f"rspec ./spec/calc_spec.rb:8 # {n}"),
    _NAMES.map(lambda n: f"1) Tests\\CalcTest::{n}"),
    _NAMES.map(lambda n: f"  Failed Calc.Tests.{n} [12 ms]"),
    _NAMES.map(lambda n: f"CalcTest > {n}() FAILED"),
    _NAMES.map(lambda n: f"  2) {n}:"),
    _NAMES.map(lambda n: f"  3) {n}"),
    _NAMES.map(lambda n: f"       {n}:"),
    _NAMES.map(lambda n: f"  CalcTest.{n}:12 expected 1"),
    _NAMES.map(lambda n: f"  {n}(CalcTest): boom"),
    _NAMES.map(lambda n: f"not ok 3 - {n}"),
    _NAMES.map(lambda n: f"    not ok 1 - {n}"),
    _NAMES.map(lambda n: f"  not ok 2 {n} # TODO later"),
    _NAMES.map(lambda n: f"not ok 4 - {n} # time=12.5ms"),
    _NAMES.map(lambda n: f"not ok 5 - {n} #skip"),
    _NAMES.map(lambda n: f"# Subtest: {n}"),
    _NAMES.map(lambda n: f"    # Subtest: {n}"),
    _NAMES.map(lambda n: f"  error: '{n} broke'"),
    _NAMES.map(lambda n: f"      error: \"{n} \\\"quoted\\\"\""),
    st.sampled_from(["  ---", "      ---", "  ...", "      ...", "  error: |-", "    Expected 1 to equal 2",
                     "      -3 !== -4", "  failureType: 'subtestsFailed'", "  message: 'msg'", "not ok 7",
                     "ok 1 - fine", "1..3", "# fail 1"]),
    _NAMES.map(lambda n: f"[ERROR] FAILED t/x.py::{n}"),
    _NAMES.map(lambda n: f"py311: FAILED t/x.py::{n}"),
    _NAMES.map(lambda n: f"nox > FAIL: {n} (m.C)"),
    st.sampled_from(["Failures:", "Failed tests:", "Errors: ", "Tests in error:", "Tests run: 3, Failures: 1",
                     "", "   ", "E   assert 1 == 2", "AssertionError: boom", "expected 3 to equal 4",
                     "thread 'main' panicked at src/lib.rs:3:5", "  at Calc.java:12", "Error Message:",
                     "\x1b[31mFAILED\x1b[0m t.py::test_q", "line\r", "x\r\ny", "● Console", "Test suite failed to run",
                     "FAILURES", "ERRORS", "SIGSEGV [ 0.1s] c t::u", "TIMEOUT [ 1.0s] c t::v", "×", "✕ foo",
                     "12) ", "rspec ", "ok 1 - passes", "some log line: ERROR happened", "Ünïcode ● line"]),
    st.text(alphabet=st.sampled_from("FAILEDRO:_- .>)1●\t"), max_size=30),
)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.lists(_SHAPES, max_size=40))
def test_random_mixes_read_as_the_plain_reading_does(lines: list[str]) -> None:
    out = "\n".join(lines)
    assert T.failure_lines(out) == plain_failure_lines(out)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.lists(_SHAPES, min_size=20, max_size=60), st.integers(min_value=1, max_value=8))
def test_many_failures_past_max_fails_read_as_the_plain_reading_does(lines: list[str], times: int) -> None:
    out = "\n".join(lines * times)
    assert T.failure_lines(out) == plain_failure_lines(out)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.text(alphabet=st.sampled_from("[]ERORINFWANG:x.-_ >\n\tno"), max_size=60))
def test_wrapper_prefixes_are_cut_where_the_plain_reading_cuts_them(text: str) -> None:
    clean = T._clean(text)
    assert T._split(clean, T._marked(clean)) == _plain_lines(text)


def test_the_mark_gate_is_a_superset_of_every_form() -> None:
    # every runner form of the module needs a mark on its line: a line without one matches none
    forms = [v for k, v in vars(T).items() if k.endswith("_RE") and isinstance(v, re.Pattern)
             and k not in ("_ANSI_RE", "_PREFIX_RE", "_ERR_RE", "_LABEL_RE",
                           "_GO_RUN_RE", "_MOCHA_CONT_RE", "_MAVEN_RE", "_MAVEN_OLD_RE",
                           "_TAP_DIRECTIVE_RE", "_TAP_COMMENT_RE", "_TAP_SUBTEST_RE", "_TAP_KEY_RE")]
    assert len(forms) == 16
    samples = ["FAILED t.py::x", "t.py::x FAILED", "FAIL: x (m.C)", "--- FAIL: X", "test a ... FAILED",
               "FAIL [ 0.1s] c a::b", " FAIL  a.test.ts > s > n", "● n", "rspec ./a.rb:1 # d", "1) A\\B::c",
               "Failed A.B [1 ms]", "A > b() FAILED", "Failures:", "  1) x", " FAIL  a.test.js", "not ok 1 - x"]
    for s in samples:
        assert any(f.match(s) or f.match(s.strip()) for f in forms), s
        assert T._marked(s) == [0], s
        for cut in range(len(s)):  # without its mark the line matches no form
            t = s[:cut] + s[cut + 1 :]
            if not T._marked(t):
                assert not any(f.match(t) or f.match(t.strip()) for f in forms), t
