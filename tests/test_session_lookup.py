"""A session the daemon does not hold in memory is looked up in one read job: its own row and its
project's most recent session (whose phase a new session starts in), in process on a real store."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest

from ctxlifed.core import phase as PH
from ctxlifed.runtime.config import load
from ctxlifed.runtime.paths import Paths
from ctxlifed.service.app import Service
from ctxlifed.store.db import Readers, Writer

pytestmark = pytest.mark.anyio
FIRST = "5e5e5e5e-1111-4222-8333-000000000001"
SECOND = "5e5e5e5e-1111-4222-8333-000000000002"


@pytest.fixture
async def svc(short_tmp: Path) -> AsyncIterator[tuple[Service, Path, list[tuple[str, str]]]]:
    proj = short_tmp / "proj"
    (proj / ".git").mkdir(parents=True)
    paths = Paths(socket=str(short_tmp / "s.sock"), data_dir=str(short_tmp), config=str(short_tmp / "c.toml"))
    writer, readers = Writer(paths.db), Readers(paths.db)
    service = Service(load(str(short_tmp / "c.toml"), env={}), paths, writer, readers)
    jobs: list[tuple[str, str]] = []  # (which thread, job), in order

    def recording(kind: str, run: Any) -> Any:
        async def wrapped(fn: Any, *a: Any, **kw: Any) -> Any:
            jobs.append((kind, (fn.func if isinstance(fn, partial) else fn).__name__))
            return await run(fn, *a, **kw)
        return wrapped

    readers.run = recording("read", readers.run)  # type: ignore[method-assign]
    writer.run = recording("write", writer.run)  # type: ignore[method-assign]
    try:
        yield service, proj, jobs
    finally:
        readers.close()
        writer.close()


async def test_a_new_session_is_looked_up_in_one_read_and_starts_in_the_project_phase(svc: Any) -> None:
    service, proj, jobs = svc
    async with anyio.create_task_group() as tg:
        service.bind(tg, derive=False)
        await service.hook({"session_id": FIRST, "cwd": str(proj), "hook_event_name": "SessionStart", "source": "startup"})
        first = service.sessions[FIRST]
        first.phase = PH.PhaseState(phase="testing", since=time.time())
        await service.hook({"session_id": FIRST, "cwd": str(proj), "hook_event_name": "SessionStart", "source": "resume"})
        jobs.clear()
        await service.hook({"session_id": SECOND, "cwd": str(proj), "hook_event_name": "SessionStart",
                            "source": "startup"})
        assert service.sessions[SECOND].phase.phase == "testing"
        before_store = jobs[: next(i for i, (kind, _) in enumerate(jobs) if kind == "write")]
        assert before_store == [("read", "session_or_project_last")]
        tg.cancel_scope.cancel()
