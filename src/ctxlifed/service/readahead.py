"""Read-ahead of Claude Code's persisted outputs: a Bash output (or MCP result) too large for the
PostToolUse payload is read, redacted and digested as soon as its file appears, before its hook reaches
the daemon (issue 17).

Why it can: Claude Code writes such an output to ``<session folder>/tool-results/<name>.txt``, whole and
once, after the tool ends, and only then starts the PostToolUse hooks; the hook's shim is a new process,
so the request comes tens of milliseconds after the file. The work the hook path would do on arrival (read,
redact, digest the whole output) is done in that gap, and the hook finds it done.

Rules:
- Armed per session by its live hooks (compression on for the project): its ``tool-results`` folder
  (made 0700 if missing, only under the transcript roots) is watched by ``watch.py`` (inotify: nothing
  runs while no file comes). SessionEnd disarms it; so do :data:`ARM_TTL_S` without a hook. Arming an
  armed session costs a dict lookup: what the read-ahead needs of the daemon (:class:`Reads`) is read
  when a folder is armed or a file read, not on every hook.
- The command that printed a file is read from the end of the session's transcript (Claude Code records a
  call before it runs it; ``core.transcript.open_bash_commands``): the one Bash call with no result yet.
  With none or several (an MCP result Claude Code saved, say), the kind of output is judged from the
  text alone. A command asked to be shown verbatim (its output is kept) is not read ahead.
- Exact or nothing: what was made ahead (:class:`Ahead`) is used only for the same file as read then
  (device, inode, size, mtime in ns, checked again when it is taken), read with the same redaction
  setting; its digest body only when made for the kind, budgets and token count the hook path uses
  (``DigestBody.made_for``; the digest is pure). Anything else: the hook path does the work itself,
  exactly as without read-ahead.
- A file is read once: not again once held, nor after its hook took it (or found nothing held for it).
- Bounded: :data:`MAX_HELD` results and :data:`MAX_HELD_CHARS` characters of them (oldest dropped),
  :data:`MAX_FOLDERS` armed sessions (least recently armed dropped), files of at most
  ``MAX_PERSISTED_BYTES``, :data:`TAIL_BYTES` of transcript. A folder that cannot be watched is
  disarmed (:meth:`ReadAhead.drop`): the session's next hook arms it again.
- Never raises into the daemon: a file that cannot be read or digested leaves no result (logged).
- It is given what it uses (:class:`Reads`) and holds only its own tables; the work runs on the event
  loop, the same work the hook path would run there.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import anyio
import structlog

from ..core.compress_policy import CompressSettings, asked_verbatim
from ..core.digest import DigestBody, digest_body, output_kind
from ..core.model import estimate_tokens
from ..core.redact import redact
from ..core.transcript import open_bash_commands
from . import files

log = structlog.get_logger("ctxlifed.readahead")

TOOL_RESULTS = "tool-results"
ARM_TTL_S = 30 * 60.0  # a folder whose session sent no hook for this long is no longer watched
MAX_HELD = 8
MAX_HELD_CHARS = 32 << 20
MAX_FOLDERS = 64
MAX_CONSUMED = 256
TAIL_BYTES = 256 * 1024

Stamp = tuple[int, int, int, int]  # st_dev, st_ino, st_size, st_mtime_ns


def stamp_of(st: os.stat_result) -> Stamp:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass(frozen=True, slots=True)
class Ahead:
    """A persisted output read ahead: its text (redacted when ``redacted``) and its digest's body."""

    stamp: Stamp
    redacted: bool
    text: str
    body: DigestBody


@dataclass(frozen=True)
class Reads:
    """What the read-ahead reads of the daemon, and only when it needs it (arming a new folder, reading a
    file): never on the hook path of a session already armed."""

    roots: Callable[[], tuple[str, ...]]  # the transcript roots
    settings: Callable[[str], CompressSettings]  # of a project
    edited_paths: Callable[[str], Iterable[str]]  # of a session (what asked_verbatim compares with)
    redacts: Callable[[], bool]
    max_bytes: int  # a larger file is not read


@dataclass(slots=True)
class _Folder:
    session: str
    project: str
    transcript: str  # its real path
    armed_at: float


class ReadAhead:
    """The armed folders, the results held, and the counters ``status`` and the bench read."""

    def __init__(self, reads: Reads, clock: Callable[[], float] = time.monotonic) -> None:
        self._reads = reads
        self._clock = clock
        self._folders: dict[str, _Folder] = {}  # real folder path -> what is armed there
        self._by_session: dict[str, tuple[str, str]] = {}  # session -> (transcript path as given, its folder)
        self._held: OrderedDict[str, Ahead] = OrderedDict()  # real file path -> result
        self._consumed: OrderedDict[str, None] = OrderedDict()  # real file paths not to read (again)
        self.changed = anyio.Event()  # set (and replaced) when the set of armed folders changes
        self.made = 0  # files read ahead
        self.used = 0  # results the hook path took
        self.missed = 0  # persisted outputs the hook path found nothing (usable) for

    # -- the armed folders ---------------------------------------------------------------------
    def folders(self) -> list[str]:
        """The folders to watch now (expired ones dropped)."""
        now = self._clock()
        gone = [f for f, a in self._folders.items() if now - a.armed_at > ARM_TTL_S]
        for f in gone:
            self._by_session.pop(self._folders.pop(f).session, None)
        if gone:
            self._changed()
        return sorted(self._folders)

    def _changed(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    def arm(self, *, session: str, project: str, transcript_path: str | None) -> None:
        """A live hook of the session: watch its folder of persisted outputs (see the rules)."""
        known = self._by_session.get(session)
        if known is not None and known[0] == transcript_path:
            a = self._folders.get(known[1])
            if a is not None:  # armed already: only its clock (this runs on every hook)
                a.armed_at = self._clock()
                return
        if self._reads.settings(project).compress_outputs == "off":
            return
        real = files.transcript_allowed(transcript_path or "", self._reads.roots())
        folder = tool_results_folder(real, session)
        if real is None or folder is None:
            return
        if folder not in self._folders:
            if len(self._folders) >= MAX_FOLDERS:
                oldest = min(self._folders, key=lambda f: self._folders[f].armed_at)
                self._by_session.pop(self._folders.pop(oldest).session, None)
            try:
                os.makedirs(folder, mode=0o700, exist_ok=True)
            except OSError as exc:
                log.warning("readahead_folder_failed", folder=folder, error=str(exc))
                return
            self._changed()
        self._by_session[session] = (transcript_path or "", folder)
        self._folders[folder] = _Folder(session=session, project=project, transcript=real, armed_at=self._clock())

    def drop(self, folder: str) -> None:
        """``folder`` cannot be watched (gone, or the watch limit): disarm it until the session's next hook."""
        a = self._folders.pop(folder, None)
        if a is not None:
            self._by_session.pop(a.session, None)

    def disarm(self, session: str) -> None:
        """The session ended (SessionEnd)."""
        self._by_session.pop(session, None)
        gone = [f for f, a in self._folders.items() if a.session == session]
        for f in gone:
            del self._folders[f]
        for path in [p for p in self._held if os.path.dirname(p) in gone]:
            del self._held[path]
        if gone:
            self._changed()

    # -- files ---------------------------------------------------------------------------------
    def on_files(self, paths: Iterable[str]) -> None:
        """Files written (closed) or moved into watched folders: read ahead the persisted outputs."""
        for path in paths:
            folder, name = os.path.split(path)
            a = self._folders.get(folder)
            if a is None or not name.endswith(".txt") or name.startswith("hook-") or path in self._consumed:
                continue  # not armed, not an output (a hook's own saved output), or its hook came first
            try:
                self._read_ahead(path, a)
            except Exception:  # noqa: BLE001 - read-ahead is an optimisation: never fails the daemon
                log.exception("readahead_failed", path=path)

    def _read_ahead(self, path: str, a: _Folder) -> None:
        reads = self._reads
        settings = reads.settings(a.project)
        if settings.compress_outputs == "off":
            return  # turned off since the folder was armed
        got = files.persisted_text(path, reads.max_bytes)
        if got is None:
            return
        text, st = got
        stamp = stamp_of(st)
        held = self._held.get(path)
        if held is not None and held.stamp == stamp:
            return
        tail, cut = files.read_tail(a.transcript, TAIL_BYTES)
        running = open_bash_commands(tail, cut=cut)
        command = running[0] if len(running) == 1 else None
        if command is not None and asked_verbatim(command, reads.edited_paths(a.session)):
            return  # kept whatever its size: nothing to prepare
        redacts = reads.redacts()
        if redacts:
            text, _n = redact(text)
        body = digest_body(text, kind=output_kind(text, command), budget_tokens=settings.digest_budget_tokens,
                           max_tokens=settings.digest_max_tokens, original_tokens=estimate_tokens(text))
        self._held[path] = Ahead(stamp=stamp, redacted=redacts, text=text, body=body)
        self._held.move_to_end(path)
        chars = sum(len(h.text) for h in self._held.values())
        while len(self._held) > MAX_HELD or chars > MAX_HELD_CHARS:
            chars -= len(self._held.popitem(last=False)[1].text)
        self.made += 1

    def take(self, path: str) -> Ahead | None:
        """The result read ahead for the persisted output ``path`` if it is still that file and was read with
        the redaction setting now in force; None otherwise. Either way the file is not read ahead again.
        Only a persisted output's hook calls this: roots and setting are read then, not on every hook."""
        reads = self._reads
        real = files.under_roots(path, reads.roots())
        if real is None:
            return None
        held = self._held.pop(real, None)
        self._consumed[real] = None
        while len(self._consumed) > MAX_CONSUMED:
            self._consumed.popitem(last=False)
        if held is not None and held.redacted == reads.redacts():
            try:
                st = os.stat(real, follow_symlinks=False)
            except OSError:
                st = None
            if st is not None and stamp_of(st) == held.stamp:
                self.used += 1
                return held
        self.missed += 1
        return None


def tool_results_folder(real_transcript: str | None, session: str) -> str | None:
    """Where Claude Code persists the session's large outputs, from the real path of its transcript."""
    if real_transcript is None or not session or "/" in session or session.startswith("."):
        return None
    return os.path.join(os.path.dirname(real_transcript), session, TOOL_RESULTS)
