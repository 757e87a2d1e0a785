"""The sessions the daemon holds in memory: the registry, its locks and its least-recently-used bound.

Rules:
- At most ``MAX_SESSIONS_IN_MEMORY`` sessions stay in memory, least recently used first (``touch``
  marks one used). At the bound the least recently used one that nothing is using (no derivation
  queued, no lock held) is dropped: its state is in the store and is reloaded when it returns. Not
  the one whose phase began first: that is the long session in progress, which would then be
  reloaded, and evicted again, at every new session.
- A session not in memory is loaded from its stored state; a new one starts in the phase its project
  was last in.
- Two locks per session: the derivation lock (one derivation of a session at a time) and the
  acknowledgement lock (one acknowledgement at a time, taken on every hook without a checkpoint).
- A failed derivation or hook puts the session back as it was before (``snapshot``/``restore``), so a
  retry re-reads the same transcript bytes and re-derives the same state.
- Per session, the last ``HOOK_TOOLS`` tool-use ids whose result a hook delivered: the transcript's
  copy of such a result is then only counted, not redacted, summarised or archived again.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from functools import partial

import anyio

from ..core import accounting
from ..core import phase as phases
from ..store import queries
from ..store.db import Readers
from ..store.hook_writes import SessionRow
from .state import SessionState, dump, load

MAX_SESSIONS_IN_MEMORY = 512
HOOK_TOOLS = 256  # tool-use ids per session whose result a hook delivered (the transcript copy is skipped)


class SessionRegistry:
    """Live sessions by id, with their locks; ``queued(sid)``: derivations queued for a session."""

    def __init__(self, readers: Readers, queued: Callable[[str], int]) -> None:
        self.readers = readers
        self.queued = queued
        # Sessions in memory, least recently used first.
        self.sessions: collections.OrderedDict[str, SessionState] = collections.OrderedDict()
        self.locks: dict[str, anyio.Lock] = {}  # derive locks: one derivation of a session at a time
        self.ack_locks: dict[str, anyio.Lock] = {}  # one acknowledgement of a session at a time
        self.hook_tools: dict[str, dict[str, None]] = {}  # per session: the last HOOK_TOOLS ids, in order

    async def state(self, sid: str, project: str, cwd: str, now: float) -> SessionState:
        """The session ``sid``: from memory, else from the store, else new (marked most recently used)."""
        session = self.touch(sid)
        if session is None:
            # one read job: the session's own row and its project's last session (one thread hop)
            own, last = await self.readers.run(partial(queries.session_or_project_last, session=sid, project=project))
            session = load(own["state"]) if own else None
            if session is None:
                session = SessionState(session=sid, project=project, cwd=cwd, phase_started=now,
                                       phase=phases.PhaseState(since=now),
                                       acc=accounting.Accounting(project_root=project))
                # A new session in a known project starts in the phase the project was last in.
                prev = load(last["state"]) if last else None
                if prev is not None:
                    session.phase = phases.PhaseState(phase=prev.phase.phase, since=now)
            if len(self.sessions) >= MAX_SESSIONS_IN_MEMORY:
                self.evict_one()
            self.sessions[sid] = session
        if cwd:
            session.cwd = cwd
        return session

    def touch(self, sid: str) -> SessionState | None:
        """The session in memory (None if it is not), marked most recently used."""
        session = self.sessions.get(sid)
        if session is not None:
            self.sessions.move_to_end(sid)
        return session

    def evict_one(self) -> None:
        """Drop the least recently used session that nothing is using (see the module rules)."""
        for k in self.sessions:  # least recently used first
            lk, ack = self.locks.get(k), self.ack_locks.get(k)
            if self.queued(k) or (lk is not None and lk.locked()) or (ack is not None and ack.locked()):
                continue
            del self.sessions[k]
            self.locks.pop(k, None)
            self.ack_locks.pop(k, None)
            self.hook_tools.pop(k, None)
            return

    def drop(self, sid: str) -> None:
        """Forget a session's memory (``forget``: its rows are gone)."""
        self.sessions.pop(sid, None)

    def drop_project(self, project: str) -> None:
        for k in [k for k, v in self.sessions.items() if v.project == project]:
            self.sessions.pop(k, None)

    def lock(self, sid: str) -> anyio.Lock:
        """The derivation lock: keeps anyio's checkpoint, so a waiter woken by a finished job runs before
        the deriver takes the next one (derive.py: a sync event's wait ends its urgency first)."""
        lk = self.locks.get(sid)
        if lk is None:
            lk = self.locks[sid] = anyio.Lock()
        return lk

    def ack_lock(self, sid: str) -> anyio.Lock:
        """The acknowledgement lock, taken on every hook: ``fast_acquire`` takes a free one without a
        checkpoint (anyio's default yields to the event loop first: one more loop turn per
        acknowledgement). Fair anyway: a holder always answers (I/O) before its session's next hook
        takes it again."""
        lk = self.ack_locks.get(sid)
        if lk is None:
            lk = self.ack_locks[sid] = anyio.Lock(fast_acquire=True)
        return lk

    def snapshot(self, sid: str) -> bytes | None:
        """The session as it is now (None: not in memory), for ``restore``."""
        before = self.sessions.get(sid)
        return dump(before) if before is not None else None

    def restore(self, sid: str, snapshot: bytes | None) -> None:
        """Put the session back as ``snapshot`` had it (out of memory when it was not in memory)."""
        restored = load(snapshot) if snapshot is not None else None
        if restored is None:
            self.sessions.pop(sid, None)
        else:
            self.sessions[sid] = restored

    def note_hook_tool(self, sid: str, tool_id: str) -> None:
        """A hook delivered this tool's result (see the module rules)."""
        seen = self.hook_tools.setdefault(sid, {})
        if tool_id not in seen:
            seen[tool_id] = None
            if len(seen) > HOOK_TOOLS:
                del seen[next(iter(seen))]

    def hook_delivered(self, sid: str) -> dict[str, None] | None:
        """The tool-use ids whose result a hook delivered in this session (None: none)."""
        return self.hook_tools.get(sid)


def session_row(session: SessionState, blob: bytes | None = None) -> SessionRow:
    """The session's row as the store writes it (``blob``: ``dump(session)`` when already made)."""
    return SessionRow(session=session.session, project=session.project, cwd=session.cwd,
                      transcript_path=session.transcript_path, phase=session.phase.phase,
                      phase_since=session.phase.since, model=session.model, ended_ts=session.ended_ts,
                      state=blob if blob is not None else dump(session))
