"""Tests for ctxlifed.core.accounting: where the tokens of the context window went."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest

from ctxlifed.core import accounting as A
from ctxlifed.core.model import estimate_tokens
from ctxlifed.core.survival import simulate
from ctxlifed.core.transcript import CompactBoundary, Marks, TranscriptCursor, TranscriptDelta, feed

RUNS = Path(__file__).resolve().parent / "fixtures" / "claude-code" / "runs"
ROOT = "/home/u/proj"
T0 = 1_767_000_000.0

pytestmark = pytest.mark.filterwarnings("error")


def _main_transcript(run: str) -> Path:
    files = sorted(RUNS.glob(f"{run}/transcripts/*/*.jsonl"), key=lambda p: p.stat().st_size)
    if not files:
        pytest.skip(f"fixture run {run!r} not available")
    return files[-1]


def _whole(data: bytes) -> TranscriptDelta:
    return feed(TranscriptCursor(), data, final=True)[1]


# --------------------------------------------------------------------------- synthetic records


def _iso(t: float) -> str:
    return datetime.fromtimestamp(T0 + t, tz=UTC).isoformat().replace("+00:00", "Z")


def _line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def _prompt(uuid: str, text: str, t: float) -> bytes:
    return _line({"type": "user", "uuid": uuid, "timestamp": _iso(t), "message": {"role": "user", "content": text}})


def _asst(uuid: str, msg_id: str, blocks: list[dict[str, Any]], t: float, context: int | None = None,
          output: int = 10) -> bytes:  # fmt: skip
    msg: dict[str, Any] = {"id": msg_id, "model": "claude-opus-5-5", "role": "assistant", "content": blocks}
    if context is not None:
        msg["usage"] = {"input_tokens": 1, "cache_creation_input_tokens": 0,
                        "cache_read_input_tokens": context - 1, "output_tokens": output}  # fmt: skip
    return _line({"type": "assistant", "uuid": uuid, "timestamp": _iso(t), "isSidechain": False, "message": msg})


def _text(uuid: str, text: str, t: float, context: int | None = None) -> bytes:
    return _asst(uuid, f"m_{uuid}", [{"type": "text", "text": text}], t, context)


def _tool(tid: str, name: str, inp: dict[str, Any], result: str, t: float, *, is_error: bool = False,
          context: int | None = None) -> bytes:  # fmt: skip
    return _asst(f"a_{tid}", f"m_{tid}", [{"type": "tool_use", "id": tid, "name": name, "input": inp}], t, context) + _line(
        {
            "type": "user",
            "uuid": f"r_{tid}",
            "timestamp": _iso(t + 0.5),
            "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": result,
                                                      "is_error": is_error}]},  # fmt: skip
        }
    )


def _skill(name: str, tokens: int, t: float) -> bytes:
    head = f"Base directory for this skill: /skills/{name}\n\n# {name}\n"
    body = head + "x" * max(0, tokens * 4 - len(head))
    assert estimate_tokens(body) == tokens
    return _line(
        {"type": "user", "uuid": f"c_{name}_{t}", "timestamp": _iso(t),
         "message": {"role": "user", "content": f"<command-name>/{name}</command-name>"}}  # fmt: skip
    ) + _line(
        {"type": "user", "uuid": f"b_{name}_{t}", "timestamp": _iso(t), "isMeta": True,
         "message": {"role": "user", "content": [{"type": "text", "text": body}]}}  # fmt: skip
    )


def _attachment(att: dict[str, Any], t: float, rendered: str | None = None, uuid: str = "att") -> bytes:
    rec: dict[str, Any] = {"type": "attachment", "uuid": uuid, "timestamp": _iso(t), "attachment": att}
    if rendered is not None:
        rec["rendered"] = [{"content": rendered}]
    return _line(rec)


def _hook_ctx(text: str, t: float, event: str = "SessionStart") -> bytes:
    return _attachment({"type": "hook_additional_context", "content": [text], "hookName": event,
                        "hookEvent": event}, t, f"<system-reminder>\n{event} hook additional context: {text}\n"
                       "</system-reminder>")  # fmt: skip


def _boundary(uuid: str, pre: int, post: int, t: float, trigger: str = "auto") -> bytes:
    return _line({"type": "system", "subtype": "compact_boundary", "uuid": uuid, "timestamp": _iso(t),
                  "compactMetadata": {"trigger": trigger, "preTokens": pre, "postTokens": post}})  # fmt: skip


def _summary(uuid: str, text: str, t: float) -> bytes:
    return _line({"type": "user", "uuid": uuid, "timestamp": _iso(t), "isCompactSummary": True,
                  "message": {"role": "user", "content": text}})  # fmt: skip


def _fold(data: bytes, acc: A.Accounting | None = None, **kw: Any) -> A.Accounting:
    return A.fold(acc or A.Accounting(project_root=ROOT), _whole(data), **kw)


def _rows(rep: dict[str, Any]) -> dict[tuple[str, str], tuple[int, int]]:
    return {(r["kind"], r["name"]): (r["tokens"], r["items"]) for r in rep["rows"]}


# --------------------------------------------------------------------------- real fixtures

FIXTURES = ["autocompact", "chain_all", "interactive", "p_tools", "extras"]


@pytest.mark.parametrize("run", FIXTURES)
def test_fixture_rows_add_up_to_the_measured_context(run: str) -> None:
    """The rows sum to the measured window (last usage input + cache + output) and system is the first
    request's size minus the estimates of what preceded it."""
    d = _whole(_main_transcript(run).read_bytes())
    acc = A.fold(A.Accounting(), d)
    rep = A.report(acc)
    last = d.last_usage
    assert last is not None
    assert (rep["measured"], rep["overshoot"]) == (True, 0)
    assert rep["total"] == rep["context_tokens"] == last.context_tokens + last.output_tokens
    assert sum(r["tokens"] for r in rep["rows"]) == rep["total"]
    m = d.first_usage_marks
    assert m is not None and d.first_usage is not None
    before = (
        sum(e.tokens for e in d.elements[: m.elements])
        + sum(i.tokens for i in d.injected[: m.injected])
        + sum(x.tokens for x in d.instructions[: m.instructions])
        + (d.listings[m.listings - 1].tokens if m.listings else 0)
    )
    assert acc.first_context == d.first_usage.context_tokens
    assert acc.system == d.first_usage.context_tokens - before
    assert [r["tokens"] for r in rep["rows"]] == sorted((r["tokens"] for r in rep["rows"]), reverse=True)


def test_autocompact_fixture_figures() -> None:
    """runs/autocompact: first request 12,641; after the auto compaction only the summary, the hook
    context, the listing and the one reply remain; removed = 195,047 - 2,670."""
    acc = A.fold(A.Accounting(), _whole(_main_transcript("autocompact").read_bytes()))
    rep = A.report(acc)
    assert (acc.first_context, acc.system) == (12_641, 12_599)
    assert rep["removed"]["compactions"] == 1 and rep["removed"]["tokens"] == 195_047 - 2_670 == 192_377
    last = rep["removed"]["last"]
    assert (last["trigger"], last["pre_tokens"], last["post_tokens"], last["removed"], last["after"]) == (
        "auto", 195_047, 2_670, 192_377, 12_904
    )
    assert {k for k, _ in _rows(rep)} == {"system", "compact_summary", "hook_context", "skill_listing", "conversation"}
    assert acc.tools == {} and acc.file_reads == A.Tally() and acc.thinking == A.Tally()
    assert (acc.summary.items, acc.hook_others.items, acc.conversation.items) == (1, 1, 1)
    assert rep["total"] == 12_904 + 11


@pytest.mark.parametrize(("run", "pre", "post"), [("chain_all", 14_281, 2_766), ("interactive", 15_761, 3_119)])
def test_manual_compact_fixtures_removed_and_reattached_file(run: str, pre: int, post: int) -> None:
    """runs/chain_all, interactive: /compact removed pre - post; tool rows reset; the file Claude Code
    re-attached after the boundary is the only file read counted."""
    acc = A.fold(A.Accounting(), _whole(_main_transcript(run).read_bytes()))
    assert (acc.compactions, acc.removed_tokens) == (1, pre - post)
    assert acc.history[-1].trigger == "manual"
    assert acc.tools == {}
    assert acc.file_reads.items == 1 and list(acc.files) == [p for p in acc.files if p.endswith("/auth.py")]


def test_p_tools_fixture_tool_rows() -> None:
    """runs/p_tools: one row per tool; Read is a file read, not a tool row; a failed Grep is a Grep row."""
    rep = A.report(A.fold(A.Accounting(), _whole(_main_transcript("p_tools").read_bytes())))
    rows = _rows(rep)
    assert {n for k, n in rows if k == "tool"} == {"Bash", "Write", "Edit", "Grep", "Agent", "task-notification"}
    assert rows[("tool", "Bash")][1] == 4 and rows[("file_reads", "Read results and re-attached files")][1] == 1
    assert ("tool", "Read") not in rows


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_incremental_fold_equals_whole_fold(seed: int) -> None:
    """Folding deltas of a file that grows in random steps gives the same accounting report and
    survival simulation as one whole feed."""
    rng = random.Random(seed)
    for run in FIXTURES:
        data = _main_transcript(run).read_bytes()
        whole = A.fold(A.Accounting(), _whole(data))
        cuts = sorted(rng.sample(range(1, len(data)), 25))
        cursor, acc = TranscriptCursor(), A.Accounting()
        for end in [*cuts, len(data)]:
            cursor, d = feed(cursor, data[cursor.offset : end], final=end == len(data))
            acc = A.fold(acc, d)
        assert A.report(acc) == A.report(whole), run
        assert simulate(**A.survival_inputs(acc)) == simulate(**A.survival_inputs(whole)), run


def test_state_round_trips_through_msgspec() -> None:
    """The accounting state is msgspec-serialisable (JSON and msgpack) without loss."""
    acc = A.fold(A.Accounting(), _whole(_main_transcript("interactive").read_bytes()))
    acc = A.note_injected(A.note_instructions(acc, "/p/CLAUDE.md", "Project", "compact", 50, T0), "ctxlifed: x", T0)
    assert msgspec.json.decode(msgspec.json.encode(acc), type=A.Accounting) == acc
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(acc), type=A.Accounting) == acc


# --------------------------------------------------------------------------- constructed transcripts


def test_system_is_first_request_minus_what_preceded_it() -> None:
    """system = first usage context - (hook context + instructions + listing + prompt) estimates."""
    listing = "<system-reminder>skills: " + "d" * 396 + "</system-reminder>"
    data = (
        _hook_ctx("SESSION-MARKER", 0)
        + _attachment({"type": "skill_listing", "content": "x", "skillCount": 3, "isInitial": True}, 1, listing)
        + _attachment({"type": "instructions", "files": [{"path": f"{ROOT}/CLAUDE.md", "type": "Project",
                                                           "content": "Always X. " * 40}]}, 2, "r")  # fmt: skip
        + _prompt("p1", "Add refresh tokens", 3)
        + _text("a1", "Sure.", 4, context=10_000)
    )
    d = _whole(data)
    acc = A.fold(A.Accounting(project_root=ROOT), d)
    before = d.injected[0].tokens + d.listings[0].tokens + d.instructions[0].tokens + d.elements[0].tokens
    assert acc.system == 10_000 - before
    rows = _rows(A.report(acc))
    assert rows[("instructions", "CLAUDE.md, rules, memory")] == (d.instructions[0].tokens, 1)
    assert rows[("skill_listing", "skill names and descriptions")] == (estimate_tokens(listing), 3)
    assert acc.instructions[f"{ROOT}/CLAUDE.md"].kind == "root"


def test_eight_skills_then_compaction_keeps_six_reattached() -> None:
    """8 skills of 4,000 tokens, then /compact: the 6 newest stay as re-attached rows, the 2 oldest are
    recorded as dropped by that compaction."""
    data = _prompt("p", "go", 0) + b"".join(_skill(f"s{i}", 4000, 10 + i) for i in range(8))
    data += _text("a", "done", 30, context=40_000)
    acc = _fold(data)
    assert {n: (r.tokens, r.reattached) for n, r in acc.skills.items()} == {f"s{i}": (4000, False) for i in range(8)}
    acc = _fold(_boundary("b1", 45_000, 3_000, 40) + _summary("s", "Summary of the work.", 40.5), acc)
    assert {n: (r.tokens, r.reattached) for n, r in acc.skills.items()} == {f"s{i}": (4000, True) for i in range(2, 8)}
    assert acc.history[-1].dropped == ["skill s0", "skill s1"]
    rows = [r for r in A.report(acc)["rows"] if r["kind"] == "skill"]
    assert [(r["name"], r["tokens"], r["basis"]) for r in rows] == [
        (f"s{i}", 4000, "re-attached after compaction (cut)") for i in range(2, 8)
    ]
    assert sum(r["tokens"] for r in rows) == 24_000


def test_big_skill_is_reattached_cut_and_a_new_body_replaces_the_copy() -> None:
    """A 9,000-token skill comes back at 5,000; invoking it again after the boundary replaces that copy."""
    acc = _fold(_skill("big", 9000, 1) + _skill("big", 9000, 2))
    assert (acc.skills["big"].tokens, acc.skills["big"].copies) == (18_000, 2)
    acc = _fold(_boundary("b", 30_000, 2_000, 5), acc)
    assert (acc.skills["big"].tokens, acc.skills["big"].last_tokens, acc.skills["big"].reattached) == (5000, 9000, True)
    acc = _fold(_skill("big", 9000, 10), acc)
    assert (acc.skills["big"].tokens, acc.skills["big"].copies, acc.skills["big"].reattached) == (9000, 1, False)


def test_boundary_inside_a_delta_splits_it_by_file_order() -> None:
    """Entries before a boundary in the same delta are dropped, entries after it count, whatever the
    timestamps say (the summary is stamped before the boundary, as in the fixtures)."""
    data = (
        _prompt("p1", "before " * 50, 0)
        + _tool("t1", "Bash", {"command": "ls"}, "out " * 400, 1)
        + _boundary("b", 5000, 500, 10)
        + _summary("s", "The summary text.", 9.9)
        + _prompt("p2", "after", 11)
    )
    acc = _fold(data)
    assert acc.tools == {}
    assert (acc.conversation.items, acc.conversation.tokens) == (1, estimate_tokens("after"))
    assert acc.summary.items == 1 and acc.compactions == 1


def test_read_is_counted_once_and_a_failed_read_is_a_tool_output() -> None:
    """A Read yields an element and a file touch: it is counted once, under file_reads; a failed Read is
    a Read tool row."""
    data = _tool("r1", "Read", {"file_path": f"{ROOT}/a.py"}, "1\tx = 1\n" * 100, 1) + _tool(
        "r2", "Read", {"file_path": f"{ROOT}/missing.py"}, "File does not exist.", 2, is_error=True
    )
    acc = _fold(data)
    d = _whole(data)
    assert acc.file_reads == A.Tally(d.file_reads[0].tokens, 1)
    assert list(acc.tools) == ["Read"] and acc.tools["Read"].items == 1
    assert acc.largest[0].label == "Read a.py"


def test_skill_listing_full_replaces_incremental_adds() -> None:
    """A full (isInitial) listing replaces the earlier one; an incremental listing adds to it."""
    full = _attachment({"type": "skill_listing", "skillCount": 10, "isInitial": True}, 1, "a" * 400)
    inc = _attachment({"type": "skill_listing", "skillCount": 1, "isInitial": False}, 2, "b" * 40)
    acc = _fold(full + inc)
    assert acc.listing == A.Tally(110, 11)
    acc = _fold(_boundary("b", 1, 1, 3) + full, acc)
    assert acc.listing == A.Tally(100, 10)


def test_instructions_dedupe_and_survive_by_kind() -> None:
    """One entry per path; at compaction root and unscoped rules stay, path rules and nested go; the
    re-load on compaction replaces, never adds."""
    acc = A.Accounting(project_root=ROOT)
    acc = A.note_instructions(acc, f"{ROOT}/CLAUDE.md", "Project", "session_start", 1800, T0)
    acc = A.note_instructions(acc, f"{ROOT}/.claude/rules/style.md", "Project", "session_start", 200, T0)
    acc = A.note_instructions(acc, f"{ROOT}/.claude/rules/api.md", "Project", "path_glob_match", 380, T0 + 1)
    acc = A.note_instructions(acc, f"{ROOT}/src/CLAUDE.md", "Project", "nested_traversal", 90, T0 + 2)
    acc = A.note_instructions(acc, f"{ROOT}/CLAUDE.md", "Project", "session_start", 1800, T0 + 3)
    assert sum(r.tokens for r in acc.instructions.values()) == 1800 + 200 + 380 + 90
    acc = A.at_boundary(acc, CompactBoundary("b", T0 + 10, "manual", 9000, 900))
    assert {p: r.kind for p, r in acc.instructions.items()} == {
        f"{ROOT}/CLAUDE.md": "root",
        f"{ROOT}/.claude/rules/style.md": "unscoped_rule",
    }
    assert acc.history[-1].dropped == [".claude/rules/api.md", "src/CLAUDE.md"]
    acc = A.note_instructions(acc, f"{ROOT}/CLAUDE.md", "Project", "compact", 1850, T0 + 11)
    assert _rows(A.report(acc))[("instructions", "CLAUDE.md, rules, memory")] == (2050, 2)


def test_transcript_instructions_attachment_keeps_the_hook_kind() -> None:
    """An instructions attachment for a path InstructionsLoaded already reported updates its tokens and
    keeps the kind the hook's load_reason gave."""
    acc = A.note_instructions(A.Accounting(project_root=ROOT), f"{ROOT}/.claude/rules/api.md", "Project",
                              "path_glob_match", 999, T0)  # fmt: skip
    att = {"type": "instructions", "files": [{"path": f"{ROOT}/.claude/rules/api.md", "type": "Project", "content": "API."}]}
    acc = _fold(_attachment(att, 1, "r"), acc)
    row = acc.instructions[f"{ROOT}/.claude/rules/api.md"]
    assert (row.kind, row.tokens) == ("path_rule", estimate_tokens(f"Contents of {ROOT}/.claude/rules/api.md:\n\nAPI."))


def test_hook_context_ours_and_others() -> None:
    """ctxlifed's noted injection is counted once even when the transcript shows it; text starting with
    'ctxlifed' is ours by default; other hooks are 'other hooks'; a custom predicate can decide."""
    mine = "Phase: design. Unresolved items (2): ..."
    acc = A.note_injected(A.Accounting(), mine, T0 + 1)
    assert _rows(A.report(acc))[("hook_context", "ctxlifed")][1] == 1
    data = _hook_ctx(mine, 1) + _hook_ctx("ctxlifed memory for this session.", 2) + _hook_ctx("OTHER-PLUGIN", 3)
    acc = _fold(data, acc)
    assert (acc.hook_ours.items, acc.hook_others.items, acc.ours_pending) == (2, 1, [])
    rows = _rows(A.report(acc))
    assert rows[("hook_context", "ctxlifed")][1] == 2 and rows[("hook_context", "other hooks")][1] == 1
    acc2 = _fold(data, ours=lambda t: "OTHER" in t)
    assert (acc2.hook_ours.items, acc2.hook_others.items) == (1, 2)


def test_noted_injection_survives_a_boundary_only_if_newer() -> None:
    """A noted ctxlifed injection newer than the boundary (SessionStart compact) stays; an older one goes."""
    acc = A.note_injected(A.Accounting(), "ctxlifed: old", T0 + 5)
    acc = A.note_injected(acc, "ctxlifed: new", T0 + 20)
    acc = _fold(_boundary("b", 100, 10, 10), acc)
    assert [o.ts for o in acc.ours_pending] == [T0 + 20]


def test_at_boundary_is_idempotent_per_uuid() -> None:
    """The same boundary applied twice (hook and transcript, or a re-read) counts once."""
    b = CompactBoundary("b1", T0, "auto", 1000, 100)
    acc = A.at_boundary(A.at_boundary(A.Accounting(), b), b)
    acc = _fold(_boundary("b1", 1000, 100, 0), acc)
    assert (acc.compactions, acc.removed_tokens) == (1, 900)
    acc = A.at_boundary(acc, CompactBoundary("b2", T0 + 1, "manual", None, None))
    assert (acc.compactions, acc.removed_tokens, acc.history[-1].removed) == (2, 900, None)


def test_fold_does_not_change_its_argument() -> None:
    """fold / note_* / at_boundary return new values; the input state is untouched."""
    acc = _fold(_prompt("p", "hello", 0) + _tool("t", "Bash", {"command": "ls"}, "x", 1))
    frozen = msgspec.json.encode(acc)
    A.fold(acc, _whole(_tool("t2", "Bash", {"command": "pwd"}, "y", 2) + _boundary("b", 9, 1, 3)))
    A.note_instructions(acc, "/p/CLAUDE.md", "Project", "session_start", 5, T0)
    A.note_injected(acc, "ctxlifed: hi", T0)
    A.at_boundary(acc, CompactBoundary("b", T0, "auto", 9, 1))
    assert msgspec.json.encode(acc) == frozen


def test_state_is_bounded() -> None:
    """Hundreds of tools, skills, files, boundaries and injections keep every collection bounded."""
    data = b"".join(_tool(f"t{i}", f"Tool{i}", {"q": i}, "r", i) for i in range(100))
    data += b"".join(_skill(f"k{i}", 20, 200 + i) for i in range(100))
    data += b"".join(_tool(f"r{i}", "Read", {"file_path": f"/p/{i}.py"}, "z", 400 + i) for i in range(100))
    acc = _fold(data)
    for i in range(50):
        acc = A.note_injected(acc, f"ctxlifed: {i}", T0 + 1000 + i)
    assert len(acc.tools) == A.MAX_TOOLS + 1 and A.OTHER_TOOLS in acc.tools
    assert (len(acc.skills), len(acc.files), len(acc.largest), len(acc.ours_pending)) == (64, 64, 10, 16)
    assert sum(t.items for t in acc.tools.values()) == 100
    for i in range(40):
        acc = A.at_boundary(acc, CompactBoundary(f"b{i}", T0 + 2000 + i, "auto", 10, 5))
    assert (len(acc.history), len(acc.seen_boundaries), acc.compactions) == (8, 16, 40)


# --------------------------------------------------------------------------- report


def test_report_without_a_measurement_is_all_estimates() -> None:
    """Before the first usage: no system row, the conversation is its estimate, and the note says so."""
    rep = A.report(_fold(_prompt("p", "hello there", 0)))
    assert rep["measured"] is False and rep["context_tokens"] is None
    assert rep["rows"] == [
        {"kind": "conversation", "name": "prompts and assistant text", "tokens": estimate_tokens("hello there"),
         "items": 1, "estimated": True, "basis": "estimate"}  # fmt: skip
    ]
    assert rep["notes"] == ["system prompt and tools: unknown until the first response is in the transcript"]


def test_report_after_boundary_until_next_response_is_unmeasured() -> None:
    """postTokens leaves out the system prompt: right after a boundary the report is not reconciled."""
    acc = _fold(_prompt("p", "x", 0) + _text("a", "y", 1, context=5000) + _boundary("b", 5010, 300, 2))
    assert A.measured_total(acc) is None and A.report(acc)["measured"] is False
    assert acc.history[-1].after is None
    acc = _fold(_text("a2", "z", 3, context=5200), acc)
    assert A.measured_total(acc) == 5210 and A.report(acc)["total"] == 5210
    assert acc.history[-1].after == 5200


def test_report_overshoot_when_estimates_exceed_the_measurement() -> None:
    """A given size below the estimates: the conversation row is 0 and the excess is reported."""
    acc = _fold(_prompt("p", "x", 0) + _text("a", "y", 1, context=1000) + _tool("t", "Bash", {"command": "c"}, "o" * 4000, 2))
    rep = A.report(acc, context_tokens=1000)
    conv = next(r for r in rep["rows"] if r["kind"] == "conversation")
    assert conv["tokens"] == 0 and rep["overshoot"] > 0 and rep["total"] == 1000 + rep["overshoot"]
    assert rep["notes"][-1] == f"the estimates exceed the measured context by {rep['overshoot']:,} tokens"


def test_render_where_table() -> None:
    """The --where table lists every row, the total, the largest items and what compaction removed."""
    acc = A.fold(A.Accounting(), _whole(_main_transcript("autocompact").read_bytes()))
    text = A.render_where(A.report(acc))
    lines = text.splitlines()
    assert lines[0].split() == ["kind", "name", "tokens", "items", "basis"]
    assert lines[1].startswith("system ") and "12,599" in lines[1]
    assert any(ln.startswith("total ") and ln.rstrip().endswith("12,915") for ln in lines)
    assert "Largest items:" in lines
    assert "Removed by compaction: 1 compaction, 192,377 tokens (last: auto, 195,047 -> 2,670 tokens)" in lines
    assert A.render_where(A.report(acc)) == text


# --------------------------------------------------------------------------- transcript extension used here


def test_transcript_marks_instructions_and_listings() -> None:
    """The parser's additive fields: instructions / skill_listing attachments, and marks taken at each
    boundary and at the chunk's first usage (before that response's own blocks)."""
    att = {"type": "instructions", "files": [{"path": "/p/CLAUDE.md", "type": "Project", "content": "Rule."},
                                             {"path": "/p/.claude/rules/a.md", "type": "Project", "content": "A."}]}  # fmt: skip
    data = (
        _prompt("p", "hi", 0)
        + _attachment(att, 1, "r")
        + _attachment({"type": "skill_listing", "content": "c" * 80, "skillCount": 2, "isInitial": False}, 2)
        + _text("a", "hello", 3, context=900)
        + _boundary("b", 1000, 100, 4)
        + _prompt("p2", "again", 5)
    )
    d = _whole(data)
    assert [(x.path, x.memory_type, x.tokens) for x in d.instructions] == [
        ("/p/CLAUDE.md", "Project", estimate_tokens("Contents of /p/CLAUDE.md:\n\nRule.")),
        ("/p/.claude/rules/a.md", "Project", estimate_tokens("Contents of /p/.claude/rules/a.md:\n\nA.")),
    ]
    assert [(x.kind, x.tokens, x.initial, x.count) for x in d.listings] == [("skill_listing", 20, False, 2)]
    assert d.first_usage_marks == Marks(elements=1, usages=0, injected=0, skills=0, file_reads=0, instructions=2,
                                          listings=1)  # fmt: skip
    assert d.boundary_marks == [Marks(elements=2, usages=1, injected=0, skills=0, file_reads=0, instructions=2,
                                        listings=1)]  # fmt: skip


def test_first_usage_after_a_boundary_in_the_same_delta() -> None:
    """A boundary read before the first usage is applied first; system is measured after it."""
    data = _prompt("p", "old " * 100, 0) + _boundary("b", 500, 50, 1) + _prompt("p2", "new", 2)
    data += _text("a", "ok", 3, context=2000)
    acc = _fold(data)
    assert acc.compactions == 1 and acc.system == 2000 - estimate_tokens("new")
    assert acc.history[-1].after == 2000


def test_delta_without_marks_applies_boundaries_first() -> None:
    """A hand-built delta (no marks): its boundaries come before all its entries."""
    d = _whole(_prompt("p", "kept", 1))
    d.boundaries = [CompactBoundary("b", T0, "auto", 10, 5)]
    acc = A.fold(A.Accounting(), d)
    assert (acc.compactions, acc.conversation.items) == (1, 1)


def test_extras_fixture_instructions_loaded_and_attachment_count_once() -> None:
    """runs/extras: the InstructionsLoaded event and the transcript's instructions attachment for the
    same CLAUDE.md are one instruction row of kind root."""
    hooks = RUNS / "extras" / "hooks.jsonl"
    if not hooks.exists():
        pytest.skip("fixtures not available")
    ev = [json.loads(ln) for ln in hooks.read_text().splitlines() if '"InstructionsLoaded"' in ln]
    p = next(e["payload"] for e in ev if e.get("payload", {}).get("hook_event_name") == "InstructionsLoaded")
    acc = A.Accounting(project_root=p["cwd"])
    acc = A.note_instructions(acc, p["file_path"], p["memory_type"], p["load_reason"], 12, ev[0]["t_start"])
    acc = A.fold(acc, _whole(_main_transcript("extras").read_bytes()))
    assert [(r.path, r.kind, r.load_reason) for r in acc.instructions.values()] == [
        ("/home/dev/exp/extras/project/CLAUDE.md", "root", "session_start")
    ]
    rows = _rows(A.report(acc))
    assert rows[("instructions", "CLAUDE.md, rules, memory")][1] == 1
