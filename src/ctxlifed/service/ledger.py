"""L3 project memory: phase hand-off pages and the decision log, written into the repository.

Rules:
- Written only into a git work tree (``<project>/.git`` exists): ctxlifed never litters a home
  directory or an arbitrary cwd with ``docs/memory``. The folder is ``Config.memory_dir``.
- Paths come from validated session ids and phase names; every target is checked to stay inside
  the project after resolving symlinks (``files.safe_target``). Writes are atomic.
- Pages are derived from the store, so a failed or lost write is simply redone next time.
- Decisions are appended to ``decisions.md`` once each (the highest written item id is kept in
  ``meta``); hand edits to any page are re-indexed into the archive as ``ledger`` items.
"""

from __future__ import annotations

import os
import sqlite3
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import structlog

from ..core import lessons as LS
from ..core import render as R
from ..core.model import estimate_tokens
from ..core.paths import ledger_relpath, validate_session_id
from ..store import ops
from . import files

if TYPE_CHECKING:
    from .app import Service

log = structlog.get_logger("ctxlifed.ledger")

DECISIONS_HEADER = "# Decisions\n\nKept by ctxlifed: one entry per decision, newest last. Edit freely.\n\n"


class LedgerWriter:
    def __init__(self, svc: Service) -> None:
        self.svc = svc
        self.lock = anyio.Lock()
        self.written: list[str] = []  # paths written, newest last (bounded; for tests and status)
        self.ours: dict[str, str] = {}  # path -> text we last wrote: our own writes are not "hand edits"

    def memory_root(self, project: str) -> str | None:
        if not self.svc.cfg.write_ledgers or not os.path.isabs(project):
            return None
        if not os.path.exists(os.path.join(project, ".git")):
            return None
        return project

    async def write_phase(self, session: str, project: str, n: int, phase: str, started: float,
                          ended: float, reason: str) -> str | None:
        root = self.memory_root(project)
        if root is None:
            return None
        sid = validate_session_id(session)
        rel = os.path.join(self.svc.cfg.memory_dir, ledger_relpath(sid, n, phase))
        data = await self.svc.readers.run(partial(_ledger_rows, sid, started, ended))
        ld = R.LedgerData(
            session_id=sid, number=n, phase=phase, start=started, end=ended, project=project, cause=reason,
            goal=data["goal"], done=tuple(data["done"]), files_changed=tuple(data["files"]),
            decisions=tuple(data["decisions"]), test_results=tuple(data["tests"]),
            unresolved=tuple(data["pending"]), l2_refs=tuple(data["ids"]),
        )
        text = R.render_phase_ledger(ld)
        async with self.lock:
            target = files.safe_target(root, rel)
            await anyio.to_thread.run_sync(files.atomic_write, target, text)
            await self.svc.writer.run(partial(_index_ledger, target, project, sid, ended, text))
            self._note(target, text)
        await self.write_decisions(project)
        log.info("ledger_written", path=target, reason=reason)
        return target

    async def write_decisions(self, project: str) -> str | None:
        root = self.memory_root(project)
        if root is None:
            return None
        async with self.lock:
            rows, last = await self.svc.readers.run(partial(_new_decisions, project))
            if not rows:
                return None
            entries = "".join(R.render_decision_entry(ts, session, phase or "", text, aid) for _id, ts, session, phase, text, aid in rows)
            target = files.safe_target(root, os.path.join(self.svc.cfg.memory_dir, "decisions.md"))
            await anyio.to_thread.run_sync(partial(files.append_text, target, entries, header=DECISIONS_HEADER))
            with open(target, encoding="utf-8") as f:
                full = f.read()
            new_last = max(r[0] for r in rows)
            await self.svc.writer.run(partial(_after_decisions, target, project, self.svc.clock(), full, new_last))
            self._note(target, full)
            return target

    async def write_lessons(self, project: str) -> str | None:
        """Rewrite ``lessons.md`` from the store (most frequent first)."""
        root = self.memory_root(project)
        if root is None:
            return None
        from . import lessons as lessons_svc

        async with self.lock:
            found = await self.svc.readers.run(partial(lessons_svc.all_lessons, project, 500))
            text = LS.render_lessons_md(found)
            target = files.safe_target(root, os.path.join(self.svc.cfg.memory_dir, "lessons.md"))
            await anyio.to_thread.run_sync(files.atomic_write, target, text)
            self._note(target, text)
        return target

    async def forget_decisions(self, texts: list[str]) -> None:
        """``forget``: take forgotten decisions out of the decision logs we wrote (on disk too)."""
        known = await self.svc.readers.run(
            lambda c: [r[0] for r in c.execute("SELECT path FROM ledgers WHERE path LIKE '%decisions.md'")])
        for path in sorted(set(known) | {p for p in self.written if os.path.basename(p) == "decisions.md"}):
            try:
                with open(path, encoding="utf-8") as f:
                    old = f.read()
            except OSError:
                continue
            new = "".join(ln for ln in old.splitlines(keepends=True) if not any(t in ln for t in texts))
            if new != old:
                await anyio.to_thread.run_sync(files.atomic_write, path, new)
                self._note(path, new)

    async def reindex(self, path: str) -> bool:
        """A hand edit (or a new file) under some project's memory folder: index its text."""
        real = os.path.realpath(path)
        if not real.endswith(".md") or not os.path.isfile(real):
            return False
        project = files.project_root(os.path.dirname(real))
        mem = os.path.join(project, self.svc.cfg.memory_dir)
        if not real.startswith(os.path.realpath(mem) + os.sep):
            return False
        try:
            with open(real, encoding="utf-8", errors="replace") as f:
                text = f.read(self.svc.cfg.archive_max_chars)
        except OSError:
            return False
        if self.ours.get(real) == text:
            return False  # our own write coming back through the watcher
        if os.path.basename(real) == "lessons.md" and os.path.dirname(real) == os.path.realpath(mem):
            from . import lessons as lessons_svc

            mtime = os.path.getmtime(real)
            await self.svc.writer.run(partial(lessons_svc.reconcile_file, project, text, self.svc.clock(), mtime))
            return True
        await self.svc.writer.run(partial(_index_ledger, real, project, None, self.svc.clock(), text))
        return True

    def _note(self, path: str, text: str | None = None) -> None:
        self.written.append(path)
        del self.written[:-256]
        if text is not None:
            self.ours[os.path.realpath(path)] = text
            while len(self.ours) > 256:
                self.ours.pop(next(iter(self.ours)))


def _index_ledger(path: str, project: str, session: str | None, ts: float, text: str, conn: sqlite3.Connection) -> int:
    summary = next((ln.strip("# ").strip() for ln in text.splitlines() if ln.strip()), "")[:200]
    aid = ops.upsert_archive_by_uid(conn, ops.ArchiveRow(
        session=session or "", project=project, ts=ts, kind="ledger", text=text, summary=summary,
        uid=f"ledger:{path}", priority=70, level=3))
    ops.record_ledger(conn, path=path, project=project, session=session, ts=ts, archive_id=aid)
    return aid


def _after_decisions(path: str, project: str, ts: float, text: str, last: int, conn: sqlite3.Connection) -> None:
    conn.execute("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                 (f"decisions_written:{project}", str(last)))
    _index_ledger(path, project, None, ts, text, conn)


def _new_decisions(project: str, conn: sqlite3.Connection) -> tuple[list[tuple], int]:
    r = conn.execute("SELECT value FROM meta WHERE key = ?", (f"decisions_written:{project}",)).fetchone()
    last = int(r[0]) if r else 0
    rows = conn.execute(
        "SELECT id, ts, session, phase, text, archive_id FROM items WHERE project = ? AND kind = 'decision' AND id > ?"
        " ORDER BY id LIMIT 200", (project, last)).fetchall()
    return rows, last


def _ledger_rows(session: str, start: float, end: float, conn: sqlite3.Connection) -> dict[str, Any]:
    win = (session, start - 0.001, end + 0.001)
    goal_row = conn.execute(
        "SELECT text FROM archive WHERE session = ? AND ts BETWEEN ? AND ? AND kind = 'prompt' ORDER BY id LIMIT 1",
        win).fetchone()
    done = conn.execute(
        "SELECT id, summary FROM archive WHERE session = ? AND ts BETWEEN ? AND ?"
        " AND kind IN ('code_change', 'tool', 'test_result', 'error', 'assistant')"
        " ORDER BY priority DESC, id DESC LIMIT 12", win).fetchall()
    files_ = conn.execute(
        "SELECT DISTINCT file_path FROM archive WHERE session = ? AND ts BETWEEN ? AND ? AND kind = 'code_change'"
        " AND file_path IS NOT NULL ORDER BY id LIMIT 50", win).fetchall()
    decisions = conn.execute(
        "SELECT text FROM items WHERE session = ? AND ts BETWEEN ? AND ? AND kind = 'decision' ORDER BY id LIMIT 20",
        win).fetchall()
    tests = conn.execute(
        "SELECT id, summary FROM archive WHERE session = ? AND ts BETWEEN ? AND ? AND kind = 'test_result'"
        " ORDER BY id DESC LIMIT 8", win).fetchall()
    pending = conn.execute(
        "SELECT text FROM items WHERE session = ? AND kind = 'pending' AND status = 'open' ORDER BY id DESC LIMIT 12",
        (session,)).fetchall()
    goal = goal_row[0] if goal_row else ""
    if estimate_tokens(goal) > 200:
        goal = goal[:800] + "…"
    ids = sorted({r[0] for r in done} | {r[0] for r in tests})
    return {
        "goal": goal,
        "done": [f"{s} [L2 #{i}]" if s and f"#{i}" not in s else (s or f"[L2 #{i}]") for i, s in done],
        "files": [r[0] for r in files_],
        "decisions": [r[0] for r in decisions],
        "tests": [s for _i, s in tests if s],
        "pending": [r[0] for r in pending],
        "ids": ids,
    }
