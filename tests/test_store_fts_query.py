"""Tests for ctxlifed.store.fts_query: the safe FTS5 MATCH syntax built from a parsed recall query."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxlifed.core.recall_query import RecallQueryError, parse_recall
from ctxlifed.store.fts_query import fts_match_expression, needs_substring_fallback


@pytest.mark.parametrize(
    ("words", "phrases", "expected"),
    [
        ((), (), ""),
        (("auth",), (), '"auth"'),
        (("auth", "timeout"), ("login flow",), '"auth" "timeout" "login flow"'),
        (('say "hi"',), (), '"say ""hi"""'),
        (("AND", "NEAR(", "col:x"), (), '"AND" "NEAR(" "col:x"'),
        ((",", "*", "  "), (), ""),
        (("a\x00b", "tab\there"), (), '"a b" "tab here"'),
        (("auth", "auth"), ("auth",), '"auth"'),
        (("认证",), (), '"认证"'),
    ],
)
def test_fts_match_expression_table(words: tuple[str, ...], phrases: tuple[str, ...], expected: str) -> None:
    """Terms are double-quoted with inner quotes doubled, ANDed by spaces; unsearchable terms dropped."""
    assert expected == fts_match_expression(words, phrases)


@pytest.fixture(scope="module")
def fts() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE w USING fts5(body)")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='trigram')")
    for table in ("w", "t"):
        db.executemany(
            f"INSERT INTO {table}(body) VALUES (?)",
            [("auth timeout in login flow",), ('he said "hi" to AND NEAR',), ("认证超时 错误",)],
        )
    return db


@pytest.mark.parametrize(
    ("text", "expected_w", "expected_t"),
    [
        ("auth", 1, 1),
        ('"login flow" timeout', 1, 1),
        ('say "hi"', 0, 0),
        ("AND NEAR", 1, 1),
        ("超时", 0, 0),  # 2 CJK chars: trigram cannot match -> substring fallback
        ("认证超时", 1, 1),
    ],
)
def test_fts_expression_matches_real_fts5(fts: sqlite3.Connection, text: str, expected_w: int, expected_t: int) -> None:
    """The expression finds the rows it should in a real SQLite FTS5 table (unicode61 and trigram)."""
    q = parse_recall(text)
    expr = fts_match_expression(q.words, q.phrases)
    got = tuple(fts.execute(f"SELECT count(*) FROM {t} WHERE {t} MATCH ?", (expr,)).fetchone()[0] for t in ("w", "t"))
    assert (expected_w, expected_t) == got


@settings(max_examples=600, deadline=None)
@given(
    st.lists(st.text(alphabet=st.characters(exclude_categories=()), max_size=20), max_size=6),
    st.lists(st.text(max_size=30), max_size=3),
)
def test_fts_expression_never_raises_in_sqlite(fts: sqlite3.Connection, words: list[str], phrases: list[str]) -> None:
    """For arbitrary text (surrogates and control characters included) the expression is accepted by
    SQLite FTS5 MATCH on both tokenizers, or is '' (nothing searchable)."""
    expr = fts_match_expression(words, phrases)
    if expr == "":
        assert all(not any(ch.isalnum() for ch in t) for t in [*words, *phrases])
        return
    for table in ("w", "t"):
        fts.execute(f"SELECT count(*) FROM {table} WHERE {table} MATCH ?", (expr,)).fetchone()


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=120))
def test_parsed_query_expression_never_raises_in_sqlite(fts: sqlite3.Connection, text: str) -> None:
    """Whatever /recall text parses, its MATCH expression is valid FTS5."""
    try:
        q = parse_recall(text)
    except RecallQueryError:
        return
    expr = fts_match_expression(q.words, q.phrases)
    if expr:
        fts.execute("SELECT count(*) FROM w WHERE w MATCH ?", (expr,)).fetchone()


@pytest.mark.parametrize(
    ("term", "expected"),
    [
        ("认", True),
        ("认证", True),
        (" 认证 ", True),
        ("认证超", False),
        ("ab", False),
        ("a认", True),
        ("かな", True),
        ("한국", True),
        ("", False),
        ("   ", False),
        ("timeout", False),
    ],
)
def test_needs_substring_fallback(term: str, expected: bool) -> None:
    """Short (< 3 chars) terms with CJK need the substring fallback; others do not."""
    assert expected == needs_substring_fallback(term)


# --------------------------------------------------------------------------- substring scans

_SCAN_ALPHABET = st.sampled_from(list("aAbBzZ%_\\ -.é É漢\n\t'\"") + ["ß", "İ", "ǅ"])


@settings(max_examples=400, deadline=None)
@given(text=st.text(_SCAN_ALPHABET, max_size=30), term=st.text(_SCAN_ALPHABET, min_size=1, max_size=4))
def test_the_like_substring_scan_matches_what_instr_of_lower_matches(text: str, term: str) -> None:
    """CONTAINS_SQL with substring_pattern(term) is true exactly where instr(lower(text), lower(term))
    is (NUL-free text): ASCII case folded, everything else literal, LIKE's own wildcards included."""
    from ctxlifed.store.fts_query import CONTAINS_SQL, substring_pattern

    conn = sqlite3.connect(":memory:")
    like, instr = conn.execute(
        f"SELECT {CONTAINS_SQL}, instr(lower(a.text), lower(?)) > 0 FROM (SELECT ? AS text) a",
        (substring_pattern(term), term, text)).fetchone()
    assert bool(like) == bool(instr)
