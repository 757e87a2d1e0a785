"""Ingesting the spool: events the shim wrote to a file while the daemon was away.

Rules:
- A spool file is renamed to ``<path>.ingesting`` first (a file already so named is a previous
  ingestion cut short: it is resumed), then ingested line by line through the hook path, and deleted
  once done. Exactly once per request id: a replayed line is answered without storing it again.
- A spool line is decoded like a request: a lone surrogate or bytes that are not UTF-8 become U+FFFD
  and the event is stored; only a line that is not JSON at all (or not an object with a ``payload``
  object) is skipped.
- Storage full: ingestion stops and the file is kept, to be retried later.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import structlog

from ..core.jsontext import repair as repair_json_text
from ..store.db import StorageFullError

log = structlog.get_logger("ctxlifed.service")

Hook = Callable[..., Awaitable[Any]]  # hook(payload, *, rid, ts)


async def ingest_file(path: str, hook: Hook) -> tuple[int, bool]:
    """Ingest one spool file through ``hook``: (events ingested, storage filled up)."""
    work = path + ".ingesting"
    if not os.path.exists(work):
        try:
            if os.path.getsize(path) == 0:
                return 0, False
            os.rename(path, work)
        except FileNotFoundError:
            return 0, False
    n = 0
    with open(work, "rb") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                rec = decode_line(line)
                payload = rec["payload"]
                if not isinstance(payload, dict):
                    continue
                rid = rec.get("rid") if isinstance(rec.get("rid"), str) else None
                ts = float(rec.get("ts")) if isinstance(rec.get("ts"), (int, float)) else None
            except (msgspec.DecodeError, KeyError, TypeError, ValueError):
                log.warning("spool_line_skipped", reason="unreadable")
                continue
            try:
                await hook(payload, rid=rid, ts=ts)
                n += 1
            except StorageFullError:
                log.warning("spool_ingest_paused", reason="storage_full")
                return n, True  # keep the file: retried later (request ids make the replay exact)
    os.unlink(work)
    return n, False


def decode_line(line: bytes) -> Any:
    """One spool line; text that is not valid Unicode (a lone surrogate, bytes that are not UTF-8:
    the shim writes what Claude Code gave it) is decoded with U+FFFD, as over the socket."""
    try:
        return msgspec.json.decode(line)
    except msgspec.DecodeError:
        fixed = repair_json_text(line)
        if fixed is None:
            raise
        return msgspec.json.decode(fixed)
