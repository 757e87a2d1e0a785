"""Phase-aware classification of context elements: facts, priority, category, ranking, compression plan.

Rules:
- Pure: no I/O, no clock (``now`` is passed in). Regexes are compiled at import; text is scanned only
  in its first and last :data:`SCAN_HEAD` / :data:`SCAN_TAIL` characters.
- :func:`detect_facts` finds sentences that are facts, one kind each (:func:`fact_kind`), checked in
  the order pending -> decision -> constraint (so "还没决定" is pending, not a decision):
  * pending: a label, not the bare word -- ``TODO:`` / ``FIXME:``, next step(s), ``Pending:``, still
    pending, still need(s) to, open question/issue:, not (yet) decided, haven't decided, left to do,
    ``- [ ]``, 待办, 待定, 待确认, 未解决, 下一步, 还没决定, 还需要 ...;
  * decision: a choice made -- we decided, decided to, decision:, let's go with / use / pick, we'll
    use / go with, we're going with, settled on, chose X over Y, opted for, use X instead of Y, we
    switched / migrated / replaced, let's switch to, 决定, 采用, 选用, 选择了, 改用, 换成, 改为, 切换到,
    就用, 定了 ... ("you decide", "up to you", 你来决定 hand the choice over: none);
  * constraint: an obligation on the work -- modal must / must not (not the epistemic "must be a bug",
    "must have been"), have to (not "has to do with"), shall, should never/always, "we never/always",
    never / always / do not / don't / avoid / make sure / ensure at the start of a clause (not followed
    by a third-person verb: "never calls" describes), is required / forbidden / not allowed, 必须, 务必,
    一定要, 千万, 切勿, 禁止, 严禁, 不得, 不允许, 只能, 不要, 不能 (not a capability: 不能处理), 别 at a
    clause start. A description ("The tests never touch Redis directly") is not a constraint.
  A question (:func:`is_question`: ends with ? / ？ / 吗 / 呢, or holds 要不要, 能不能, 是否, 可不可以 ...)
  is never a decision or a constraint, and a pending item only with an explicit label. A sentence
  whose ``;``-separated clauses are each a fact ("TODO: a; TODO: b") gives one item per clause. Fenced
  code is skipped; at most :data:`MAX_FACTS` facts of at most :data:`MAX_FACT_CHARS` characters each,
  deduplicated, in order of appearance.
- :func:`is_substantive` / :func:`pick_goal`: the goal is the first prompt that states a task, not an
  acknowledgement or a bare hand-off ("go ahead", "Good plan. Go ahead and implement it.", 好的，开始吧)
  nor a slash command: at least :data:`GOAL_MIN_WORDS` words (a CJK character counts half) remain
  once acknowledgement and hand-off words are cut. A later prompt that says the work turns to another
  task and states it (:func:`starts_new_task`: "Something else: ...", "a new task", "moving on", 换个任务,
  先不管 ...) replaces it; topic drift and a change of approach ("forget the cache, use a dict") do not. :func:`goal_text`: the goal without the
  sentences that are facts of their own (they are items of their own; a settled TODO must not linger in
  the goal), the whole prompt when what remains states no task.
- :func:`priority` / :func:`categorize` / :func:`rank` read the category matrix (``core/matrix.py``,
  :data:`TABLE` is its default; a config override is passed as ``matrix``) (rows: an element's
  kind, with TOOL split into exploration (Read/Grep/Glob/WebSearch/WebFetch), Bash, and other tools, and
  a failed tool call or edit read as an error). It honours the phase table of the design:
  planning keeps requirements (prompts) and constraints, archives exploration; design keeps decisions
  and interface contracts, archives alternatives (thinking); implementation keeps code changes and
  test results, archives design discussion (assistant text); testing keeps test results and errors,
  summarizes implementation detail (code changes); review keeps conclusions (assistant text) and
  requested changes (prompts), archives test detail.
- Overrides, in order: a passing test run (``passed is True``, not an error) -> DISCARD everywhere (the
  fact that it passed survives in its L1 summary); a successful build/install (Bash, see
  :func:`~ctxlifed.core.commands.is_build_command`) -> DISCARD; thinking bound for DISCARD that contains
  a fact -> ARCHIVE. Decisions, constraints, pending items, errors (any failed element), lessons,
  compact summaries and ledgers are never DISCARD and never below :data:`NEVER_DISCARD_FLOOR`.
  DISCARD only means "not offered by default": the original is always archived in L2.
- :func:`superseded_failures`: a failed test run that a later passing run covers is history: :func:`rank`
  archives it (recallable, never kept, summarized or listed as what the window held).
- :func:`rank` adds a recency bonus (:data:`RECENCY_BONUS`, halved every :data:`RECENCY_HALF_LIFE`
  seconds; none when ``ts`` is 0) capped at 100; a SUMMARIZE element that reaches :data:`KEEP_AT` is
  kept (what was just read is still being worked on). Sorted by priority, highest first, stable.
- :func:`plan_compression` per level: NONE keeps everything; L0_L1 moves SUMMARIZE / ARCHIVE / DISCARD
  elements out of L0; L1_L2 also summarizes KEEP below :data:`L1_L2_KEEP_MIN` and archives SUMMARIZE
  below :data:`L1_L2_SUMMARY_MIN`; L2_L3 does the same with :data:`L2_L3_KEEP_MIN` /
  :data:`L2_L3_SUMMARY_MIN` and promotes decisions, constraints, pending items and lessons to L3.
  Every uid in ``summarize``, ``archive`` or ``discard`` is archived to L2 with an L1 summary; only the
  ``summarize`` summaries are offered in the window.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

import msgspec

from ctxlifed.core import matrix as MX
from ctxlifed.core.commands import is_build_command
from ctxlifed.core.model import PHASES, Category, Element, Kind, Level

__all__ = [
    "TABLE",
    "CompressionPlan",
    "Ranked",
    "categorize",
    "clip",
    "detect_facts",
    "fact_kind",
    "is_substantive",
    "goal_text",
    "pick_goal",
    "is_question",
    "starts_new_task",
    "plan_compression",
    "priority",
    "rank",
    "sentences",
    "superseded_failures",
]

SCAN_HEAD = 64 * 1024
SCAN_TAIL = 64 * 1024
MAX_FACTS = 24
MAX_FACT_CHARS = 240
MIN_FACT_CHARS = 4

NEVER_DISCARD_FLOOR = 70
DISCARD_PRIORITY = 10
RECENCY_BONUS = 20
RECENCY_HALF_LIFE = 900.0  # seconds
KEEP_AT = 70
L1_L2_KEEP_MIN = 80
L1_L2_SUMMARY_MIN = 40
L2_L3_KEEP_MIN = 90
L2_L3_SUMMARY_MIN = 60

NEVER_DISCARD = frozenset(
    {Kind.DECISION, Kind.CONSTRAINT, Kind.PENDING, Kind.ERROR, Kind.LESSON, Kind.COMPACT_SUMMARY,
     Kind.LEDGER}
)  # fmt: skip
PROMOTE = frozenset({Kind.DECISION, Kind.CONSTRAINT, Kind.PENDING, Kind.LESSON})

# --------------------------------------------------------------------------- text helpers


def clip(text: str, head: int = SCAN_HEAD, tail: int = SCAN_TAIL) -> str:
    """The first ``head`` and last ``tail`` characters of ``text`` (all of it when short enough)."""
    if len(text) <= head + tail:
        return text
    return text[:head] + "\n" + text[-tail:]


_SENT_SPLIT_RE = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])")
_MARKER_RE = re.compile(r"^\s*(?:#{1,6}\s+|>\s*|[-*+•]\s+(?:\[[ xX]\]\s+)?|\d{1,3}[.)]\s+)*")
_FENCE_RE = re.compile(r"^\s*(?:```|~~~)")


def sentences(text: str, limit: int = 400) -> list[str]:
    """Lines split into sentences (EN ``.!?``, ZH ``。！？；``), list/heading markers stripped, fenced
    code and blank lines skipped; at most ``limit`` sentences."""
    out: list[str] = []
    fenced = False
    for line in text.splitlines():
        if _FENCE_RE.match(line):
            fenced = not fenced
            continue
        if fenced or not line.strip():
            continue
        for part in _SENT_SPLIT_RE.split(line):
            s = _MARKER_RE.sub("", part, count=1).strip().strip("*_").strip()
            if s:
                out.append(s)
                if len(out) >= limit:
                    return out
    return out


# --------------------------------------------------------------------------- facts

_PENDING_RE = re.compile(
    r"(?-i:\bTODO\b|\bFIXME\b)\s*[:：(（-]|^\s*(?-i:TODO|FIXME)\b|\bnext\s+steps?\b|^\s*pending\s*[:：]"
    r"|\bstill\s+pending\b|\bstill\s+(?:needs?|have|has)\s+to\b|\bopen\s+(?:question|issue)s?\s*[:：]"
    r"|\bnot\s+(?:yet\s+)?(?:decided|resolved)\b|\b(?:haven'?t|have\s+not|hasn'?t|has\s+not)\s+(?:yet\s+)?decided\b"
    r"|\bundecided\b|\bleft\s+to\s+do\b|\bremaining\s+(?:work|tasks?|items?)\s*[:：]"
    r"|^\s*[-*+]\s+\[\s\]\s"
    r"|待办|待定|待确认|待决定|未解决|未决定|还没(?:有)?决定|尚未决定|下一步|还需要|后续(?:要|需要)",
    re.I,
)
# A choice made: "we decided", "let's go with", "we'll use", "chose X over Y", "switched to" ...
_DECISION_RE = re.compile(
    r"\bwe(?:'ve|\s+have)?\s+decided\b|\b(?:i|we)\s+decided\b|\bdecided\s+to\b|\bdecision\s*[:：]"
    r"|\blet'?s\s+(?:go\s+with|use|pick|adopt|stick\s+with)\b"
    r"|\bwe(?:'ll|\s+will|'re\s+going\s+to|\s+are\s+going\s+to)\s+(?:use|go\s+with|adopt|stick\s+with)\b"
    r"|\bi(?:'ll|\s+will|'m\s+going\s+to|\s+am\s+going\s+to)\s+(?:go\s+with|adopt|stick\s+with)\b"
    r"|\b(?:we're|we\s+are|i'm|i\s+am)\s+going\s+with\b|\bsettled\s+on\b|\bwe\s+chose\b|\bchose\b.{1,80}?\bover\b"
    r"|\bopted\s+for\b|\bgo\s+with\b.{1,60}?\binstead\s+of\b|\buse\b.{1,60}?\binstead\s+of\b"
    r"|\bwe(?:'ve|\s+have)?\s+(?:now\s+)?(?:switched|migrated|replaced)\b"
    r"|\blet'?s\s+(?:switch|move|migrate)\s+to\b"
    r"|决定|决策|采用|选用|(?:我们|最终)选择|选择了|选择使用|改用|换成|改为|切换到|迁移到|就用|定了|选定",
    re.I,
)
# "You decide" / "up to you" hands the choice over: no decision was made.
_NOT_DECISION_RE = re.compile(r"\byou\s+decide\b|\bup\s+to\s+you\b|你(?:来)?决定|由你决定|你看着办", re.I)
# An obligation on the work: modal must / shall / have to, an imperative never / always / do not at the
# start of a clause, "is required" / "forbidden"; ZH 必须 / 不要 / 禁止 / 不能 / 务必 ... Not: epistemic
# "must be a bug", descriptions ("The tests never touch Redis"), "has to do with".
# A clause starts a line, follows a sentence end (so a whole message, not only a split sentence, is
# scanned the same way), a comma / semicolon / colon / dash, or a conjunction.
_CLAUSE = r"(?:^|(?<=[.!?。！？；])\s*|[,;:—–]\s*|\b(?:and|but|so|then|also|please)\s+)"
_CONSTRAINT_RE = re.compile(
    r"\bmust(?:\s+not|n'?t)?\b(?!\s+(?:have\s+(?:been|\w+(?:ed|en))|be\s+(?:a|an|the|because|due|why|that|"
    r"something|somewhere|what|it|caused|coming|related|wrong|broken|fine)\b))"
    r"|\b(?:has|have)\s+to\b(?!\s+do\s+with\b)|\bshall(?:\s+not|n'?t)?\b"
    r"|\bshould\s+(?:never|always)\b|\bwe\s+(?:never|always)\b(?!\s+(?:got|get|had|have|see|saw|knew|know)\b)"
    r"|" + _CLAUSE + r"(?:please\s+)?(?:never|always|do\s+not|don'?t|avoid|make\s+sure|be\s+sure\s+to|ensure)\b"
    r"(?!\s+(?:worry|know|think|see|understand|mind|care|bother|returns|raises|is|are|was|were|has|had|gets"
    r"|happens|works|seems|fails|contains|includes|calls|runs|used|been)\b)"
    r"|\b(?:is|are|be)\s+(?:required|mandatory|forbidden|prohibited|not\s+allowed)\b|\brequired\s+to\b"
    r"|\bnot\s+allowed\s+to\b|\bunder\s+no\s+circumstances\b"
    r"|必须|务必|(?<!不)一定要|千万(?:不要|别|不能|要)|切勿|禁止|严禁|不得(?!了)|不允许|不准|只能|不可以|约束\s*[:：]"
    r"|(?<!要)不要(?!紧)|(?<!能)不能(?!确定|理解|保证|处理|识别|解析|运行|工作|正常|连接|找到|打开|启动|编译|通过|加载|读取)"
    r"|(?:^|[，,；;：:])\s*别(?!的|人|名|处|称|致|说)",
    re.I,
)
# A question asks; it obliges or decides nothing (要不要 / 能不能 contain 不要 / 不能).
_QUESTION_RE = re.compile(
    r"[?？]\s*[\"'”’)）]*\s*$|[吗呢嘛]\s*[。.!！]?\s*$"
    r"|要不要|能不能|可不可以|是不是|需不需要|会不会|该不该|用不用|有没有|行不行|好不好|对不对|是否",
)
# An explicit pending label keeps a question as a pending item ("Open question: X?", "TODO: cache?").
_PENDING_LABEL_RE = re.compile(
    r"(?-i:\bTODO\b|\bFIXME\b)|\bopen\s+(?:question|issue)s?\s*[:：]|^\s*[-*+]\s+\[\s\]\s|待定|待确认|待决定", re.I
)
_FACT_RES: tuple[tuple[Kind, re.Pattern[str]], ...] = (
    (Kind.PENDING, _PENDING_RE),
    (Kind.DECISION, _DECISION_RE),
    (Kind.CONSTRAINT, _CONSTRAINT_RE),
)
_ANY_FACT_RE = re.compile("|".join(f"(?:{p.pattern})" for _, p in _FACT_RES), re.I | re.M)
_CHECKBOX_RE = re.compile(r"^\s*[-*+]\s+\[\s\]\s")


def _fact_text(s: str) -> str:
    s = " ".join(s.split())
    return s if len(s) <= MAX_FACT_CHARS else s[: MAX_FACT_CHARS - 1] + "…"


def is_question(sentence: str) -> bool:
    """True when ``sentence`` asks (ends with ? / ？ / 吗 / 呢, or holds 要不要, 能不能, 是否 ...)."""
    return bool(_QUESTION_RE.search(sentence.strip()))


def fact_kind(sentence: str) -> Kind | None:
    """The kind of fact one sentence states (pending, decision, constraint, checked in that order), or
    None. A question is a pending item only with an explicit label (TODO, open question:, 待定); it is
    never a decision or a constraint."""
    bare = _MARKER_RE.sub("", sentence, count=1) if not _CHECKBOX_RE.match(sentence) else sentence
    question = is_question(bare)
    if question and not _PENDING_LABEL_RE.search(sentence):
        return None
    if _PENDING_RE.search(sentence) or (_PENDING_RE.search(bare) and not question):
        return Kind.PENDING
    if question:
        return None
    if _DECISION_RE.search(bare) and not _NOT_DECISION_RE.search(bare):
        return Kind.DECISION
    if _CONSTRAINT_RE.search(bare):
        return Kind.CONSTRAINT
    return None


_COMPOUND_SPLIT_RE = re.compile(r";\s+")


def _clauses(sentence: str) -> list[str]:
    """A sentence whose ``;``-separated clauses are each a fact of its own ("TODO: a; TODO: b") as those
    clauses; any other sentence whole ("Never change charge(); three services call it")."""
    if "; " not in sentence:
        return [sentence]
    parts = [p for p in _COMPOUND_SPLIT_RE.split(sentence) if p.strip()]
    if len(parts) > 1 and all(fact_kind(p) is not None for p in parts):
        return parts
    return [sentence]


def detect_facts(text: str) -> list[tuple[Kind, str]]:
    """Decisions, constraints and pending items stated in ``text`` (see the module rules)."""
    body = clip(text) if text else ""
    if not _ANY_FACT_RE.search(body):
        return []
    out: list[tuple[Kind, str]] = []
    seen: set[str] = set()
    fenced = False
    for line in body.splitlines():
        if _FENCE_RE.match(line):
            fenced = not fenced
            continue
        if fenced or not line.strip():
            continue
        parts = [line] if _CHECKBOX_RE.match(line) else [c for p in _SENT_SPLIT_RE.split(line) for c in _clauses(p)]
        for part in parts:
            kind = fact_kind(part)
            if kind is None:
                continue
            s = _fact_text(_MARKER_RE.sub("", part, count=1).strip().strip("*_").strip())
            if len(s) < MIN_FACT_CHARS or s in seen:
                continue
            seen.add(s)
            out.append((kind, s))
            if len(out) >= MAX_FACTS:
                return out
    return out


# --------------------------------------------------------------------------- goal

GOAL_MIN_WORDS = 3  # content words (or CJK characters / 2) a prompt needs beyond acknowledgements
GOAL_SCAN = 2000
# Acknowledgements and hand-offs that carry no task of their own ("Good plan. Go ahead and implement it.").
_ACK_RE = re.compile(
    r"\b(?:ok(?:ay)?|yes|yep|yeah|sure|thanks?(?:\s+you)?|great|good|nice|perfect|cool|fine|lgtm|sounds?\s+good"
    r"|looks?\s+good(?:\s+to\s+me)?|good\s+(?:plan|idea|job|work)|great\s+(?:plan|idea|work)|agreed|approved"
    r"|go\s+ahead(?:\s+and)?|go\s+for\s+it|do\s+it|proceed|continue|carry\s+on|keep\s+going|please|now|then"
    r"|let'?s|let\s+us|start|begin|implement(?:ing)?|run|the|it|this|that|plan|design"
    r"|changes?|tests?|code|and|with|as|proposed|suggested|planned|described|above|same|again|next|one)\b"
    r"|好的?|好吧|可以|行|没问题|继续|开始|吧|了|按(?:这个|你的)?(?:计划|方案)|实现|照做|就这样|同意|谢谢|嗯|对",
    re.I,
)
_SLASH_RE = re.compile(r"^\s*(?:/[\w.:-]+|!?\s*ctxlifectl\b)")
_WORD_RE = re.compile(r"[A-Za-z][\w'-]*|\d+")
_CJK_RE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def is_substantive(prompt: str) -> bool:
    """True when a prompt states a task: not an acknowledgement or a bare hand-off ("go ahead",
    "Good plan. Go ahead and implement it.", "好的，开始吧"), not a slash command."""
    text = (prompt or "")[:GOAL_SCAN]
    if not text.strip() or _SLASH_RE.match(text):
        return False
    rest = _ACK_RE.sub(" ", text)
    words = len(_WORD_RE.findall(rest)) + len(_CJK_RE.findall(rest)) / 2
    return words >= GOAL_MIN_WORDS


# A prompt that says the work turns to another task ("Something else: ...", "a new task", "moving on",
# 换个任务, 先不管 ...): its request replaces the goal. Topic drift alone does not ("Now write tests for
# the edge cases" is the same task).
_NEW_TASK_RE = re.compile(
    r"\bsomething\s+(?:else|different)\b|\b(?:a\s+)?(?:new|different|separate|unrelated)\s+(?:task|topic"
    r"|request)\b|\banother\s+(?:task|topic)\b"
    r"|\b(?:moving|switching)\s+(?:on|gears)\b|\bon\s+(?:a|an(?:other)?)\s+(?:different|other|unrelated)?\s*(?:note|topic)\b"
    r"|换个(?:任务|话题|问题|事)|换一个(?:任务|话题|问题)|另(?:一|外一?)个(?:任务|问题|事)|新(?:的)?任务|先不管|别管(?:它|那个|这个)?了"
    r"|(?:这个|那个)?(?:先)?不做了|另外(?:有)?一件事",
    re.I,
)


def starts_new_task(prompt: str) -> bool:
    """True when a prompt says the work turns to another task (see ``_NEW_TASK_RE``) and states it."""
    return bool(_NEW_TASK_RE.search((prompt or "")[:GOAL_SCAN])) and is_substantive(prompt)


def pick_goal(prompts: list[str]) -> str | None:
    """The task's substantive request (oldest first): the first substantive prompt, replaced by a later
    one that starts another task (:func:`starts_new_task`); None when no prompt states a task."""
    goal = None
    for p in prompts:
        if (goal is None and is_substantive(p)) or (goal is not None and starts_new_task(p)):
            goal = p
    return goal


def goal_text(prompt: str) -> str:
    """The request of a goal prompt without the sentences that are facts of their own (a constraint, a
    pending item, a decision: each is an item of its own wherever the goal goes, and a settled one must
    not linger in the goal); the whole prompt when what remains states no task."""
    text = (prompt or "")[:GOAL_SCAN]
    kept = [sent for sent in sentences(text) if fact_kind(sent) is None]
    rest = " ".join(kept)
    return rest if kept and is_substantive(rest) else " ".join(text.split())


# --------------------------------------------------------------------------- table

K, S, A, D = Category.KEEP, Category.SUMMARIZE, Category.ARCHIVE, Category.DISCARD

# The kind x phase table is the category matrix (core/matrix.py owns it; config may override it).
TABLE = MX.DEFAULT_CELLS
_row = MX.row_of


def _phase_index(phase: str) -> int:
    try:
        return PHASES.index(phase)  # type: ignore[arg-type]
    except ValueError:
        raise ValueError(f"unknown phase: {phase!r}") from None


def _classify(el: Element, phase: str, matrix: MX.Matrix = MX.DEFAULT) -> tuple[int, Category]:
    row = _row(el)
    prio, cat = matrix.cell(row, phase)
    if row == "test_result" and el.passed is True and not el.is_error:
        prio, cat = DISCARD_PRIORITY, D
    elif row == "bash" and el.command and is_build_command(el.command):
        prio, cat = DISCARD_PRIORITY, D
    elif cat is D and el.kind is Kind.THINKING and _ANY_FACT_RE.search(el.text, 0, SCAN_HEAD):
        prio, cat = max(prio, 30), A
    if el.kind in NEVER_DISCARD or el.is_error:
        prio = max(prio, NEVER_DISCARD_FLOOR)
        if cat is D:
            cat = A
    return prio, cat


def priority(el: Element, phase: str, matrix: MX.Matrix = MX.DEFAULT) -> int:
    """Phase-aware priority in 0..100 (no recency; see :func:`rank`)."""
    return _classify(el, phase, matrix)[0]


def categorize(el: Element, phase: str, matrix: MX.Matrix = MX.DEFAULT) -> Category:
    """Phase-aware category: keep / summarize / archive / discard."""
    return _classify(el, phase, matrix)[1]


# --------------------------------------------------------------------------- ranking and plans


class Ranked(msgspec.Struct, frozen=True):
    """An element with its ranked priority (recency included) and category."""

    element: Element
    priority: int
    category: Category


class CompressionPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What to do with each element at one compression level (tuples of uids, most important first)."""

    level: Level
    keep: tuple[str, ...] = ()
    summarize: tuple[str, ...] = ()
    archive: tuple[str, ...] = ()
    discard: tuple[str, ...] = ()
    promote: tuple[str, ...] = ()

    @property
    def archived(self) -> tuple[str, ...]:
        """Every uid that leaves L0 (each is archived to L2 with an L1 summary)."""
        return self.summarize + self.archive + self.discard


def _recency(el: Element, now: float) -> int:
    if el.ts <= 0:
        return 0
    age = max(0.0, now - el.ts)
    return round(RECENCY_BONUS * 0.5 ** (age / RECENCY_HALF_LIFE))


def superseded_failures(elements: Iterable[Element],
                        covers: Callable[[str, str], bool] | None = None) -> frozenset[str]:
    """The uids of failed test runs that a later passing run covers (``elements`` oldest first): the
    same command, or ``covers(passing command, failed command)``. Such a failure is history, not the
    state of the work."""
    out: set[str] = set()
    failed: list[Element] = []
    for el in elements:
        if el.kind is not Kind.TEST_RESULT or not el.command:
            continue
        if el.passed is False:
            failed.append(el)
        elif el.passed:
            still = []
            for f in failed:
                if f.command == el.command or (covers is not None and covers(el.command, f.command or "")):
                    out.add(f.uid)
                else:
                    still.append(f)
            failed = still
    return frozenset(out)


def rank(elements: list[Element], phase: str, now: float, matrix: MX.Matrix = MX.DEFAULT, *,
         superseded: frozenset[str] = frozenset()) -> list[Ranked]:
    """Elements with priority (+ recency bonus) and category, most important first (stable); a failure
    in ``superseded`` (:func:`superseded_failures`) is archived, never kept or summarized."""
    _phase_index(phase)
    out: list[Ranked] = []
    for el in elements:
        prio, cat = _classify(el, phase, matrix)
        prio = min(100, prio + _recency(el, now))
        if el.uid in superseded:
            cat = A
        elif cat is S and prio >= KEEP_AT:
            cat = K
        out.append(Ranked(el, prio, cat))
    out.sort(key=lambda r: -r.priority)
    return out


_LEVEL_MINS: dict[Level, tuple[int, int]] = {
    Level.L0_L1: (0, 0),
    Level.L1_L2: (L1_L2_KEEP_MIN, L1_L2_SUMMARY_MIN),
    Level.L2_L3: (L2_L3_KEEP_MIN, L2_L3_SUMMARY_MIN),
}


def plan_compression(ranked: list[Ranked], level: Level) -> CompressionPlan:
    """Which elements stay, get an L1 summary, are archived only, discarded, or promoted to L3."""
    if level is Level.NONE:
        return CompressionPlan(level=level, keep=tuple(r.element.uid for r in ranked))
    keep_min, summary_min = _LEVEL_MINS[level]
    buckets: dict[Category, list[str]] = {K: [], S: [], A: [], D: []}
    promote: list[str] = []
    for r in ranked:
        cat = r.category
        if cat is K and r.priority < keep_min:
            cat = S
        elif cat is S and r.priority < summary_min:
            cat = A
        buckets[cat].append(r.element.uid)
        if level is Level.L2_L3 and r.element.kind in PROMOTE:
            promote.append(r.element.uid)
    return CompressionPlan(
        level=level,
        keep=tuple(buckets[K]),
        summarize=tuple(buckets[S]),
        archive=tuple(buckets[A]),
        discard=tuple(buckets[D]),
        promote=tuple(promote),
    )
