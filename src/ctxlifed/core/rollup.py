"""Rolling up old session pages of the project memory into one history file.

Rules:
- Pure: no I/O, no clock. The service reads the pages and writes the files; this module decides and
  renders.
- A page is a phase hand-off page ctxlifed wrote (``render.render_phase_ledger``): its first line is
  the ``<!-- ctxlifed:ledger v1 session=… phase=… n=… -->`` comment. :func:`parse_page` reads what the
  history keeps of it (session, phase, number, time range, goal, counts of files, decisions, open
  items); anything else is not a page and is never rolled up.
- :func:`select` keeps the ``keep`` session folders with the newest pages and names the rest, oldest
  first; ties break by session id, so the choice is deterministic.
- :func:`history_entry` is one Markdown line per page, naming the archive id that still holds the
  whole page (``ctxlifectl recall --id N``); entries are appended to ``history.md`` under
  :data:`HISTORY_HEADER`, oldest first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import msgspec

HISTORY_NAME = "history.md"
HISTORY_HEADER = (
    "# Session history\n\n"
    "Older session pages, rolled up by ctxlifed (`ctxlifectl memory prune`): one line per phase page.\n"
    "Decisions are in decisions.md and lessons in lessons.md; the whole page stays searchable with\n"
    "`ctxlifectl recall --id <id>`. Edit freely.\n\n"
)
GOAL_CHARS = 160
PAGE_NAME = re.compile(r"^phase-(\d+)-([a-z]+)\.md$")
_HEAD = re.compile(r"^<!-- ctxlifed:ledger v1 session=(\S+) phase=(\S+) n=(\d+) -->$")
_TIME = re.compile(r"^- Time \(UTC\): (\S+) → (\S+)")


class Page(msgspec.Struct, frozen=True):
    """What the history keeps of one phase page."""

    session: str
    phase: str
    number: int
    start: str  # ISO minute as the page says it ("?" when missing)
    end: str
    goal: str
    files: int
    decisions: int
    unresolved: int


def parse_page(text: str) -> Page | None:
    """The :class:`Page` of a ctxlifed hand-off page, or None when ``text`` is not one."""
    lines = text.splitlines()
    m = _HEAD.match(lines[0].strip()) if lines else None
    if m is None:
        return None
    start = end = "?"
    sections: dict[str, list[str]] = {}
    current = ""
    for ln in lines[1:]:
        t = _TIME.match(ln)
        if t:
            start, end = t.group(1), t.group(2)
        if ln.startswith("## "):
            current = ln[3:].strip()
            sections[current] = []
        elif current and ln.strip():
            sections[current].append(ln.strip())

    def bullets(name: str) -> list[str]:
        return [b for b in sections.get(name, []) if b.startswith("- ")]

    goal = " ".join(sections.get("Goal", []))
    if goal == "_Not recorded._":
        goal = ""
    if len(goal) > GOAL_CHARS:
        goal = goal[: GOAL_CHARS - 1] + "…"
    return Page(session=m.group(1), phase=m.group(2), number=int(m.group(3)), start=start, end=end, goal=goal,
                files=len(bullets("Files changed")), decisions=len(bullets("Key decisions")),
                unresolved=len(bullets("Unresolved items")))


def select(folders: Iterable[tuple[str, float]], keep: int) -> list[str]:
    """Session ids to roll up, oldest first: all but the ``keep`` newest. ``folders`` holds
    ``(session id, time of its newest page)``."""
    ordered = sorted(folders, key=lambda f: (f[1], f[0]), reverse=True)
    return [sid for sid, _t in reversed(ordered[max(0, keep):])]


def history_entry(page: Page, archive_id: int | None) -> str:
    """One Markdown line for ``history.md`` (ends with a newline)."""
    when = page.start if page.end in ("?", page.start) else f"{page.start} → {page.end}"
    parts = [when, f"session `{page.session[:8]}`", f"phase {page.number} {page.phase}"]
    counts = [f"{n} {w}{'' if n == 1 else 's'}" for n, w in
              ((page.files, "file"), (page.decisions, "decision"), (page.unresolved, "open item")) if n]
    tail = (" — " + page.goal) if page.goal else ""
    ref = f" · `ctxlifectl recall --id {archive_id}`" if archive_id is not None else ""
    return f"- {' · '.join(parts + counts)}{tail}{ref}\n"


def history_text(existing: str | None, entries: Sequence[str]) -> str:
    """``history.md`` after appending ``entries`` (the header when the file is new)."""
    old = existing if existing else HISTORY_HEADER
    if not old.endswith("\n"):
        old += "\n"
    return old + "".join(entries)
