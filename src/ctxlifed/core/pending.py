"""The lifecycle of pending items: which evidence closes an open item, and when an item is stale.

Rules:
- Pure: no I/O, no clock. The service gathers the evidence of one event (:class:`Evidence`) and the
  open items of the project, and :func:`closing` says which items close and why; the store records it.
- Items come from the facts of prompts and assistant text (``classify.detect_facts``) and from the open
  todos of a TodoWrite call (pending / in progress; the service stores them).
- An item closes on evidence, each route checked on its own (:data:`ROUTES` names them):
  * ``todo``     -- TodoWrite marks a todo ``completed`` whose text matches the item;
  * ``decision`` -- a later decision settles an open choice: the item asks or leaves a choice open
    (not decided, 待定, which / whether / where / what, decide / confirm / determine, 确认 / 确定, a
    question) and the decision covers its subject (the item without its asking words, the alternatives
    it offers in passing -- "(a dead letter queue?)" -- and, after "where", the verb of place: "where
    the counters live" is about the counters);
  * ``settled`` -- a prompt or assistant message says the item's topic is settled (:func:`settled_topics`:
    "the names A and B settle the naming", "the benchmark settles it" -- a pronoun object points back to
    the subject --, "which settles deleted documents", "the port is decided", "模板已经定好了"; not a
    question, not negated, not an intention -- "we need to / will / let's settle X" --, not itself a
    pending item) and the item covers that topic;
  * ``answer`` -- the user answers an open choice (:func:`answer_clauses`): a clause of the prompt, not
    in a question, not negated, asking nothing, that opens with the whole subject of the choice and
    nothing else, then says something the item does not ("failed deliveries go to a dead letter table"
    answers "where failed deliveries go"; "look at failed deliveries" does not). Known failure mode: a
    description in that form ("failed deliveries go nowhere today") closes the item too;
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

from ctxlifed.core.classify import fact_kind, is_question
from ctxlifed.core.model import Kind
from ctxlifed.core.mustsurvive import coverage, source

__all__ = ["MATCH", "ROUTES", "Evidence", "answer_clauses", "closing", "done_statements", "is_stale",
           "render_pending_list", "settled_topics", "test_names"]

ROUTES = ("todo", "decision", "settled", "answer", "test", "todo_line", "user", "ctl", "ledger")
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
    settled: tuple[str, ...] = ()  # topics a sentence says are settled ("the benchmark settles it")
    answers: tuple[str, ...] = ()  # the user's declarative clauses (answers to an open choice)

    def empty(self) -> bool:
        return not (self.completed_todos or self.decisions or self.passed_tests or self.passed_text
                    or self.edits or self.done or self.settled or self.answers)


_OPEN_CHOICE_RE = re.compile(
    r"\bnot\s+(?:yet\s+)?decided\b|\bundecided\b|\b(?:haven'?t|have\s+not|hasn'?t)\s+(?:yet\s+)?decided\b"
    r"|\bopen\s+question\b|\bwhich\b|\bwhether\b|\bwhere\b|\bwhat\b|\bwhen\b|\bhow\s+(?:many|much|long|often)\b"
    r"|\bor\b|\bdecide\b|\bchoose\b|\bpick\b|\bconfirm\b|\bdetermine\b|\bfigure\s+out\b|\bsettle\b"
    r"|待定|待决定|待确认|还没(?:有)?(?:决定|定)|尚未决定|未决定|哪个|哪种|哪里|哪儿|多少|是否|还是|选哪|确认|确定|敲定|商定",
    re.I,
)
# Words that ask rather than name (cut before matching a choice against a decision).
_ASK_RE = re.compile(
    r"\b(?:which|whether|where|what|when|how|many|much|or|decide|choose|pick|confirm|determine|figure|settle"
    r"|not|yet|open)\b|哪个|哪种|哪里|哪儿|多少|是否|还是|选哪|什么|确认|确定|敲定|商定", re.I)
# An alternative offered in passing ("(a dead letter queue?)"): not the subject of the choice.
_OFFERED_RE = re.compile(r"\([^()]*[?？]\s*\)|（[^（）]*[?？]\s*）")
# "X settles it", "which settles Y", "Y is settled / decided"; ZH "Y 定好了 / 定了 / 确定了 / 敲定了".
_SETTLES_RE = re.compile(
    r"^(?P<a>.*?)(?<!\bto\s)(?<!\bwill\s)(?<!\bwould\s)(?<!\bshould\s)(?<!\bmust\s)(?<!\bcan\s)(?<!\bcould\s)"
    r"(?<!\bmight\s)(?<!\bmay\s)(?<!'ll\s)(?<!\blet's\s)(?<!\blets\s)(?<!\blet\sus\s)(?<!\bplease\s)"
    r"\bsettle[sd]?\b(?!\s+on\b)\s*(?P<b>.*)$", re.I)
_IS_SETTLED_RE = re.compile(
    r"^(?P<b>.+?)\s+(?:is|are|'s|was|were|has\s+been|have\s+been)\s+(?:now\s+|all\s+)?(?:settled|decided"
    r"|sorted(?:\s+out)?)\b", re.I)
_ZH_SETTLED_RE = re.compile(r"^(?P<b>.*?)(?:已经|已|也|都)?(?:定好了?|定下来了?|确定了|敲定了?|决定了|定了)")
_ANY_SETTLE_RE = re.compile(r"settle|decided|sorted|定", re.I)  # cheap filter before the patterns above
_PRONOUN_RE = re.compile(r"^(?:it|this|that|these|those|them|this\s+one|that\s+one|the\s+(?:question|matter|issue)"
                         r"|which|things?|everything)?$", re.I)
_NEGATED_RE = re.compile(r"\b(?:not|never|no|nothing|cannot)\b|n't\b|还没|没有|未|不", re.I)
# "Where X lives / goes / is stored" asks for a place for X: the verb is not part of the subject.
_WHERE_VERB_RE = re.compile(r"\b(?:lives?|goes|go|belongs?|sits?|stays?|resides?|(?:is|are|be|get|gets)\s+"
                            r"(?:stored|kept|saved|put|placed))\b", re.I)
_CLAUSE_CUT_RE = re.compile(r"[,;:，；：—–]")
_CLAUSE_SPLIT_RE = re.compile(r"\s*[,;:，；：—–]\s*")
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


def _topic(part: str) -> str:
    """The words a settle phrase names, cut at the first clause mark ("it: the time goes ..." -> "it")."""
    return _CLAUSE_CUT_RE.split(part, maxsplit=1)[0].strip(" .。!！")


def settled_topics(text: str) -> list[str]:
    """What sentences say is settled (not questions, not negated), at most 8: "The names A and B settle
    the naming" -> "the naming"; "The benchmark settles it" -> "The benchmark" (a pronoun object points
    back to the subject); "which settles deleted documents"; "the port is decided"; "模板已经定好了" -> 模板."""
    out: list[str] = []
    head = (text or "")[:8000]
    if not _ANY_SETTLE_RE.search(head):
        return out
    for sent in _SPLIT_RE.split(head):
        sent = sent.strip()
        if (not sent or not _ANY_SETTLE_RE.search(sent) or is_question(sent) or _NEGATED_RE.search(sent)
                or fact_kind(sent) is Kind.PENDING):
            continue
        topic = ""
        if m := _SETTLES_RE.match(sent):
            obj = _topic(m.group("b"))
            subj = _CLAUSE_SPLIT_RE.split(m.group("a").strip())[-1].strip()
            topic = subj if _PRONOUN_RE.match(obj) else obj
            topic = "" if _PRONOUN_RE.match(topic) else topic
        elif m := _IS_SETTLED_RE.match(sent):
            topic = _CLAUSE_SPLIT_RE.split(m.group("b").strip())[-1].strip()
        else:
            for clause in _CLAUSE_SPLIT_RE.split(sent):
                if (m := _ZH_SETTLED_RE.match(clause)) and m.group("b").strip():
                    topic = m.group("b").strip()
                    break
        if topic and not _PRONOUN_RE.match(topic):
            out.append(topic)
            if len(out) >= 8:
                break
    return out


def answer_clauses(text: str) -> list[str]:
    """The user's declarative clauses that may answer an open choice ("Let's implement it: failed
    deliveries go to a dead letter table" -> "failed deliveries go to a dead letter table"): not in a
    question, not negated, asking nothing (no which / where / whether ...), at most 16."""
    out: list[str] = []
    for sent in _SPLIT_RE.split((text or "")[:8000]):
        sent = sent.strip()
        if (not sent or is_question(sent) or _NEGATED_RE.search(sent) or _OPEN_CHOICE_RE.search(sent)
                or fact_kind(sent) is Kind.PENDING):
            continue
        for clause in _CLAUSE_SPLIT_RE.split(sent):
            if clause.strip():
                out.append(clause.strip())
                if len(out) >= 16:
                    return out
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
    """The subject of an open choice (the item with its asking words and the alternatives it offers in
    passing cut), None when it is no choice."""
    if not (_OPEN_CHOICE_RE.search(item) or is_question(item)):
        return None
    subject = _OFFERED_RE.sub(" ", item)
    if re.search(r"\bwhere\b", subject, re.I):
        subject = _WHERE_VERB_RE.sub(" ", subject)
    return _ASK_RE.sub(" ", subject)


def _settles(subject: str, decision: str) -> bool:
    cov, total = coverage(subject, _src(decision))  # type: ignore[arg-type]
    return total >= 1 and cov >= SETTLE


def _names_item(topic: str, item: str) -> bool:
    """A settled topic names the item: the item covers the topic's significant tokens."""
    cov, total = coverage(topic, _src(item))  # type: ignore[arg-type]
    return total >= 1 and cov >= MATCH_BACK


def _answers(subject: str, clause: str, item: str) -> bool:
    """The clause opens with the choice's subject, all of it and nothing else, and goes on to say
    something the item does not (the answer): "failed deliveries go to a dead letter table" answers
    "where failed deliveries go"; "look at failed deliveries" does not."""
    _cov, total = coverage(subject, "")
    if total < MIN_WEIGHT:
        return False
    words = clause.split()[:24]
    for k in range(1, len(words)):
        head, tail = " ".join(words[:k]), " ".join(words[k:])
        cov, _t = coverage(subject, _src(head))  # type: ignore[arg-type]
        if cov < 1.0:
            continue
        inside, htotal = coverage(head, _src(item))  # type: ignore[arg-type]
        new, ttotal = coverage(tail, _src(item))  # type: ignore[arg-type]
        return htotal >= 1 and inside >= 1.0 and ttotal >= 1 and new < 1.0
    return False


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
    settled, answers = ev.settled[:MAX_EVIDENCE], ev.answers[:MAX_EVIDENCE]
    for iid, text in items:
        route = None
        subject = _choice_subject(text) if (decisions or answers) else None
        if todos and any(_matches(text, t) for t in todos):
            route = "todo"
        elif subject is not None and decisions and any(_settles(subject, d) for d in decisions):
            route = "decision"
        elif settled and any(_names_item(t, text) for t in settled):
            route = "settled"
        elif subject is not None and answers and any(_answers(subject, a, text) for a in answers):
            route = "answer"
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
