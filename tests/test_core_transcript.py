"""Tests for ctxlifed.core.transcript: the incremental, pure transcript parser."""

from __future__ import annotations

import ast
import json
import random
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from ctxlifed.core import transcript as tr
from ctxlifed.core.model import Kind, Usage, estimate_tokens
from ctxlifed.core.transcript import (
    MAX_PENDING,
    MAX_TEXT,
    TranscriptCursor,
    TranscriptDelta,
    context_after,
    feed,
    is_test_command,
)

RUNS = Path(__file__).resolve().parent / "fixtures" / "claude-code" / "runs"
SRC = Path(__file__).resolve().parents[1] / "src" / "ctxlifed" / "core"

pytestmark = pytest.mark.filterwarnings("error")


def _main_transcript(run: str) -> Path:
    """The session transcript of a fixture run (the largest top-level .jsonl)."""
    files = sorted(RUNS.glob(f"{run}/transcripts/*/*.jsonl"), key=lambda p: p.stat().st_size)
    if not files:
        pytest.skip(f"fixture run {run!r} not available")
    return files[-1]


def _all_transcripts() -> list[Path]:
    return sorted(RUNS.glob("*/transcripts/**/*.jsonl"))


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def _line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def _whole(data: bytes) -> tuple[TranscriptCursor, TranscriptDelta]:
    return feed(TranscriptCursor(), data, final=True)


class _Fold:
    """Accumulates deltas the way a consumer would (usages merged by message id, last wins)."""

    def __init__(self) -> None:
        self.elements: list[Any] = []
        self.usages: dict[str, Usage] = {}
        self.first_usage: Usage | None = None
        self.last_usage: Usage | None = None
        self.model: str | None = None
        self.boundaries: list[Any] = []
        self.summaries: list[str] = []
        self.injected: list[Any] = []
        self.skills: list[Any] = []
        self.files: list[Any] = []
        self.skipped = 0
        self.context: int | None = None

    def add(self, d: TranscriptDelta) -> None:
        self.elements += d.elements
        for u in d.usages:
            self.usages[u.message_id] = u
        if self.first_usage is None and d.first_usage is not None:
            self.first_usage = d.first_usage
        self.last_usage = d.last_usage or self.last_usage
        self.model = d.model or self.model
        self.boundaries += d.boundaries
        self.summaries += d.compact_summaries
        self.injected += d.injected
        self.skills += d.skills
        self.files += d.file_reads
        self.skipped += d.skipped
        self.context = context_after(d, self.context)

    def key(self) -> tuple[Any, ...]:
        first = self.first_usage
        return (
            self.elements,
            list(self.usages.values()),
            (first.message_id, first.context_tokens) if first else None,
            self.last_usage,
            self.model,
            self.boundaries,
            self.summaries,
            self.injected,
            self.skills,
            self.files,
            self.skipped,
            self.context,
        )


def _grow(data: bytes, cuts: Iterable[int], max_line: int = 4 << 20) -> tuple[TranscriptCursor, _Fold]:
    """Simulate a file that grows to each cut in turn; each call gets the bytes from cursor.offset."""
    cursor, fold = TranscriptCursor(), _Fold()
    for end in cuts:
        cursor, d = feed(cursor, data[cursor.offset : end], max_line=max_line)
        fold.add(d)
    cursor, d = feed(cursor, data[cursor.offset :], final=True, max_line=max_line)
    fold.add(d)
    return cursor, fold


# --------------------------------------------------------------------------- real fixtures


def test_autocompact_boundary_and_context_after() -> None:
    """runs/autocompact: auto boundary 195047 -> 2670; context follows it, then the next usage."""
    path = _main_transcript("autocompact")
    data = path.read_bytes()
    cursor, d = _whole(data)
    assert cursor.offset == len(data) and d.skipped == 0
    assert [(b.trigger, b.pre_tokens, b.post_tokens) for b in d.boundaries] == [("auto", 195047, 2670)]
    assert d.boundaries[0].uuid == "82f02fb2-3ad1-4ead-b172-661d35f92ff7"
    assert any("AUTO-COMPACT-SUMMARY-MARKER" in s for s in d.compact_summaries)
    assert sum(e.kind is Kind.COMPACT_SUMMARY for e in d.elements) == 1

    lines = data.splitlines(keepends=True)
    at = next(i for i, ln in enumerate(lines) if b'"compact_boundary"' in ln)
    before, d1 = feed(TranscriptCursor(), b"".join(lines[:at]))
    assert context_after(d1, None) == 5000 + 0 + 190000  # last pre-compaction response
    _, d2 = feed(before, b"".join(lines[at : at + 1]))
    assert context_after(d2, context_after(d1, None)) == 2670  # stale usage replaced by postTokens
    _, d3 = feed(before, b"".join(lines[at:]))
    assert d3.boundaries and not d3.compacted_last
    assert context_after(d3, 2670) == 1 + 0 + 12903  # first response after compaction
    assert context_after(d, None) == 12904


def test_chain_all_usage_dedup_by_message_id() -> None:
    """runs/chain_all: 13 main-chain assistant records from 11 responses -> 11 usages, last record per id."""
    path = _main_transcript("chain_all")
    records = _records(path)
    asst = [
        r
        for r in records
        if r.get("type") == "assistant"
        and not r.get("isSidechain")
        and r["message"]["model"] != "<synthetic>"
    ]
    ids = list(dict.fromkeys(r["message"]["id"] for r in asst))
    assert (len(asst), len(ids)) == (13, 11)
    _, d = _whole(path.read_bytes())
    assert [u.message_id for u in d.usages] == ids
    last = asst[-1]["message"]["usage"]
    assert d.last_usage is not None and d.last_usage.message_id == asst[-1]["message"]["id"]
    assert d.last_usage.context_tokens == (
        last["input_tokens"] + last["cache_creation_input_tokens"] + last["cache_read_input_tokens"]
    )
    assert d.first_usage is not None and d.first_usage.message_id == ids[0]
    assert d.first_usage.context_tokens == 1263 + 11375 + 0 == 12638
    assert d.model == "claude-opus-5-5"


def test_interactive_sum_rule_matches_pre_tokens() -> None:
    """runs/interactive: preTokens = input + cache creation + cache read + output of the last usage."""
    path = _main_transcript("interactive")
    data = path.read_bytes()
    lines = data.splitlines(keepends=True)
    at = next(i for i, ln in enumerate(lines) if b'"compact_boundary"' in ln)
    _, before = feed(TranscriptCursor(), b"".join(lines[:at]))
    u = before.last_usage
    assert u is not None
    assert (u.input_tokens, u.cache_creation_input_tokens, u.cache_read_input_tokens, u.output_tokens) == (
        37,
        336,
        15383,
        5,
    )
    _, whole = _whole(data)
    assert whole.boundaries[0].pre_tokens == u.context_tokens + u.output_tokens == 15761


def test_p_tools_elements() -> None:
    """runs/p_tools: one element per tool call, kinds by tool / outcome, file touches for Read/Write/Edit."""
    path = _main_transcript("p_tools")
    _, d = _whole(path.read_bytes())
    tools = [(e.tool, e.kind) for e in d.elements if e.uid.startswith("toolu_")]
    assert tools == [
        ("Bash", Kind.TOOL),
        ("Write", Kind.CODE_CHANGE),
        ("Read", Kind.TOOL),
        ("Edit", Kind.CODE_CHANGE),
        ("Grep", Kind.ERROR),
        ("Bash", Kind.ERROR),  # "Exit code 3"
        ("Bash", Kind.TOOL),
        ("Bash", Kind.TOOL),
        ("Agent", Kind.TOOL),
    ]
    by_tool = {e.tool: e for e in d.elements if e.tool in ("Write", "Edit", "Read")}
    assert by_tool["Edit"].text.startswith("Edit: /home/dev/exp/p_tools/project/auth.py\n@@ -1,2 +1,2 @@")
    assert "+    return user in ('admin', 'root')" in by_tool["Edit"].text
    assert "def login(user):" in by_tool["Write"].text
    assert by_tool["Read"].file_path == "/home/dev/exp/p_tools/project/auth.py"
    failed = [e for e in d.elements if e.tool == "Bash" and e.is_error]
    assert len(failed) == 1 and failed[0].command == "grep -n login auth.py && exit 3"
    assert failed[0].text == "Bash: grep -n login auth.py && exit 3\nExit code 3\n1:def login(user):"
    assert [(f.op, f.path.rsplit("/", 1)[-1]) for f in d.file_reads] == [
        ("write", "auth.py"),
        ("read", "auth.py"),
        ("edit", "auth.py"),
    ]
    kinds = {e.kind for e in d.elements}
    assert {Kind.PROMPT, Kind.ASSISTANT} <= kinds
    assert all(e.tokens > 0 and e.ts > 1.7e9 for e in d.elements)


def test_perm_default_failed_file_tools_are_errors_without_file_touch() -> None:
    """runs/perm_default: refused Write / missing-file Read and Edit are ERROR and touch no file."""
    _, d = _whole(_main_transcript("perm_default").read_bytes())
    file_elems = [e for e in d.elements if e.tool in ("Write", "Read", "Edit")]
    assert [e.kind for e in file_elems] == [Kind.ERROR] * 3
    assert all(e.is_error for e in file_elems)
    assert d.file_reads == []


@pytest.mark.parametrize(
    ("run", "expected"),
    [
        (
            "hooks_plaintext",
            [
                ("SessionStart", "plain text SESSIONSTART-PLAIN", "stdout"),
                ("UserPromptSubmit", "plain text UPS-PLAIN", "stdout"),
            ],
        ),
        (
            "hooks_json_decisions",
            [
                ("SessionStart", "SS-CTX-MARKER", "additional_context"),
                ("UserPromptSubmit", "UPS-CTX-MARKER", "additional_context"),
            ],
        ),
        (
            "chain_all",
            [
                ("SessionStart", "SESSIONSTART-MARKER-startup-5eb8d0b8", "additional_context"),
                ("SessionStart", "SESSIONSTART-MARKER-resume-5eb8d0b8", "additional_context"),
                ("SessionStart", "SESSIONSTART-MARKER-compact-5eb8d0b8", "additional_context"),
            ],
        ),
    ],
)
def test_hook_injections(run: str, expected: list[tuple[str, str, str]]) -> None:
    """Hook context that reached the window is reported with its event, text and a token estimate."""
    _, d = _whole(_main_transcript(run).read_bytes())
    assert [(i.hook_event, i.text, i.source) for i in d.injected] == expected
    assert all(i.tokens > 0 for i in d.injected)


def test_chain_all_compact_flow_elements() -> None:
    """runs/chain_all: /compact records (caveat, command, stdout) are not prompts; summary is one element."""
    _, d = _whole(_main_transcript("chain_all").read_bytes())
    prompts = [e.text for e in d.elements if e.kind is Kind.PROMPT]
    assert prompts == ["Work on auth.py", "What is next for auth?"]
    assert [e.tool for e in d.elements if not e.uid.startswith("toolu_") and e.kind is Kind.TOOL] == [
        "task-notification"
    ]
    assert len(d.compact_summaries) == 1 and d.compact_summaries[0].startswith(
        "This session is being continued"
    )
    assert [(b.trigger, b.pre_tokens, b.post_tokens) for b in d.boundaries] == [("manual", 14281, 2766)]
    # the post-compaction file re-read is reported as a read
    assert d.file_reads[-1].op == "read" and d.file_reads[-1].tokens > 0


def test_sidechain_file_is_ignored() -> None:
    """A subagent transcript (isSidechain: true) yields no element, usage or model."""
    sub = sorted(RUNS.glob("p_tools/transcripts/*/*/subagents/*.jsonl"))
    if not sub:
        pytest.skip("no subagent fixture")
    cursor, d = _whole(sub[0].read_bytes())
    assert cursor.offset == sub[0].stat().st_size
    assert (d.elements, d.last_usage, d.model, d.skipped) == ([], None, None, 0)


def test_api_error_synthetic_message() -> None:
    """runs/api_error: the <synthetic> API-error message is an ERROR element and gives no usage or model."""
    _, d = _whole(_main_transcript("api_error").read_bytes())
    errors = [e for e in d.elements if e.kind is Kind.ERROR]
    assert len(errors) == 1 and errors[0].text.startswith("API Error: 400")
    assert d.usages == [] and d.last_usage is None
    assert d.model == "claude-opus-5-5"  # from the model attachment, not "<synthetic>"


def test_every_fixture_parses_without_skips() -> None:
    """All real transcripts are consumed entirely with nothing skipped and a bounded cursor."""
    paths = _all_transcripts()
    if not paths:
        pytest.skip("fixtures not available")
    for p in paths:
        data = p.read_bytes()
        cursor, d = _whole(data)
        assert cursor.offset == len(data), p
        assert d.skipped == 0, p
        assert len(cursor.pending) <= MAX_PENDING


# --------------------------------------------------------------------------- incremental feeding


def test_byte_at_a_time_equals_whole_feed() -> None:
    """Feeding runs/chain_all as a file growing one byte at a time gives the same result as one feed."""
    data = _main_transcript("chain_all").read_bytes()
    whole = _Fold()
    cursor, d = _whole(data)
    whole.add(d)
    grown_cursor, grown = _grow(data, range(1, len(data) + 1))
    assert grown.key() == whole.key()
    assert grown_cursor == cursor


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_splits_equal_whole_feed_on_all_fixtures(seed: int) -> None:
    """Random growth points over every fixture give the same folded result and final cursor."""
    rng = random.Random(seed)
    paths = _all_transcripts()
    if not paths:
        pytest.skip("fixtures not available")
    for p in paths:
        data = p.read_bytes()
        whole = _Fold()
        cursor, d = _whole(data)
        whole.add(d)
        cuts = sorted(rng.sample(range(1, len(data)), k=min(40, len(data) - 1)))
        grown_cursor, grown = _grow(data, cuts)
        assert grown.key() == whole.key(), p
        assert grown_cursor == cursor, p


def test_truncated_last_line_is_not_consumed() -> None:
    """A trailing partial line stays unconsumed until it is completed or final=True."""
    a = _line({"type": "user", "uuid": "u1", "message": {"role": "user", "content": "first"}})
    b = _line({"type": "user", "uuid": "u2", "message": {"role": "user", "content": "second"}})
    data = a + b[:-5]
    c1, d1 = feed(TranscriptCursor(), data)
    assert c1.offset == len(a)
    assert [e.text for e in d1.elements] == ["first"]
    c2, d2 = feed(c1, data[c1.offset :])  # nothing new: same cursor, empty delta
    assert c2 == c1 and d2.elements == [] and d2.skipped == 0
    c3, d3 = feed(c1, (a + b)[c1.offset :])
    assert c3.offset == len(a + b) and [e.text for e in d3.elements] == ["second"]
    c4, d4 = feed(c1, data[c1.offset :], final=True)  # final: the partial line is tried and skipped
    assert c4.offset == len(data) and d4.skipped == 1
    c5, d5 = feed(c1, b[:-1], final=True)  # final: a complete record without its newline is used
    assert c5.offset == len(a) + len(b) - 1 and [e.text for e in d5.elements] == ["second"]


def test_empty_feed_returns_same_cursor() -> None:
    """Feeding no bytes changes nothing."""
    c = TranscriptCursor(offset=42)
    c2, d = feed(c, b"")
    assert c2 is c and d == TranscriptDelta()


@pytest.mark.parametrize(
    ("line", "skipped"),
    [
        (b"{not json", 1),
        (b"[1, 2, 3]", 1),
        (b'"just a string"', 1),
        (b"42", 1),
        (b"null", 1),
        (b'{"type": "brand-new-record-type"}', 1),
        (b'{"no_type": true}', 1),
        (b'{"type": "attachment", "attachment": 5}', 1),
        (b"", 0),
        (b"   \r", 0),
        (b'{"type": "queue-operation", "operation": "enqueue"}', 0),
        (b'{"type": "progress", "data": {}}', 0),
        (b'{"type": "system", "subtype": "turn_duration"}', 0),
        (b'{"type": "user", "message": "not an object"}', 0),
    ],
)
def test_garbage_lines_are_skipped_and_counted(line: bytes, skipped: int) -> None:
    """Bad or unknown lines never raise; they are consumed and counted (blank / known-ignored: not)."""
    good = _line({"type": "user", "uuid": "ok", "message": {"role": "user", "content": "still parsed"}})
    data = line + b"\n" + good
    cursor, d = feed(TranscriptCursor(), data)
    assert cursor.offset == len(data)
    assert d.skipped == skipped
    assert [e.text for e in d.elements] == ["still parsed"]


def test_invalid_utf8_is_replaced() -> None:
    """Invalid UTF-8 inside a record is decoded with U+FFFD instead of dropping the line."""
    raw = b'{"type":"user","uuid":"u","message":{"role":"user","content":"A\xff\xfeB"}}\n'
    _, d = feed(TranscriptCursor(), raw)
    assert d.skipped == 0 and d.elements[0].text == "A\ufffd\ufffdB"


def test_overlong_lines_are_skipped_with_bounded_memory() -> None:
    """Lines over max_line are consumed and counted, also when they arrive in pieces."""
    big = _line({"type": "user", "uuid": "big", "message": {"role": "user", "content": "x" * 500}})
    small = _line({"type": "user", "uuid": "s", "message": {"role": "user", "content": "small"}})
    data = small + big + small
    cursor, d = feed(TranscriptCursor(), data, max_line=200)
    assert cursor.offset == len(data) and d.skipped == 1 and len(d.elements) == 2
    # the same bytes arriving in 64-byte reads: the long partial line is dropped as it streams
    c, fold = TranscriptCursor(), _Fold()
    pos = 0
    while pos < len(data):
        pos = min(pos + 64, len(data))
        c, d = feed(c, data[c.offset : pos], max_line=200)
        assert pos - c.offset <= 200 + 64  # never holds more than one bounded partial line
        fold.add(d)
    assert c.offset == len(data) and not c.skipping
    assert fold.skipped == 1 and [e.uid for e in fold.elements] == ["s", "s"]


def test_overlong_partial_line_at_final() -> None:
    """An over-long unterminated tail is counted once when the file is final."""
    c, d = feed(TranscriptCursor(), b"y" * 300, max_line=100)
    assert c.skipping and c.offset == 300 and d.skipped == 0
    c, d = feed(c, b"y" * 10, final=True, max_line=100)
    assert not c.skipping and c.offset == 310 and d.skipped == 1


# --------------------------------------------------------------------------- synthetic records


def _asst(
    uuid: str,
    msg_id: str,
    blocks: list[dict[str, Any]],
    usage: dict[str, Any] | None = None,
    model: str = "claude-sonnet-4-6",
    **extra: Any,
) -> bytes:
    msg: dict[str, Any] = {"id": msg_id, "model": model, "role": "assistant", "content": blocks}
    if usage is not None:
        msg["usage"] = usage
    return _line(
        {
            "type": "assistant",
            "uuid": uuid,
            "timestamp": "2026-01-02T03:04:05.500Z",
            "isSidechain": False,
            "message": msg,
            **extra,
        }
    )


def _user(uuid: str, content: Any, **extra: Any) -> bytes:
    return _line(
        {
            "type": "user",
            "uuid": uuid,
            "timestamp": "2026-01-02T03:04:06Z",
            "message": {"role": "user", "content": content},
            **extra,
        }
    )


def _bash(tid: str, command: str, output: str, *, is_error: bool = False, uuid: str = "a") -> bytes:
    return _asst(
        uuid, f"msg_{tid}", [{"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": command}}]
    ) + _user(
        f"r_{tid}",
        [{"type": "tool_result", "tool_use_id": tid, "content": output, "is_error": is_error}],
        toolUseResult={"stdout": output, "stderr": "", "interrupted": False},
    )


def test_timestamp_parsing() -> None:
    """ISO timestamps become epoch seconds (Z, offsets, naive = UTC); bad ones give 0.0."""
    _, d = feed(TranscriptCursor(), _asst("a1", "m1", [{"type": "text", "text": "hi"}]))
    assert d.elements[0].ts == 1767323045.5
    assert tr._ts("2026-01-02T03:04:05+01:00") == 1767319445.0
    assert tr._ts("2026-01-02T03:04:05") == 1767323045.0
    assert tr._ts("yesterday") == 0.0 and tr._ts(None) == 0.0


def test_usage_rules_synthetic() -> None:
    """Last record per id wins; <synthetic> and sidechain are ignored; iterations use the last message one."""
    u1 = {
        "input_tokens": 10,
        "cache_creation_input_tokens": 20,
        "cache_read_input_tokens": 30,
        "output_tokens": 1,
    }
    u1b = dict(u1, output_tokens=9)
    it = {
        "input_tokens": 999,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 5,
        "iterations": [
            {"type": "message", "input_tokens": 100, "cache_read_input_tokens": 50, "output_tokens": 2},
            {"type": "compaction", "input_tokens": 7, "output_tokens": 3},
        ],
    }
    data = (
        _asst("a1", "m1", [{"type": "text", "text": "one"}], u1)
        + _asst("a2", "m1", [{"type": "text", "text": "two"}], u1b)
        + _asst("a3", "m2", [{"type": "text", "text": "it"}], it)
        + _asst("a4", "m3", [{"type": "text", "text": "syn"}], u1, model="<synthetic>")
        + _line(
            {
                "type": "assistant",
                "uuid": "a5",
                "isSidechain": True,
                "message": {"id": "m4", "model": "x", "content": [], "usage": u1},
            }
        )
    )
    _, d = feed(TranscriptCursor(), data)
    assert [(u.message_id, u.output_tokens) for u in d.usages] == [("m1", 9), ("m2", 2)]
    assert d.first_usage is not None and d.first_usage.context_tokens == 60
    assert d.last_usage is not None and d.last_usage.context_tokens == 150
    assert d.model == "claude-sonnet-4-6"
    assert [e.text for e in d.elements] == ["one", "two", "it", "syn"]


def test_requested_model_with_1m_suffix_wins() -> None:
    """A requestedModel carrying a [1m] suffix is reported as the model (it decides the window)."""
    c, d = feed(
        TranscriptCursor(), _asst("a", "m", [], {"input_tokens": 1}, requestedModel="claude-sonnet-4-6[1m]")
    )
    assert d.model == "claude-sonnet-4-6[1m]"
    assert d.last_usage is not None and d.last_usage.model == "claude-sonnet-4-6[1m]"
    att = {
        "type": "attachment",
        "attachment": {"type": "model", "identity": {"modelId": "claude-sonnet-4-6"}},
    }
    c, d2 = feed(c, _line(att))
    assert d2.model is None and c.model == "claude-sonnet-4-6[1m]"  # the [1m] variant is kept
    att = {"type": "attachment", "attachment": {"type": "model", "identity": {"modelId": "claude-opus-5-5"}}}
    c, d3 = feed(c, _line(att))
    assert d3.model == c.model == "claude-opus-5-5"


def test_thinking_meta_and_caveats() -> None:
    """Thinking becomes THINKING; isMeta, local-command and interruption records are not prompts."""
    data = (
        _asst("t", "m", [{"type": "thinking", "thinking": "let me think", "signature": "s"}])
        + _user("meta", "Stop hook feedback: x", isMeta=True)
        + _user("cav", "<local-command-caveat>Caveat</local-command-caveat>", isMeta=True)
        + _user("out", "<local-command-stdout>done</local-command-stdout>")
        + _user("int", [{"type": "text", "text": "[Request interrupted by user]"}])
        + _user("p", [{"type": "text", "text": "real prompt"}, {"type": "image", "source": {}}])
    )
    _, d = feed(TranscriptCursor(), data)
    assert [(e.kind, e.text) for e in d.elements] == [
        (Kind.THINKING, "let me think"),
        (Kind.PROMPT, "real prompt\n[image]"),
    ]


@pytest.mark.parametrize(
    ("command", "output", "is_error", "kind", "passed"),
    [
        (".venv/bin/python -m pytest tests -q", "12 passed in 0.3s", False, Kind.TEST_RESULT, True),
        ("pytest -x", "1 failed, 3 passed in 1.0s", True, Kind.TEST_RESULT, False),
        ("npm test", "Tests: 2 failed, 5 passed, 7 total", False, Kind.TEST_RESULT, False),
        ("go test ./...", "ok  \texample.com/pkg\t0.01s", False, Kind.TEST_RESULT, True),
        (
            "cargo test",
            "Exit code 101\ntest result: FAILED. 1 passed; 1 failed",
            True,
            Kind.TEST_RESULT,
            False,
        ),
        ("make test", "building...", False, Kind.TEST_RESULT, None),
        ("ls -la", "Exit code 2\nls: cannot access", True, Kind.ERROR, None),
        ("echo hi", "hi", False, Kind.TOOL, None),
    ],
)
def test_bash_kinds(command: str, output: str, is_error: bool, kind: Kind, passed: bool | None) -> None:
    """Bash results: test commands -> TEST_RESULT with an outcome; failures -> ERROR; else TOOL."""
    _, d = feed(TranscriptCursor(), _bash("toolu_1", command, output, is_error=is_error))
    (e,) = d.elements
    assert (e.kind, e.passed, e.tool, e.command, e.uid) == (kind, passed, "Bash", command, "toolu_1")
    assert e.text == f"Bash: {command}\n{output}"
    assert e.is_error is is_error


def test_exit_code_in_tool_use_result_marks_error() -> None:
    """A non-zero exit code in toolUseResult makes an ERROR even when is_error is absent."""
    data = _asst(
        "a", "m", [{"type": "tool_use", "id": "t9", "name": "Bash", "input": {"command": "false"}}]
    ) + _user(
        "r",
        [{"type": "tool_result", "tool_use_id": "t9", "content": ""}],
        toolUseResult={"stdout": "", "stderr": "boom", "exitCode": 1},
    )
    _, d = feed(TranscriptCursor(), data)
    assert d.elements[0].kind is Kind.ERROR and d.elements[0].text == "Bash: false\nboom"


def test_tool_call_pairs_across_feeds_and_unknown_result() -> None:
    """The call and its result may arrive in different feeds; a result without a known call still counts."""
    call = _asst("a", "m", [{"type": "tool_use", "id": "t1", "name": "Glob", "input": {"pattern": "*.py"}}])
    c, d = feed(TranscriptCursor(), call)
    assert d.elements == [] and [p.id for p in c.pending] == ["t1"]
    c2 = msgspec.json.decode(msgspec.json.encode(c), type=TranscriptCursor)  # cursor survives JSON
    assert c2 == c
    res = _user("r", [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py\nb.py"}])
    orphan = _user("r2", [{"type": "tool_result", "tool_use_id": "zz", "content": "??", "is_error": True}])
    c3, d3 = feed(c2, res + orphan)
    assert c3.pending == ()
    assert [(e.uid, e.tool, e.kind) for e in d3.elements] == [
        ("t1", "Glob", Kind.TOOL),
        ("zz", None, Kind.ERROR),
    ]
    assert d3.elements[0].text == 'Glob: {"pattern":"*.py"}\na.py\nb.py'


def test_pending_calls_are_bounded() -> None:
    """At most MAX_PENDING unanswered calls are kept; the oldest are evicted."""
    blocks = [
        {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": "x" * 5_000}}
        for i in range(MAX_PENDING + 10)
    ]
    c, _ = feed(TranscriptCursor(), _asst("a", "m", blocks))
    assert len(c.pending) == MAX_PENDING and c.pending[0].id == "t10"
    assert all(len(p.command or "") <= tr.MAX_COMMAND for p in c.pending)


def test_long_tool_output_is_capped() -> None:
    """Element text is capped at 64 KiB with a marker; tokens estimate the full output."""
    out = "line of output\n" * 20_000  # 300,000 chars
    _, d = feed(TranscriptCursor(), _bash("t", "cat big.log", out))
    (e,) = d.elements
    assert len(e.text) < MAX_TEXT + 100 and "chars truncated]" in e.text
    assert e.text.endswith("line of output\n")
    assert e.tokens == pytest.approx(len("Bash: cat big.log\n" + out) / 4, rel=0.01)


def test_multi_block_assistant_uids() -> None:
    """Older multi-block records give one element per block, uid suffixed with the block index."""
    _, d = feed(
        TranscriptCursor(), _asst("u", "m", [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])
    )
    assert [e.uid for e in d.elements] == ["u", "u:1"]


def test_skill_from_slash_command() -> None:
    """A <command-name> record followed by the isMeta skill body is a SkillUse named after the command."""
    body = (
        "Base directory for this skill: /home/u/.claude/plugins/myplug/skills/ctx-status\n\n# Status\n"
        + "x" * 400
    )
    data = _user(
        "c",
        "<command-message>myplug:ctx-status</command-message>\n"
        "<command-name>/myplug:ctx-status</command-name>\n<command-args>detail</command-args>",
    ) + _user("b", [{"type": "text", "text": body}], isMeta=True)
    _, d = feed(TranscriptCursor(), data)
    assert [(s.name, s.tokens) for s in d.skills] == [("myplug:ctx-status", estimate_tokens(body))]
    assert d.elements == []


def test_skill_from_tool_call_and_fallback_name() -> None:
    """A Skill tool call names the body that follows; without a hint the directory name is used."""
    body = "Base directory for this skill: /repo/.claude/skills/deploy\n\nSteps..."
    data = (
        _asst(
            "a", "m", [{"type": "tool_use", "id": "ts", "name": "Skill", "input": {"skill": "deploy-prod"}}]
        )
        + _user(
            "r", [{"type": "tool_result", "tool_use_id": "ts", "content": "Launching skill: deploy-prod"}]
        )
        + _user("b", [{"type": "text", "text": body}], isMeta=True, sourceToolUseID="ts")
        + _user("b2", body.replace("deploy", "lint"), isMeta=True)
    )
    _, d = feed(TranscriptCursor(), data)
    assert [s.name for s in d.skills] == ["deploy-prod", "lint"]
    assert [e.tool for e in d.elements] == ["Skill"]


# --------------------------------------------------------------------------- helpers


@pytest.mark.parametrize(
    ("cmd", "expected"),
    [
        ("pytest", True),
        ("pytest tests/test_x.py -q", True),
        ("cd /repo && .venv/bin/python -m pytest -x", True),
        ("python3 -m unittest discover", True),
        ("uv run pytest", True),
        ("PYTHONPATH=src pytest -k foo", True),
        ("npm test", True),
        ("npm run test:unit", True),
        ("pnpm test", True),
        ("yarn test --watch=false", True),
        ("npx jest src", True),
        ("npx vitest run", True),
        ("go test ./...", True),
        ("cargo test --all", True),
        ("make test", True),
        ("make -j4 check", True),
        ("tox -e py311", True),
        ("./gradlew test", True),
        ("pytest | tail -5", True),
        ("pip install pytest", False),
        ("cat pytest.ini", False),
        ("grep -r test .", False),
        ("echo done", False),
        ("git commit -m 'fix tests'", False),
        ("npm install", False),
        ("", False),
    ],
)
def test_is_test_command(cmd: str, expected: bool) -> None:
    """is_test_command recognises test runners behind common wrappers and not mere mentions."""
    assert is_test_command(cmd) is expected


@pytest.mark.parametrize(
    ("output", "is_error", "expected"),
    [
        ("===== 5 passed in 0.12s =====", False, True),
        ("=== 1 failed, 4 passed in 0.2s ===", False, False),
        ("== 2 passed, 1 error in 0.3s ==", False, False),
        ("FAILED tests/test_a.py::test_x - assert 1 == 2", False, False),
        ("Ran 3 tests in 0.001s\n\nOK", False, True),
        ("Ran 3 tests in 0.001s\n\nFAILED (failures=1)", False, False),
        ("--- FAIL: TestLogin (0.00s)\nFAIL\tpkg\t0.01s", False, False),
        ("ok  \tgithub.com/x/y\t0.02s", False, True),
        ("test result: ok. 4 passed; 0 failed; 0 ignored", False, True),
        ("Tests:       3 passed, 3 total", False, True),
        ("  3 passing (20ms)\n  1 failing", False, False),
        ("0 failed, 2 passed", False, True),
        ("collected 0 items", False, None),
        ("whatever", True, False),
        ("", False, None),
        ("All tests passed!", False, True),
        ("pass the salt\nOKAY", False, None),
        ("ok 1 - adds\nnot ok 2 - subs\n1..2\n# tests 2\n# pass 1\n# fail 1", False, False),  # TAP (node --test)
        ("ok 1 - adds\n1..1\n# tests 1\n# pass 1\n# fail 0", False, True),
    ],
)
def test_test_outcome(output: str, is_error: bool, expected: bool | None) -> None:
    """test_outcome reads common runner summaries; a failed command is a failure."""
    assert tr.test_outcome(output, is_error) is expected


def test_context_after_rules() -> None:
    """context_after: usage wins unless a later boundary exists; nothing new keeps previous."""
    u = Usage(message_id="m", model=None, input_tokens=5, cache_read_input_tokens=10)
    b = tr.CompactBoundary(uuid="b", ts=0.0, trigger="auto", pre_tokens=100, post_tokens=7)
    b_none = tr.CompactBoundary(uuid="b", ts=0.0, trigger="auto", pre_tokens=100, post_tokens=None)
    assert context_after(TranscriptDelta(), 42) == 42
    assert context_after(TranscriptDelta(last_usage=u), 42) == 15
    assert context_after(TranscriptDelta(last_usage=u, boundaries=[b]), 42) == 15
    assert context_after(TranscriptDelta(last_usage=u, boundaries=[b], compacted_last=True), 42) == 7
    assert context_after(TranscriptDelta(boundaries=[b], compacted_last=True), 42) == 7
    assert context_after(TranscriptDelta(boundaries=[b_none], compacted_last=True), 42) is None


# --------------------------------------------------------------------------- purity


def test_import_does_not_pull_io_modules() -> None:
    """Importing the core transcript and budget modules does not import anyio, sqlite3 or socket."""
    code = (
        "import sys\n"
        "import ctxlifed.core.transcript, ctxlifed.core.budget\n"
        "mods = ('anyio', 'sqlite3', 'socket', 'sqlite_utils', 'asyncio')\n"
        "bad = sorted(m for m in mods if m in sys.modules)\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


@pytest.mark.parametrize("module", ["transcript.py", "budget.py"])
def test_module_is_pure(module: str) -> None:
    """The module imports only pure dependencies and calls no I/O builtin."""
    tree = ast.parse((SRC / module).read_text())
    imported = {
        (n.module or "") if isinstance(n, ast.ImportFrom) else a.name
        for n in ast.walk(tree)
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in n.names
    }
    assert imported <= {"__future__", "functools", "re", "math", "datetime", "typing", "msgspec", "ctxlifed.core.model", "ctxlifed.core.commands",
                        "ctxlifed.core.jsontext"}
    calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert not calls & {"open", "print", "input", "exec", "eval", "__import__"}
    assert ast.get_docstring(tree) and "Rules:" in (ast.get_docstring(tree) or "")


# --------------------------------------------------------------------------- over-long lines, surrogates, rewrites

_BIG_USAGE = {"input_tokens": 7, "cache_creation_input_tokens": 1000, "cache_read_input_tokens": 169_000,
              "output_tokens": 12, "cache_creation": {"ephemeral_5m_input_tokens": 1000},
              "server_tool_use": {"web_search_requests": 0}, "iterations": []}


def _big_assistant(size: int, *, sidechain: bool = False, compact: bool = True, usage: dict[str, Any] | None = None) -> bytes:
    """An assistant response as Claude Code writes it (top-level fields, message: model, id, role,
    content, usage; then type, uuid, timestamp) with ``size`` bytes of file content inside a tool call."""
    rec = {"parentUuid": "p", "isSidechain": sidechain, "userType": "external", "cwd": "/p", "sessionId": "s",
           "message": {"model": "claude-opus-5-5", "id": "msg_BIG", "type": "message", "role": "assistant",
                       "content": [{"type": "tool_use", "id": "toolu_w", "name": "Write",
                                    "input": {"file_path": "/p/a.b64", "content": "QUJD" * (size // 4),
                                              "note": 'a "usage": {"input_tokens": 999} inside a string'}}],
                       "stop_reason": "tool_use", "usage": usage or _BIG_USAGE},
           "requestId": "req_1", "requestedModel": "claude-opus-5-5[1m]", "type": "assistant", "uuid": "big-u",
           "timestamp": "2026-01-02T03:04:09Z"}
    seps = (",", ":") if compact else (", ", ": ")
    return json.dumps(rec, separators=seps).encode() + b"\n"


@pytest.mark.parametrize("compact", [True, False])
def test_an_overlong_assistant_line_still_counts_its_usage(compact: bool) -> None:
    """A response line over max_line (a 2 MB file written, an image) is skipped, but its usage, model and
    message id are read from its head and tail: the context figure moves to it (it stayed behind)."""
    small = _asst("s1", "msg_S", [{"type": "text", "text": "before"}], usage={"input_tokens": 21_000, "output_tokens": 1})
    big = _big_assistant(20_000, compact=compact)
    data = small + big
    _, d = feed(TranscriptCursor(), data, max_line=10_000)
    assert d.skipped == 1
    assert [u.message_id for u in d.usages] == ["msg_S", "msg_BIG"]
    assert d.last_usage is not None and d.last_usage.context_tokens == 7 + 1000 + 169_000
    assert d.model == "claude-opus-5-5[1m]" and d.last_usage.ts == 1767323049.0
    assert context_after(d, None) == 170_007
    # the same bytes in reads smaller than the line: skipped as it streams, the usage still counted
    cursor, fold = _grow(data, range(97, len(data), 4093), max_line=10_000)
    assert cursor.offset == len(data) and not cursor.skipping and fold.skipped == 1
    assert fold.last_usage is not None and fold.last_usage.message_id == "msg_BIG"
    assert fold.last_usage.context_tokens == 170_007
    assert len(cursor.skip_head) == 0 and len(cursor.skip_tail) == 0  # dropped once the line ended


def test_overlong_lines_that_show_no_main_chain_usage_count_none() -> None:
    """A sidechain response, a user line with a pasted image, and a line cut before its usage add no usage."""
    image = _user("img", [{"type": "text", "text": "see"}, {"type": "image", "source": {"data": "iVBO" * 5000}}])
    side = _big_assistant(20_000, sidechain=True)
    cut = _big_assistant(20_000)[:15_000] + b"\n"
    for line in (image, side, cut):
        _, d = feed(TranscriptCursor(), line, max_line=10_000)
        assert d.skipped == 1 and d.usages == [] and d.last_usage is None


def test_skipping_state_stays_bounded() -> None:
    """While a multi-MB line streams by, the cursor holds at most OVERSIZED_HEAD + OVERSIZED_TAIL bytes of it."""
    big = _big_assistant(3 << 20)
    c = TranscriptCursor()
    for pos in range(1 << 20, len(big), 1 << 20):
        c, _d = feed(c, big[c.offset : pos], max_line=(1 << 20) - 1)
        assert c.skipping and len(c.skip_head) <= tr.OVERSIZED_HEAD and len(c.skip_tail) <= tr.OVERSIZED_TAIL
    c, d = feed(c, big[c.offset :], max_line=(1 << 20) - 1)
    assert not c.skipping and d.skipped == 1 and d.last_usage is not None and d.last_usage.message_id == "msg_BIG"


def test_a_read_of_exactly_max_line_bytes_with_no_newline_waits() -> None:
    """The caller's contract: a partial line of max_line bytes may still end; one byte more is over-long.
    (The daemon reads MAX_TRANSCRIPT_READ and passes max_line = MAX_TRANSCRIPT_READ - 1, so a line it
    cannot see whole is always over-long: with the two equal it waited for good.)"""
    c, d = feed(TranscriptCursor(), b"y" * 100, max_line=100)
    assert c.offset == 0 and not c.skipping
    c, d = feed(TranscriptCursor(), b"y" * 100, max_line=99)
    assert c.offset == 100 and c.skipping


@pytest.mark.parametrize(("escaped", "want"), [
    ("cut \\ud83d", "cut \ufffd"),
    ("\\udfff first", "\ufffd first"),
    ("pair \\ud83d\\ude00 kept", "pair \U0001f600 kept"),
])
def test_a_lone_surrogate_escape_is_replaced_not_skipped(escaped: str, want: str) -> None:
    """Node's JSON.stringify writes a lone surrogate when it cuts an emoji; the line was skipped."""
    raw = b'{"type":"user","uuid":"u","message":{"role":"user","content":"' + escaped.encode() + b'"}}\n'
    _, d = feed(TranscriptCursor(), raw)
    assert d.skipped == 0 and [e.text for e in d.elements] == [want]


def test_the_anchor_tells_a_rewritten_file_from_a_grown_one() -> None:
    """The cursor keeps the last ANCHOR bytes it consumed; ``resume`` finds them again before the offset
    of a grown file and does not in a rewritten one (same size or larger)."""
    lines = [_user(f"u{i}", f"prompt number {i}") for i in range(5)]
    old = b"".join(lines[:3])
    c, _d = feed(TranscriptCursor(), old)
    assert c.anchor == old[-tr.ANCHOR:] and c.offset == len(old)
    grown = old + lines[3]
    assert tr.resume(c, grown[c.offset - len(c.anchor):]) == lines[3]
    rewritten = b"".join(_user(f"n{i}", f"another text {i}") for i in range(9))
    assert len(rewritten) > len(old) and tr.resume(c, rewritten[c.offset - len(c.anchor):]) is None
    # anchors shorter than ANCHOR at the start, and carried across feeds that consume less than it
    c, _d = feed(TranscriptCursor(), b"{}\n")
    c, _d = feed(c, b"\n")
    assert c.anchor == b"{}\n\n" and tr.resume(c, b"{}\n\nnext") == b"next"
    assert tr.resume(TranscriptCursor(), b"anything") == b"anything"


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_overlong_lines_in_random_splits_count_what_one_feed_counts(seed: int) -> None:
    """Normal and over-long responses, users and sidechain lines fed as a file growing at random points:
    the usages, skips and final cursor equal those of one whole feed (head and tail are carried exactly)."""
    rng = random.Random(seed)
    lines = []
    for i in range(30):
        k = rng.randrange(4)
        if k == 0:
            lines.append(_big_assistant(rng.randrange(500, 30_000), compact=rng.random() < 0.5,
                                        usage={"input_tokens": i, "cache_read_input_tokens": 1000 * i, "output_tokens": 1})
                         .replace(b"msg_BIG", f"msg_B{i}".encode()))
        elif k == 1:
            lines.append(_asst(f"a{i}", f"msg_{i}", [{"type": "text", "text": "t" * rng.randrange(10, 900)}],
                               usage={"input_tokens": i, "output_tokens": 2}))
        elif k == 2:
            lines.append(_user(f"u{i}", "p" * rng.randrange(10, 5000)))
        else:
            lines.append(_big_assistant(rng.randrange(500, 9000), sidechain=True))
    data = b"".join(lines)
    whole = _Fold()
    cursor, d = feed(TranscriptCursor(), data, final=True, max_line=150)
    whole.add(d)
    assert whole.skipped > 5 and len(whole.usages) > 5
    cuts = sorted(rng.sample(range(1, len(data)), k=200))
    grown_cursor, grown = _grow(data, cuts, max_line=150)
    assert grown.key() == whole.key()
    assert grown_cursor == cursor


def test_an_over_long_text_is_cut_on_word_boundaries_so_no_token_is_halved() -> None:
    """Redaction runs on the capped text: a token cut in half could slip past its rule."""
    from ctxlifed.core import transcript as TR

    token = "ghp_" + "A1b2C3d4E5" * 4
    for at in range(0, 200, 7):  # the token straddles the head cut, then the tail cut
        text = "x " * ((TR.MAX_TEXT * 3 // 4 - at) // 2) + token + " y" * (TR.MAX_TEXT // 2)
        out = TR._cap(text)
        assert len(out) <= TR.MAX_TEXT + 200
        for piece in (out.split("…[")[0], out.rsplit("]…", 1)[-1]):
            assert token in piece or "ghp_" not in piece and "A1b2C3d4E5" * 4 not in piece, at
    tail_text = "y " * TR.MAX_TEXT + token + " z" * (TR.MAX_TEXT // 8 - 10)
    out = TR._cap(tail_text)
    assert token in out or "A1b2" not in out.rsplit("]…", 1)[-1]
