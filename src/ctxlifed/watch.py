"""watchfiles adapter: config reloads and hand edits of L3 memory, turned into service calls.

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
  ``service/readahead.py`` arms, and only while one is armed. It polls its changes every
  :data:`READAHEAD_STEP_MS` (watchfiles hands changes over only after a step with none new), so a file is
  seen a few ms after it is written, well before its hook's shim has started; it is rebuilt when the armed
  set changes. A file written while it is being rebuilt is not seen: the hook path then reads it itself.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import structlog

from .runtime.config import Config, load

if TYPE_CHECKING:
    from .service.app import Service
    from .service.readahead import ReadAhead

log = structlog.get_logger("ctxlifed.watch")
REBUILD_S = 1.0
READAHEAD_STEP_MS = 2
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


async def readahead_loop(ra: ReadAhead, stop_requested: anyio.Event) -> None:
    """Watch the folders ``ra`` arms and hand it the files added or changed there (see the rules)."""
    import watchfiles

    while not stop_requested.is_set():
        changed = ra.changed
        folders = [f for f in ra.folders() if os.path.isdir(f)]
        if not folders:
            with anyio.move_on_after(REBUILD_S * 60):  # armed folders also expire
                await _first_of(changed, stop_requested)
            continue
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            async def stop_on_change() -> None:
                with anyio.move_on_after(REBUILD_S * 60):
                    await _first_of(changed, stop_requested)
                stop.set()

            tg.start_soon(stop_on_change)
            try:
                async for changes in watchfiles.awatch(*folders, stop_event=stop, step=READAHEAD_STEP_MS,
                                                       debounce=200, recursive=False,
                                                       ignore_permission_denied=True):
                    ra.on_files(sorted(p for c, p in changes if c != watchfiles.Change.deleted))
            except (OSError, RuntimeError) as exc:
                log.warning("readahead_watch_failed", error=str(exc))
                with anyio.move_on_after(REBUILD_S):
                    await stop_requested.wait()
            tg.cancel_scope.cancel()
