"""Extractive L1 summaries and recall snippets: deterministic, a few lines, no model.

Rules:
- Pure: no I/O. Only the first/last 64 KiB of a text is scanned (:func:`~ctxlifed.core.classify.clip`).
- :func:`summarize` gives at most :data:`MAX_LINES` lines and never more than ``max_chars`` characters:
  a header ``[kind] Tool: file-or-command`` (``[test_result passed|FAILED]`` for tests), then a body
  chosen by kind, whitespace collapsed, each line cut with "…" when it does not fit:
  * error (ERROR kind or any failed element): the exception line of the last Python traceback with its
    innermost frame, else the first lines carrying ``Error:``, ``error:``, ``FAILED``, ``panic:``,
    ``fatal:``, ``Exception``;
  * test result: the runner's summary line (pytest ``3 passed, 1 failed in 0.12s``, unittest ``Ran N
    tests`` + ``OK``/``FAILED``, go ``ok``/``FAIL``, cargo ``test result:``, jest ``Tests:``, mocha
    ``N passing``, TAP ``# tests``/``# pass``/``# fail`` as ``tests 6, pass 4, fail 2``), the failing
    test names (any other runner's through :mod:`~ctxlifed.core.testfail`) and the first assertion line;
  * code change: ``+added -removed`` lines when the text is a patch (else the line count written) and
    the first defined symbols;
  * other tools: line/result counts and the first (and, for Bash, last) output line;
  * prose (prompt, assistant, thinking, facts, summaries, lessons, ledgers): sentences found by
    :func:`~ctxlifed.core.classify.detect_facts` first, then the opening sentence(s); sentences split
    on ``.!?`` and ``。！？；``.
  The transcript's own first line (``"Bash: <command>"``, ``"Edit: <path>"``) is not repeated, and
  Claude Code's wrapper tags (``<tool_use_error>``, ``<system-reminder>`` ...) are dropped.
  With ``l2_id`` the summary ends with ``[L2 #<id>]``, which is always kept whole when it fits.
- :func:`snippet` returns the ``width``-character window (markers included) around the earliest
  case-insensitive match of any term (substring match, so CJK terms work), whitespace collapsed, with
  "…" where text was cut; without a match, the beginning of the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ctxlifed.core import testfail
from ctxlifed.core.classify import clip, detect_facts, sentences
from ctxlifed.core.model import Element, Kind

__all__ = ["MAX_LINES", "snippet", "summarize"]

MAX_LINES = 4
TARGET_CHARS = 60
PROSE_SCAN = 16 * 1024
ELL = "…"

_PROSE = frozenset(
    {Kind.PROMPT, Kind.ASSISTANT, Kind.THINKING, Kind.DECISION, Kind.CONSTRAINT, Kind.PENDING,
     Kind.COMPACT_SUMMARY, Kind.LEDGER, Kind.LESSON}
)  # fmt: skip
_FACT_KINDS = frozenset({Kind.DECISION, Kind.CONSTRAINT, Kind.PENDING})

_PY_FRAME_RE = re.compile(r'^\s*File "([^"]+)", line (\d+)(?:, in (\S+))?', re.M)
_PY_EXC_RE = re.compile(
    r"^(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Warning|Failure|Iteration)\b.*$", re.M
)
# Patterns that may match anywhere in a line are searched unanchored and widened to their line
# (``_line_at``): a ``^.*X.*$`` pattern backtracks over every line it tries, quadratic in line length.
_ERR_WORD_RE = re.compile(r"\bError:|\berror(?:\[\w+\])?:|\bFAILED\b|\bpanic:|\bfatal:|\bException\b|\bERROR\b")
# Line-anchored test patterns start with "\n" and run on "\n" + body: a literal first character lets
# the regex engine skip ahead, where "^" under re.M tries every position (several times slower).
_TEST_COUNT_RE = re.compile(r"\b\d+[ \t]+(?:passed|failed|errors?)\b")  # pytest
# Its last match is looked for in the reversed text, one pattern per word: each starts with the reversed
# word (a literal the regex engine scans for; the count's digits first would be a class tried at every
# character) and the first match in the reversed text is the last one in the text (matches cannot
# overlap: each ends with its word, and the next needs a boundary before its digits).
_TEST_COUNT_REVERSED = tuple(re.compile(word + r"[ \t]+\d+\b") for word in (
    r"dessap(?<!\wdessap)", r"deliaf(?<!\wdeliaf)", r"rorre(?:(?<!\wrorre)|(?<=srorre)(?<!\wsrorre))"))
_TEST_SUMMARY_RE = re.compile(
    r"\ntest result: .*$"  # cargo
    r"|\nTests?:\s+.*$"  # jest
    r"|\n\s*\d+\s+(?:passing|failing)\b.*$"  # mocha
    r"|\n(?:ok|FAIL)\s+\S+\s+(?:[\d.]+s|\(cached\)|\[[^\]]*\]).*$|\n(?:PASS|FAIL)$",  # go
    re.M,
)
_TAP_COUNT_RE = re.compile(r"\n# (tests|pass|fail) (\d+)$", re.M)  # the last of each wins (dict)
_UNITTEST_RAN_RE = re.compile(r"\n(Ran \d+ tests? in .*)$", re.M)
_UNITTEST_STATUS_RE = re.compile(r"\n((?:OK|FAILED)\b.*)$", re.M)
_FAILED_NAME_RE = re.compile(
    r"\n(?:FAILED|ERROR)\s+(?!\()(\S+)"  # pytest short summary
    r"|\n--- FAIL: (\S+)"  # go
    r"|\ntest (\S+) \.\.\. FAILED"  # cargo
    r"|\n(?:FAIL|ERROR): (\w+)"  # unittest
    r"|\n\s*● (.+?)\s*$",  # jest
    re.M,
)
_ASSERT_LINE_RE = re.compile(r"\nE\s+(\S.*)$", re.M)
_ADDED_RE = re.compile(r"^\+(?!\+\+ )", re.M)
_REMOVED_RE = re.compile(r"^-(?!-- )", re.M)
_HUNK_RE = re.compile(r"^@@ ", re.M)
_SYMBOL_RE = re.compile(
    r"^[+\- ]?\s*(?:export\s+)?(?:pub\s+)?(?:async\s+)?"
    r"(?:def|class|func|fn|function|interface|struct|enum|trait|impl|type)\s+([A-Za-z_]\w*)",
    re.M,
)
_TAG_RE = re.compile(r"</?(?:tool_use_error|task-notification|task-id|system-reminder|status|result)>")


def _one_line(text: str) -> str:
    return " ".join(text.split())  # str.split's white space is re's \s


def _cut(text: str, n: int) -> str:
    if n <= 0:
        return ""
    return text if len(text) <= n else text[: n - 1].rstrip() + ELL


def _cut_left(text: str, n: int) -> str:
    return text if len(text) <= n else ELL + text[-(n - 1) :]


def _body_text(el: Element) -> str:
    """The element's text without the transcript's ``"<Tool>: <target>"`` first line."""
    text = el.text
    if el.kind in _PROSE and not el.tool:
        return text
    first, _, rest = text[:1024].partition("\n")
    if first.startswith(f"{el.tool or 'tool_result'}:"):
        return text[len(first) + 1 :]
    return text


def _header(el: Element) -> str:
    tag = el.kind.value
    if el.kind is Kind.TEST_RESULT or (el.passed is not None):
        tag += " FAILED" if (el.passed is False or el.is_error) else (" passed" if el.passed else "")
    elif el.is_error and el.kind is not Kind.ERROR:
        tag += " error"
    head = f"[{tag}]"
    target = ""
    if el.file_path:
        target = _cut_left(el.file_path, TARGET_CHARS)
    elif el.command:
        target = _cut(_one_line(el.command), TARGET_CHARS)
    if el.tool:
        return f"{head} {el.tool}: {target}" if target else f"{head} {el.tool}"
    return f"{head} {target}" if target else head


def _nonempty_lines(text: str, n: int, from_end: bool = False) -> list[str]:
    lines = text.splitlines()
    if from_end:
        lines = lines[::-1]
    out: list[str] = []
    for line in lines:
        s = line.strip()
        if s:
            out.append(s)
            if len(out) >= n:
                break
    return out


def _line_at(body: str, m: re.Match[str]) -> tuple[int, int]:
    """(start, end) of the line holding match ``m``."""
    stop = body.find("\n", m.end())
    return body.rfind("\n", 0, m.start()) + 1, len(body) if stop < 0 else stop


def _last_match(pattern: re.Pattern[str], text: str, chunk: int = 2048) -> re.Match[str] | None:
    """The last match of ``pattern`` in ``text``, scanning line-aligned chunks from the end (a test
    runner's verdict is near the end, so this usually reads one chunk). Matches must not span lines."""
    end = len(text)
    while end > 0:
        start = max(0, text.rfind("\n", 0, max(0, end - chunk)))
        m = None
        for m in pattern.finditer(text, start, end):
            pass
        if m is not None:
            return m
        end = start
    return None


def _last_count(text: str) -> re.Match[str] | None:
    """The last match of :data:`_TEST_COUNT_RE` in ``text`` (``3 passed``, ``1 failed``, ``2 errors``)."""
    rev = text[::-1]
    first = min((m.end() for rx in _TEST_COUNT_REVERSED if (m := rx.search(rev)) is not None), default=-1)
    return None if first < 0 else _TEST_COUNT_RE.match(text, len(text) - first)


def _lines_of(pattern: re.Pattern[str], body: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each distinct line of ``body`` holding a match of ``pattern``, in order."""
    pos = 0
    while (m := pattern.search(body, pos)) is not None:
        start, stop = _line_at(body, m)
        yield start, stop
        pos = stop + 1


def _error_lines(text: str) -> list[str]:
    body = clip(text)
    if "Traceback (most recent call last)" in body:
        tb = body[body.rfind("Traceback (most recent call last)") :]
        exc = _PY_EXC_RE.findall(tb)
        frames = _PY_FRAME_RE.findall(tb)
        out: list[str] = []
        if exc:
            out.append(exc[-1].strip())
        if frames:
            path, line, func = frames[-1]
            out.append(f"at {path.rsplit('/', 1)[-1]}:{line}" + (f" in {func}" if func else ""))
        if out:
            return out
    found: list[str] = []
    for start, end in _lines_of(_ERR_WORD_RE, body):
        s = body[start:end].strip()
        if s not in found:
            found.append(s)
            if len(found) >= 2:
                break
    return found or _nonempty_lines(body, 2)


def _test_lines(el: Element, text: str) -> list[str]:
    body = clip(text)
    out: list[str] = []
    nb = "\n" + body
    summary = None
    found = _last_match(_TEST_SUMMARY_RE, nb)
    if "passed" in nb or "failed" in nb or "error" in nb:
        count = _last_count(nb)
        if count is not None and (found is None or count.start() > found.start()):
            start, end = _line_at(nb, count)
            summary = nb[start:end]
    if summary is None and found is not None:
        summary = found.group(0)
    if summary is None:
        ran = _UNITTEST_RAN_RE.findall(nb)
        status = _UNITTEST_STATUS_RE.findall(nb)
        if ran or status:
            summary = " ".join(x[-1] for x in (ran, status) if x)
    if summary is None and "\n# tests " in nb:  # TAP (node --test): "# tests 6", "# pass 4", "# fail 2" lines
        counts = dict(_TAP_COUNT_RE.findall(nb))
        summary = ", ".join(f"{word} {counts[word]}" for word in ("tests", "pass", "fail") if word in counts)
    if summary:
        out.append(summary.strip().strip("=").strip())
    names: list[str] = []
    for m in _FAILED_NAME_RE.finditer(nb):
        name = next(g for g in m.groups() if g)
        if name not in names:
            names.append(name)
            if len(names) >= 3:
                break
    if not names and el.passed is not True:  # mocha, rspec, phpunit, dotnet, Maven, Gradle, nextest ...
        names = testfail.failing_tests(body)[:3]
    if names:
        out.append("failed: " + ", ".join(names))
    if el.passed is not True:
        a = _ASSERT_LINE_RE.search(nb)
        if a:
            out.append(a.group(1))
        elif not names and (el.passed is False or el.is_error):
            out.extend(_error_lines(body)[:1])
    return out or _nonempty_lines(body, 1, from_end=True)


def _code_lines(el: Element, text: str) -> list[str]:
    body = clip(text)
    added = len(_ADDED_RE.findall(body))
    removed = len(_REMOVED_RE.findall(body))
    out: list[str] = []
    if _HUNK_RE.search(body) or added or removed:
        out.append(f"+{added} -{removed} lines")
    elif body.strip():
        n = body.count("\n") + (not body.endswith("\n"))
        out.append(f"{n} lines written" if el.tool == "Write" else f"{n} lines")
    symbols: list[str] = []
    for m in _SYMBOL_RE.finditer(body):
        if m.group(1) not in symbols:
            symbols.append(m.group(1))
            if len(symbols) >= 4:
                break
    if symbols:
        out.append("symbols: " + ", ".join(symbols))
    return out


def _tool_lines(el: Element, text: str) -> list[str]:
    body = clip(text)
    if not body.strip():
        return ["(no output)"]
    n = body.count("\n") + (not body.endswith("\n"))
    tool = el.tool or ""
    if tool == "Read":
        return [f"{n} lines"]
    if tool in ("Grep", "Glob"):
        return [f"{n} results", *_nonempty_lines(body, 1)]
    if tool == "Bash":
        first = _nonempty_lines(body, 1)
        last = _nonempty_lines(body, 1, from_end=True)
        return first + [x for x in last if x not in first]
    return _nonempty_lines(body, 2)


def _prose_lines(el: Element, text: str) -> list[str]:
    head = text[:PROSE_SCAN]
    facts = detect_facts(head)
    tagged = el.kind not in _FACT_KINDS
    out = [f"{k.value}: {s}" if tagged else s for k, s in facts[:2]]
    used = {s for _, s in facts[:2]}
    for s in sentences(head, limit=8):
        if len(out) >= MAX_LINES:  # the header shares the first line
            break
        if s not in used and not any(s in u for u in used):
            out.append(s)
            used.add(s)
    return out


def _fit(lines: list[str], trailer: str, max_chars: int) -> str:
    if max_chars <= 0:
        return ""
    budget = max_chars - len(trailer)
    if budget < 8:  # no room for content: the reference alone, or a cut header
        return trailer.strip()[:max_chars] if trailer else _cut(lines[0], max_chars)
    out: list[str] = []
    used = 0
    for line in lines[:MAX_LINES]:
        room = budget - used - (1 if out else 0)
        if out and room < 8:
            break
        piece = _cut(line, room)
        out.append(piece)
        used += len(piece) + (1 if len(out) > 1 else 0)
        if len(piece) < len(line):
            break
    return "\n".join(out) + trailer


def summarize(el: Element, *, l2_id: int | str | None = None, max_chars: int = 280) -> str:
    """A deterministic extractive L1 summary of ``el`` (see the module rules)."""
    text = _body_text(el)
    if el.kind is Kind.ERROR or (el.is_error and el.kind is not Kind.TEST_RESULT):
        body = _error_lines(text)
    elif el.kind is Kind.TEST_RESULT:
        body = _test_lines(el, text)
    elif el.kind is Kind.CODE_CHANGE:
        body = _code_lines(el, text)
    elif el.kind in _PROSE:
        body = _prose_lines(el, text)
    else:
        body = _tool_lines(el, text)
    header = _one_line(_header(el))
    lines = [y for y in (_one_line(_TAG_RE.sub(" ", x)) for x in body) if y]
    if lines and not el.tool and not el.file_path and not el.command:
        lines[0] = f"{header} {lines[0]}"  # prose: the first sentence shares the header line
    else:
        lines.insert(0, header)
    trailer = f" [L2 #{_one_line(str(l2_id))}]" if l2_id is not None else ""
    return _fit(lines, trailer, max_chars)


def snippet(text: str, terms: list[str], width: int = 160) -> str:
    """A window of at most ``width`` characters around the earliest match of any term (see rules)."""
    if not text or width <= 0:
        return ""
    words = sorted({t.strip() for t in terms if t and t.strip()}, key=len, reverse=True)
    rx = re.compile("|".join(re.escape(t) for t in words), re.I) if words else None
    m = rx.search(text) if rx else None
    region_start = max(0, m.start() - 2 * width) if m else 0
    region_end = (m.end() if m else 0) + 3 * width
    flat = _one_line(text[region_start:region_end])
    m2 = rx.search(flat) if (rx and m) else None
    start = 0
    if m2:
        start = max(0, m2.start() - max(0, width - (m2.end() - m2.start())) // 3)
        if start and flat[start - 1].isalnum() and flat[start].isascii() and flat[start].isalnum():
            sp = flat.find(" ", start, m2.start())
            if sp != -1:
                start = sp + 1
    lead = ELL if (region_start > 0 or start > 0) else ""
    more = region_end < len(text)
    room = width - len(lead)
    body = flat[start:]
    if len(body) > room or more:
        body = body[: max(0, room - 1)].rstrip() + ELL
    return (lead + body)[:width]
