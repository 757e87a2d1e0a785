"""Tests for ctxlifed.core.summarize: extractive L1 summaries and recall snippets."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxlifed.core.model import Element, Kind
from ctxlifed.core.summarize import MAX_LINES, snippet, summarize
from ctxlifed.core import summarize as S

PYTEST_RED = """Bash: .venv/bin/python -m pytest -q
..F.
=================================== FAILURES ===================================
________________________________ test_budget ___________________________________

    def test_budget():
>       assert zone(100) == 60
E       assert 65 == 60

tests/test_budget.py:7: AssertionError
=========================== short test summary info ============================
FAILED tests/test_budget.py::test_budget - assert 65 == 60
1 failed, 3 passed in 0.12s
"""

PYTEST_GREEN = """Bash: pytest
============================= test session starts ==============================
collected 4 items

tests/test_a.py ....                                                     [100%]

============================== 4 passed in 0.05s ===============================
"""

TRACEBACK = """Bash: python app.py
Traceback (most recent call last):
  File "/home/dev/app.py", line 10, in <module>
    main()
  File "/home/dev/lib/config.py", line 42, in load
    raise KeyError(name)
KeyError: 'port'
Exit code 1
"""

GO_RED = """Bash: go test ./...
ok  \texample.com/a\t0.012s
--- FAIL: TestB (0.00s)
    b_test.go:9: want 1 got 2
FAIL
FAIL\texample.com/b\t0.010s
"""

CARGO_GREEN = """Bash: cargo test
running 2 tests
test a ... ok
test b ... ok

test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s
"""

UNITTEST_RED = """Bash: python -m unittest
..F
======================================================================
FAIL: test_x (t.T)
----------------------------------------------------------------------
Ran 3 tests in 0.001s

FAILED (failures=1)
"""

JEST_RED = """Bash: npx jest
 FAIL  src/a.test.js
  ● sum › adds numbers

Tests:       1 failed, 4 passed, 5 total
"""

EDIT_PATCH = """Edit: /w/src/budget.py
@@ -1,4 +1,5 @@
 def zone(x):
-    return x * 0.6
+    ratio = 0.65
+    return x * ratio
 class Budget:
"""

ZH_PROSE = "我们先看一下预算模块的结构。经过讨论，我们决定采用四分区模型！钩子里不要调用网络。其余细节稍后再说。"
EN_PROSE = (
    "I looked at the budget module and its four zones. The thresholds are hard-coded today. "
    "We will use a config file for them instead. Next step: wire the watcher."
)


def E(kind: Kind, text: str, **kw: object) -> Element:
    return Element(uid="u1", kind=kind, text=text, **kw)  # type: ignore[arg-type]


CASES: list[tuple[str, Element, int | None, str]] = [
    (
        "pytest failure",
        E(Kind.TEST_RESULT, PYTEST_RED, tool="Bash", command=".venv/bin/python -m pytest -q", passed=False,
          is_error=True),
        17,
        "[test_result FAILED] Bash: .venv/bin/python -m pytest -q\n"
        "1 failed, 3 passed in 0.12s\n"
        "failed: tests/test_budget.py::test_budget\n"
        "assert 65 == 60 [L2 #17]",
    ),
    (
        "pytest pass",
        E(Kind.TEST_RESULT, PYTEST_GREEN, tool="Bash", command="pytest", passed=True),
        3,
        "[test_result passed] Bash: pytest\n4 passed in 0.05s [L2 #3]",
    ),
    (
        "python traceback",
        E(Kind.ERROR, TRACEBACK, tool="Bash", command="python app.py", is_error=True),
        "a1b2",
        "[error] Bash: python app.py\nKeyError: 'port'\nat config.py:42 in load [L2 #a1b2]",
    ),
    (
        "go test failure",
        E(Kind.TEST_RESULT, GO_RED, tool="Bash", command="go test ./...", passed=False),
        None,
        "[test_result FAILED] Bash: go test ./...\nFAIL example.com/b 0.010s\nfailed: TestB",
    ),
    (
        "cargo pass",
        E(Kind.TEST_RESULT, CARGO_GREEN, tool="Bash", command="cargo test", passed=True),
        None,
        "[test_result passed] Bash: cargo test\n"
        "test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s",
    ),
    (
        "unittest failure",
        E(Kind.TEST_RESULT, UNITTEST_RED, tool="Bash", command="python -m unittest", passed=False),
        None,
        "[test_result FAILED] Bash: python -m unittest\nRan 3 tests in 0.001s FAILED (failures=1)\nfailed: test_x",
    ),
    (
        "jest failure",
        E(Kind.TEST_RESULT, JEST_RED, tool="Bash", command="npx jest", passed=False),
        None,
        "[test_result FAILED] Bash: npx jest\nTests: 1 failed, 4 passed, 5 total\nfailed: sum › adds numbers",
    ),
    (
        "edit patch",
        E(Kind.CODE_CHANGE, EDIT_PATCH, tool="Edit", file_path="/w/src/budget.py"),
        9,
        "[code_change] Edit: /w/src/budget.py\n+2 -1 lines\nsymbols: zone, Budget [L2 #9]",
    ),
    (
        "write new file",
        E(Kind.CODE_CHANGE, "Write: /w/a.py\nimport os\n\ndef main():\n    pass\n", tool="Write", file_path="/w/a.py"),
        None,
        "[code_change] Write: /w/a.py\n4 lines written\nsymbols: main",
    ),
    (
        "chinese prose",
        E(Kind.ASSISTANT, ZH_PROSE),
        5,
        "[assistant] decision: 经过讨论，我们决定采用四分区模型！\n"
        "constraint: 钩子里不要调用网络。\n"
        "我们先看一下预算模块的结构。\n"
        "其余细节稍后再说。 [L2 #5]",
    ),
    (
        "english prose",
        E(Kind.ASSISTANT, EN_PROSE),
        None,
        "[assistant] decision: We will use a config file for them instead.\n"
        "pending: Next step: wire the watcher.\n"
        "I looked at the budget module and its four zones.\n"
        "The thresholds are hard-coded today.",
    ),
    (
        "prompt with markdown",
        E(Kind.PROMPT, "## Task\n- Add a `recall` command\n- It must be fast"),
        None,
        "[prompt] constraint: It must be fast\nTask\nAdd a `recall` command",
    ),
    (
        "decision element",
        E(Kind.DECISION, "We decided to use FTS5 trigram."),
        1,
        "[decision] We decided to use FTS5 trigram. [L2 #1]",
    ),
    (
        "read tool",
        E(Kind.TOOL, "Read: /w/a.py\n" + "line\n" * 120, tool="Read", file_path="/w/a.py"),
        None,
        "[tool] Read: /w/a.py\n120 lines",
    ),
    (
        "bash tool",
        E(Kind.TOOL, "Bash: ls\nalpha\nbeta\ngamma\n", tool="Bash", command="ls"),
        None,
        "[tool] Bash: ls\nalpha\ngamma",
    ),
    (
        "rust compile error",
        E(Kind.ERROR, "Bash: cargo build\n   Compiling x\nerror[E0308]: mismatched types\n --> src/main.rs:2:5\n",
          tool="Bash", command="cargo build", is_error=True),
        None,
        "[error] Bash: cargo build\nerror[E0308]: mismatched types",
    ),
    (
        "tool_use_error tags are dropped",
        E(Kind.ERROR, "Grep: x\n<tool_use_error>Error: No such tool available: Grep.</tool_use_error>",
          tool="Grep", is_error=True),
        None,
        "[error] Grep\nError: No such tool available: Grep.",
    ),
    (
        "go panic",
        E(Kind.ERROR, "panic: runtime error: index out of range [3]\n\ngoroutine 1 [running]:\n", is_error=True),
        None,
        "[error] panic: runtime error: index out of range [3]",
    ),
]


@pytest.mark.parametrize(("name", "element", "l2_id", "expected"), CASES, ids=[c[0] for c in CASES])
def test_summarize_real_inputs(name: str, element: Element, l2_id: int | str | None, expected: str) -> None:
    """Summaries of real-ish tool outputs and prose, with and without an L2 reference."""
    assert expected == summarize(element, l2_id=l2_id)


def test_long_path_keeps_its_tail() -> None:
    """A long file path is cut from the left so the file name stays."""
    path = "/very/" + "deep/" * 30 + "module.py"
    header = summarize(E(Kind.TOOL, "", tool="Read", file_path=path)).splitlines()[0]
    assert (True, True) == (header.endswith("module.py"), "…" in header)


@pytest.mark.parametrize("max_chars", [0, 5, 9, 12, 20, 40, 80, 280])
def test_caps_and_reference(max_chars: int) -> None:
    """Never more than max_chars; the reference is whole whenever it fits with some content."""
    out = summarize(E(Kind.TEST_RESULT, PYTEST_RED, tool="Bash", command="pytest", passed=False), l2_id=1234,
                    max_chars=max_chars)
    ref_whole = out.endswith("[L2 #1234]") if max_chars >= len(" [L2 #1234]") + 8 else True
    assert (True, True) == (len(out) <= max_chars, ref_whole)


def test_summarize_huge_input_is_bounded_and_finds_the_tail_summary() -> None:
    """A 5 MB pytest log: the summary line at the end is found and the result stays short."""
    text = "Bash: pytest\n" + ("tests/test_x.py::test_y PASSED\n" * 170_000) + "170000 passed in 99.00s\n"
    out = summarize(E(Kind.TEST_RESULT, text, tool="Bash", command="pytest", passed=True))
    assert "[test_result passed] Bash: pytest\n170000 passed in 99.00s" == out


_kinds = st.sampled_from(list(Kind))


@settings(max_examples=300, deadline=None)
@given(
    _kinds,
    st.text(max_size=2000),
    st.sampled_from([None, "Bash", "Read", "Edit", "Write", "Grep"]),
    st.one_of(st.none(), st.text(max_size=300)),
    st.one_of(st.none(), st.integers(min_value=0, max_value=10**12), st.text(max_size=10)),
    st.integers(min_value=0, max_value=600),
    st.booleans(),
)
def test_summarize_properties(
    kind: Kind, text: str, tool: str | None, target: str | None, l2_id: int | str | None, max_chars: int,
    is_error: bool,
) -> None:
    """Any input: at most max_chars and MAX_LINES lines, deterministic, never raises."""
    element = Element(uid="x", kind=kind, text=text, tool=tool, command=target, is_error=is_error)
    out = summarize(element, l2_id=l2_id, max_chars=max_chars)
    assert (True, True, out) == (len(out) <= max_chars, out.count("\n") < MAX_LINES,
                                 summarize(element, l2_id=l2_id, max_chars=max_chars))


# --------------------------------------------------------------------------- snippets

LOREM = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 20


@pytest.mark.parametrize(
    ("text", "terms", "width", "expected"),
    [
        (
            LOREM + "The FTS5 trigram tokenizer handles CJK. " + "More text follows here. " * 20,
            ["fts5"],
            80,
            "…adipiscing elit. The FTS5 trigram tokenizer handles CJK. More text follows her…",
        ),
        (
            "这是一个很长的中文句子，用于测试片段功能。我们使用三元组分词器来支持中文检索，效果不错。",
            ["分词器"],
            20,
            "…使用三元组分词器来支持中文检索，效果…",
        ),
        ("short text", ["zzz"], 160, "short text"),
        ("Start here and\n\n   keep   going", [], 160, "Start here and keep going"),
        (LOREM, ["nothing"], 30, "Lorem ipsum dolor sit amet, c…"),
        ("the Budget and the BUDGET", ["budget"], 160, "the Budget and the BUDGET"),
        ("alpha beta gamma", ["gamma", "beta"], 160, "alpha beta gamma"),
    ],
)
def test_snippet(text: str, terms: list[str], width: int, expected: str) -> None:
    """A window around the earliest match, markers where text was cut, whitespace collapsed."""
    assert expected == snippet(text, terms, width)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=3000), st.lists(st.text(max_size=6), max_size=4), st.integers(min_value=0, max_value=300))
def test_snippet_width_property(text: str, terms: list[str], width: int) -> None:
    """Any input: never wider than width; a term present in a short text is in the snippet."""
    out = snippet(text, terms, width)
    assert len(out) <= width
    present = [t for t in terms if t.strip() and " ".join(t.split()) == t and t.lower() in text.lower()]
    if width >= 200 and len(text) <= 100 and present and "\n" not in text and "  " not in text:
        assert any(t.lower() in out.lower() for t in present)


# ---- a test run's count line, found from the end of the text ----------------------------------------

_COUNT_TEXT = st.lists(st.sampled_from(["passed", "failed", "error", "errors", "errorsx", "xpassed", " ", "\t",
                                        "\n", "3", "12", "٣", "_", "a", "é", ",", "=", "in 0.1s", "1 passed",
                                        "2 errors", "x1 failed"]), max_size=30).map("".join)


@settings(max_examples=600, deadline=None, derandomize=True)
@given(_COUNT_TEXT)
def test_the_last_count_is_the_last_match_of_the_count_pattern(text: str) -> None:
    nb = "\n" + text
    plain = list(S._TEST_COUNT_RE.finditer(nb))
    got = S._last_count(nb)
    assert (got.span() if got else None) == (plain[-1].span() if plain else None)


def test_a_tap_run_is_summarised_by_its_counts_and_failing_tests() -> None:
    out = ("TAP version 13\n# Subtest: adds\nok 1 - adds\n# Subtest: parse\n    # Subtest: reads a field\n"
           "    not ok 1 - reads a field\n      ---\n      error: 'boom'\n      ...\n    1..1\nnot ok 2 - parse\n"
           "  ---\n  failureType: 'subtestsFailed'\n  error: '1 subtest failed'\n  ...\n1..2\n# tests 2\n# suites 1\n"
           "# pass 1\n# fail 1\n# duration_ms 12.5\n")
    el = Element(uid="u", kind=Kind.TEST_RESULT, text=out, tool="Bash", command="node --test", passed=False)
    assert summarize(el, max_chars=600).splitlines()[1:] == ["tests 2, pass 1, fail 1", "failed: parse › reads a field"]
