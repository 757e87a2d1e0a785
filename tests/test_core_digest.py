"""core.digest: extractive, deterministic digests; every labelled must-keep line of the real-tool corpus
kept verbatim; >= 70 % fewer tokens on outputs over 2k tokens at level 1."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import msgspec
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxlifed.core.compress_policy import CompressSettings, decide, worth_replacing
from ctxlifed.core.hook_events import PostToolUse
from ctxlifed.core.digest import KINDS, MAX_SCAN, digest, kept_verbatim, output_kind
from ctxlifed.core.model import estimate_tokens

CORPUS = Path(__file__).resolve().parent.parent / "bench" / "digest_corpus"


def corpus() -> list[tuple[str, dict, str]]:
    return [(m.stem, json.loads(m.read_text()), m.with_suffix(".txt").read_text()) for m in sorted(CORPUS.glob("*.json"))]


def _rows_of(nb: str, offsets: list[int]) -> list[int]:
    """The plain way: the line of each offset in ``nb`` ("\\n" + the text), a match that starts with the newline
    before a line being on that line."""
    return [nb.count("\n", 1, o + 1) for o in offsets]


def test_corpus_is_there_and_labelled() -> None:
    cases = corpus()
    assert len(cases) >= 20
    assert {meta["kind"] for _n, meta, _t in cases} >= {"test", "build", "install", "search", "diff", "log", "other"}
    for name, meta, text in cases:
        lines = set(text.split("\n"))
        assert meta["must_keep"], name
        assert all(x in lines for x in meta["must_keep"]), name  # labels are lines of the output


@pytest.mark.parametrize("name,meta,text", corpus(), ids=lambda x: x if isinstance(x, str) and len(x) < 40 else "")
def test_every_must_keep_line_is_kept_verbatim(name: str, meta: dict, text: str) -> None:
    d = digest(text, command=meta["command"], archive_id=12, full_path="/tmp/t/out.txt")
    missing = [x for x in meta["must_keep"] if x not in kept_verbatim(meta["must_keep"], d.text)]
    assert missing == [], (name, missing)
    assert d.kind == meta["kind"], name
    assert d.must_omitted == 0


def test_whole_corpus_saving_over_2k_tokens_at_level_1() -> None:
    """The policy at level 1 plus the digest keep 100 % of must-keep lines and save >= 70 % of the tokens of
    the outputs over 2k tokens (outputs the model asked to see verbatim count as not saved)."""
    before = after = must = kept = 0
    s = CompressSettings()
    for _name, meta, text in corpus():
        d = digest(text, command=meta["command"], archive_id=1, budget_tokens=s.digest_budget_tokens,
                   max_tokens=s.digest_max_tokens)
        must += len(meta["must_keep"])
        kept += len(kept_verbatim(meta["must_keep"], d.text))
        if d.original_tokens > 2000:
            resp = {"stdout": text, "stderr": "", "interrupted": False, "isImage": False, "noOutputExpected": False}
            dec = decide(PostToolUse(tool_name="Bash", tool_input={"command": meta["command"]}, tool_response=resp), level=1, phase=None, settings=s)
            before += d.original_tokens
            after += d.tokens if dec is not None and worth_replacing(d.original_tokens, d.tokens, s) else d.original_tokens
    assert kept == must
    assert before > 0 and 1 - after / before >= 0.70, (before, after)


def test_digest_is_deterministic_and_states_size_and_way_back() -> None:
    _n, meta, text = next(c for c in corpus() if c[0] == "pytest_verbose_failures")
    a = digest(text, command=meta["command"], archive_id=42, full_path="/home/u/.claude/x/out.txt", ctl="/opt/bin/ctxlifectl")
    b = digest(text, command=meta["command"], archive_id=42, full_path="/home/u/.claude/x/out.txt", ctl="/opt/bin/ctxlifectl")
    assert a == b
    n_lines = len(text.rstrip("\n").split("\n"))
    assert a.original_lines == n_lines
    assert a.original_tokens == estimate_tokens(text)
    assert a.tokens == estimate_tokens(a.text)
    head = a.text.split("\n", 1)[0]
    assert f"{n_lines:,} lines" in head and f"~{estimate_tokens(text):,} tokens" in head
    assert a.text.endswith("[full output: /opt/bin/ctxlifectl recall --id 42; or Read /home/u/.claude/x/out.txt"
                           " with offset=<line> and limit=<lines>]")


def test_line_markers_are_the_original_line_numbers() -> None:
    """Every [La-b] run holds exactly lines a..b of the original (what Read offset=a limit=b-a+1 returns)."""
    for _name, meta, text in corpus():
        orig = text.split("\n")
        d = digest(text, command=meta["command"], archive_id=1)
        out = d.text.split("\n")
        runs = 0
        for idx, line in enumerate(out):
            if line.startswith("[L") and line.endswith("]") and line[2:-1].replace("-", "").isdigit():
                a, _, b = line[2:-1].partition("-")
                lo, hi = int(a), int(b or a)
                body = out[idx + 1: idx + 1 + hi - lo + 1]
                for k, got in enumerate(body):
                    want = orig[lo - 1 + k]
                    assert got == want or (got.startswith(want[:400]) and "… [+" in got), (meta["command"], lo + k)
                runs += 1
        assert runs > 0


def test_no_archive_path_means_recall_only() -> None:
    d = digest("x\n" * 10, archive_id=5)
    assert d.text.splitlines()[-1] == "[full output: ctxlifectl recall --id 5]"


def test_kinds_from_command_and_from_text() -> None:
    assert output_kind("", "cd x && uv run pytest -q") == "test"
    assert output_kind("", "pip install -r req.txt") == "install"
    assert output_kind("", "npm ci") == "install"
    assert output_kind("", "ruff check .") == "build"
    assert output_kind("", "gcc -c a.c") == "build"
    assert output_kind("", "git diff HEAD~1") == "diff"
    assert output_kind("", "journalctl -u x") == "log"
    assert output_kind("", "grep -rn foo src") == "search"
    assert output_kind("", "git status") == "search"
    for name, meta, text in corpus():  # MCP outputs have no command: the text alone tells most kinds
        if meta["kind"] in ("test", "build", "diff"):
            assert output_kind(text) == meta["kind"], name
    assert output_kind("hello\nworld\n") == "other"
    assert set(KINDS) == {"test", "build", "install", "search", "diff", "log", "other"}


def test_failing_tests_survive_far_from_the_head() -> None:
    """A long passing log with two failures at the end (what Claude Code's 2 KB preview loses)."""
    lines = [f"tests/test_a.py::test_{i} PASSED" for i in range(3000)]
    lines += ["tests/test_a.py::test_x FAILED", "", "_____ test_x _____", "",
              ">       assert f() == 2", "E       assert 1 == 2", "", "tests/test_a.py:9: AssertionError",
              "FAILED tests/test_a.py::test_x - assert 1 == 2", "===== 1 failed, 3000 passed in 9.1s ====="]
    text = "\n".join(lines) + "\n"
    d = digest(text, command="pytest -v", archive_id=3)
    for want in ("E       assert 1 == 2", "tests/test_a.py:9: AssertionError", "===== 1 failed, 3000 passed in 9.1s =====",
                 "FAILED tests/test_a.py::test_x - assert 1 == 2", "tests/test_a.py::test_x FAILED"):
        assert want in d.text.split("\n")
    assert d.tokens < d.original_tokens * 0.1


def test_too_many_errors_are_counted_not_dropped_silently() -> None:
    text = "".join(f"src/m{i}.c:{i}:1: error: bad thing number {i} here\n" for i in range(5000))
    d = digest(text, command="make", archive_id=9, max_tokens=500)
    assert d.must_omitted > 0
    assert f"[{d.must_omitted} more error/failure lines not shown" in d.text
    assert d.tokens < 1000


def test_huge_output_is_scanned_at_both_ends_with_true_line_numbers() -> None:
    body = "".join(f"line {i}\n" for i in range(400_000))
    text = "START error: first\n" + body + "error: last one\n"
    assert len(text) > MAX_SCAN
    d = digest(text, archive_id=1)
    out = d.text.split("\n")
    assert "START error: first" in out and "error: last one" in out
    last_no = len(text.rstrip("\n").split("\n"))
    assert f"[L{last_no}]" in out[out.index("error: last one") - 1] or any(
        x.startswith("[L") and x.endswith(f"-{last_no}]") for x in out)
    assert "scanned" in d.text


def test_long_context_lines_are_cut_and_say_so() -> None:
    text = "x" * 5000 + "\n" + "ok\n" * 50
    d = digest(text, archive_id=1)
    assert "… [+4600 chars]" in d.text and "cut" in d.text


def test_pure_module_imports_no_io() -> None:
    code = ("import sys; before=set(sys.modules); import ctxlifed.core.digest, ctxlifed.core.compress_policy; "
            "print(' '.join(sorted(set(sys.modules) - before)))")
    mods = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split())
    assert not {"anyio", "sqlite3", "socket", "structlog", "sqlite_utils", "watchfiles", "subprocess"} & mods


def _estimate_by_characters(text: str) -> int:
    """The estimate's definition, one character at a time (core.model's rule)."""
    from ctxlifed.core.model import _is_cjk

    cjk = sum(1 for ch in text if _is_cjk(ch))
    return cjk + (len(text) - cjk + 3) // 4 if text else 0


def test_token_estimate_counts_cjk_characters_as_its_definition_does() -> None:
    for text in ("", "abc", "中文abc", "é" * 10, "ｱ漢字한국어 x" * 50, "ー", "\uffef\u3040", "\u309f\u30a0",
                 "· — … ✓ ⎿ " * 100, "é" * 300 + "漢", "漢" + "→" * 300):
        assert estimate_tokens(text) == _estimate_by_characters(text), text


def test_mixed_runner_output_keeps_each_runners_failures() -> None:
    """`make test` running pytest then cargo: both runners' patterns apply."""
    py = next(c for c in corpus() if c[0] == "pytest_default_failures")
    rs = next(c for c in corpus() if c[0] == "cargo_test")
    text = py[2] + rs[2]
    d = digest(text, command="make test", archive_id=1)
    must = py[1]["must_keep"] + rs[1]["must_keep"]
    assert kept_verbatim(must, d.text) == must


def test_diff_digest_counts_each_file_right() -> None:
    text = ("diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,3 @@\n a\n-b\n+c\n+d\n"
            "diff --git a/y.md b/y.md\n--- a/y.md\n+++ b/y.md\n@@ -5 +5 @@\n-old\n+new\n") * 1
    d = digest(text * 40, command="git diff", archive_id=2)
    assert d.kind == "diff"
    assert "[80 files, +120 -80 lines: x.py +2 -1, y.md +1 -1, x.py +2 -1" in d.text


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_LINE = st.one_of(
    st.text(max_size=80),
    st.sampled_from(["E       assert 1 == 2", "FAILED t.py::x - boom", "a.c:1:2: error: bad", "Traceback (most recent call last):",
                     "ValueError: nope", "===== 1 failed in 0.1s =====", "", "   ", "\r", "ok 1 - x", "diff --git a/x b/x"]),
)


@settings(max_examples=150, deadline=None)
@given(lines=st.lists(_LINE, max_size=120), command=st.one_of(st.none(), st.sampled_from(["pytest", "make", "git diff", "ls -R", "pip install x", "tail x.log", "echo"])))
def test_any_text_gives_a_bounded_faithful_digest(lines: list[str], command: str | None) -> None:
    text = "\n".join(lines)
    d = digest(text, command=command, archive_id=1, max_tokens=300, budget_tokens=200)
    assert d == digest(text, command=command, archive_id=1, max_tokens=300, budget_tokens=200)
    orig = text.split("\n")
    out = d.text.split("\n")
    for idx, line in enumerate(out):
        if line.startswith("[L") and line.endswith("]") and line[2:-1].replace("-", "").isdigit():
            a, _, b = line[2:-1].partition("-")
            for k, got in enumerate(out[idx + 1: idx + 2 + int(b or a) - int(a)]):
                want = orig[int(a) - 1 + k]
                assert got == want or (got.startswith(want[:400]) and "… [+" in got)
    assert d.kept_lines <= len(orig)
    assert len(d.text) <= 4 * (300 + 200) + 80 * (d.kept_lines + 1) + 2000


# every runner's failing-test forms in one regex (what the digest counted before it read each runner's forms
# apart, and still reads with none recognised): the reference the per-runner forms are held to
_PY_TEST_FAIL_RE = re.compile(
    r"\n(?:FAILED (?!\()(\S+)|FAIL: (\S+)|ERROR: (\S+)|test (?=[^\n]*FAILED)(\S++) \.\.\. FAILED"
    r"|not ok \d+ - ([^\n]+)|[ \t]*+(?:--- FAIL: (\S+)|● ([^\n]+)))"
)
_FAIL_GROUP_RUNNER = {1: "pytest", 2: "unittest", 3: "unittest", 4: "cargo", 5: "js", 6: "go", 7: "js"}


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(["\n", "FAILED ", "FAIL: ", "ERROR: ", "test ", " ... FAILED", "not ok 3 - ", "  ",
                                 "\t", "--- FAIL: ", "● ", "t::a", "(x)", " ok", "é", "x"]), max_size=20),
       st.sets(st.sampled_from(["pytest", "unittest", "cargo", "go", "js"])))
def test_failing_tests_named_are_those_of_the_runners_found(parts: list[str], runners: set[str]) -> None:
    # the ids are the lines of the runners' own forms, as the one regex of all forms reads them
    from ctxlifed.core import digest as D

    nb = "\n" + "".join(parts)
    names = tuple(n for n in D._RUNNER_NAMES if n in runners)
    want = {m.group(g) for m in _PY_TEST_FAIL_RE.finditer(nb) for g in [m.lastindex]
            if not names or _FAIL_GROUP_RUNNER[g] in names}
    assert D._fail_names(nb, names) == want


def test_a_pytest_run_counts_its_own_failures_not_a_printed_tap_line() -> None:
    run = ("============================= test session starts ==============================\n"
           "tests/test_a.py F.F\n"
           "----------------------------- Captured stdout call -----------------------------\n"
           "not ok 3 - printed by the test (looks like TAP)\n"
           "=========================== short test summary info ============================\n"
           "FAILED tests/test_a.py::test_one - assert 1 == 2\n"
           "FAILED tests/test_a.py::test_three - assert 3 == 4\n"
           "========================= 2 failed, 1 passed in 0.01s ==========================\n")
    d = digest(run * 40, command="pytest", archive_id=1)
    assert d.text.split("\n")[1] == "[2 failing tests named]"


def test_unittest_verdict_is_not_counted_as_a_failing_test() -> None:
    """unittest ends with ``FAILED (failures=3)``: a verdict, not a test named ``(failures=3)``."""
    lines = [f"test_case_{i:04d} (m.T.test_case_{i:04d}) ... {'FAIL' if i in (3, 7) else 'ok'}" for i in range(400)]
    for i in (3, 7):
        lines += ["=" * 70, f"FAIL: test_case_{i:04d} (m.T.test_case_{i:04d})", "-" * 70,
                  "Traceback (most recent call last):", '  File "/p/m.py", line 9, in t',
                  f"AssertionError: {i} != {i + 1}", ""]
    lines += ["-" * 70, "Ran 400 tests in 0.009s", "", "FAILED (failures=2)"]
    d = digest("\n".join(lines), command="python -m unittest -v m", archive_id=1)
    assert "[2 failing tests named]" in d.text


# ---------------------------------------------------------------- the joined line-start scan


def _reference_anchored(spec: list[tuple[str, str]]) -> tuple[re.Pattern[str], list[tuple[int, int, bool]]] | None:
    """The plain join of a spec's line-start alternatives (named group around each, most important tier
    first): the semantics the fast joined scan must keep."""
    from ctxlifed.core import digest as D

    alts = []
    for order, (tag, pat) in enumerate(spec):
        if tag.startswith("count"):  # counted, not line-start patterns
            continue
        m = re.fullmatch(r"t(\d)(?:([nc])(\d))?", tag)
        assert m is not None
        info = (int(m.group(1)), int(m.group(3) or 0), m.group(2) == "c")
        alts += [(info[0] * 1000 + order, a[2:], info) for a in D._alternatives(pat) if a.startswith("\\n")]
    if not alts:
        return None
    alts.sort(key=lambda a: a[0])
    rx = re.compile("\\n(?:" + "|".join(f"(?P<g{i}>{a})" for i, (_o, a, _inf) in enumerate(alts)) + ")")
    return rx, [inf for _o, _a, inf in alts]


def _specs() -> dict[str, list[tuple[str, str]]]:
    from ctxlifed.core import digest as D

    out = {"build": D._BUILD, "install": D._INSTALL, "search": D._SEARCH, "diff": D._DIFF, "log": D._LOG,
           "other": D._OTHER, "test": D._TEST, "text_test": D._TEXT_TEST, "text_build": D._TEXT_BUILD}
    out.update({f"runner_{k}": D._test_spec([k]) for k in D._RUNNERS})
    out["runner_pytest_unittest"] = D._test_spec(["pytest", "unittest"])
    return out


def _same_matches(spec: list[tuple[str, str]], text: str) -> None:
    from ctxlifed.core import digest as D

    ref = _reference_anchored(spec)
    if ref is None:
        return
    rx, infos = ref
    nb = "\n" + text
    want = [(m.start(), m.end(), infos[int(m.lastgroup[1:])]) for m in rx.finditer(nb)]  # type: ignore[index]
    fast = D._compile(spec)[0]
    got = [(m.start(), m.end(), info) for m, info in D._finditer(fast, nb)]
    assert got == want


@pytest.mark.parametrize("spec_name", sorted(_specs()))
def test_joined_line_start_scan_matches_like_the_plain_join_on_the_corpus(spec_name: str) -> None:
    spec = _specs()[spec_name]
    for _name, _meta, text in corpus():
        _same_matches(spec, text)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(["\n", " ", "  ", "\t", "E", "FAILED ", "ok ", "Finished ", "error: ", "Error",
                                 "ValueError", "a.b.", ".", ":", "12", "3:4", " error ", "passed", "== ", "___ ",
                                 "x.py:3: ", "● ", "not ok 1", "--- FAIL: ", "Tests: ", "left: ", "F401 ", "TS2322",
                                 "Expected", "x"]), max_size=60))
def test_joined_line_start_scan_matches_like_the_plain_join_on_any_text(parts: list[str]) -> None:
    text = "".join(parts)
    for spec in _specs().values():
        _same_matches(spec, text)


def test_fast_starts_rewrites_a_leading_quantifier_or_group_to_a_literal_or_class_start() -> None:
    from ctxlifed.core.digest import _fast_starts

    assert _fast_starts(r"\d+ errors?") == [r"\d\d*+ errors?"]  # a digit run before a space: possessive
    assert _fast_starts(r"\s*Finished ") == [r"\s\s*+Finished ", "Finished "]
    assert _fast_starts(r"_{3,} x") == [r"__{2,} x"]
    assert _fast_starts(r"[A-Z]{1,4}\d") == [r"[A-Z][A-Z]{0,3}\d"]
    assert _fast_starts(r"(?:#|ℹ) (?:a|b)") == [r"# (?:a|b)", r"ℹ (?:a|b)"]
    assert _fast_starts(r"(?:[\w.]+\.)?[A-Z]\w*") == [r"[\w.][\w.]*\.[A-Z]\w*", r"[A-Z]\w*"]
    assert _fast_starts(r"\s+?x") == [r"\s+?x"]  # a lazy quantifier stays as it is
    assert _fast_starts("FAILED ") == ["FAILED "]


def test_fast_starts_takes_a_run_possessively_only_before_a_character_it_cannot_match() -> None:
    from ctxlifed.core.digest import _fast_starts

    assert _fast_starts(r"\d* 5") == [r"\d\d*+ 5", " 5"]
    assert _fast_starts(r"[a-z]+:") == [r"[a-z][a-z]*+:"]
    assert _fast_starts("a*a") == ["aa*a", "a"]  # the run could give back what follows it
    assert _fast_starts(r"\d+7") == [r"\d\d*7"]
    assert _fast_starts(r"\d+ ?x") == [r"\d\d* ?x"]  # what follows is optional: not a required character


def test_fast_starts_takes_leading_white_space_possessively_only_before_a_non_space() -> None:
    from ctxlifed.core.digest import _fast_starts

    assert _fast_starts("\\s*✕ ") == ["\\s\\s*+✕ ", "✕ "]
    assert _fast_starts("\\s+\\d+ passing") == ["\\s\\s*+\\d\\d*+ passing"]  # what follows the run is spelled out too
    assert _fast_starts("\\s*(?:a|b)x") == ["\\s\\s*+ax", "\\s\\s*+bx", "ax", "bx"]
    assert _fast_starts("\\s*[●✕] ") == ["\\s\\s*+[●✕] ", "[●✕] "]
    assert _fast_starts("\\s*(?:a|\\s)x") == ["\\s\\s*(?:a|\\s)x", "ax", "\\sx"]  # the rest may start with a space
    assert _fast_starts("\\s*[^x]") == ["\\s\\s*[^x]", "[^x]"]


_PY_EXC_PLAIN = r"\n(?!\d)(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure)\b(?::[^\n]*)?(?=\n|$)"


def _py_exc_spans(pattern: str, text: str) -> list[tuple[int, int]]:
    return [m.span() for m in re.finditer(pattern, "\n" + text)]


def test_python_exception_pattern_matches_the_lines_of_its_plain_form_on_the_corpus() -> None:
    from ctxlifed.core.digest import _PY_EXC

    for _name, _meta, text in corpus():
        assert _py_exc_spans(_PY_EXC, text) == _py_exc_spans(_PY_EXC_PLAIN, text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["\n", "ValueError", "Error", "Exit", "SystemExit", "KeyboardInterrupt", "Failure",
                                 "x", "X", "_", ".", "a.b", ":", ": msg", " ", "é", "É", "Exception", "1"]), max_size=12))
def test_python_exception_pattern_matches_the_lines_of_its_plain_form_on_any_text(parts: list[str]) -> None:
    from ctxlifed.core.digest import _PY_EXC

    text = "".join(parts)
    assert _py_exc_spans(_PY_EXC, text) == _py_exc_spans(_PY_EXC_PLAIN, text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)) | st.sampled_from(["→", "…", "─", "漢", "ｱ", "한", "\u3040", "\u30ff", "\uffef", "\ufff0", "\u2fff"]), max_size=600))
def test_token_estimate_counts_cjk_characters_as_its_definition_does_on_any_text(text: str) -> None:
    assert estimate_tokens(text) == _estimate_by_characters(text)


def test_failing_tests_named_counts_each_distinct_id_once_in_a_long_run() -> None:
    ids = [f"tests/test_m{i // 50}.py::test_case_{i}" for i in range(1500)]
    text = "".join(f"FAILED {x} - AssertionError: x\n" for x in ids + ids[:300]) + "==== 1500 failed in 3.2s ====\n"
    d = digest(text, command="pytest", archive_id=3)
    assert "1500 failing tests named" in d.text


def test_an_indented_failure_line_after_a_blank_line_is_kept() -> None:
    # a line-start pattern's leading white space stays within its line: ``\s*`` once matched from the
    # blank line's start through to the next line, which was then never marked
    lines = ["PASS a"] * 300 + ["", "  ● Suite › adds", "", "    expect(received).toBe(expected)"]
    lines += ["x"] * 300 + ["Tests:       1 failed, 3 passed, 4 total"]
    d = digest("\n".join(lines), command="npx jest", archive_id=1)
    assert "  ● Suite › adds" in d.text.split("\n")
    assert "[L302]" in d.text.split("\n")


def test_branches_sharing_a_head_are_joined_only_past_branches_that_cannot_match_there() -> None:
    from ctxlifed.core.digest import _join_branches

    assert _join_branches(["Found (?P<a>)", "ok (?P<b>)", "Finished (?P<c>)"]) == "F(?:ound (?P<a>)|inished (?P<c>))|ok (?P<b>)"
    # a class that may match "F" sits between them: the order matters, nothing is moved
    assert _join_branches(["Found ", "[A-Z]x", "Finished "]) == "Found |[A-Z]x|Finished "
    # a class that cannot match a space or a tab does not stop the indented branches from joining
    assert _join_branches(["[ \\t][ \\t]*+a", "[\\w.]b", "[ \\t][ \\t]*+c"]) == "[ \\t][ \\t]*+(?:a|c)|[\\w.]b"
    assert _join_branches(["[ \\t][ \\t]*+a", "\\sb", "[ \\t][ \\t]*+c"]) == "[ \\t][ \\t]*+a|\\sb|[ \\t][ \\t]*+c"


def test_a_build_counts_its_warnings_by_flag() -> None:
    lines = [f"src/m{i}.c:{i}:5: warning: unused variable 'x' [-Wunused-variable]" for i in range(1, 4)]
    lines += ["src/a.c:9:1: warning: no flag here", "src/b.c:2:3: error: expected ';'", "  x = 1", "    ^",
              "warning: unused import: `y`", "x.ts(3,1): warning TS6133: 'z' is declared"]
    d = digest("\n".join(lines * 20), command="make", archive_id=1)
    assert "[warnings: 120 ([-Wunused-variable] 60, warning 60)]" in d.text.split("\n")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["\n", "a", ".py", ".py:", "py", ":", "12", ": ", "in f", "x.y", "/", "-", "\\", " ",
                                 ".", "tests/t.py:3: AssertionError", "E", "...."]), max_size=14))
def test_pytest_location_pattern_matches_like_its_plain_form(parts: list[str]) -> None:
    from ctxlifed.core.digest import _PY_LOCATION_OR_EXC, _RUNNERS

    assert ("t1", _PY_LOCATION_OR_EXC) in _RUNNERS["pytest"][1]
    # the location line or an exception line, in one branch
    plain = r"\n[\w./\\-]+\.py:\d+: (?:in \S+|[A-Za-z_][\w.]*)(?=\n|$)|" + _PY_EXC_PLAIN
    text = "".join(parts)
    for t in (text, "\n" + text):
        assert [m.span() for m in re.finditer(_PY_LOCATION_OR_EXC, t)] == [m.span() for m in re.finditer(plain, t)]


_LOCATION_OR_EXC_PARTS = ["\n", "a", ".py", ".py:", "py", ":", "12", ": ", "in f", "x.y", "/", "-", "\\", " ", ".",
                          "tests/t.py:3: AssertionError", "E", "....", "ValueError", "Error", "Exit", "SystemExit",
                          "Failure", "X", "_", "a.b", ": msg", "é", "Exception", "1", "::", "x.py::t", "r", "t"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_LOCATION_OR_EXC_PARTS), max_size=14))
def test_pytest_location_or_exception_branch_matches_like_its_plain_forms(parts: list[str]) -> None:
    from ctxlifed.core.digest import _PY_LOCATION_OR_EXC

    plain = r"\n[\w./\\-]+\.py:\d+: (?:in \S+|[A-Za-z_][\w.]*)(?=\n|$)|" + _PY_EXC_PLAIN
    text = "\n" + "".join(parts)
    assert [m.span() for m in re.finditer(_PY_LOCATION_OR_EXC, text)] == [m.span() for m in re.finditer(plain, text)]
    assert [m.span() for m in re.finditer(_PY_LOCATION_OR_EXC, text, re.A)] == [
        m.span() for m in re.finditer(plain, text, re.A)]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_LOCATION_OR_EXC_PARTS), max_size=14))
def test_a_test_runs_exception_pattern_matches_the_lines_of_its_plain_form(parts: list[str]) -> None:
    from ctxlifed.core.digest import _TEST_EXC

    text = "".join(parts)
    assert _py_exc_spans(_TEST_EXC, text) == _py_exc_spans(_PY_EXC_PLAIN, text)


def _match_lines(pattern: str, text: str, flags: int = 0) -> set[int]:
    return {text.count("\n", 0, m.start()) for m in re.finditer(pattern, text, flags)}


_ERROR_WORDS_PLAIN = r"\berror(?:\[\w+\])?: |\bpanic: |\bfatal: "


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["\n", "error", "panic", "fatal", ": ", ":", " ", "x", "_", "é", "[E0308]", "[", "]",
                                 "r", "c", "l", "error: ", "xerror: ", "1"]), max_size=16))
def test_a_test_runs_error_words_are_found_on_the_lines_of_their_plain_form(parts: list[str]) -> None:
    from ctxlifed.core.digest import _TEST_ERROR_WORDS, _alternatives

    text = "".join(parts)
    for flags in (0, re.A):
        got = set().union(*(_match_lines(alt, text, flags) for alt in _alternatives(_TEST_ERROR_WORDS)))
        assert got == _match_lines(_ERROR_WORDS_PLAIN, text, flags)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["\n", "::", ":", "x", " ", "\t", "  ", "PASSED", "FAILED", "ERROR", "XFAIL", "é", "\u00a0",
                                 "... ok", "[1]"]), max_size=14))
def test_pytest_result_marks_match_like_their_plain_forms(parts: list[str]) -> None:
    from ctxlifed.core.digest import _RUNNERS

    text = "".join(parts)
    marks, spec = _RUNNERS["pytest"]
    pairs = [(next(a for a in _alternatives_of(marks) if a.startswith("::")),
              r"::\S+ (?:PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b"),
             (next(a for _t, p in spec for a in _alternatives_of(p) if a.startswith("::")), r"::\S+ (?:FAILED|ERROR)\b")]
    for fast, plain in pairs:
        assert "\\S++" in fast
        for flags in (0, re.A):
            assert [m.span() for m in re.finditer(fast, text, flags)] == [m.span() for m in re.finditer(plain, text, flags)]


def _alternatives_of(pattern: str) -> list[str]:
    from ctxlifed.core.digest import _alternatives

    return _alternatives(pattern)


def test_a_test_runs_exception_pattern_matches_the_lines_of_its_plain_form_on_the_corpus() -> None:
    from ctxlifed.core.digest import _PY_LOCATION_OR_EXC, _TEST_EXC

    plain = r"\n[\w./\\-]+\.py:\d+: (?:in \S+|[A-Za-z_][\w.]*)(?=\n|$)|" + _PY_EXC_PLAIN
    from ctxlifed.core.digest import _TEST_ERROR_WORDS, _alternatives

    for _name, _meta, text in corpus():
        assert _py_exc_spans(_TEST_EXC, text) == _py_exc_spans(_PY_EXC_PLAIN, text)
        words = set().union(*(_match_lines(alt, text) for alt in _alternatives(_TEST_ERROR_WORDS)))
        assert words == _match_lines(_ERROR_WORDS_PLAIN, text)
        assert _py_exc_spans(_PY_LOCATION_OR_EXC, text) == _py_exc_spans(plain, text)


def test_a_long_error_list_is_digested_without_setting_off_the_garbage_collector() -> None:
    # thousands of matches held at once would each count towards a collection (and a full one now and
    # then is a hook's slowest moment): they are read in small batches
    import gc

    text = "".join(f"src/m{i % 50}.py:{i}: error: Incompatible types in assignment [assignment]\n" for i in range(4000))
    gc.collect()
    before = [s["collections"] for s in gc.get_stats()]
    for _ in range(5):
        digest(text, command="mypy src", archive_id=1)
    assert [s["collections"] for s in gc.get_stats()] == before


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["\n", "a.c", ":", "12", "3", ": ", "error: ", "fatal ", "note: ", "warning: ", "F401",
                                 " x", "E501 ", "::", "1:2: "]), max_size=16))
def test_the_file_line_family_joined_finds_what_each_pattern_finds_alone(parts: list[str]) -> None:
    from ctxlifed.core import digest as D

    text = "\n" + "".join(parts)
    joined = next(sc for sc in D._PATTERNS["build"] if sc.rx.pattern.startswith(":"))
    alone = {(1, 2, True): r":\d+(?::\d+)?: (?:fatal )?error: ", (1, 0, False): r":\d+:\d+: [A-Z]{1,4}\d{2,4}\b",
             (2, 0, False): r":\d+(?::\d+)?: note: "}
    want = {(m.start(), info) for info, rx in alone.items() for m in re.finditer(rx, text)}
    for twin in (False, True) if text.isascii() else (False,):
        scan = msgspec.structs.replace(joined, rx=joined.arx) if twin else joined
        assert {(m.start(), info) for m, info in D._finditer(scan, text)} == want


_RUN_PIECES = ["a.py", ":", "12", "3", ": ", "error: ", "fatal ", "note: ", "F401", " x", "::", "1:2: ", "test_a",
               " FAILED", " ERROR", " ... FAIL", " ... FAILED", "panicked at ", "error[E1]: ",
               "Traceback (most recent call last)", "ld returned 1 exit status", "fatal: ", "undefined reference to",
               "No such file or directory", "command not found", "error TS2", "Permission denied", "ERROR", "Error: ",
               "Exception", "FATAL", "CRITICAL", "WARNING", "warning: ", "panic: ", "Segmentation fault",
               "vulnerabilit", "Failed to build", "Could not find a version", " ", "\t", "é"]


def _best_tiers(found: tuple[set[int], ...]) -> list[set[int]]:
    """Each line in the best tier it was put in (as digest() resolves them)."""
    seen: set[int] = set()
    out = []
    for tier in found:
        out.append(tier - seen)
        seen |= tier
    return out


def _scans_with_runs() -> list:
    from ctxlifed.core import digest as D

    scans = [sc for scs in D._PATTERNS.values() for sc in scs]
    scans += [sc for _marks, scs in D._RUNNER_SCANS.values() for sc in scs]
    return [sc for sc in scans if sc.run_names]


def test_the_scans_not_at_a_line_start_have_run_forms() -> None:
    from ctxlifed.core import digest as D

    runs = _scans_with_runs()
    assert any(sc.rx.pattern.startswith(":\\d++:") for sc in runs)  # the file:line family (mypy, gcc, ruff)
    for sc in runs:
        assert sc.rows_from == 1 and sc.run_rx is not None and sc.run_arx is not None
    assert D._within_line(r":\d++: (?:fatal )?error: [^\n]*+(?=\n|$)(?<!x)[^\s:]\S")
    for spelled in (r"a\sb", r"a[^x]b", r"a\nb", r"a[\W]", r"a\Db", r"(?s:a.b)", r"(a)\1", r"a[\x00-z]"):
        assert not D._within_line(spelled), spelled


@settings(max_examples=400, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_RUN_PIECES), max_size=6).map("".join), min_size=1, max_size=5),
       st.lists(st.integers(0, 4), max_size=40), st.booleans())
def test_run_forms_mark_the_lines_the_plain_scans_mark(lines: list[str], picks: list[int], final_newline: bool) -> None:
    # a run form (one match for a list of lines one after another) puts each line in the same best tier as
    # the plain scan, match by match; lines drawn again and again from a few make the runs
    from ctxlifed.core import digest as D

    text = "\n".join(lines[i % len(lines)] for i in picks) + ("\n" if final_newline else "")
    nb = "\n" + text
    for scan in _scans_with_runs():
        plain = msgspec.structs.replace(scan, run_rx=None, run_arx=None, run_names=frozenset())
        for is_log in (False, True):
            want: tuple[set[int], ...] = (set(), set(), set(), set())
            got: tuple[set[int], ...] = (set(), set(), set(), set())
            D._mark_scan(plain, nb, want, is_log)
            D._mark_scan(scan, nb, got, is_log)
            assert _best_tiers(got) == _best_tiers(want), scan.rx.pattern


def test_a_long_error_list_is_one_match_of_the_run_form() -> None:
    from ctxlifed.core import digest as D

    errors = [f"src/m{i % 50}.py:{i}: error: Incompatible types in assignment [assignment]\n" for i in range(3000)]
    text = "".join(errors) + "src/x.py:1: note: see above\n" + "".join(errors[:20])
    nb = "\n" + text
    scan = next(sc for sc in D._PATTERNS["build"] if sc.rx.pattern.startswith(":"))
    offsets, groups, run_ends = D._where(scan, nb, with_groups=True)
    assert len(offsets) == 3 and len(run_ends) == 2  # the errors, the note, the errors after it
    found: tuple[set[int], ...] = (set(), set(), set(), set())
    D._mark_scan(scan, nb, found, False)
    assert found[1] == set(range(3000)) | set(range(3001, 3021))
    # the note, and the two lines after the last error (past the end: dropped later)
    assert found[2] - found[1] == {3000, 3021, 3022}


def _warnings_one_by_one(nb: str) -> Counter[str]:
    """What the warning facts count, the plain way: each ``file:line[:col]: warning: `` match, its flag read
    from the rest of its line, and the plain and tsc forms counted by a pass each."""
    warns: Counter[str] = Counter()
    for m in re.finditer(r":\d+(?::\d+)?: warning: ", nb):
        end = nb.find("\n", m.end())
        seg = nb[m.end(): end if end >= 0 else len(nb)]
        k = seg.rfind(" [-W")
        warns[seg[k + 1:] if k >= 0 and seg.endswith("]") else "warning"] += 1
    warns["warning"] += len(re.findall(r"\nwarning(?:\[\w+\])?: ", nb)) + len(re.findall(r"warning TS\d+", nb))
    return +warns


def test_a_warning_whose_line_runs_on_past_what_is_read_is_counted_without_its_flag() -> None:
    # the rest of a warning's line is read up to _WARN_REST characters: a line of thousands of warnings is not
    # read once per warning; such a warning is counted, under "warning"
    from ctxlifed.core import digest as D

    long = "a.c:1:2: warning: " + "x" * D._WARN_REST + " [-Wlong]"
    short = "b.c:3:4: warning: y [-Wshort]"
    assert D._facts("build", "\n" + long + "\n" + short + "\n", Counter()) == \
        ["warnings: 2 ([-Wshort] 1, warning 1)"]
    many = "x.c:1:2: warning: y [-Wa" * 5000
    assert D._facts("build", "\n" + many, Counter()) == ["warnings: 5000 (warning 5000)"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["\n", "a.c", ":", "12", "3", ": ", "warning", "warning: ", " [-W", "x]", "]", " [-Wy]",
                                 "\nwarning[E1]: ", " TS12", "1:2: ", "é", "٣", " "]), max_size=20))
def test_the_warnings_are_counted_as_one_by_one(parts: list[str]) -> None:
    from ctxlifed.core import digest as D

    nb = "\n" + "".join(parts)
    facts = D._facts("build", nb, Counter())
    want = _warnings_one_by_one(nb)
    assert facts == ([f"warnings: {sum(want.values())} ({D._top(want, 6)})"] if want else [])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["\n", "warning", "warning: ", ": warning", ": warning: ", "warning[E1]: ", "warning[]: ",
                                 "warning TS12", " TS", "TS1", "warning T", ":", " ", "x", "é", "[", "]", "\nwarning"]),
                max_size=20))
def test_the_warning_forms_are_told_apart_as_by_the_plain_form(parts: list[str]) -> None:
    from ctxlifed.core import digest as D

    nb = "\n" + "".join(parts)
    plain = re.compile(r"warning(?:(?<=\nwarning)(?:\[\w+\])?(:) | (T)S\d+|(?<=: warning)(:) )")
    want = [(m.start(), D._WARN_PLAIN if m.group(1) else D._WARN_TS if m.group(2) else D._WARN_AT)
            for m in plain.finditer(nb)]
    for rx in (D._WARN_WORD_RE, D._WARN_WORD_ARE) if nb.isascii() else (D._WARN_WORD_RE,):
        assert [(m.start(), m.group(1)) for m in rx.finditer(nb)] == want


def test_git_status_entries_are_counted_by_label() -> None:
    status = ("On branch main\nChanges to be committed:\n  (use \"git restore --staged <file>...\" to unstage)\n"
              "\tnew file:   a.py\n\tmodified:   b.py\n\n"
              "Changes not staged for commit:\n\tmodified:   c.py\n\tdeleted:    d.py\n\n"
              "Untracked files:\n  (use \"git add <file>...\" to include in what will be committed)\n\te.py\n\tf/\n\t\n")
    d = digest(status * 30, command="git status", archive_id=1)
    assert "[status entries: modified 60, untracked/other 60, deleted 30, new file 30]" in d.text.split("\n")


def test_summary_lines_are_bounded_too_the_last_first() -> None:
    # a hundred status blocks: their section lines are verdicts; the digest stays within max_tokens and
    # says how many it left out, keeping the last ones (a run's summary is at its end)
    block = "On branch main\nChanges not staged for commit:\n\tmodified:   a.py\n\n"
    d = digest(block * 300 + "nothing added to commit\n", command="git status", archive_id=1, max_tokens=200)
    assert d.must_omitted > 0 and d.tokens < 400
    assert f"[{d.must_omitted} more summary lines not shown (too many): see the full output]" in d.text.split("\n")
    assert "nothing added to commit" in d.text.split("\n")


# ---------------------------------------------------------------- the cheaper forms find what the plain ones find

@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["\n", "ERROR: ", "xERROR: ", "  ", "Could not find a version", "No matching distribution",
                                 "Failed to build", " x", "Could", "é"]), max_size=20))
def test_install_phrases_after_error_are_not_found_twice_but_their_lines_are_the_same(parts: list[str]) -> None:
    from ctxlifed.core import digest as D

    nb = "\n" + "".join(parts)
    plain = re.compile(r"\nERROR: |\nnpm (?:ERR!|error) |\nerror: |\n[ \t]*× |\nE: |\bfatal: |\bFailed to build\b"
                       r"|\bCould not find a version\b|\bNo matching distribution\b")
    want = {nb.count("\n", 1, m.start() + 1) for m in plain.finditer(nb)}
    got: set[int] = set()
    for scan in D._PATTERNS["install"]:
        scan = msgspec.structs.replace(scan, run_rx=None, run_arx=None, run_names=frozenset())  # match by match
        offsets, groups, _run_ends = D._where(scan, nb, True)
        got.update(row for row, g in zip(D._scan_rows(scan, nb, offsets), groups if groups else [None] * len(offsets))
                   if scan.info.get(g, scan.info.get(None)) == (1, 0, False))
    assert got == want


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(["\n", " ", "x", "_", "é", "9", "f", "T", "S", "TS", "TS12", "error TS", "error TS1",
                                 "xerror TS2", "fatal: ", "xfatal: ", "fatal", ": ", "undefined reference to",
                                 "undefined reference tox", "xundefined reference to", "reference to", "file",
                                 "No such file or directory", "xNo such file or directory", "such file or directory",
                                 "command not found", "_command not found", "not found", "found",
                                 "Traceback (most recent call last)", "Traceback", "(most recent call last)"]),
                max_size=24))
def test_build_phrases_rooted_at_a_letter_find_the_lines_of_their_plain_form(parts: list[str]) -> None:
    from ctxlifed.core import digest as D

    nb = "\n" + "".join(parts)
    want = {nb.count("\n", 1, m.start() + 1) for m in re.finditer(D._BUILD_PHRASES_PLAIN, nb)}
    rooted = [(tag, pat) for tag, pat in D._BUILD if pat.startswith(("f(?:", "T(?:"))]
    assert len(rooted) == 2
    scans = D._compile(rooted)
    for twin in (False, True) if nb.isascii() else (False,):  # the ASCII twins too, on an ASCII text
        got: set[int] = set()
        for scan in scans:
            got.update(_rows_of(nb, [m.start() for m in (scan.arx if twin else scan.rx).finditer(nb)]))
        assert got == want


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(["\n", "ERROR: ", "xERROR: ", " ", "x", "_", "é", "b", "f", "vulnerabilit",
                                 "vulnerabilities", "bilit", "Failed to build", "xFailed to build", "Failed to buildx",
                                 "build", "No matching distribution", "No matching distributions", "distribution",
                                 "Could not find a version", "xCould not find a version", "find a version",
                                 "fatal: ", "xfatal: ", "fatal", "\nERROR: Could not find a version",
                                 "\nERROR: Failed to build", "\nERROR: No matching distribution"]), max_size=24))
@example(["ERROR: ", "Could not find a version", " x"])
def test_install_phrases_rooted_at_a_letter_find_the_lines_of_their_plain_form(parts: list[str]) -> None:
    from ctxlifed.core import digest as D

    nb = "\n" + "".join(parts)
    want = {(tier, nb.count("\n", 1, m.start() + 1))
            for tier, plain in D._INSTALL_PHRASES_PLAIN.items() for m in re.finditer(plain, nb)}
    rooted = [(tag, pat) for tag, pat in D._INSTALL if pat.startswith(("b(?:", "f(?:"))]
    assert len(rooted) == 3
    scans = D._compile(rooted)
    for twin in (False, True) if nb.isascii() else (False,):  # the ASCII twins too, on an ASCII text
        got: set[tuple[int, int]] = set()
        for scan in scans:
            for m, info in D._finditer(msgspec.structs.replace(scan, rx=scan.arx) if twin else scan, nb):
                got.add((info[0], nb.count("\n", 1, m.start() + 1)))
        assert got == want


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["=", "===", " ", "passed", "failed", "errors", "error", "no tests ran", "skipped",
                                 "deselected", "x", "_", ",", "\n", "é", "1", "s"]), max_size=24))
def test_the_pytest_summary_words_are_found_where_every_character_was_tried(parts: list[str]) -> None:
    from ctxlifed.core import digest as D

    text = "\n" + "".join(parts)
    plain = r"\n=+ [^\n]*?\b(?:passed|failed|errors?|no tests ran|skipped|deselected)\b[^\n]*"
    spec = next(pat for tag, pat in D._RUNNERS["pytest"][1] if "no tests ran" in pat)
    assert [m.span() for m in re.finditer(spec, text)] == [m.span() for m in re.finditer(plain, text)]
    ascii_text = text.replace("é", "e")
    assert [m.span() for m in re.finditer(D._ascii_form(spec), ascii_text, re.A)] == \
        [m.span() for m in re.finditer(plain, ascii_text)]


def _all_scans() -> list:
    from ctxlifed.core import digest as D

    scans = [sc for kind in D._PATTERNS.values() for sc in kind]
    scans += [sc for marks, spec in D._RUNNER_SCANS.values() for sc in (*marks, *spec)]
    scans.append(D._line_start_marks(frozenset(range(len(D._RUNNER_NAMES)))))
    scans += [sc for loose in D._TEXT_LOOSE for sc in loose]
    scans += [D._text_line_marks(kinds) for kinds in (D._TEXT_KINDS_ALL, D._TEXT_KINDS_TEST, D._TEXT_KINDS_NOT_TEST)]
    return scans


def _matches(rx: re.Pattern[str], nb: str) -> list[tuple[int, int, str | None]]:
    return [(m.start(), m.end(), m.lastgroup) for m in rx.finditer(nb)]


def _same_on_ascii(nb: str) -> None:
    from ctxlifed.core import digest as D

    assert nb.isascii()
    for sc in _all_scans():
        assert sc.arx is not None and sc.arx is not sc.rx
        assert _matches(sc.arx, nb) == _matches(sc.rx, nb), sc.rx.pattern
        for _word, _info, urx, arx in sc.words:
            assert _matches(arx, nb) == _matches(urx, nb)
        if sc.needle:
            assert all(nb.startswith(sc.needle, m.start()) for m in sc.rx.finditer(nb))
    for rx, arx in ((D._WARN_WORD_RE, D._WARN_WORD_ARE), (D._WARN_AT_RE, D._WARN_AT_ARE), (D._CLOCK_RE, D._CLOCK_ARE),
                    (D._LEVEL_RE, D._LEVEL_ARE), (D._MATCH_LINE_RE, D._MATCH_LINE_ARE),
                    (D._BUILD_LOOSE_GATE_RE, D._BUILD_LOOSE_GATE_ARE)):
        assert arx is not rx and _matches(arx, nb) == _matches(rx, nb)


def test_ascii_twins_find_what_the_patterns_find_on_the_ascii_corpus() -> None:
    texts = [text for _n, _m, text in corpus() if text.isascii()]
    assert len(texts) >= 10
    for text in texts:
        _same_on_ascii("\n" + text)


_ASCII_PARTS = ["\n", " ", "  ", "\t", "\x0b", "\x0c", "\r", "\x1c", "\x1f", "_", "a", "Z", "7", "12", ":", ".", "-", "/",
                "E", "ERROR", "INFO", "WARN", "WARNING", "Error", "ValueError: x", "error: ", "error[E1]: ", "FAILED ",
                "ok ", "Tests: ", "3 passed", "== ", "___ ", "x.py:3: ", "a.c:1:2: error: ", "F401 ", "not ok 1",
                "--- FAIL: ", "panic: ", "test x ... FAILED", "Ran 2 tests", "::t PASSED", "left: ", ">", "File \"a\", line 2"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_ASCII_PARTS), max_size=60))
def test_ascii_twins_find_what_the_patterns_find_on_any_ascii_text(parts: list[str]) -> None:
    _same_on_ascii("\n" + "".join(parts))


def test_ascii_form_spells_class_escapes_and_keeps_white_space_unicode() -> None:
    from ctxlifed.core.digest import _ascii_form

    assert _ascii_form(r"\w+\d\s\S\W") == r"[0-9A-Za-z_]+[0-9](?u:\s)(?u:\S)[^0-9A-Za-z_]"
    assert _ascii_form(r"[^\s:][\w./\\-]") == r"[^\t-\r\x1c- :][0-9A-Za-z_./\\-]"
    assert _ascii_form(r"[\S]") is None  # a negated escape inside a class is not spelled: no twin


def _counted_by_one_pass(scan, nb: str) -> tuple[dict[str, int], list[set[int]]]:
    """What the one pass of all of a scan's words (its ``rx``) counts and places."""
    from collections import Counter

    from ctxlifed.core import digest as D

    words: Counter[str] = Counter()
    found: tuple[set[int], ...] = (set(), set(), set(), set())
    offsets, groups = [m.start() for m in scan.rx.finditer(nb)], [m.lastgroup for m in scan.rx.finditer(nb)]
    words.update(groups)
    for off, g in zip(offsets, groups):
        if scan.info[g] is not None:
            D._mark(found, _rows_of(nb, [off]), scan.info[g], True)
    return dict(words), [set(s) for s in found]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["\n", " ", "INFO", "DEBUG", "ERROR", "WARN", "WARNING", "x", "_", "[", "]", "é", "9",
                                 "INFOINFO", " INFO ", "TRACE", "Exception", "NOTICE", ":"]), max_size=50))
def test_log_words_counted_one_at_a_time_are_those_one_pass_of_all_counts(parts: list[str]) -> None:
    from collections import Counter

    from ctxlifed.core import digest as D

    nb = "\n" + "".join(parts)
    scan = next(sc for sc in D._PATTERNS["log"] if sc.words)
    words: Counter[str] = Counter()
    found: tuple[set[int], ...] = (set(), set(), set(), set())
    D._count_words(scan, nb, words, found, True)
    assert (dict(words), [set(s) for s in found]) == _counted_by_one_pass(scan, nb)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="ABE_é", min_size=1, max_size=5).filter(lambda w: w[0] != "é"), min_size=1, max_size=8,
                unique=True),
       st.lists(st.sampled_from(["A", "B", "E", "_", "é", "AB", "BEA", "EE", " ", "\n", ":", "9"]), max_size=40))
def test_word_passes_count_each_whole_word_as_the_plain_joined_words_do(words: list[str], parts: list[str]) -> None:
    import re
    from collections import Counter

    from ctxlifed.core import digest as D

    text = "".join(parts + words + parts[::-1])
    passes, where = D._word_passes(words)
    word_of = {at: w for w, at in where.items()}
    assert len(word_of) == len(words)  # a match's pass and text name its word
    got = Counter(word_of[i, t] for i, rx in enumerate(passes) for t in rx.findall(text))
    plain = Counter(re.findall(r"\b(" + "|".join(map(re.escape, words)) + r")\b", text))
    assert got == plain


def _lines_marked(scans, nb: str) -> list[set[int]]:
    """The lines each tier gets from ``scans`` (without words), as digest() places them."""
    from ctxlifed.core import digest as D

    found: tuple[set[int], ...] = (set(), set(), set(), set())
    for scan in scans:
        scan = msgspec.structs.replace(scan, run_rx=None, run_arx=None, run_names=frozenset())  # match by match
        offsets, groups, _run_ends = D._where(scan, nb, with_groups=True)
        for off, g in zip(offsets, groups):
            D._mark(found, _rows_of(nb, [off]), scan.info[g], False)
    return [set(t) for t in found]


def _other_plain_spec() -> list[tuple[str, str]]:
    from ctxlifed.core import digest as D

    return [("t1c2", D._ERRWORDS_PLAIN), ("t1", D._PY_EXC), ("t1", D._PY_FRAME), ("t2", D._WARNWORDS_PLAIN)]


def test_other_error_words_rooted_at_a_capital_mark_the_lines_of_their_plain_form_on_the_corpus() -> None:
    from ctxlifed.core import digest as D

    plain = D._compile(_other_plain_spec())
    for _n, _m, text in corpus():
        assert _lines_marked(D._PATTERNS["other"], "\n" + text) == _lines_marked(plain, "\n" + text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["\n", " ", "x", "_", "é", "9", ":", ": ", "E", "A", "Error", "ERROR", "Exception", "FATAL",
                                 "CRITICAL", "WARNING", "warning", "error", "[E1]", "CRITIC", "FA", "TAL", "L", "ATAL",
                                 "RNING", "WARN", "error[E1]: ", "panic: ", "fatal: ", "warning: ", "g: ", "r: ", "xwarning: "]), max_size=50))
def test_other_error_words_rooted_at_a_capital_mark_the_lines_of_their_plain_form(parts: list[str]) -> None:
    from ctxlifed.core import digest as D

    nb = "\n" + "".join(parts)
    assert _lines_marked(D._PATTERNS["other"], nb) == _lines_marked(D._compile(_other_plain_spec()), nb)


def test_log_phrases_rooted_at_their_colon_mark_the_lines_of_their_plain_form_on_the_corpus() -> None:
    from ctxlifed.core import digest as D

    rooted, plain = D._compile([("t1c3", D._LOG_PHRASES)]), D._compile([("t1c3", D._LOG_PHRASES_PLAIN)])
    for _n, _m, text in corpus():
        assert _lines_marked(rooted, "\n" + text) == _lines_marked(plain, "\n" + text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["\n", " ", "x", "_", "é", "9", ":", ": ", "error", "fatal", "panic", "error: ", "rror: ",
                                 "l: ", "c: ", "r: ", "xerror: ", "panic:", "fatal: "]), max_size=50))
def test_log_phrases_rooted_at_their_colon_mark_the_lines_of_their_plain_form(parts: list[str]) -> None:
    from ctxlifed.core import digest as D

    nb = "\n" + "".join(parts)
    rooted, plain = D._compile([("t1c3", D._LOG_PHRASES)]), D._compile([("t1c3", D._LOG_PHRASES_PLAIN)])
    assert _lines_marked(rooted, nb) == _lines_marked(plain, nb)


def test_word_rooted_starts_each_word_at_its_root_and_checks_the_rest_behind() -> None:
    from ctxlifed.core.digest import _word_rooted

    assert _word_rooted([r"\bFATAL\b"], "A") == r"A(?:TAL(?<=FATAL)(?<!\wFATAL)\b)"
    assert _word_rooted([r"\bError: ", r"\bERROR\b"], "E") == r"E(?:rror(?<!\wError): |RROR(?<!\wERROR)\b)"
    with pytest.raises(AssertionError):
        _word_rooted([r"\bpanic: "], "E")  # no root in the word


def _runners_each_alone(part: str) -> set[int]:
    from ctxlifed.core import digest as D

    return {i for i, name in enumerate(D._RUNNER_NAMES) if D._found(D._RUNNER_SCANS[name][0], part)}


def test_runners_found_by_one_pass_of_their_marks_are_those_each_finds_alone_on_the_corpus() -> None:
    from ctxlifed.core import digest as D

    everyone = frozenset(range(len(D._RUNNER_NAMES)))
    for _n, _m, text in corpus():
        assert D._runners_marked("\n" + text, everyone) == _runners_each_alone("\n" + text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["\n", " ", "  ", "x", "test session starts", "::t PASSED", "PASSED a::b", "E   ",
                                 "___ t", "Ran 3 tests", "FAIL: ", ") ... ok\n", "test result: ", "panicked at ",
                                 "=== RUN", "--- FAIL", "ok  pkg 0.1s", "TAP version", "# Subtest", "Tests: 3",
                                 "3 passing (", "● ", "== x in 1.0s"]), max_size=40))
def test_runners_found_by_one_pass_of_their_marks_are_those_each_finds_alone(parts: list[str]) -> None:
    from ctxlifed.core import digest as D

    part = "\n" + "".join(parts)
    assert D._runners_marked(part, frozenset(range(len(D._RUNNER_NAMES)))) == _runners_each_alone(part)


def _fit_step_per_row(lines: list[str], rows: list[int], room: int, cut: bool) -> tuple[list[int], int, int]:
    from ctxlifed.core.digest import _cut_line

    taken: list[int] = []
    left = room
    skipped = 0
    for j, row in enumerate(rows):
        if left < 2:
            skipped += len(rows) - j
            break
        cost = estimate_tokens(_cut_line(lines[row])[0] if cut else lines[row]) + 1
        if cost <= left:
            taken.append(row)
            left -= cost
        else:
            skipped += 1
    return taken, room - left, skipped


# never an empty line: blank lines are dropped before lines are fitted, so a shown line costs at least 2
_FIT_LINES = st.lists(st.one_of(st.text(alphabet="ab ", min_size=1, max_size=30), st.text(alphabet="a中", min_size=1, max_size=12),
                                st.integers(min_value=380, max_value=12000).map(lambda n: "x" * n)), max_size=150)


@settings(max_examples=500, deadline=None)
@given(_FIT_LINES, st.integers(min_value=0, max_value=400), st.booleans(), st.randoms(use_true_random=False))
def test_fit_takes_what_a_step_per_row_takes(lines: list[str], room: int, cut: bool, rnd) -> None:  # noqa: ANN001
    # the prefix is costed a chunk at a time and the rest passed over by length: the same lines as costing
    # every line and stepping through them one by one, on ASCII text (exact costs) and on CJK (bounds)
    from ctxlifed.core.digest import _fit

    rows = sorted(rnd.sample(range(len(lines)), rnd.randint(0, len(lines))))
    exact = all(line.isascii() for line in lines)
    assert _fit(lines, rows, room, exact, cut=cut) == _fit_step_per_row(lines, rows, room, cut)
    if exact:  # the bound path on an ASCII text takes the same lines too
        assert _fit(lines, rows, room, False, cut=cut) == _fit_step_per_row(lines, rows, room, cut)


def test_needle_reads_leading_literals_through_zero_width_assertions() -> None:
    from ctxlifed.core.digest import _needle

    assert _needle(r"fatal(?<!\wfatal): ") == "fatal: "
    assert _needle(r"No(?<!\wNo) such file or directory\b") == "No such file or directory"
    assert _needle(r"ab?c") == "a"
    assert _needle(r"Traceback \(most recent call last\)") == "Traceback (most recent call last)"
    assert _needle(r"\d+ x") == ""


def test_git_status_lines_of_only_a_tab_are_not_entries() -> None:
    # two such lines in a row: "\n\t\n" overlaps itself, and str.count (which the entries were counted with)
    # counted one of them as an entry
    from collections import Counter

    from ctxlifed.core.digest import _status_entries

    nb = "\nOn branch main\nUntracked files:\n\ta.py\n\tb.py\n\t\n\t\n\t \n\tmodified:   c.py\n"
    assert _status_entries(nb) == Counter({"untracked/other": 2, "modified": 1})


# ---------------------------------------------------------------- output_kind: the cheaper checks decide as the plain ones

_PLAIN_MATCH_LINE = r"\n[^\s:]+:\d+[:-]|\n\.{0,2}/?[\w.@+-]+(?:/[\w.@+ -]+)+/?(?=\n)"
_PLAIN_CLOCK = r":\d\d:\d\d(?<=\d\d:\d\d:\d\d)"  # hh:mm:ss (the form on main)
_PLAIN_LEVEL = r"(?:DEBUG|INFO|NOTICE|WARN(?:ING)?|ERROR|CRITICAL|FATAL|TRACE)\b"


def _plain_kind_of_text(text: str) -> str:
    """output_kind from the text alone, written out plainly: every mark searched on its own, in rank order."""
    from ctxlifed.core import digest as D

    head = "\n" + text[:32768]
    tail = "\n" + text[-8192:] if len(text) > 32768 else ""

    def marked(spec: list[tuple[str, str]], part: str) -> bool:
        return any(re.search(pat, part) for _tag, pat in spec)

    if marked(D._TEXT_TEST, head) or (tail and marked(D._TEXT_TEST, tail)):
        return "test"
    if marked(D._TEXT_INSTALL, head) or (tail and marked(D._TEXT_INSTALL, tail)):
        return "install"
    if marked(D._TEXT_BUILD, head):
        return "build"
    if "diff --git a/" in head[:4096] or re.search(r"--- a/\S+\n\+\+\+ b/", head[:4096]):
        return "diff"
    sample = head[:8192]
    n = sample.count("\n")
    if n >= 8:
        if len(re.findall(_PLAIN_CLOCK, sample)) * 2 >= n or len(re.findall(_PLAIN_LEVEL, sample)) * 2 >= n:
            return "log"
        if len(re.findall(_PLAIN_MATCH_LINE, sample)) * 5 >= n * 3:
            return "search"
    return "other"


_KIND_MARKS = ["test session starts", "\nRan 3 tests in 0.1s", "\ntest result: ok", "\n--- FAIL: T", "\nok  pkg 0.1s",
               "\nFAIL\tpkg 2.5s", "\nTests: 3", "\n# tests 3", "\nℹ pass 2", "\n  3 passing (", "\n== 1 passed in 0.1s",
               "\nSuccessfully installed a", "\nRequirement already satisfied: a", "\nnpm error x", "\nadded 3 packages",
               "\nERROR: No matching distribution", "a.c:1:2: error: x", "a.c:1:2: fatal warning: x", "b.py:3: error: y",
               "x(1,2): error TS2322", "\nerror[E0308]: x", "\nwarning[E1]: x", "\nerror: could not compile",
               "\nFound 2 errors in", "\nmake: ***", "\nmake[2]: ***", "\n   --> src/a.rs:1:2", "diff --git a/x",
               "--- a/x\n+++ b/x", "12:30:45 ", "INFO ", "ERROR ", "WARNING", "\na/b/c\n", "\nx.py:3:", "\nx:1-",
               ": error:", "1: error:", "): error TS", "1: warning:", ":1:", "a.py:", "\n==="]
_KIND_FILLERS = ["x", " ", "\n", "é", "ü\n", "abc def\n", "12:00", ":", "E", "A", "I", "\t", ": ", "1",
                 "2026-01-01 10:00:00 INFO w: ok\n", "path/to/f.py:12: x\n", "src/a/b.rs\n", "ERROR\n"]


@st.composite
def _kind_texts(draw: st.DrawFn) -> str:
    """Texts of a filler repeated to a size around the head/tail/sample bounds, with marks put at those bounds,
    at the start, at the end."""
    size = draw(st.sampled_from([0, 60, 4090, 8190, 8200, 32760, 32775, 33000, 40960, 41000, 41000, 50000, 50000]))
    unit = "".join(draw(st.lists(st.sampled_from(_KIND_FILLERS), min_size=1, max_size=6)))
    text = (unit * (size // len(unit) + 1))[:size]
    for mark in draw(st.lists(st.sampled_from(_KIND_MARKS), max_size=4)):
        n, k = len(text), len(mark)
        at = draw(st.sampled_from([0, n, n // 2, 4096 - k // 2, 8191, 8192 - k, 32767, 32768 - k, 32768 - k // 2,
                                   n + k - 8192, n + k - 8193, n - 8192 - k // 2, n - k]))
        at = min(max(at, 0), n)
        text = text[:at] + mark + text[at:]
    return text


def _put(mark: str, at: int, size: int = 41000) -> str:
    """``mark`` at ``at`` (from the end when negative, counted in the final text) in ``size`` filler characters."""
    text = ("abc def\n" * (size // 8 + 1))[:size]
    at = at if at >= 0 else size + len(mark) + at
    return text[:at] + mark + text[at:]


_BOUNDS = [_put(m, at) for m in ("a.c:1:2: error: x", "\nmake: ***", "test session starts", "\ntest result: ok",
                                 "\nadded 3 packages") for at in (32768 - len(m), 32769 - len(m), -8192, -8193)]


@settings(max_examples=400, deadline=None)
@given(_kind_texts())
def test_output_kind_from_the_text_is_the_plain_checks_one(text: str) -> None:
    assert output_kind(text) == _plain_kind_of_text(text)


def test_output_kind_from_the_text_is_the_plain_checks_one_at_the_head_and_tail_bounds() -> None:
    kinds = [output_kind(text) for text in _BOUNDS]
    assert kinds == [_plain_kind_of_text(text) for text in _BOUNDS]
    assert {"build", "test", "install", "other"} <= set(kinds)  # marks just inside and just outside the bounds


def test_output_kind_from_the_text_is_the_plain_checks_one_on_the_corpus() -> None:
    for _n, _m, text in corpus():
        for t in (text, text * (100 * 1024 // len(text) + 1)):
            assert output_kind(t) == _plain_kind_of_text(t)


@settings(max_examples=300, deadline=None)
@given(_kind_texts())
def test_the_first_kind_marked_is_the_most_important_marked_alone(text: str) -> None:
    from ctxlifed.core import digest as D

    part = "\n" + text
    for kinds in (D._TEXT_KINDS_ALL, D._TEXT_KINDS_TEST, D._TEXT_KINDS_NOT_TEST, frozenset({0, 1}), frozenset()):
        alone = [k for k in sorted(kinds) if any(re.search(alt, part) for _t, pat in D._TEXT_KIND_SPECS[k]
                                                 for alt in D._alternatives(pat) if alt.startswith("\\n"))]
        assert D._first_kind_marked(part, kinds) == (alone[0] if alone else D._K_NONE)


@settings(max_examples=300, deadline=None)
@given(_kind_texts())
def test_build_marks_not_at_a_line_start_are_found_behind_their_gate_as_alone(text: str) -> None:
    from ctxlifed.core import digest as D

    part = "\n" + text
    alone = any(re.search(alt, part) for _t, pat in D._TEXT_BUILD for alt in D._alternatives(pat) if not alt.startswith("\\n"))
    assert D._build_loose_marked(part) == alone


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["\n", " ", "a", "é", "/", "./", "../", ".", ":", "12", "-", "@", "+", "x.py", ":3:", "\t",
                                 "INFO", "DEBUG", "ERROR", "WARNING", "WARN", "E", "A", "I", "NOTICEX", "TRACE"]), max_size=60))
@example(["\n", "a", "/", "a", " ", "a", "\n", "./", "x", "/", "y", "/", "\n", "x.py", ":3:", "\n"])
def test_log_and_search_checks_count_as_the_plain_patterns(parts: list[str]) -> None:
    from ctxlifed.core import digest as D

    sample = "\n" + "".join(parts)
    assert len(D._MATCH_LINE_RE.findall(sample)) == len(re.findall(_PLAIN_MATCH_LINE, sample))
    levels = len(re.findall(_PLAIN_LEVEL, sample))
    assert len(D._LEVEL_RE.findall(sample)) == levels
    assert levels <= sum(map(sample.count, D._LEVEL_LETTERS))  # the bound that lets the level count be skipped


def test_rooted_at_moves_a_branch_start_to_its_literal() -> None:
    from ctxlifed.core.digest import _rooted_at

    assert _rooted_at(r"\.py:\d++: error:", ":") == r":(?<=\.py:)\d++: error:"
    assert _rooted_at(r":\d", ":") == r":\d"
    with pytest.raises(AssertionError):
        _rooted_at(r"\d:", ":")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["\n", "12:30:45", "1", ":", "12:30", ":45", " ", "é", "x", "12:30:45:67"]), max_size=80),
       st.integers(min_value=0, max_value=30))
@example(["12:30:45"], 1)
@example(["x\n12:30:45 12:30:45 12:30:45\n"], 3)
def test_clock_count_in_halves_reaches_a_need_as_the_whole_count(parts: list[str], need: int) -> None:
    from ctxlifed.core import digest as D

    sample = "\n" + "".join(parts)
    for rx in (D._CLOCK_RE, D._CLOCK_ARE if sample.isascii() else D._CLOCK_RE):
        assert D._reaches(rx, sample, need) == (len(re.findall(_PLAIN_CLOCK, sample)) >= need)


# ---------------------------------------------------------------- the facts' cheaper forms count what the plain ones count

def _text_of_lines(*pieces: str) -> st.SearchStrategy[str]:
    """Texts of short lines made of ``pieces`` (few of them, so that the tricky sequences come up often),
    as the facts read them: after a leading newline, with or without a final one."""
    line = st.lists(st.sampled_from(pieces), max_size=6).map("".join)
    return st.tuples(st.lists(line, max_size=8), st.booleans()).map(lambda t: "\n" + "\n".join(t[0]) + ("\n" if t[1] else ""))


_PLAIN_PATH_LINE = r"\n(\.{0,2}/?[^\s/][^\n]*/)(?:[^\n/]+)/?(?=\n)"  # the backtracking form the facts used
_PATH_TEXTS = _text_of_lines("/", "/", "//", ".", "..", " ", "\t", "a", "bc", "é", "\u2003", "\x1c", ":")
_AUTHOR_TEXTS = _text_of_lines("Author: ", "Author: ", " ", "  ", "\t", "\u2003", "bc", "é", "<", "x@y>", "\r", "\n")
_GREP_TEXTS = _text_of_lines("a.py:1:", "b:23-", "c:٣:", "d: x", "e:", "a", " ", "\t", ":", ":", "1", "23", "٣", "-", "é",
                             "\u2003")


@settings(max_examples=500, deadline=None)
@given(_PATH_TEXTS)
def test_path_lines_give_the_directories_the_backtracking_form_gives(nb: str) -> None:
    from ctxlifed.core import digest as D

    assert D._PATH_LINE_RE.findall(nb) == re.findall(_PLAIN_PATH_LINE, nb)


@settings(max_examples=500, deadline=None)
@given(_PATH_TEXTS)
def test_path_lines_are_counted_as_a_pass_of_every_line_counts_them(nb: str) -> None:
    from ctxlifed.core import digest as D

    plain = Counter(re.findall(_PLAIN_PATH_LINE, nb))
    assert D._path_dirs(nb) == (plain if sum(plain.values()) >= 3 else Counter())


def test_path_lines_with_a_trailing_slash_name_the_directory_above() -> None:
    from ctxlifed.core import digest as D

    nb = "\n./src/a.py\n/usr/lib/\nsrc/pkg//\n/x\n../b/c\n a/b\nd/e/"
    assert D._PATH_LINE_RE.findall(nb) == ["./src/", "/usr/", "../b/"]


@settings(max_examples=500, deadline=None)
@given(_AUTHOR_TEXTS)
def test_author_names_are_those_the_lazy_form_takes(nb: str) -> None:
    from ctxlifed.core import digest as D

    assert D._AUTHOR_RE.findall(nb) == re.findall(r"\nAuthor: ([^\n<]+?)\s*<", nb)


@settings(max_examples=500, deadline=None)
@given(_GREP_TEXTS)
def test_file_line_matches_are_counted_as_a_pass_of_every_line_counts_them(nb: str) -> None:
    from ctxlifed.core import digest as D

    plain = Counter(re.findall(r"\n([^\s:][^:\n]*):\d+[:-]", nb))
    assert D._grep_files(nb) == (plain if sum(plain.values()) >= 3 else Counter())


@settings(max_examples=500, deadline=None)
@given(_GREP_TEXTS)
def test_file_matches_without_a_line_are_counted_as_a_pass_of_every_line_counts_them(nb: str) -> None:
    from ctxlifed.core import digest as D

    plain = Counter(re.findall(r"\n([^\s:][^:\n]*):(?!\d)", nb))
    assert D._grep_files_noline(nb) == (plain if sum(plain.values()) >= 3 else Counter())


def _status_by_label_text(nb: str) -> Counter[str]:
    """git status entries the plain way: the regex gives each entry's whole label, counted by label."""
    from ctxlifed.core import digest as D

    labels = "|".join(map(re.escape, D.STATUS_LABELS))
    found = Counter(re.findall(r"\n\t(?![\t \n\r\x0b\x0c])(?:(" + labels + r"):)?", nb))
    other = found.pop("", 0)
    return Counter({**found, **({"untracked/other": other} if other else {})})


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(["\n", "\t", " ", "\r", "x", "é", ":", "modified", "modified:", "both modified:",
                                 "new file:", "deleted:", "renamed:", "typechange:", "renamed", "\tnew file:   a"]),
                max_size=30))
def test_git_status_entries_are_counted_as_by_their_whole_label(parts: list[str]) -> None:
    from ctxlifed.core.digest import _status_entries

    nb = "\n" + "".join(parts)
    assert _status_entries(nb) == _status_by_label_text(nb)


def _diff_stat_file_by_file(nb: str) -> list[str]:
    """The diff facts the plain way: each file's slice, its lines counted with str.count."""
    rx = re.compile(r"\ndiff --git a/(\S+) b/")
    starts = [m.start() for m in rx.finditer(nb)]
    if not starts:
        return []
    stat, adds, dels = [], 0, 0
    for j, a in enumerate(starts):
        seg = nb[a: starts[j + 1] if j + 1 < len(starts) else len(nb)]
        plus = seg.count("\n+") - seg.count("\n+++ ")
        minus = seg.count("\n-") - seg.count("\n--- ")
        adds, dels = adds + plus, dels + minus
        stat.append(f"{rx.match(seg).group(1)} +{plus} -{minus}")  # type: ignore[union-attr]
    more = f", … {len(stat) - 12} more" if len(stat) > 12 else ""
    return [f"{len(starts)} files, +{adds} -{dels} lines: " + ", ".join(stat[:12]) + more]


@example(["diff --git a/x b/x", "\n", "+++", "a", "\n", "---", "a", "\n", "+++ ", "\n", "--- ", "\n", "-", "+"])
@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["\n", "diff --git a/x b/x", "diff --git a/y.py b/y.py", "diff --git a/ b/", "+", "-", "+++ ",
                                 "--- ", "++", "--", "+++", " ", "a", "é", "@@ -1 +1 @@"]), max_size=80))
def test_diff_facts_count_what_a_count_per_file_counts(parts: list[str]) -> None:
    from ctxlifed.core import digest as D

    nb = "\n" + "".join(parts)
    assert D._facts("diff", nb, Counter()) == _diff_stat_file_by_file(nb)


def test_diff_facts_name_twelve_files_and_count_all() -> None:
    from ctxlifed.core import digest as D

    nb = "".join(f"\ndiff --git a/f{i} b/f{i}\n--- a/f{i}\n+++ b/f{i}\n@@ -1 +1 @@\n-old\n+new\n+more" for i in range(15))
    facts = D._facts("diff", nb, Counter())
    assert facts == _diff_stat_file_by_file(nb)
    assert facts[0].startswith("15 files, +30 -15 lines: f0 +2 -1, ") and facts[0].endswith("f11 +2 -1, … 3 more")


_TEST_FAIL_TEXTS = _text_of_lines("test a::b ... FAILED", "test a::b ... ok", "test a::b ... FAIL", "test a\tb ... FAILED", "test ",
                                  "a::b", " ... ", "FAILED", "FAIL", "ok", " ", "\t", "é", "(x)", "FAILED ", "FAIL: ", "ERROR: ",
                                  "not ok 1 - ", "--- FAIL: ", "● ", "x")


@settings(max_examples=500, deadline=None)
@given(_TEST_FAIL_TEXTS)
def test_failing_test_ids_are_those_the_plain_form_names(nb: str) -> None:
    from ctxlifed.core import digest as D

    plain = (r"\n(?:FAILED (?!\()(\S+)|FAIL: (\S+)|ERROR: (\S+)|test (\S+) \.\.\. FAILED|not ok \d+ - ([^\n]+)"
             r"|[ \t]*(?:--- FAIL: (\S+)|● ([^\n]+)))")
    assert _PY_TEST_FAIL_RE.findall(nb) == re.findall(plain, nb)


def test_the_adversarial_shapes_are_digested_within_the_bounds_as_every_kind() -> None:
    # the shapes on which one of the digest's patterns went quadratic (bench/bench_worstcase.py times them):
    # each is digested as every kind, and the digest stays within its bounds
    import runpy

    shapes = runpy.run_path(str(Path(__file__).resolve().parent.parent / "bench" / "_adversarial.py"))["DIGEST_TEXTS"]
    for text in shapes:
        for kind in KINDS:
            d = digest(text, kind=kind, archive_id=1, budget_tokens=600, max_tokens=2000)
            assert d.kind == kind and d.original_lines == text.count("\n") + (not text.endswith("\n"))
            assert d.tokens <= 2000 + 600 + 400, (kind, text[:20])
