"""The ``report`` method: one session's time series for ``ctxlifectl report``.

Rules:
- Read-only: the session row, its compaction reports and phase switches come from the store
  (``queries.session_report``); the samples (context size and cost after every response), the
  largest items and the cost from the session state (bounded there).
- The session is ``session`` if given, else the most recent one of the ``cwd``'s project, else the
  most recent one of all; an unknown session is ``NotFound``.
- Compactions: the stored reports (before and after, as PostCompact recorded them); without any, the
  boundaries the transcript showed (the accounting's bounded history).
- Receives only what it uses: the readers, the sessions in memory, the thresholds, the budget
  function and the config (never the Service).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import msgspec

from ..core import budget as B
from ..protocol import _errors as E
from ..protocol import _methods as M
from ..runtime.config import Config
from ..store import queries
from ..store.db import Readers
from . import cost as COST
from . import files
from .state import SessionState, load


async def report(p: M.ReportParams, *, readers: Readers, sessions: Mapping[str, SessionState],
                 thresholds: B.Thresholds, budget: Callable[[SessionState], B.Budget | None],
                 cfg: Config) -> M.ReportResult:
    sid = p.session
    if sid is None:
        project = files.project_root(p.cwd) if p.cwd else None
        rows = await readers.run(partial(queries.sessions, project=project, limit=1))
        if not rows and project is not None:
            rows = await readers.run(partial(queries.sessions, limit=1))
        if not rows:
            raise E.NotFound("no session known yet")
        sid = rows[0]["session"]
    data = await readers.run(partial(queries.session_report, session=sid))
    if data is None:
        raise E.NotFound(f"unknown session {sid}")
    row = data["session"]
    st = sessions.get(sid) or load(row["state"])
    out = M.ReportResult(session=sid, project=row["project"], model=row["model"], first_ts=row["first_ts"],
                         last_ts=row["last_ts"], phases=_phases(data["switches"], row))
    out.compactions = [_compaction(ts, blob) for ts, blob in data["compactions"]]
    if st is None:
        return out
    out.model = st.model or out.model
    out.samples = [[s.ts, s.context_tokens, round(s.usd, 6)] for s in st.cost.samples]
    out.largest = [{"kind": b.kind, "label": b.label, "tokens": b.tokens} for b in st.acc.largest]
    if not out.compactions:
        out.compactions = [{"ts": n.ts, "trigger": n.trigger, "pre_tokens": n.pre_tokens, "post_tokens": n.post_tokens}
                           for n in st.acc.history]
    t = thresholds
    out.thresholds = [t.l1, t.l2, t.l3]
    b = budget(st)
    if b is not None:
        out.window, out.autocompact_at = b.window, b.autocompact_at
        out.zones = [M.ZoneView(name=z.name, capacity=z.capacity, used=z.used, pct=round(z.pct, 4)) for z in b.zones]
    out.cost = COST.view(st, b, cfg)
    return out


def _compaction(ts: float, blob: bytes) -> dict[str, Any]:
    try:
        rep = msgspec.json.decode(blob)
    except msgspec.DecodeError:
        rep = {}
    rep = rep if isinstance(rep, dict) else {}
    return {"ts": ts, "trigger": rep.get("trigger"), "pre_tokens": rep.get("pre_tokens"),
            "post_tokens": rep.get("post_tokens")}


def _phases(switches: list[dict[str, Any]], row: dict[str, Any]) -> list[dict[str, Any]]:
    """The session's phases as spans: the first from the session's start, one per switch."""
    spans: list[dict[str, Any]] = []
    begin = switches[0]["from_phase"] if switches else row["phase"]
    if begin:
        spans.append({"phase": begin, "start": row["first_ts"], "end": None})
    for sw in switches:
        if spans:
            spans[-1]["end"] = sw["ts"]
        spans.append({"phase": sw["to_phase"], "start": sw["ts"], "end": None})
    if spans:
        spans[-1]["end"] = row["ended_ts"] or row["last_ts"]
    return spans
