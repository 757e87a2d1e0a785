"""File watches turned into service calls: config reloads and hand edits of L3 memory (watchfiles), and
Claude Code's persisted outputs (inotify).

Rules:
- The only module that imports watchfiles; tests drive ``on_changes`` directly (the seam).
- Watched: the config file's folder (reload on change; a bad file keeps the previous config and
  says why in the log) and ``<project>/<memory_dir>`` of every project that has one (re-index).
- The watch set is rebuilt when a new project appears; a missing folder is simply not watched.
  A folder that starts being watched is scanned once (re-indexing is idempotent), so an edit made
  before the watch began is not missed.
- The daemon's stop stops the watch at once: watchfiles' thread cannot be cancelled and, unless its
  stop event is set, waits out its notify timeout (5 s) before a cancelled task group may exit.
- The watch receives what it uses (:class:`Watched`: the config file, the service, how to apply a
  reloaded config), not the daemon: it does not import ``daemon.py``, which imports it.
- A second watch (:func:`readahead_loop`) follows the folders of persisted outputs that
  ``service/readahead.py`` arms, through inotify (``runtime/inotify.py``: a file is seen when it is
  closed, well before its hook's shim has started, and nothing runs between files). Without inotify
  it does nothing: the hook path reads each file itself.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import structlog

from .runtime import inotify
from .runtime.config import Config, load

if TYPE_CHECKING:
    from .service.app import Service
    from .service.readahead import ReadAhead

log = structlog.get_logger("ctxlifed.watch")
REBUILD_S = 1.0
READAHEAD_EXPIRY_S = 60.0  # how often the armed folders are checked for expiry while nothing happens
SCAN_CAP = 500  # files re-indexed when a memory folder starts being watched


@dataclass(frozen=True)
class Watched:
    """What the watch needs: the config file, the service (its live sessions' projects, its memory
    folder name, the re-indexing of L3 pages) and how a reloaded config is applied."""

    config_path: str
    service: Service
    apply_config: Callable[[Config], None]


def watch_roots(w: Watched) -> list[str]:
    roots = []
    cfg_dir = os.path.dirname(w.config_path)
    if os.path.isdir(cfg_dir):
        roots.append(cfg_dir)
    svc = w.service
    for project in sorted({session.project for session in svc.sessions.values()}):
        mem = os.path.join(project, svc.cfg.memory_dir)
        if os.path.isdir(mem):
            roots.append(mem)
    return roots


async def on_changes(w: Watched, paths: set[str]) -> None:
    svc = w.service
    if any(os.path.abspath(p) == w.config_path for p in paths):
        new = load(w.config_path)
        w.apply_config(new)
        log.info("config_reloaded", problems=list(new.problems))
    for p in sorted(paths):
        if p.endswith(".md") and os.sep + "." not in p[-200:]:
            try:
                if await svc.ledgers.reindex(p):
                    log.info("memory_reindexed", path=p)
            except Exception:  # noqa: BLE001
                log.exception("reindex_failed", path=p)


async def scan(w: Watched, roots: list[str]) -> None:
    found: set[str] = set()
    for root in roots:
        for dirpath, _dirs, names in os.walk(root):
            found.update(os.path.join(dirpath, n) for n in names if n.endswith(".md"))
            if len(found) >= SCAN_CAP:
                break
    if found:
        await on_changes(w, found)


async def watch_loop(w: Watched) -> None:
    import watchfiles

    svc = w.service
    seen: set[str] = set()
    while not svc.stop_requested.is_set():
        roots = watch_roots(w)
        new = [r for r in roots if r not in seen and r != os.path.dirname(w.config_path)]
        seen.update(roots)
        if not roots:
            await anyio.sleep(REBUILD_S)
            continue
        stop = anyio.Event()

        async def rebuild_later(current: list[str]) -> None:
            while True:
                await anyio.sleep(REBUILD_S)
                if watch_roots(w) != current:
                    stop.set()
                    return

        async def stop_with_daemon() -> None:
            await svc.stop_requested.wait()
            stop.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(rebuild_later, roots)
            tg.start_soon(stop_with_daemon)
            tg.start_soon(scan, w, new)
            try:
                async for changes in watchfiles.awatch(*roots, stop_event=stop, debounce=200, step=50,
                                                       recursive=True, ignore_permission_denied=True):
                    await on_changes(w, {p for _c, p in changes})
            except (OSError, RuntimeError) as exc:
                log.warning("watch_failed", error=str(exc))
                await anyio.sleep(REBUILD_S)
            tg.cancel_scope.cancel()


async def _first_of(*events: anyio.Event) -> None:
    """Return when any of ``events`` is set."""
    async with anyio.create_task_group() as tg:
        async def wait(e: anyio.Event) -> None:
            await e.wait()
            tg.cancel_scope.cancel()

        for e in events:
            tg.start_soon(wait, e)


async def _readable_or(fd: int, *events: anyio.Event) -> None:
    """Return when ``fd`` is readable or any of ``events`` is set."""
    async with anyio.create_task_group() as tg:
        async def readable() -> None:
            await anyio.wait_readable(fd)
            tg.cancel_scope.cancel()

        tg.start_soon(readable)
        await _first_of(*events)
        tg.cancel_scope.cancel()


async def readahead_loop(ra: ReadAhead, stop_requested: anyio.Event) -> None:
    """Watch the folders ``ra`` arms (inotify) and hand it the files written or moved there."""
    ino = inotify.open_inotify()
    if ino is None:
        log.info("readahead_off", reason="no inotify here")
        return
    warned: set[str] = set()  # folders whose failure was logged (the session's next hook arms it again)
    try:
        while not stop_requested.is_set():
            changed = ra.changed
            want = set(ra.folders())
            for folder in ino.watched() - want:
                ino.remove(folder)
            for folder in sorted(want - ino.watched()):
                try:
                    ino.add(folder, inotify.IN_CLOSE_WRITE | inotify.IN_MOVED_TO)
                except OSError as exc:  # gone, or the watch limit: that folder's hooks read their files
                    ra.drop(folder)
                    if folder not in warned and len(warned) < 1024:
                        warned.add(folder)
                        log.warning("readahead_watch_failed", folder=folder, error=str(exc))
            with anyio.move_on_after(READAHEAD_EXPIRY_S):  # armed folders also expire
                await _readable_or(ino.fileno(), changed, stop_requested)
            events = ino.read()
            if events:
                ra.on_files([os.path.join(folder, name) for folder, mask, name in events
                             if name and not mask & inotify.IN_Q_OVERFLOW])
    finally:
        ino.close()
