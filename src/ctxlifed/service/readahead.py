"""Read-ahead of Claude Code's persisted outputs: a Bash output too large for the PostToolUse payload is
read, redacted and digested as soon as its file appears, before its hook reaches the daemon (issue 17).

Why it can: Claude Code writes such an output to ``<session folder>/tool-results/<name>.txt``, whole and
once, after the command ends, and only then starts the PostToolUse hooks; the hook's shim is a new process,
so the request comes tens of milliseconds after the file. The work the hook path would do on arrival (read,
redact, digest the whole output) is done in that gap, and the hook finds it done.

Rules:
- Armed per session: a Bash PreToolUse (live hook, compression on for the project, a command that is not
  asked to be shown verbatim) arms its session's ``tool-results`` folder (made 0700 if missing, only under
  the transcript roots) and records the call; PostToolUse / PostToolUseFailure end the call; Stop,
  StopFailure and SessionEnd disarm the session. A folder armed for :data:`ARM_TTL_S` without a new
  call is dropped. ``watch.py`` watches the armed folders, and nothing while none is armed.
- Exact or nothing: what was made ahead (:class:`Ahead`) is used only for the same file as read then
  (device, inode, size, mtime in ns, checked again when it is taken), read with the same redaction
  setting; its digest body only when made from the same command, kind, budgets and token count as the
  hook path would use (``DigestBody``'s inputs; the digest is pure). Anything else: the hook path does
  the work itself, exactly as without read-ahead.
- A digest body is made ahead only when exactly one Bash call of the session is running (otherwise
  which command printed the file is not known): the file is then only read and redacted.
- A file is read once: not again once held, nor after the hook took it or found nothing held for it.
- Bounded: :data:`MAX_HELD` results (oldest dropped), :data:`MAX_FOLDERS` armed sessions,
  :data:`MAX_CALLS` running calls per session, files of at most ``MAX_PERSISTED_BYTES``.
- Never raises into the daemon: a file that cannot be read or digested leaves no result (logged).
- Pure of the daemon's state: it is given what it uses (paths, settings, the redaction switch) and holds
  only its own tables; the work runs on the event loop, the same work the hook path would run there.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import anyio
import structlog

from ..core.compress_policy import CompressSettings, asked_verbatim
from ..core.digest import DigestBody, digest_body
from ..core.model import estimate_tokens
from ..core.redact import redact
from ..runtime.bounded_read import Refused, read_bounded
from . import files

log = structlog.get_logger("ctxlifed.readahead")

TOOL_RESULTS = "tool-results"
ARM_TTL_S = 30 * 60.0  # a folder with no new Bash call for this long is no longer watched
MAX_HELD = 8
MAX_FOLDERS = 16
MAX_CALLS = 32
MAX_CONSUMED = 256

Stamp = tuple[int, int, int, int]  # st_dev, st_ino, st_size, st_mtime_ns


def stamp_of(st: os.stat_result) -> Stamp:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass(frozen=True, slots=True)
class Ahead:
    """A persisted output read ahead: its text (redacted when ``redacted``) and, when its command was
    known, its digest body."""

    stamp: Stamp
    redacted: bool
    text: str
    body: DigestBody | None


@dataclass
class _Folder:
    session: str
    settings: CompressSettings
    redacts: bool
    max_bytes: int
    armed_at: float
    calls: dict[str, str] = field(default_factory=dict)  # tool_use_id -> command


class ReadAhead:
    """The armed folders, the results held, and the counters ``status`` and the bench read."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._folders: dict[str, _Folder] = {}  # real folder path -> what is armed there
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
            del self._folders[f]
        if gone:
            self._changed()
        return sorted(self._folders)

    def _changed(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    def arm(self, *, transcript_path: str | None, session: str, roots: tuple[str, ...], tool_use_id: str,
            command: str, settings: CompressSettings, edited_paths: Iterable[str], redacts: bool,
            max_bytes: int) -> None:
        """A Bash call starts (its PreToolUse): watch its session's folder of persisted outputs."""
        if settings.compress_outputs == "off" or not tool_use_id or not command:
            return
        if asked_verbatim(command, edited_paths):
            return  # kept whatever its size: nothing to prepare
        folder = tool_results_folder(transcript_path, session, roots)
        if folder is None:
            return
        a = self._folders.get(folder)
        if a is None:
            if len(self._folders) >= MAX_FOLDERS:
                oldest = min(self._folders, key=lambda f: self._folders[f].armed_at)
                del self._folders[oldest]
            try:
                os.makedirs(folder, mode=0o700, exist_ok=True)
            except OSError as exc:
                log.warning("readahead_folder_failed", folder=folder, error=str(exc))
                return
            a = self._folders[folder] = _Folder(session=session, settings=settings, redacts=redacts,
                                                max_bytes=max_bytes, armed_at=self._clock())
            self._changed()
        a.settings, a.redacts, a.max_bytes, a.armed_at = settings, redacts, max_bytes, self._clock()
        if len(a.calls) >= MAX_CALLS:
            del a.calls[next(iter(a.calls))]
        a.calls[tool_use_id] = command

    def call_ended(self, session: str, tool_use_id: str) -> None:
        """A Bash call's PostToolUse or PostToolUseFailure: it no longer prints."""
        for a in self._folders.values():
            if a.session == session:
                a.calls.pop(tool_use_id, None)

    def disarm(self, session: str) -> None:
        """The session's turn ended (Stop, StopFailure) or the session did (SessionEnd)."""
        gone = [f for f, a in self._folders.items() if a.session == session]
        for f in gone:
            del self._folders[f]
        for path in [p for p in self._held if os.path.dirname(p) in gone]:
            del self._held[path]
        if gone:
            self._changed()

    # -- files ---------------------------------------------------------------------------------
    def on_files(self, paths: Iterable[str]) -> None:
        """Files added or changed in watched folders (from the watch): read ahead the persisted outputs."""
        for path in paths:
            folder, name = os.path.split(path)
            a = self._folders.get(folder)
            if a is None or not a.calls or not name.endswith(".txt") or name.startswith("hook-"):
                continue  # not armed, no call running (its hook came first), or not an output
            if path in self._consumed:
                continue
            try:
                self._read_ahead(path, a)
            except Exception:  # noqa: BLE001 - read-ahead is an optimisation: never fails the daemon
                log.exception("readahead_failed", path=path)

    def _read_ahead(self, path: str, a: _Folder) -> None:
        try:
            data, st = read_bounded(path, a.max_bytes)
        except Refused:
            return
        stamp = stamp_of(st)
        held = self._held.get(path)
        if held is not None and held.stamp == stamp:
            return
        text = data.decode("utf-8", "replace")
        if a.redacts:
            text, _n = redact(text)
        body = None
        if len(a.calls) == 1:
            (command,) = a.calls.values()
            s = a.settings
            body = digest_body(text, command=command or None, budget_tokens=s.digest_budget_tokens,
                               max_tokens=s.digest_max_tokens, original_tokens=estimate_tokens(text))
        self._held[path] = Ahead(stamp=stamp, redacted=a.redacts, text=text, body=body)
        self._held.move_to_end(path)
        while len(self._held) > MAX_HELD:
            self._held.popitem(last=False)
        self.made += 1

    def take(self, path: str, roots: tuple[str, ...], *, redacts: bool) -> Ahead | None:
        """The result read ahead for the persisted output ``path`` if it is still that file and was read
        with ``redacts``; None otherwise. Either way the file is not read ahead again."""
        real = files.under_roots(path, roots)
        if real is None:
            return None
        held = self._held.pop(real, None)
        self._consumed[real] = None
        while len(self._consumed) > MAX_CONSUMED:
            self._consumed.popitem(last=False)
        if held is not None and held.redacted == redacts:
            try:
                st = os.stat(real, follow_symlinks=False)
            except OSError:
                st = None
            if st is not None and stamp_of(st) == held.stamp:
                self.used += 1
                return held
        self.missed += 1
        return None


def tool_results_folder(transcript_path: str | None, session: str, roots: tuple[str, ...]) -> str | None:
    """Where Claude Code persists the session's large outputs (the real path), or None when the transcript
    is not under the transcript roots."""
    real = files.transcript_allowed(transcript_path or "", roots)
    if real is None or not session or "/" in session or session.startswith("."):
        return None
    return os.path.join(os.path.dirname(real), session, TOOL_RESULTS)
