"""The daemon's runtime: one daemon per data dir, default socket, data-dir mode, where the log goes,
what a log line may hold, and how fast ``ctxlifectl daemon stop`` returns.

Every test starts real daemons with short private paths; none waits by sleeping: readiness is the
daemon's READY=1, and an end is a process exit or a released lock.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from ctxlifed.cli.client import DaemonUnavailable, RemoteError, call, wait_ready
from ctxlifed.runtime import logs
from ctxlifed.runtime import paths as P
from ctxlifed.runtime.dirs import ensure_data_dir
from ctxlifed.runtime.lock import AlreadyRunning, acquire_lock, is_held, read_owner
from ctxlifed.testing import daemon_env, start_daemon

TOKEN = "ghp_" + "A1b2C3d4E5f6" * 3  # a GitHub token: 36 characters after the prefix


def _mode(p: Path | str) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


class Proc:
    """A daemon process and its environment; killed at the end of the test if still alive."""

    def __init__(self, base: Path, env: dict[str, str], log: Path | None) -> None:
        self.base, self.env, self.log = base, env, log
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def data_dir(self) -> Path:
        return Path(self.env["CTXLIFED_DATA_DIR"])

    def start(self) -> Proc:
        self.proc, _ = start_daemon(self.base, self.env, self.log)
        return self

    def terminate(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)


@pytest.fixture
def procs(short_tmp: Path) -> Iterator[Any]:
    made: list[Proc] = []

    def make(log: Path | None = None, **extra: str) -> Proc:
        p = Proc(short_tmp, daemon_env(short_tmp, **extra), log)
        made.append(p)
        return p

    yield make
    for p in made:
        if p.proc is not None and p.proc.poll() is None:
            p.proc.kill()
            p.proc.wait()


def _env_without_socket(base: Path, **extra: str) -> dict[str, str]:
    env = daemon_env(base, **extra)
    env.pop("CTXLIFED_SOCKET", None)
    return env


# -- item 9: one daemon per data dir; item 1: the default socket -----------------------------------


def test_default_socket_lies_in_the_data_dir_without_xdg_runtime_dir(short_tmp: Path, figures: Any) -> None:
    """CTXLIFED_SOCKET > $XDG_RUNTIME_DIR/ctxlifed > <data>/run (no shared /tmp name another user could
    pre-create), and /tmp/ctxlifed-<uid> only when <data>/run/ctxlifed.sock would not fit sun_path."""
    data = str(short_tmp / "d")
    no_xdg = {"CTXLIFED_DATA_DIR": data}
    got = P.socket_path(env=no_xdg)
    figures.record("default_socket_without_xdg", got)
    assert got == os.path.join(data, "run", "ctxlifed.sock")
    assert P.resolve(env=no_xdg).runtime_dir == os.path.join(data, "run")
    assert P.socket_path(env={**no_xdg, "XDG_RUNTIME_DIR": "/run/user/7"}) == "/run/user/7/ctxlifed/ctxlifed.sock"
    assert P.socket_path(env={**no_xdg, "XDG_RUNTIME_DIR": "relative"}) == got  # not absolute: ignored
    assert P.socket_path(env={**no_xdg, "CTXLIFED_SOCKET": "/x/s.sock", "XDG_RUNTIME_DIR": "/run/user/7"}) == "/x/s.sock"
    assert P.socket_path(env={}, data=data) == got  # the --data-dir flag moves the default socket too
    deep = "/" + "d" * 100
    assert P.socket_path(env={"CTXLIFED_DATA_DIR": deep}) == f"/tmp/ctxlifed-{os.getuid()}/ctxlifed.sock"
    paths = P.resolve(env=no_xdg)
    assert paths.data_lock == os.path.join(data, "ctxlifed.lock")
    assert paths.lock == os.path.join(data, "run", "ctxlifed.lock")
    assert paths.log_file == os.path.join(data, "ctxlifed.log")


def test_daemon_without_xdg_runtime_dir_serves_in_the_data_dir(short_tmp: Path, procs: Any, figures: Any) -> None:
    """An IDE or plain ssh (no XDG_RUNTIME_DIR): the daemon binds <data>/run/ctxlifed.sock, 0700/0600."""
    env = _env_without_socket(short_tmp)
    env.pop("XDG_RUNTIME_DIR")
    d = procs()
    d.env = env
    d.start()
    sock = d.data_dir / "run" / "ctxlifed.sock"
    figures.record("socket", str(sock))
    assert call(str(sock), "ping")["pid"] == d.proc.pid
    assert _mode(sock.parent) == 0o700 and _mode(sock) == 0o600
    assert d.terminate() == 0


def test_second_daemon_on_the_data_dir_refuses_naming_the_first(short_tmp: Path, procs: Any, figures: Any) -> None:
    """The bug: a Claude Code without XDG_RUNTIME_DIR started a second daemon on another socket over the
    same data dir. Now the second exits 3 naming the first's pid and socket, binds nothing, and the
    lock file names the first in one JSON line (0600)."""
    first = procs().start()
    first_sock = first.env["CTXLIFED_SOCKET"]
    lock = first.data_dir / "ctxlifed.lock"
    owner = read_owner(str(lock))
    figures.record("lock_line", lock.read_text().strip())
    assert owner == {"pid": first.proc.pid, "socket": first_sock}
    assert lock.read_text().count("\n") == 1 and _mode(lock) == 0o600
    assert is_held(str(lock))

    other = short_tmp / "other"
    env = dict(first.env)
    env.pop("XDG_RUNTIME_DIR")
    env["CTXLIFED_SOCKET"] = str(other / "s.sock")
    r = subprocess.run([sys.executable, "-m", "ctxlifed"], env=env, capture_output=True, timeout=30)
    msg = r.stderr.decode(errors="replace")
    figures.record("second_exit_code", r.returncode, message=msg.strip()[:300])
    assert r.returncode == 3, msg
    assert f"pid {first.proc.pid}" in msg and first_sock in msg and "already running" in msg
    assert not (other / "s.sock").exists()
    assert read_owner(str(lock)) == owner  # the refused daemon did not overwrite the line
    # Spawned by a shim (--spawned), the loser exits 0 quietly.
    r = subprocess.run([sys.executable, "-m", "ctxlifed", "--spawned"], env=env, capture_output=True, timeout=30)
    assert (r.returncode, r.stderr) == (0, b"")
    # Spawned with stderr on /dev/null (as the shim does), it says why in the data dir's log.
    r = subprocess.run([sys.executable, "-m", "ctxlifed", "--spawned"], env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
    assert r.returncode == 0
    said = [json.loads(x) for x in (first.data_dir / "ctxlifed.log").read_text().splitlines()]
    assert {"event": "not_started", "reason": "already_running", "pid": first.proc.pid,
            "socket": first_sock}.items() <= said[-1].items()
    assert call(first_sock, "ping")["pid"] == first.proc.pid


def test_data_lock_is_taken_by_a_socket_activated_daemon(short_tmp: Path, figures: Any) -> None:
    """A systemd-activated daemon holds the data-dir lock too, naming systemd's socket: a daemon the
    shim starts elsewhere (no XDG_RUNTIME_DIR) refuses rather than split the sessions."""
    path = str(short_tmp / "act.sock")
    lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lsock.bind(path)
    lsock.listen(8)
    env = daemon_env(short_tmp, CTXLIFED_SOCKET=str(short_tmp / "elsewhere.sock"))
    code = ("import os,sys; os.dup2(int(sys.argv[1]), 3); os.environ['LISTEN_FDS']='1';"
            " os.environ['LISTEN_PID']=str(os.getpid()); from ctxlifed.__main__ import main; sys.exit(main([]))")
    proc = subprocess.Popen([sys.executable, "-c", code, str(lsock.fileno())], env=env, pass_fds=(lsock.fileno(),),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    lsock.close()
    try:
        assert wait_ready(path, timeout=20)
        owner = read_owner(os.path.join(env["CTXLIFED_DATA_DIR"], "ctxlifed.lock"))
        figures.record("lock_owner", owner)
        assert owner == {"pid": proc.pid, "socket": path}
        r = subprocess.run([sys.executable, "-m", "ctxlifed"], env=env, capture_output=True, timeout=30)
        assert r.returncode == 3 and path.encode() in r.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0


def test_ctxlifectl_finds_the_daemon_of_the_data_dir_on_another_socket(short_tmp: Path, procs: Any,
                                                                       figures: Any) -> None:
    """A shell whose socket differs (no XDG_RUNTIME_DIR): `daemon start` does not start a second daemon,
    doctor names the daemon's socket, and `daemon stop` stops the daemon through <data>/ctxlifed.lock."""
    d = procs().start()
    env = _env_without_socket(short_tmp)
    env.pop("XDG_RUNTIME_DIR")

    def ctl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "ctxlifed.cli.main", *args], env=env, capture_output=True,
                              text=True, timeout=60)

    r = ctl("daemon", "start")
    figures.record("start_says", r.stdout.strip())
    assert r.returncode == 0 and f"already running (pid {d.proc.pid}) at {d.env['CTXLIFED_SOCKET']}" in r.stdout
    r = ctl("doctor")
    assert f"export CTXLIFED_SOCKET={d.env['CTXLIFED_SOCKET']}" in r.stdout + r.stderr
    r = ctl("daemon", "stop")
    figures.record("stop_says", r.stdout.strip())
    assert f"ctxlifed (pid {d.proc.pid}) stopped" in r.stdout, r.stdout + r.stderr
    assert d.proc.wait(timeout=30) == 0


def test_socket_activated_daemon_takes_over_from_a_spawned_one(short_tmp: Path, procs: Any, figures: Any) -> None:
    """systemd starts the daemon for a connection on its socket while a daemon started by a shim (which
    saw another socket) holds the data dir: the spawned daemon is asked to stop (exit 0, nothing lost),
    and the service's daemon serves, named by the lock."""
    first = procs().start()
    path = str(short_tmp / "act.sock")
    lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lsock.bind(path)
    lsock.listen(8)
    code = ("import os,sys; os.dup2(int(sys.argv[1]), 3); os.environ['LISTEN_FDS']='1';"
            " os.environ['LISTEN_PID']=str(os.getpid()); from ctxlifed.__main__ import main; sys.exit(main([]))")
    proc = subprocess.Popen([sys.executable, "-c", code, str(lsock.fileno())], env=first.env,
                            pass_fds=(lsock.fileno(),), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    lsock.close()
    try:
        assert first.proc.wait(timeout=60) == 0
        assert wait_ready(path, timeout=30)
        owner = read_owner(str(first.data_dir / "ctxlifed.lock"))
        figures.record("lock_owner_after_takeover", owner)
        assert owner == {"pid": proc.pid, "socket": path}
        assert call(path, "ping")["pid"] == proc.pid
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


def test_lock_refusal_and_stale_line(short_tmp: Path) -> None:
    """acquire_lock: a held lock refuses with the holder's pid and socket; a stale line (holder died) is
    simply replaced; a reader takes the first line whole."""
    path = str(short_tmp / "x.lock")
    fd = acquire_lock(path, "/a/very/long/socket/path/ctxlifed.sock", what="the data directory")
    assert is_held(path)
    r = subprocess.run([sys.executable, "-c",
                        "import sys\nfrom ctxlifed.runtime.lock import acquire_lock, AlreadyRunning\n"
                        "try:\n    acquire_lock(sys.argv[1], '/b.sock')\n"
                        "except AlreadyRunning as e:\n    print(e.pid, e.socket, '|', e)\n", path],
                       capture_output=True, text=True, timeout=30)
    assert r.stdout.startswith(f"{os.getpid()} /a/very/long/socket/path/ctxlifed.sock |"), r.stdout + r.stderr
    assert "ctxlifectl --socket /a/very/long/socket/path/ctxlifed.sock daemon stop" in r.stdout
    os.close(fd)
    assert not is_held(path)
    assert read_owner(path) == {"pid": os.getpid(), "socket": "/a/very/long/socket/path/ctxlifed.sock"}  # stale
    fd = acquire_lock(path, "/b.sock")  # shorter line over a longer one: cut to length
    try:
        assert Path(path).read_text() == json.dumps({"pid": os.getpid(), "socket": "/b.sock"}) + "\n"
    finally:
        os.close(fd)
    Path(path).write_text("12345\n")  # the old format: no owner
    assert read_owner(path) is None
    with pytest.raises(AlreadyRunning):
        held = acquire_lock(path, "/c.sock")
        try:
            acquire_lock(path, "/d.sock")  # a second open file description: refused even in-process
        finally:
            os.close(held)


# -- item 16: the data dir is tightened to 0700 -----------------------------------------------------


def test_pre_created_0755_data_dir_is_tightened(short_tmp: Path, procs: Any, figures: Any) -> None:
    """A data dir pre-created 0755 (a packager, a dotfiles script) is 0700 once the daemon started."""
    d = procs()
    d.data_dir.mkdir(parents=True)
    os.chmod(d.data_dir, 0o755)
    before = _mode(d.data_dir)
    d.start()
    after = _mode(d.data_dir)
    figures.record("data_dir_mode", f"{before:o} -> {after:o}")
    assert after == 0o700
    assert d.terminate() == 0


def test_ensure_data_dir_tightens_only_our_own_dir(short_tmp: Path) -> None:
    own = short_tmp / "own"
    own.mkdir(mode=0o777)
    os.chmod(own, 0o777)
    ensure_data_dir(str(own))
    assert _mode(own) == 0o700
    fresh = short_tmp / "a" / "b"
    ensure_data_dir(str(fresh))
    assert _mode(fresh) == 0o700


# -- item 17: a daemon started with stderr on /dev/null logs to the data dir ------------------------


def test_daemon_with_stderr_on_devnull_logs_to_the_data_dir(short_tmp: Path, procs: Any, figures: Any) -> None:
    """The hook shim starts the daemon with stdout/stderr on /dev/null: its log goes to
    <data>/ctxlifed.log (0600), like `ctxlifectl daemon start`'s."""
    d = procs(log=None).start()  # stdout and stderr: /dev/null
    with pytest.raises(RemoteError):
        call(d.env["CTXLIFED_SOCKET"], "no.such.method")
    assert d.terminate() == 0
    logf = d.data_dir / "ctxlifed.log"
    events = [json.loads(line).get("event") for line in logf.read_text().splitlines()]
    figures.record("log_events", events)
    assert "ready" in events and "stopped" in events and "request" in events
    assert _mode(logf) == 0o600


def test_ctxlifectl_daemon_start_log_is_rotated_by_the_daemon(short_tmp: Path, figures: Any) -> None:
    """`ctxlifectl daemon start` points the daemon's stderr at <data>/ctxlifed.log: the daemon sees
    that and writes it through its rotating handler (stderr follows the current file)."""
    env = daemon_env(short_tmp)
    r = subprocess.run([sys.executable, "-m", "ctxlifed.cli.main", "daemon", "start"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    pid = call(env["CTXLIFED_SOCKET"], "ping")["pid"]
    try:
        logf = Path(env["CTXLIFED_DATA_DIR"]) / "ctxlifed.log"
        fd_target = os.readlink(f"/proc/{pid}/fd/2") if os.path.isdir(f"/proc/{pid}") else str(logf)
        figures.record("daemon_stderr", fd_target)
        assert fd_target == str(logf)
    finally:
        r = subprocess.run([sys.executable, "-m", "ctxlifed.cli.main", "daemon", "stop"], env=env,
                           capture_output=True, text=True, timeout=60)
    assert "stopped" in r.stdout, r.stdout + r.stderr


def test_choose_log_file() -> None:
    """--log-file wins; a useful stderr (here: pytest's capture, a file or pipe) is kept."""
    assert logs.choose_log_file("/x/y.log", "/d/ctxlifed.log") == "/x/y.log"
    code = ("import os,sys\nfrom ctxlifed.runtime.logs import choose_log_file\n"
            "print(choose_log_file(None, sys.argv[1]), file=sys.__stdout__)\n")
    for stderr, want in ((subprocess.DEVNULL, "/d/ctxlifed.log"), (subprocess.PIPE, "None")):
        r = subprocess.run([sys.executable, "-c", code, "/d/ctxlifed.log"], stderr=stderr, stdout=subprocess.PIPE,
                           text=True, timeout=30)
        assert r.stdout.strip() == want


# -- item 13: log fields redacted and capped, floods rate-limited, the file rotated -----------------


def _log_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_unknown_methods_are_redacted_capped_and_rate_limited_in_the_log(short_tmp: Path, procs: Any,
                                                                        figures: Any) -> None:
    """An unknown method named by a GitHub token, one of 100 KB, then a flood of unknown methods: the log
    holds no token, no line over LINE_MAX, at most BURST request lines of the kind a window, and every
    dropped line is counted in a log_suppressed line."""
    d = procs(log=None).start()
    sock = d.env["CTXLIFED_SOCKET"]
    huge = "m" * 100_000
    flood = 400
    for method in (TOKEN, f"tools/{TOKEN}", huge):
        with pytest.raises(RemoteError):
            call(sock, method)
    for i in range(flood):
        with pytest.raises(RemoteError):
            call(sock, f"nope.{i}")
    assert d.terminate() == 0
    logf = d.data_dir / "ctxlifed.log"
    text = logf.read_text()
    lines = _log_lines(logf)
    unknown = [r for r in lines if r.get("event") == "request" and r.get("outcome") == "method_not_found"]
    dropped = sum(r.get("dropped", 0) for r in lines if r.get("event") == "log_suppressed"
                  and r.get("kind") == "request" and r.get("outcome") == "method_not_found")
    dropped += sum(r.get("dropped_before", 0) for r in unknown)
    longest = max(len(line) for line in text.splitlines())
    figures.record("log_bytes", len(text.encode()), "B", n=flood + 3)
    figures.record("longest_line", longest, "chars")
    figures.record("request_lines", len(unknown), n=flood + 3)
    figures.record("dropped_counted", dropped)
    assert "ghp_" not in text and "A1b2C3d4E5f6" not in text
    assert any("[REDACTED" in str(r.get("method")) for r in unknown[:2])
    assert longest <= logs.LINE_MAX
    assert all(len(str(r.get("method", ""))) <= logs.FIELD_MAX + 40 for r in lines)
    assert "m" * (logs.FIELD_MAX + 1) not in text
    assert len(unknown) + dropped == flood + 3  # every request is either logged or counted
    assert len(unknown) <= 3 * logs.BURST  # a window each 10 s: the flood takes far less than 30 s


def test_rate_limit_counts_per_kind_and_reports_once() -> None:
    now = [0.0]
    rl = logs.RateLimit(burst=3, window_s=10.0, clock=lambda: now[0])
    import structlog

    def emit(event: str, outcome: str = "x") -> bool:
        try:
            rl(None, "info", {"event": event, "level": "info", "outcome": outcome})
            return True
        except structlog.DropEvent:
            return False

    assert [emit("request") for _ in range(5)] == [True, True, True, False, False]
    assert emit("request", "other") and emit("ready")  # other kinds have their own budget
    assert rl.take_suppressed() == []  # the window is still open
    now[0] = 10.0
    assert rl.take_suppressed() == [(("info", "request", "x"), 2)]
    assert rl.take_suppressed() == []  # reported once
    assert [emit("request") for _ in range(4)] == [True, True, True, False]
    now[0] = 25.0
    ed = {"event": "request", "level": "info", "outcome": "x"}
    assert rl(None, "info", ed)["dropped_before"] == 1  # not flushed: the next line of the kind says it
    assert rl.take_suppressed(force=True) == []


def test_clean_redacts_and_caps_nested_values() -> None:
    v = logs.clean({"a": [TOKEN] * 200, "b": "x" * 10_000, "c": 10 ** 400, "d": {"e": {"f": {"g": {"h": {"i": {"j": 1}}}}}}})
    s = json.dumps(v)
    assert "ghp_" not in s
    assert len(v["a"]) == logs.ITEMS_MAX + 1 and "more items" in v["a"][logs.ITEMS_MAX // 2]
    assert v["b"].startswith("x" * logs.FIELD_MAX + "…[cut: 10000 characters]")
    assert v["c"].startswith("<an integer of")
    assert "nested too deep" in s
    long_secret = "password=" + "Zq9" * 5000  # redacted whole although longer than the cut
    assert "Zq9Zq9" not in logs.clean_str(long_secret)


def test_log_file_rotates_at_its_cap(short_tmp: Path, figures: Any) -> None:
    """With a 4 KiB cap the log rotates into .1 .. .3 (0600); no file passes the cap; the process's
    stderr follows the current file."""
    logf = short_tmp / "d.log"
    code = ("import os, sys, structlog\nfrom ctxlifed.runtime import logs\n"
            "logs.configure(log_file=sys.argv[1], max_bytes=4096, backups=3)\n"
            "log = structlog.get_logger('t')\n"
            "for i in range(300):\n    log.info(f'event_{i}', n=i, text='y' * 100)\n"
            "os.write(2, b'stderr-line\\n')\n")
    r = subprocess.run([sys.executable, "-c", code, str(logf)], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    files = sorted(short_tmp.glob("d.log*"))
    sizes = {f.name: f.stat().st_size for f in files}
    figures.record("files", sizes)
    assert set(sizes) == {"d.log", "d.log.1", "d.log.2", "d.log.3"}
    assert all(s <= 4096 for s in sizes.values())
    assert all(_mode(f) == 0o600 for f in files)
    assert logf.read_text().endswith("stderr-line\n")
    assert _log_lines(short_tmp / "d.log.1")[-1]["event"].startswith("event_")


# -- item 18: `ctxlifectl daemon stop` returns when the daemon is done -------------------------------


GRACE_EXIT_S = 10.0  # the daemon's process ends after it released its locks (interpreter shutdown)


def test_daemon_stop_returns_once_the_daemon_is_done(short_tmp: Path, figures: Any) -> None:
    """Two waits made `daemon stop` take 2-6 s after a 0.3 ms drain: the file watcher's thread sat out its
    5 s notify timeout, and `kill -0` finds a daemon that exited but is not reaped yet (a zombie:
    `daemon start` leaves it to init). The watcher now stops with the daemon, and the CLI ends its wait
    when the daemon's locks are released. A zombie child of this test stands in for the slow reaper."""
    env = daemon_env(short_tmp)
    (short_tmp / "config" / "ctxlifed").mkdir(parents=True)  # a watched folder: the watcher thread runs
    proc, _ = start_daemon(short_tmp, env, short_tmp / "d.log")  # our child: not reaped until we wait()
    try:
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "ctxlifed.cli.main", "daemon", "stop"], env=env,
                           capture_output=True, text=True, timeout=60)
        stop_s = time.perf_counter() - t0
        figures.record("daemon_stop", round(stop_s, 3), "s")
        assert f"ctxlifed (pid {proc.pid}) stopped" in r.stdout, r.stdout + r.stderr
        # "stopped" is said when the daemon released its locks, its last act; the interpreter's own
        # exit follows (on a loaded machine not necessarily before the CLI returns): wait for it
        proc.wait(timeout=GRACE_EXIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    with pytest.raises(DaemonUnavailable):
        call(env["CTXLIFED_SOCKET"], "ping", timeout=1)


@pytest.mark.anyio
async def test_file_watcher_stops_with_the_daemon(short_tmp: Path) -> None:
    """The watch loop ends when the daemon's stop is requested, while watchfiles' thread is waiting
    (it used to wait out its 5 s notify timeout, and only then see the cancellation)."""
    import types

    from ctxlifed.runtime.config import load
    from ctxlifed.watch import Watched, watch_loop

    cfg_dir = short_tmp / "cfg"
    cfg_dir.mkdir()
    cfg_path = cfg_dir / "config.toml"
    svc = types.SimpleNamespace(stop_requested=anyio.Event(), sessions={}, cfg=load(None, env={}))
    watched = Watched(config_path=str(cfg_path), service=svc,  # type: ignore[arg-type]
                      apply_config=lambda new: setattr(svc, "cfg", new))
    first_cfg = svc.cfg
    ended = anyio.Event()

    async def run() -> None:
        await watch_loop(watched)
        ended.set()

    with anyio.fail_after(20):  # a deadline against a hang, not a speed check
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            while svc.cfg is first_cfg:  # the watcher is running once it has seen an edit
                cfg_path.write_text("inject_cap_tokens = 900\n")
                with anyio.move_on_after(0.5):
                    while svc.cfg is first_cfg:
                        await anyio.sleep(0.01)
            svc.stop_requested.set()
            await ended.wait()
    assert svc.cfg.inject_cap_tokens == 900

