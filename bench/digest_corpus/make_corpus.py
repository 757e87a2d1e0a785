"""Regenerate the digest corpus: real tool outputs made by running real tools on this machine.

    python bench/digest_corpus/make_corpus.py [case ...]      (all cases by default)
    python bench/digest_corpus/make_corpus.py --large [case ...]  (the large corpus, in large/)
    python bench/digest_corpus/make_corpus.py --relabel       (labels only, from the committed outputs, large ones too)

Each case writes ``<name>.txt`` (the output exactly as the tool printed it, stderr merged into stdout the
way Claude Code's Bash tool merges them) and ``<name>.json``: the command, the kind of output, and the
``must_keep`` lines a person reading the output needs verbatim (the labels). A case whose tool is missing
here is skipped and says so. Labels are chosen by per-case rules written from what each tool prints
(a failing test's id, its assertion and error lines, the runner's summary; every compiler/linter error
with its file:line and the tool's totals; an install's final state and errors; a search's or listing's
first matches and errors; a log's error lines and last line), independently of ``ctxlifed.core.digest``.
Temporary projects are generated under a temp dir; paths in the outputs are rewritten to ``/tmp/proj``
so the corpus is the same wherever it is regenerated.

The large corpus (``large/<name>.txt`` + ``.json``, same sidecar format, :func:`large_cases`): real outputs
of about 100 KB, what a tool prints when a run really is that big (a few hundred failing tests with their
tracebacks, hundreds of compiler/linter/type errors over many files, thousands of changed files in
``git status``, a long log), where the small corpus's outputs are cut at 60 KB or 30 KB and the benchmark
repeats them to 100 KB. Each is made by the same generators with bigger parameters (or a bigger real tree:
this repo, the venv's site-packages), run the same way (:func:`run`, :func:`scrub`), never repeated or
concatenated, and labelled by the same rules as the small case of the same name. The tool prints at least
``LARGE_CHARS`` (100 * 1024) characters; the output is cut at the last line end at or before that
(:func:`cut`), so a file is ``LARGE_CHARS`` minus at most one line, and the tool's last line (often its
summary) is cut off. A case whose tool is missing here, or prints less, is not written and says so. The
parameters are tuned to print just over ``LARGE_CHARS`` here, so the cut takes little; the outputs of the
repo's own history (git log, git diff, grep) are a snapshot of when they were made. ``LARGE_ON_REQUEST``
cases (git log --stat, find) are written only when named, to keep the large corpus near 2 MB. No large
case for pip/npm installs (no install here prints 100 KB), importtime, pip list (a few KB here) or the apt
log (a machine's own log).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
MAX_CHARS = 60_000  # a case's output is cut (at a line end) past this, to keep the corpus small
LARGE = HERE / "large"
LARGE_CHARS = 100 * 1024  # a large case's output is at least this long, cut (at a line end) past it
# Large cases written only when named: shapes the default ones already have (git log; a listing), left out to
# keep the large corpus near 2 MB.
LARGE_ON_REQUEST = {"git_log_stat", "find_py"}
CUT_30K = {"grep_r", "find_py", "git_diff_range", "git_log", "tail_term_log"}  # cut at 30,000 characters
TOOLS_VENV = Path(os.environ.get("DIGEST_TOOLS_VENV", "/tmp/digest-tools-venv"))


def run(cmd: str, cwd: Path, env: dict[str, str] | None = None, timeout: int = 300) -> str:
    e = dict(os.environ)
    e.update({"NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "100", "PYTHONDONTWRITEBYTECODE": "1"})
    e.pop("FORCE_COLOR", None)
    if env:
        e.update(env)
    r = subprocess.run(cmd, shell=True, cwd=cwd, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=timeout)
    return r.stdout.decode("utf-8", "replace")


def cut(text: str, limit: int = MAX_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[: text.rfind("\n", 0, limit) + 1]


def lines_matching(text: str, *patterns: str) -> list[str]:
    rx = re.compile("|".join(f"(?:{p})" for p in patterns))
    out: list[str] = []
    for line in text.split("\n"):
        if rx.search(line) and line not in out:
            out.append(line)
    return out


def first_nonblank(text: str, n: int) -> list[str]:
    return [ln for ln in text.split("\n") if re.search(r"\w", ln)][:n]  # separators like "----" say nothing


def last_nonblank(text: str) -> list[str]:
    lines = [ln for ln in text.split("\n") if ln.strip()]
    return lines[-1:]


# ---------------------------------------------------------------- generated projects

def py_project(root: Path, n_tests: int = 400, n_failing: int = 0) -> None:
    """``n_tests`` passing tests and 7 failing ones; ``n_failing`` more failing ones (half an assertion, half an
    exception raised two frames down, in calc.py)."""
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text(textwrap.dedent("""\
        def add(a, b):
            return a + b

        def div(a, b):
            return a / b

        def parse(s):
            return {k: int(v) for k, v in (p.split("=") for p in s.split(","))}
        """))
    body = ["import pytest", "from calc import add, div, parse", ""]
    body.append(f"@pytest.mark.parametrize('i', range({n_tests}))")
    body.append("def test_add_many(i):\n    assert add(i, 1) == i + 1\n")
    body.append("def test_add_wrong():\n    assert add(2, 2) == 5\n")
    body.append("def test_div_zero():\n    assert div(1, 0) == 0\n")
    body.append("def test_parse_dict():\n    assert parse('a=1,b=2,c=3') == {'a': 1, 'b': 3, 'c': 3}\n")
    body.append("def test_parse_bad():\n    parse('a=1,b')\n")
    body.append("def test_list_long():\n    assert [add(i, 0) for i in range(30)] == list(range(29)) + [99]\n")
    body.append("@pytest.mark.parametrize('s', ['x=1', 'y=z'])\ndef test_parse_values(s):\n    assert parse(s)\n")
    if n_failing:
        body.append(f"@pytest.mark.parametrize('i', range({n_failing - n_failing // 2}))")
        body.append("def test_add_off_by_one(i):\n    assert add(i, 1) == i + 2\n")
        body.append(f"@pytest.mark.parametrize('s', [f'key{{i}}' for i in range({n_failing // 2})])")
        body.append("def test_parse_pairs(s):\n    assert parse(s) == {s: 1}\n")
    (root / "tests" / "test_calc.py").write_text("\n".join(body) + "\n")


def unittest_project(root: Path, n_tests: int = 250, n_failing: int = 0) -> None:
    """``n_tests`` passing tests and 4 failing ones; ``n_failing`` more (an assertion, or a KeyError every third)."""
    root.mkdir(parents=True, exist_ok=True)
    src = ["import unittest", "", "class TestNumbers(unittest.TestCase):"]
    for i in range(n_tests):
        src.append(f"    def test_n{i:03d}(self):\n        self.assertEqual({i} * 2, {i} + {i})")
    for i in range(n_failing):
        if i % 3 == 2:
            src.append(f"    def test_lookup{i:03d}(self):\n        d = {{'k{i}': {i}}}\n        self.assertEqual(d['k{i + 1}'], {i})")
        else:
            src.append(f"    def test_double{i:03d}(self):\n        self.assertEqual({i} * 2, {i} + {i} + 1)")
    src.append("    def test_bad_sum(self):\n        self.assertEqual(sum([1, 2, 3]), 7)")
    src.append("    def test_key(self):\n        d = {'a': 1}\n        self.assertIn('b', d)")
    src.append("    def test_raise(self):\n        int('twelve')")
    src.append("\nclass TestStrings(unittest.TestCase):")
    src.append("    def test_upper(self):\n        self.assertEqual('abc'.upper(), 'ABD')")
    (root / "test_numbers.py").write_text("\n".join(src) + "\n")


def node_project(root: Path, n_tests: int = 150, n_failing: int = 0) -> None:
    """``n_tests`` passing tests and 3 failing ones; ``n_failing`` more (strictEqual, or a TypeError every third)."""
    root.mkdir(parents=True, exist_ok=True)
    src = ["const test = require('node:test');", "const assert = require('node:assert');", ""]
    for i in range(n_tests):
        src.append(f"test('adds {i}', () => {{ assert.strictEqual({i} + 1, {i + 1}); }});")
    for i in range(n_failing):
        if i % 3 == 2:
            src.append(f"test('reads field {i}', () => {{ const o = null; return o.field{i}; }});")
        else:
            src.append(f"test('off by one {i}', () => {{ assert.strictEqual({i} + 1, {i + 2}); }});")
    src.append("test('parses config', () => { assert.deepStrictEqual({a: 1, b: [1, 2]}, {a: 1, b: [1, 3]}); });")
    src.append("test('throws on empty', () => { JSON.parse(''); });")
    src.append("test('strict equal', () => { assert.strictEqual('left', 'right'); });")
    (root / "calc.test.js").write_text("\n".join(src) + "\n")


def cargo_project(root: Path, broken: bool, n_tests: int = 200, n_failing: int = 0) -> None:
    """A library crate: broken, 3 errors and 41 warnings plus ``n_failing`` type errors; else ``n_tests``
    passing tests and 3 failing ones plus ``n_failing`` more (assert_eq!, or an unwrap on Err every third)."""
    (root / "src").mkdir(parents=True)
    (root / "Cargo.toml").write_text('[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n')
    if broken:
        lib = textwrap.dedent("""\
            pub fn add(a: i32, b: i32) -> i32 {
                let unused = 3;
                a + b
            }
            pub fn name() -> String {
                let x: i32 = "five";
                x
            }
            pub fn count(v: &Vec<i32>) -> usize {
                let mut total = 0;
                for i in v { total += i; }
                v.len() + missing_var
            }
            """)
        lib += "".join(f"pub fn helper{i}() {{ let unused{i} = {i}; }}\n" for i in range(40))
        lib += "".join(f"pub fn label{i}(n: usize) -> String {{\n    let v: u{8 << i % 3} = n;\n    v\n}}\n"
                       for i in range(n_failing))
    else:
        lib = "pub fn add(a: i32, b: i32) -> i32 { a + b }\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n"
        lib += "".join(f"    #[test]\n    fn adds_{i}() {{ assert_eq!(add({i}, 1), {i + 1}); }}\n" for i in range(n_tests))
        lib += "".join(f"    #[test]\n    fn parses_{i}() {{ let _n: i32 = \"x{i}\".parse().unwrap(); }}\n" if i % 3 == 2 else
                       f"    #[test]\n    fn off_by_one_{i}() {{ assert_eq!(add({i}, 1), {i + 2}); }}\n"
                       for i in range(n_failing))
        lib += "    #[test]\n    fn adds_wrong() { assert_eq!(add(2, 2), 5); }\n"
        lib += "    #[test]\n    fn panics_on_parse() { let _n: i32 = \"x\".parse().unwrap(); }\n"
        lib += "    #[test]\n    fn checks_flag() { assert!(add(1, 1) > 5, \"sum too small: {}\", add(1, 1)); }\n}\n"
    (root / "src" / "lib.rs").write_text(lib)


C_BAD = """\
#include <stdio.h>
#include <string.h>

int helper(int a) { int unused; return a; }

int main(void) {
    char buf[8];
    int n = "text";
    strcpy(buf, 42);
    printf("%d\\n", undeclared_name);
    for (int i = 0; i < 3; i++) { int w; }
    return missing_fn(n);
}
"""


def c_project(root: Path, n_bad: int = 0) -> None:
    """12 files that compile with warnings and bad.c; ``n_bad`` more files with errors (C_BAD, renamed)."""
    root.mkdir(parents=True, exist_ok=True)
    for i in range(12):
        (root / f"ok{i}.c").write_text(
            f"#include <stdio.h>\nint f{i}(int x) {{ int unused{i}; return x * {i}; }}\n"
            f"int g{i}(void) {{ long y = 0; printf(\"%d\\n\", y); return 0; }}\n")
    (root / "bad.c").write_text(C_BAD)
    for i in range(n_bad):
        (root / f"bad{i:03d}.c").write_text(C_BAD.replace("helper", f"helper{i}").replace("undeclared_name",
                                                                                      f"undeclared_{i}"))
    objs = " ".join(f"ok{i}.o" for i in range(12)) + " bad.o" + "".join(f" bad{i:03d}.o" for i in range(n_bad))
    (root / "Makefile").write_text(f"CFLAGS=-Wall -Wextra -O0\nall: app\napp: {objs}\n\t$(CC) -o $@ $^\n"
                                   "%.o: %.c\n\t$(CC) $(CFLAGS) -c $< -o $@\n")


def lint_project(root: Path, n_files: int = 8) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n_files):
        (root / f"mod{i}.py").write_text(textwrap.dedent(f"""\
            import os
            import sys, json
            from typing import List


            def load(path: str) -> int:
                data = json.load(open(path))
                unused_{i} = 1
                return data["count"] + "x"


            def total(xs: List[int]) -> str:
                if xs == None:
                    return 0
                return sum(xs)


            class Thing:
                def __init__(self, n: int) -> None:
                    self.n = n

                def size(self) -> int:
                    return self.m
            """))


def ts_project(root: Path, n_files: int = 6) -> None:
    (root / "src").mkdir(parents=True)
    (root / "tsconfig.json").write_text('{"compilerOptions": {"strict": true, "noEmit": true, "target": "es2020"},'
                                        ' "include": ["src"]}\n')
    for i in range(n_files):
        (root / "src" / f"m{i}.ts").write_text(textwrap.dedent(f"""\
            export function add{i}(a: number, b: number): number {{ return a + b; }}
            const s{i}: string = add{i}(1, 2);
            export function f{i}(x) {{ return x.length; }}
            let u{i}: {{ name: string }} = {{ nam: "x" }};
            add{i}("1", 2);
            """))


def log_app(root: Path, n_jobs: int = 600) -> None:
    """A worker's log of ``n_jobs`` jobs: a warning, a logged exception and an error in the first 600, then a
    timeout error every 450th job."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "app.py").write_text(textwrap.dedent(f"""\
        import logging, sys
        logging.basicConfig(stream=sys.stdout, level=logging.DEBUG,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="2026-12-01 20:00:00")
        log = logging.getLogger("worker")
        failed = 2
        for i in range({n_jobs}):
            if i % 7 == 0:
                log.debug("poll queue=%d depth=%d", i, i % 13)
            log.info("processed job %d in %d ms", i, 10 + i % 17)
            if i == 211:
                log.warning("slow job %d: retrying", i)
            if i == 388:
                try:
                    {{}}["missing"]
                except KeyError:
                    log.exception("job %d failed", i)
            if i == 502:
                log.error("connection reset by peer while sending job %d", i)
            if i > 600 and i % 450 == 0:
                failed += 1
                log.error("job %d timed out after 30000 ms", i)
        log.info("worker stopped: %d jobs, %d failed", {n_jobs}, failed)
        """))


def crash_script(root: Path, n_rows: int = 700) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "migrate.py").write_text(textwrap.dedent("""\
        import json
        rows = [{"id": i, "name": f"row{i}", "value": i * 3} for i in range(N_ROWS)]
        for r in rows:
            print(f"migrating row {r['id']:4d} name={r['name']:<8} value={r['value']}")
        def check(r):
            return json.loads(r["name"])
        check(rows[-1])
        """.replace("N_ROWS", str(n_rows))))


# ---------------------------------------------------------------- labels

PYTEST_KEEP = (r"^E\s", r"^FAILED ", r"^ERROR ", r"::\S+ (?:FAILED|ERROR)\b", r"^_{3,} .+ _{3,}$",
               r"^[\w/.-]+\.py:\d+: \w+", r"^=+ .*\b(?:passed|failed|error)", r"^\d+ (?:passed|failed)")


def label_pytest(out: str) -> list[str]:
    return lines_matching(out, *PYTEST_KEEP)


def label_unittest(out: str) -> list[str]:
    keep = lines_matching(out, r"^(?:FAIL|ERROR): ", r"\.\.\. (?:FAIL|ERROR)$", r"^Ran \d+ tests?",
                          r"^(?:FAILED|OK)\b", r"^\w*(?:Error|Exception)\b.*", r'^\s+File ".*", line \d+')
    return keep


def label_node(out: str) -> list[str]:
    return lines_matching(out, r"^✖ ", r"^\s*not ok \d+", r"^ℹ (?:tests|pass|fail) \d+", r"^# (?:tests|pass|fail) \d+",
                          r"^\s+(?:AssertionError|SyntaxError)\b.*", r"^\s+error: ", r"^\s+(?:actual|expected): ",
                          r"^\s+location: '", r"^\s+name: '", r"^\s{4}Expected values")


def label_cargo_test(out: str) -> list[str]:
    return lines_matching(out, r"^test \S+ \.\.\. FAILED$", r"panicked at ", r"^\s*left: ", r"^\s*right: ",
                          r"^assertion ", r"^called `Result::unwrap\(\)`", r"^sum too small", r"^test result: ",
                          r"^error: test failed")


def label_cargo_build(out: str) -> list[str]:
    keep = lines_matching(out, r"^error(?:\[E\d+\])?: ", r"^warning: `calc` .* generated \d+ warnings?")
    lines = out.split("\n")
    for a, b in zip(lines, lines[1:], strict=False):  # an error's location: the --> line right under it
        if re.match(r"error(?:\[E\d+\])?: ", a) and re.match(r"\s+--> ", b) and b not in keep:
            keep.append(b)
    return keep


def label_gcc(out: str) -> list[str]:
    return lines_matching(out, r": error: ", r"make: \*\*\*", r"^\d+ errors? generated", r"undefined reference to")


def label_ruff(out: str) -> list[str]:
    return lines_matching(out, r"^[A-Z]+\d+ ", r"^\s*--> ", r"^[\w/.-]+\.py:\d+:\d+: [A-Z]+\d+", r"^Found \d+ errors?",
                          r"fixable with")


def label_mypy(out: str) -> list[str]:
    return lines_matching(out, r"^[\w/.-]+\.py:\d+: error: ", r"^Found \d+ errors?", r"^Success: ")


def label_tsc(out: str) -> list[str]:
    return lines_matching(out, r"error TS\d+", r"^Found \d+ errors?")


def label_pip(out: str) -> list[str]:
    return lines_matching(out, r"^ERROR: ", r"^Successfully installed ", r"^error: ", r"^\s*× ")


def label_npm(out: str) -> list[str]:
    return lines_matching(out, r"^npm (?:ERR!|error) (?:code|notarget|404|E\w+)", r"^(?:added|removed|changed|up to date)\b",
                          r"vulnerabilit")


def label_first(n: int) -> Callable[[str], list[str]]:
    def f(out: str) -> list[str]:
        return first_nonblank(out, n) + lines_matching(out, r"(?i:permission denied|no such file)", r"^grep: |^find: |^fatal: ")
    return f


def label_git_status(out: str) -> list[str]:
    return lines_matching(out, r"^On branch ", r"^Your branch ", r"^Changes ", r"^Untracked files:", r"both modified:",
                          r"^nothing to commit")


def label_git_diff(out: str) -> list[str]:
    return lines_matching(out, r"^diff --git ")


def label_log(out: str) -> list[str]:
    keep = lines_matching(out, r"\b(?:ERROR|CRITICAL|FATAL)\b", r"^\w*(?:Error|Exception)\b", r"(?i:\berror:)")
    return keep + [x for x in last_nonblank(out) if x not in keep]


def label_crash(out: str) -> list[str]:
    keep = lines_matching(out, r"^Traceback ", r"^\w+(?:\.\w+)*(?:Error|Exception)\b.*", r'^\s+File ".*", line \d+')
    return keep


def label_other(out: str) -> list[str]:
    return last_nonblank(out)


# ---------------------------------------------------------------- cases

def tools_bin(name: str) -> str | None:
    p = TOOLS_VENV / "bin" / name
    return str(p) if p.exists() else shutil.which(name)


def ensure_tools_venv() -> tuple[str, str]:
    """A temp venv with ruff and mypy; returns the pip output of installing them (a real install log)."""
    if not (TOOLS_VENV / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(TOOLS_VENV)], check=True)
    cmd = f"{TOOLS_VENV}/bin/pip install ruff mypy"
    return cmd, run(cmd, Path("/tmp"))


Case = tuple[str, str, str, Callable[[Path], None] | None, Callable[[str], list[str]]]


def cases(tmp: Path) -> list[tuple[str, str, str, Path, Callable[[Path], None] | None, Callable[[str], list[str]]]]:
    py = sys.executable
    ruff = tools_bin("ruff") or "ruff"
    mypy = tools_bin("mypy") or "mypy"
    return [
        ("pytest_verbose_failures", "test", f"{py} -m pytest -v -p no:cacheprovider tests", tmp / "pyv", py_project, label_pytest),
        ("pytest_default_failures", "test", f"{py} -m pytest -p no:cacheprovider tests", tmp / "pyd", py_project, label_pytest),
        ("pytest_long_tb", "test", f"{py} -m pytest -p no:cacheprovider --tb=long -rA tests", tmp / "pyl",
         lambda p: py_project(p, 60), label_pytest),
        ("unittest_verbose", "test", f"{py} -m unittest -v test_numbers", tmp / "ut", unittest_project, label_unittest),
        ("node_test", "test", "node --test", tmp / "nodet", node_project, label_node),
        ("cargo_test", "test", "cargo test --offline", tmp / "cargot", lambda p: cargo_project(p, False), label_cargo_test),
        ("cargo_build_errors", "build", "cargo build --offline", tmp / "cargob", lambda p: cargo_project(p, True),
         label_cargo_build),
        ("make_gcc_errors", "build", "make -k", tmp / "cproj", c_project, label_gcc),
        ("ruff_check", "build", f"{ruff} check --no-cache .", tmp / "lint", lint_project, label_ruff),
        ("mypy_errors", "build", f"{mypy} --no-incremental --cache-dir=/dev/null .", tmp / "lintm", lint_project, label_mypy),
        ("tsc_errors", "build", "npx --no-install tsc -p .", tmp / "tsproj", None, label_tsc),
        ("pip_install_missing", "install", f"{py} -m pip install --no-index --disable-pip-version-check ctxlifed-no-such-pkg",
         tmp, None, label_pip),
        ("npm_install_bad_version", "install", "npm install --no-audit --no-fund typescript@999.0.0", tmp / "npmbad", None,
         label_npm),
        ("git_log", "search", "git log -n 150", REPO, None, label_first(5)),
        ("git_log_stat", "search", "git log --stat -n 40", REPO, None, label_first(5)),
        ("git_status_untracked", "search", "git status", tmp / "gitst", None, label_git_status),
        ("git_diff_range", "diff", "git diff HEAD~8 HEAD -- src", REPO, None, label_git_diff),
        ("grep_r", "search", "grep -rn 'def ' src", REPO, None, label_first(5)),
        ("find_py", "search", "find . -name '*.py' -not -path './.git/*'", REPO, None, label_first(5)),
        ("ls_laR", "search", "ls -laR src", REPO, None, label_first(5)),
        ("tail_term_log", "log", "tail -n 700 /var/log/apt/term.log", Path("/"), None, label_log),
        ("app_log", "log", f"{py} app.py", tmp / "logapp", log_app, label_log),
        ("python_crash", "other", f"{py} migrate.py", tmp / "crash", crash_script, label_crash),
        ("importtime", "other", f"{py} -X importtime -c 'import ctxlifed.core.classify'", REPO / "src", None, label_other),
        ("pip_list", "search", f"{py} -m pip list -v --disable-pip-version-check", REPO, None, label_first(3)),
    ]


def large_cases(tmp: Path) -> list[tuple[str, str, str, Path, Callable[[Path], None] | None, Callable[[str], list[str]]]]:
    """The large corpus: each tool made to print at least LARGE_CHARS itself (bigger generated projects, a
    bigger real tree), labelled by the same rules as the small case of the same name."""
    py = sys.executable
    ruff = tools_bin("ruff") or "ruff"
    mypy = tools_bin("mypy") or "mypy"
    site = Path(sysconfig.get_paths()["purelib"])
    return [
        ("pytest_verbose_failures", "test", f"{py} -m pytest -v -p no:cacheprovider tests", tmp / "pyv",
         lambda p: py_project(p, 300, 84), label_pytest),
        ("pytest_default_failures", "test", f"{py} -m pytest -p no:cacheprovider tests", tmp / "pyd",
         lambda p: py_project(p, 400, 138), label_pytest),
        ("unittest_verbose", "test", f"{py} -m unittest -v test_numbers", tmp / "ut",
         lambda p: unittest_project(p, 250, 195), label_unittest),
        ("node_test", "test", "node --test", tmp / "nodet", lambda p: node_project(p, 150, 118), label_node),
        ("cargo_test", "test", "cargo test --offline", tmp / "cargot", lambda p: cargo_project(p, False, 200, 67),
         label_cargo_test),
        ("cargo_build_errors", "build", "cargo build --offline", tmp / "cargob",
         lambda p: cargo_project(p, True, n_failing=123), label_cargo_build),
        ("make_gcc_errors", "build", "make -k", tmp / "cproj", lambda p: c_project(p, 58), label_gcc),
        ("ruff_check", "build", f"{ruff} check --no-cache .", tmp / "lint", lambda p: lint_project(p, 53), label_ruff),
        ("mypy_errors", "build", f"{mypy} --no-incremental --cache-dir=/dev/null .", tmp / "lintm",
         lambda p: lint_project(p, 635), label_mypy),
        ("tsc_errors", "build", "npx --no-install tsc -p .", tmp / "tsproj", None, label_tsc),
        ("git_log", "search", "git log -n 300", REPO, None, label_first(5)),
        ("git_log_stat", "search", "git log --stat -n 240", REPO, None, label_first(5)),
        ("git_status_untracked", "search", "git status", tmp / "gitst", None, label_git_status),
        ("git_diff_range", "diff", "git diff HEAD~40 HEAD -- src", REPO, None, label_git_diff),
        ("grep_r", "search", "grep -rn 'def ' src", REPO, None, label_first(5)),
        ("find_py", "search", "find . -type f -name '*.py*' -not -path './.git/*'", REPO, None, label_first(5)),
        ("ls_laR", "search", "ls -laR .", site, None, label_first(5)),
        ("app_log", "log", f"{py} app.py", tmp / "logapp", lambda p: log_app(p, 1489), label_log),
        ("python_crash", "other", f"{py} migrate.py", tmp / "crash", lambda p: crash_script(p, 2318), label_crash),
    ]


def prepare_special(name: str, cwd: Path, large: bool = False) -> None:
    if name == "tsc_errors":
        ts_project(cwd, 238 if large else 6)
        run("npm install --no-audit --no-fund typescript", cwd)
    elif name == "npm_install_bad_version":
        cwd.mkdir(parents=True, exist_ok=True)
        (cwd / "package.json").write_text('{"name": "npmbad", "version": "1.0.0"}\n')
    elif name == "git_status_untracked" and large:
        prepare_big_status(cwd)
    elif name == "git_status_untracked":
        cwd.mkdir(parents=True, exist_ok=True)
        run("git init -q -b main . && git config user.email t@example.invalid && git config user.name t", cwd)
        for i in range(30):
            (cwd / f"f{i}.txt").write_text("a\n")
        run("git add . && git commit -qm init", cwd)
        for i in range(10):
            (cwd / f"f{i}.txt").write_text("b\n")
        for i in range(60):
            (cwd / "new" / f"d{i % 6}").mkdir(parents=True, exist_ok=True)
            (cwd / "new" / f"d{i % 6}" / f"n{i}.txt").write_text("n\n")
        run("git add f0.txt f1.txt", cwd)


def prepare_big_status(cwd: Path, dirs: int = 20, per_dir: int = 124) -> None:
    """A repo of ``dirs * per_dir`` committed files: most modified, some staged, some deleted, and untracked
    files beside them (listed one by one: their directories are tracked)."""
    cwd.mkdir(parents=True, exist_ok=True)
    run("git init -q -b main . && git config user.email t@example.invalid && git config user.name t", cwd)
    files = [cwd / "src" / f"module_{d:02d}" / f"file_{i:03d}.py" for d in range(dirs) for i in range(per_dir)]
    for f in files:
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("a = 1\n")
    run("git add . && git commit -qm init", cwd)
    for n, f in enumerate(files):
        if n % 20 == 7:
            f.unlink()
        elif n % 10 != 9:
            f.write_text("a = 2\n")
        if n % 5 == 3:
            f.with_name(f"new_{f.name}").write_text("b = 1\n")
    run("git add " + " ".join(str(f.relative_to(cwd)) for n, f in enumerate(files) if n % 7 == 1), cwd)


def scrub(text: str, tmp: Path) -> str:
    text = text.replace(str(tmp), "/tmp/proj").replace(str(REPO), "/repo").replace(str(TOOLS_VENV), "/tmp/tools")
    text = text.replace(sys.prefix, "/venv").replace(os.path.expanduser("~"), "/home/dev")
    # package indexes are not named in the corpus
    text = re.sub(r"https?://[\w.-]*pypi\.org/simple", "https://index.invalid/simple", text)
    text = text.replace("file:///opt/pypi-more/simple", "file:///opt/index-b/simple")
    text = text.replace("file:///opt/pypi/simple", "file:///opt/index-a/simple")
    return text.replace("/opt/pypi/files", "/opt/index-a/files").replace("/opt/wheels", "/opt/index-w")


def relabel() -> int:
    """Recompute every sidecar's ``must_keep`` from its committed ``.txt`` (no tool is run), large ones too."""
    with tempfile.TemporaryDirectory(prefix="dcorp") as t:
        labels = {name: label for name, _k, _c, _w, _s, label in cases(Path(t))}
    labels["pip_install_tools"] = label_pip
    for meta_path in sorted([*HERE.glob("*.json"), *LARGE.glob("*.json")]):
        meta = json.loads(meta_path.read_text())
        out = meta_path.with_suffix(".txt").read_text()
        write(meta_path.stem, meta["kind"], meta["command"], out, labels[meta_path.stem](out), meta_path.parent)
    return 0


def make_large(want: set[str]) -> int:
    """Write the large corpus (``LARGE``); a case whose tool is missing, or prints less than LARGE_CHARS,
    is not written and says so."""
    LARGE.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="dcorpl") as t:
        tmp = Path(t)
        if not want or {"ruff_check", "mypy_errors"} & want:
            ensure_tools_venv()
        for name, kind, cmd, cwd, setup, label in large_cases(tmp):
            if name not in want and (want or name in LARGE_ON_REQUEST):
                continue
            if setup is not None:
                setup(cwd)
            else:
                prepare_special(name, cwd, large=True)
            full = scrub(run(cmd, cwd, timeout=900), tmp)
            if len(full) < LARGE_CHARS:
                print(f"{name:28} skipped: the tool printed {len(full):,} characters (< {LARGE_CHARS:,})")
                continue
            out = cut(full, LARGE_CHARS)
            write(name, kind, scrub(cmd, tmp), out, label(out), LARGE)
            print(f"{'':28} the tool printed {len(full):,} characters")
    return 0


def main(argv: list[str]) -> int:
    if argv == ["--relabel"]:
        return relabel()
    if argv[:1] == ["--large"]:
        return make_large(set(argv[1:]))
    want = set(argv)
    with tempfile.TemporaryDirectory(prefix="dcorp") as t:
        tmp = Path(t)
        extra: dict[str, tuple[str, str]] = {}
        if not want or "pip_install_tools" in want or {"ruff_check", "mypy_errors"} & want:
            extra["pip_install_tools"] = ensure_tools_venv()
        todo = cases(tmp)
        for name, kind, cmd, cwd, setup, label in todo:
            if want and name not in want:
                continue
            if setup is not None:
                setup(cwd)
            else:
                prepare_special(name, cwd)
            out = cut(scrub(run(cmd, cwd), tmp), 30_000 if name in CUT_30K else MAX_CHARS)
            write(name, kind, scrub(cmd, tmp), out, label(out))
        if "pip_install_tools" in extra:
            cmd, out = extra["pip_install_tools"]
            out = cut(scrub(out, tmp))
            write("pip_install_tools", "install", scrub(cmd, tmp), out, label_pip(out))
    return 0


def write(name: str, kind: str, cmd: str, out: str, keep: list[str], where: Path = HERE) -> None:
    (where / f"{name}.txt").write_text(out)
    meta = {"command": cmd, "kind": kind, "tool": "Bash", "must_keep": keep}
    (where / f"{name}.json").write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n")
    print(f"{name:28} {kind:8} {len(out):7} chars {out.count(chr(10)):5} lines {len(keep):4} must-keep")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
