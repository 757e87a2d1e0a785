"""The watchfiles seam: config reloads and hand-edited L3 memory re-indexed (driven via on_changes)."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from ctxlifed.protocol import _methods as M
from ctxlifed.runtime.config import load
from ctxlifed.runtime.paths import Paths
from ctxlifed.service.app import Service
from ctxlifed.store.db import Readers, Writer
from ctxlifed.watch import Watched, on_changes, watch_roots


@pytest.fixture
def svc_daemon(short_tmp: Path):
    cfg_path = short_tmp / "config.toml"
    paths = Paths(socket=str(short_tmp / "s.sock"), data_dir=str(short_tmp), config=str(cfg_path))
    w = Writer(paths.db)
    r = Readers(paths.db)
    cfg = load(str(cfg_path), env={})
    svc = Service(cfg, paths, w, r)
    watched = Watched(config_path=paths.config, service=svc, apply_config=lambda new: setattr(svc, "cfg", new))
    yield types.SimpleNamespace(paths=paths, service=svc, watched=watched)
    r.close()
    w.close()


@pytest.mark.anyio
async def test_config_reload_on_change(svc_daemon) -> None:
    """Editing config.toml changes zone ratios at once; a bad value is reported, not fatal."""
    Path(svc_daemon.paths.config).write_text('zones = "20/10/60/10"\ninject_cap_tokens = 800\n')
    await on_changes(svc_daemon.watched, {svc_daemon.paths.config})
    assert svc_daemon.service.cfg.zones == (0.2, 0.1, 0.6, 0.1)
    assert svc_daemon.service.cfg.inject_cap_tokens == 800
    Path(svc_daemon.paths.config).write_text('zones = "90/90/90/90"\n')
    await on_changes(svc_daemon.watched, {svc_daemon.paths.config})
    assert svc_daemon.service.cfg.zones == (0.10, 0.10, 0.65, 0.15)
    assert any("zone" in p for p in svc_daemon.service.cfg.problems)


@pytest.mark.anyio
async def test_hand_edited_memory_is_reindexed(svc_daemon, short_tmp: Path) -> None:
    """A hand edit under <project>/docs/memory is indexed, then found by recall; a second edit replaces it."""
    project = short_tmp / "repo"
    (project / ".git").mkdir(parents=True)
    mem = project / "docs" / "memory"
    mem.mkdir(parents=True)
    page = mem / "decisions.md"
    page.write_text("# Decisions\n\n- We chose zstandard compression for snapshots.\n")
    await on_changes(svc_daemon.watched, {str(page)})
    svc = svc_daemon.service
    res = await svc.recall(M.RecallParams(query="zstandard", project=str(project)))
    assert res.total == 1 and res.hits[0].kind == "ledger"
    page.write_text("# Decisions\n\n- We chose brotli instead.\n")
    await on_changes(svc_daemon.watched, {str(page)})
    assert (await svc.recall(M.RecallParams(query="zstandard", project=str(project)))).total == 0
    assert (await svc.recall(M.RecallParams(query="brotli", project=str(project)))).total == 1
    outside = short_tmp / "elsewhere.md"
    outside.write_text("secret plans")
    await on_changes(svc_daemon.watched, {str(outside)})
    assert (await svc.recall(M.RecallParams(query="plans", all_projects=True))).total == 0


def test_watch_roots_include_config_dir_and_memory_dirs(svc_daemon, short_tmp: Path) -> None:
    """The watch set holds the config folder and each known project's memory folder that exists."""
    from ctxlifed.service.state import SessionState

    project = short_tmp / "repo2"
    (project / "docs" / "memory").mkdir(parents=True)
    svc_daemon.service.sessions["s"] = SessionState(session="s", project=str(project))
    roots = watch_roots(svc_daemon.watched)
    assert str(short_tmp) in roots and str(project / "docs" / "memory") in roots
