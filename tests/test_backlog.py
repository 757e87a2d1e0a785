"""The trigram backlog (store/backlog.py): rows are findable at once, indexed when the writer is idle,
and the index stays consistent through deletes, updates, crashes and old databases."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxlifed.store import backlog, ops
from ctxlifed.store.db import Writer
from ctxlifed.store.schema import MIGRATIONS, has_trigram

pytestmark = pytest.mark.skipif(not has_trigram(sqlite3.connect(":memory:")), reason="SQLite without trigram")


def _row(text: str, i: int = 0) -> ops.ArchiveRow:
    return ops.ArchiveRow(session="s1", project="/p", ts=float(i), kind="tool_output", text=text, uid=f"u{i}")


def _check(conn: sqlite3.Connection) -> None:
    conn.execute("INSERT INTO archive_tri(archive_tri) VALUES ('integrity-check')")
    pend = {r[0] for r in conn.execute("SELECT id FROM tri_pending")}
    assert pend <= {r[0] for r in conn.execute("SELECT id FROM archive")}  # no orphan marks


def _tri_ids(conn: sqlite3.Connection, term: str) -> list[int]:
    return sorted(r[0] for r in conn.execute("SELECT rowid FROM archive_tri WHERE archive_tri MATCH ?",
                                             (f'"{term}"',)))


@pytest.fixture
def w(tmp_path: Path) -> Iterator[Writer]:
    """A writer whose trigram backlog is driven by hand (its idle work off)."""
    writer = Writer(str(tmp_path / "x.db"))
    writer.idle = None
    try:
        yield writer
    finally:
        writer.close()


def test_insert_queues_then_index_some_indexes(w: Writer) -> None:
    ids = [w.run_sync(lambda c, i=i: ops.insert_archive(c, _row(f"alpha ConnectionManager {i} 鉴权", i))[0])
           for i in range(5)]
    assert w.run_sync(backlog.pending) == 5
    assert w.run_sync(lambda c: _tri_ids(c, "nManag")) == []
    # what a reader sees meanwhile: the pending rows, by substring, newest first
    got = w.run_sync(lambda c: backlog.pending_matches(c, ("nmanag", "鉴权"), "a.project = ?", ["/p"]))
    assert got == sorted(ids, reverse=True)
    assert w.run_sync(lambda c: backlog.index_some(c, max_rows=2, budget_s=10)) is True
    assert w.run_sync(backlog.pending) == 3
    assert w.run_sync(lambda c: backlog.index_some(c, max_rows=100, budget_s=10)) is False
    assert w.run_sync(lambda c: _tri_ids(c, "nManag")) == ids
    assert w.run_sync(lambda c: backlog.pending_matches(c, ("nmanag",), "1", [])) == []
    w.run_sync(_check)


def test_delete_and_update_of_pending_and_indexed_rows_keep_the_index_consistent(w: Writer) -> None:
    a = w.run_sync(lambda c: ops.insert_archive(c, _row("first quokka row", 1))[0])
    w.run_sync(lambda c: backlog.index_some(c, budget_s=10))
    b = w.run_sync(lambda c: ops.insert_archive(c, _row("second quokka row", 2))[0])
    # b is pending, a indexed: delete b (no FTS delete), update a (FTS delete, then pending)
    w.run_sync(lambda c: c.execute("DELETE FROM archive WHERE id = ?", (b,)))
    w.run_sync(lambda c: c.execute("UPDATE archive SET text = 'first wombat row' WHERE id = ?", (a,)))
    w.run_sync(_check)
    assert w.run_sync(lambda c: _tri_ids(c, "quokka")) == []
    assert w.run_sync(backlog.pending) == 1
    w.run_sync(lambda c: backlog.index_some(c, budget_s=10))
    assert w.run_sync(lambda c: _tri_ids(c, "wombat")) == [a]
    # an indexed row deleted: gone from the index
    w.run_sync(lambda c: c.execute("DELETE FROM archive WHERE id = ?", (a,)))
    assert w.run_sync(lambda c: _tri_ids(c, "wombat")) == []
    w.run_sync(_check)
    w.run_sync(lambda c: c.execute("INSERT INTO archive_tri(archive_tri, rank) VALUES ('integrity-check', 1)"))


def test_writer_drains_the_backlog_when_idle_and_after_a_restart(tmp_path: Path) -> None:
    db = str(tmp_path / "x.db")
    w = Writer(db)
    w.idle = None
    w.run_sync(lambda c: [ops.insert_archive(c, _row(f"row {i} platypus", i)) for i in range(20)])
    w.close()  # as after a crash: the backlog is on disk
    drained = threading.Event()
    w = Writer(db)
    real = w.idle
    assert real is not None

    def idle(conn: sqlite3.Connection) -> bool:
        more = real(conn)
        if not more:
            drained.set()
        return more

    w.idle = idle
    try:
        w.run_sync(lambda c: None)  # any job: the idle work runs once the queue is empty
        assert drained.wait(30)
        assert w.run_sync(backlog.pending) == 0
        assert len(w.run_sync(lambda c: _tri_ids(c, "platypus"))) == 20
        w.run_sync(_check)
    finally:
        w.close()


def test_idle_work_runs_under_sustained_load(tmp_path: Path) -> None:
    """A queue that never empties still lets the idle work run (every IDLE_MAX_LAG_S)."""
    w = Writer(str(tmp_path / "x.db"))
    calls = threading.Event()

    def idle(conn: sqlite3.Connection) -> bool:
        calls.set()
        return True

    w.idle = None
    w.IDLE_MAX_LAG_S = 0.0
    gate = threading.Event()
    w.submit(lambda c: gate.wait(30), lambda res: None)  # hold the writer while jobs pile up
    for _ in range(50):
        w.submit(lambda c: None, lambda res: None)
    w.idle = idle
    gate.set()
    try:
        assert calls.wait(30)
    finally:
        w.idle = None
        w.close()


def test_old_database_keeps_its_trigram_index(tmp_path: Path) -> None:
    """A store made before 0007 (rows indexed by the old trigger) migrates with nothing pending."""
    db = str(tmp_path / "old.db")
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("CREATE TABLE _migrations(name TEXT PRIMARY KEY, applied_ts REAL)")
    conn.execute("BEGIN")
    for name, stmts in MIGRATIONS:
        if name == "0007_tri_deferred":
            break
        for s in stmts:
            conn.execute(s)
        conn.execute("INSERT INTO _migrations VALUES (?, 0)", (name,))
    conn.execute("COMMIT")
    conn.execute("BEGIN")
    ops.insert_archive(conn, _row("legacy echidna row", 1))
    conn.execute("COMMIT")
    conn.close()
    w = Writer(db)
    try:
        assert "0007_tri_deferred" in w.applied
        assert w.run_sync(backlog.pending) == 0
        assert w.run_sync(lambda c: _tri_ids(c, "echidna")) == [1]
        w.run_sync(lambda c: c.execute("DELETE FROM archive WHERE id = 1"))
        w.run_sync(_check)
    finally:
        w.close()


def test_search_finds_rows_still_waiting_for_the_trigram_index(w: Writer) -> None:
    """Substring and CJK recall see a row the moment it is stored, before the writer indexes it."""
    from ctxlifed.store import queries

    old = w.run_sync(lambda c: ops.insert_archive(c, _row("older WombatFactory row 鉴权失败了", 1))[0])
    w.run_sync(lambda c: backlog.index_some(c, budget_s=10))
    new = w.run_sync(lambda c: ops.insert_archive(c, _row("newer WombatFactory row 鉴权失败了", 2))[0])
    assert w.run_sync(backlog.pending) == 1
    for words in (("mbatFact",), ("鉴权失败",), ("鉴权",)):
        hits, total = w.run_sync(lambda c, ws=words: queries.search(c, words=ws, project="/p"))
        assert [h["id"] for h in hits] == [new, old], words
        assert total == 2, words
