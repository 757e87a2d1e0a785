"""Tests for ctxlifed.core.matrix: the phase x kind category matrix and what reads it."""

from __future__ import annotations

import pytest

from ctxlifed.core import classify
from ctxlifed.core import matrix as MX
from ctxlifed.core import mustsurvive as MS
from ctxlifed.core.model import PHASES, Category, Element, Kind
from ctxlifed.runtime import config

K, S, A, D = Category.KEEP, Category.SUMMARIZE, Category.ARCHIVE, Category.DISCARD


@pytest.mark.parametrize(
    ("phase", "keeps", "archives"),
    [
        ("planning", ["prompt", "constraint"], ["explore"]),
        ("design", ["decision"], ["thinking"]),
        ("implementation", ["code_change", "test_result"], ["assistant"]),
        ("testing", ["test_result", "error"], []),
        ("review", ["assistant", "prompt"], ["test_result"]),
    ],
)
def test_default_honours_the_design_phase_table(phase: str, keeps: list[str], archives: list[str]) -> None:
    """Each phase keeps what the design says it keeps and archives what it says it archives."""
    assert [MX.category(r, phase) for r in keeps] == [K] * len(keeps)
    assert [MX.category(r, phase) for r in archives] == [A] * len(archives)
    assert MX.category("code_change", "testing") is S  # testing summarizes implementation detail


def test_classify_reads_the_matrix_and_its_overrides() -> None:
    """classify's categories come from the matrix; an override changes them, in rank too."""
    el = Element(uid="1", kind=Kind.TOOL, tool="Read", text="x" * 100, file_path="/a.py")
    assert classify.categorize(el, "planning") is MX.category("explore", "planning") is A
    m = MX.with_overrides(MX.DEFAULT, [("planning", "explore", "keep")])
    assert classify.categorize(el, "planning", m) is K
    assert classify.priority(el, "planning", m) >= MX.BANDS[K][0]
    assert classify.rank([el], "planning", 0.0, m)[0].category is K
    assert classify.TABLE is MX.DEFAULT_CELLS


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ([("nophase", "explore", "keep")], "unknown phase"),
        ([("review", "nokind", "keep")], "unknown kind"),
        ([("review", "explore", "forget")], "unknown category"),
        ([("review", "decision", "discard")], "never discarded"),
    ],
)
def test_bad_overrides_are_refused(overrides: list[tuple[str, str, str]], message: str) -> None:
    with pytest.raises(MX.MatrixError, match=message):
        MX.with_overrides(MX.DEFAULT, overrides)


def test_config_matrix_from_file_and_environment(tmp_path) -> None:
    """config.toml [matrix.<phase>] tables and CTXLIFED_MATRIX override cells; a bad value is a problem
    and leaves the matrix at its default."""
    p = tmp_path / "config.toml"
    p.write_text('[matrix.review]\ntest_result = "keep"\n[matrix.planning]\nexplore = "Discard"\n')
    c = config.load(str(p), env={})
    assert c.matrix == (("planning", "explore", "discard"), ("review", "test_result", "keep"))
    assert not c.problems
    c = config.load(None, env={"CTXLIFED_MATRIX": "testing.assistant=archive, review.bash=keep"})
    assert c.matrix == (("review", "bash", "keep"), ("testing", "assistant", "archive"))
    c = config.load(None, env={"CTXLIFED_MATRIX": "review.decision=discard"})
    assert c.matrix == () and any("never discarded" in x for x in c.problems)


def test_treatment_verbatim_or_digest() -> None:
    """Live compression's question: what the phase keeps stays verbatim, the rest is digested; a failed
    call is an error (verbatim everywhere); a passing test run is always digested."""
    assert MX.treatment("test_result", "testing") == "verbatim"
    assert MX.treatment("test_result", "testing", passed=True) == "digest"
    assert MX.treatment("test_result", "review") == "digest"
    assert MX.treatment("explore", "planning") == "digest"
    assert MX.treatment("bash", "review", failed=True) == "verbatim"
    assert MX.treatment("nokind", "testing") == "verbatim"
    m = MX.with_overrides(MX.DEFAULT, [("planning", "explore", "keep")])
    assert MX.treatment("explore", "planning", m) == "verbatim"
    el = Element(uid="1", kind=Kind.TOOL, tool="Bash", command="pytest -q", text="1 failed", passed=False)
    assert MX.element_treatment(el, "implementation") == "verbatim"
    assert MX.element_treatment(el, "review") == "digest"


def test_survive_limits_follow_the_matrix() -> None:
    """Kept kinds survive with up to 8 items, summarized ones with 3, archived ones with none."""
    impl = MX.survive_limits("implementation")
    plan = MX.survive_limits("planning")
    assert (impl["active_file"], plan["active_file"], impl["decision"], impl["goal"]) == (8, 3, 8, 1)
    m = MX.with_overrides(MX.DEFAULT, [("planning", "code_change", "archive")])
    assert MX.survive_limits("planning", m)["active_file"] == 0
    assert MX.survive_limits(None)["decision"] == MX.KEEP_LIMIT
    files = [f"src/f{i}.py" for i in range(6)]
    items = MS.build(phase="planning", active_files=files, decisions=["use X"], limits=plan)
    assert [i.kind for i in items].count("active_file") == 3
    items = MS.build(phase="planning", active_files=files, limits=MX.survive_limits("planning", m))
    assert [i.kind for i in items] == ["phase"]


def test_focus_line_names_the_real_state() -> None:
    """The focus names failing tests, files, decisions, constraints and open items, first items of every
    kind before second ones, within the cap, on one line."""
    st = MX.FocusState(files=["src/limiter.py", "src/api.py"], failing_tests=["tests/test_l.py::test_burst"],
                       decisions=["We decided to use a token bucket in Redis."],
                       constraints=["It must not break existing tokens."], pending=["decide the TTL"])
    out = MX.focus_line("implementation", st)
    assert out == ("Keep the implementation work; failing tests: tests/test_l.py::test_burst; files being changed:"
                   " src/limiter.py, src/api.py; decisions: We decided to use a token bucket in Redis; constraints:"
                   " It must not break existing tokens; open items: decide the TTL; may drop passing test output")
    tight = MX.focus_line("implementation", st, max_chars=150)
    assert tight == ("Keep the implementation work; failing tests: tests/test_l.py::test_burst; files being changed:"
                     " src/limiter.py, src/api.py; open items: decide the TTL")  # whole items only
    # What the phase archives is not named: review archives nothing of these, planning summarizes files (3).
    many = MX.FocusState(files=[f"f{i}.py" for i in range(6)])
    assert MX.focus_line("planning", many).count(".py") == 3
    m = MX.with_overrides(MX.DEFAULT, [("planning", "code_change", "archive")])
    assert ".py" not in MX.focus_line("planning", many, m)


@pytest.mark.parametrize("phase", [*PHASES, None])
def test_focus_line_is_bounded_and_single_line(phase: str | None) -> None:
    st = MX.FocusState(files=["x" * 500, "a\nb"], decisions=["d;" * 300], pending=["p\n" * 50])
    out = MX.focus_line(phase, st)
    assert len(out) <= MX.FOCUS_MAX_CHARS and "\n" not in out and out.startswith("Keep the ")


def test_listed_categories() -> None:
    assert [MX.listed(c) for c in ("keep", "summarize", "archive", "discard", None)] == [True, True, False, False, True]


def test_readme_config_block_loads_without_problems(tmp_path) -> None:
    """The README's config.toml block, matrix override included, is a valid config."""
    import pathlib
    import re

    readme = (pathlib.Path(__file__).parent.parent / "README.md").read_text()
    block = re.search(r"```toml\n(.*?)```", readme, re.S)
    assert block
    p = tmp_path / "config.toml"
    p.write_text(block.group(1))
    c = config.load(str(p), env={})
    assert c.problems == () and c.matrix == (("review", "test_result", "keep"),)
