"""The category matrix: per task phase, keep / summarize / archive / discard for each kind of element.

This module owns the design's phase table ("阶段感知优先级"): what each phase keeps and what it archives.
Everything that decides what survives reads it: compression (``classify`` ranks with it), the
``/compact <focus>`` line (:func:`focus_line`), the must-survive set that PostCompact diffs and
re-injects (:func:`survive_limits`), what SessionStart(compact) lists (:func:`listed`), and live
compression of tool output (:func:`treatment`: verbatim or digest).

Rules:
- Pure: no I/O, no clock. A :class:`Matrix` is frozen; :func:`with_overrides` makes a new one.
- Rows (:data:`ROWS`) are kinds of element: the :class:`~ctxlifed.core.model.Kind` values, with TOOL
  split into ``explore`` (Read / Grep / Glob / WebSearch / WebFetch), ``bash`` and ``tool``, a Bash test
  run read as ``test_result`` and any failed call or edit read as ``error`` (:func:`row_of`).
  Columns are the phases of :data:`~ctxlifed.core.model.PHASES`. A cell is (priority 0..100, category).
- The default honours the design: planning keeps requirements (prompts) and constraints, archives
  exploration; design keeps decisions and interface contracts, archives alternatives (thinking);
  implementation keeps code changes and test results, archives design discussion (assistant text);
  testing keeps test results and errors, summarizes implementation detail (code changes); review keeps
  conclusions (assistant text) and requested changes (prompts), archives test detail.
- Overrides (config ``matrix``) set a cell's category; its priority is moved into the band of that
  category (:data:`BANDS`) so ranking and level cut-offs agree with it. Rows in :data:`NEVER_DISCARD`
  (decisions, constraints, pending items, errors, lessons, compact summaries, ledgers) cannot be set to
  discard: such an override is refused with :class:`MatrixError`, like an unknown phase, row or category.
- Must-survive kinds map onto rows (:data:`SURVIVE_ROWS`: goal = prompt, failing test = error, active
  file = code_change, ...). Per phase a kind whose cell is KEEP survives with up to :data:`KEEP_LIMIT`
  items, SUMMARIZE with up to :data:`SUMMARIZE_LIMIT`, ARCHIVE / DISCARD with none (it stays recallable
  in L2). The current phase always survives.
- :func:`focus_line` names what to keep concretely, from the session's real state: failing tests, files
  being changed, decisions, constraints, open items, each kind only where the phase keeps or summarizes
  its row (up to the kind's survive limit), taken round by round (the first of every kind, then the
  second ...), whole items only, within ``max_chars`` (:data:`FOCUS_MAX_CHARS`); it then says what may
  go (passing test output, build logs, rows the phase archives or discards) when that still fits.
  One line, no newline.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

import msgspec

from ctxlifed.core.commands import EXPLORE_TOOLS, is_test_command
from ctxlifed.core.model import PHASES, Category, Element, Kind

__all__ = [
    "BANDS",
    "DEFAULT",
    "FOCUS_MAX_CHARS",
    "KEEP_LIMIT",
    "NEVER_DISCARD",
    "ROWS",
    "SUMMARIZE_LIMIT",
    "SURVIVE_ROWS",
    "FocusState",
    "Matrix",
    "MatrixError",
    "Treatment",
    "category",
    "cell",
    "element_treatment",
    "focus_line",
    "listed",
    "parse_overrides",
    "row_of",
    "survive_limits",
    "treatment",
    "with_overrides",
]

K, S, A, D = Category.KEEP, Category.SUMMARIZE, Category.ARCHIVE, Category.DISCARD

Cell = tuple[int, Category]
Row = tuple[Cell, Cell, Cell, Cell, Cell]  # in PHASES order

# (priority, category) per phase: planning, design, implementation, testing, review
DEFAULT_CELLS: dict[str, Row] = {
    "prompt":          ((90, K), (85, K), (75, K), (75, K), (80, K)),
    "assistant":       ((55, S), (60, S), (35, A), (45, S), (75, K)),
    "thinking":        ((25, A), (30, A), (10, D), (10, D), (10, D)),
    "explore":         ((30, A), (35, A), (55, S), (30, A), (40, S)),
    "bash":            ((30, A), (30, A), (45, S), (45, S), (35, A)),
    "tool":            ((40, S), (40, S), (40, S), (40, S), (40, S)),
    "error":           ((85, K), (85, K), (90, K), (90, K), (80, K)),
    "code_change":     ((50, S), (50, S), (80, K), (50, S), (55, S)),
    "test_result":     ((40, S), (40, S), (80, K), (95, K), (35, A)),
    "decision":        ((95, K), (100, K), (95, K), (90, K), (95, K)),
    "constraint":      ((100, K), (95, K), (90, K), (90, K), (90, K)),
    "pending":         ((90, K), (90, K), (90, K), (90, K), (95, K)),
    "lesson":          ((85, K), (85, K), (90, K), (90, K), (85, K)),
    "compact_summary": ((100, K),) * 5,  # type: ignore[dict-item]
    "ledger":          ((100, K),) * 5,  # type: ignore[dict-item]
}  # fmt: skip
ROWS: tuple[str, ...] = tuple(DEFAULT_CELLS)

NEVER_DISCARD = frozenset({"decision", "constraint", "pending", "error", "lesson", "compact_summary", "ledger"})
# Priority band of each category: an override moves the cell's priority into it.
BANDS: dict[Category, tuple[int, int]] = {K: (80, 100), S: (40, 69), A: (20, 39), D: (0, 10)}

# Must-survive kinds (core/mustsurvive.py) -> the row that decides them.
SURVIVE_ROWS: dict[str, str] = {
    "goal": "prompt",
    "decision": "decision",
    "constraint": "constraint",
    "pending": "pending",
    "failing_test": "error",
    "active_file": "code_change",
}
KEEP_LIMIT = 8
SUMMARIZE_LIMIT = 3
FOCUS_MAX_CHARS = 300
FOCUS_ITEM_CHARS = 70

Treatment = Literal["verbatim", "digest"]


class MatrixError(ValueError):
    """An override names an unknown phase, row or category, or discards a never-discard row."""


class Matrix(msgspec.Struct, frozen=True):
    """The cells in use: :data:`DEFAULT` with any overrides applied."""

    cells: dict[str, Row]

    def cell(self, row: str, phase: str) -> Cell:
        return self.cells[row][_phase_index(phase)]


DEFAULT = Matrix(cells=dict(DEFAULT_CELLS))


def _phase_index(phase: str) -> int:
    try:
        return PHASES.index(phase)  # type: ignore[arg-type]
    except ValueError:
        raise ValueError(f"unknown phase: {phase!r}") from None


def _fit_band(prio: int, cat: Category) -> int:
    lo, hi = BANDS[cat]
    return min(hi, max(lo, prio))


def with_overrides(base: Matrix, overrides: Iterable[tuple[str, str, str]]) -> Matrix:
    """``base`` with ``(phase, row, category)`` overrides applied (module rules); raises MatrixError."""
    cells = {r: list(v) for r, v in base.cells.items()}
    for phase, row, cat_name in overrides:
        if phase not in PHASES:
            raise MatrixError(f"unknown phase {phase!r}; one of {', '.join(PHASES)}")
        if row not in cells:
            raise MatrixError(f"unknown kind {row!r}; one of {', '.join(ROWS)}")
        try:
            cat = Category(str(cat_name).strip().lower())
        except ValueError:
            raise MatrixError(f"unknown category {cat_name!r}; one of keep, summarize, archive, discard") from None
        if cat is D and row in NEVER_DISCARD:
            raise MatrixError(f"{row} is never discarded (use archive)")
        i = PHASES.index(phase)  # type: ignore[arg-type]
        cells[row][i] = (_fit_band(cells[row][i][0], cat), cat)
    return Matrix(cells={r: tuple(v) for r, v in cells.items()})  # type: ignore[misc]


def parse_overrides(value: object) -> tuple[tuple[str, str, str], ...]:
    """Overrides from config: a TOML table ``{phase: {kind: category}}`` or the environment's text
    ``"review.test_result=keep,planning.explore=discard"``. Checked against :data:`DEFAULT`
    (raises MatrixError), returned in a canonical sorted order."""
    out: list[tuple[str, str, str]] = []
    if isinstance(value, str):
        for part in value.replace(";", ",").split(","):
            part = part.strip()
            if not part:
                continue
            key, sep, cat = part.partition("=")
            phase, dot, row = key.strip().partition(".")
            if not sep or not dot:
                raise MatrixError(f"expected phase.kind=category, got {part!r}")
            out.append((phase.strip(), row.strip(), cat.strip()))
    elif isinstance(value, Mapping):
        for phase, rows in value.items():
            if not isinstance(rows, Mapping):
                raise MatrixError(f"matrix.{phase} must be a table of kind = category")
            out.extend((str(phase), str(row), str(cat)) for row, cat in rows.items())
    elif isinstance(value, (list, tuple)):
        for t in value:
            if not (isinstance(t, (list, tuple)) and len(t) == 3):
                raise MatrixError(f"expected (phase, kind, category), got {t!r}")
            out.append((str(t[0]), str(t[1]), str(t[2])))
    else:
        raise MatrixError("matrix must be a table {phase: {kind: category}}")
    canon = tuple(sorted((p, r, c.strip().lower()) for p, r, c in out))
    with_overrides(DEFAULT, canon)  # validate
    return canon


# --------------------------------------------------------------------------- per element


def row_of(el: Element) -> str:
    """The row that decides ``el`` (module rules)."""
    kind = el.kind
    if kind is Kind.TOOL:
        if el.is_error:
            return "error"
        if el.tool in EXPLORE_TOOLS:
            return "explore"
        if el.tool == "Bash":
            return "test_result" if el.command and is_test_command(el.command) else "bash"
        return "tool"
    if kind is Kind.CODE_CHANGE and el.is_error:
        return "error"
    return kind.value


def cell(row: str, phase: str, matrix: Matrix = DEFAULT) -> Cell:
    """(priority, category) of ``row`` in ``phase``; ValueError for an unknown phase, KeyError for a row."""
    return matrix.cell(row, phase)


def category(row: str, phase: str, matrix: Matrix = DEFAULT) -> Category:
    return matrix.cell(row, phase)[1]


def treatment(row: str, phase: str, matrix: Matrix = DEFAULT, *, failed: bool = False,
              passed: bool | None = None) -> Treatment:
    """Live compression's question: keep this output verbatim in the window, or replace it by a digest?

    ``row`` is an output kind (``explore``, ``bash``, ``test_result``, ``tool``, ``error``, or any row).
    Verbatim when the phase KEEPs the row; a failed call (``failed``) is read as ``error``; a passing
    test run (``passed is True``) is always digested (that it passed is what matters). An unknown
    phase or row is kept verbatim (never digest what cannot be judged)."""
    if failed:
        row = "error"
    elif row == "test_result" and passed is True:
        return "digest"
    try:
        return "verbatim" if matrix.cell(row, phase)[1] is K else "digest"
    except (KeyError, ValueError):
        return "verbatim"


def element_treatment(el: Element, phase: str, matrix: Matrix = DEFAULT) -> Treatment:
    """:func:`treatment` for one element."""
    return treatment(row_of(el), phase, matrix, failed=el.is_error, passed=el.passed)


# --------------------------------------------------------------------------- what survives


def _limit(cat: Category) -> int:
    return KEEP_LIMIT if cat is K else SUMMARIZE_LIMIT if cat is S else 0


def survive_limits(phase: str | None, matrix: Matrix = DEFAULT) -> dict[str, int]:
    """How many items of each must-survive kind survive a compaction in ``phase`` (module rules).
    Without a known phase every kind keeps :data:`KEEP_LIMIT`."""
    out: dict[str, int] = {"phase": 1}
    for kind, row in SURVIVE_ROWS.items():
        try:
            cat = matrix.cell(row, phase or "")[1]
        except ValueError:
            cat = K
        out[kind] = 1 if kind == "goal" and cat in (K, S) else _limit(cat)
    return out


def listed(category_name: str | None) -> bool:
    """Whether an element of this stored category is listed as held in a compacted window
    (SessionStart(compact)): KEEP and SUMMARIZE are; ARCHIVE and DISCARD stay recallable only.
    An element never categorised (None) is listed."""
    return category_name in (None, "", K.value, S.value)


# --------------------------------------------------------------------------- the /compact focus line


class FocusState(msgspec.Struct, frozen=True, kw_only=True):
    """The session's real state that a focus line may name (each list most important first)."""

    files: Sequence[str] = ()  # files being changed
    failing_tests: Sequence[str] = ()
    decisions: Sequence[str] = ()  # this phase's
    constraints: Sequence[str] = ()
    pending: Sequence[str] = ()


# (label, FocusState field, row deciding it)
_FOCUS_PARTS: tuple[tuple[str, str, str], ...] = (
    ("failing tests", "failing_tests", "error"),
    ("files being changed", "files", "code_change"),
    ("decisions", "decisions", "decision"),
    ("constraints", "constraints", "constraint"),
    ("open items", "pending", "pending"),
)
# What a phase may let go, named when the matrix discards or archives the row there.
_ALWAYS_DROP = ("passing test output", "successful build logs")  # classify discards these in every phase
_DROP_LABELS: dict[str, str] = {
    "bash": "command logs",
    "explore": "exploratory reads",
    "assistant": "design discussion",
    "thinking": "old reasoning",
}


def _short(text: str, limit: int) -> str:
    s = " ".join(str(text or "").split()).replace(";", ",").rstrip(" .。;；,，")
    return s if len(s) <= limit else s[: limit - 1].rstrip() + "…"


def focus_line(phase: str | None, state: FocusState, matrix: Matrix = DEFAULT, *,
               max_chars: int = FOCUS_MAX_CHARS) -> str:
    """The text after ``/compact``: what to keep, concretely (module rules). Never empty."""
    parts: list[tuple[str, list[str]]] = []
    for label, field, row in _FOCUS_PARTS:
        try:
            cat = matrix.cell(row, phase or "")[1]
        except ValueError:
            cat = K
        if cat not in (K, S):
            continue
        items = [_short(x, FOCUS_ITEM_CHARS) for x in getattr(state, field)]
        items = list(dict.fromkeys(x for x in items if x))[: _limit(cat)]
        if items:
            parts.append((label, items))
    lead = f"Keep the {phase} work" if phase else "Keep the current work"
    chosen: list[list[str]] = [[] for _ in parts]

    def render(sel: list[list[str]]) -> str:
        segs = [f"{label}: {', '.join(items)}" for (label, _), items in zip(parts, sel) if items]
        return "; ".join([lead, *segs])

    # Round by round: the first item of every kind, then the second ..., whole items only.
    for rnd in range(KEEP_LIMIT):
        for i, (_, items) in enumerate(parts):
            if rnd < len(items) and len(chosen[i]) == rnd:
                trial = [list(c) for c in chosen]
                trial[i].append(items[rnd])
                if len(render(trial)) <= max_chars:
                    chosen = trial
    out = render(chosen)
    drops = list(_ALWAYS_DROP)
    for row, label in _DROP_LABELS.items():
        try:
            cat = matrix.cell(row, phase or "")[1]
        except ValueError:
            continue
        if cat in (A, D):
            drops.append(label)
    if drops:
        for n in range(len(drops), 0, -1):
            cand = f"{out}; may drop {', '.join(drops[:n])}"
            if len(cand) <= max_chars:
                out = cand
                break
    return out if len(out) <= max_chars else out[: max_chars - 1] + "…"
