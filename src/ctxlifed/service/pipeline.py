"""The hook pipeline's steps, by name. ``Service.hook`` runs them; this module holds the ones that need
neither the store nor the session registry.

Every hook event goes through, in order:
1. ``decode``: redact the payload (when configured), decode it once into its typed event
   (``core/hook_events.py``, lenient), read the fields the pipeline routes on (event, session, cwd,
   project) from it, and build the raw event row: what is stored is the (redacted) payload itself.
   From here on every step reads the typed event (or the typed fields it needs), never the payload
   dict: the dict is only encoded into the row (``tests/test_layering.py`` keeps this true).
2. acknowledge (write-behind events) or derive inline (events whose answer depends on the derivation).
A derivation (``Service._hook_locked``) is:
   elements (the hook's own elements, advice signals) -> phase (``observe_phase``) -> transcript (usage,
   model, boundaries, assistant text) -> findings (tests, facts, the evidence that closes pending items)
   -> boundary (level, phase switch bookkeeping) -> store (ONE writer job) -> after commit (ledgers,
   advice, compression, lessons) -> answer -> save the session again only if the answer changed it.

Rules:
- A payload of any shape is accepted: missing or mistyped fields give an empty answer, never an
  error, and the raw event is stored anyway (``session`` falls back to ``_invalid``).
- Redaction happens before anything is stored or derived.
- The steps here are pure over the session state they are given: no I/O, no clock of their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from ..core import budget as budgets
from ..core import classify, hook_events
from ..core.hook_events import (
    HookEvent,
    PostToolUse,
    PostToolUseFailure,
    ToolHook,
    UnknownHook,
    UserPromptSubmit,
    as_text,
)
from ..core import lessons as lesson_rules
from ..core import pending as pending_rules
from ..core import phase as phases
from ..core import testfail, transcript
from ..core.model import Element, Kind, estimate_tokens
from ..core.paths import validate_session_id
from ..core.redact import redact_obj
from ..store import ops
from . import files
from .state import SessionState

PASSED_TEXT_CHARS = 16 * 1024  # of a passing run's output searched for the test names of pending items
MAX_TODOS = 16  # open todos of one TodoWrite call kept as pending items
_encoder = msgspec.json.Encoder()


@dataclass(frozen=True)
class Incoming:
    """A hook event as decoded at the edge: its typed event, what it routes on, its raw row (which
    holds the (redacted) payload as stored)."""

    hook: HookEvent | UnknownHook  # the typed view of the payload (core/hook_events.py)
    event: str
    sid: str  # "" when the payload names no valid session
    project: str
    cwd: str
    now: float
    row: ops.EventRow


def decode(payload: dict[str, Any], *, now: float, redact: bool, source: str, rid: str | None) -> Incoming:
    """Step 1: redact, read the routing fields, build the event row (see the module rules)."""
    redactions = 0
    if redact:
        payload, redactions = redact_obj(payload)
    hook = hook_events.decode_hook(payload)
    event = hook.hook_event_name or "Unknown"
    cwd = hook.cwd
    try:
        sid = validate_session_id(hook.session_id)
    except ValueError:
        sid = ""
    project = files.project_root(cwd) if cwd else "(unknown)"
    tool = hook.tool_name if isinstance(hook, (ToolHook, UnknownHook)) else ""
    row = ops.EventRow(session=sid or "_invalid", project=project, cwd=cwd, event=event,
                       tool=tool or None, ts=now, payload=_encoder.encode(payload),
                       redactions=redactions, source=source, rid=rid)
    return Incoming(hook=hook, event=event, sid=sid, project=project, cwd=cwd, now=now, row=row)


def enrich(el: Element) -> Element:
    """A test run's outcome, when the hook did not say it, from its output."""
    if el.kind is Kind.TEST_RESULT and el.passed is None:
        return msgspec.structs.replace(el, passed=transcript.test_outcome(el.text, el.is_error))
    return el


def observe_phase(st: SessionState, hook: HookEvent | UnknownHook, now: float) -> Any:
    """Step phase: the phase signals of a prompt or a main-chain tool call; the switch they cause (or None)."""
    signals: list[phases.Signal] = []
    if isinstance(hook, UserPromptSubmit):
        signals = phases.signals_from_prompt(hook.prompt)
    elif isinstance(hook, (PostToolUse, PostToolUseFailure)) and not hook.agent_id:
        signals = phases.signals_from_tool(hook.tool_name, hook.tool_input)
    switch = None
    if signals:
        st.phase, switch = phases.observe(st.phase, signals, now)
    return switch


@dataclass
class Findings:
    """What a derivation found in its elements: facts to store, pending items they close, tests green again."""

    facts: list[Element]
    closing: pending_rules.Evidence
    went_green: bool


def findings(st: SessionState, hook: HookEvent | UnknownHook, elements: list[Element], now: float) -> Findings:
    """Step findings: files and tests for the ledger ("tests green again" is a task boundary); facts
    (decisions, constraints, pending items) from prompts, assistant text and TodoWrite; the evidence
    that closes open pending items."""
    went_green = False
    passed_tests: list[str] = []
    passed_text: list[str] = []
    for el in elements:
        if el.kind is Kind.CODE_CHANGE and el.file_path:
            st.note_file(el.file_path)
        if el.kind is Kind.TEST_RESULT and el.command:
            st.note_test(("PASS " if el.passed else "FAIL " if el.passed is False else "RAN ") + el.command)
            if el.passed is False:
                st.tests_red = True
                st.note_failing(el.command, testfail.failure_lines(el.text))
            elif el.passed:
                passed_tests += st.clear_failing(el.command, covers=covers)
                passed_text.append(f"{el.command}\n{el.text[:PASSED_TEXT_CHARS]}")
                if st.tests_red:
                    st.tests_red, went_green = False, True
    facts: list[Element] = []
    for el in elements:
        if el.kind in (Kind.PROMPT, Kind.ASSISTANT):
            for kind, text in classify.detect_facts(el.text):
                facts.append(Element(uid=f"{el.uid}:fact:{len(facts)}", kind=kind, text=text, ts=now,
                                     tokens=estimate_tokens(text)))
    # The to-do list Claude keeps (TodoWrite): each open todo is a pending item; a completed one
    # closes it (closing_evidence).
    tool_use_id = hook.tool_use_id if isinstance(hook, ToolHook) else ""
    for i, text in enumerate(open_todos(hook)):
        facts.append(Element(uid=f"{tool_use_id or now}:todo:{i}", kind=Kind.PENDING, text=text,
                             ts=now, tokens=estimate_tokens(text)))
    closing = closing_evidence(hook, facts, passed_tests, passed_text,
                               [el.text for el in elements if el.kind in (Kind.PROMPT, Kind.ASSISTANT)])
    return Findings(facts=facts, closing=closing, went_green=went_green)


@dataclass
class Boundary:
    """Where a derivation leaves the session: its budget, whether the level rose, the phase it is in,
    and the phase that ended (index, name, start) when it switched."""

    budget: budgets.Budget | None
    crossed: bool
    phase_now: str
    ended_phase: tuple[int, str, float] | None


def boundary(st: SessionState, budget: budgets.Budget | None, switch: Any, boundaries_seen: bool, event: str,
             now: float) -> Boundary:
    """Step boundary: a level rises after the commit (compression runs then); it falls only at a
    compaction boundary. A phase switch starts a new phase's files and tests; SessionEnd ends the session."""
    crossed = budget is not None and int(budget.level) > st.level
    if budget is not None and int(budget.level) < st.level and boundaries_seen:
        st.level = int(budget.level)
    ended_phase = None
    if switch is not None:
        ended_phase = (st.phase_index, switch.from_phase, st.phase_started)
        st.phase_index += 1
        st.phase_started = now
        st.files_touched.clear()
        st.tests.clear()
    if event == "SessionEnd":
        st.ended_ts = now
    return Boundary(budget=budget, crossed=crossed, phase_now=st.phase.phase, ended_phase=ended_phase)


def covers(success_cmd: str, failure_cmd: str) -> bool:
    """A passing run of ``success_cmd`` shows ``failure_cmd``'s failures gone (lessons' test targets)."""
    if success_cmd == failure_cmd:
        return True
    return lesson_rules.covers(lesson_rules.target_of("Bash", success_cmd), lesson_rules.target_of("Bash", failure_cmd))


def open_todos(hook: HookEvent | UnknownHook) -> list[str]:
    """The todos a main-agent TodoWrite call lists as not completed (one line each, bounded)."""
    if not isinstance(hook, PostToolUse) or hook.agent_id or hook.tool_name != "TodoWrite":
        return []
    todos = hook.tool_input.get("todos")
    out = []
    for t in todos if isinstance(todos, list) else []:
        if isinstance(t, dict) and t.get("status") in ("pending", "in_progress") and as_text(t.get("content")).strip():
            text = " ".join(as_text(t.get("content")).split())
            out.append(text if len(text) <= classify.MAX_FACT_CHARS else text[: classify.MAX_FACT_CHARS - 1] + "…")
    return out[:MAX_TODOS]


def closing_evidence(hook: HookEvent | UnknownHook, facts: list[Element], passed_tests: list[str],
                     passed_text: list[str], said: list[str]) -> pending_rules.Evidence:
    """What this event says about open pending items (core/pending.py routes); ``said``: the texts of
    its prompts and assistant messages."""
    todos: list[str] = []
    edits: list[tuple[str, str]] = []
    done: list[str] = []
    answers: list[str] = []
    settled = [t for text in said[:pending_rules.MAX_EVIDENCE] for t in pending_rules.settled_topics(text)]
    if isinstance(hook, PostToolUse) and not hook.agent_id:
        tool, ti = hook.tool_name, hook.tool_input
        if tool == "TodoWrite" and isinstance(ti.get("todos"), list):
            todos = [as_text(t.get("content")) for t in ti["todos"]
                     if isinstance(t, dict) and t.get("status") == "completed" and as_text(t.get("content"))]
        elif tool == "Edit":
            edits = [(hook.input_text("old_string"), hook.input_text("new_string"))]
        elif tool == "MultiEdit" and isinstance(ti.get("edits"), list):
            edits = [(as_text(e.get("old_string")), as_text(e.get("new_string"))) for e in ti["edits"]
                     if isinstance(e, dict)]
    elif isinstance(hook, UserPromptSubmit):
        done = pending_rules.done_statements(hook.prompt)
        answers = pending_rules.answer_clauses(hook.prompt)
    return pending_rules.Evidence(completed_todos=tuple(todos[:64]), decisions=tuple(f.text for f in facts if f.kind is Kind.DECISION),
                       passed_tests=tuple(passed_tests), passed_text="\n".join(passed_text),
                       edits=tuple(edits[:64]), done=tuple(done), settled=tuple(settled), answers=tuple(answers))
