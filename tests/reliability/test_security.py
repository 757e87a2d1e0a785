"""Security: file modes under any umask, unsafe runtime dirs, other uids, path traversal.

Matrix rows D1-D9 of docs/reliability.md. Tests needing a second uid run as root and drop to
``nobody`` with setpriv; elsewhere they are skipped (the in-process SO_PEERCRED test runs everywhere).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

from ._harness import (git_project, grep_files, hook, make_daemon, query, run_shim_timed, settled, store_files,
                       transcript_line, tree, wait_until)

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv")
NOBODY = 65534
SYSTEM_PY = shutil.which("python3", path="/usr/bin:/bin") or sys.executable


def _mode(p: Path | str) -> str:
    return oct(stat.S_IMODE(os.lstat(p).st_mode))


# -- D1/D8: modes of everything we create, under umask 000, 022 and 077 --------------------------------------
@pytest.mark.parametrize("umask", [0o000, 0o022, 0o077], ids=["umask000", "umask022", "umask077"])
def test_modes_of_everything_under_any_umask(rdaemon: Any, short_tmp: Path, figures: Any, umask: int) -> None:
    """Runtime dir 0700, socket 0600, lock 0600, data dir 0700, database/WAL/SHM 0600, spool 0600 (the
    shim's, under the same umask), L3 ledger pages 0644 in the project; all owned by us."""
    d = rdaemon(CTXLIFED_DAEMON_CMD="/bin/true", CTXLIFED_HOOK_DEADLINE="0.3")
    proj = git_project(short_tmp / "proj")
    # The shim spools while no daemon runs (same umask as the daemon will get).
    shim = subprocess.run([sys.executable, "-I", "-S", str(Path(__file__).parents[2] / "src/ctxlifed/_shim/ctxlifed_hook.py")],
                          input=json.dumps(hook("UserPromptSubmit", "modes", str(proj), prompt="spooled")).encode(),
                          env=d.env, capture_output=True, umask=umask, timeout=20)
    assert 0 == shim.returncode
    spool_mode = _mode(d.data_dir / "spool.jsonl")
    d.start(umask=umask)
    # A phase that settled nothing writes no page: this one states an open item.
    d.rpc("hook", hook("UserPromptSubmit", "modes", str(proj), prompt="stored. TODO: check the modes"))
    d.rpc("phase.set", {"session": "modes", "phase": "implementation"})
    ledger = wait_until(lambda: next(iter((proj / "docs" / "memory").rglob("*.md")), None))
    sock = Path(d.socket)
    modes = {
        "runtime_dir": _mode(sock.parent), "socket": _mode(sock), "lock": _mode(sock.parent / "ctxlifed.lock"),
        "data_dir": _mode(d.data_dir), "db": _mode(d.db), "wal": _mode(f"{d.db}-wal"), "shm": _mode(f"{d.db}-shm"),
        "spool": spool_mode, "ledger_page": _mode(ledger), "ledger_dir": _mode(ledger.parent),
    }
    figures.record("modes", modes, umask=oct(umask))
    expected = {"runtime_dir": "0o700", "socket": "0o600", "lock": "0o600", "data_dir": "0o700", "db": "0o600",
                "wal": "0o600", "shm": "0o600", "spool": "0o600", "ledger_page": "0o644"}
    assert expected == {k: v for k, v in modes.items() if k in expected}
    for p in (sock.parent, sock, d.data_dir, d.db, ledger):
        assert os.stat(p).st_uid == os.geteuid()


# -- D2/D3/D4: unsafe runtime dirs are refused with the fix ------------------------------------------------
def _unsafe(base: Path, case: str) -> tuple[Path, str]:
    """Make an unsafe runtime dir; returns it and the words its refusal must contain."""
    d = base / f"rt-{case}"
    if case in ("0770", "0707", "0757", "0722"):
        d.mkdir()
        os.chmod(d, int(case, 8))
        return d, f"chmod 700 {d}"
    if case == "a_file":
        d.write_text("")
        return d, f"mv {d}"
    if case == "dangling_symlink":
        d.symlink_to(base / "nowhere")
        return d, f"rm -f {d}"
    if case == "symlink_to_open_dir":
        t = base / "open-target"
        t.mkdir()
        os.chmod(t, 0o777)
        d.symlink_to(t)
        return d, "chmod 700"
    if case == "foreign_owner":
        d.mkdir(mode=0o700)
        os.chown(d, NOBODY, NOBODY)
        return d, "not by you"
    if case == "symlink_to_foreign_dir":
        t = base / "foreign-target"
        t.mkdir(mode=0o700)
        os.chown(t, NOBODY, NOBODY)
        d.symlink_to(t)
        return d, "not by you"
    if case == "foreign_symlink_to_our_dir":
        t = base / "our-target"
        t.mkdir(mode=0o700)
        d.symlink_to(t)
        os.lchown(d, NOBODY, NOBODY)
        return d, f"rm {d}"
    raise AssertionError(case)


ROOT_CASES = {"foreign_owner", "symlink_to_foreign_dir", "foreign_symlink_to_our_dir"}


@pytest.mark.parametrize("case", ["0770", "0707", "0757", "0722", "a_file", "dangling_symlink", "symlink_to_open_dir",
                                  pytest.param("foreign_owner", marks=ROOT_ONLY),
                                  pytest.param("symlink_to_foreign_dir", marks=ROOT_ONLY),
                                  pytest.param("foreign_symlink_to_our_dir", marks=ROOT_ONLY)])
def test_unsafe_runtime_dir_refused_with_the_fix(short_tmp: Path, figures: Any, case: str) -> None:
    """Group/other-writable, not a dir, dangling, a symlink to an open or foreign dir, a foreign-owned dir
    or symlink: the daemon refuses to start (exit 2) and names the fix; it never binds there."""
    from conftest import daemon_env

    rt, fix = _unsafe(short_tmp, case)
    env = daemon_env(short_tmp, CTXLIFED_SOCKET=str(rt / "s.sock"))
    r = subprocess.run([sys.executable, "-m", "ctxlifed"], env=env, capture_output=True, timeout=30)
    msg = r.stderr.decode(errors="replace")
    figures.record("exit_code", r.returncode)
    figures.record("message_has_fix", fix in msg, message=msg.strip()[:200])
    assert 2 == r.returncode, msg
    assert fix in msg, msg
    assert not os.path.exists(rt / "s.sock")


def test_symlinked_runtime_dir_to_a_private_dir_of_ours_works(short_tmp: Path, figures: Any) -> None:
    """A symlink (ours) to a private dir (ours): the daemon runs, the socket lands in the target, 0600."""
    target = short_tmp / "private"
    target.mkdir(mode=0o700)
    link = short_tmp / "link"
    link.symlink_to(target)
    d = make_daemon(short_tmp, CTXLIFED_SOCKET=str(link / "s.sock"))
    try:
        d.start()
        figures.record("socket_mode", _mode(target / "s.sock"))
        assert stat.S_ISSOCK(os.lstat(target / "s.sock").st_mode)
        assert "0o600" == _mode(target / "s.sock")
        assert d.rpc("ping")["result"]["pong"]
    finally:
        d.stop()


# -- D5/D6: another uid ------------------------------------------------------------------------------------
NOBODY_CLIENT = r"""
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(5)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print(json.dumps({"connect": e.errno})); sys.exit(0)
try:
    s.sendall(b'{"jsonrpc":"2.0","method":"ping","id":1}\n')
except OSError as e:  # the daemon already closed on us
    print(json.dumps({"connect": 0, "send_error": e.errno, "bytes": 0})); sys.exit(0)
data = b""
try:
    while True:
        c = s.recv(4096)
        if not c: break
        data += c
except OSError as e:
    print(json.dumps({"connect": 0, "recv_error": e.errno, "bytes": len(data)})); sys.exit(0)
print(json.dumps({"connect": 0, "bytes": len(data)}))
"""


def _as_nobody(path: str) -> dict[str, Any]:
    r = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", SYSTEM_PY, "-I", "-S",
                        "-c", NOBODY_CLIENT, path], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@ROOT_ONLY
def test_another_uid_cannot_connect(rdaemon: Any, figures: Any) -> None:
    """As nobody, connecting to the real socket fails with EACCES: the 0700 dir stops it before the socket."""
    import errno

    d = rdaemon()
    d.start()
    got = _as_nobody(d.socket)
    figures.record("errno", got["connect"], name=errno.errorcode.get(got["connect"], "?"))
    assert errno.EACCES == got["connect"]


@ROOT_ONLY
def test_foreign_peer_is_closed_with_no_answer(rdaemon: Any, figures: Any) -> None:
    """With the dir and socket opened up (test only), nobody can connect, but SO_PEERCRED closes the
    connection before a byte is read: 0 response bytes, one log line, the daemon still serves us."""
    d = rdaemon()
    d.start()
    for p in (d.base, d.base / "run"):  # test only: let nobody reach the socket
        os.chmod(p, 0o711)
    os.chmod(os.path.dirname(d.socket), 0o711)
    os.chmod(d.socket, 0o666)
    got = _as_nobody(d.socket)
    rejected = wait_until(lambda: d.log_events("peer_rejected"), timeout=5)
    figures.record("response_bytes", got.get("bytes"))
    figures.record("rejected_log_lines", len(rejected), peer_uid=rejected[0].get("peer_uid"))
    assert 0 == got["connect"] and 0 == got.get("bytes")
    assert NOBODY == rejected[0]["peer_uid"]
    assert d.rpc("ping")["result"]["pong"]


@pytest.mark.anyio
async def test_peer_uid_mismatch_unit(figures: Any) -> None:
    """In process: a server expecting another uid closes a connection from us without answering."""
    from ctxlifed.server.listener import Limits, Server

    async def dispatch(method: str, params: bytes, rid: Any = None) -> Any:
        return {"pong": True}

    server = Server(dispatch, Limits())
    server.uid = os.geteuid() + 1
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    b.sendall(b'{"jsonrpc":"2.0","method":"ping","id":1}\n')
    a.setblocking(False)
    with anyio.fail_after(5):
        await server._connection(a)
    b.settimeout(2)
    try:
        got = b.recv(4096)
    except ConnectionResetError:  # closed with our request unread: RST, still 0 bytes of answer
        got = b""
    b.close()
    figures.record("response_bytes", len(got))
    figures.record("rejected", server.rejected_peers)
    assert (b"", 1) == (got, server.rejected_peers)


# -- D9: path traversal ------------------------------------------------------------------------------------
def test_session_ids_and_cwds_cannot_steer_writes(rdaemon: Any, short_tmp: Path, figures: Any) -> None:
    """Session ids with ../, /, NUL or dots and relative or dotted cwds: events are stored (under _invalid
    for bad ids), and no file appears anywhere but inside a real project's docs/memory."""
    proj = git_project(short_tmp / "proj")
    d = rdaemon()
    d.start()
    watched = short_tmp / "watched"
    watched.mkdir()
    before = tree(short_tmp)
    bad_ids = ["../../watched/x", "/abs/path", "a/b", "..", ".", "x\u0000y", "sp ace", "é", "a" * 129, "", "..\\..\\x"]
    for i, sid in enumerate(bad_ids):
        for ev in ("UserPromptSubmit", "PreCompact", "SessionEnd"):
            r = d.rpc("hook", hook(ev, sid, str(proj), prompt="ledger please. TODO: try to escape"), id_=f"bad{i}{ev}")
            assert "result" in r, r
        r = d.rpc("phase.set", {"session": sid, "phase": "testing"})
        assert r["error"]["data"]["name"] in ("not_found", "invalid_params"), r
    cwds = ["../../watched", "relative/dir", f"{proj}/../watched", "/", f"{proj}/\u0000", str(watched) + "/../watched/."]
    for i, cwd in enumerate(cwds):
        for ev in ("UserPromptSubmit", "SessionEnd"):
            assert "result" in d.rpc("hook", hook(ev, f"cwd{i}", cwd, prompt="ledger please. TODO: try to escape"))
        d.rpc("phase.set", {"session": f"cwd{i}", "phase": "review"})
    # A valid session in the real project does write its ledger (the control).
    d.rpc("hook", hook("UserPromptSubmit", "good", str(proj), prompt="real work. TODO: ship it"))
    d.rpc("phase.set", {"session": "good", "phase": "implementation"})
    wait_until(lambda: (proj / "docs/memory/sessions/good").exists())
    wait_until(lambda: settled(d))  # every side job (ledger pages, their index rows) done
    after = tree(short_tmp)
    new = sorted(p for p in set(after) - set(before)
                 if not p.startswith(("data", "run", "daemon.log", "n", "proj/docs")))
    invalid = query(d.db, "SELECT count(*) FROM events WHERE session = '_invalid'")[0][0]
    figures.record("bad_session_ids", len(bad_ids))
    figures.record("bad_cwds", len(cwds))
    figures.record("stray_files", len(new), files=new[:10])
    figures.record("events_under_invalid", invalid)
    assert [] == new
    assert [] == os.listdir(watched)
    assert {"memory"} == set(os.listdir(proj / "docs"))
    assert invalid >= 3 * (len(bad_ids) - 1)
    assert d.alive()


@pytest.mark.parametrize("escape", ["memory_dir_symlink", "docs_symlink", "sessions_symlink", "session_dir_symlink",
                                    "decisions_file_symlink"])
def test_ledger_writes_never_follow_a_symlink_out_of_the_project(rdaemon: Any, short_tmp: Path, figures: Any, escape: str) -> None:
    """A symlink anywhere on the ledger path pointing out of the project: nothing is written outside,
    the target file is unchanged, the event is still stored and the daemon keeps serving."""
    proj = git_project(short_tmp / "proj")
    outside = short_tmp / "outside"
    outside.mkdir()
    (outside / "decisions.md").write_text("precious\n")
    mem = proj / "docs" / "memory"
    if escape == "memory_dir_symlink":
        (proj / "docs").mkdir()
        mem.symlink_to(outside)
    elif escape == "docs_symlink":
        (proj / "docs").symlink_to(outside)
    elif escape == "sessions_symlink":
        mem.mkdir(parents=True)
        (mem / "sessions").symlink_to(outside)
    elif escape == "session_dir_symlink":
        (mem / "sessions").mkdir(parents=True)
        (mem / "sessions" / "esc").symlink_to(outside)
    else:
        mem.mkdir(parents=True)
        (mem / "decisions.md").symlink_to(outside / "decisions.md")
    before = tree(outside)
    d = rdaemon()
    d.start()
    d.rpc("hook", hook("UserPromptSubmit", "esc", str(proj),
                       prompt="We decided to use SQLite for the store. Decision: keep the shim stdlib only."))
    d.rpc("phase.set", {"session": "esc", "phase": "implementation"})
    d.rpc("hook", hook("SessionEnd", "esc", str(proj)))
    wait_until(lambda: d.log_events("l3_refused") or d.log_events("background_failed") or d.log_events("ledger_written"),
               timeout=10)
    wait_until(lambda: settled(d))  # every side job (ledger pages, their index rows) done
    after = tree(outside)
    stored = query(d.db, "SELECT count(*) FROM events WHERE session = 'esc'")[0][0]
    refused = d.log_events("l3_refused") + d.log_events("background_failed")
    figures.record("written_outside", len(set(after) - set(before)) + sum(1 for k in before if before[k] != after.get(k)))
    figures.record("refusals_logged", len(refused))
    assert before == after
    assert refused  # said, not silent
    assert "precious\n" == (outside / "decisions.md").read_text()
    assert 2 == stored
    assert d.rpc("ping")["result"]["pong"]


def test_transcripts_are_read_only_from_the_allowed_roots(rdaemon: Any, short_tmp: Path, figures: Any) -> None:
    """Transcript paths outside the roots, with ../, through a symlink out of the roots, relative, or not
    *.jsonl are never opened (their text never reaches the store); one inside the roots is read."""
    roots = short_tmp / "claude" / "projects"
    (roots / "p").mkdir(parents=True)
    outside = short_tmp / "outside"
    outside.mkdir()
    markers = {}

    def plant(path: Path, name: str) -> str:
        marker = f"MARK{name.upper()}ZQX"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(transcript_line(f"{marker} text the assistant wrote", len(markers) + 1))
        markers[name] = marker
        return str(path)

    cases = {
        "outside": plant(outside / "t.jsonl", "outside"),
        "dotdot": str(roots / ".." / ".." / "outside" / "t2.jsonl"),
        "symlink_out": str(roots / "p" / "link.jsonl"),
        "relative": "claude/projects/p/rel.jsonl",
        "not_jsonl": plant(roots / "p" / "t.txt", "not_jsonl"),
        "proc": "/proc/self/environ",
    }
    plant(outside / "t2.jsonl", "dotdot")
    plant(outside / "target.jsonl", "symlink_out")
    (roots / "p" / "link.jsonl").symlink_to(outside / "target.jsonl")
    plant(roots / "p" / "rel.jsonl", "relative")
    good = plant(roots / "p" / "good.jsonl", "good")
    d = rdaemon(CTXLIFED_TRANSCRIPT_ROOTS=str(roots))
    d.start()
    for name, path in cases.items():
        assert "result" in d.rpc("hook", hook("Stop", f"tr-{name}", "/tmp", transcript_path=path))
    assert "result" in d.rpc("hook", hook("Stop", "tr-good", "/tmp", transcript_path=good))
    d.stop()
    hits = grep_files(store_files(d), markers.values())
    leaked = sorted(k for k, m in markers.items() if m in hits and k != "good")
    figures.record("paths_tried", len(cases))
    figures.record("read_outside_roots", len(leaked), which=leaked)
    figures.record("read_inside_roots", markers["good"] in hits)
    assert [] == leaked
    assert markers["good"] in hits
