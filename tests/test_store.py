"""The store: single writer, FTS word + trigram search, CJK substrings, dedup, safe queries."""

from __future__ import annotations

import os
import sqlite3
from functools import partial
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxlifed.core.recall_query import parse_recall
from ctxlifed.store import ops, queries
from ctxlifed.store.db import Readers, StorageFullError, StoreClosedError, Writer


@pytest.fixture
def store(short_tmp: Path):
    w = Writer(str(short_tmp / "t.db"))
    r = Readers(w.path)
    yield w, r
    r.close()
    w.close()


def put(w: Writer, text: str, kind: str = "tool", project: str = "/p", session: str = "s1", **kw) -> int:
    row = ops.ArchiveRow(session=session, project=project, ts=1.0, kind=kind, text=text, **kw)
    return w.run_sync(lambda c: ops.insert_archive(c, row))[0]


def search(r: Readers, q: str, **kw):
    pq = parse_recall(q)
    return r.run_sync(partial(queries.search, words=pq.words, phrases=pq.phrases, phase=pq.phase,
                              kinds=(pq.kind,) if pq.kind else None, **kw))


def test_word_search_ranks_and_scopes_by_project(store) -> None:
    """Words match through the porter index (stemmed), scoped to a project unless widened."""
    w, r = store
    a = put(w, "refactored the authentication middleware to use tokens")
    put(w, "unrelated output", project="/other")
    b = put(w, "authentication failed with 401", project="/other")
    hits, total = search(r, "authenticate", project="/p")
    assert [h["id"] for h in hits] == [a] and total == 1
    hits, _ = search(r, "authentication")
    assert {h["id"] for h in hits} == {a, b}


def test_cjk_two_character_query_finds_substring(store) -> None:
    """A 2-character Chinese query (鉴权) finds a tool output containing it: trigram cannot, instr can."""
    w, r = store
    aid = put(w, "服务端返回错误：鉴权失败，请检查令牌")
    put(w, "另一个无关的输出")
    hits, total = search(r, "鉴权")
    assert [h["id"] for h in hits] == [aid] and total == 1
    hits, _ = search(r, "鉴权失败")  # >= 3 characters: trigram index
    assert [h["id"] for h in hits] == [aid]


def test_phrase_and_filters(store) -> None:
    """Quoted phrases match in order; phase: and type: filter."""
    w, r = store
    a = put(w, "the parser handles nested brackets", kind="code_change", phase="implementation")
    put(w, "brackets nested the parser handles", kind="tool", phase="design")
    hits, _ = search(r, '"parser handles nested"')
    assert [h["id"] for h in hits] == [a]
    hits, _ = search(r, "phase:implementation parser")
    assert [h["id"] for h in hits] == [a]
    hits, _ = search(r, "type:code_change brackets")
    assert [h["id"] for h in hits] == [a]


def test_dedup_by_content_hash(store) -> None:
    """The same text of the same kind in a project is stored once; the id is returned again."""
    w, _ = store
    a = put(w, "same output")
    b = put(w, "same output", session="s2")
    c = put(w, "same output", project="/q")
    assert a == b and a != c


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=60))
def test_arbitrary_query_text_never_raises(store, text: str) -> None:
    """No user text can raise an FTS syntax error or any other error in search."""
    w, r = store
    if not getattr(test_arbitrary_query_text_never_raises, "_seeded", False):
        put(w, "some text AND OR NOT \"quoted\" (paren) * ^ 鉴权")
        test_arbitrary_query_text_never_raises._seeded = True  # type: ignore[attr-defined]
    try:
        pq = parse_recall(text)
    except ValueError:
        return  # a clear RecallQueryError for phase:/type: typos; the daemon maps it to bad_query
    r.run_sync(partial(queries.search, words=pq.words, phrases=pq.phrases))


def test_fts_integrity_after_updates_and_deletes(store) -> None:
    """Triggers keep both FTS indexes in sync through update and delete."""
    w, _ = store
    a = put(w, "first version of the text")
    w.run_sync(lambda c: c.execute("UPDATE archive SET text='second version' WHERE id=?", (a,)))
    w.run_sync(lambda c: ops.forget(c, id=a))
    for table in ("archive_fts", "archive_tri"):
        w.run_sync(lambda c, t=table: c.execute(f"INSERT INTO {t}({t}) VALUES('integrity-check')"))
    assert w.run_sync(lambda c: c.execute("PRAGMA integrity_check").fetchone()[0]) == "ok"


def test_group_commit_isolates_a_failing_job(store) -> None:
    """One failing job in a group rolls back alone; the others commit."""
    w, r = store
    import threading

    results: list = []
    ev = threading.Event()

    def done(res):
        results.append(res)
        if len(results) == 3:
            ev.set()

    w.submit(lambda c: c.execute("INSERT INTO meta VALUES ('a','1')"), done)
    w.submit(lambda c: c.execute("INSERT INTO nope VALUES (1)"), done)
    w.submit(lambda c: c.execute("INSERT INTO meta VALUES ('b','2')"), done)
    ev.wait(10)
    assert [ok for ok, _ in results] == [True, False, True]
    assert r.run_sync(lambda c: c.execute("SELECT key FROM meta ORDER BY key").fetchall()) == [("a",), ("b",)]


def test_storage_full_is_typed_and_reads_continue(store) -> None:
    """With the database capped (max_page_count), writes raise StorageFullError; reads keep working."""
    w, r = store
    put(w, "kept row")
    w.run_sync(lambda c: c.execute("PRAGMA max_page_count=1"))  # no room for anything new
    with pytest.raises(StorageFullError):
        put(w, "x" * 200_000)
    assert search(r, "kept")[1] == 1


def test_files_are_private(store) -> None:
    """The database and its WAL are 0600."""
    w, _ = store
    put(w, "x")
    for suffix in ("", "-wal"):
        assert os.stat(w.path + suffix).st_mode & 0o777 == 0o600


def test_busy_never_surfaces_to_a_second_connection_writer(store) -> None:
    """Another process holding the write lock briefly does not make our writer fail (BEGIN IMMEDIATE waits)."""
    w, _ = store
    other = sqlite3.connect(w.path, isolation_level=None, timeout=5, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    import threading

    threading.Timer(0.2, lambda: other.execute("COMMIT")).start()
    assert put(w, "after lock") > 0
    other.close()


@pytest.mark.anyio
@pytest.mark.parametrize("wake", ["asyncio", "worker-thread"])
async def test_a_queued_job_answers_its_caller(store, wake: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A job that goes through the queue (not inline) wakes its caller on the event loop, by either
    route (``worker-thread``: the one for backends other than asyncio). It hung for ever under anyio
    4.7 when the wake-up used a private event-loop token (``make test-min``)."""
    from ctxlifed.store import db

    if wake == "worker-thread":
        monkeypatch.setattr(db, "_loop_call_soon", lambda: None)
    w, _ = store
    with anyio.fail_after(10):
        assert await w.run(lambda c: c.execute("SELECT 41 + 1").fetchone()[0]) == 42
        rows = [ops.ArchiveRow(session="s1", project="/p", ts=1.0, kind="tool", text=f"queued {i}")
                for i in range(20)]
        async with anyio.create_task_group() as tg:  # concurrent callers: one group commit, all answered
            for row in rows:
                tg.start_soon(w.run, partial(ops.insert_archive, row=row))
    assert w.run_sync(lambda c: c.execute("SELECT count(*) FROM archive").fetchone()[0]) == 20


@pytest.mark.anyio
async def test_a_job_submitted_after_close_is_answered(short_tmp: Path) -> None:
    """A job that reaches a stopped writer gets StoreClosedError instead of waiting for ever."""
    w = Writer(str(short_tmp / "t.db"))
    w.close()
    with anyio.fail_after(10), pytest.raises(StoreClosedError):
        await w.run(lambda c: 1)


def test_reads_take_the_connection_used_last(store) -> None:
    """The reader pool is last in, first out: sequential reads run on one connection (the warmest
    page cache), and a read that overlaps another gets a different one."""
    _w, r = store
    first = r.run_sync(id)
    assert r.run_sync(id) == first
    inner: list[int] = []
    outer = r.run_sync(lambda c: (inner.append(r.run_sync(id)), id(c))[1])
    assert outer == first and inner and inner[0] != first
