"""Write-behind derivation (service/derive.py) in process, on a real store: an acknowledged event is
derived exactly once, after a crash too; forgetting wins over a queued derivation; a full backlog
pushes back; a derivation that raises does not wedge the queue; reads wait for the backlog."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from ctxlifed.core import transcript as T
from ctxlifed.protocol import _methods as M
from ctxlifed.runtime.config import load
from ctxlifed.runtime.paths import Paths
from ctxlifed.service import derive as DV
from ctxlifed.service.app import Service
from ctxlifed.store.db import Readers, Writer

SID = "5e5e5e5e-1111-4222-8333-444455556666"
pytestmark = pytest.mark.anyio


class Rig:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.proj = base / "proj"
        (self.proj / ".git").mkdir(parents=True, exist_ok=True)
        self.paths = Paths(socket=str(base / "s.sock"), data_dir=str(base), config=str(base / "c.toml"))
        self.writer = Writer(self.paths.db)
        self.readers = Readers(self.paths.db)
        self.svc = Service(load(str(base / "c.toml"), env={}), self.paths, self.writer, self.readers)

    def close(self) -> None:
        self.readers.close()
        self.writer.close()

    def payload(self, event: str, **kw: Any) -> dict[str, Any]:
        return {"session_id": SID, "cwd": str(self.proj), "hook_event_name": event, **kw}

    async def tool(self, i: int, text: str) -> None:
        await self.svc.hook(self.payload("PostToolUse", tool_name="Bash", tool_use_id=f"toolu_{i:08d}",
                                         tool_input={"command": f"echo {i}"},
                                         tool_response={"stdout": text, "stderr": ""}))

    def db(self, sql: str, *args: Any) -> list[tuple]:
        with sqlite3.connect(self.paths.db) as c:
            return c.execute(sql, args).fetchall()


@pytest.fixture
async def rig(short_tmp: Path) -> AsyncIterator[Rig]:
    r = Rig(short_tmp)
    try:
        yield r
    finally:
        r.close()


async def test_acknowledged_then_derived_once_and_reads_wait(rig: Rig) -> None:
    async with anyio.create_task_group() as tg:
        rig.svc.bind(tg, derive=False)
        await rig.svc.hook(rig.payload("SessionStart", source="startup"))  # inline: the session is new
        for i in range(5):
            await rig.tool(i, f"output WOMBAT{i} of step {i}")
        # committed, answered, not derived yet
        assert rig.db("SELECT count(*) FROM events WHERE pending = 1") == [(5,)]
        assert rig.db("SELECT count(*) FROM archive WHERE text LIKE '%WOMBAT%'") == [(0,)]
        assert rig.svc.backlog.pending(SID) == 5
        rig.svc.start_deriver()
        res = await rig.svc.dispatch("recall", b'{"query": "WOMBAT3", "all_projects": true}')
        assert res.total == 1  # the read waited for the backlog
        assert rig.db("SELECT count(*) FROM events WHERE pending = 1") == [(0,)]
        assert rig.db("SELECT count(*) FROM archive WHERE text LIKE '%WOMBAT%'") == [(5,)]
        st = await rig.svc.dispatch("status", b"{}")
        assert st.derive_pending == 0 and st.events == 6
        tg.cancel_scope.cancel()


async def test_a_recall_answers_from_what_is_stored_instead_of_waiting_for_a_bursts_backlog(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """A backlog longer than RECALL_WAIT_JOBS (a burst): recall does not wait for it (READ_WAIT_S is made
    endless here and the deriver never runs: a recall that waited would hang); it finds what was derived
    before the burst, and what the burst acknowledged once derived. A short backlog it still waits for."""
    from ctxlifed import scheduler

    monkeypatch.setattr(scheduler, "READ_WAIT_S", 3600.0)
    async with anyio.create_task_group() as tg:
        rig.svc.bind(tg, derive=False)
        await rig.svc.hook(rig.payload("SessionStart", source="startup"))
        await rig.tool(0, "output NUMBAT before the burst")
        rig.svc.start_deriver()
        assert await rig.svc.backlog.wait(None, 30)
        rig.svc.scheduler.request_began()  # a reply in progress for good: only a waiter makes the deriver run
        for i in range(scheduler.RECALL_WAIT_JOBS + 1):
            await rig.tool(1 + i, f"output NUMBAT{i} of the burst")
        with anyio.fail_after(30):  # a hang guard, not a timing
            res = await rig.svc.dispatch("recall", b'{"query": "NUMBAT", "all_projects": true}')
        assert res.total == 1 and "before the burst" in res.markdown
        assert rig.svc.backlog.pending(SID) == scheduler.RECALL_WAIT_JOBS + 1  # not urged either
        assert await rig.svc.backlog.wait(None, 30)
        res = await rig.svc.dispatch("recall", b'{"query": "NUMBAT0", "all_projects": true}')
        assert res.total == 1
        tg.cancel_scope.cancel()


async def test_pending_events_are_derived_after_a_crash(short_tmp: Path) -> None:
    first = Rig(short_tmp)
    async with anyio.create_task_group() as tg:
        first.svc.bind(tg, derive=False)
        await first.svc.hook(first.payload("SessionStart", source="startup"))
        for i in range(3):
            await first.tool(i, f"before the crash QUOKKA{i}")
        tg.cancel_scope.cancel()  # the deriver never ran: as if killed after the replies
    first.close()
    again = Rig(short_tmp)
    try:
        assert again.db("SELECT count(*) FROM events WHERE pending = 1") == [(3,)]
        async with anyio.create_task_group() as tg:
            again.svc.bind(tg)
            assert await again.svc.recover() == 3
            assert await again.svc.backlog.wait(None, 30)
            tg.cancel_scope.cancel()
        assert again.db("SELECT count(*) FROM events WHERE pending = 1") == [(0,)]
        assert again.db("SELECT count(*) FROM archive WHERE text LIKE '%QUOKKA%'") == [(3,)]
        assert again.db("SELECT events FROM sessions WHERE session = ?", SID) == [(4,)]
    finally:
        again.close()


async def test_forget_wins_over_a_queued_derivation(rig: Rig) -> None:
    async with anyio.create_task_group() as tg:
        rig.svc.bind(tg, derive=False)
        await rig.svc.hook(rig.payload("SessionStart", source="startup"))
        await rig.tool(1, "secretless but forgotten PLATYPUS")
        job = rig.svc.backlog.jobs[0]
        # forget the event's session through the store directly (the method itself waits for the backlog)
        from ctxlifed.store import ops
        await rig.writer.run(lambda c: ops.forget(c, session=SID))
        await rig.svc._derive(job)  # the queued derivation finds its event gone: nothing comes back
        assert rig.db("SELECT count(*) FROM archive") == [(0,)]
        assert rig.db("SELECT count(*) FROM events") == [(0,)]
        tg.cancel_scope.cancel()


async def test_a_full_backlog_pushes_back_and_busy_replies_pause_the_deriver(rig: Rig, monkeypatch: Any) -> None:
    monkeypatch.setattr(DV, "MAX_BACKLOG", 3)
    rig.svc.scheduler.request_began()  # a reply always in progress: the deriver waits, unless urged
    async with anyio.create_task_group() as tg:
        rig.svc.bind(tg)
        await rig.svc.hook(rig.payload("SessionStart", source="startup"))
        for i in range(3):
            await rig.tool(i, f"queued {i}")
        await anyio.wait_all_tasks_blocked()
        assert rig.svc.backlog.pending(SID) == 3  # paused behind the "replies"
        await rig.tool(3, "the fourth goes inline")  # backlog full: it waits for room (one derived), then is queued
        assert rig.svc.backlog.pending(SID) == 3 and rig.svc.backlog.derived == 1
        assert await rig.svc.backlog.wait(None, 30)
        assert rig.db("SELECT count(*) FROM events WHERE pending = 1") == [(0,)]
        assert rig.db("SELECT count(*) FROM archive WHERE text LIKE '%queued %' OR text LIKE '%goes inline%'") == [(4,)]
        tg.cancel_scope.cancel()


async def test_a_derivation_that_raises_is_logged_and_skipped(rig: Rig, monkeypatch: Any) -> None:
    real = rig.svc._hook_locked

    async def flaky(hook: Any, *a: Any, **kw: Any) -> Any:
        if "BOOM" in str(getattr(hook, "tool_response", None)):
            raise RuntimeError("a bug in derivation")
        return await real(hook, *a, **kw)

    monkeypatch.setattr(rig.svc, "_hook_locked", flaky)
    async with anyio.create_task_group() as tg:
        rig.svc.bind(tg)
        await rig.svc.hook(rig.payload("SessionStart", source="startup"))
        await rig.tool(1, "BOOM")
        await rig.tool(2, "after the bad one ECHIDNA")
        assert await rig.svc.backlog.wait(None, 30)
        assert rig.svc.backlog.failed == 1
        assert rig.db("SELECT count(*) FROM events WHERE pending = 1") == [(0,)]  # raw event kept, not retried
        assert rig.db("SELECT count(*) FROM events") == [(3,)]
        assert rig.db("SELECT count(*) FROM archive WHERE text LIKE '%ECHIDNA%'") == [(1,)]
        tg.cancel_scope.cancel()


async def test_a_waited_for_session_is_derived_first(rig: Rig) -> None:
    """A sync event waits only for its own session's backlog, not for every older job."""
    other = "6f6f6f6f-1111-4222-8333-444455556666"
    async with anyio.create_task_group() as tg:
        rig.svc.bind(tg)
        rig.svc.scheduler.request_began()  # a reply in progress for good: the deriver only runs when urged
        await rig.svc.hook(dict(rig.payload("SessionStart", source="startup"), session_id=other))
        await rig.svc.hook(rig.payload("SessionStart", source="startup"))
        for i in range(20):  # the other session's jobs come first in commit order
            await rig.svc.hook(dict(rig.payload("UserPromptSubmit", prompt=f"other {i}"), session_id=other))
        await rig.svc.hook(rig.payload("UserPromptSubmit", prompt="mine"))
        assert rig.svc.backlog.pending(other) == 20 and rig.svc.backlog.pending(SID) == 1
        await rig.svc.hook(rig.payload("PreCompact", trigger="manual"))
        assert rig.svc.backlog.pending(SID) == 0
        assert rig.svc.backlog.pending(other) == 20  # untouched: nobody waited for them
        assert await rig.svc.backlog.wait(None, 30)
        tg.cancel_scope.cancel()


async def test_sync_events_see_every_acknowledged_event(rig: Rig) -> None:
    """PreCompact (inline) waits for the session's backlog: a decision acknowledged just before is in
    its must-survive set."""
    async with anyio.create_task_group() as tg:
        rig.svc.bind(tg)
        rig.svc.scheduler.request_began()  # a reply in progress for good: the deriver only runs when urged
        await rig.svc.hook(rig.payload("SessionStart", source="startup"))
        await rig.svc.hook(rig.payload("UserPromptSubmit", prompt="We decided to use a token bucket for the limiter."))
        assert rig.svc.backlog.pending(SID) == 1
        out = await rig.svc.hook(rig.payload("PreCompact", trigger="manual"))
        assert isinstance(out, M.HookResult)
        assert rig.svc.backlog.pending(SID) == 0
        st = rig.svc.sessions[SID]
        assert any("token bucket" in it.text for it in st.must_survive)
        tg.cancel_scope.cancel()


def test_status_line_shows_what_is_still_behind() -> None:
    from ctxlifed.cli.main import render_status

    base = {"version": "x", "protocol": 1, "pid": 1, "uptime_s": 1.0, "socket": "/s", "db_path": "/d",
            "db_bytes": 0, "wal_bytes": 0, "archive_items": 0, "events": 0, "sessions": []}
    assert "behind" not in render_status(base, 0.0)
    text = render_status(dict(base, derive_pending=12, index_pending=3), 0.0)
    assert "12 events to derive" in text and "3 rows to index" in text


async def test_the_session_in_use_stays_in_memory_while_new_sessions_come(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """At the cap, the least recently used idle session is dropped, not the one whose phase began
    first: the long session in progress keeps answering from memory (acknowledged, derived behind)
    while a new session starts between each of its events; a dropped session reloads from the store."""
    from ctxlifed.service import sessions

    monkeypatch.setattr(sessions, "MAX_SESSIONS_IN_MEMORY", 4)
    async with anyio.create_task_group() as tg:
        rig.svc.bind(tg)
        await rig.svc.hook(rig.payload("SessionStart", source="startup"))  # SID: the oldest phase
        others = [f"5e5e5e5e-1111-4222-8333-{i:012d}" for i in range(8)]
        for i, other in enumerate(others):
            await rig.svc.hook({**rig.payload("SessionStart", source="startup"), "session_id": other})
            assert len(rig.svc.sessions) <= 4
            assert SID in rig.svc.sessions  # still in memory: this event is only acknowledged
            await rig.tool(i, f"output QUOLL{i}")
            assert list(rig.svc.sessions)[-1] == SID  # most recently used
        assert others[0] not in rig.svc.sessions  # the least recently used went first
        # a dropped session comes back from the store with its state
        await rig.svc.hook({**rig.payload("UserPromptSubmit", prompt="again"), "session_id": others[0]})
        assert others[0] in rig.svc.sessions
        res = await rig.svc.dispatch("recall", b'{"query": "QUOLL7", "all_projects": true}')
        assert res.total == 1
        st = await rig.svc.dispatch("status", b"{}")
        assert st.derive_pending == 0
        tg.cancel_scope.cancel()


def _assistant_line(i: int, text: str, context: int) -> bytes:
    rec = {"type": "assistant", "uuid": f"u-{i:04d}", "timestamp": "2026-11-29T11:11:22.260Z", "sessionId": SID,
           "isSidechain": False, "message": {"id": f"msg_{i:06d}", "type": "message", "role": "assistant",
                                              "model": "claude-opus-5-5", "content": [{"type": "text", "text": text}],
                                              "usage": {"input_tokens": 10, "cache_creation_input_tokens": 0,
                                                        "cache_read_input_tokens": context - 10, "output_tokens": 5}}}
    return json.dumps(rec).encode() + b"\n"


def _write_turns(path: Path, turns: int, filler: str, context: int, step: int) -> None:
    """Append ``turns`` assistant turns "TURN<i> <filler>" whose context grows by ``step`` a turn."""
    width = len(str(turns - 1))
    with path.open("ab") as f:
        for i in range(turns):
            f.write(_assistant_line(i, f"TURN{i:0{width}d} " + filler, context + i * step))


def _transcript(rig: Rig, monkeypatch: pytest.MonkeyPatch, name: str) -> Path:
    """An empty transcript where the daemon may read it (transcripts are read only from the roots)."""
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(rig.base))
    tr = rig.base / "projects" / name
    tr.parent.mkdir(exist_ok=True)
    tr.write_bytes(b"")
    return tr


def _spy_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the transcript reads from now on (``files.read_from``), in order."""
    from ctxlifed.service import files as F

    reads: list[int] = []
    real_read = F.read_from

    def spy(path: str, offset: int, n: int) -> Any:
        out = real_read(path, offset, n)
        reads.append(len(out[0]))
        return out

    monkeypatch.setattr(F, "read_from", spy)
    return reads


async def test_a_derivation_catching_up_reads_a_bounded_slice_and_the_last_one_reads_on(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a burst, each queued derivation reads at most INLINE_READ of complete transcript lines
    (a few ms of parsing and archiving per step, which hooks arriving meanwhile would wait for);
    the session's last queued one reads up to MAX_TRANSCRIPT_READ, so nothing is left behind: every
    turn is archived once and the context size is the transcript's last."""
    from ctxlifed.service import transcript_reader as reader

    reads = _spy_reads(monkeypatch)
    tr = _transcript(rig, monkeypatch, "t.jsonl")
    async with anyio.create_task_group() as tg:
        rig.svc.bind(tg, derive=False)
        await rig.svc.hook(rig.payload("SessionStart", source="startup", transcript_path=str(tr)))
        turns = 40  # of ~5 KB: ~200 KB, more than three INLINE_READ slices
        _write_turns(tr, turns, "the writer batches acknowledgements. " * 130, 40_000, 100)
        assert tr.stat().st_size > 3 * reader.INLINE_READ
        for i in range(6):
            await rig.svc.hook(rig.payload("UserPromptSubmit", prompt=f"go on {i}", transcript_path=str(tr)))
        assert rig.svc.backlog.pending(SID) == 6
        reads.clear()
        rig.svc.start_deriver()
        assert await rig.svc.backlog.wait(None, 30)
        # the five catching up (each read starts with the cursor's anchor, the bytes before its offset)
        assert reads[:5] and all(n <= reader.INLINE_READ + T.ANCHOR for n in reads[:5])
        st = rig.svc.sessions[SID]
        assert st.cursor.offset == tr.stat().st_size  # the last one read the rest
        assert st.context_tokens == 40_000 + (turns - 1) * 100  # input + cache (the last turn)
        texts = rig.db("SELECT text FROM archive WHERE kind = 'assistant'")
        assert sorted(t[0][:6] for t in texts) == [f"TURN{i:02d}" for i in range(turns)]
        tg.cancel_scope.cancel()


async def test_a_transcript_seen_late_is_still_read_a_full_slice_an_event(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """Far more transcript than the queued jobs would read in small slices (a long session the
    daemon meets late): each derivation reads up to MAX_TRANSCRIPT_READ, as before, so catching up
    takes as few events as it did."""
    from ctxlifed.service import transcript_reader as reader

    monkeypatch.setattr(reader, "MAX_TRANSCRIPT_READ", 160 << 10)
    reads = _spy_reads(monkeypatch)
    tr = _transcript(rig, monkeypatch, "late.jsonl")
    _write_turns(tr, 200, "a long session met late. " * 200, 30_000, 1)  # ~1 MB: far more than 2 jobs read in 64 KB
    async with anyio.create_task_group() as tg:
        rig.svc.bind(tg, derive=False)
        await rig.svc.hook(rig.payload("SessionStart", source="startup"))  # no transcript yet
        for i in range(3):
            await rig.svc.hook(rig.payload("UserPromptSubmit", prompt=f"go on {i}", transcript_path=str(tr)))
        reads.clear()
        rig.svc.start_deriver()
        assert await rig.svc.backlog.wait(None, 30)
        got = sum(reads)
        assert got > 2 * reader.MAX_TRANSCRIPT_READ  # three full slices, not two 64 KB ones and a full one
        assert rig.svc.sessions[SID].cursor.offset > 2 * reader.MAX_TRANSCRIPT_READ
        tg.cancel_scope.cancel()


async def test_status_reports_failed_maintenance_and_derivations(rig: Rig) -> None:
    """Index maintenance that fails (retried every second, never logged by the writer thread) and
    derivations that raised are visible in status and in `ctxlifectl status`, with the last error."""
    import threading

    from ctxlifed.cli.main import render_status

    failed = threading.Event()

    def broken_idle(conn: sqlite3.Connection) -> bool:
        failed.set()
        raise sqlite3.DatabaseError("database disk image is malformed")

    async with anyio.create_task_group() as tg:
        rig.svc.bind(tg, derive=False)
        rig.writer.idle = broken_idle
        await rig.svc.hook(rig.payload("SessionStart", source="startup"))  # a job: idle work is due after it
        assert await anyio.to_thread.run_sync(failed.wait, 10)
        await anyio.to_thread.run_sync(rig.writer.run_sync, lambda c: None)  # the failure is counted by now
        rig.svc.backlog.failed = 2
        st = await rig.svc.dispatch("status", b"{}")
        assert st.maintenance_failed >= 1 and "malformed" in st.maintenance_error
        assert st.derive_failed == 2
        text = render_status(msgspec.to_builtins(st), 0.0)
        assert "2 events could not be derived" in text
        assert "index maintenance steps" in text and "malformed" in text
        rig.writer.idle = None
        tg.cancel_scope.cancel()


async def test_a_large_read_is_folded_in_slices_with_pauses_and_the_same_result(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """A derivation that reads a large slice of transcript (a session met late) parses and folds it
    FOLD_SLICE at a time and pauses between (replies go first): one 1 MB step was ~125 ms on the
    event loop. The result is the same as one fold: every turn archived once, the context size and
    cursor those of the last line."""
    from ctxlifed.service import transcript_reader as reader

    tr = _transcript(rig, monkeypatch, "big.jsonl")
    turns = 120  # ~600 KB: ~9 slices
    _write_turns(tr, turns, "folded one slice at a time. " * 170, 20_000, 10)
    assert tr.stat().st_size > 8 * (64 << 10)
    pauses = Pauses()
    async with anyio.create_task_group() as tg:
        await _derive_after_a_prompt(rig, monkeypatch, tg, tr, pauses)
        st = rig.svc.sessions[SID]
        assert st.cursor.offset == tr.stat().st_size
        assert st.context_tokens == 20_000 + (turns - 1) * 10
        texts = rig.db("SELECT text FROM archive WHERE kind = 'assistant'")
        assert sorted(t[0][:7] for t in texts) == [f"TURN{i:03d}" for i in range(turns)]
        tg.cancel_scope.cancel()
    assert pauses.n >= 8 + 3  # between the slices, besides the derivation's own pause points


class Pauses:
    """How many times a derivation paused for replies (see :func:`_derive_after_a_prompt`)."""

    n = 0


async def _derive_after_a_prompt(rig: Rig, monkeypatch: pytest.MonkeyPatch, tg: Any, tr: Any, pauses: Pauses,
                                 before: Any = None) -> None:
    """A session starts without a transcript, a prompt names ``tr``, and its derivation runs to the end,
    every pause of it counted in ``pauses`` (``before`` runs just before the deriver starts)."""
    rig.svc.bind(tg, derive=False)
    await rig.svc.hook(rig.payload("SessionStart", source="startup"))  # no transcript yet
    await rig.svc.hook(rig.payload("UserPromptSubmit", prompt="go on", transcript_path=str(tr)))
    real_pause = rig.svc.backlog.pause

    async def counting() -> None:
        pauses.n += 1
        await real_pause()

    monkeypatch.setattr(rig.svc.backlog, "pause", counting)
    if before is not None:
        before()
    rig.svc.start_deriver()
    assert await rig.svc.backlog.wait(None, 30)



async def test_a_derivation_of_many_elements_pauses_between_their_summaries(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """One derivation whose transcript slice holds many turns (after a burst) summarizes them one
    at a time with a pause between (replies go first): all of them in one go held the event loop
    for milliseconds. Every turn is archived once, as before."""
    from ctxlifed.core import summarize as S

    tr = _transcript(rig, monkeypatch, "many.jsonl")
    turns = 40
    _write_turns(tr, turns, "a short turn", 20_000, 10)
    summarized: list[int] = []  # pauses seen when each summary was made
    pauses = Pauses()
    real_summarize = S.summarize

    def spying(el):  # noqa: ANN001, ANN202
        summarized.append(pauses.n)
        return real_summarize(el)

    monkeypatch.setattr(S, "summarize", spying)
    async with anyio.create_task_group() as tg:
        await _derive_after_a_prompt(rig, monkeypatch, tg, tr, pauses, before=summarized.clear)
        texts = rig.db("SELECT text FROM archive WHERE kind = 'assistant'")
        assert sorted(t[0][:6] for t in texts) == [f"TURN{i:02d}" for i in range(turns)]
        tg.cancel_scope.cancel()
    assert len(summarized) > turns
    assert all(b > a for a, b in zip(summarized, summarized[1:]))  # a pause between every two summaries

def _image_line(uuid: str, image_bytes: int) -> bytes:
    """A user record with a pasted screenshot: one line of about ``image_bytes`` of base64."""
    rec = {"parentUuid": None, "isSidechain": False, "userType": "external", "cwd": "/p", "sessionId": SID,
           "version": "2.1.3", "gitBranch": "main", "type": "user",
           "message": {"role": "user", "content": [
               {"type": "text", "text": "what is wrong in this screenshot?"},
               {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO" * (image_bytes // 4)}}]},
           "uuid": uuid, "timestamp": "2026-11-29T11:12:00.000Z"}
    return json.dumps(rec, separators=(",", ":")).encode() + b"\n"


@pytest.mark.parametrize("image_mb", [0.9, 1.1, 2, 5])
async def test_a_transcript_line_over_the_read_size_is_skipped_and_reading_goes_on(
        rig: Rig, monkeypatch: pytest.MonkeyPatch, image_mb: float) -> None:
    """A pasted screenshot puts MBs on one transcript line. It used to stop the cursor for good once
    it was over MAX_TRANSCRIPT_READ (the read size equalled the line cap, so the skip was never
    reached): the context stayed at its old figure and later turns were never archived. Now the
    line is skipped and the next event reads on: the context is the next response's, its text archived."""
    tr = _transcript(rig, monkeypatch, "shot.jsonl")
    _write_turns(tr, 3, "before the screenshot", 20_000, 500)  # last context 21,000
    async with anyio.create_task_group() as tg:
        rig.svc.bind(tg)
        await rig.svc.hook(rig.payload("SessionStart", source="startup", transcript_path=str(tr)))
        st = rig.svc.sessions[SID]
        assert st.context_tokens == 21_000
        with tr.open("ab") as f:
            f.write(_image_line("img-1", int(image_mb * (1 << 20))))
            f.write(_assistant_line(7, "AFTERSHOT the button is misaligned", 170_000))
        await rig.svc.hook(rig.payload("UserPromptSubmit", prompt="and now?", transcript_path=str(tr)))
        assert await rig.svc.backlog.wait(None, 30)
        assert st.cursor.offset == tr.stat().st_size and not st.cursor.skipping
        assert st.context_tokens == 170_000
        assert rig.db("SELECT count(*) FROM archive WHERE text LIKE 'AFTERSHOT%'") == [(1,)]
        tg.cancel_scope.cancel()


async def test_a_transcript_rewritten_to_a_larger_size_is_read_again_from_the_start(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """A transcript replaced by a longer one (rewritten in place or renamed over) used to be read on
    from the old offset: the middle of the new file, so most of its lines were lost. The bytes before
    the offset no longer match what was read there: the new file is read from its start."""
    tr = _transcript(rig, monkeypatch, "rewritten.jsonl")
    _write_turns(tr, 40, "OLDTEXT of the first version", 10_000, 10)
    async with anyio.create_task_group() as tg:
        rig.svc.bind(tg)
        await rig.svc.hook(rig.payload("SessionStart", source="startup", transcript_path=str(tr)))
        st = rig.svc.sessions[SID]
        old_size = tr.stat().st_size
        assert st.cursor.offset == old_size
        new = b"".join(_assistant_line(1000 + i, f"NEW{i:02d} rewritten text", 50_000 + i) for i in range(80))
        assert len(new) > old_size
        tr.write_bytes(new)  # in place: same inode, larger
        await rig.svc.hook(rig.payload("UserPromptSubmit", prompt="go on", transcript_path=str(tr)))
        assert await rig.svc.backlog.wait(None, 30)
        got = rig.db("SELECT count(*) FROM archive WHERE text LIKE 'NEW%'")[0][0]
        assert got == 80
        assert st.cursor.offset == len(new)
        assert st.context_tokens == 50_000 + 79
        tg.cancel_scope.cancel()


async def test_an_assistant_line_over_the_read_size_still_counts_its_usage(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """A response that writes a 2 MB file is one line over MAX_TRANSCRIPT_READ: it is skipped, but its
    usage is read from its head and tail, so the context figure is its own (it stayed at the old one)."""
    tr = _transcript(rig, monkeypatch, "bigwrite.jsonl")
    _write_turns(tr, 3, "before the big write", 20_000, 500)
    rec = {"parentUuid": "p", "isSidechain": False, "userType": "external", "cwd": "/p", "sessionId": SID,
           "message": {"model": "claude-opus-5-5", "id": "msg_BIGWRITE", "type": "message", "role": "assistant",
                       "content": [{"type": "tool_use", "id": "toolu_big", "name": "Write",
                                    "input": {"file_path": "/p/data.json", "content": "0123456789" * (200 << 10)}}],
                       "stop_reason": "tool_use",
                       "usage": {"input_tokens": 4, "cache_creation_input_tokens": 2_000, "cache_read_input_tokens": 168_000,
                                 "output_tokens": 600_000}},
           "type": "assistant", "uuid": "u-big", "timestamp": "2026-11-29T11:13:00.000Z"}
    async with anyio.create_task_group() as tg:
        rig.svc.bind(tg)
        await rig.svc.hook(rig.payload("SessionStart", source="startup", transcript_path=str(tr)))
        st = rig.svc.sessions[SID]
        assert st.context_tokens == 21_000
        with tr.open("ab") as f:
            f.write(json.dumps(rec, separators=(",", ":")).encode() + b"\n")
        await rig.svc.hook(rig.payload("PostToolUse", tool_name="Write", tool_use_id="toolu_big",
                                       tool_input={"file_path": "/p/data.json"}, tool_response={}, transcript_path=str(tr)))
        assert await rig.svc.backlog.wait(None, 30)
        assert st.cursor.offset == tr.stat().st_size
        assert st.context_tokens == 4 + 2_000 + 168_000
        tg.cancel_scope.cancel()


async def test_session_start_answers_before_reading_a_transcript_it_is_far_behind_on(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """A resumed session the daemon has never seen: SessionStart used to parse its whole transcript
    (up to MAX_TRANSCRIPT_READ) before answering, while Claude Code waited for its briefing. Now
    it answers first and the session's next event reads it: every turn is archived and the context
    size is the transcript's last. A usual resume (a few KB unread) is still read before the answer."""
    tr = _transcript(rig, monkeypatch, "resumed.jsonl")
    turns = 60  # of ~5 KB: ~300 KB, far over SESSION_START_READ
    _write_turns(tr, turns, "a session from before the daemon knew it. " * 120, 50_000, 100)
    assert tr.stat().st_size > 4 * DV.SESSION_START_READ
    async with anyio.create_task_group() as tg:
        rig.svc.bind(tg)
        await rig.svc.hook(rig.payload("SessionStart", source="resume", transcript_path=str(tr)))
        assert rig.db("SELECT count(*) FROM archive WHERE kind = 'assistant'") == [(0,)]  # answered unread
        assert rig.svc.sessions[SID].cursor.offset == 0
        await rig.svc.hook(rig.payload("UserPromptSubmit", prompt="go on", transcript_path=str(tr)))
        assert await rig.svc.backlog.wait(None, 30)
        texts = rig.db("SELECT text FROM archive WHERE kind = 'assistant'")
        assert sorted(t[0][:6] for t in texts) == [f"TURN{i:02d}" for i in range(turns)]
        assert rig.svc.sessions[SID].context_tokens == 50_000 + (turns - 1) * 100
        # a usual resume: the few KB written since are read before the answer
        _write_turns(tr, 2, "one more turn. ", 70_000, 10)
        await rig.svc.hook(rig.payload("SessionStart", source="resume", transcript_path=str(tr)))
        assert rig.svc.sessions[SID].cursor.offset == tr.stat().st_size
        assert rig.svc.sessions[SID].context_tokens == 70_010
        tg.cancel_scope.cancel()


async def test_status_counts_side_work_until_it_finishes(rig: Rig) -> None:
    """Side work after a reply (L3 files) is counted by ``status`` while it runs, so a client that must
    see that nothing more happens waits for ``side_work_pending == 0`` instead of sleeping."""
    release = anyio.Event()
    started = anyio.Event()

    async def job() -> None:
        started.set()
        await release.wait()

    async def failing_job() -> None:
        raise RuntimeError("a side job that fails still ends")

    async with anyio.create_task_group() as tg:
        rig.svc.bind(tg, derive=False)
        rig.svc.spawn(job)
        rig.svc.spawn(failing_job)
        await started.wait()
        st = await rig.svc.dispatch("status", b"{}")
        assert st.side_work_pending in (1, 2)  # the failing one may already have ended
        await anyio.wait_all_tasks_blocked()
        assert (await rig.svc.dispatch("status", b"{}")).side_work_pending == 1
        release.set()
        await anyio.wait_all_tasks_blocked()
        assert (await rig.svc.dispatch("status", b"{}")).side_work_pending == 0
        tg.cancel_scope.cancel()


async def test_the_dispatcher_tells_the_scheduler_of_hooks_not_of_reads(short_tmp: Path) -> None:
    # Rule 4 of scheduler.py: idle work keeps a quiet spell after hooks (and every other non-read
    # frame), not after reads, so a recall every few ms cannot starve the trigram backlog.
    from ctxlifed.protocol import _errors as E
    from ctxlifed.scheduler import Scheduler

    t = [1000.0]
    rig = Rig(short_tmp)
    rig.svc = Service(load(str(short_tmp / "c.toml"), env={}), rig.paths, rig.writer, rig.readers,
                      scheduler=Scheduler(clock=lambda: t[0]))
    sched = rig.svc.scheduler
    try:
        async with anyio.create_task_group() as tg:
            rig.svc.bind(tg)
            for method, params in (("recall", b'{"query": "WOMBAT", "all_projects": true}'), ("status", b"{}"),
                                   ("lessons", b"{}")):
                await rig.svc.dispatch(method, params)
                assert sched.last_hook == float("-inf"), method
            hook = msgspec.json.encode(rig.payload("SessionStart", source="startup"))
            await rig.svc.dispatch("hook", hook)
            assert sched.last_hook == 1000.0
            t[0] += 1.0
            await rig.svc.dispatch("ping", b"{}")
            assert sched.last_hook == 1001.0
            t[0] += 1.0
            with pytest.raises(E.RpcError):
                await rig.svc.dispatch("no.such.method", b"{}")
            assert sched.last_hook == 1002.0  # only a known read is exempt
            tg.cancel_scope.cancel()
    finally:
        rig.close()
