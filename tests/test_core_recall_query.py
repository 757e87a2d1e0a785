"""Tests for ctxlifed.core.recall_query: the /recall grammar (FTS5 syntax: tests/test_store_fts_query.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxlifed.core.model import PHASES, Kind
from ctxlifed.core.recall_query import (
    RecallQuery,
    RecallQueryError,
    parse_recall,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", RecallQuery()),
        ("   ", RecallQuery()),
        ("auth timeout", RecallQuery(words=("auth", "timeout"))),
        ("phase:design auth", RecallQuery(words=("auth",), phase="design")),
        ("type:error timeout", RecallQuery(words=("timeout",), kind="error")),
        ("PHASE:Testing", RecallQuery(phase="testing")),
        ("phase:设计", RecallQuery(phase="design")),
        ("phase:规划 phase:planning", RecallQuery(phase="planning")),
        ("phase:实现", RecallQuery(phase="implementation")),
        ("phase:测试", RecallQuery(phase="testing")),
        ("phase:评审", RecallQuery(phase="review")),
        ("phase:impl", RecallQuery(phase="implementation")),
        ("type:errors", RecallQuery(kind="error")),
        ("type:tests", RecallQuery(kind="test_result")),
        ("type:decision", RecallQuery(kind="decision")),
        ("type:code", RecallQuery(kind="code_change")),
        ("type:tool", RecallQuery(kind="tool")),
        ("type:summary", RecallQuery(kind="compact_summary")),
        ("type:lesson", RecallQuery(kind="lesson")),
        ("kind:code-change", RecallQuery(kind="code_change")),
        ("decisions", RecallQuery(decisions=True)),
        ("Timeline", RecallQuery(timeline=True)),
        ("lessons auth", RecallQuery(words=("auth",), lessons=True)),
        ('"decisions"', RecallQuery(phrases=("decisions",))),
        ("decisions-log", RecallQuery(words=("decisions-log",))),
        ("id:42", RecallQuery(id=42)),
        ("#42", RecallQuery(id=42)),
        ("#42 id:42", RecallQuery(id=42)),
        ("#auth", RecallQuery(words=("#auth",))),
        ('"login flow" retry', RecallQuery(words=("retry",), phrases=("login flow",))),
        ('"unclosed phrase here', RecallQuery(phrases=("unclosed phrase here",))),
        ("“认证 超时”", RecallQuery(phrases=("认证 超时",))),
        ('""', RecallQuery()),
        ("timeout, please!", RecallQuery(words=("timeout", "please"))),
        ("std::vector http://x foo:bar", RecallQuery(words=("std::vector", "http://x", "foo:bar"))),
        ("session:5eb8d0b8-ca0e-4eb1-9879-48afaa04fb55", RecallQuery(session="5eb8d0b8-ca0e-4eb1-9879-48afaa04fb55")),
        ("--all auth", RecallQuery(words=("auth",), all_projects=True)),
        ("scope:all", RecallQuery(all_projects=True)),
        (
            'phase:design type:decision "cache layer" redis #7 timeline',
            RecallQuery(words=("redis",), phrases=("cache layer",), phase="design", kind="decision", id=7, timeline=True),
        ),
    ],
)
def test_parse_recall_table(text: str, expected: RecallQuery) -> None:
    """Table of recall texts and the query each parses to."""
    assert expected == parse_recall(text)


@pytest.mark.parametrize(
    ("text", "message_part"),
    [
        ("phase:coding", "unknown phase 'coding'"),
        ("phase:", "unknown phase ''"),
        ("type:banana", "unknown type 'banana'"),
        ("kind:", "unknown type ''"),
        ("id:abc", "invalid id"),
        ("id:0", "invalid id"),
        ("id:99999999999999999999", "invalid id"),
        ("#0", "invalid id"),
        ("session:../etc", "invalid session id"),
        ("phase:design phase:review", "two different phase filters"),
        ("type:error type:tool", "two different type filters"),
        ("#1 #2", "two different id filters"),
    ],
)
def test_parse_recall_errors(text: str, message_part: str) -> None:
    """Unknown phases/types and malformed filters raise RecallQueryError with a clear message."""
    with pytest.raises(RecallQueryError) as exc:
        parse_recall(text)
    assert message_part in str(exc.value)
    assert isinstance(exc.value, ValueError)


def test_error_messages_list_the_valid_values() -> None:
    """The unknown-phase and unknown-type messages list what is valid."""
    with pytest.raises(RecallQueryError) as e1:
        parse_recall("phase:x")
    with pytest.raises(RecallQueryError) as e2:
        parse_recall("type:x")
    assert all(p in str(e1.value) for p in PHASES)
    assert all(k.value in str(e2.value) for k in Kind)


def test_every_kind_value_and_phase_is_accepted() -> None:
    """Every Kind value parses as type:<value> and every phase as phase:<name>."""
    assert [k.value for k in Kind] == [parse_recall(f"type:{k.value}").kind for k in Kind]
    assert list(PHASES) == [parse_recall(f"phase:{p}").phase for p in PHASES]


def test_is_empty() -> None:
    """is_empty is True only when nothing at all is asked."""
    assert (True, False, False, True) == (
        parse_recall("").is_empty,
        parse_recall("x").is_empty,
        parse_recall("#3").is_empty,
        parse_recall("--all").is_empty,
    )


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=200))
def test_parse_recall_never_crashes(text: str) -> None:
    """Arbitrary text either parses or raises RecallQueryError — never anything else."""
    try:
        q = parse_recall(text)
    except RecallQueryError:
        return
    assert isinstance(q, RecallQuery)
    assert q.phase is None or q.phase in PHASES
    assert q.kind is None or q.kind in {k.value for k in Kind}


_GRAMMAR_TOKENS = st.sampled_from(
    ["phase:design", "phase:设计", "type:error", "type:", "id:", "#", "#12", "decisions", "timeline", '"', "“",
     "”", "session:", "--all", ":", "AND", "OR", "NOT", "NEAR(", "*", "^", "-", "col:x", "\x00", "认证"]
)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(_GRAMMAR_TOKENS, st.text(max_size=15)), max_size=10).map(" ".join))
def test_parse_recall_never_crashes_on_grammar_like_text(text: str) -> None:
    """Text built from grammar fragments either parses or raises RecallQueryError."""
    try:
        parse_recall(text)
    except RecallQueryError:
        pass
