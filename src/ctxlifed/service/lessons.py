"""Lessons: error → fix pairs remembered per project, offered once per session when the error returns.

Rules:
- Fed with every (redacted) PostToolUse / PostToolUseFailure after it is committed and archived.
  Pairing and signatures are the pure core's (core.lessons); the core names the stored event ids
  (``Lesson.events``), and storing a lesson maps them to the archive ids of the items those events
  archived (``Lesson.evidence``): every ``#N`` a lesson prints resolves with ``ctxlifectl recall --id N``
  to the failure, fix step or success it names. An event whose item was not archived (an identical
  item already was) gives no id. A lesson stored before this rule (evidence without events) is read
  with its evidence taken as event ids and mapped the same way.
- One row per (project, signature) in ``lessons``; a repeat merges into it. Its full evidence is an
  L2 archive item (kind ``lesson``, recallable with ``type:lesson``), its short entry is in
  ``<project>/docs/memory/lessons.md`` (rewritten atomically; a hand edit is reconciled back).
- A known signature failing again is answered with ``additionalContext`` naming the earlier fix,
  ≤ 150 tokens, once per signature per session; the recorded lesson is quoted as data (it may be a
  hand edit of lessons.md), and its pointer is ``ctxlifectl recall --id <the lesson's archive id>``.
- :class:`Lessons` receives only what it uses (readers, writer, clock, and ``on_stored``: what to do
  when a project's lessons changed, i.e. rewrite its lessons.md after the reply) and owns its cache of
  "this project has (no) lessons" (:attr:`Lessons.known`). The SQL is ``store/lessons.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from ..core import lessons as LS
from ..core.hook_events import HookEvent, UnknownHook
from ..runtime.ctl import ctl_command
from ..store import lessons as store
from ..store.db import Readers, Writer

if TYPE_CHECKING:
    from .state import SessionState

KNOWN_TTL_S = 5.0  # how long "this project has (no) lessons" is trusted before asking the store again


@dataclass
class Lessons:
    """The lessons of every project, for the hook path and the ``lessons`` method."""

    readers: Readers
    writer: Writer
    clock: Callable[[], float]
    on_stored: Callable[[str], None]  # a project's lessons changed (called with the project)
    known: dict[str, tuple[bool, float]] = field(default_factory=dict)  # project -> (has lessons, checked at)

    async def on_tool_event(self, st: SessionState, hook: HookEvent | UnknownHook, event_id: int, now: float) -> str:
        """Advance the session's tracker; store completed lessons; return a hint for a known error (or '')."""
        ev = LS.classify_hook(hook, event_id=event_id, ts=now)
        hint = await self.hint_for(st, ev)
        await self.advance(st, ev, now)
        return hint

    async def may_hint(self, project: str) -> bool:
        """Whether a hint is possible at all: the project has a lesson. Answered from memory for
        ``KNOWN_TTL_S`` (a lesson stored here sets it at once), so the acknowledgement of a tool event
        in a project without lessons skips classifying it (its derivation does that)."""
        now = self.clock()
        known = self.known.get(project)
        if known is None or now - known[1] > KNOWN_TTL_S:
            known = (await self.count(project) > 0, now)
            self.known[project] = known
        return known[0]

    async def hint_for(self, st: SessionState, ev: LS.Ev | None) -> str:
        """The hint for a failure a lesson of this project already knows (once per signature per session)."""
        if ev is None or ev.kind != "fail":
            return ""
        _own_tracker(st)
        sig = ev.signature or LS.signature(ev.text, tool=ev.tool or None, command=ev.command or None,
                                           file_path=ev.file_path or None)
        if not sig or sig in st.lessons.hinted:
            return ""
        found = await self.readers.run(partial(store.with_archive_id, st.project, sig))
        if found is None:
            return ""
        known, aid = found
        st.lessons, hint = LS.hint_for(st.lessons, ev, {sig: known},  # '' if hinted meanwhile
                                       recall_ids={sig: aid} if aid is not None else None, ctl=ctl_command())
        return hint

    async def advance(self, st: SessionState, ev: LS.Ev | None, now: float) -> None:
        """Feed the session's error -> fix tracker (in event order); store the lessons it completes."""
        if ev is None:
            return
        _own_tracker(st)
        st.lessons, new = LS.step(st.lessons, ev)
        if new:
            await self.writer.run(partial(store.store_lessons, st.project, st.session, new, now))
            self.known[st.project] = (True, self.clock())
            self.on_stored(st.project)

    async def listing(self, *, project: str | None, limit: int) -> list[LS.Lesson]:
        return LS.rank(await self.readers.run(partial(store.all_lessons, project, limit)))

    async def count(self, project: str) -> int:
        return await self.readers.run(partial(store.count, project))


def _own_tracker(st: SessionState) -> None:
    """The session's error -> fix tracker (a fresh one if the state holds another session's)."""
    if st.lessons.session_id != st.session:
        st.lessons = LS.Tracker(session_id=st.session)
