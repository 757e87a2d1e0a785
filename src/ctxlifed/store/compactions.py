"""Compaction's reads and writes: a session's goal, the must-survive rows, the facts of the compact
instructions, and the compaction reports.

Rules:
- Reads run on a reader connection (``await readers.run(partial(fn, ...))``), writes only on the
  writer's (``await writer.run(partial(fn, ...))``); none commits.
- A session's goal is chosen from its first ``GOAL_PROMPTS`` archived prompts by the pure core
  (``classify.pick_goal``, ``classify.goal_text``); this module only reads them.
- The must-survive rows: the session's 8 latest decisions and constraints, and its open pending
  items that the caller's ``is_stale`` does not call stale (closed and stale items never survive).
- One compaction report per compaction, stored as its JSON; ``set_post_tokens`` completes it when
  the transcript's compact boundary arrives later.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

import msgspec

from ..core import classify
from . import queries

GOAL_PROMPTS = 64  # a session's first prompts searched for its substantive request
_enc = msgspec.json.Encoder()


def session_goal(conn: sqlite3.Connection, session: str, until: float | None = None) -> str | None:
    """The session's task: its substantive request (``classify.pick_goal``: not "go ahead"; a prompt
    that starts another task replaces it), else its first prompt, without the sentences that are facts
    of their own (``classify.goal_text``); ``until``: only prompts up to that time."""
    q = "SELECT substr(text, 1, 4000) FROM archive WHERE session = ? AND kind = 'prompt'"
    args: tuple[Any, ...] = (session,)
    if until is not None:
        q += " AND ts <= ?"
        args = (session, until)
    prompts = [r[0] for r in conn.execute(q + f" ORDER BY id LIMIT {GOAL_PROMPTS}", args)]
    goal = classify.pick_goal(prompts) or (prompts[0] if prompts else None)
    return classify.goal_text(goal) if goal else None


def insert_report(session: str, project: str, ts: float, blob: bytes, conn: sqlite3.Connection) -> int:
    """Store one compaction report (its JSON); returns its id."""
    cur = conn.execute("INSERT INTO compactions(session, project, ts, report) VALUES (?,?,?,?)",
                       (session, project, ts, blob))
    return int(cur.lastrowid or 0)


def set_post_tokens(rid: int, post: int, conn: sqlite3.Connection) -> None:
    """Complete report ``rid`` with the context size after the compaction."""
    row = conn.execute("SELECT report FROM compactions WHERE id = ?", (rid,)).fetchone()
    if row:
        rep = msgspec.json.decode(row[0])
        rep["post_tokens"] = post
        conn.execute("UPDATE compactions SET report = ? WHERE id = ?", (_enc.encode(rep), rid))


def must_survive_rows(session: str, project: str, phase_started: float, conn: sqlite3.Connection, *,
                      is_stale: Callable[[dict[str, Any]], bool] | None = None) -> dict[str, Any]:
    """What the must-survive set is built from: goal, decisions, constraints, current pending items."""
    goal = session_goal(conn, session)

    def texts(kind: str, open_only: bool) -> list[str]:
        q = "SELECT text FROM items WHERE session = ? AND kind = ?" + (" AND status = 'open'" if open_only else "")
        return [r[0] for r in conn.execute(q + " ORDER BY id DESC LIMIT 8", (session, kind)).fetchall()]

    pending = [r["text"] for r in queries.pending_items(conn, project=project, session=session, limit=32)
               if not (is_stale and is_stale(r))][:8]  # open and current: closed and stale items never survive
    return {"goal": (goal[:400] if goal else None), "decisions": texts("decision", False),
            "constraints": texts("constraint", False), "pending": pending}


def compact_facts(project: str, session: str, conn: sqlite3.Connection) -> dict[str, list[str]]:
    """The project's 8 latest decisions and open pending items (the ``# Compact instructions`` text)."""
    decisions = queries.items(conn, project=project, kind="decision", status=None, limit=8)
    pending = queries.items(conn, project=project, kind="pending", status="open", limit=8)
    return {"decisions": [r["text"] for r in decisions], "pending": [r["text"] for r in pending]}
