"""What was actually lost: the must-survive set, its diff against a compaction summary, and re-injection.

Rules:
- Pure: no I/O, no clock (``ts`` is passed in), no logging. Same input -> same output, byte for byte.
- :func:`build` makes the must-survive set: at most one ``phase`` and one ``goal``, at most
  :data:`PER_KIND` decisions / constraints / failing tests / pending items / active files (the caller's
  order within a kind, most important first), fewer when ``limits`` says so (the category matrix:
  what the phase summarizes keeps a few, what it archives none), :data:`MAX_ITEMS` in all, each text one line of at most
  :data:`MAX_TEXT` characters, deduplicated by id, sorted by :data:`WEIGHTS` (most important first).
- Stable ids: ``<kind>:<10 hex>`` = blake2b of the normalised text (NFKC, case-folded, whitespace
  collapsed, trailing punctuation dropped; paths normalised). The same item gets the same id in every
  compaction, so "delivered before" can be remembered.
- :func:`carried` (deterministic). Sources, each checked on its own (tokens are never pooled across
  sources): the summary with its ``<analysis>`` block removed (Claude Code drops it from the window),
  the re-attached instruction text (root CLAUDE.md, unscoped rules, auto memory), and ctxlifed's own
  context already injected after this compaction. By kind:
  - ``active_file``: among the re-attached files (equal, or one path ends with the other), or the
    path, its last two components, or its basename (unless generic: ``__init__.py``, ``index.ts`` ...)
    appears in a source with non-word characters around it.
  - ``failing_test``: a test function name appears as a word: the ``::`` ids' last part
    (``a.py::test_x[p]`` -> ``test_x``), else ``test_*`` / ``Test*`` / ``*_test`` words that are not a
    file stem; without a name, the test file name (``test_a.py``); without either, the prose rule.
  - ``phase``: a source says "phase: X", "phase X" or "X phase" (incidental use of the word is not
    enough).
  - prose (``goal``, ``decision``, ``constraint``, ``pending``): the normalised text appears whole, or its
    significant tokens are covered: weighted coverage >= :data:`THRESHOLD` (0.6), and all of them when
    their weight is below :data:`SHORT_WEIGHT` (3). Tokens: lower-case Latin words minus English
    stopwords, fact markers (decided, todo, must, never, ...) and negations, lightly stemmed
    (implementing = implementation = implement), weight 1; code-like tokens (with a digit, ``_``, ``.``,
    ``/``, ``::`` or camelCase) weight 2, matched as substrings with non-word boundaries; Chinese,
    Japanese and Korean text: bigrams of each run after cutting out CJK stopwords (的, 了, 决定, 使用,
    必须, 需要 ...), weight 1, matched against every bigram of the source.
  Known failure modes: paraphrase with other words ("refuse" for "reject") -> reported lost and
  re-injected (safe: a few redundant tokens); the summary using the same words in another sense or
  negated ("we did not adopt X" for "adopt X") -> carried (negation is ignored), so not re-injected;
  CJK text rewritten with different characters -> lost.
- :func:`diff`: ``(kept, lost)``; an item not carried whose id is in ``already_delivered`` is in
  neither (it is never delivered twice); :func:`suppressed` lists those.
- :func:`plan_reinjection` / :func:`render_reinjection`: a factual lead line, then one line per lost item,
  most important first, whole lines only, within ``cap_tokens`` (estimate) and :data:`MAX_CHARS`; the
  ids of the items that made it in are returned so the caller can record them as delivered. No
  imperative phrasing (Claude Code distrusts orders in injected text).
- :class:`CompactionReport`: one per compaction, bounded lists; :func:`render_report` prints them newest
  first for ``ctxlifectl compactions``.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import math
import posixpath
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

import msgspec

from ctxlifed.core.model import estimate_tokens

__all__ = [
    "MAX_ITEMS",
    "PER_KIND",
    "THRESHOLD",
    "WEIGHTS",
    "CompactionReport",
    "Item",
    "ReAttached",
    "Reinjection",
    "build",
    "carried",
    "compaction_report",
    "coverage",
    "source",
    "diff",
    "item_id",
    "plan_reinjection",
    "reattached_from",
    "render_reinjection",
    "render_report",
    "suppressed",
]

ItemKind = Literal["phase", "goal", "decision", "constraint", "failing_test", "pending", "active_file"]
WEIGHTS: dict[str, int] = {
    "phase": 100,
    "goal": 95,
    "failing_test": 90,
    "constraint": 85,
    "decision": 80,
    "pending": 75,
    "active_file": 60,
}
LABELS: dict[str, str] = {
    "phase": "Current phase",
    "goal": "Goal",
    "failing_test": "Failing test",
    "constraint": "Constraint",
    "decision": "Decision",
    "pending": "Pending",
    "active_file": "Active file",
}
PER_KIND = 8
MAX_ITEMS = 40
MAX_TEXT = 240
THRESHOLD = 0.6
SHORT_WEIGHT = 3
MAX_SOURCE_CHARS = 400_000  # of each source text examined
MAX_CHARS = 9000
MAX_REPORT_LINES = 12
REPORT_LINE_CHARS = 120
LEAD = "ctxlifed: recorded before this compaction and not carried by its summary:"


class Item(msgspec.Struct, frozen=True):
    """One thing that must survive a compaction."""

    id: str
    kind: str  # ItemKind
    text: str
    weight: int


class ReAttached(msgspec.Struct, frozen=True):
    """What the window holds after a compaction besides the summary."""

    instructions_text: str = ""  # root CLAUDE.md, unscoped rules, auto memory (re-read from disk)
    files: tuple[str, ...] = ()  # recent files that come back (whole or as a path)
    skills: tuple[str, ...] = ()  # skills re-attached
    injected_text: str = ""  # ctxlifed's own context already injected after this compaction


def reattached_from(
    files_back: Iterable[str] = (),
    skills_kept: Iterable[str] = (),
    *,
    instructions_text: str = "",
    injected_text: str = "",
) -> ReAttached:
    """A :class:`ReAttached` from a survival simulation (``SurvivalReport.files_back()`` and the kept
    skill names) plus the re-read instruction text and ctxlifed's own post-compaction context."""
    return ReAttached(
        instructions_text=instructions_text,
        files=tuple(files_back),
        skills=tuple(skills_kept),
        injected_text=injected_text,
    )


class Reinjection(msgspec.Struct, frozen=True):
    text: str
    ids: list[str]  # items whose line is in ``text``, in order


class CompactionReport(msgspec.Struct, frozen=True, kw_only=True):
    """One compaction: sizes, what the must-survive diff found, what was re-injected (ids)."""

    ts: float
    trigger: str | None = None
    pre_tokens: int | None = None
    post_tokens: int | None = None
    archived: int = 0  # elements archived (L2) before it
    kept: list[str] = msgspec.field(default_factory=list)  # ids carried by the summary / re-attachments
    lost: list[str] = msgspec.field(default_factory=list)  # ids not carried (and not delivered before)
    reinjected: list[str] = msgspec.field(default_factory=list)  # ids actually delivered
    suppressed: list[str] = msgspec.field(default_factory=list)  # not carried, but delivered before
    dropped_skills: list[str] = msgspec.field(default_factory=list)
    lost_lines: list[str] = msgspec.field(default_factory=list)  # "Decision: …" for display


# --------------------------------------------------------------------------- normalisation

_WS = re.compile(r"\s+")
_TRAIL = re.compile(r"[\s.,;:!?。，；：！？、]+$")
_ANALYSIS = re.compile(r"<analysis>.*?</analysis>", re.S | re.I)


def _one_line(text: str, limit: int = MAX_TEXT) -> str:
    s = " ".join((text or "").split())  # str.split's white space is re's \s
    s = re.sub(r"<(/?)(system-reminder)", r"‹\1\2", s, flags=re.I)
    if len(s) > limit:
        s = s[: limit - 1].rstrip() + "…"
    return s


def _normalise(text: str) -> str:
    s = unicodedata.normalize("NFKC", text or "").casefold()
    return _TRAIL.sub("", " ".join(s.split()))


def _norm_path(path: str) -> str:
    p = path.strip().replace("\\", "/")
    return posixpath.normpath(p) if p else p


def item_id(kind: str, text: str) -> str:
    """``<kind>:<10 hex>`` from the normalised text (paths normalised for active files)."""
    key = _norm_path(text) if kind == "active_file" else _normalise(text)
    return f"{kind}:{hashlib.blake2b(key.encode('utf-8', 'replace'), digest_size=5).hexdigest()}"


# --------------------------------------------------------------------------- build


def build(
    phase: str | None = None,
    goal: str | None = None,
    decisions: Iterable[str] = (),
    constraints: Iterable[str] = (),
    failing_tests: Iterable[str] = (),
    pending: Iterable[str] = (),
    active_files: Iterable[str] = (),
    limits: Mapping[str, int] | None = None,
) -> list[Item]:
    """The must-survive set, most important first (module rules). ``limits``: items per kind, from the
    category matrix (``core.matrix.survive_limits``); a kind not named keeps its default."""
    lim = limits or {}

    def cap(kind: str, default: int) -> int:
        return max(0, min(default, int(lim.get(kind, default))))

    groups: list[tuple[str, Iterable[str], int]] = [
        ("phase", [phase] if phase else [], 1),
        ("goal", [goal] if goal else [], cap("goal", 1)),
        ("failing_test", failing_tests, cap("failing_test", PER_KIND)),
        ("constraint", constraints, cap("constraint", PER_KIND)),
        ("decision", decisions, cap("decision", PER_KIND)),
        ("pending", pending, cap("pending", PER_KIND)),
        ("active_file", active_files, cap("active_file", PER_KIND)),
    ]
    out: list[Item] = []
    seen: set[str] = set()
    for kind, texts, limit in groups:
        n = 0
        for raw in texts:
            if n >= limit or len(out) >= MAX_ITEMS:
                break
            text = _one_line(_norm_path(raw) if kind == "active_file" else str(raw or ""))
            if not text:
                continue
            iid = item_id(kind, text)
            if iid in seen:
                continue
            seen.add(iid)
            out.append(Item(id=iid, kind=kind, text=text, weight=WEIGHTS[kind]))
            n += 1
    out.sort(key=lambda i: -i.weight)  # stable
    return out


# --------------------------------------------------------------------------- tokens

_STOP_EN = frozenset(
    """a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing done down during each either etc few for from
    further had has have having he her here hers him his how i if in into is it its itself just let lets
    let's me more most my no nor not now of off on once only or other our ours out over own same she so
    some such than that the their them then there these they this those through to too under until up
    upon us very was we were what when where which while who whom why will with would you your yours
    via per into onto within without yet
    decided decide decides decision decisions chose choose chosen go going goes went use used uses using
    must should shall need needs needed required require requires never always don't dont do not cannot
    can't won't isn't aren't wasn't weren't todo fixme pending next step steps still open question
    questions issue constraint constraints rule rules note notes ok okay please""".split()
)
# CJK function words and fact markers cut out of a run before it is split into bigrams (longest first).
_STOP_CJK = sorted(
    """的 了 是 在 和 与 及 或 把 被 就 都 也 要 将 并 而 且 但 对 从 为 以 于 之 其 这 那 个 们 我们 你们 他们
    决定 决策 采用 选用 选择 使用 用 作为 必须 不要 不能 禁止 需要 应该 应当 可以 已经 还 没 没有 不 再 请
    待办 待定 下一步 未解决 约束 进行 一个 这个 那个 如果 因为 所以 但是 然后 以及 或者 并且 时候""".split(),
    key=len,
    reverse=True,
)
_STOP_CJK_RE = re.compile("|".join(re.escape(w) for w in _STOP_CJK))
_LATIN_RE = re.compile(r"[0-9A-Za-z_]+(?:(?:::|[./\-:])[0-9A-Za-z_]+)*")
_CAMEL_RE = re.compile(r"[a-z][A-Z]|[A-Z]{2}[a-z]")
_CJK_RUN_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")


def _stem(w: str) -> str:
    if len(w) <= 3 or not w.isalpha():
        return w
    s = w
    for suf, rep in (("ations", ""), ("ation", ""), ("ings", ""), ("ing", ""), ("ies", "i"), ("ied", "i"),
                     ("ed", ""), ("es", ""), ("s", "")):  # fmt: skip
        if s.endswith(suf):
            if suf == "s" and s.endswith("ss"):
                break
            if suf == "es" and not s[:-2].endswith(("s", "x", "z", "ch", "sh")):
                continue
            cand = s[: -len(suf)] + rep
            if len(cand) >= 3:
                s = cand
            break
    if len(s) > 3 and s.endswith("e"):
        s = s[:-1]
    elif len(s) > 3 and s.endswith("y"):
        s = s[:-1] + "i"
    return s


def _code_like(tok: str) -> bool:
    return any(c.isdigit() for c in tok) or any(c in tok for c in "_./:") or bool(_CAMEL_RE.search(tok))


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


@functools.lru_cache(maxsize=2048)
def _sig_tokens(text: str) -> dict[tuple[str, str], int]:
    """Significant tokens of an item: {(type, token): weight}; type in code / word / cjk. Cached (an
    item is compared with many texts): callers only read the dict."""
    t = unicodedata.normalize("NFKC", text)
    out: dict[tuple[str, str], int] = {}
    for m in _LATIN_RE.finditer(t):
        raw = m.group(0).strip("-.:/")
        if not raw:
            continue
        if _code_like(raw):
            out[("code", raw.lower())] = 2
            continue
        for low in raw.lower().split("-"):
            if low in _STOP_EN or len(low) < 2:
                continue
            out[("word", _stem(low))] = 1
    for run in _CJK_RUN_RE.findall(t):
        for seg in _STOP_CJK_RE.split(run):
            if not seg or (len(seg) == 1 and _STOP_CJK_RE.fullmatch(seg)):
                continue
            for bg in _bigrams(seg):
                out[("cjk", bg)] = 1
    return out


class _Source:
    """One text examined for carried items, indexed once."""

    def __init__(self, text: str) -> None:
        t = unicodedata.normalize("NFKC", (text or "")[:MAX_SOURCE_CHARS])
        self.lower = t.casefold()
        self.flat = _WS.sub(" ", self.lower)
        self.words: set[str] = set()
        for m in _LATIN_RE.finditer(t):
            for part in re.split(r"[^0-9A-Za-z_]+", m.group(0)):
                if part:
                    self.words.add(_stem(part.lower()))
                    self.words.add(part.lower())
        self.cjk: set[str] = set()
        for run in _CJK_RUN_RE.findall(t):
            self.cjk.update(_bigrams(run))
            self.cjk.update(run)  # single characters too

    def has_code(self, tok: str) -> bool:
        i = self.lower.find(tok)
        while i >= 0:
            before = self.lower[i - 1] if i > 0 else " "
            j = i + len(tok)
            after = self.lower[j] if j < len(self.lower) else " "
            if not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_"):
                return True
            i = self.lower.find(tok, i + 1)
        return False

    def has_word(self, w: str) -> bool:
        return w in self.words


def source(text: str) -> _Source:
    """``text`` indexed once for many :func:`coverage` calls against it."""
    return _Source(text)


def coverage(text: str, source: str | _Source) -> tuple[float, int]:
    """(weighted share of ``text``'s significant tokens found in ``source``, total weight)."""
    src = source if isinstance(source, _Source) else _Source(source)
    sig = _sig_tokens(text)
    total = sum(sig.values())
    if not total:
        return 0.0, 0
    got = 0
    for (typ, tok), w in sig.items():
        if typ == "code":
            hit = src.has_code(tok)
        elif typ == "word":
            hit = src.has_word(tok)
        else:
            hit = tok in src.cjk
        got += w if hit else 0
    return got / total, total


def _prose_carried(text: str, src: _Source) -> bool:
    flat = " ".join(unicodedata.normalize("NFKC", text).casefold().split())
    flat = _TRAIL.sub("", flat)
    if flat and flat in src.flat:
        return True
    cov, total = coverage(text, src)
    if not total:
        return False
    return cov >= 1.0 if total < SHORT_WEIGHT else cov >= THRESHOLD


# --------------------------------------------------------------------------- carried

_GENERIC = frozenset(
    """__init__.py __main__.py index.js index.ts index.tsx index.jsx index.html main.py main.go main.rs
    main.c main.cpp mod.rs lib.rs readme.md setup.py conftest.py makefile package.json cargo.toml
    pyproject.toml config.py settings.py utils.py util.py types.ts models.py views.py app.py test.py""".split()
)
_TEST_NAME_RE = re.compile(r"(?<![\w])(test_\w+|Test[A-Z0-9]\w*|\w+_test)(?![\w])(?!\.[A-Za-z])")
_TEST_FILE_RE = re.compile(r"[\w.-]*test[\w.-]*\.(?:py|js|ts|tsx|jsx|go|rs|rb|java|kt|cs|cpp|c)\b", re.I)


def _paths_match(a: str, b: str) -> bool:
    a, b = _norm_path(a), _norm_path(b)
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def _file_carried(path: str, srcs: Sequence[_Source], files: Sequence[str]) -> bool:
    p = _norm_path(path)
    if any(_paths_match(p, f) for f in files if f):
        return True
    parts = [x for x in p.lower().split("/") if x and x != "."]
    if not parts:
        return False
    needles = [p.lower()]
    if len(parts) >= 2:
        needles.append("/".join(parts[-2:]))
    if parts[-1] not in _GENERIC:
        needles.append(parts[-1])
    return any(s.has_code(n) for s in srcs for n in needles)


def _test_carried(text: str, srcs: Sequence[_Source]) -> bool:
    names: list[str] = []
    for tok in text.split():
        if "::" in tok:
            names.append(tok.split("::")[-1].split("[")[0].strip(",;:()"))
    if not names:  # a function name, not the stem of a file name (test_a.py)
        names = [m.group(1) for m in _TEST_NAME_RE.finditer(text)]
    names = [n.lower() for n in dict.fromkeys(names) if n]
    if names:
        return any(s.has_code(n) for s in srcs for n in names)
    files = [m.group(0).lower() for m in _TEST_FILE_RE.finditer(text)]
    if files:
        return any(s.has_code(f) for s in srcs for f in files)
    return any(_prose_carried(text, s) for s in srcs)


_PHASE_ZH = {"planning": "规划", "design": "设计", "implementation": "实现", "testing": "测试", "review": "评审"}


def _phase_carried(phase: str, srcs: Sequence[_Source]) -> bool:
    p = re.escape(_normalise(phase))
    pats = [re.compile(rf"phase\W{{0,3}}{p}\b|\b{p}\s+phase\b")]
    zh = _PHASE_ZH.get(_normalise(phase))
    if zh:
        pats.append(re.compile(rf"{zh}\s*阶段|阶段\W{{0,3}}{zh}"))
    return any(pat.search(s.lower) for s in srcs for pat in pats)


class _Sources:
    def __init__(self, summary: str, reattached: ReAttached | None) -> None:
        r = reattached or ReAttached()
        self.summary = _Source(_ANALYSIS.sub(" ", summary or ""))
        self.all = [self.summary]
        if r.instructions_text.strip():
            self.all.append(_Source(r.instructions_text))
        if r.injected_text.strip():
            self.all.append(_Source(r.injected_text))
        self.files = tuple(r.files)


def _carried(item: Item, s: _Sources) -> bool:
    if item.kind == "active_file":
        return _file_carried(item.text, s.all, s.files)
    if item.kind == "failing_test":
        return _test_carried(item.text, s.all)
    if item.kind == "phase":
        return _phase_carried(item.text, s.all)
    return any(_prose_carried(item.text, src) for src in s.all)


def carried(item: Item, summary_text: str, reattached: ReAttached | None = None) -> bool:
    """Whether the summary (or what Claude Code / ctxlifed re-attached) still carries ``item``."""
    return _carried(item, _Sources(summary_text, reattached))


def diff(
    items: Sequence[Item],
    summary: str,
    reattached: ReAttached | None = None,
    already_delivered: Iterable[str] = (),
) -> tuple[list[Item], list[Item]]:
    """(kept, lost) in the order of ``items``; ``lost`` leaves out ids already delivered."""
    s = _Sources(summary, reattached)
    done = set(already_delivered)
    kept: list[Item] = []
    lost: list[Item] = []
    for it in items:
        if _carried(it, s):
            kept.append(it)
        elif it.id not in done:
            lost.append(it)
    return kept, lost


def suppressed(items: Sequence[Item], kept: Sequence[Item], lost: Sequence[Item]) -> list[Item]:
    """Items in neither list of :func:`diff`: not carried, but delivered before."""
    ids = {i.id for i in kept} | {i.id for i in lost}
    return [i for i in items if i.id not in ids]


# --------------------------------------------------------------------------- re-injection


def _line(item: Item) -> str:
    return f"- {LABELS.get(item.kind, item.kind)}: {_one_line(item.text)}"


def _fits(lines: Sequence[str], cap_tokens: int) -> bool:
    text = "\n".join(lines)
    return estimate_tokens(text) <= cap_tokens and len(text) <= MAX_CHARS


def plan_reinjection(lost: Sequence[Item], cap_tokens: int = 600, *, ctl: str) -> Reinjection:
    """The re-injection text and the ids it carries (module rules); empty when nothing fits.
    ``ctl``: the ctxlifectl command as the model's shell can run it (named in the "more" line).

    Whole lines, most important first, stopping at the first line that does not fit; a first line
    larger than the whole budget is cut with '…'. When items are left out a last line says how many.
    """
    ranked = sorted(lost, key=lambda i: -i.weight)
    if not ranked or cap_tokens <= 0 or not _fits([LEAD], cap_tokens):
        return Reinjection("", [])
    lines = [LEAD]
    ids: list[str] = []
    for it in ranked:
        line = _line(it)
        if not _fits([*lines, line], cap_tokens):
            break
        lines.append(line)
        ids.append(it.id)
    if not ids:  # the most important item alone is over the budget: cut its text
        it = ranked[0]
        head = f"- {LABELS.get(it.kind, it.kind)}: "
        lo, hi, best = 1, len(it.text), ""
        while lo <= hi:
            mid = (lo + hi) // 2
            cand = head + _one_line(it.text[:mid]).rstrip("…") + "…"
            if _fits([*lines, cand], cap_tokens):
                best, lo = cand, mid + 1
            else:
                hi = mid - 1
        if not best:
            return Reinjection("", [])
        lines.append(best)
        ids.append(it.id)
    while len(ids) < len(ranked):
        tail = f"- … {len(ranked) - len(ids)} more: {ctl} compactions"
        if _fits([*lines, tail], cap_tokens):
            lines.append(tail)
            break
        if len(ids) == 1:
            break  # keep the one item rather than the count
        lines.pop()
        ids.pop()
    return Reinjection("\n".join(lines), ids)


def render_reinjection(lost: Sequence[Item], cap_tokens: int = 600, *, ctl: str) -> str:
    """The text of :func:`plan_reinjection` (use that to learn which ids were delivered)."""
    return plan_reinjection(lost, cap_tokens, ctl=ctl).text


# --------------------------------------------------------------------------- reports


def compaction_report(
    *,
    ts: float,
    trigger: str | None,
    pre_tokens: int | None,
    post_tokens: int | None,
    archived: int,
    kept: Sequence[Item],
    lost: Sequence[Item],
    reinjected: Sequence[str],
    suppressed_items: Sequence[Item] = (),
    dropped_skills: Sequence[str] = (),
) -> CompactionReport:
    """A bounded :class:`CompactionReport` (ids only, plus up to 12 short display lines of lost items)."""
    done = set(reinjected)
    lines = []
    for it in sorted(lost, key=lambda i: -i.weight)[:MAX_REPORT_LINES]:
        mark = "re-injected" if it.id in done else "not re-injected"
        lines.append(f"{LABELS.get(it.kind, it.kind)}: {_one_line(it.text, REPORT_LINE_CHARS)} ({mark})")
    return CompactionReport(
        ts=ts,
        trigger=trigger,
        pre_tokens=pre_tokens,
        post_tokens=post_tokens,
        archived=max(0, archived),
        kept=[i.id for i in kept][:MAX_ITEMS],
        lost=[i.id for i in lost][:MAX_ITEMS],
        reinjected=list(reinjected)[:MAX_ITEMS],
        suppressed=[i.id for i in suppressed_items][:MAX_ITEMS],
        dropped_skills=[_one_line(s, 80) for s in dropped_skills][:16],
        lost_lines=lines,
    )


def _iso(ts: float) -> str:
    if not isinstance(ts, (int, float)) or not math.isfinite(ts):
        return "?"
    try:
        return _dt.datetime.fromtimestamp(ts, tz=_dt.timezone.utc).strftime("%Y-%m-%dT%H:%MZ")
    except (OverflowError, OSError, ValueError):
        return "?"


def _tok(x: int | None) -> str:
    return "?" if x is None else f"{x:,}"


def render_report(reports: Sequence[CompactionReport]) -> str:
    """``ctxlifectl compactions``: newest first, one block per compaction."""
    if not reports:
        return "No compactions recorded."
    out: list[str] = []
    for r in sorted(reports, key=lambda r: -r.ts):
        out.append(
            f"{_iso(r.ts)}  {r.trigger or '?'}  {_tok(r.pre_tokens)} -> {_tok(r.post_tokens)} tokens  "
            f"archived {r.archived}  kept {len(r.kept)}  lost {len(r.lost)}  re-injected {len(r.reinjected)}"
            + (f"  delivered before {len(r.suppressed)}" if r.suppressed else "")
        )
        out += [f"  lost: {ln}" for ln in r.lost_lines]
        if len(r.lost) > len(r.lost_lines):
            out.append(f"  … {len(r.lost) - len(r.lost_lines)} more lost")
        if r.dropped_skills:
            out.append(f"  skills dropped by Claude Code: {', '.join(r.dropped_skills)}")
    return "\n".join(out)
