"""FTS5 MATCH syntax for the terms of a parsed recall query (``core.recall_query.RecallQuery``).

The core parses what the user typed into words and phrases; this module alone turns them into FTS5
query syntax, for the store's two indexes (``schema.py``: the word index, porter + unicode61, and
the trigram index).

Rules:
- Pure: no I/O (the store's SQL uses what it returns as a bound parameter).
- ``fts_match_expression(words, phrases)``: every term becomes one FTS5 string (double-quoted,
  internal ``"`` doubled, control characters replaced by spaces, lone surrogates by U+FFFD) and
  terms are joined by spaces (implicit AND). User text can therefore never be parsed as FTS5
  syntax (``AND``, ``NEAR``, ``*``, ``^``, ``col:``…). Terms with no letter or digit are dropped;
  duplicates are dropped; "" means nothing is searchable (the caller must not run MATCH then).
- ``fts_term_expression(term)``: one term for the word index; an identifier term also matches
  its words as a phrase (``LockTimeout`` -> ``"LockTimeout" OR "Lock Timeout"``), built from
  quoted strings only, like the above.
- ``needs_substring_fallback(term)``: True for a term shorter than 3 characters that contains a CJK
  character — the trigram tokenizer cannot match it, so the store must find it another way.
- ``substring_pattern(term)``: the ``LIKE`` pattern (with ``CONTAINS_SQL``'s ``ESCAPE``) of a scan
  for text holding ``term`` anywhere, case folded for ASCII letters only, as SQLite's ``lower()``
  folds: what ``instr(lower(text), lower(term)) > 0`` tests, without copying every scanned text to
  fold it. ``%``, ``_`` and the escape character in the term are literal. One difference: LIKE
  reads a text (and a term) only up to its first NUL character.
"""

from __future__ import annotations

import re

from ..core.model import _is_cjk
from ..core.recall_rank import identifier_phrase

__all__ = ["CONTAINS_SQL", "fts_match_expression", "fts_term_expression", "needs_substring_fallback",
           "substring_pattern"]

CONTAINS_SQL = "a.text LIKE ? ESCAPE '\\'"  # one bound ``substring_pattern`` (the row alias is ``a``)

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_WORD_RUN = re.compile(r"[^\W_]+")  # a unicode61 token, roughly
_SURROGATE = re.compile("[\ud800-\udfff]")  # lone surrogates cannot be encoded for SQLite


def _clean_term(term: str) -> str:
    return " ".join(_SURROGATE.sub("\ufffd", _CONTROL.sub(" ", term)).split())


def _searchable(term: str) -> bool:
    return any(ch.isalnum() for ch in term)


def fts_match_expression(words: tuple[str, ...] | list[str], phrases: tuple[str, ...] | list[str]) -> str:
    """A safe FTS5 MATCH expression: each searchable term as one quoted FTS5 string, ANDed.

    ``""`` when no term holds a letter or digit (the caller must then not run a MATCH at all).
    Duplicate terms are dropped; order is kept.
    """
    out: list[str] = []
    seen: set[str] = set()
    for term in (*words, *phrases):
        if not isinstance(term, str):
            continue
        t = _clean_term(term)
        if not t or not _searchable(t) or t in seen:
            continue
        seen.add(t)
        out.append('"' + t.replace('"', '""') + '"')
    return " ".join(out)


def fts_term_expression(term: str) -> str:
    """One term for the word index: its FTS5 string, or, for a term holding a mixed-case identifier
    (``LockTimeout``), its string OR its words as a phrase (``"LockTimeout" OR "Lock Timeout"``), so
    that it also finds ``lock_timeout`` and ``lock timeout`` (which the index reads as those words,
    as it reads ``LockTimeout``'s since schema 0011). "" when not searchable."""
    expr = fts_match_expression((term,), ())
    if not expr:
        return ""
    parts = [(p, identifier_phrase(p)) for p in _WORD_RUN.findall(_clean_term(term))]
    if not any(split for _p, split in parts):
        return expr  # "lock_timeout" is already the phrase "lock timeout" for the word index
    return f"({expr} OR {fts_match_expression((' '.join(split or p for p, split in parts),), ())})"


def needs_substring_fallback(term: str) -> bool:
    """True for a term of 1-2 characters containing CJK: the trigram index cannot match it."""
    t = term.strip()
    return 0 < len(t) < 3 and any(_is_cjk(ch) for ch in t)


def substring_pattern(term: str) -> str:
    """The ``CONTAINS_SQL`` parameter for ``term`` (see the module rules)."""
    return "%" + term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
