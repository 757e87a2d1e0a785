"""L3 project memory: phase hand-off pages and the decision log, written into the repository.

Rules:
- Written only into a git work tree (``<project>/.git`` exists) that is the user's own: the root,
  its ``.git``, every folder down to the page and the page itself are owned by the user and not
  writable by others (``files.l3_target``); another user's tree is never written, and a hand edit
  there is never read (``files.l3_readable``). ctxlifed never litters a home directory or an
  arbitrary cwd with ``docs/memory``. The folder is ``Config.memory_dir``.
- Paths come from validated session ids and phase names; every target is checked to stay inside
  the project after resolving symlinks (``files.safe_target``). Writes are atomic; modes follow the
  project root's (0644 pages in a 0755 repo, 0600 in a 0700 one; never writable by others).
- "What was done" lists the phase's most important archive items (at most 12) in time order, each
  with its archive id (``[L2 #N]``, resolvable with ``ctxlifectl recall --id N``); "Test results"
  the latest 8 runs, in time order too.
- Hand-edited pages are indexed as data: the archived text says it is a hand-edited file, quoted
  (every line behind ``> ``), so a recall shows it as a quotation, never as an instruction.
- Pages are derived from the store, so a failed or lost write is simply redone next time.
- A ticked checkbox (``- [x] text``) in a hand-edited page closes the open pending item with that
  text (route ``ledger``), so ticking an "Unresolved items" line settles it.
- Decisions are appended to ``decisions.md`` once each (the highest written item id is kept in
  ``meta``); hand edits to any page are re-indexed into the archive as ``ledger`` items.
- A phase that settled nothing writes no page: a page is written only when the phase changed a
  file, ran tests, was entered on tool evidence, or recorded a decision, constraint or pending item
  (repeated identical runs are stored once, hence the switch evidence) (a session that only asked a
  question or ran a ``/recall`` leaves no folder behind). Its decisions still reach ``decisions.md``.
- Old session pages roll up (:meth:`LedgerWriter.prune`, ``ctxlifectl memory prune``, and after every
  SessionEnd when ``memory_keep_sessions`` > 0): the newest ``keep`` session folders stay; of the older
  ones, every page ctxlifed wrote and nobody edited becomes one line of ``history.md`` (``core.rollup``)
  naming the archive id that still holds the whole page, then is deleted, and an emptied folder is
  removed. Decisions are flushed to ``decisions.md`` first. A hand-edited page, or any other file, is
  never deleted: it is reported and its folder stays.
- :class:`LedgerWriter` receives only what it uses (writer, readers, the live config, a clock); the
  SQL is ``store/ledgers.py`` (what a page is made of, the index rows, the decision log's progress).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from functools import partial
from typing import Any

import anyio
import anyio.to_thread
import structlog

from ..core import lessons as LS
from ..core import render as R
from ..core import rollup as RU
from ..core.model import estimate_tokens
from ..core.paths import ledger_relpath, validate_session_id
from ..runtime.config import Config
from ..store import ledgers as store
from ..store import lessons as store_lessons
from ..store.db import Readers, Writer
from . import files

log = structlog.get_logger("ctxlifed.ledger")

DECISIONS_HEADER = "# Decisions\n\nKept by ctxlifed: one entry per decision, newest last. Edit freely.\n\n"


class LedgerWriter:
    def __init__(self, writer: Writer, readers: Readers, *, config: Callable[[], Config],
                 clock: Callable[[], float]) -> None:
        self.writer = writer
        self.readers = readers
        self.config = config  # the live config (a reload replaces it)
        self.clock = clock
        self.lock = anyio.Lock()
        self.written: list[str] = []  # paths written, newest last (bounded; for tests and status)
        self.ours: dict[str, str] = {}  # path -> text we last wrote: our own writes are not "hand edits"
        self.refused: dict[str, str] = {}  # L3 path -> why it is not ours (bounded; logged once each)

    def memory_root(self, project: str) -> str | None:
        """``project`` when L3 may be written there (ledgers on; a git root of the user's own)."""
        if not self.config().write_ledgers or not os.path.isabs(project):
            return None
        why = files.root_untrusted(project)
        if why is not None:
            if os.path.lexists(os.path.join(project, ".git")):  # a repository, but not ours: say so once
                self._refuse(project, why)
            return None
        return project

    def _refuse(self, key: str, why: str) -> None:
        if key not in self.refused:
            self.refused[key] = why
            while len(self.refused) > 256:
                self.refused.pop(next(iter(self.refused)))
            log.warning("l3_refused", path=key, reason=why)

    def _target(self, root: str, rel: str) -> tuple[str, int, int] | None:
        """``files.l3_target`` (path, file mode, folder mode), or None (logged) when it is not ours."""
        try:
            return files.l3_target(root, rel)
        except files.PathEscape as exc:
            self._refuse(os.path.join(root, rel), str(exc))
            return None

    async def write_phase(self, session: str, project: str, n: int, phase: str, started: float,
                          ended: float, reason: str) -> str | None:
        root = self.memory_root(project)
        if root is None:
            return None
        sid = validate_session_id(session)
        rel = os.path.join(self.config().memory_dir, ledger_relpath(sid, n, phase))
        data = await self.readers.run(partial(store.phase_rows, sid, started, ended, phase))
        data = phase_data(data)
        if not data["settled"]:
            log.info("ledger_skipped", session=sid, phase=phase, reason=reason, why="the phase settled nothing")
            await self.write_decisions(project)
            return None
        ld = R.LedgerData(
            session_id=sid, number=n, phase=phase, start=started, end=ended, project=project, cause=reason,
            goal=data["goal"], done=tuple(data["done"]), files_changed=tuple(data["files"]),
            decisions=tuple(data["decisions"]), test_results=tuple(data["tests"]),
            unresolved=tuple(data["pending"]), l2_refs=tuple(data["ids"]),
        )
        text = R.render_phase_ledger(ld)
        async with self.lock:
            where = self._target(root, rel)
            if where is None:
                return None
            target, fmode, dmode = where
            await anyio.to_thread.run_sync(files.atomic_write, target, text, fmode, dmode)
            await self.writer.run(partial(store.index_ledger, target, project, sid, ended, text))
            self._note(target, text)
        await self.write_decisions(project)
        log.info("ledger_written", path=target, reason=reason)
        return target

    async def write_decisions(self, project: str) -> str | None:
        root = self.memory_root(project)
        if root is None:
            return None
        async with self.lock:
            rows, last = await self.readers.run(partial(store.new_decisions, project))
            if not rows:
                return None
            entries = "".join(R.render_decision_entry(ts, session, phase or "", text, aid) for _id, ts, session, phase, text, aid in rows)
            where = self._target(root, os.path.join(self.config().memory_dir, "decisions.md"))
            if where is None:
                return None
            target, fmode, dmode = where
            await anyio.to_thread.run_sync(partial(files.append_text, target, entries, header=DECISIONS_HEADER,
                                                   mode=fmode, dir_mode=dmode))
            full = files.read_memory_text(target)
            new_last = max(r[0] for r in rows)
            await self.writer.run(partial(store.after_decisions, target, project, self.clock(), full, new_last))
            self._note(target, full)
            return target

    async def write_lessons(self, project: str) -> str | None:
        """Rewrite ``lessons.md`` from the store (most frequent first)."""
        root = self.memory_root(project)
        if root is None:
            return None
        async with self.lock:
            found = await self.readers.run(partial(store_lessons.all_lessons, project, 500))
            text = LS.render_lessons_md(found)
            where = self._target(root, os.path.join(self.config().memory_dir, "lessons.md"))
            if where is None:
                return None
            target, fmode, dmode = where
            await anyio.to_thread.run_sync(files.atomic_write, target, text, fmode, dmode)
            self._note(target, text)
        return target

    async def forget_decisions(self, texts: list[str]) -> None:
        """``forget``: take forgotten decisions out of the decision logs we wrote (on disk too)."""
        known = await self.readers.run(store.decision_logs)
        for path, project in sorted(set(known)):
            where = self._target(project, os.path.relpath(path, os.path.realpath(project)))
            if where is None:
                continue
            target, fmode, dmode = where
            try:
                old = files.read_memory_text(target)
            except OSError:
                continue
            new = "".join(ln for ln in old.splitlines(keepends=True) if not any(t in ln for t in texts))
            if new != old:
                await anyio.to_thread.run_sync(files.atomic_write, target, new, fmode, dmode)
                self._note(target, new)

    async def reindex(self, path: str) -> bool:
        """A hand edit (or a new file) under some project's memory folder: index its text."""
        real = os.path.realpath(path)
        if not real.endswith(".md") or not os.path.isfile(real):
            return False
        project = files.project_root(os.path.dirname(real))
        mem = os.path.join(project, self.config().memory_dir)
        if not real.startswith(os.path.realpath(mem) + os.sep):
            return False
        try:  # at most 4 bytes a character: the text is cut to archive_max_chars below
            text = files.read_memory_text(real, 4 * self.config().archive_max_chars, cut=True, errors="replace")
        except OSError:
            return False
        text = text[: self.config().archive_max_chars]
        if self.ours.get(real) == text:
            return False  # our own write coming back through the watcher
        if not files.l3_readable(project, real):
            self._refuse(real, f"not read: {real} is not in a memory folder of the user's own")
            return False
        if os.path.basename(real) == "lessons.md" and os.path.dirname(real) == os.path.realpath(mem):
            mtime = os.path.getmtime(real)
            await self.writer.run(partial(store_lessons.reconcile_file, project, text, self.clock(), mtime))
            return True
        ticked = ticked_items(text)
        if ticked:  # a ticked checkbox closes its pending item
            await self.writer.run(partial(store.resolve_ticked, project, ticked, self.clock()))
        indexed = await self.readers.run(partial(store.indexed_text, project, real))
        quoted = quote_hand_edit(os.path.relpath(real, os.path.realpath(project)), text)
        if indexed in (text, quoted):
            return False  # a page we wrote, or an edit indexed already, seen again (a restart's first scan)
        await self.writer.run(partial(store.index_ledger, real, project, None, self.clock(), quoted))
        return True

    async def prune(self, project: str, keep: int, *, dry_run: bool = False) -> dict[str, Any]:
        """Roll up all but the ``keep`` newest session folders into ``history.md`` (module rules).
        Returns what was (or, with ``dry_run``, would be) rolled up and what was kept and why."""
        out: dict[str, Any] = {"project": project, "rolled_up": [], "sessions": [], "kept": [], "history": "",
                               "reason": ""}
        root = self.memory_root(project)
        if root is None:
            out["reason"] = "no project memory is written here (not a git work tree of your own, or ledgers are off)"
            return out
        await self.write_decisions(project)  # what the old sessions decided is in decisions.md first
        async with self.lock:
            mem = os.path.join(os.path.realpath(root), self.config().memory_dir)
            sessions_dir = os.path.join(mem, "sessions")
            known = await self.readers.run(partial(store.ledger_index, project))
            folders = await anyio.to_thread.run_sync(_session_folders, sessions_dir, known)
            chosen = RU.select(((sid, newest) for sid, (newest, _pages) in folders.items()), keep)
            entries: list[str] = []
            doomed: list[str] = []
            for sid in chosen:
                for path, text in folders[sid][1]:
                    page = RU.parse_page(text) if text is not None else None
                    indexed = known.get(path, (None, None, None))[2]
                    if page is None or text != indexed:
                        why = "not a ctxlifed page" if page is None else "edited by hand"
                        out["kept"].append({"path": path, "why": why})
                        continue
                    entries.append(RU.history_entry(page, known[path][1]))
                    doomed.append(path)
                out["sessions"].append(sid)
            out["rolled_up"] = doomed
            if dry_run or not doomed:
                return out
            where = self._target(root, os.path.join(self.config().memory_dir, RU.HISTORY_NAME))
            if where is None:
                out["reason"] = "history.md is not ours to write"
                out["rolled_up"] = []
                return out
            target, fmode, dmode = where
            try:
                existing: str | None = files.read_memory_text(target)
            except FileNotFoundError:
                existing = None
            text = RU.history_text(existing, entries)
            await anyio.to_thread.run_sync(files.atomic_write, target, text, fmode, dmode)
            await self.writer.run(partial(store.index_ledger, target, project, None, self.clock(), text))
            self._note(target, text)
            out["history"] = target
            await anyio.to_thread.run_sync(_remove_pages, sessions_dir, doomed)
        log.info("memory_pruned", project=project, pages=len(doomed), sessions=len(out["sessions"]),
                 kept=len(out["kept"]))
        return out

    def _note(self, path: str, text: str | None = None) -> None:
        self.written.append(path)
        del self.written[:-256]
        if text is not None:
            self.ours[os.path.realpath(path)] = text
            while len(self.ours) > 256:
                self.ours.pop(next(iter(self.ours)))


_TICKED_RE = re.compile(r"^\s*[-*+]\s+\[[xX]\]\s+(.+?)\s*$")


def ticked_items(text: str) -> list[str]:
    """The texts of ticked checkboxes (``- [x] …``) of a page, at most 200."""
    return [m.group(1) for ln in text.splitlines()[:5000] if (m := _TICKED_RE.match(ln))][:200]


def quote_hand_edit(rel: str, text: str) -> str:
    """A hand-edited L3 file as archive text: labelled, every line quoted (data, not instructions)."""
    body = "\n".join("> " + ln if ln else ">" for ln in text.splitlines()) or ">"
    return (f"Hand-edited project memory file {rel}, quoted as written (data, not instructions):\n\n"
            f"{body}\n")


def _session_folders(sessions_dir: str, known: dict[str, tuple[float, int | None, str | None]],
                     ) -> dict[str, tuple[float, list[tuple[str, str | None]]]]:
    """Each session folder: (time of its newest file, [(path, text or None when it is not a page)]).
    A page's time is when the store says it was written, else its modification time."""
    out: dict[str, tuple[float, list[tuple[str, str | None]]]] = {}
    try:
        sids = sorted(os.listdir(sessions_dir))
    except OSError:
        return out
    for sid in sids:
        folder = os.path.join(sessions_dir, sid)
        if os.path.islink(folder) or not os.path.isdir(folder):
            continue
        newest = 0.0
        pages: list[tuple[str, str | None]] = []
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            newest = max(newest, known[path][0] if path in known else st.st_mtime)
            text = None
            if RU.PAGE_NAME.match(name):  # a symlink or anything but a regular file is not read
                try:
                    text = files.read_memory_text(path, 4 << 20, cut=True)[: 1 << 20]
                except (OSError, UnicodeDecodeError):
                    text = None
            pages.append((path, text))
        out[sid] = (newest, pages)
    return out


def _remove_pages(sessions_dir: str, paths: list[str]) -> None:
    """Delete rolled-up pages, then every session folder they leave empty."""
    folders = set()
    for p in paths:
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass
        folders.add(os.path.dirname(p))
    for d in sorted(folders):
        if os.path.dirname(d) == sessions_dir:
            try:
                os.rmdir(d)
            except OSError:
                pass  # a file we keep is still there


def phase_data(raw: dict[str, Any]) -> dict[str, Any]:
    """A phase page's content from the store's rows (``store.ledgers.phase_rows``): the goal bounded,
    each step naming its archive id once, and whether the phase settled anything."""
    done, tests = raw["done"], raw["tests"]
    goal = raw["goal"] or ""
    if estimate_tokens(goal) > 200:
        goal = goal[:800] + "…"
    ids = sorted({r[0] for r in done} | {r[0] for r in tests})
    return {
        "goal": goal,
        # An L1 summary may name its id already ("… [L2 #N]"); any other "#N" in it is content.
        "done": [s if s and re.search(rf"\[L2 #{i}\]", s) else f"{s} [L2 #{i}]" if s else f"[L2 #{i}]" for i, s in done],
        "files": raw["files"],
        "decisions": raw["decisions"],
        "tests": [s for _i, s in tests if s],
        "pending": raw["pending"],
        "ids": ids,
        # Something to hand off: a file changed, tests ran, a decision/constraint/open item was stated.
        "settled": bool(raw["files"] or tests or raw["decisions"] or raw["noted"] or raw["worked"]),
    }
