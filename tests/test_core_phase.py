"""Tests for ctxlifed.core.phase (signals, hysteresis, switch events) and ctxlifed.core.commands."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxlifed.core import phase as ph
from ctxlifed.core.commands import (
    is_build_command,
    is_readonly_command,
    is_review_command,
    is_test_command,
)
from ctxlifed.core.model import PHASES
from ctxlifed.core.phase import (
    PhaseState,
    PhaseSwitch,
    Signal,
    observe,
    parse_phase,
    set_phase,
    signals_from_prompt,
    signals_from_tool,
)

# --------------------------------------------------------------------------- scripted sessions

Step = tuple[str, Any]  # ("p", prompt) | ("t", (tool, input))

R: Step = ("t", ("Read", {"file_path": "/w/src/app.py"}))
G: Step = ("t", ("Grep", {"pattern": "def main"}))
WEB: Step = ("t", ("WebFetch", {"url": "https://example.com/spec"}))
E: Step = ("t", ("Edit", {"file_path": "/w/src/app.py", "old_string": "a", "new_string": "b"}))
TE: Step = ("t", ("Edit", {"file_path": "/w/tests/test_app.py"}))
T: Step = ("t", ("Bash", {"command": "cd /w && .venv/bin/python -m pytest -q"}))
GD: Step = ("t", ("Bash", {"command": "git diff HEAD~1"}))
LS: Step = ("t", ("Bash", {"command": "ls -la"}))
X: Step = ("t", ("ExitPlanMode", {"plan": "1. do it"}))


def P(text: str) -> Step:
    return ("p", text)


def run(steps: list[Step], state: PhaseState | None = None) -> tuple[list[str], list[PhaseSwitch], PhaseState]:
    """Feed steps at t = 1, 2, 3 ...; return the phase after each step, the switches and the state."""
    st_ = state or PhaseState()
    phases: list[str] = []
    switches: list[PhaseSwitch] = []
    for i, (what, arg) in enumerate(steps, start=1):
        sig = signals_from_prompt(arg) if what == "p" else signals_from_tool(*arg)
        st_, sw = observe(st_, sig, float(i))
        if sw:
            switches.append(sw)
        phases.append(st_.phase)
    return phases, switches, st_


IMPL = "implementation"

SESSIONS: list[tuple[str, list[Step], list[str]]] = [
    ("stray Read during implementation", [P("/phase impl"), E, E, R, E], [IMPL] * 5),
    ("stray Grep and WebFetch during implementation", [P("/phase impl"), E, G, WEB, E], [IMPL] * 5),
    (
        "five Edits after planning reads flip to implementation at the third",
        [R, R, R, R, R, R, E, E, E, E, E],
        ["planning"] * 8 + [IMPL] * 3,
    ),
    (
        "reads interleaved with edits still reach implementation",
        [R, E, R, E, R, E, R, E],
        ["planning"] * 5 + [IMPL] * 3,
    ),
    (
        "three pytest runs after edits flip to testing at the third",
        [P("/phase impl"), E, E, E, E, E, T, T, T],
        [IMPL] * 8 + ["testing"],
    ),
    (
        "edit/test/test debug loop stays in implementation",
        [P("/phase impl"), E, T, T, E, T, T, E, T, T, E],
        [IMPL] * 11,
    ),
    ("thirty reads after /phase impl stay in implementation", [P("/phase impl")] + [R] * 30, [IMPL] * 31),
    ("read-only shell never flips", [P("/phase impl")] + [LS] * 12, [IMPL] * 13),
    (
        "review commands after tests flip to review at the fourth",
        [P("/phase testing"), T, T, GD, GD, GD, GD],
        ["testing"] * 6 + ["review"],
    ),
    ("ExitPlanMode flips planning to implementation at once", [R, R, X, R], ["planning", "planning", IMPL, IMPL]),
    (
        "ExitPlanMode does not flip an established testing phase",
        [P("/phase impl"), E, E, E, T, T, T, T, T, X],
        [IMPL] * 6 + ["testing"] * 4,
    ),
    (
        "writing test files in testing stays in testing",
        [P("write the tests"), R, TE, TE, TE, TE, TE, TE, TE, TE],
        ["testing"] * 10,
    ),
    ("writing test files in implementation stays", [P("/phase impl")] + [TE] * 10, [IMPL] * 11),
    (
        "sustained source edits after a testing handoff return to implementation",
        [P("run the tests"), E, E, E, E, E],
        ["testing"] * 4 + [IMPL] * 2,
    ),
    (
        "Chinese handoffs walk every phase",
        [P("先规划一下需求"), P("开始设计接口"), P("好的，开始实现吧"), P("写测试"), P("请评审一下这次改动")],
        ["planning", "design", IMPL, "testing", "review"],
    ),
    (
        "English handoffs walk every phase",
        [P("let's design the API"), P("Great, let's implement it"), P("now write the tests"), P("review this")],
        ["design", IMPL, "testing", "review"],
    ),
    ("negated handoff does not switch", [P("don't write the tests yet"), P("先不要实现")], ["planning", "planning"]),
    ("a review command during implementation is one stray event", [P("/phase impl"), E, GD, E], [IMPL] * 4),
    ("/review slash command is a handoff", [P("/phase impl"), P("/review")], [IMPL, "review"]),
]


@pytest.mark.parametrize(("name", "steps", "expected"), SESSIONS, ids=[s[0] for s in SESSIONS])
def test_scripted_sessions(name: str, steps: list[Step], expected: list[str]) -> None:
    """Scripted sessions: the phase after every step."""
    phases, _, _ = run(steps)
    assert expected == phases


def test_heuristic_switch_event_carries_time_cause_and_evidence() -> None:
    """A heuristic switch records when, from/to, cause 'heuristic' and the Edit evidence."""
    _, switches, state = run([R, R, E, E, E])
    expected = [
        PhaseSwitch(
            ts=5.0,
            from_phase="planning",
            to_phase=IMPL,
            cause="heuristic",
            evidence=("Edit: /w/src/app.py",) * 3,
        )
    ]
    assert expected == switches
    assert (IMPL, 5.0, tuple(switches)) == (state.phase, state.since, state.history)


def test_command_and_handoff_switch_events() -> None:
    """Commands and handoffs switch at once with their cause and the matched text as evidence."""
    _, switches, _ = run([P("/phase design"), P("OK, let's implement it now")])
    expected = [
        PhaseSwitch(1.0, "planning", "design", "command", ("/phase design",)),
        PhaseSwitch(2.0, "design", IMPL, "handoff", ("let's implement",)),
    ]
    assert expected == switches


def test_command_wins_over_handoff_and_tools_in_one_batch() -> None:
    """In one batch the last command wins over handoffs and tool signals."""
    sig = [
        Signal("testing", "handoff", "write the tests", ph.W_HANDOFF),
        Signal("review", "command", "/phase review", ph.W_COMMAND),
        Signal(IMPL, "tool", "Edit", ph.W_EDIT),
    ]
    state, sw = observe(PhaseState(), sig, 3.0)
    assert ("review", "command") == (state.phase, sw.cause if sw else None)


def test_first_handoff_wins() -> None:
    """'implement it, then write the tests': the first handoff in the prompt is the current intent."""
    state, sw = observe(PhaseState(), signals_from_prompt("implement it, then write the tests"), 1.0)
    assert (IMPL, "handoff") == (state.phase, sw.cause if sw else None)


def test_handoff_to_current_phase_reseeds_without_switch() -> None:
    """A handoff naming the current phase is no switch, but resets scores and seeds that phase."""
    state = msgspec.structs.replace(PhaseState(phase=IMPL), scores=(3.0, 1.0, 0.5, 7.0, 0.0))
    new, sw = observe(state, signals_from_prompt("let's implement"), 9.0)
    assert (None, (0.0, 0.0, ph.SEED_HANDOFF, 0.0, 0.0), IMPL) == (sw, new.scores, new.phase)


def test_set_phase() -> None:
    """set_phase: a manual switch, aliases accepted, no switch when already there, unknown raises."""
    s1, sw1 = set_phase(PhaseState(), "测试", 10.0)
    s2, sw2 = set_phase(s1, "test", 11.0)
    assert PhaseSwitch(10.0, "planning", "testing", "manual", ("manual: testing",)) == sw1
    assert (None, "testing", 10.0, 1) == (sw2, s2.phase, s2.since, len(s2.history))
    with pytest.raises(ValueError):
        set_phase(PhaseState(), "deploy", 1.0)


def test_empty_batch_changes_nothing() -> None:
    """observe with no signals returns the very same state and no switch."""
    state = PhaseState(phase="design", since=5.0)
    assert (state, None) == observe(state, [], 99.0)


def test_history_and_recent_are_bounded() -> None:
    """history keeps the last HISTORY_MAX switches; recent the last RECENT_MAX signals."""
    state = PhaseState()
    for i in range(ph.HISTORY_MAX + 10):
        state, _ = set_phase(state, PHASES[(i + 1) % len(PHASES)], float(i))
    for _ in range(ph.RECENT_MAX + 5):
        state, _ = observe(state, signals_from_tool("Read", {"file_path": "/x"}), 1.0)
    assert (ph.HISTORY_MAX, ph.RECENT_MAX) == (len(state.history), len(state.recent))
    assert float(ph.HISTORY_MAX + 9) == state.history[-1].ts


def test_state_round_trips_through_msgspec() -> None:
    """PhaseState is serializable (JSON) and decodes to an equal value."""
    _, _, state = run([R, R, E, E, E, T])
    decoded = msgspec.json.decode(msgspec.json.encode(state), type=PhaseState)
    assert state == decoded


def test_exploration_alone_can_never_switch() -> None:
    """Constants: saturated exploration never beats MARGIN, and it is not material."""
    assert (True, True) == (
        ph.W_EXPLORE / (1 - ph.DECAY) <= ph.MARGIN,
        ph.W_EXPLORE < ph.MATERIAL_WEIGHT,
    )


# --------------------------------------------------------------------------- prompt signals

PROMPTS: list[tuple[str, list[tuple[str, str]]]] = [
    ("/phase impl", [(IMPL, "command")]),
    ("  /phase Testing", [("testing", "command")]),
    ("/phase 评审", [("review", "command")]),
    ("/phase 设计", [("design", "command")]),
    ("/ctxlifed:phase plan", [("planning", "command")]),
    ("ctxlifectl phase set dev", [(IMPL, "command")]),
    ("!ctxlifectl phase set qa", [("testing", "command")]),
    ("/phase deploy", []),
    ("/phase", []),
    ("/phases are fun", []),
    ("Let's implement the budget module.", [(IMPL, "handoff")]),
    ("LET'S IMPLEMENT", [(IMPL, "handoff")]),
    ("Please write the tests for it", [("testing", "handoff")]),
    ("run the tests", [("testing", "handoff")]),
    ("Could you review this diff?", [("review", "handoff")]),
    ("review the plan first", []),
    ("let's plan the migration", [("planning", "handoff")]),
    ("design the API for recall", [("design", "handoff")]),
    ("开始实现", [(IMPL, "handoff")]),
    ("我们写测试吧", [("testing", "handoff")]),
    ("评审", [("review", "handoff")]),
    ("做个计划", [("planning", "handoff")]),
    ("不要写测试", []),
    ("别开始实现", []),
    ("we should not run the tests", []),
    ("the reviewer said the implementation is fine", []),
    ("write testable code", []),
    ("/review", [("review", "handoff")]),
    ("let's implement it and then write the tests", [(IMPL, "handoff"), ("testing", "handoff")]),
    ("", []),
]


@pytest.mark.parametrize(("prompt", "expected"), PROMPTS, ids=[p[0] or "<empty>" for p in PROMPTS])
def test_signals_from_prompt(prompt: str, expected: list[tuple[str, str]]) -> None:
    """Commands and handoff phrases, EN and ZH, negations and non-matches."""
    assert expected == [(s.phase, s.source) for s in signals_from_prompt(prompt)]


def test_handoff_in_long_prompt_tail_is_seen_but_middle_is_not() -> None:
    """Only the head and the tail of a long prompt are scanned."""
    filler = "x " * 5000
    assert (["testing"], []) == (
        [s.phase for s in signals_from_prompt(filler + " write the tests")],
        [s.phase for s in signals_from_prompt("y " * 2000 + "write the tests" + filler)],
    )


@pytest.mark.parametrize(
    ("name", "expected"),
    [("impl", IMPL), ("Implementation.", IMPL), ("规划", "planning"), ("CR", "review"), ("nope", None)],
)
def test_parse_phase(name: str, expected: str | None) -> None:
    """Aliases, case and trailing punctuation."""
    assert expected == parse_phase(name)


# --------------------------------------------------------------------------- tool signals

TOOLS: list[tuple[str, dict[str, Any], list[tuple[str, int]]]] = [
    ("Read", {"file_path": "/a.py"}, [("planning", ph.W_EXPLORE), ("design", ph.W_EXPLORE)]),
    ("WebSearch", {"query": "fts5"}, [("planning", ph.W_EXPLORE), ("design", ph.W_EXPLORE)]),
    ("Edit", {"file_path": "/w/src/a.py"}, [(IMPL, ph.W_EDIT)]),
    ("MultiEdit", {"file_path": "/w/src/a.ts"}, [(IMPL, ph.W_EDIT)]),
    ("NotebookEdit", {"notebook_path": "/w/n.ipynb"}, [(IMPL, ph.W_EDIT)]),
    ("Write", {"file_path": "/w/tests/test_a.py"}, [("testing", ph.W_EDIT_TEST), (IMPL, ph.W_WEAK)]),
    ("Write", {"file_path": "/w/pkg/a_test.go"}, [("testing", ph.W_EDIT_TEST), (IMPL, ph.W_WEAK)]),
    ("Edit", {"file_path": "/w/web/a.spec.ts"}, [("testing", ph.W_EDIT_TEST), (IMPL, ph.W_WEAK)]),
    ("Write", {"file_path": "/w/docs/plan.md"}, [(IMPL, ph.W_WEAK)]),
    ("ExitPlanMode", {}, [(IMPL, ph.W_STRONG)]),
    ("TaskCreate", {"subject": "x"}, [(IMPL, ph.W_STRONG)]),
    ("EnterPlanMode", {}, [("planning", ph.W_STRONG)]),
    ("TodoWrite", {"todos": [{"content": "a", "status": "pending"}]}, [(IMPL, ph.W_STRONG)]),
    ("TodoWrite", {"todos": [{"content": "a", "status": "completed"}]}, [(IMPL, ph.W_WEAK)]),
    ("Bash", {"command": "pytest -q"}, [("testing", ph.W_TEST_RUN)]),
    ("Bash", {"command": "npm test"}, [("testing", ph.W_TEST_RUN)]),
    ("Bash", {"command": "git log --oneline -5"}, [("review", ph.W_REVIEW)]),
    ("Bash", {"command": "gh pr diff 12"}, [("review", ph.W_REVIEW)]),
    ("Bash", {"command": "cargo build"}, [(IMPL, ph.W_WEAK)]),
    ("Bash", {"command": "cat README.md | head"}, [("planning", ph.W_EXPLORE), ("design", ph.W_EXPLORE)]),
    ("Bash", {"command": "python scripts/gen.py"}, []),
    ("Bash", {}, []),
    ("Agent", {"prompt": "look around"}, []),
    ("mcp__x__y", {"a": 1}, []),
]


@pytest.mark.parametrize(("tool", "inp", "expected"), TOOLS, ids=[f"{t[0]}-{i}" for i, t in enumerate(TOOLS)])
def test_signals_from_tool(tool: str, inp: dict[str, Any], expected: list[tuple[str, int]]) -> None:
    """Tool heuristics: phase and weight per tool call."""
    assert expected == [(s.phase, s.weight) for s in signals_from_tool(tool, inp)]


def test_tool_evidence_is_short() -> None:
    """Evidence names the tool and its target, one line, at most EVIDENCE_CHARS."""
    (sig,) = signals_from_tool("Bash", {"command": "pytest -q\n" + "x" * 500})
    assert (True, True, True) == (
        sig.evidence.startswith("Bash: pytest -q"),
        "\n" not in sig.evidence,
        len(sig.evidence) <= ph.EVIDENCE_CHARS,
    )


# --------------------------------------------------------------------------- command families


@pytest.mark.parametrize(
    ("cmd", "expected"),
    [
        ("pytest -q", True),
        ("cd /w && uv run pytest -q tests/x.py", True),
        (".venv/bin/python -m pytest", True),
        ("python3 -m unittest discover", True),
        ("npm test", True),
        ("pnpm run test:unit", True),
        ("yarn test --watch=false", True),
        ("go test ./...", True),
        ("cargo test --all", True),
        ("make test", True),
        ("make -C sub check", True),
        ("./gradlew clean test", True),
        ("FOO=1 timeout 60 npx jest", True),
        ("pip install pytest", False),
        ("grep -r pytest setup.cfg", False),
        ("echo done", False),
        ("", False),
    ],
)
def test_is_test_command(cmd: str, expected: bool) -> None:
    """Test commands behind wrappers, not mentions of test tools."""
    assert expected == is_test_command(cmd)


@pytest.mark.parametrize(
    ("cmd", "test", "review", "build", "readonly"),
    [
        ("git diff", False, True, False, False),
        ("git --no-pager show HEAD", False, True, False, False),
        ("git status", False, False, False, True),
        ("make", False, False, True, False),
        ("make && make test", True, False, False, False),
        ("npm run build", False, False, True, False),
        ("tsc --noEmit", False, False, True, False),
        ("go build ./...", False, False, True, False),
        ("pip install -e .", False, False, True, False),
        ("ls -la && cat x | wc -l", False, False, False, True),
        ("rm -rf build", False, False, False, False),
    ],
)
def test_command_families(cmd: str, test: bool, review: bool, build: bool, readonly: bool) -> None:
    """Each command's membership in the test / review / build / read-only families."""
    actual = (is_test_command(cmd), is_review_command(cmd), is_build_command(cmd), is_readonly_command(cmd))
    assert (test, review, build, readonly) == actual


# --------------------------------------------------------------------------- properties

_signal = st.builds(
    Signal,
    phase=st.sampled_from(PHASES),
    source=st.sampled_from(["command", "handoff", "tool"]),
    evidence=st.text(max_size=20),
    weight=st.integers(min_value=0, max_value=30),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(_signal, max_size=4), max_size=40))
def test_observe_invariants(batches: list[list[Signal]]) -> None:
    """For any signal sequence: phase valid, a switch iff the phase changed, from/to consistent."""
    state = PhaseState()
    for i, batch in enumerate(batches):
        new, sw = observe(state, batch, float(i))
        if sw is None:
            assert state.phase == new.phase
        else:
            assert (state.phase, new.phase, float(i), new.history[-1]) == (sw.from_phase, sw.to_phase, new.since, sw)
        assert new.phase in PHASES and len(new.history) <= ph.HISTORY_MAX and len(new.recent) <= ph.RECENT_MAX
        state = new


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(PHASES),
    st.lists(st.floats(min_value=0, max_value=50), min_size=5, max_size=5),
    st.sampled_from(PHASES),
)
def test_one_weak_tool_signal_never_switches(current: str, scores: list[float], target: str) -> None:
    """From any state, a single weak tool signal (weight < MATERIAL_WEIGHT) never switches."""
    state = PhaseState(phase=current, scores=tuple(scores))  # type: ignore[arg-type]
    _, sw = observe(state, [Signal(target, "tool", "Read: x", ph.MATERIAL_WEIGHT - 1)], 1.0)  # type: ignore[arg-type]
    assert sw is None
