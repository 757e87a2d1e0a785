"""The lifecycle of pending items: which evidence closes an open item, and when an item is stale.

Rules:
- Pure: no I/O, no clock. The service gathers the evidence of one event (:class:`Evidence`) and the
  open items of the project, and :func:`closing` says which items close and why; the store records it.
- Items come from the facts of prompts and assistant text (``classify.detect_facts``) and from the open
  todos of a TodoWrite call (pending / in progress; the service stores them).
- An item closes on evidence, each route checked on its own (:data:`ROUTES` names them):
  * ``todo``     -- TodoWrite marks a todo ``completed`` whose text matches the item;
  * ``decision`` -- a later decision settles an open choice: the item asks or leaves a choice open
    (not decided, 待定, which / whether, a question) and the decision covers its subject;
  * ``test``     -- the failing test the item names (``a.py::test_x``, ``test_x``, ``TestX``) passes: a
    passing run names it in its command or output, or cleared it from the failing set;
  * ``todo_line`` -- its ``TODO`` / ``FIXME`` line leaves a file: an edit's old text holds the
    item's body and the new text does not;
  * ``user``     -- the user says it is done ("X is done", "finished X", "X 完成了", "搞定了 X"), not
    as a question and not negated ("not done yet", "还没完成");
  * ``ctl`` (``ctxlifectl pending --resolve ID``) and ``ledger`` (a ticked ``- [x]`` checkbox in the
    item's ledger page) are applied by the service directly.
- Matching is :func:`~ctxlifed.core.mustsurvive.coverage` of significant tokens (code-like tokens weigh
  double; stopwords and fact markers ignored; CJK bigrams): the item's tokens covered by the evidence at
  :data:`MATCH` (0.6), or the evidence's by the item at :data:`MATCH_BACK` (0.8); either side needs a
  weight of at least :data:`MIN_WEIGHT`. A choice is settled at :data:`SETTLE` (0.6). Quiet beats busy:
  an item that matches nothing stays open.
- :func:`render_pending_list` (``ctxlifectl pending``): current items, then stale ones, then (when
  asked) closed ones with how they closed; each line names the ``#N`` that ``--resolve N`` takes.
- Stale (:func:`is_stale`): an open item not touched (created or restated) for ``stale_phases`` phase
  switches or ``stale_sessions`` later sessions of its project (0 disables a limit). Stale items are
  listed as stale, never as current (injections, focus lines, the must-survive set leave them out).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

import msgspec

from ctxlifed.core.classify import is_question
from ctxlifed.core.mustsurvive import coverage, source

__all__ = ["MATCH", "ROUTES", "Evidence", "closing", "done_statements", "is_stale", "render_pending_list",
           "test_names"]

ROUTES = ("todo", "decision", "test", "todo_line", "user", "ctl", "ledger")
MATCH = 0.6
MATCH_BACK = 0.8
SETTLE = 0.6
MIN_WEIGHT = 2
MAX_EVIDENCE = 16  # texts of each kind of evidence checked per event


class Evidence(msgspec.Struct, frozen=True, kw_only=True):
    """What one event says about open items."""

    completed_todos: tuple[str, ...] = ()
    decisions: tuple[str, ...] = ()
    passed_tests: tuple[str, ...] = ()  # test names / ids a passing run named or cleared
    passed_text: str = ""  # command + output head of a passing test run (names searched in it)
    edits: tuple[tuple[str, str], ...] = ()  # (old text, new text) of edits
    done: tuple[str, ...] = ()  # the user's "X is done" sentences

    def empty(self) -> bool:
        return not (self.completed_todos or self.decisions or self.passed_tests or self.passed_text
                    or self.edits or self.done)


_OPEN_CHOICE_RE = re.compile(
    r"\bnot\s+(?:yet\s+)?decided\b|\bundecided\b|\b(?:haven'?t|have\s+not|hasn'?t)\s+(?:yet\s+)?decided\b"
    r"|\bopen\s+question\b|\bwhich\b|\bwhether\b|\bor\b|\bdecide\b|\bchoose\b|\bpick\b"
    r"|待定|待决定|待确认|还没(?:有)?决定|尚未决定|未决定|哪个|哪种|是否|还是|选哪",
    re.I,
)
# Words that ask rather than name (cut before matching a choice against a decision).
_ASK_RE = re.compile(r"\b(?:which|whether|what|or|decide|choose|pick|not|yet|open)\b|哪个|哪种|是否|还是|选哪|什么", re.I)
_TEST_ID_RE = re.compile(r"[\w./-]+\.py::[\w:\[\]-]+|(?<![\w])(?:test_\w+|Test[A-Z0-9]\w*|\w+_test)(?![\w])")
_TODO_RE = re.compile(r"^\s*(?:TODO|FIXME)\b\s*[:：(（-]?\s*(?:\([^)]*\)\s*[:：]?\s*)?(.+)$")
_DONE_RE = re.compile(
    r"\b(?:is|are|'s|was|were|has\s+been|have\s+been)\s+(?:now\s+|all\s+)?(?:done|finished|complete|completed|fixed"
    r"|resolved|implemented|merged|handled)\b"
    r"|^\s*(?:done|finished|completed|fixed|resolved|implemented)\b\s*[:：,-]?\s*\S"
    r"|\b(?:i|we)(?:'ve|\s+have)?\s+(?:just\s+)?(?:done|finished|completed|fixed|resolved|implemented|merged)\b"
    r"|已(?:经)?(?:完成|解决|修复|实现|搞定)|完成了|搞定了?|做完了|解决了|修好了|实现了",
    re.I,
)
_NOT_DONE_RE = re.compile(
    r"\bnot\s+(?:yet\s+|quite\s+)?(?:done|finished|complete|completed|fixed|resolved|implemented)\b"
    r"|\b(?:isn'?t|aren'?t|wasn'?t|haven'?t|hasn'?t)\b|\bnot\s+yet\b|\bstill\b"
    r"|[还没]没(?:有)?(?:完成|解决|修复|实现|搞定|做完)|未完成|没完成",
    re.I,
)
_SPLIT_RE = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；])|\n")


def done_statements(text: str) -> list[str]:
    """The user's sentences that say something is done (not questions, not negated), at most 8."""
    out: list[str] = []
    for s in _SPLIT_RE.split((text or "")[:8000]):
        s = s.strip()
        if s and _DONE_RE.search(s) and not _NOT_DONE_RE.search(s) and not is_question(s):
            out.append(s)
            if len(out) >= 8:
                break
    return out


def test_names(text: str) -> list[str]:
    """Test ids and names an item mentions (``a.py::test_x`` and its last part, ``test_x``, ``TestX``)."""
    out: list[str] = []
    for m in _TEST_ID_RE.finditer(text or ""):
        tok = m.group(0)
        out.append(tok)
        if "::" in tok:
            out.append(tok.split("::")[-1].split("[")[0])
    return list(dict.fromkeys(t for t in out if t))


test_names.__test__ = False  # type: ignore[attr-defined]  # not a pytest test when imported


@lru_cache(maxsize=1024)
def _src(text: str) -> object:
    return source(text)


def _matches(item: str, evidence: str) -> bool:
    cov, total = coverage(item, _src(evidence))  # type: ignore[arg-type]
    if total >= MIN_WEIGHT and cov >= MATCH:
        return True
    back, btotal = coverage(evidence, _src(item))  # type: ignore[arg-type]
    return btotal >= MIN_WEIGHT and back >= MATCH_BACK


def _choice_subject(item: str) -> str | None:
    """The subject of an open choice (the item with its asking words cut), None when it is no choice."""
    if not (_OPEN_CHOICE_RE.search(item) or is_question(item)):
        return None
    return _ASK_RE.sub(" ", item)


def _settles(subject: str, decision: str) -> bool:
    cov, total = coverage(subject, _src(decision))  # type: ignore[arg-type]
    return total >= 1 and cov >= SETTLE


def _word_in(name: str, text: str) -> bool:
    return re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text) is not None


def _todo_gone(item: str, edits: Sequence[tuple[str, str]]) -> bool:
    m = _TODO_RE.match(item)
    if not m:
        return False
    body = " ".join(m.group(1).split()).rstrip(".。")
    if len(body) < 4:
        return False
    for old, new in edits:
        o, n = " ".join(old.split()), " ".join(new.split())
        if body in o and body not in n:
            return True
    return False


def closing(items: Iterable[tuple[int, str]], ev: Evidence) -> list[tuple[int, str]]:
    """``(item id, route)`` for every open item the evidence closes (module rules), in input order."""
    if ev.empty():
        return []
    out: list[tuple[int, str]] = []
    passed_text = ev.passed_text[:200_000]
    todos, decisions, done = (ev.completed_todos[:MAX_EVIDENCE], ev.decisions[:MAX_EVIDENCE],
                              ev.done[:MAX_EVIDENCE])
    for iid, text in items:
        route = None
        if todos and any(_matches(text, t) for t in todos):
            route = "todo"
        elif decisions and (subject := _choice_subject(text)) is not None and any(
                _settles(subject, d) for d in decisions):
            route = "decision"
        elif (names := test_names(text)) and (
                any(n in ev.passed_tests for n in names) or any(_word_in(n, passed_text) for n in names if passed_text)):
            route = "test"
        elif ev.edits and _todo_gone(text, ev.edits[:MAX_EVIDENCE]):
            route = "todo_line"
        elif done and any(_matches(text, d) for d in done):
            route = "user"
        if route is not None:
            out.append((iid, route))
    return out


def is_stale(phases_since: int, sessions_since: int, *, stale_phases: int, stale_sessions: int) -> bool:
    """Whether an open item untouched for that many phase switches / later sessions is stale."""
    return (stale_phases > 0 and phases_since >= stale_phases) or (stale_sessions > 0 and sessions_since >= stale_sessions)


def _line(text: str, limit: int = 200) -> str:
    t = " ".join((text or "").split())
    return t if len(t) <= limit else t[: limit - 1] + "…"


def render_pending_list(items: Sequence[object], *, ctl: str, resolved: int | None = None) -> str:
    """The listing of ``ctxlifectl pending`` (items: views with id, text, status, stale, resolution)."""
    cur = [i for i in items if getattr(i, "status", "") == "open" and not getattr(i, "stale", False)]
    stale = [i for i in items if getattr(i, "status", "") == "open" and getattr(i, "stale", False)]
    closed = [i for i in items if getattr(i, "status", "") != "open"]
    out: list[str] = []
    if resolved is not None:
        out.append(f"Closed #{resolved}.")
    if not (cur or stale or closed):
        out.append("No open pending items.")
        return "\n".join(out)
    if cur:
        out.append(f"Pending ({len(cur)}):")
        out += [f"- #{getattr(i, 'id')} {_line(getattr(i, 'text'))}" for i in cur]
    if stale:
        out.append(f"Stale, untouched for a while ({len(stale)}):")
        out += [f"- #{getattr(i, 'id')} {_line(getattr(i, 'text'))}" for i in stale]
    if closed:
        out.append(f"Closed ({len(closed)}):")
        out += [f"- #{getattr(i, 'id')} {_line(getattr(i, 'text'))} ({getattr(i, 'resolution', None) or 'resolved'})"
                for i in closed]
    if cur or stale:
        out.append(f"Close one: {ctl} pending --resolve N")
    return "\n".join(out)
