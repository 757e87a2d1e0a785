"""The ``/recall`` grammar: user text parsed into a typed :class:`RecallQuery`.

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
- FTS5 query syntax is not built here: ``store/fts_query.py`` turns the parsed words and phrases
  into MATCH expressions (the core only parses).
"""

from __future__ import annotations

import re

import msgspec

from ctxlifed.core.model import PHASES, Kind

__all__ = [
    "RecallQuery",
    "RecallQueryError",
    "parse_recall",
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
