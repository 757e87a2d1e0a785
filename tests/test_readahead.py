"""Read-ahead of persisted outputs (service/readahead.py, issue 17): a Bash output Claude Code persisted
is read, redacted and digested when its file appears; the PostToolUse that follows uses that work only
when it is exactly the work it would do itself, and answers byte for byte as without read-ahead."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from ctxlifed.core.compress_policy import CompressSettings
from ctxlifed.core.digest import digest, digest_body, output_kind, with_footer
from ctxlifed.core.model import estimate_tokens
from ctxlifed.core.redact import redact
from ctxlifed.core.transcript import open_bash_commands
from ctxlifed.service import readahead as RA
from ctxlifed.service.readahead import ReadAhead, Reads, tool_results_folder

CORPUS = Path(__file__).resolve().parent.parent / "bench" / "digest_corpus"
LOG = (CORPUS / "pytest_verbose_failures.txt").read_text()
CMD = "python -m pytest -v tests 2>&1 | tee /tmp/pytest.log"
SID = "c0e50000-0000-0000-0000-0000000000aa"
SECRET = "AKIAIOSFODNN7EXAMPLE"
ON = CompressSettings()


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _layout(base: Path) -> tuple[Path, Path, tuple[str, ...]]:
    tdir = base / "projects" / "-proj"
    tdir.mkdir(parents=True, exist_ok=True)
    transcript = tdir / f"{SID}.jsonl"
    transcript.touch()
    return transcript, tdir / SID / "tool-results", (str(base.resolve()),)


class World:
    """What the read-ahead reads of the daemon (``Reads``), changeable by a test; counts the settings reads."""

    def __init__(self, roots: tuple[str, ...]) -> None:
        self.roots, self.settings, self.redacts, self.edited, self.settings_read = roots, ON, True, (), 0

    def reads(self) -> Reads:
        def settings(_project: str) -> CompressSettings:
            self.settings_read += 1
            return self.settings

        return Reads(roots=lambda: self.roots, settings=settings, edited_paths=lambda _s: self.edited,
                     redacts=lambda: self.redacts, max_bytes=16 << 20)


def _ra(roots: tuple[str, ...], clock: Any = None) -> tuple[ReadAhead, World]:
    w = World(roots)
    return (ReadAhead(w.reads(), clock) if clock else ReadAhead(w.reads())), w


def _arm(ra: ReadAhead, transcript: Path, *, session: str = SID) -> None:
    ra.arm(session=session, project="/proj", transcript_path=str(transcript))


def _armed(base: Path) -> tuple[ReadAhead, World, Path, Path]:
    """A read-ahead with the session of ``base``'s layout armed."""
    transcript, folder, roots = _layout(base)
    ra, w = _ra(roots)
    _arm(ra, transcript)
    return ra, w, transcript, folder


def _call(transcript: Path, tool_id: str, command: str, *, sidechain: bool = False) -> None:
    """Claude Code records a Bash call in the transcript before it runs it."""
    rec = {"type": "assistant", "isSidechain": sidechain, "message": {"role": "assistant", "content": [
        {"type": "text", "text": "Running it."},
        {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": command, "description": "x"}}]}}
    with transcript.open("a") as f:
        f.write(json.dumps(rec) + "\n")


def _result(transcript: Path, tool_id: str) -> None:
    rec = {"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": tool_id, "content": "done"}]}}
    with transcript.open("a") as f:
        f.write(json.dumps(rec) + "\n")


def _want_body(text: str, command: str | None) -> Any:
    return digest_body(text, kind=output_kind(text, command), budget_tokens=ON.digest_budget_tokens,
                       max_tokens=ON.digest_max_tokens, original_tokens=estimate_tokens(text))


def test_a_file_read_ahead_holds_the_redacted_text_and_the_body_the_hook_would_make(tmp_path: Path) -> None:
    ra, w, transcript, folder = _armed(tmp_path)
    assert ra.folders() == [str(folder.resolve())] and folder.is_dir()
    assert (folder.stat().st_mode & 0o777) == 0o700
    _call(transcript, "toolu_0", "ls")
    _result(transcript, "toolu_0")
    _call(transcript, "toolu_1", CMD)  # running now: the only call without a result
    text = LOG + f"\nexport AWS_ACCESS_KEY_ID={SECRET}\n"
    f = folder / "b31qnz1cs.txt"
    f.write_text(text)
    ra.on_files([str(f)])
    got = ra.take(str(f))
    assert got is not None and ra.used == 1
    want_text, _n = redact(text)
    assert got.text == want_text and SECRET not in got.text
    assert got.body == _want_body(want_text, CMD) and got.body.kind == "test"
    # with its footer it is the digest the hook path makes
    dg = with_footer(got.body, archive_id=7, full_path="/x/7.txt")
    assert dg == digest(want_text, command=CMD, archive_id=7, full_path="/x/7.txt",
                        original_tokens=estimate_tokens(want_text))
    # taken once: not held, and not read ahead again
    assert ra.take(str(f)) is None
    ra.on_files([str(f)])
    assert ra.made == 1


def test_the_running_command_is_read_from_the_transcript_tail() -> None:
    def line(rec: dict[str, Any]) -> bytes:
        return json.dumps(rec).encode() + b"\n"

    def use(i: str, cmd: str, side: bool = False) -> bytes:
        return line({"type": "assistant", "isSidechain": side, "message": {"content": [
            {"type": "tool_use", "id": i, "name": "Bash", "input": {"command": cmd}}]}})

    def res(i: str) -> bytes:
        return line({"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": i, "content": [
            {"type": "text", "text": "x" * 100}]}]}})

    tail = use("a", "ls") + res("a") + use("b", "make") + use("c", "pytest", side=True) + b"not json\n" + b'{"tool_use": 3}\n'
    assert open_bash_commands(tail, cut=False) == ["make"]
    assert open_bash_commands(tail + use("d", "go test ./..."), cut=False) == ["make", "go test ./..."]
    assert open_bash_commands(tail + res("b"), cut=False) == []
    # a tail that starts inside a line skips it
    assert open_bash_commands(use("e", "cargo test")[5:] + use("f", "npm test"), cut=True) == ["npm test"]


def test_the_kind_comes_from_the_text_when_no_single_command_is_running(tmp_path: Path) -> None:
    ra, w, transcript, folder = _armed(tmp_path)
    _call(transcript, "toolu_1", CMD)
    _call(transcript, "toolu_2", "make test")
    f = folder / "a.txt"
    f.write_text(LOG)
    ra.on_files([str(f)])
    got = ra.take(str(f))
    assert got is not None and got.body == _want_body(redact(LOG)[0], None)


def test_a_result_is_not_used_for_another_file_or_another_redaction_setting(tmp_path: Path) -> None:
    ra, w, transcript, folder = _armed(tmp_path)
    f = folder / "a.txt"
    f.write_text(LOG[: len(LOG) // 2])  # say the file changed after it was read
    ra.on_files([str(f)])
    f.write_text(LOG)
    os.utime(f, ns=(1, 1))
    assert ra.take(str(f)) is None and ra.missed == 1
    g = folder / "b.txt"
    g.write_text(LOG)
    ra.on_files([str(g)])
    w.redacts = False  # the config changed: the hook path now does not redact, nor what is read from now on
    assert ra.take(str(g)) is None  # read redacted
    h = folder / "c.txt"
    h.write_text(LOG)
    ra.on_files([str(h)])
    got = ra.take(str(h))
    assert got is not None and got.text == LOG
    w.redacts = True
    assert ra.take("/etc/passwd") is None  # outside the roots


def test_nothing_is_read_unarmed_for_a_hook_file_or_after_the_session_ended(tmp_path: Path) -> None:
    transcript, folder, roots = _layout(tmp_path)
    ra, w = _ra(roots)
    folder.mkdir(parents=True)
    f = folder / "a.txt"
    f.write_text(LOG)
    ra.on_files([str(f)])  # not armed
    assert ra.made == 0
    _arm(ra, transcript)
    hook_file = folder / "hook-toolu_2-PostToolUse-abc-additionalContext.txt"  # a hook's own saved output
    hook_file.write_text(LOG)
    ra.on_files([str(hook_file), str(folder / "x.json")])
    assert ra.made == 0
    changed = ra.changed
    ra.disarm(SID)
    assert changed.is_set() and ra.folders() == []
    ra.on_files([str(f)])
    assert ra.made == 0


def test_a_command_asked_verbatim_is_not_read_ahead(tmp_path: Path) -> None:
    ra, w, transcript, folder = _armed(tmp_path)
    _call(transcript, "toolu_1", "cat build.log")
    f = folder / "a.txt"
    f.write_text(LOG)
    ra.on_files([str(f)])
    assert ra.made == 0


def test_compression_off_or_a_transcript_outside_the_roots_arms_nothing(tmp_path: Path) -> None:
    transcript, _folder, roots = _layout(tmp_path / "a")
    ra, w = _ra(roots)
    w.settings = msgspec.structs.replace(ON, compress_outputs="off")
    _arm(ra, transcript)
    ra, w = _ra((str((tmp_path / "b").resolve()),))
    _arm(ra, transcript)
    assert ra.folders() == [] and not (tmp_path / "a" / "projects" / "-proj" / SID).exists()
    assert tool_results_folder(str(transcript), "../x") is None


def test_held_results_and_armed_folders_are_bounded_and_folders_expire(tmp_path: Path) -> None:
    transcript, folder, roots = _layout(tmp_path)
    clock = Clock()
    ra, w = _ra(roots, clock)
    _arm(ra, transcript)
    names = [folder / f"{i}.txt" for i in range(RA.MAX_HELD + 3)]
    for p in names:
        p.write_text(f"line {p.name}\n" * 50)
    ra.on_files([str(p) for p in names])
    assert ra.made == len(names)
    assert ra.take(str(names[0])) is None  # the oldest were dropped
    assert ra.take(str(names[-1])) is not None
    for i in range(RA.MAX_FOLDERS + 2):
        t, _f, r = _layout(tmp_path / f"s{i}")
        _arm(ra, t, session=f"s{i}")
    assert len(ra.folders()) == RA.MAX_FOLDERS
    clock.t += RA.ARM_TTL_S + 1
    assert ra.folders() == []


def test_arming_an_armed_session_reads_nothing_and_a_later_off_stops_the_reads(tmp_path: Path) -> None:
    ra, w, transcript, folder = _armed(tmp_path)
    assert w.settings_read == 1
    for _ in range(5):  # every later hook of the session
        _arm(ra, transcript)
    assert w.settings_read == 1
    w.settings = msgspec.structs.replace(ON, compress_outputs="off")  # a config reload turned it off
    f = folder / "a.txt"
    f.write_text(LOG)
    ra.on_files([str(f)])
    assert ra.made == 0


def test_a_file_that_cannot_be_read_leaves_no_result(tmp_path: Path) -> None:
    ra, w, transcript, folder = _armed(tmp_path)
    os.symlink("/etc/passwd", folder / "a.txt")
    (folder / "b.txt").mkdir()
    ra.on_files([str(folder / "a.txt"), str(folder / "b.txt"), str(folder / "gone.txt")])
    assert ra.made == 0


# ---------------------------------------------------------------- through the service and the real watch

def _run_session(base: Path, *, watch: bool) -> tuple[dict[str, Any], ReadAhead, Path]:
    from ctxlifed.runtime.config import load
    from ctxlifed.runtime.paths import Paths
    from ctxlifed.service.app import Service
    from ctxlifed.store.db import Readers, Writer
    from ctxlifed.watch import readahead_loop

    proj = base / "proj"
    (proj / ".git").mkdir(parents=True)
    transcript, folder, _roots = _layout(base)
    paths = Paths(socket=str(base / "s.sock"), data_dir=str(base), config=str(base / "c.toml"))
    writer, readers = Writer(paths.db), Readers(paths.db)
    svc = Service(load(None, env={"CTXLIFED_TRANSCRIPT_ROOTS": str(base)}), paths, writer, readers)
    ra = svc.readahead
    common = {"session_id": SID, "cwd": str(proj), "transcript_path": str(transcript)}
    text = LOG + f"\nexport AWS_ACCESS_KEY_ID={SECRET}\n"
    tool = {"tool_name": "Bash", "tool_use_id": "toolu_1", "tool_input": {"command": CMD}}
    seen: dict[str, anyio.Event] = {}
    on_files = ra.on_files

    def noted(paths: Any) -> None:
        paths = list(paths)
        on_files(paths)
        for p in paths:
            seen.setdefault(os.path.basename(p), anyio.Event()).set()

    ra.on_files = noted  # type: ignore[method-assign]

    async def watched(name: str) -> bool:
        with anyio.move_on_after(0.05):
            await seen.setdefault(name, anyio.Event()).wait()
            return True
        return False

    loop_done = anyio.Event()

    async def watch_loop() -> None:
        await readahead_loop(ra, svc.stop_requested)
        loop_done.set()

    async def main() -> dict[str, Any]:
        async with anyio.create_task_group() as tg:
            svc.bind(tg)
            if watch:
                tg.start_soon(watch_loop)
            await svc.hook({**common, "hook_event_name": "SessionStart", "source": "startup"})
            # The session's live hooks arm its folder (SessionStart makes the session; the next one arms).
            _call(transcript, "toolu_0", "git status")
            _result(transcript, "toolu_0")
            await svc.hook({**common, "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_use_id": "toolu_0",
                            "tool_input": {"command": "git status"}, "tool_response": {
                                "stdout": "On branch main", "stderr": "", "interrupted": False, "isImage": False,
                                "noOutputExpected": False}})
            await svc.dispatch("status", json.dumps({"session": SID}).encode())  # derived: the same ids in both runs
            _call(transcript, "toolu_1", CMD)
            if watch:
                # The watch starts in the background: until it reports a probe, a file could be missed.
                for i in range(100):
                    (folder / f"probe{i}").write_text("x")
                    if await watched(f"probe{i}"):
                        break
                else:
                    raise AssertionError("the watch never started")
            (folder / "b31qnz1cs.txt").write_text(text)
            if watch:
                with anyio.fail_after(10):
                    await seen.setdefault("b31qnz1cs.txt", anyio.Event()).wait()
            r = await svc.hook({**common, "hook_event_name": "PostToolUse", **tool, "tool_response": {
                "stdout": text[:30_000], "stderr": "", "interrupted": False, "isImage": False,
                "noOutputExpected": False, "persistedOutputPath": str(folder / "b31qnz1cs.txt"),
                "persistedOutputSize": len(text)}})
            await svc.hook({**common, "hook_event_name": "SessionEnd", "reason": "other"})
            svc.stop_requested.set()
            if watch:
                with anyio.fail_after(5):
                    await loop_done.wait()  # the daemon's stop ends the watch at once
            tg.cancel_scope.cancel()
            return json.loads(r.stdout)

    try:
        return anyio.run(main), ra, folder
    finally:
        writer.close()
        readers.close()


def test_the_hook_answers_as_without_read_ahead_through_the_real_watch(short_tmp: Path) -> None:
    with_ra, ra, folder = _run_session(short_tmp / "a", watch=True)
    without, ra0, _ = _run_session(short_tmp / "b", watch=False)
    assert ra.made == 1 and ra.used == 1 and ra.missed == 0  # the work was done ahead, and used
    assert ra0.made == 0 and ra0.used == 0 and ra0.missed == 1
    dg = with_ra["hookSpecificOutput"]["updatedToolOutput"]["stdout"]
    assert SECRET not in dg and "FAILED" in dg
    assert json.dumps(with_ra).replace(str(short_tmp / "a"), "B") == json.dumps(without).replace(str(short_tmp / "b"), "B")
    assert ra.folders() == []  # SessionEnd disarmed the session


def test_the_answer_uses_a_body_only_when_made_from_the_same_inputs(short_tmp: Path) -> None:
    """finish() makes the body again when the one made ahead came from other inputs (a budget, say, changed
    by a config reload in between): the digest is still exactly the hook path's own."""
    from ctxlifed.service import compress

    text = redact(LOG)[0]
    toks = estimate_tokens(text)
    stale = digest_body(text, command=CMD, budget_tokens=40, max_tokens=ON.digest_max_tokens, original_tokens=toks)
    from ctxlifed.core.compress_policy import Decision
    from ctxlifed.store import ops

    dec = Decision(kind="test", reason="x", text=text, original_tokens=toks, cut_by_claude=True, complete=True)
    row = ops.ArchiveRow(session=SID, project="/p", ts=0.0, kind="tool_result", text=text, summary="", phase="testing",
                         tool="Bash", file_path=None, uid="toolu_1", priority=0, level=0, truncated=False)
    p = compress.Pending(decision=dec, settings=ON, tool_name="Bash", tool_response={"stdout": text[:30_000]},
                         command=CMD, row=row, out_dir=None, body=stale)
    got = anyio.run(lambda: compress.finish(p, 5, ctl="ctxlifectl", max_dir_bytes=1 << 20))
    want = digest(text, command=CMD, kind="test", archive_id=5, original_tokens=toks)
    assert got is not None and got.fields["updatedToolOutput"]["stdout"] == want.text
    assert with_footer(stale, archive_id=5).text != want.text  # the stale body would have said something else


# ---------------------------------------------------------------- inotify

def test_inotify_reports_closed_and_moved_files_and_forgets_a_removed_folder(tmp_path: Path) -> None:
    from ctxlifed.runtime import inotify

    ino = inotify.open_inotify()
    assert ino is not None  # Linux
    d = tmp_path / "tool-results"
    d.mkdir()
    try:
        ino.add(str(d), inotify.IN_CLOSE_WRITE | inotify.IN_MOVED_TO)
        assert ino.read() == []  # nothing queued: it does not block
        (d / "a.txt").write_text("x")
        (tmp_path / "b.tmp").write_text("y")
        os.rename(tmp_path / "b.tmp", d / "b.txt")

        async def wait() -> None:
            with anyio.fail_after(5):
                await anyio.wait_readable(ino.fileno())

        anyio.run(wait)
        got = ino.read()
        assert [(f, n) for f, _m, n in got] == [(str(d), "a.txt"), (str(d), "b.txt")]
        assert got[0][1] & inotify.IN_CLOSE_WRITE and got[1][1] & inotify.IN_MOVED_TO
        for p in d.iterdir():
            p.unlink()
        d.rmdir()
        anyio.run(wait)
        ino.read()
        assert ino.watched() == set()  # IN_IGNORED: the folder is gone
        with pytest.raises(OSError):
            ino.add(str(d), inotify.IN_CLOSE_WRITE)
        os.symlink(tmp_path, tmp_path / "link")
        with pytest.raises(OSError):
            ino.add(str(tmp_path / "link"), inotify.IN_CLOSE_WRITE)  # a symlink is not followed
    finally:
        ino.close()


def test_the_watch_disarms_a_folder_it_cannot_watch(tmp_path: Path) -> None:
    from ctxlifed.watch import readahead_loop

    transcript, folder, roots = _layout(tmp_path)
    ra, w = _ra(roots)
    stop = anyio.Event()
    dropped = anyio.Event()
    drop = ra.drop

    def noted(f: str) -> None:
        drop(f)
        dropped.set()

    ra.drop = noted  # type: ignore[method-assign]

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(readahead_loop, ra, stop)
            _arm(ra, transcript)
            folder.rmdir()  # Claude Code's clean-up, say, before the watch is added
            with anyio.fail_after(5):
                await dropped.wait()
            stop.set()

    anyio.run(main)
    assert ra.folders() == []
    _arm(ra, transcript)  # the session's next hook arms it again
    assert ra.folders() == [str(folder.resolve())] and folder.is_dir()
