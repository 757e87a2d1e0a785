"""What a recall hit is worth beyond its text score: echoes, kind weights, superseded decisions,
and the identifier words the word index adds. Pure: no I/O.

Rules:
- An *echo* is text about recalling rather than the work itself; it never outranks content
  (:func:`is_echo`). Echoes are: a slash command (``/recall Postgres``, ``/ctxlifed:recall …``,
  ``/compact …``; a path such as ``/home/x/y`` is not one); a question prompt (ends with
  ``?``/``？``/``吗``, or opens with a wh-word, ``did``, 为什么 …, and is at most
  :data:`QUESTION_CHARS` long); a *recall* (:func:`is_recall_text`): a ``/…recall`` command, a
  Bash call (its output and its failure included) that runs ``ctxlifectl``, or any row but a ledger
  page holding ctxlifed's own rendered recall text (``**Recall** ```, ``No archived context
  matches``, ``Full text: ctxlifectl recall --id``, ``**#<id>**`` hit lines, the ``/recall``
  command's header). A row is told by its summary (its ``[kind]`` header skipped) or its text's
  start. The store adds two rules it needs a lookup for: assistant text whose nearest earlier
  prompt or Bash call in the session is a recall, and a fact (decision, constraint, pending item)
  whose nearest prompt or assistant row of the same event is an echo.
- Kind weights (:func:`weight`) multiply the text score, so that for comparable text scores
  decisions and constraints (:data:`FACT_WEIGHT`), then errors (a failed test run included),
  code and config changes and lessons (:data:`WORK_WEIGHT`), then pending items come before
  chatter (prompts, assistant text, tool output, summaries, ledgers: 1.0).
- A decision is *superseded* by a later decision of the same project on the same topic
  (:func:`supersedes`): they share at least :data:`MIN_SHARED` topic words and at least
  :data:`MIN_SHARE` of the smaller topic, and each has a topic word the other lacks (the old
  choice, the new one). A later restatement adds no new word and supersedes nothing. Topic words: lower-case words of 3+ letters
  or digits-with-letters and CJK character pairs, without stop words and the verbs that state a
  decision (decided, switched, 决定, 改用 …); a plural ``s`` is dropped.
- :func:`identifier_words`: the words of camelCase / PascalCase identifiers (``LockTimeout`` ->
  ``Lock Timeout``, ``HTTPServer`` -> ``HTTP Server``, ``getUserID2`` -> ``get User ID2``), each
  identifier once, in order of first appearance, at most :data:`MAX_IDENT_CHARS` characters, from
  the first and last :data:`IDENT_SCAN` characters of a text. Such an identifier has a lower-case letter
  or digit before a capital, or two capitals before a lower-case letter: only the words around those
  places are looked at, found with ``bytes.find`` on a copy of the text's character classes (the text is
  archived on the hook path, where a regex tried at every character would read all of it in Python's
  engine). The word index already splits ``lock_timeout`` and ``db.pool.size`` at ``_`` and ``.``;
  these words let ``lock timeout`` and ``timeout`` find ``LockTimeout`` too. :func:`identifier_phrase` is
  the same split for one query term.
"""

from __future__ import annotations

import functools
import re

__all__ = [
    "FACT_WEIGHT",
    "WORK_WEIGHT",
    "is_echo",
    "is_recall_text",
    "weight",
    "topic_words",
    "supersedes",
    "identifier_words",
    "identifier_phrase",
]

QUESTION_CHARS = 300
FACT_WEIGHT = 1.6
WORK_WEIGHT = 1.4
PENDING_WEIGHT = 1.3
MIN_SHARED = 2
MIN_SHARE = 0.4
IDENT_SCAN = 64 * 1024
MAX_IDENT_CHARS = 8192

_SLASH_RE = re.compile(r"\s*/[A-Za-z][\w:.-]*(?:\s|$)")
_RENDERED_RE = re.compile(
    r"\*\*Recall\*\* `|No archived context matches|Full text: ctxlifectl recall --id|\*\*#\d+\*\* "
    r"|ctxlifed archive results for|ctxlifed memory for this"
)
_CTXLIFECTL_RE = re.compile(r"(?:^|[\s;&|(`/])ctxlifectl(?:\s|$)")
_INTERROGATIVE_RE = re.compile(  # openers that ask, never instruct ("Do not ..." is a constraint)
    r"\s*(?:what|why|how|where|when|which|who|whom|whose|did)\b|\s*(?:为什么|怎么|什么|哪|是否|有没有)", re.I)
_WORK_KINDS = frozenset({"error", "code_change", "lesson"})
_FACT_KINDS = frozenset({"decision", "constraint"})


_HEADER_RE = re.compile(r"\[[a-z_]+(?: [A-Za-z]+)?\] ")  # a summary's "[kind] " / "[test_result FAILED] "


def _first_line(text: str) -> str:
    text = text.lstrip()
    end = text.find("\n", 0, 400)
    return text[:end] if end >= 0 else text[:400]


def _body(head: str) -> str:
    """``head`` without a summary's ``[kind]`` header (``core.summarize``): where the text starts."""
    m = _HEADER_RE.match(head)
    return head[m.end():] if m else head


def is_recall_text(kind: str, tool: str | None, head: str) -> bool:
    """A recall itself or ctxlifed's rendered recall: a ``/recall``-like slash command, a
    ``ctxlifectl`` Bash call, or text holding ctxlifed's recall rendering. ``head``: the text's start
    or its summary."""
    head = _body(head)
    if kind == "prompt" and _SLASH_RE.match(head) and "/" not in head.lstrip()[1:].split(None, 1)[0]:
        return "recall" in head.lstrip().split(None, 1)[0].lower()
    if tool == "Bash" and _CTXLIFECTL_RE.search(_first_line(head).removeprefix("$ ")):
        return True
    return kind != "ledger" and _RENDERED_RE.search(head) is not None


def is_echo(kind: str, tool: str | None, head: str) -> bool:
    """True for text about recalling rather than the work itself (see the module rules)."""
    if is_recall_text(kind, tool, head):
        return True
    if kind != "prompt":
        return False
    stripped = _body(head).strip()
    first = stripped.split(None, 1)[0] if stripped else ""
    if _SLASH_RE.match(stripped) and "/" not in first[1:]:
        return True  # a slash command (a path like /home/x/y is not one)
    if len(stripped) > QUESTION_CHARS:
        return False
    return stripped.endswith(("?", "？", "吗")) or _INTERROGATIVE_RE.match(stripped) is not None


def weight(kind: str, head: str) -> float:
    """The factor a hit's text score is multiplied by (see the module rules). ``head``: the
    summary or the text's start (a failed test run's summary opens ``[test_result FAILED]``)."""
    if kind in _FACT_KINDS:
        return FACT_WEIGHT
    if kind in _WORK_KINDS or (kind == "test_result" and "[test_result FAILED]" in head[:40]):
        return WORK_WEIGHT
    if kind == "pending":
        return PENDING_WEIGHT
    return 1.0


_WORD_RE = re.compile(r"[a-z0-9]+|[\u3400-\u9fff\uf900-\ufaff]+")
_STOP = frozenset("""
the and for with that this from into onto over under our your their its are was were been being have has had
not but all any can will would should could may might must also then than there here when what which who why how
because since until while about after before again just only very more most some such each both other same
use used using uses decide decided decides deciding decision decisions chose choose chosen choice opted adopt
adopted switch switched switching move moved migrate migrated change changed replace replaced revert reverted
instead now let lets going keep kept want need make made get got set put new old you they them she his her
""".split())
_STOP_CJK = frozenset({"我们", "决定", "使用", "采用", "选用", "选择", "改用", "改成", "换成", "改为", "切换", "迁移",
                       "现在", "之前", "以后", "一个", "这个", "那个", "作为"})


@functools.lru_cache(maxsize=4096)
def topic_words(text: str) -> frozenset[str]:
    """Topic words of a decision (see the module rules)."""
    out: set[str] = set()
    for tok in _WORD_RE.findall(text.lower()):
        if tok[0] >= "\u3400":
            for i in range(len(tok) - 1):
                pair = tok[i:i + 2]
                if pair not in _STOP_CJK:
                    out.add(pair)
            continue
        if len(tok) < 3 or tok.isdigit() or tok in _STOP:
            continue
        if len(tok) > 3 and tok.endswith("s") and not tok.endswith("ss"):
            tok = tok[:-1]
        out.add(tok)
    return frozenset(out)


def supersedes(older: frozenset[str], newer: frozenset[str]) -> bool:
    """True when a newer decision with topic ``newer`` replaces an older one with topic ``older``."""
    shared = len(older & newer)
    if shared < MIN_SHARED or shared < MIN_SHARE * min(len(older), len(newer)):
        return False
    return bool(older - newer) and bool(newer - older)


_IDENT_RE = re.compile(r"(?<![A-Za-z0-9])(?:[A-Za-z][A-Za-z0-9]*[a-z0-9][A-Z][A-Za-z0-9]*|[A-Z]{2,}[a-z][A-Za-z0-9]*)"
                       r"(?![A-Za-z0-9])")
_TOKEN_RE = re.compile(r"(?<![A-Za-z0-9])[A-Za-z][A-Za-z0-9]+(?![A-Za-z0-9])")  # an ASCII word or identifier
_PART_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+[0-9]*|[A-Z]+[0-9]*|[0-9]+")


def identifier_phrase(ident: str) -> str:
    """``LockTimeout`` -> ``Lock Timeout``; '' when ``ident`` is not a mixed-case identifier."""
    if not _IDENT_RE.fullmatch(ident):
        return ""
    parts = _PART_RE.findall(ident)
    return " ".join(parts) if len(parts) > 1 else ""


# Character classes of ASCII text, one byte per character (``encode`` with ``replace`` keeps one byte
# per character): ``l`` a lower-case letter or digit, ``U`` a capital, `` `` anything else.
_CASE_BYTES = bytes.maketrans(bytes(range(128)), bytes(
    108 if chr(c).islower() or chr(c).isdigit() else 85 if chr(c).isupper() else 32 for c in range(128)))
_CASE_TURNS = (b"lU", b"UUl")  # where a mixed-case identifier turns: getUser, HTTPServer


def _mixed_case_tokens(text: str) -> list[str]:
    """``_TOKEN_RE``'s words of ``text`` that hold a place where the case turns, in order (repeats kept)."""
    classes = text.encode("ascii", "replace").translate(_CASE_BYTES)
    turns: list[int] = []
    for turn in _CASE_TURNS:
        i = classes.find(turn)
        while i >= 0:
            turns.append(i)
            i = classes.find(turn, i + 1)
    tokens: list[str] = []
    end = -1
    for i in sorted(turns):
        if i < end:
            continue  # a turn inside the word taken last
        start = classes.rfind(b" ", 0, i) + 1
        end = classes.find(b" ", i)
        if end < 0:
            end = len(classes)
        if text[start].isalpha():  # a word starts with a letter (_TOKEN_RE)
            tokens.append(text[start:end])
    return tokens


def identifier_words(text: str) -> str:
    """The split words of the text's mixed-case identifiers, one line each (see the module rules)."""
    if len(text) > 2 * IDENT_SCAN:
        text = text[:IDENT_SCAN] + "\n" + text[-IDENT_SCAN:]
    out: list[str] = []
    size = 0
    for token in dict.fromkeys(_mixed_case_tokens(text)):  # each once, in order of first appearance
        if token.islower() or token.isupper():
            continue
        phrase = identifier_phrase(token)
        if not phrase:
            continue
        size += len(phrase) + 1
        if size > MAX_IDENT_CHARS:
            break
        out.append(phrase)
    return "\n".join(out)
