"""Live compression's writer jobs: the acknowledged event and the archive row of its full output; the
archive row of a wrapped command's output (``service/wrap.py``).

Rules:
- Only the writer runs :func:`store_ack` (``await writer.run(partial(store_ack, ...))``); it never
  commits: the event (pending: acknowledged, not derived yet) and the archive row of the full
  original land in ONE transaction, so the archive id the digest names exists when the answer is
  sent (``service/compress.py``).
- The archive row takes the event's time and id; a replayed event (``insert_event`` returns 0)
  stores nothing and gives ``(0, 0)``.
- A wrapped command's output (:func:`archive_output`) has no event of its own: the wrapper hands it
  over before Claude Code's PostToolUseFailure/PostToolUse for the call arrives.
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


def archive_output(row: ops.ArchiveRow, conn: sqlite3.Connection) -> int:
    """The archive row of a wrapped command's full output; its id."""
    return ops.insert_archive(conn, row)[0]
