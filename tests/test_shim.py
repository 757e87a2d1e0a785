"""The hook shim fails open: exit 0, no output, within its deadline, whatever the daemon does."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import SHIM, SHIM_MODULE, daemon_env, run_shim

PAYLOAD = {"session_id": "0f1e2d3c-aaaa-bbbb-cccc-000000000001", "transcript_path": "/nonexistent/t.jsonl",
           "cwd": "/tmp", "hook_event_name": "UserPromptSubmit", "prompt": "hello shim"}


def fake_server(path: str, behaviour: str) -> tuple[socket.socket, threading.Thread]:
    """A misbehaving daemon: 'garbage', 'oversized', 'silent', 'close', 'wrong_id', 'exit7'."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(4)

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with conn:
                buf = b""
                while b"\n" not in buf:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    buf += chunk
                rid = json.loads(buf.split(b"\n")[0])["id"] if buf else None
                if behaviour == "garbage":
                    conn.sendall(b"\x00\xffnot json at all\n")
                elif behaviour == "oversized":
                    try:
                        conn.sendall(b'{"jsonrpc":"2.0","id":"' + rid.encode() + b'","result":{"stdout":"' + b"x" * (2 << 20) + b'"}}\n')
                    except OSError:
                        pass
                elif behaviour == "silent":
                    time.sleep(5)
                elif behaviour == "wrong_id":
                    conn.sendall(b'{"jsonrpc":"2.0","id":"nope","result":{"stdout":"HIJACK","exit_code":0}}\n')
                elif behaviour == "exit7":
                    conn.sendall(json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"stdout": "X", "exit_code": 7}}).encode() + b"\n")
                elif behaviour == "error":
                    conn.sendall(json.dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": -32603, "message": "x"}}).encode() + b"\n")

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return srv, t


def eventually(cond: Any, timeout: float = 20.0) -> None:
    """Poll a condition the daemon reaches on its own schedule (not a readiness wait)."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def shim_env(base: Path, **extra: str) -> dict[str, str]:
    return daemon_env(base, **{"CTXLIFED_HOOK_DEADLINE": "0.5", "CTXLIFED_DAEMON_CMD": "/bin/true", **extra})


@pytest.mark.parametrize("behaviour", ["garbage", "oversized", "silent", "close", "wrong_id", "exit7", "error"])
def test_fail_open_against_a_bad_daemon(short_tmp: Path, behaviour: str) -> None:
    """Garbage, oversized, silent, closing, mismatched, or erroring daemons: exit 0, empty stdout, on time."""
    env = shim_env(short_tmp)
    os.makedirs(os.path.dirname(env["CTXLIFED_SOCKET"]), exist_ok=True)
    srv, _ = fake_server(env["CTXLIFED_SOCKET"], behaviour)
    try:
        t0 = time.monotonic()
        r = run_shim(PAYLOAD, env)
        took = time.monotonic() - t0
    finally:
        srv.close()
    assert (r.returncode, r.stdout, r.stderr) == (0, b"", b"")
    assert took < 0.5 + 2.0  # deadline plus interpreter start on a loaded machine


def test_no_daemon_spools_and_spawns(short_tmp: Path) -> None:
    """No daemon: exit 0 silently, the event lands in the spool, a detached start is attempted."""
    marker = short_tmp / "spawned"
    env = shim_env(short_tmp, CTXLIFED_DAEMON_CMD=f"/usr/bin/touch {marker}")
    r = run_shim(PAYLOAD, env)
    assert (r.returncode, r.stdout, r.stderr) == (0, b"", b"")
    spool = Path(env["CTXLIFED_DATA_DIR"]) / "spool.jsonl"
    lines = spool.read_bytes().splitlines()
    assert len(lines) == 1
    rec = json.loads(lines[0])
    assert rec["payload"] == PAYLOAD and len(rec["rid"]) == 16
    assert oct(spool.stat().st_mode & 0o777) == "0o600"
    deadline = time.monotonic() + 10
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert marker.exists()


def test_a_shim_run_through_a_link_still_redacts_its_spool(short_tmp: Path) -> None:
    """``clients/ctxlifed_hook.py`` is a link to the package's shim: run through it (or any link), the
    shim still finds the redactor next to its real file, and the spool holds no secret."""
    link = short_tmp / "clients" / "ctxlifed_hook.py"
    link.parent.mkdir()
    link.symlink_to(SHIM)
    env = shim_env(short_tmp)
    payload = dict(PAYLOAD, prompt="connect with password=hunter2secret99 please")
    r = subprocess.run([sys.executable, "-I", "-S", str(link)], input=json.dumps(payload).encode(), env=env,
                       capture_output=True, timeout=30)
    assert (r.returncode, r.stdout, r.stderr) == (0, b"", b"")
    spooled = (Path(env["CTXLIFED_DATA_DIR"]) / "spool.jsonl").read_bytes()
    assert b"hunter2secret99" not in spooled
    assert b"[REDACTED:password]" in spooled


def test_sigstopped_daemon(daemon: Any) -> None:
    """A SIGSTOPped daemon: the shim still returns 0 quietly within the deadline, and spools the event."""
    env = dict(daemon.env, CTXLIFED_HOOK_DEADLINE="0.4")
    os.kill(daemon.proc.pid, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        r = run_shim(PAYLOAD, env)
        took = time.monotonic() - t0
    finally:
        os.kill(daemon.proc.pid, signal.SIGCONT)
    assert (r.returncode, r.stdout) == (0, b"")
    assert took < 0.4 + 2.0
    spooled = json.loads((daemon.data_dir / "spool.jsonl").read_bytes().splitlines()[0])
    assert spooled["payload"] == PAYLOAD
    # Resumed, the daemon answers the buffered request AND ingests the spool: stored exactly once.
    eventually(lambda: not (daemon.data_dir / "spool.jsonl").exists()
               and not (daemon.data_dir / "spool.jsonl.ingesting").exists())
    assert daemon.call("status", {"session": PAYLOAD["session_id"]})["sessions"][0]["events"] == 1


def test_spawn_leaves_no_descriptor_attached(short_tmp: Path) -> None:
    """The auto-started daemon holds none of the caller's pipes: the caller sees EOF when the shim exits."""
    env = daemon_env(short_tmp, CTXLIFED_HOOK_DEADLINE="0.5")
    env.pop("CTXLIFED_DAEMON_CMD", None)
    proc = subprocess.Popen([sys.executable, "-I", "-S", str(SHIM)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    t0 = time.monotonic()
    out, err = proc.communicate(json.dumps(PAYLOAD).encode(), timeout=15)  # returns at EOF on both pipes
    took = time.monotonic() - t0
    assert (proc.returncode, out, err) == (0, b"", b"")
    assert took < 5
    from ctxlifed.cli.client import call, wait_ready

    assert wait_ready(env["CTXLIFED_SOCKET"], timeout=20)
    pid = call(env["CTXLIFED_SOCKET"], "ping")["pid"]
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
        targets = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in fds if os.path.exists(f"/proc/{pid}/fd/{fd}")}
        assert os.readlink(f"/proc/{pid}/fd/0") == "/dev/null"
        # stdout/stderr: /dev/null from the shim, which the daemon replaces with its log in the data dir
        assert os.readlink(f"/proc/{pid}/fd/1") == os.path.join(env["CTXLIFED_DATA_DIR"], "ctxlifed.log")
        assert not any(t.startswith("pipe:") for t in targets)
        assert os.getsid(pid) == pid  # its own session
    finally:
        os.kill(pid, signal.SIGTERM)


def test_non_json_stdin_is_ignored(short_tmp: Path) -> None:
    """Input that is not a JSON object: nothing sent, nothing spooled, exit 0."""
    env = shim_env(short_tmp)
    for junk in (b"", b"not json", b"[1,2]", b"\xff\xfe"):
        r = run_shim(junk, env)
        assert (r.returncode, r.stdout) == (0, b"")
    assert not (Path(env["CTXLIFED_DATA_DIR"]) / "spool.jsonl").exists()


def test_shim_imports_only_what_a_socket_client_needs() -> None:
    """The shim's import set, run as Claude Code runs it (-I -S), stays minimal."""
    code = (
        "import sys; before=set(sys.modules); sys.argv=['x']; import runpy;"
        f" g=runpy.run_path({str(SHIM_MODULE)!r}, run_name='not_main'); "
        "print(','.join(sorted(set(sys.modules)-before)))"
    )
    r = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, check=True)
    added = set(r.stdout.strip().split(","))
    forbidden = {"json", "subprocess", "msgspec", "anyio", "sqlite3", "ctxlifed", "asyncio", "structlog"}
    assert not (added & forbidden), added & forbidden


# -- the reply decoded without json -------------------------------------------------------------------
def _load_shim() -> dict[str, Any]:
    import runpy

    return runpy.run_path(str(SHIM_MODULE), run_name="not_main")


def _reply(rid: bytes, stdout: str, exit_code: int = 0) -> bytes:
    """The daemon's exact encoding of a hook answer (protocol envelope + HookResult)."""
    from ctxlifed.protocol import _methods as M
    from ctxlifed.protocol._envelope import encode_result

    return encode_result(rid.decode(), M.HookResult(stdout=stdout, exit_code=exit_code)).rstrip(b"\n")


BRIEFING = json.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext":
                       "ctxlifed memory for \"shop\":\n\t- decided: cents, not floats \\ 10% off ≥ 10 items 🛒\r\x01 /x"}},
                      ensure_ascii=False)


def test_an_escaped_briefing_is_decoded_without_importing_json() -> None:
    """SessionStart answers with a JSON text (quotes, newlines, control characters, non-ASCII): the
    shim decodes the daemon's reply without importing json, whose import (through re) cost more than
    the rest of the shim's start-up (Claude Code timed SessionStart about twice as long as other hooks)."""
    reply = _reply(b"00ff", BRIEFING, 2)
    code = (
        "import sys; sys.argv=['x']; import runpy;"
        f" g=runpy.run_path({str(SHIM_MODULE)!r}, run_name='not_main');"
        f" got=g['_answer']({reply!r}, b'00ff');"
        " print(repr(got)); print('json' in sys.modules)"
    )
    r = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, check=True)
    got, imported = r.stdout.strip().split("\n")
    assert eval(got) == (BRIEFING, 2)  # noqa: S307 - our own repr
    assert imported == "False"


@pytest.mark.parametrize("body", [b'a"b', b"a\\", b"a\\x", b"\\u12", b"\\u12G4", b"\\ud800", b"x\\udc00y",
                                  b"a\nb", b"\xff", b"\\ud800\\u0041"])
def test_a_body_that_is_not_exactly_a_json_string_goes_to_json(body: bytes) -> None:
    """Anything but a valid string body without lone surrogates is left to json (None here), which
    gives the same answer json always gave (or refuses it)."""
    assert _load_shim()["_json_string"](body) is None


def test_replies_decode_as_json_decodes_them() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    shim = _load_shim()

    @settings(max_examples=300, deadline=None)
    @given(st.text(), st.sampled_from([0, 2]))
    def check(text: str, code: int) -> None:
        reply = _reply(b"abcd", text, code)
        assert shim["_answer"](reply, b"abcd") == (json.loads(reply)["result"]["stdout"], code)

    check()


# -- the script and its private bytecode cache ----------------------------------------------------------
def _cached_pyc(cache: Path) -> Path:
    """Where the script caches the shim proper's bytecode under ``cache`` (Python's own naming)."""
    import importlib.util

    before = sys.pycache_prefix
    sys.pycache_prefix = str(cache)
    try:
        return Path(importlib.util.cache_from_source(str(SHIM_MODULE)))
    finally:
        sys.pycache_prefix = before


def _plant_poison(pyc: Path) -> bytes:
    """Bytecode valid for the shim proper's current source whose main() prints POISON: run, it would show."""
    import importlib.util
    import marshal

    st = SHIM_MODULE.stat()
    code = compile("def main(started=None):\n    import os\n    os.write(1, b'POISON')\n    os._exit(0)\n",
                   str(SHIM_MODULE), "exec")
    blob = (importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little") + (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
            + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little") + marshal.dumps(code))
    pyc.parent.mkdir(parents=True, exist_ok=True)
    pyc.write_bytes(blob)
    return blob


def _spooled(env: dict[str, str]) -> list[dict[str, Any]]:
    spool = Path(env["CTXLIFED_DATA_DIR"]) / "spool.jsonl"
    return [json.loads(x) for x in spool.read_bytes().splitlines()] if spool.exists() else []


def test_the_script_caches_the_shim_bytecode_in_a_private_folder(short_tmp: Path) -> None:
    """The script compiles the shim proper once, into ``<data dir>/pycache`` (0700), and loads it from
    there afterwards (``-v``: Python names the bytecode it ran); nothing is written next to the source."""
    env = shim_env(short_tmp)
    data = Path(env["CTXLIFED_DATA_DIR"])
    data.mkdir(parents=True, mode=0o700)
    r = run_shim(PAYLOAD, env)
    assert (r.returncode, r.stdout, r.stderr) == (0, b"", b"")
    cache = data / "pycache"
    assert oct(cache.stat().st_mode & 0o777) == "0o700"
    pyc = _cached_pyc(cache)
    assert pyc.is_file()
    r = subprocess.run([sys.executable, "-I", "-S", "-v", str(SHIM)], input=json.dumps(PAYLOAD).encode(), env=env,
                       capture_output=True, timeout=30, check=False)
    assert (r.returncode, r.stdout) == (0, b"")
    assert f"code object from '{pyc}'".encode() in r.stderr
    assert [e["payload"] for e in _spooled(env)] == [PAYLOAD, PAYLOAD]  # the real shim ran both times


def test_a_planted_bytecode_runs_only_from_a_private_cache(short_tmp: Path) -> None:
    """Control for the refusals below: bytecode in the private cache is what runs (so it must be ours alone)."""
    env = shim_env(short_tmp)
    cache = Path(env["CTXLIFED_DATA_DIR"]) / "pycache"
    cache.mkdir(parents=True, mode=0o700)
    _plant_poison(_cached_pyc(cache))
    r = run_shim(PAYLOAD, env)
    assert (r.returncode, r.stdout) == (0, b"POISON")


@pytest.mark.parametrize("how", ["group_writable", "world_writable", "group_readable", "a_link", "a_file",
                                 "another_owner"])
def test_an_untrusted_bytecode_folder_is_never_used(short_tmp: Path, how: str) -> None:
    """A cache folder open to others, not a real folder, or not ours: its bytecode is never read, nothing
    is written there, and the shim still runs (compiled in memory) and keeps the event."""
    if how == "another_owner" and os.geteuid() != 0:
        pytest.skip("giving a folder to another uid needs root")
    env = shim_env(short_tmp)
    data = Path(env["CTXLIFED_DATA_DIR"])
    data.mkdir(parents=True, mode=0o700)
    cache = data / "pycache"
    target = short_tmp / "elsewhere"
    target.mkdir(mode=0o700)
    if how == "a_link":
        cache.symlink_to(target)
    elif how == "a_file":
        cache.write_bytes(b"")
    else:
        cache.mkdir(mode=0o700)
    planted = None
    if how != "a_file":
        planted = _plant_poison(_cached_pyc(cache))
    if how in ("group_writable", "world_writable", "group_readable"):
        os.chmod(cache, {"group_writable": 0o770, "world_writable": 0o707, "group_readable": 0o750}[how])
    elif how == "another_owner":
        os.chown(cache, 65534, 65534)
    before = sorted(str(p) for p in (target if how == "a_link" else data).rglob("*"))
    r = run_shim(PAYLOAD, env)
    assert (r.returncode, r.stdout, r.stderr) == (0, b"", b"")
    assert [e["payload"] for e in _spooled(env)] == [PAYLOAD]
    if planted is not None:
        assert _cached_pyc(cache).read_bytes() == planted
    after = sorted(str(p) for p in (target if how == "a_link" else data).rglob("*"))
    assert [p for p in after if p not in before and not p.endswith(("spool.jsonl", "spawn.stamp"))] == []


def test_the_script_fails_open_without_its_shim(short_tmp: Path) -> None:
    """The script copied without the shim proper next to it: exit 0, nothing on stdout or stderr."""
    lone = short_tmp / "lone"
    lone.mkdir()
    (lone / SHIM.name).write_bytes(SHIM.read_bytes())
    r = subprocess.run([sys.executable, "-I", "-S", str(lone / SHIM.name)], input=json.dumps(PAYLOAD).encode(),
                       env=shim_env(short_tmp), capture_output=True, timeout=30, check=False)
    assert (r.returncode, r.stdout, r.stderr) == (0, b"", b"")


def test_a_bad_spool_bound_still_keeps_the_event(short_tmp: Path) -> None:
    """``CTXLIFED_SPOOL_MAX`` that is not a number: the default bound, no traceback, the event kept."""
    env = shim_env(short_tmp, CTXLIFED_SPOOL_MAX="lots")
    r = run_shim(PAYLOAD, env)
    assert (r.returncode, r.stdout, r.stderr) == (0, b"", b"")
    assert [e["payload"] for e in _spooled(env)] == [PAYLOAD]


def test_the_script_imports_nothing_to_load_the_shim() -> None:
    """Run as Claude Code runs it, the script adds no module to the interpreter's own set but what the shim
    needs (os with what it imports under -S, and _socket): no importlib, no warnings."""
    r = subprocess.run([sys.executable, "-I", "-S", "-X", "importtime", str(SHIM)], input=b"not json",
                       capture_output=True, timeout=30, check=False)
    assert (r.returncode, r.stdout) == (0, b"")
    base = subprocess.run([sys.executable, "-I", "-S", "-X", "importtime", "-c", "pass"], capture_output=True,
                          timeout=30, check=False)

    def mods(err: bytes) -> set[str]:
        return {ln.split("|")[-1].strip() for ln in err.decode().splitlines() if ln.startswith("import time:")} - {"package"}

    needed = {"_socket", "os", "posixpath", "genericpath", "stat", "_stat", "_collections_abc"}
    assert mods(r.stderr) - mods(base.stderr) <= needed, mods(r.stderr) - mods(base.stderr)
