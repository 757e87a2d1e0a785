"""What a ``/compact`` would keep now: a simulator of Claude Code's re-attachment rules (spec §6).

Rules:
- Pure: no I/O, no clock (``now`` is passed in and only echoed), no logging. Same input -> same output.
- System prompt, tool definitions and output style are unchanged by a compaction (not simulated).
- Instructions (:func:`classify_instruction` gives the kind): ``root`` (project-root / ancestor
  CLAUDE.md, CLAUDE.local.md, imports), ``unscoped_rule`` (``.claude/rules`` without ``paths:``),
  ``auto_memory`` (``memory/MEMORY.md``) and ``user`` (memory_type User or Managed) are re-read from
  disk and survive whole; ``nested`` CLAUDE.md and ``path_rule`` (rules with ``paths:``) are lost until
  a matching file is read again.
- Files: a file read or changed several times counts once, at its latest touch (ties: later in the
  input is more recent). Its size is the tokens of its latest read or write (an edit only moves its
  time; a file only ever edited uses its largest edit as the size). The :data:`MAX_FILES` = 5 most recent
  come back: whole when at most :data:`FILE_MAX_TOKENS` = 5,000 tokens, else as a path only (the
  path-only file still uses one of the 5 places). Every older file is lost.
- Skills: a skill invoked several times counts once, at its latest invocation (its tokens). Most
  recently invoked first, each body is cut to its first :data:`SKILL_MAX_TOKENS` = 5,000 tokens (the
  end is cut) and added while the total stays within :data:`SKILL_BUDGET` = 25,000 tokens; a skill
  that does not fit is dropped whole (filled greedily newest first, so an older, smaller skill may
  still fit after a larger one was dropped). 8 skills of 4,000 tokens: the 6 newest fit (24,000),
  the 2 oldest are dropped.
- Output: :class:`SurvivalReport` with ``kept`` (whole, truncated or path-only) and ``lost`` (dropped or
  lost) entries, newest first within each kind, and human ``lines``: a summary line first, then one
  line per truncation, path-only file, dropped skill and lost file or instruction. Paths are shown
  relative to ``project_root`` when under it. Token figures are the caller's (estimates).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Sequence
from typing import Any, Literal, Protocol

import msgspec

from ctxlifed.core.model import estimate_tokens

__all__ = [
    "FILE_MAX_TOKENS",
    "MAX_FILES",
    "SKILL_BUDGET",
    "SKILL_MAX_TOKENS",
    "SURVIVING_KINDS",
    "Fate",
    "Instruction",
    "InstructionKind",
    "SurvivalReport",
    "classify_instruction",
    "display_path",
    "reattach_skills",
    "recent_files",
    "simulate",
]

MAX_FILES = 5
FILE_MAX_TOKENS = 5_000
SKILL_MAX_TOKENS = 5_000
SKILL_BUDGET = 25_000
MAX_LINES = 40  # human lines at most (the summary line included)

InstructionKind = Literal["root", "unscoped_rule", "auto_memory", "user", "nested", "path_rule"]
SURVIVING_KINDS: frozenset[str] = frozenset({"root", "unscoped_rule", "auto_memory", "user"})
FateName = Literal["kept", "truncated", "path_only", "dropped", "lost"]


class FileLike(Protocol):
    path: str
    tokens: int
    ts: float
    op: str


class SkillLike(Protocol):
    name: str
    tokens: int
    ts: float


class Instruction(msgspec.Struct, frozen=True, array_like=True):
    """An instruction file in the window: its path, kind (:data:`InstructionKind`) and tokens."""

    path: str
    kind: str
    tokens: int = 0


class Fate(msgspec.Struct, frozen=True):
    """What a compaction would do to one file, skill or instruction file."""

    kind: Literal["file", "skill", "instruction"]
    name: str  # path or skill name
    tokens: int  # what it holds in the window now (estimate)
    kept_tokens: int  # what comes back after the compaction (0 when lost)
    fate: FateName
    reason: str = ""
    ts: float = 0.0


class SurvivalReport(msgspec.Struct, frozen=True):
    """The simulated outcome of a compaction now."""

    at: float | None
    kept: list[Fate]
    lost: list[Fate]
    lines: list[str]
    kept_tokens: int  # sum of kept_tokens over ``kept``
    lost_tokens: int  # tokens that would not come back (tokens - kept_tokens over everything)

    def dropped_skills(self) -> list[str]:
        return [f.name for f in self.lost if f.kind == "skill"]

    def files_back(self) -> list[str]:
        """Paths of the files that come back (whole or as a path), newest first."""
        return [f.name for f in self.kept if f.kind == "file"]


# --------------------------------------------------------------------------- helpers


def _n(x: int) -> str:
    return f"{x:,}"


def _norm(path: str) -> str:
    return posixpath.normpath(path.replace("\\", "/")) if path else path


def display_path(path: str, project_root: str = "") -> str:
    """``path`` relative to ``project_root`` when it lies under it, else unchanged."""
    p = _norm(path)
    root = _norm(project_root).rstrip("/") if project_root else ""
    if root and root != "." and p.startswith(root + "/"):
        return p[len(root) + 1 :]
    return p


def _under(path: str, root: str) -> bool:
    return bool(root) and (path == root or path.startswith(root.rstrip("/") + "/"))


_AUTO_MEMORY_RE = re.compile(r"(?:^|/)memory/MEMORY\.md$")
_ROOT_NAMES = frozenset({"CLAUDE.md", "CLAUDE.local.md"})


def classify_instruction(
    path: str,
    memory_type: str | None,
    load_reason: str | None,
    project_root: str = "",
    *,
    globs: Sequence[str] | None = None,
) -> InstructionKind:
    """The survival kind of an instruction file, from the InstructionsLoaded fields (spec §1.3).

    Order: ``memory/MEMORY.md`` -> auto_memory; load_reason ``path_glob_match`` (or ``globs`` given) ->
    path_rule; ``nested_traversal`` -> nested; memory_type User / Managed -> user; a file under
    ``<root>/.claude/rules`` -> unscoped_rule (a scoped rule loads by path_glob_match); a CLAUDE.md deeper
    than the project root with no load reason known (a transcript attachment) -> nested; anything else
    loaded at session start, on compaction or by an import -> root.
    """
    p = _norm(path or "")
    mt = (memory_type or "").strip().lower()
    lr = (load_reason or "").strip().lower()
    if _AUTO_MEMORY_RE.search(p) or mt in ("automem", "auto_memory", "automemory"):
        return "auto_memory"
    if lr == "path_glob_match" or globs:
        return "path_rule"
    if lr == "nested_traversal":
        return "nested"
    if mt in ("user", "managed"):
        return "user"
    root = _norm(project_root).rstrip("/") if project_root else ""
    if root and _under(p, root + "/.claude/rules"):
        return "unscoped_rule"
    if not lr and root and _under(p, root):
        parent = posixpath.dirname(p)
        if posixpath.basename(p) in _ROOT_NAMES and parent not in (root, root + "/.claude"):
            return "nested"
    return "root"


# --------------------------------------------------------------------------- files


class _FileAgg(msgspec.Struct):
    path: str
    ts: float
    order: int
    size: int | None  # latest read / write
    edit_max: int


def recent_files(files: Iterable[FileLike]) -> list[tuple[str, int, float]]:
    """(path, size tokens, latest ts) per distinct path, most recent first (see the module rules)."""
    agg: dict[str, _FileAgg] = {}
    for i, f in enumerate(files):
        path = _norm(str(getattr(f, "path", "") or ""))
        if not path:
            continue
        ts = float(getattr(f, "ts", 0.0) or 0.0)
        tokens = max(0, int(getattr(f, "tokens", 0) or 0))
        op = str(getattr(f, "op", "read"))
        a = agg.get(path)
        if a is None:
            a = agg[path] = _FileAgg(path=path, ts=ts, order=i, size=None, edit_max=0)
        if (ts, i) >= (a.ts, a.order):
            a.ts, a.order = ts, i
        if op in ("read", "write"):
            a.size = tokens  # in input order: the latest read / write wins
        else:
            a.edit_max = max(a.edit_max, tokens)
    ranked = sorted(agg.values(), key=lambda a: (-a.ts, -a.order))
    return [(a.path, a.size if a.size is not None else a.edit_max, a.ts) for a in ranked]


def _files(files: Iterable[FileLike], root: str) -> tuple[list[Fate], list[Fate], list[str]]:
    kept: list[Fate] = []
    lost: list[Fate] = []
    lines: list[str] = []
    for i, (path, size, ts) in enumerate(recent_files(files)):
        shown = display_path(path, root)
        if i >= MAX_FILES:
            lost.append(Fate("file", path, size, 0, "lost", f"not among the {MAX_FILES} most recent files", ts))
            lines.append(f"{shown} ({_n(size)} tokens) would be lost: not among the {MAX_FILES} most recent files")
        elif size > FILE_MAX_TOKENS:
            kept.append(
                Fate("file", path, size, estimate_tokens(path), "path_only",
                     f"over {_n(FILE_MAX_TOKENS)} tokens", ts)
            )  # fmt: skip
            lines.append(f"{shown} ({_n(size)} tokens) comes back as a path only")
        else:
            kept.append(Fate("file", path, size, size, "kept", "recent file re-attached", ts))
    return kept, lost, lines


# --------------------------------------------------------------------------- skills


def _latest_skills(skills: Iterable[SkillLike]) -> list[tuple[str, int, float]]:
    latest: dict[str, tuple[float, int, int]] = {}
    for i, s in enumerate(skills):
        name = str(getattr(s, "name", "") or "?")
        ts = float(getattr(s, "ts", 0.0) or 0.0)
        tokens = max(0, int(getattr(s, "tokens", 0) or 0))
        old = latest.get(name)
        if old is None or (ts, i) >= (old[0], old[1]):
            latest[name] = (ts, i, tokens)
    ranked = sorted(latest.items(), key=lambda kv: (-kv[1][0], -kv[1][1]))
    return [(name, tokens, ts) for name, (ts, _i, tokens) in ranked]


def reattach_skills(skills: Iterable[SkillLike]) -> list[Fate]:
    """Every distinct skill's fate, newest first: kept / truncated (with ``kept_tokens``) or dropped."""
    out: list[Fate] = []
    used = 0
    for name, tokens, ts in _latest_skills(skills):
        cut = min(tokens, SKILL_MAX_TOKENS)
        if used + cut > SKILL_BUDGET:
            out.append(Fate("skill", name, tokens, 0, "dropped", f"over the {_n(SKILL_BUDGET)}-token skill budget", ts))
            continue
        used += cut
        if cut < tokens:
            why = f"cut to its first {_n(SKILL_MAX_TOKENS)} tokens"
            out.append(Fate("skill", name, tokens, cut, "truncated", why, ts))
        else:
            out.append(Fate("skill", name, tokens, cut, "kept", "re-attached", ts))
    return out


def _skills(skills: Iterable[SkillLike]) -> tuple[list[Fate], list[Fate], list[str]]:
    kept: list[Fate] = []
    lost: list[Fate] = []
    lines: list[str] = []
    for f in reattach_skills(skills):
        if f.fate == "dropped":
            lost.append(f)
            lines.append(f"skill {f.name} ({_n(f.tokens)} tokens) would be dropped: {f.reason}")
        else:
            kept.append(f)
            if f.fate == "truncated":
                lines.append(
                    f"skill {f.name} ({_n(f.tokens)} tokens) would be cut to its first {_n(f.kept_tokens)} tokens"
                )
    return kept, lost, lines


# --------------------------------------------------------------------------- instructions


def _instruction(x: Any) -> Instruction:
    if isinstance(x, Instruction):
        return x
    if isinstance(x, (tuple, list)):
        path, kind = str(x[0]), str(x[1])
        tokens = int(x[2]) if len(x) > 2 and x[2] is not None else 0
        return Instruction(path, kind, tokens)
    return Instruction(str(getattr(x, "path", "")), str(getattr(x, "kind", "root")), int(getattr(x, "tokens", 0) or 0))


_LOST_WHY = {
    "path_rule": ("path-scoped", "lost until a matching file is read"),
    "nested": ("nested", "lost until a file in its directory is read"),
}


def _instructions(instructions: Iterable[Any], root: str) -> tuple[list[Fate], list[Fate], list[str]]:
    kept: list[Fate] = []
    lost: list[Fate] = []
    lines: list[str] = []
    seen: set[str] = set()
    for x in instructions:
        ins = _instruction(x)
        path = _norm(ins.path)
        if not path or path in seen:
            continue
        seen.add(path)
        if ins.kind in SURVIVING_KINDS:
            kept.append(Fate("instruction", path, ins.tokens, ins.tokens, "kept", f"{ins.kind}: re-read from disk"))
        else:
            label, why = _LOST_WHY.get(ins.kind, (ins.kind, "lost"))
            lost.append(Fate("instruction", path, ins.tokens, 0, "lost", f"{label}: {why}"))
            lines.append(f"{display_path(path, root)} ({label}) {why}")
    return kept, lost, lines


# --------------------------------------------------------------------------- simulate


def simulate(
    *,
    files: Iterable[FileLike] = (),
    skills: Iterable[SkillLike] = (),
    instructions: Iterable[Instruction | tuple[str, str, int] | Any] = (),
    now: float | None = None,
    project_root: str = "",
) -> SurvivalReport:
    """Apply the compaction rules (module docstring) to what the window holds now.

    ``files``: FileTouch-like (path, tokens, ts, op); ``skills``: SkillUse-like (name, tokens, ts);
    ``instructions``: :class:`Instruction` or ``(path, kind, tokens)``.
    """
    fk, fl, flines = _files(files, project_root)
    sk, sl, slines = _skills(skills)
    ik, il, ilines = _instructions(instructions, project_root)
    kept = ik + sk + fk
    lost = il + sl + fl
    kept_tokens = sum(f.kept_tokens for f in kept)
    lost_tokens = sum(f.tokens - f.kept_tokens for f in kept) + sum(f.tokens for f in lost)
    n_files = len(fk) + len(fl)
    n_skills = len(sk) + len(sl)
    head = (
        "A /compact now keeps the system prompt and output style; "
        f"{len(ik)} of {len(ik) + len(il)} instruction files (re-read from disk), "
        f"{len(fk)} of {n_files} files, {len(sk)} of {n_skills} skills "
        f"({_n(kept_tokens)} tokens re-attached, {_n(lost_tokens)} not)."
    )
    body = slines + flines + ilines
    if len(body) > MAX_LINES - 1:
        more = len(body) - (MAX_LINES - 2)
        body = body[: MAX_LINES - 2] + [f"… {more} more"]
    return SurvivalReport(
        at=now, kept=kept, lost=lost, lines=[head, *body], kept_tokens=kept_tokens, lost_tokens=lost_tokens
    )
