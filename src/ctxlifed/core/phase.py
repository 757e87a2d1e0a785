"""Task-phase tracker: signals from prompts and tool calls, a hysteresis state machine, switch events.

Rules:
- Pure: no I/O, no clock. ``now`` is passed in; every state is a new frozen :class:`PhaseState`.
- Five phases (:data:`~ctxlifed.core.model.PHASES`); a new session starts in ``planning``.
- Signals have a source:
  * ``command`` -- a prompt starting with ``/phase <name>`` (plugin form ``/x:phase <name>`` too) or
    ``ctxlifectl phase set <name>``; names in English, Chinese (规划/设计/实现/测试/评审) or an alias
    (plan, impl, dev, code, test, qa, cr, ...), see :func:`parse_phase`. An unknown name gives no signal.
  * ``handoff`` -- a phrase from the bounded table below, EN (case-insensitive, word-bounded) or ZH
    ("let's implement", "write the tests", "run the full test suite", "review this", "开始实现", "写测试",
    "评审", ...), a fix asked for at a clause start ("Fix the flaky test", "then fix it", 修复, 再修:
    implementation; "how do we fix it?" asks, it is no hand-off), and a prompt starting with ``/review``. A phrase preceded by a negation ("don't", "not", "不要", "别", ...) is
    ignored. Only the first :data:`HANDOFF_SCAN_HEAD` and last :data:`HANDOFF_SCAN_TAIL` characters
    of a prompt are scanned. Signals come in order of appearance, one per phase.
  * ``tool`` -- heuristics from a tool call (weights are the ``W_*`` constants):
    Read/Grep/Glob/LS/WebSearch/WebFetch -> planning and design, weak; Write/Edit/MultiEdit/
    NotebookEdit -> implementation (a test file -> testing, plus weak implementation; a doc file ->
    weak implementation); ExitPlanMode, TaskCreate and a fresh TodoWrite list (nothing completed yet)
    -> implementation, strong; EnterPlanMode -> planning, strong; Bash: a test command -> testing, a
    review command (``git diff|log|show``, ``gh pr view|diff``) -> review, a build/install -> weak
    implementation, a read-only command (ls, cat, grep, git status, ...) -> weak planning/design, any
    other command -> nothing (``python x.py``, ``curl``, ``rm`` say nothing reliable about the phase, and
    noise would only erode the hysteresis).
- :func:`observe`: a command switches at once (cause "command"); otherwise a handoff switches at once
  (cause "handoff"; the user said so, no corroboration needed); the *last* command and the *first*
  handoff of a batch count, and tool signals in the same batch are ignored. Either one resets the
  scores and seeds the named phase with :data:`SEED_COMMAND` / :data:`SEED_HANDOFF`, also when the
  phase does not change (a reaffirmation), so heuristics need longer to overrule the user.
- Tool heuristics (an observe call with tool signals is one *event*; an empty call changes nothing):
  every score is multiplied by :data:`DECAY`, then the event's weights are added. A phase that gets at
  least :data:`MATERIAL_WEIGHT` from one event has *material* evidence. Material evidence for the
  current phase breaks any streak; material evidence for another phase extends that phase's streak
  (or starts a new one); weak evidence only moves scores, it neither extends nor breaks a streak. The phase switches (cause "heuristic") when a streak reaches
  :data:`SUSTAIN_EVENTS` and that phase's score beats the current one by :data:`MARGIN`, or at once when
  one event brings a phase at least :data:`STRONG_WEIGHT` and leaves it :data:`MARGIN` ahead.
  Consequences: a stray Read never flips anything (weak signals cannot build a streak, and
  W_EXPLORE / (1 - DECAY) = MARGIN, so exploration alone never switches: planning and design are
  entered by command or handoff); three Edits in a row after planning reads reach implementation; three
  test runs in a row after edits reach testing, while edit/test/test debug loops stay in implementation;
  from planning or design, edits and test runs form one streak of *work*: :data:`WORK_SUSTAIN_EVENTS`
  material work events in a row, edits and test runs mixed, switch to implementation when the
  implementation + testing scores lead the current phase by :data:`MARGIN` (Read -> failing test ->
  Edit -> passing test is implementation, not planning);
  ExitPlanMode flips planning to implementation at once, but not a phase with evidence of its own.
- Every switch is a :class:`PhaseSwitch` (time, from, to, cause, evidence) returned to the caller and
  kept in ``history`` (last :data:`HISTORY_MAX`). ``recent`` keeps the last :data:`RECENT_MAX` signals.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import msgspec

from ctxlifed.core.commands import (
    EDIT_TOOLS,
    EXPLORE_TOOLS,
    is_build_command,
    is_readonly_command,
    is_review_command,
    is_test_command,
)
from ctxlifed.core.model import PHASES, PhaseName

__all__ = [
    "DECAY",
    "MARGIN",
    "MATERIAL_WEIGHT",
    "STRONG_WEIGHT",
    "SUSTAIN_EVENTS",
    "PhaseState",
    "PhaseSwitch",
    "Signal",
    "observe",
    "parse_phase",
    "set_phase",
    "signals_from_prompt",
    "signals_from_tool",
]

# --------------------------------------------------------------------------- constants

DECAY = 0.75  # per event, on every phase's score
MARGIN = 4.0  # the challenger must lead the current phase by this much
SUSTAIN_EVENTS = 3  # consecutive material events for the challenger
MATERIAL_WEIGHT = 2  # a signal at least this heavy counts toward / breaks a streak
STRONG_WEIGHT = 10  # one event this heavy for a phase may switch at once (still needs MARGIN)
WORK_SUSTAIN_EVENTS = 2  # consecutive material work events (an edit among them) that leave planning/design
_WORK = ("implementation", "testing")
_BEFORE_WORK = ("planning", "design")

W_EXPLORE = 1  # Read, Grep, Glob, WebSearch, WebFetch, read-only shell -> planning + design
W_WEAK = 1  # build/install, doc edits, TodoWrite updates -> implementation
W_EDIT = 3  # Write / Edit / MultiEdit / NotebookEdit of a source file -> implementation
W_EDIT_TEST = 2  # edit of a test file -> testing
W_TEST_RUN = 4  # Bash test command -> testing
W_REVIEW = 4  # git diff/log/show, gh pr view/diff -> review
W_STRONG = STRONG_WEIGHT  # ExitPlanMode, TaskCreate, a fresh TodoWrite list; EnterPlanMode
W_HANDOFF = 10
W_COMMAND = 20
SEED_HANDOFF = float(W_HANDOFF)  # score given to the phase a handoff names
SEED_COMMAND = float(W_HANDOFF)  # the same: heuristics need as long to overrule either

HISTORY_MAX = 64
RECENT_MAX = 16
SWITCH_EVIDENCE_MAX = 5
EVIDENCE_CHARS = 80
HANDOFF_SCAN_HEAD = 2000
HANDOFF_SCAN_TAIL = 1000

Source = Literal["command", "handoff", "tool"]
Cause = Literal["command", "handoff", "heuristic", "manual"]

# --------------------------------------------------------------------------- types


class Signal(msgspec.Struct, frozen=True):
    """One piece of evidence that the session is in ``phase``."""

    phase: PhaseName
    source: Source
    evidence: str
    weight: int


class PhaseSwitch(msgspec.Struct, frozen=True):
    """A phase change: when, from where to where, why, and the evidence behind it."""

    ts: float
    from_phase: PhaseName
    to_phase: PhaseName
    cause: Cause
    evidence: tuple[str, ...] = ()


class PhaseState(msgspec.Struct, frozen=True, kw_only=True):
    """The tracker's state; ``scores`` is aligned with :data:`PHASES`."""

    phase: PhaseName = "planning"
    since: float = 0.0
    scores: tuple[float, ...] = (0.0,) * len(PHASES)
    streak_phase: PhaseName | None = None
    streak: int = 0
    recent: tuple[Signal, ...] = ()
    history: tuple[PhaseSwitch, ...] = ()

    def score(self, phase: str) -> float:
        """The decayed evidence score of ``phase`` (0.0 for an unknown name)."""
        return self.scores[PHASES.index(phase)] if phase in PHASES else 0.0  # type: ignore[arg-type]


# --------------------------------------------------------------------------- names

_ALIASES: dict[str, PhaseName] = {}
for _phase, _names in (
    ("planning", "planning plan plans requirements reqs 规划 计划 需求"),
    ("design", "design designing arch architecture 设计 架构"),
    ("implementation", "implementation implement implementing impl dev develop development code coding "
     "build 实现 开发 编码"),
    ("testing", "testing test tests qa verify verification 测试 验证"),
    ("review", "review reviewing cr code-review 评审 审查 审阅"),
):  # fmt: skip
    for _n in _names.split():
        _ALIASES[_n] = _phase  # type: ignore[assignment]
del _phase, _names, _n

_NAME_STRIP = " \t\r\n.,;:!?'\"`。，；：！？、"


def parse_phase(name: str) -> PhaseName | None:
    """Map a phase name or alias (EN/ZH, any case) to its canonical name, or None."""
    return _ALIASES.get(name.strip(_NAME_STRIP).lower())


# --------------------------------------------------------------------------- prompts

_COMMAND_RE = re.compile(
    r"^\s*(?:/(?:[\w.-]+:)?phase|!?\s*ctxlifectl\s+phase\s+set)(?:\s+(\S+)|\s*$)", re.I
)
_SLASH_REVIEW_RE = re.compile(r"^\s*/(?:[\w.-]+:)?(?:review|code-review|security-review)(?!\S)", re.I)

_LETS = r"(?:let'?s|let’s|let\s+us)"
_HANDOFF_EN: dict[PhaseName, tuple[str, ...]] = {
    "planning": (
        rf"{_LETS}\s+(?:start\s+(?:by\s+)?)?plan(?:ning)?",
        r"(?:make|draft|write\s+up|come\s+up\s+with)\s+a\s+plan",
        r"plan\s+(?:it|this|that)\s+out",
        r"start\s+planning",
        r"(?:gather|clarify|collect)\s+(?:the\s+)?requirements",
    ),
    "design": (
        rf"{_LETS}\s+(?:start\s+(?:the\s+)?)?design",
        r"design\s+(?:the|an?)\s+(?:api|interface|architecture|schema|data\s+model|module|system|protocol)",
        r"propose\s+(?:a|an)\s+(?:design|architecture)",
        r"(?:sketch|outline)\s+(?:the|an?)\s+architecture",
        r"start\s+(?:the\s+)?design(?:ing)?",
    ),
    "implementation": (
        rf"{_LETS}\s+(?:start\s+)?(?:implement(?:ing)?|cod(?:e|ing)|build\s+(?:it|this))",
        r"(?:go\s+ahead\s+and\s+)?implement\s+(?:it|this|that|the\s+plan|the\s+design)",
        r"start\s+(?:implementing|coding)",
        r"(?:begin|proceed\s+with)\s+(?:the\s+)?implementation",
        r"write\s+the\s+code",
        # A fix asked for at a clause start ("Fix the flaky test", "then fix it"): the work is a change.
        r"(?:^|(?<=\n)|(?<=[.!;:,]\s)|" + "|".join(rf"(?<=\b{w}\s)" for w in ("then", "and", "now", "please", "just", "so", "to"))
        + r")fix\s+(?:it|this|that|them|these|those|the|a|an|my|our|both|all)\b",
    ),
    "testing": (
        r"write\s+(?:the\s+|some\s+|more\s+)?(?:unit\s+|integration\s+)?tests?",
        r"add\s+(?:the\s+|some\s+|more\s+)?(?:unit\s+|integration\s+)?tests",
        r"run\s+(?:the\s+|all\s+(?:the\s+)?)?(?:(?:full|whole|entire|complete|unit|integration|e2e)\s+)?"
        r"(?:tests?|test\s+suite|suite|specs?)",
        rf"{_LETS}\s+test",
        r"start\s+testing",
        r"test\s+(?:it|this|that)",
    ),
    "review": (
        r"review\s+(?:this|the|my|it|that|these|those|our)"
        r"(?!\s+(?:plan|design|requirements?|spec|proposal)\b)",
        rf"{_LETS}\s+review",
        r"code\s+review",
        r"do\s+a\s+review",
        r"(?:look\s+over|check)\s+the\s+diff",
    ),
}
_HANDOFF_ZH: dict[PhaseName, tuple[str, ...]] = {
    "planning": ("规划一下", "开始规划", "做(?:个|一个|一份)?计划", "制定(?:一个)?计划", "需求分析",
                 "梳理(?:一下)?需求"),
    "design": ("开始设计", "设计一下", "做(?:个|一个|一下)?(?:架构|方案)?设计", "架构设计", "设计方案",
               "接口设计"),
    "implementation": ("开始(?:实现|编码|开发|写代码)", "动手(?:实现|写)", "着手实现", "实现一下", "写代码",
                       "修复", "修一下", "修掉", "修好", "(?:先|再|然后|就|来)修"),
    "testing": ("写(?:单元|集成)?测试", "(?:开始|进行)测试", "跑(?:一下|一遍)?测试", "运行测试", "测试一下",
                "补(?:充)?(?:一些)?测试", "加(?:个|一些|上)?测试"),
    "review": ("评审", "审查", "审阅", "review一下"),
}  # fmt: skip


def _group(phase: PhaseName) -> str:
    en = "|".join(_HANDOFF_EN[phase])
    zh = "|".join(_HANDOFF_ZH[phase])
    return rf"(?P<{phase}>(?<![\w'’])(?:{en})(?!\w)|{zh})"


_HANDOFF_RE = re.compile("|".join(_group(p) for p in PHASES), re.I)
_NEG_EN_RE = re.compile(
    r"\b(?:don'?t|don’t|do\s+not|not|never|no\s+need\s+to|without|stop|avoid|before)\s+"
    r"(?:[\w'’]+\s+){0,2}$",
    re.I,
)
_NEG_ZH_RE = re.compile(r"(?:[不别没勿]|不要|不用|不必|不需要|无需)[先再]?\s*$")


def _negated(text: str, start: int) -> bool:
    before = text[max(0, start - 40) : start]
    return bool(_NEG_EN_RE.search(before) or _NEG_ZH_RE.search(before[-6:]))


def _short(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= EVIDENCE_CHARS else line[: EVIDENCE_CHARS - 1] + "…"


def signals_from_prompt(prompt: str) -> list[Signal]:
    """Command and handoff signals in a user prompt (a command, when present, is the only signal)."""
    if not prompt:
        return []
    m = _COMMAND_RE.match(prompt[:500])
    if m:
        phase = parse_phase(m.group(1) or "")
        return [Signal(phase, "command", _short(m.group(0)), W_COMMAND)] if phase else []
    out: list[Signal] = []
    seen: set[str] = set()
    if _SLASH_REVIEW_RE.match(prompt[:200]):
        out.append(Signal("review", "handoff", _short(prompt.split(None, 1)[0]), W_HANDOFF))
        seen.add("review")
    if len(prompt) > HANDOFF_SCAN_HEAD + HANDOFF_SCAN_TAIL:
        prompt = prompt[:HANDOFF_SCAN_HEAD] + "\n" + prompt[-HANDOFF_SCAN_TAIL:]
    for hit in _HANDOFF_RE.finditer(prompt):
        phase = hit.lastgroup
        if phase is None or phase in seen or _negated(prompt, hit.start()):
            continue
        seen.add(phase)
        out.append(Signal(phase, "handoff", _short(hit.group(0)), W_HANDOFF))  # type: ignore[arg-type]
    return out


# --------------------------------------------------------------------------- tools

_TEST_PATH_RE = re.compile(
    r"(?:^|[/\\])(?:tests?|__tests__|spec|specs|testing)[/\\]"
    r"|(?:^|[/\\])(?:test_[^/\\]*|[^/\\]*_test\.\w+|[^/\\]*\.(?:test|spec)\.\w+|conftest\.py"
    r"|[^/\\]*Tests?\.(?:java|kt|cs|swift|scala))$"
)
_DOC_PATH_RE = re.compile(r"\.(?:md|markdown|mdx|rst|txt|adoc|org)$", re.I)


def _explore(evidence: str) -> list[Signal]:
    return [
        Signal("planning", "tool", evidence, W_EXPLORE),
        Signal("design", "tool", evidence, W_EXPLORE),
    ]


def _str_field(inp: dict[str, Any], *keys: str) -> str:
    for key in keys:
        v = inp.get(key)
        if isinstance(v, str) and v:
            return v
    return ""


def signals_from_tool(tool_name: str, tool_input: dict[str, Any]) -> list[Signal]:
    """Heuristic signals for one tool call (see the module rules); [] when the call says nothing."""
    inp = tool_input if isinstance(tool_input, dict) else {}
    name = tool_name or ""
    if name in EXPLORE_TOOLS:
        target = _str_field(inp, "file_path", "pattern", "query", "url", "path", "notebook_path")
        return _explore(_short(f"{name}: {target}" if target else name))
    if name in EDIT_TOOLS:
        path = _str_field(inp, "file_path", "notebook_path")
        ev = _short(f"{name}: {path}" if path else name)
        if path and _TEST_PATH_RE.search(path):
            return [
                Signal("testing", "tool", ev, W_EDIT_TEST),
                Signal("implementation", "tool", ev, W_WEAK),
            ]
        weight = W_WEAK if path and _DOC_PATH_RE.search(path) else W_EDIT
        return [Signal("implementation", "tool", ev, weight)]
    if name in ("ExitPlanMode", "TaskCreate"):
        return [Signal("implementation", "tool", name, W_STRONG)]
    if name == "EnterPlanMode":
        return [Signal("planning", "tool", name, W_STRONG)]
    if name == "TodoWrite":
        todos = inp.get("todos")
        items = todos if isinstance(todos, list) else []
        fresh = bool(items) and not any(
            isinstance(t, dict) and t.get("status") == "completed" for t in items
        )
        return [Signal("implementation", "tool", f"TodoWrite: {len(items)} items",
                       W_STRONG if fresh else W_WEAK)]  # fmt: skip
    if name == "Bash":
        cmd = _str_field(inp, "command")
        if not cmd:
            return []
        ev = _short(f"Bash: {cmd}")
        if is_test_command(cmd):
            return [Signal("testing", "tool", ev, W_TEST_RUN)]
        if is_review_command(cmd):
            return [Signal("review", "tool", ev, W_REVIEW)]
        if is_build_command(cmd):
            return [Signal("implementation", "tool", ev, W_WEAK)]
        if is_readonly_command(cmd):
            return _explore(ev)
    return []


# --------------------------------------------------------------------------- state machine


def _seeded(phase: PhaseName, seed: float) -> tuple[float, ...]:
    return tuple(seed if p == phase else 0.0 for p in PHASES)


def _switch(
    state: PhaseState,
    to: PhaseName,
    now: float,
    cause: Cause,
    evidence: tuple[str, ...],
    scores: tuple[float, ...],
    recent: tuple[Signal, ...],
) -> tuple[PhaseState, PhaseSwitch | None]:
    if to == state.phase:
        return msgspec.structs.replace(
            state, scores=scores, streak_phase=None, streak=0, recent=recent
        ), None
    sw = PhaseSwitch(ts=now, from_phase=state.phase, to_phase=to, cause=cause, evidence=evidence)
    new = msgspec.structs.replace(
        state,
        phase=to,
        since=now,
        scores=scores,
        streak_phase=None,
        streak=0,
        recent=recent,
        history=(*state.history, sw)[-HISTORY_MAX:],
    )
    return new, sw


def set_phase(
    state: PhaseState, phase: str, now: float, cause: Cause = "manual", *, evidence: str = ""
) -> tuple[PhaseState, PhaseSwitch | None]:
    """Set the phase explicitly (``ctxlifectl phase set``); no switch when already there, but the
    scores are reset and the phase seeded as for a command. Raises ValueError for an unknown name."""
    target = parse_phase(phase)
    if target is None:
        raise ValueError(f"unknown phase: {phase!r}")
    ev = _short(evidence or f"{cause}: {target}")
    seed = SEED_HANDOFF if cause == "handoff" else SEED_COMMAND
    return _switch(state, target, now, cause, (ev,), _seeded(target, seed), state.recent)


def observe(
    state: PhaseState, signals: list[Signal], now: float
) -> tuple[PhaseState, PhaseSwitch | None]:
    """Fold one batch of signals (one prompt or one tool call) into the state; see the module rules."""
    if not signals:
        return state, None
    recent = (*state.recent, *signals)[-RECENT_MAX:]
    commands = [s for s in signals if s.source == "command"]
    handoffs = [s for s in signals if s.source == "handoff"]
    if commands:
        sig = commands[-1]
        seeded = _seeded(sig.phase, SEED_COMMAND)
        return _switch(state, sig.phase, now, "command", (sig.evidence,), seeded, recent)
    if handoffs:
        sig = handoffs[0]
        seeded = _seeded(sig.phase, SEED_HANDOFF)
        return _switch(state, sig.phase, now, "handoff", (sig.evidence,), seeded, recent)

    weights = dict.fromkeys(PHASES, 0)
    for s in signals:
        weights[s.phase] += s.weight
    old = state.scores if len(state.scores) == len(PHASES) else (0.0,) * len(PHASES)
    scores = tuple(
        v if v >= 0.001 else 0.0
        for v in (round(o * DECAY + weights[p], 6) for o, p in zip(old, PHASES, strict=True))
    )
    cur = state.phase

    def lead(p: PhaseName) -> float:
        return scores[PHASES.index(p)] - scores[PHASES.index(cur)]

    streak_phase, streak = state.streak_phase, state.streak
    material = [p for p in PHASES if weights[p] >= MATERIAL_WEIGHT]
    to: PhaseName | None = None
    if cur in material:
        streak_phase, streak = None, 0
    elif material:
        strong = [p for p in material if weights[p] >= STRONG_WEIGHT and lead(p) >= MARGIN]
        if strong:
            to = max(strong, key=lambda p: weights[p])
        else:
            cand = max(material, key=lambda p: (weights[p], scores[PHASES.index(p)]))
            joint = cur in _BEFORE_WORK and cand in _WORK and streak_phase in _WORK and cand != streak_phase
            if joint:  # edits and test runs together: one streak of work, toward implementation
                streak, streak_phase = streak + 1, "implementation"
                work = sum(scores[PHASES.index(p)] for p in _WORK) - scores[PHASES.index(cur)]
                if streak >= WORK_SUSTAIN_EVENTS and work >= MARGIN:
                    to = "implementation"
            else:
                streak = streak + 1 if cand == streak_phase else 1
                streak_phase = cand
                if streak >= SUSTAIN_EVENTS and lead(cand) >= MARGIN:
                    to = cand
    if to is not None:
        evidence = tuple(s.evidence for s in recent if s.phase == to)[-SWITCH_EVIDENCE_MAX:]
        return _switch(state, to, now, "heuristic", evidence, scores, recent)
    new = msgspec.structs.replace(
        state, scores=scores, streak_phase=streak_phase, streak=streak, recent=recent
    )
    return new, None
