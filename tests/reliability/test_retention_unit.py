"""service/retention.py in process: both caps, chunking, and nothing when disabled."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ctxlifed.runtime.config import Config
from ctxlifed.service import retention
from ctxlifed.store import retention as store_retention
from ctxlifed.store import ops
from ctxlifed.store.db import Writer


def _seed(now: float, n: int, size: int, project: str, old: int = 0):  # noqa: ANN202
    def job(conn):  # noqa: ANN001, ANN202
        for i in range(n):
            ts = now - 40 * 86400 if i < old else now - (n - i)
            ops.insert_event(conn, ops.EventRow(session=f"s-{project}", project=project, cwd=project, event="PostToolUse",
                                                tool="Bash", ts=ts, payload=b"x" * size, rid=f"{project}-{i}"))
            ops.insert_archive(conn, ops.ArchiveRow(session=f"s-{project}", project=project, ts=ts, kind="tool",
                                                    text=f"{project} item {i} " + "y" * size))
    return job


@pytest.mark.anyio
async def test_caps(tmp_path: Path, figures) -> None:  # noqa: ANN001
    """Age cap deletes exactly the old rows; size cap trims the oldest down to 90 %; disabled does nothing."""
    w = Writer(str(tmp_path / "r.db"))
    try:
        now = time.time()
        await w.run(_seed(now, 50, 1000, "/age", old=20))
        await w.run(_seed(now, 40, 40_000, "/size"))
        await w.run(_seed(now, 5, 100, "/small"))
        nothing = await retention.enforce(w, Config(), now=now)
        assert 0 == nothing.deleted
        age = await retention.enforce(w, Config(retention_days=30), now=now)
        assert (20, 20) == (age.events, age.archive)
        size = await retention.enforce(w, Config(max_project_mb=1), now=now)
        sizes = await w.run(store_retention.footprints)
        left = await w.run(lambda c: [r[0] for r in c.execute("SELECT rid FROM events WHERE project='/size' ORDER BY id")])
        figures.record("size_cap_footprint_after", sizes["/size"], "bytes", cap=1 << 20)
        assert ["/size"] == size.projects_trimmed
        assert sizes["/size"] <= int((1 << 20) * retention.TRIM_TO)
        assert left and left[-1] == "/size-39" and "/size-0" not in left  # newest kept, oldest gone
        assert 5 == len(await w.run(lambda c: c.execute("SELECT id FROM events WHERE project='/small'").fetchall()))
        again = await retention.enforce(w, Config(max_project_mb=1), now=now)
        assert 0 == again.deleted  # hysteresis: under 90 % nothing more goes
    finally:
        w.close()
