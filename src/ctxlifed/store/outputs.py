"""Live compression's one writer job: the acknowledged event and the archive row of its full output.

Rules:
- Only the writer runs :func:`store_ack` (``await writer.run(partial(store_ack, ...))``); it never
  commits: the event (pending: acknowledged, not derived yet) and the archive row of the full
  original land in ONE transaction, so the archive id the digest names exists when the answer is
  sent (``service/compress.py``).
- The archive row takes the event's time and id; a replayed event (``insert_event`` returns 0)
  stores nothing and gives ``(0, 0)``.
"""

from __future__ import annotations

import dataclasses
import sqlite3

from . import ops


def store_ack(row: ops.EventRow, archive: ops.ArchiveRow, conn: sqlite3.Connection) -> tuple[int, int]:
    """The acknowledged event (pending) and the archive row of the full original, in one transaction.
    ``(event id, archive id)``; ``(0, 0)`` for a replay."""
    eid = ops.insert_event(conn, dataclasses.replace(row, pending=True))
    if not eid:
        return 0, 0
    aid, _created = ops.insert_archive(conn, dataclasses.replace(archive, ts=row.ts, event_id=eid))
    return eid, aid
