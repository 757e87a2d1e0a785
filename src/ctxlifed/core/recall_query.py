"""The ``/recall`` grammar and a safe FTS5 MATCH expression built from it.

Rules:
- Pure: no I/O. ``parse_recall`` never raises anything but :class:`RecallQueryError` (a ValueError).
- Tokens are separated by whitespace. A double-quoted span (``"…"``, also ``“…”``) is a phrase; an
  unclosed quote runs to the end of the text. Everything else is classified token by token
  (prefixes are case-insensitive):
    ``phase:<name>``    one of PHASES, a Chinese name (规划 设计 实现 测试 评审) or an alias
                        (plan, impl, dev, test, qa); unknown -> RecallQueryError.
    ``type:<kind>`` / ``kind:<kind>``  a Kind value, its plural, or an alias (errors->error,
                        tests->test_result, decision(s)->decision, code->code_change, tool->tool,
                        summary->compact_summary, lesson(s)->lesson, …); unknown -> RecallQueryError.
                        ``type:error`` also matches failed test runs (the store's rule); ``type:test``
                        is test runs only.
    ``id:<n>`` / ``#<n>``  a positive integer that fits SQLite's int64; ``id:`` with anything else is
                        an error, while ``#word`` stays an ordinary word.
    ``session:<sid>``   a session id ([A-Za-z0-9_-]{1,128}); anything else -> RecallQueryError.
    ``--all`` / ``--all-projects`` / ``scope:all``  search every project (``all_projects``).
    ``decisions`` / ``timeline`` / ``lessons``  keywords only as standalone, unquoted tokens
                        (any case); quote them to search the word itself.
    anything else       a word (``foo:bar``, ``http://x``, ``std::vector`` included), with leading
                        ``([{`` and trailing ``,;:!?)]}.`` stripped ("timeout," -> timeout).
  Filters combine with words (``phase:design auth``, ``type:error timeout``). Repeating a filter with
  the same value is allowed; two different values for one filter raise RecallQueryError.
- ``fts_match_expression(words, phrases)``: every term becomes one FTS5 string (double-quoted,
  internal ``"`` doubled, control characters replaced by spaces, lone surrogates by U+FFFD) and
  terms are joined by spaces (implicit AND). User text can therefore never be parsed as FTS5
  syntax (``AND``, ``NEAR``, ``*``, ``^``, ``col:``…). Terms with no letter or digit are dropped;
  duplicates are dropped; "" means nothing is searchable (the caller must not run MATCH then).
- ``fts_term_expression(term)``: one term for the word index; an identifier term also matches
  its words as a phrase (``LockTimeout`` -> ``"LockTimeout" OR "Lock Timeout"``), built from
  quoted strings only, like the above.
- ``needs_substring_fallback(term)``: True for a term shorter than 3 characters that contains a CJK
  character — the trigram tokenizer cannot match it, so the store must use a LIKE/instr scan.
"""

from __future__ import annotations

import re

import msgspec

from ctxlifed.core.model import PHASES, Kind, _is_cjk
from ctxlifed.core.recall_rank import identifier_phrase

__all__ = [
    "RecallQuery",
    "RecallQueryError",
    "parse_recall",
    "fts_match_expression",
    "fts_term_expression",
    "needs_substring_fallback",
    "PHASE_ALIASES",
    "KIND_ALIASES",
]

MAX_QUERY_CHARS = 4096  # longer input is cut before parsing (a recall query is a short line)
_INT64_MAX = 2**63 - 1


class RecallQueryError(ValueError):
    """The recall text names an unknown phase or type, or is otherwise not understood."""


class RecallQuery(msgspec.Struct, frozen=True):
    """A parsed ``/recall`` request. Empty tuples / None / False mean "no constraint"."""

    words: tuple[str, ...] = ()
    phrases: tuple[str, ...] = ()
    phase: str | None = None
    kind: str | None = None
    decisions: bool = False
    timeline: bool = False
    lessons: bool = False
    id: int | None = None
    session: str | None = None
    all_projects: bool = False

    @property
    def is_empty(self) -> bool:
        """True when the query asks for nothing at all (the caller shows usage / an overview)."""
        return not (
            self.words
            or self.phrases
            or self.phase
            or self.kind
            or self.decisions
            or self.timeline
            or self.lessons
            or self.id is not None
            or self.session
        )


PHASE_ALIASES: dict[str, str] = {
    **{p: p for p in PHASES},
    "规划": "planning",
    "计划": "planning",
    "设计": "design",
    "实现": "implementation",
    "开发": "implementation",
    "测试": "testing",
    "评审": "review",
    "审查": "review",
    "plan": "planning",
    "impl": "implementation",
    "implement": "implementation",
    "dev": "implementation",
    "test": "testing",
    "tests": "testing",
    "qa": "testing",
    "reviewing": "review",
}

KIND_ALIASES: dict[str, str] = {
    **{k.value: k.value for k in Kind},
    **{k.value + "s": k.value for k in Kind if not k.value.endswith("s")},
    **{k.value.replace("_", "-"): k.value for k in Kind},
    "errors": Kind.ERROR.value,
    "err": Kind.ERROR.value,
    "test": Kind.TEST_RESULT.value,
    "tests": Kind.TEST_RESULT.value,
    "decision": Kind.DECISION.value,
    "decisions": Kind.DECISION.value,
    "code": Kind.CODE_CHANGE.value,
    "edit": Kind.CODE_CHANGE.value,
    "edits": Kind.CODE_CHANGE.value,
    "tool": Kind.TOOL.value,
    "tools": Kind.TOOL.value,
    "summary": Kind.COMPACT_SUMMARY.value,
    "summaries": Kind.COMPACT_SUMMARY.value,
    "compact": Kind.COMPACT_SUMMARY.value,
    "lesson": Kind.LESSON.value,
    "lessons": Kind.LESSON.value,
    "todo": Kind.PENDING.value,
    "todos": Kind.PENDING.value,
}

_KEYWORDS = {"decisions", "timeline", "lessons"}
_ALL_TOKENS = {"--all", "--all-projects", "scope:all"}
_SESSION = re.compile(r"[A-Za-z0-9_-]{1,128}\Z")
_QUOTES = {'"': '"', "\u201c": "\u201d"}  # "…" and “…”
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_WORD_RUN = re.compile(r"[^\W_]+")  # a unicode61 token, roughly
_SURROGATE = re.compile("[\ud800-\udfff]")  # lone surrogates cannot be encoded for SQLite


def _split(text: str) -> list[tuple[str, bool]]:
    """Split into (token, quoted) pairs; quoted spans keep their inner whitespace."""
    out: list[tuple[str, bool]] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if ch in _QUOTES:
            close = _QUOTES[ch]
            j = text.find(close, i + 1)
            if j < 0:
                j = n
            out.append((text[i + 1 : j], True))
            i = j + 1
            continue
        j = i
        while j < n and not text[j].isspace() and text[j] not in _QUOTES:
            j += 1
        out.append((text[i:j], False))
        i = j
    return out


def _set_once(current: object, new: object, what: str) -> object:
    if current is not None and current != new:
        raise RecallQueryError(f"two different {what} filters: {current!r} and {new!r}")
    return new


def _short(s: str) -> str:
    return repr(s if len(s) <= 40 else s[:40] + "…")


def parse_recall(text: str) -> RecallQuery:
    """Parse ``/recall`` text into a :class:`RecallQuery` (see the module rules)."""
    if not isinstance(text, str):
        raise RecallQueryError("recall text must be a string")
    text = text[:MAX_QUERY_CHARS]
    words: list[str] = []
    phrases: list[str] = []
    phase: str | None = None
    kind: str | None = None
    ident: int | None = None
    session: str | None = None
    flags = {"decisions": False, "timeline": False, "lessons": False}
    all_projects = False

    for tok, quoted in _split(text):
        if quoted:
            phrase = " ".join(tok.split())
            if phrase:
                phrases.append(phrase)
            continue
        low = tok.lower()
        key, sep, value = tok.partition(":")
        keyl = key.lower()
        if low in _KEYWORDS:
            flags[low] = True
        elif low in _ALL_TOKENS:
            all_projects = True
        elif sep and keyl == "phase":
            name = PHASE_ALIASES.get(value.lower()) if value else None
            if name is None:
                raise RecallQueryError(
                    f"unknown phase {_short(value)}; use one of: {', '.join(PHASES)} (or 规划/设计/实现/测试/评审)"
                )
            phase = _set_once(phase, name, "phase")  # type: ignore[assignment]
        elif sep and keyl in ("type", "kind"):
            kname = KIND_ALIASES.get(value.lower()) if value else None
            if kname is None:
                raise RecallQueryError(
                    f"unknown type {_short(value)}; use one of: {', '.join(k.value for k in Kind)}"
                    " (aliases: errors, tests, code, summary, lessons…)"
                )
            kind = _set_once(kind, kname, "type")  # type: ignore[assignment]
        elif sep and keyl == "id":
            ident = _set_once(ident, _parse_id(value, tok), "id")  # type: ignore[assignment]
        elif tok.startswith("#") and len(tok) > 1 and tok[1:].isascii() and tok[1:].isdigit():
            ident = _set_once(ident, _parse_id(tok[1:], tok), "id")  # type: ignore[assignment]
        elif sep and keyl == "session":
            if not _SESSION.match(value):
                raise RecallQueryError(f"invalid session id {_short(value)}: expected [A-Za-z0-9_-]{{1,128}}")
            session = _set_once(session, value, "session")  # type: ignore[assignment]
        else:
            word = tok.lstrip("([{").rstrip(",;:!?)]}.")
            if word:
                words.append(word)

    return RecallQuery(
        words=tuple(words),
        phrases=tuple(phrases),
        phase=phase,
        kind=kind,
        decisions=flags["decisions"],
        timeline=flags["timeline"],
        lessons=flags["lessons"],
        id=ident,
        session=session,
        all_projects=all_projects,
    )


def _parse_id(value: str, tok: str) -> int:
    if not (value.isascii() and value.isdigit()) or len(value) > 19:
        raise RecallQueryError(f"invalid id in {_short(tok)}: expected a positive integer")
    n = int(value)
    if n <= 0 or n > _INT64_MAX:
        raise RecallQueryError(f"invalid id in {_short(tok)}: expected a positive integer")
    return n


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
