"""Failing tests from every common runner, run directly or through a wrapper: the table.

Rows are runners, columns wrappers. Each cell is a command and its output; the output is either
captured by running the real tool here (``*.real.txt`` in tests/data/runners: pytest, unittest -v and
plain, jest, vitest, mocha, cargo test, node --test (TAP, as it prints into a pipe); make + pytest and npm test / npm run + jest, vitest, mocha were
run for real too) or written from the runner's documented output format (``*.written.txt``: go test,
cargo nextest, rspec, phpunit, dotnet test, Maven surefire, Gradle; not installable here). A wrapper
cell without a real capture adds the wrapper's own documented lines around the runner's output (the
echoed command, tox's ``py311: commands[0]>`` and ``FAIL code 1``, nox's ``nox >`` lines, npm/pnpm/
yarn's script banner and failure line, make's and just's error line; ``uv run`` adds nothing).

For every cell: the command is a test run (phase: testing evidence; classifier: test result row), the
verdict is "failed", the failing test ids are found, the L1 summary names them, the lesson signature
is the first failing test, and the must-survive set carries the ids with their error lines.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxlifed.core import lessons as LS
from ctxlifed.core import phase as P
from ctxlifed.core.commands import is_test_command
from ctxlifed.core.model import Element, Kind
from ctxlifed.core.summarize import summarize
from ctxlifed.core.testfail import failing_tests, failure_lines
from ctxlifed.core.transcript import test_outcome
from ctxlifed.service.compaction import failing_tests as must_survive_failing
from ctxlifed.service.state import SessionState

DATA = Path(__file__).parent / "data" / "runners"

PY_IDS = ["tests/test_calc.py::test_add_negative", "tests/test_calc.py::CalcTest::test_sub"]
# runner -> (command run directly, captured output file, expected failing ids, name in the signature)
RUNNERS: dict[str, tuple[str, str, list[str], str]] = {
    "pytest": ("pytest -q tests", "pytest-q.real.txt", PY_IDS, "test_add_negative"),
    "pytest -v": ("pytest -v tests", "pytest-v.real.txt", PY_IDS, "test_add_negative"),
    "unittest -v": ("python -m unittest -v tests.test_calc", "unittest-v.real.txt",
                    ["tests.test_calc.CalcTest.test_sub"], "test_sub"),
    "unittest": ("python -m unittest tests.test_calc", "unittest-plain.real.txt",
                 ["tests.test_calc.CalcTest.test_sub"], "test_sub"),
    "jest": ("npx jest", "jest.real.txt", ["calc › adds negative numbers"], "adds negative numbers"),
    "vitest": ("npx vitest run", "vitest.real.txt", ["calc › adds negative numbers"], "adds negative numbers"),
    "mocha": ("npx mocha", "mocha.real.txt", ["calc adds negative numbers"], "adds negative numbers"),
    "go test": ("go test ./...", "go-test.written.txt", ["TestAddNegative", "TestParse", "TestParse/empty"],
                "TestAddNegative"),
    "cargo test": ("cargo test", "cargo-test.real.txt", ["tests::adds_negative"], "adds_negative"),
    "cargo nextest": ("cargo nextest run", "nextest.written.txt", ["tests::adds_negative"], "adds_negative"),
    "rspec": ("bundle exec rspec", "rspec.written.txt", ["./spec/calc_spec.rb:8"], "calc_spec.rb"),
    "phpunit": ("vendor/bin/phpunit", "phpunit.written.txt", ["Tests\\CalcTest::testAddNegative"], "testAddNegative"),
    "dotnet test": ("dotnet test", "dotnet-test.written.txt", ["Calc.Tests.CalcTests.AddNegative"], "AddNegative"),
    "maven": ("mvn test", "mvn-test.written.txt", ["CalcTest.addNegative"], "addNegative"),
    "gradle": ("./gradlew test", "gradle-test.written.txt", ["CalcTest.addNegative"], "addNegative"),
    "node --test": ("node --test", "node-test.real.txt",
                    ["adds negative numbers", "parse › reads a field of an empty input"], "adds negative numbers"),
}
# wrappers that were run for real with a runner: (runner, wrapper) -> captured file
REAL_WRAPPED = {
    ("pytest", "make"): "make-pytest.real.txt",
    ("jest", "npm test"): "npm-jest.real.txt",
    ("vitest", "npm test"): "npm-vitest.real.txt",
    ("mocha", "npm test"): "npm-mocha.real.txt",
}


def _direct(cmd: str, out: str) -> tuple[str, str]:
    return cmd, out


def _make(cmd: str, out: str) -> tuple[str, str]:
    return "make test", f"{cmd}\n{out}\nmake: *** [Makefile:2: test] Error 1\n"


def _npm(tool: str):
    def wrap(cmd: str, out: str) -> tuple[str, str]:
        if tool == "yarn":
            return "yarn test", f"yarn run v1.22.19\n$ {cmd}\n{out}\nerror Command failed with exit code 1.\n"
        banner = f"\n> calc@1.0.0 test /home/dev/calc\n> {cmd}\n\n"
        tail = (" ELIFECYCLE  Test failed. See above for more details.\n" if tool == "pnpm"
                else "npm error Lifecycle script `test` failed with error:\nnpm error code 1\n")
        return f"{tool} test", banner + out + "\n" + tail
    return wrap


def _tox(cmd: str, out: str) -> tuple[str, str]:
    return "tox -e py311", (f"py311: commands[0]> {cmd}\n{out}\npy311: exit 1 (0.52 seconds) /home/dev/calc> {cmd}\n"
                            "  py311: FAIL code 1 (0.60=setup[0.08]+cmd[0.52] seconds)\n  evaluation failed :( (0.66 seconds)\n")


def _nox(cmd: str, out: str) -> tuple[str, str]:
    return "nox -s tests", (f"nox > Running session tests\nnox > Creating virtual environment (virtualenv) using python3.11"
                            f" in .nox/tests\nnox > {cmd}\n{out}\nnox > Command {cmd} failed with exit code 1\n"
                            "nox > Session tests failed.\n")


def _uv(cmd: str, out: str) -> tuple[str, str]:
    return f"uv run {cmd}", out


def _just(cmd: str, out: str) -> tuple[str, str]:
    return "just test", f"{cmd}\n{out}\nerror: Recipe `test` failed on line 2 with exit code 1\n"


WRAPPERS = {"direct": _direct, "make": _make, "npm test": _npm("npm"), "pnpm test": _npm("pnpm"),
            "yarn test": _npm("yarn"), "tox": _tox, "nox": _nox, "uv run": _uv, "just": _just}
TABLE = [(r, w) for r in RUNNERS for w in WRAPPERS]


def _cell(runner: str, wrapper: str) -> tuple[str, str]:
    cmd, fname, _ids, _name = RUNNERS[runner]
    out = (DATA / fname).read_text()
    real = REAL_WRAPPED.get((runner, wrapper))
    if real is not None:
        return WRAPPERS[wrapper](cmd, "")[0], (DATA / real).read_text()
    return WRAPPERS[wrapper](cmd, out)


@pytest.mark.parametrize(("runner", "wrapper"), TABLE, ids=[f"{r}|{w}" for r, w in TABLE])
def test_runner_through_wrapper(runner: str, wrapper: str) -> None:
    cmd, out = _cell(runner, wrapper)
    _c, _f, ids, name = RUNNERS[runner]
    # phase and classifier: a test run
    assert is_test_command(cmd), cmd
    assert [s.phase for s in P.signals_from_tool("Bash", {"command": cmd})] == ["testing"]
    # the verdict and the failing tests
    assert test_outcome(out, False) is False
    assert failing_tests(out) == ids
    # the L1 summary names them
    el = Element(uid="u", kind=Kind.TEST_RESULT, text=out, tool="Bash", command=cmd, passed=False)
    assert "FAILED" in summarize(el, max_chars=600).splitlines()[0]
    # the lesson signature is about the first failing test
    sig = LS.signature(out, tool="Bash", command=cmd)
    assert sig is not None and name.lower() in sig.lower(), sig
    # the must-survive set carries each id with its first error line
    st = SessionState(session="s", project="/p")
    st.note_failing(cmd, failure_lines(out))
    assert [t.split(" — ")[0] for t in must_survive_failing(st)] == list(reversed(ids))


def test_error_lines_are_the_runners_own() -> None:
    """The first error line of each failing test, as the runner printed it."""
    got = {r: failure_lines((DATA / f).read_text())[0][1] for r, (_c, f, _i, _n) in RUNNERS.items()}
    assert got["pytest"] == "assert -2 == -3"
    assert got["unittest"] == got["unittest -v"] == "AssertionError: 0 != 1"
    assert got["go test"] == "calc_test.go:12: add(-1, -1) = -2; want -3"
    assert got["cargo test"] == "assertion `left == right` failed"
    assert got["phpunit"] == "Failed asserting that -2 is identical to -3."
    assert got["maven"] == "expected: <-3> but was: <-2>"
    assert got["mocha"].startswith("AssertionError [ERR_ASSERTION]")
    assert got["vitest"] == "AssertionError: expected -2 to be -3 // Object.is equality"
    assert all(got.values()), got


def test_a_passing_run_that_covers_the_failure_clears_it() -> None:
    st = SessionState(session="s", project="/p")
    st.note_failing("pytest -q tests/test_calc.py", [("tests/test_calc.py::test_add_negative", "assert -2 == -3")])
    st.note_failing("cargo test", [("tests::adds_negative", "")])
    covers = lambda ok, bad: LS.covers(LS.target_of("Bash", ok), LS.target_of("Bash", bad))  # noqa: E731
    assert st.clear_failing("pytest -q tests/test_other.py", covers=covers) == []  # narrower elsewhere: still red
    assert st.clear_failing("pytest -q", covers=covers) == ["tests/test_calc.py::test_add_negative"]
    assert [f[1] for f in st.failing] == ["tests::adds_negative"]


@pytest.mark.parametrize("text", ["", "3 passed in 0.1s", "Ran 2 tests in 0.001s\n\nOK", "ok  \texample.com/calc\t0.002s"])
def test_passing_or_empty_output_names_no_failing_test(text: str) -> None:
    assert failing_tests(text) == []


@pytest.mark.parametrize("runner", ["maven", "dotnet test", "mocha", "rspec"])
def test_a_piped_failing_run_is_an_error_in_recall(daemon, runner: str) -> None:
    """Through the daemon: a failing run whose exit code a pipe hid (PostToolUse, not a failure) is
    still a failed test run: ``recall type:error <test name>`` finds it, its summary names the test."""
    from test_engine import Session

    cmd, fname, ids, name = RUNNERS[runner]
    s = Session(daemon, sid="7e000000-0000-0000-0000-00000000000" + str(list(RUNNERS).index(runner) % 10))
    s.tool("Bash", {"command": f"{cmd} 2>&1 | tail -40"}, {"stdout": (DATA / fname).read_text(), "stderr": ""})
    word = name.split(".")[-1].split(" ")[-1]
    hits = s.recall(f"type:error {word}")["hits"]
    assert hits and hits[0]["summary"].startswith("[test_result FAILED]") and ids[0] in hits[0]["summary"]
