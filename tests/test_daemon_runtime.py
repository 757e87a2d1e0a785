"""The daemon as a process: runtime-dir discipline, single instance, stale recovery, signals."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import daemon_env
from ctxlifed.cli.client import DaemonUnavailable, call
from ctxlifed.runtime.dirs import UnsafeDir, ensure_private_dir


def test_runtime_dir_and_socket_permissions(daemon: Any) -> None:
    """The runtime dir is 0700 and ours, the socket 0600, the database 0600."""
    sock = Path(daemon.socket)
    st_dir = sock.parent.stat()
    assert stat.S_IMODE(st_dir.st_mode) == 0o700 and st_dir.st_uid == os.geteuid()
    assert stat.S_IMODE(sock.stat().st_mode) == 0o600
    assert stat.S_ISSOCK(sock.stat().st_mode)
    db = daemon.data_dir / "ctxlifed.db"
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    assert daemon.call("ping")["pong"] is True


def test_second_daemon_refused_and_first_keeps_its_socket(daemon: Any) -> None:
    """A second daemon exits 3 with a clear message; the first still answers on the same socket inode."""
    ino = os.stat(daemon.socket).st_ino
    r = subprocess.run([sys.executable, "-m", "ctxlifed"], env=daemon.env, capture_output=True, timeout=30)
    assert r.returncode == 3
    assert b"already running" in r.stderr
    assert os.stat(daemon.socket).st_ino == ino
    assert daemon.call("ping")["pong"] is True


def test_spawned_duplicate_exits_quietly(daemon: Any) -> None:
    """With --spawned (the shim's auto-start) losing the race is a silent exit 0."""
    r = subprocess.run([sys.executable, "-m", "ctxlifed", "--spawned"], env=daemon.env, capture_output=True, timeout=30)
    assert r.returncode == 0 and r.stderr == b""


def test_stale_socket_and_lock_recovered_after_kill9(daemon_factory: Any) -> None:
    """After kill -9 the leftover socket and lock file do not stop the next start."""
    d = daemon_factory().start()
    d.proc.send_signal(signal.SIGKILL)
    d.proc.wait()
    assert os.path.exists(d.socket)
    with pytest.raises(DaemonUnavailable):
        call(d.socket, "ping", timeout=2)
    d2 = daemon_factory().start()
    assert d2.call("ping")["pid"] == d2.proc.pid


def test_sigterm_exits_zero_and_removes_socket(daemon: Any) -> None:
    """SIGTERM: clean exit 0, the socket it owned is gone."""
    assert daemon.stop(signal.SIGTERM) == 0
    assert not os.path.exists(daemon.socket)


def test_daemon_exits_when_its_socket_is_removed(daemon: Any) -> None:
    """A daemon nobody can reach does not linger: removing its socket makes it exit by itself."""
    os.unlink(daemon.socket)
    assert daemon.proc.wait(timeout=20) == 0


def test_unsafe_runtime_dir_refused_with_fix(short_tmp: Path) -> None:
    """A group/other-writable runtime dir is refused, and the message names the chmod fix."""
    bad = short_tmp / "bad"
    bad.mkdir()
    os.chmod(bad, 0o777)
    env = daemon_env(short_tmp, CTXLIFED_SOCKET=str(bad / "s.sock"))
    r = subprocess.run([sys.executable, "-m", "ctxlifed"], env=env, capture_output=True, timeout=30)
    assert r.returncode == 2
    assert f"chmod 700 {bad}".encode() in r.stderr
    with pytest.raises(UnsafeDir):
        ensure_private_dir(str(bad))


def test_symlinked_runtime_dir_checked_at_target(short_tmp: Path) -> None:
    """A symlink to a private dir of ours is accepted; to a too-open dir it is refused."""
    good = short_tmp / "good"
    good.mkdir(mode=0o700)
    link = short_tmp / "link"
    link.symlink_to(good)
    assert ensure_private_dir(str(link)) == str(good)
    os.chmod(good, 0o757)
    with pytest.raises(UnsafeDir):
        ensure_private_dir(str(link))


def test_socket_activation_fd_is_served(short_tmp: Path) -> None:
    """An inherited listening socket (LISTEN_FDS/LISTEN_PID) is used as is: systemd's contract."""
    path = str(short_tmp / "act.sock")
    lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lsock.bind(path)
    lsock.listen(8)
    env = daemon_env(short_tmp, CTXLIFED_SOCKET=path)
    code = (
        "import os,sys; os.dup2(int(sys.argv[1]), 3); os.environ['LISTEN_FDS']='1';"
        " os.environ['LISTEN_PID']=str(os.getpid()); from ctxlifed.__main__ import main; sys.exit(main([]))"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(lsock.fileno())], env=env, pass_fds=(lsock.fileno(),),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    lsock.close()
    try:
        from ctxlifed.cli.client import wait_ready

        assert wait_ready(path, timeout=20)
        assert call(path, "ping")["pid"] == proc.pid
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    assert os.path.exists(path)  # systemd owns an activated socket: we never unlink it



def test_a_person_in_a_terminal_gets_one_line_saying_where_it_listens(short_tmp: Path) -> None:
    """`make run`: with stdout on a terminal the daemon says where it listens, where the data is and how
    to stop, in one line; the log stays on stderr."""
    import pty
    import select

    env = daemon_env(short_tmp)
    env.pop("NOTIFY_SOCKET", None)
    master, slave = pty.openpty()
    err = open(short_tmp / "stderr.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([sys.executable, "-m", "ctxlifed"], env=env, stdout=slave, stderr=err,
                            stdin=subprocess.DEVNULL)
    os.close(slave)
    out = b""
    try:
        while b"\n" not in out:
            ready, _, _ = select.select([master], [], [], 30)
            assert ready, f"no line on the terminal: {out!r}"
            out += os.read(master, 4096)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
        os.close(master)
        err.close()
    line = out.decode().splitlines()[0]
    assert line.startswith("ctxlifed ") and "Ctrl-C to stop" in line
    assert f"socket {env['CTXLIFED_SOCKET']}" in line and f"data {env['CTXLIFED_DATA_DIR']}" in line
