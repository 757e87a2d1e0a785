"""Live compression through the daemon (issue 17): a bulky PostToolUse output is answered with
``updatedToolOutput`` holding its L1 digest; the full original is archived (the id the digest names
resolves) and written to a 0600 file the model can Read; anything else leaves the original in place."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from ctxlifed.core.hook_events import PostToolUseFailure
from ctxlifed.runtime import config as C
from ctxlifed.service import compress
from ctxlifed.store import outputs
from test_engine import Session

CORPUS = Path(__file__).resolve().parent.parent / "bench" / "digest_corpus"
LOG = (CORPUS / "pytest_verbose_failures.txt").read_text()  # 45 KB, 6 failures at the end
MUST = json.loads((CORPUS / "pytest_verbose_failures.json").read_text())["must_keep"]
CMD = "python -m pytest -v tests 2>&1 | tee /tmp/pytest.log"
SECRET = "AKIAIOSFODNN7EXAMPLE"


def persisted(s: Session, text: str, name: str = "toolu_x.txt") -> dict[str, Any]:
    """A Bash tool_response as Claude Code sends it for an output over 30,000 characters."""
    d = s.transcript.parent / s.sid / "tool-results"
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_text(text)
    return {"stdout": text[:30_000], "stderr": "", "interrupted": False, "isImage": False,
            "noOutputExpected": False, "persistedOutputPath": str(d / name), "persistedOutputSize": len(text)}


def replaced(out: dict[str, Any]) -> str | None:
    u = out.get("hookSpecificOutput", {}).get("updatedToolOutput")
    return None if u is None else u["stdout"]


def test_long_test_log_is_replaced_by_its_digest_archived_and_readable(daemon: Any) -> None:
    s = Session(daemon, sid="c0e50000-0000-0000-0000-000000000001")
    s.hook("SessionStart", source="startup")
    mid = LOG.index("\n", len(LOG) // 2)
    text = LOG[:mid] + f"\nexport AWS_ACCESS_KEY_ID={SECRET}" + LOG[mid:]
    out = s.tool("Bash", {"command": CMD}, persisted(s, text))
    hso = out["hookSpecificOutput"]
    assert hso["hookEventName"] == "PostToolUse"
    u = hso["updatedToolOutput"]
    assert set(u) == {"stdout", "stderr", "interrupted", "isImage", "noOutputExpected"}
    dg = u["stdout"]
    lines = set(dg.split("\n"))
    assert all(m in lines for m in MUST), [m for m in MUST if m not in lines]
    assert len(dg) < len(text) / 4
    # The footer names an archive id that resolves to the full original (read from the persisted file,
    # not only the 30,000 characters of the payload), redacted.
    aid = int(re.search(r"recall --id (\d+)", dg).group(1))
    item = daemon.call("recall", {"id": aid})
    body = json.dumps(item)
    assert "6 failed, 401 passed" in body and SECRET not in body
    # ... and a file the model can Read with offset/limit: the whole original, line for line, 0600.
    path = re.search(r"Read (\S+) with offset", dg).group(1)
    assert path == str(s.transcript.parent / s.sid / "ctxlifed-outputs" / f"{aid}.txt")
    got = Path(path).read_text()
    assert SECRET not in got and got.replace("[REDACTED", "").count("\n") == text.count("\n")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    flines = got.split("\n")
    for m in re.finditer(r"^\[L(\d+)(?:-(\d+))?\]$", dg, re.M):  # every [La-b] run is those lines of the file
        a, b = int(m.group(1)), int(m.group(2) or m.group(1))
        run = dg[m.end() + 1:].split("\n")[: b - a + 1]
        assert run == flines[a - 1: b], (a, b)
    # The derivation archives the call once (same uid): one archive row for this tool call.
    daemon.call("status", {"session": s.sid})
    assert daemon.call("recall", {"query": "test_parse_dict", "cwd": str(s.project)})["total"] >= 1
    comp = s.status()["compression"]
    assert comp["replaced"] == 1 and comp["by_kind"]["test"]["replaced"] == 1
    k = comp["by_kind"]["test"]
    assert k["saved_tokens"] == k["original_tokens"] - k["digest_tokens"] > 0 and comp["saved_tokens"] == k["saved_tokens"]


def test_small_output_and_verbatim_requests_stay(daemon: Any) -> None:
    s = Session(daemon, sid="c0e50000-0000-0000-0000-000000000002")
    s.hook("SessionStart", source="startup")
    small = {"stdout": "3 passed in 0.01s", "stderr": "", "interrupted": False, "isImage": False,
             "noOutputExpected": False}
    assert replaced(s.tool("Bash", {"command": "pytest -q"}, small)) is None
    # A file the model printed on purpose stays verbatim, however long.
    assert replaced(s.tool("Bash", {"command": "cat build.log"}, persisted(s, LOG, "a.txt"))) is None
    assert s.status()["compression"]["replaced"] == 0


def test_persisted_path_outside_the_roots_or_unknown_shape_keeps_the_original(daemon: Any, tmp_path: Path) -> None:
    s = Session(daemon, sid="c0e50000-0000-0000-0000-000000000003")
    s.hook("SessionStart", source="startup")
    outside = Path("/tmp") / f"ctxlifed-test-{os.getpid()}.txt"
    outside.write_text(LOG)
    try:
        tr = persisted(s, LOG)
        tr["persistedOutputPath"] = str(outside)
        assert replaced(s.tool("Bash", {"command": CMD}, tr)) is None
        link = s.transcript.parent / "link.txt"  # a symlink under the roots to a file outside them
        link.symlink_to(outside)
        tr["persistedOutputPath"] = str(link)
        assert replaced(s.tool("Bash", {"command": CMD}, tr)) is None
    finally:
        outside.unlink()
    odd = persisted(s, LOG, "b.txt")
    odd["somethingNew"] = 1  # a shape this version does not know
    assert replaced(s.tool("Bash", {"command": CMD}, odd)) is None


def test_mcp_output_is_replaced_in_its_own_shape(daemon: Any) -> None:
    s = Session(daemon, sid="c0e50000-0000-0000-0000-000000000004")
    s.hook("SessionStart", source="startup")
    big = "\n".join(f"2026-11-29 10:00:{i % 60:02d} INFO worker {i} processed batch" for i in range(3000))
    big += "\n2026-11-29 10:01:00 ERROR worker 7 failed: connection reset by peer\n"
    out = s.tool("mcp__logs__tail", {"n": 3000}, [{"type": "text", "text": big}])
    hso = out["hookSpecificOutput"]
    assert "updatedToolOutput" not in hso
    blocks = hso["updatedMCPToolOutput"]
    assert isinstance(blocks, list) and blocks[0]["type"] == "text"
    assert "ERROR worker 7 failed: connection reset by peer" in blocks[0]["text"]


def test_compress_outputs_off_keeps_everything(daemon_factory: Any) -> None:
    d = daemon_factory(CTXLIFED_COMPRESS_OUTPUTS="off").start()
    s = Session(d, sid="c0e50000-0000-0000-0000-000000000005")
    s.hook("SessionStart", source="startup")
    assert replaced(s.tool("Bash", {"command": CMD}, persisted(s, LOG))) is None


def test_failing_call_gets_a_note_of_what_the_cut_removed(daemon: Any) -> None:
    s = Session(daemon, sid="c0e50000-0000-0000-0000-000000000006")
    s.hook("SessionStart", source="startup")
    head, tail = LOG[:5000], LOG[-5000:]
    err = f"Exit code 1\n{head}\n\n... [412 lines truncated] ...\n\n{tail}"
    out = s.fail("Bash", {"command": "python -m pytest -v tests"}, err)
    ctx = out["hookSpecificOutput"]["additionalContext"]
    assert "Claude Code cut 412 lines from the middle" in ctx
    chars = s.fail("Bash", {"command": "python -m pytest -v tests"}, err.replace("412 lines", "20012 characters"))
    assert "Claude Code cut 20,012 characters from the middle" in chars["hookSpecificOutput"]["additionalContext"]
    assert "FAILED tests/test_calc.py::test_parse_dict - AssertionError" in ctx
    assert "tee" in ctx
    # An uncut failure gets nothing from this.
    plain = s.fail("Bash", {"command": "false"}, "Exit code 1\n")
    assert "hookSpecificOutput" not in plain


def test_failure_note_is_empty_without_a_cut() -> None:
    assert compress.failure_note(PostToolUseFailure(tool_name="Bash", error="Exit code 2\nboom")) == ""
    assert compress.failure_note(PostToolUseFailure(tool_name="Read", error="... [3 lines truncated] ...")) == ""


def test_config_modes_thresholds_and_projects(tmp_path: Path) -> None:
    f = tmp_path / "config.toml"
    f.write_text('compress_outputs = "aggressive"\ncompress_min_tokens = [5000, 1500, 800, 400]\n'
                 f'[projects."{tmp_path}/a"]\ncompress_outputs = "off"\n'
                 f'[projects."{tmp_path}/b"]\ncompress_outputs = "loud"\nfoo = 1\n')
    c = C.load(str(f), env={})
    assert c.compress_outputs == "aggressive" and c.compress_min_tokens == (5000, 1500, 800, 400)
    assert c.compress_mode(str(tmp_path / "a")) == "off"
    assert c.compress_mode(str(tmp_path / "b")) == "aggressive"  # bad value ignored, reported
    assert len(c.problems) == 2 and any("loud" in p for p in c.problems) and any("'foo'" in p for p in c.problems)
    st = compress.settings_for(c, str(tmp_path / "c"))
    assert st.compress_outputs == "aggressive" and st.aggressive_min_tokens == (2000, 750, 400, 200)
    e = C.load(None, env={"CTXLIFED_COMPRESS_OUTPUTS": "OFF", "CTXLIFED_COMPRESS_MIN_TOKENS": "9000/3000/2000/1000"})
    assert e.compress_outputs == "off" and e.compress_min_tokens == (9000, 3000, 2000, 1000) and not e.problems
    bad = C.load(None, env={"CTXLIFED_COMPRESS_OUTPUTS": "sometimes"})
    assert bad.compress_outputs == "auto" and bad.problems


def test_outputs_folder_is_bounded_oldest_first(tmp_path: Path) -> None:
    folder = str(tmp_path / "outs")
    for i in range(5):
        p = compress.write_output(folder, f"{i}.txt", "x" * 1000, max_bytes=2500)
        assert p is not None
        os.utime(p, (1000 + i, 1000 + i))
    assert sorted(os.listdir(folder)) == ["3.txt", "4.txt"]


def test_read_persisted_is_bounded_and_confined(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "s").mkdir(parents=True)
    f = root / "s" / "o.txt"
    f.write_text("a\n" * 100)
    roots = (str(root.resolve()),)
    assert compress.read_persisted(str(f), roots) == "a\n" * 100
    assert compress.read_persisted(str(f), roots, max_bytes=199) is None
    assert compress.read_persisted(str(root / "s"), roots) is None  # not a regular file
    assert compress.read_persisted(str(tmp_path / "elsewhere.txt"), roots) is None
    assert compress.read_persisted("relative.txt", roots) is None


def test_a_lesson_hint_and_the_replacement_ride_in_one_answer(daemon: Any) -> None:
    """A known failure in a bulky (replaced) output: the answer carries the digest AND the lesson."""
    from test_lessons_daemon import FAIL_OUT, pytest_fixed_by_edit

    s = Session(daemon, sid="c0e50000-0000-0000-0000-000000000007")
    s.hook("SessionStart", source="startup")
    pytest_fixed_by_edit(s, "/tmp/pytest-of-u/pytest-12")
    assert len(daemon.call("lessons", {"cwd": str(s.project)})["lessons"]) == 1  # (reads wait for the derivation)
    s2 = Session(daemon, sid="c0e50000-0000-0000-0000-000000000008")
    s2.hook("SessionStart", source="startup")
    body = FAIL_OUT.split("\n", 1)[1]  # without "Exit code 1": the call succeeded (piped through tee)
    passing = "\n".join(f"tests/test_csv.py::test_row_{i} PASSED" for i in range(1500))
    text = passing + "\n" + body
    out = s2.tool("Bash", {"command": "pytest -q tests/test_csv.py"}, persisted(s2, text))
    hso = out["hookSpecificOutput"]
    assert "FAILED tests/test_csv.py::test_parse - AssertionError: assert 'a,b' == 'a;b'" in hso["updatedToolOutput"]["stdout"]
    assert "csvparse.py" in hso["additionalContext"]


def test_no_room_for_the_original_acknowledges_the_event_and_keeps_the_output(
        short_tmp: Path, monkeypatch: Any) -> None:
    """The archive row makes the acknowledgement's commit bigger: when that one hits a storage fault,
    the event alone is committed (as without compression) and the output stays as it was."""
    import anyio

    from ctxlifed.runtime.config import load
    from ctxlifed.runtime.paths import Paths
    from ctxlifed.service.app import Service
    from ctxlifed.store.db import Readers, StorageFullError, Writer

    def full(*_a: Any, **_k: Any) -> Any:
        raise StorageFullError("no room")

    monkeypatch.setattr(outputs, "store_ack", full)
    proj = short_tmp / "proj"
    (proj / ".git").mkdir(parents=True)
    tdir = short_tmp / "projects" / "-proj"
    tdir.mkdir(parents=True)
    sid = "c0e50000-0000-0000-0000-000000000009"
    (tdir / f"{sid}.jsonl").touch()
    paths = Paths(socket=str(short_tmp / "s.sock"), data_dir=str(short_tmp), config=str(short_tmp / "c.toml"))
    writer, readers = Writer(paths.db), Readers(paths.db)
    svc = Service(load(None, env={"CTXLIFED_TRANSCRIPT_ROOTS": str(short_tmp)}), paths, writer, readers)
    base = {"session_id": sid, "cwd": str(proj), "transcript_path": str(tdir / f"{sid}.jsonl")}

    async def main() -> Any:
        async with anyio.create_task_group() as tg:
            svc.bind(tg)
            await svc.hook({**base, "hook_event_name": "SessionStart", "source": "startup"})
            r = await svc.hook({**base, "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_use_id": "toolu_1",
                                "tool_input": {"command": CMD},
                                "tool_response": {"stdout": LOG[:30_000] + "x" * 10, "stderr": "", "interrupted": False,
                                                  "isImage": False, "noOutputExpected": False}})
            st = await svc.dispatch("status", json.dumps({"session": sid}).encode())
            tg.cancel_scope.cancel()
            return r, st

    try:
        r, st = anyio.run(main)
    finally:
        writer.close()
        readers.close()
    assert "updatedToolOutput" not in r.stdout
    assert st.events == 2 and st.sessions[0].compression.replaced == 0


def test_an_mcp_result_saved_by_claude_code_is_replaced_by_the_digest_of_its_file(daemon: Any) -> None:
    """Over its token limit an MCP result reaches PostToolUse as Claude Code's notice naming the file (2.1.328):
    the digest is made from that file; a notice naming a file outside the transcript roots is left alone."""
    s = Session(daemon, sid="c0e50000-0000-0000-0000-00000000000c")
    s.hook("SessionStart", source="startup")
    text = "".join(f"2026-11-29 10:00:{i % 60:02d} INFO worker {i} processed batch {i * 7}\n" for i in range(2000))
    text += "2026-11-29 10:01:00 ERROR worker 7 failed: connection reset by peer\n"
    d = s.transcript.parent / s.sid / "tool-results"
    d.mkdir(parents=True, exist_ok=True)
    f = d / "mcp-logs-tail-1796263540160-sa8jcf.txt"
    f.write_text(text)

    def notice(path: str) -> str:
        return (f"Error: result ({len(text):,} characters across 2,001 lines) exceeds maximum allowed tokens. Output has"
                f" been saved to {path}.\nFormat: Plain text\nUse offset and limit parameters to read specific portions"
                f" of the file.\n- You MUST read the content from the file at {path} in sequential chunks until 100% of"
                " the content has been read.\n")

    out = s.tool("mcp__logs__tail", {"n": 2000}, notice(str(f)))
    dg = out["hookSpecificOutput"]["updatedMCPToolOutput"]
    assert isinstance(dg, str) and dg.startswith("[ctxlifed digest of a log of 2,001 lines")
    assert "2026-11-29 10:01:00 ERROR worker 7 failed: connection reset by peer" in dg.split("\n")
    path = re.search(r"Read (\S+) with offset", dg).group(1)
    assert Path(path).read_text() == text
    outside = Path("/tmp") / f"ctxlifed-test-mcp-{os.getpid()}.txt"  # the daemon's roots are under its base
    outside.write_text(text)
    try:
        assert "hookSpecificOutput" not in s.tool("mcp__logs__tail", {"n": 2000}, notice(str(outside)))
    finally:
        outside.unlink()
