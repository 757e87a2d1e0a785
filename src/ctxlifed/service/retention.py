"""Retention: an age cap and a size cap per project, enforced in the background by the daemon.

Rules:
- ``retention_days`` (0 = keep forever): in every project, events, archived items (and so their
  FTS entries), facts, phase switches and ledger index rows older than the cap are deleted, and
  sessions whose last event is older.
- ``max_project_mb`` (0 = unbounded): a project's footprint is its event payload bytes plus its
  archived text characters (its share of the store, measured the same way every time). Over the
  cap, its oldest events and archived items are deleted, oldest first, until the footprint is at
  most ``TRIM_TO`` of the cap (hysteresis: a project at the cap is not trimmed again on every tick).
- The caps apply to each project separately; both are read from the live config, so a reloaded
  config takes effect at the next run.
- Deletions run as writer jobs of at most ``CHUNK`` rows each (the SQL is ``store/retention.py``),
  so hook events keep flowing between them. After anything was deleted, one ``TRUNCATE``
  checkpoint: the writer first merges the FTS indexes, so deleted text is gone from the database
  file, the WAL and the index (``store.db``).
- L3 ledger pages are files in the user's repository: their index rows age like anything else,
  the files stay (they are the user's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ..runtime.config import Config
from ..store import retention as store
from ..store.db import Writer

CHUNK = store.CHUNK
TRIM_TO = 0.9
DAY_S = 86400.0


@dataclass
class Report:
    events: int = 0
    archive: int = 0
    other: int = 0
    projects_trimmed: list[str] = field(default_factory=list)
    bytes_freed: int = 0

    @property
    def deleted(self) -> int:
        return self.events + self.archive + self.other

    def as_log(self) -> dict[str, Any]:
        return {"events": self.events, "archive": self.archive, "other": self.other,
                "projects_trimmed": len(self.projects_trimmed), "bytes_freed": self.bytes_freed}


async def enforce(writer: Writer, cfg: Config, *, now: float) -> Report:
    """Apply both caps once; returns what was deleted."""
    rep = Report()
    if cfg.retention_days > 0:
        cutoff = now - cfg.retention_days * DAY_S
        while True:
            e, a, o = await writer.run(partial(store.age_chunk, cutoff))
            rep.events, rep.archive, rep.other = rep.events + e, rep.archive + a, rep.other + o
            if max(e, a, o) < CHUNK:
                break
    if cfg.max_project_mb > 0:
        cap = cfg.max_project_mb << 20
        sizes = await writer.run(store.footprints)
        for project, size in sorted(sizes.items()):
            if size <= cap:
                continue
            rep.projects_trimmed.append(project)
            excess = size - int(cap * TRIM_TO)
            while excess > 0:
                e, a, freed = await writer.run(partial(store.trim_chunk, project, excess))
                if not e and not a:
                    break
                rep.events, rep.archive, rep.bytes_freed = rep.events + e, rep.archive + a, rep.bytes_freed + freed
                excess -= freed
    if rep.deleted:
        await writer.checkpoint("TRUNCATE")
    return rep
