"""Helpers shared by the reliability tests: a daemon process with knobs, raw clients, /proc figures.

Rules:
- Readiness is never a sleep: a daemon is ready when READY=1 arrives on a NOTIFY_SOCKET we own.
  ``wait_until`` polls for conditions the daemon reaches on its own schedule (housekeeping ticks,
  deadlines), always against a deadline.
- Clients here speak raw NDJSON so tests can send anything; none of them raises on a JSON-RPC error.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import resource
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from conftest import SHIM, DaemonProc  # the suite's root conftest
from ctxlifed.testing import daemon_env, start_daemon

SEED = int(os.environ.get("CTXLIFED_RELIABILITY_SEED", "20261129"))
INTERNAL_ERROR = -32603
# Codes a well-behaved daemon may answer with (protocol/_errors.py); -32603 is never acceptable here.
ALLOWED_CODES = {-32700, -32600, -32601, -32602, -32000, -32001, -32002, -32003, -32004, -32005, -32006, -32007, -32008}


class RDaemon(DaemonProc):
    """DaemonProc with process knobs (umask, descriptor limit) and a measured start-to-ready time."""

    ready_ms: float = 0.0

    def start(self, timeout: float = 20.0, expect_ready: bool = True, *, umask: int | None = None,
              nofile: int | None = None, extra_env: dict[str, str] | None = None) -> RDaemon:
        kw: dict[str, Any] = {}
        if umask is not None:
            kw["umask"] = umask
        if nofile is not None:
            kw["preexec_fn"] = lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        env = dict(self.env, **(extra_env or {}))
        self.proc, ready_s = start_daemon(self.base, env, self.log, timeout=timeout, expect_ready=expect_ready, **kw)
        if expect_ready:
            self.ready_ms = ready_s * 1000
        return self

    @property
    def db(self) -> Path:
        return self.data_dir / "ctxlifed.db"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_events(self, event: str) -> list[dict[str, Any]]:
        out = []
        for line in self.log_text().splitlines():
            if f'"event": "{event}"' in line:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
        return out

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def rpc(self, method: str, params: Any = None, **kw: Any) -> dict[str, Any]:
        return rpc(self.socket, method, params, **kw)

    def write_config(self, **values: Any) -> None:
        path = Path(self.env["CTXLIFED_CONFIG"])
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = []
        for k, v in values.items():
            lines.append(f"{k} = {json.dumps(v)}" if not isinstance(v, bool) else f"{k} = {str(v).lower()}")
        tmp = path.with_suffix(".tmp")
        tmp.write_text("\n".join(lines) + "\n")
        os.replace(tmp, path)


def make_daemon(base: Path, **env: str) -> RDaemon:
    return RDaemon(base, daemon_env(base, **env))


# -- clients -----------------------------------------------------------------------------------
def connect(path: str, timeout: float = 10.0) -> socket.socket:
    """Connect like the shim does; a full listen backlog (EAGAIN on AF_UNIX) is retried until ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(path)
            return s
        except BlockingIOError:
            s.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.002)
        except BaseException:
            s.close()
            raise


def recv_line(s: socket.socket, buf: bytearray, timeout: float = 10.0) -> bytes | None:
    """One reply line from ``s`` (``buf`` keeps what follows it); None at EOF."""
    deadline = time.monotonic() + timeout
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no reply line in time")
        s.settimeout(left)
        chunk = s.recv(1 << 16)
        if not chunk:
            return None
        buf += chunk
    i = buf.index(b"\n")
    line = bytes(buf[:i])
    del buf[: i + 1]
    return line


def frame(method: str, params: Any = None, id_: Any = "x") -> bytes:
    obj: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        obj["params"] = params
    if id_ is not ...:
        obj["id"] = id_
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


_ids = itertools.count(1)


def rpc(path: str, method: str, params: Any = None, *, id_: Any = None, timeout: float = 10.0) -> dict[str, Any]:
    """One request on a fresh connection; the decoded reply (result or error), never raises on errors.

    The default id is unique: a hook's string id is its event identity (replays are stored once)."""
    if id_ is None:
        id_ = f"rpc-{os.getpid()}-{next(_ids)}-{time.monotonic_ns()}"
    with connect(path, timeout) as s:
        s.sendall(frame(method, params, id_))
        line = recv_line(s, bytearray(), timeout)
    if line is None:
        raise ConnectionError("closed without an answer")
    return json.loads(line)


def exchange_raw(path: str, data: bytes, *, timeout: float = 10.0, half_close: bool = True) -> list[bytes]:
    """Send ``data``, optionally half-close, and collect every reply line until the daemon closes."""
    out: list[bytes] = []
    with connect(path, timeout) as s:
        try:
            s.sendall(data)
            if half_close:
                s.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass
        buf = bytearray()
        while True:
            try:
                line = recv_line(s, buf, timeout)
            except (ConnectionResetError, BrokenPipeError):
                break
            if line is None:
                break
            out.append(line)
    return out


def check_reply(obj: Any) -> list[dict[str, Any]]:
    """Validate a JSON-RPC 2.0 response (or batch); returns its responses."""
    items = obj if isinstance(obj, list) else [obj]
    assert items, "an empty batch reply is never sent"
    for r in items:
        assert isinstance(r, dict) and r.get("jsonrpc") == "2.0", r
        assert ("result" in r) != ("error" in r), r
        assert "id" in r, r
        if "error" in r:
            e = r["error"]
            assert isinstance(e, dict) and isinstance(e.get("code"), int) and isinstance(e.get("message"), str), r
            assert "Traceback" not in json.dumps(r), r
    return items


# -- hook payloads ---------------------------------------------------------------------------------
def hook(event: str, session: str, cwd: str, **fields: Any) -> dict[str, Any]:
    return {"session_id": session, "cwd": cwd, "hook_event_name": event, "transcript_path": "", **fields}


def mixed_hook(rng: random.Random, session: str, cwd: str, i: int, marker: str = "") -> dict[str, Any]:
    """A realistic hook event: a prompt, a Bash run, an Edit, or a PreToolUse."""
    k = rng.randrange(4)
    if k == 0:
        return hook("UserPromptSubmit", session, cwd, prompt=f"step {i} {marker} please refactor module {rng.randrange(99)}")
    if k == 1:
        return hook("PostToolUse", session, cwd, tool_name="Bash", tool_use_id=f"tu{i}",
                    tool_input={"command": f"pytest -q tests/test_{i % 7}.py"},
                    tool_response={"stdout": f"{marker} " + "collected 3 items\n... 3 passed in 0.1s\n" * rng.randint(1, 30),
                                   "stderr": "", "interrupted": False})
    if k == 2:
        return hook("PostToolUse", session, cwd, tool_name="Edit", tool_use_id=f"tu{i}",
                    tool_input={"file_path": f"{cwd}/src/m{i % 5}.py", "old_string": "a = 1", "new_string": f"a = {i}  # {marker}"},
                    tool_response={"filePath": f"{cwd}/src/m{i % 5}.py", "success": True})
    return hook("PreToolUse", session, cwd, tool_name="Read", tool_input={"file_path": f"{cwd}/README.md"})


# -- process and store figures -----------------------------------------------------------------------
def proc_stats(pid: int) -> dict[str, int]:
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    status = Path(f"/proc/{pid}/status").read_text()
    vals = {}
    for line in status.splitlines():
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM", "Threads"):
            vals[k] = int(v.split()[0])
    return {"fds": fds, "threads": vals.get("Threads", 0), "rss_kb": vals.get("VmRSS", 0), "hwm_kb": vals.get("VmHWM", 0)}


def pct(values: Iterable[float], q: float) -> float:
    v = sorted(values)
    if not v:
        return float("nan")
    k = min(len(v) - 1, max(0, int(round(q / 100 * (len(v) - 1) + 0.4999))))
    return v[k]


def db_checks(db: Path) -> dict[str, Any]:
    """integrity_check and the FTS5 integrity-check of every FTS table, on a private connection."""
    conn = sqlite3.connect(db, timeout=30, isolation_level=None)
    try:
        # The FTS check is an INSERT: take the write lock first (busy handler), so a daemon writing at
        # the same time makes us wait instead of failing with a stale snapshot.
        conn.execute("BEGIN IMMEDIATE")
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        fts = {}
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND name IN ('archive_fts','archive_tri')").fetchall():
            try:
                conn.execute(f"INSERT INTO {name}({name}) VALUES ('integrity-check')")
                fts[name] = "ok"
            except sqlite3.DatabaseError as exc:
                fts[name] = str(exc)
        conn.execute("ROLLBACK")
        return {"integrity": integrity, "fts": fts, "ok": integrity == "ok" and all(v == "ok" for v in fts.values())}
    finally:
        conn.close()


def query(db: Path, sql: str, args: tuple = ()) -> list[tuple]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def grep_files(paths: Iterable[Path], needles: Iterable[str | bytes]) -> dict[str, list[str]]:
    """Which needles occur (as raw bytes) in which files."""
    hits: dict[str, list[str]] = {}
    blobs = []
    for p in paths:
        try:
            blobs.append((str(p), Path(p).read_bytes()))
        except (FileNotFoundError, IsADirectoryError):
            pass
    for n in needles:
        nb = n.encode() if isinstance(n, str) else n
        where = [name for name, b in blobs if nb in b]
        if where:
            hits[n if isinstance(n, str) else n.decode(errors="replace")] = where
    return hits


def store_files(d: RDaemon) -> list[Path]:
    return [d.db, Path(f"{d.db}-wal"), Path(f"{d.db}-shm")]


def wait_until(cond: Callable[[], Any], timeout: float = 20.0, interval: float = 0.02) -> Any:
    """Poll a condition the daemon reaches on its own schedule; returns its first truthy value."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(interval)


def settled(d: Any) -> bool:
    """The daemon has nothing left to do of what it acknowledged: no derivation pending, no side job
    (L3 Markdown files) running. A test that checks that something did NOT happen waits for this."""
    r = d.rpc("status", {"limit": 1})
    res = r.get("result") or {}
    return res.get("derive_pending") == 0 and res.get("side_work_pending") == 0


def run_shim_timed(payload: dict[str, Any] | bytes, env: dict[str, str], timeout: float = 20.0) -> tuple[subprocess.CompletedProcess[bytes], float]:
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-I", "-S", str(SHIM)], input=data, env=env, capture_output=True,
                       timeout=timeout, check=False)
    return r, (time.monotonic() - t0) * 1000


def transcript_line(text: str, n: int, *, model: str = "claude-sonnet-4-5") -> bytes:
    """One assistant message as Claude Code writes it to its transcript."""
    msg = {"parentUuid": None, "isSidechain": False, "type": "assistant", "uuid": f"00000000-0000-4000-8000-{n:012d}",
           "timestamp": "2026-11-29T10:00:00.000Z", "sessionId": "t",
           "message": {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": model,
                       "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                       "usage": {"input_tokens": 1000, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 20000,
                                 "output_tokens": 50}}}
    return json.dumps(msg).encode() + b"\n"


def git_project(path: Path) -> Path:
    """A folder that ctxlifed treats as a project with L3 memory (a ``.git`` inside)."""
    (path / ".git").mkdir(parents=True, exist_ok=True)
    return path


def tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``root`` (not following symlinks) -> (mode, size)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            out[os.path.relpath(p, root)] = (st.st_mode, st.st_size)
    return out
