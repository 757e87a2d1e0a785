"""Shared helpers for the benchmark suite: statistics, a real daemon process, the JSON-RPC client,
hook payloads, machine facts, result files.

Rules:
- Figures are distributions (N, p50, p95, p99), never single times; ratios compare numbers taken
  in the same run, with the variants interleaved so machine noise hits them alike.
- The daemon under test is a real ``python -m ctxlifed`` process, ready when READY=1 arrives on a
  NOTIFY_SOCKET we own (no sleeps), exactly like tests/conftest.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from collections.abc import Iterator
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
RESULTS = BENCH / "results"
CACHE = BENCH / ".cache"
SRC = Path(os.environ.get("CTXLIFED_BENCH_SRC") or ROOT / "src").resolve()
SHIM = SRC / "ctxlifed" / "_shim" / "ctxlifed_hook.py"  # the script hooks run
SHIM_MODULE = SHIM.parent / "ctxlifed_shim.py"  # the shim proper, which it loads
PY = sys.executable
FIXTURES = Path(os.environ.get("CTXLIFED_FIXTURES", "") or next(
    (p for p in (ROOT / "tests" / "fixtures" / "claude-code", ROOT.parent / "shared" / "fixtures" / "claude-code")
     if p.is_dir()), ROOT / "tests" / "fixtures" / "claude-code"))


def _load(name: str) -> Any:
    """``ctxlifed/<name>.py`` of THIS checkout (stdlib only), whatever tree ``--src`` measures."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"ctxlifed_bench_{name}", ROOT / "src" / "ctxlifed" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses and typing look a module up by name
    spec.loader.exec_module(mod)
    return mod


_testing = _load("testing")
_rpc = _load("rpc_client")
daemon_env = _testing.daemon_env
start_daemon = _testing.start_daemon

_enc = msgspec.json.Encoder()
_dec = msgspec.json.Decoder()


# -- statistics ---------------------------------------------------------------------------------
def pct(values: list[float], p: float) -> float:
    """Percentile by linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return float("nan")
    xs = sorted(values)
    if len(xs) == 1:
        return xs[0]
    k = (len(xs) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def dist(values: list[float], digits: int = 3) -> dict[str, Any]:
    """N, p50, p95, p99, min, max of a sample (same unit as the input)."""
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "p50": round(pct(values, 50), digits),
        "p95": round(pct(values, 95), digits),
        "p99": round(pct(values, 99), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
    }


def target(name: str, value: float, limit: float, *, op: str = "<=", unit: str = "", note: str = "") -> dict[str, Any]:
    ok = value <= limit if op == "<=" else value >= limit
    return {"target": name, "value": round(value, 3), "limit": limit, "op": op, "unit": unit,
            "pass": bool(ok), "note": note}


# -- machine ------------------------------------------------------------------------------------
def machine_info() -> dict[str, Any]:
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem_kb = 0
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem_kb = int(line.split()[1])
    except OSError:
        pass
    try:
        load = os.getloadavg()
    except OSError:
        load = (0.0, 0.0, 0.0)
    try:
        import anyio
        anyio_v = anyio.__version__ if hasattr(anyio, "__version__") else _dist_version("anyio")
    except Exception:  # noqa: BLE001
        anyio_v = "?"
    return {
        "nproc": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu": cpu,
        "ram_gib": round(mem_kb / (1 << 20), 1),
        "python": platform.python_version(),
        "python_impl": platform.python_implementation(),
        "sqlite": sqlite3.sqlite_version,
        "msgspec": msgspec.__version__,
        "anyio": anyio_v,
        "kernel": platform.release(),
        "loadavg_at_start": [round(x, 2) for x in load],
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _dist_version(name: str) -> str:
    from importlib.metadata import version

    try:
        return version(name)
    except Exception:  # noqa: BLE001
        return "?"


# -- processes ----------------------------------------------------------------------------------
def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads), from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def n_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def short_tmp(prefix: str = "clb-") -> Path:
    d = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    os.chmod(d, 0o700)
    return d


@contextlib.contextmanager
def project_daemon(prefix: str) -> Iterator[tuple[Path, Path, Daemon]]:
    """A private temp base, a git project in it, and a started daemon; all cleaned up after."""
    base = short_tmp(prefix)
    try:
        proj = base / "proj"
        (proj / ".git").mkdir(parents=True)
        d = Daemon(base, daemon_env(base)).start()
        try:
            yield base, proj, d
        finally:
            d.stop()
    finally:
        rmtree(base)


class Daemon:
    """A real ``python -m ctxlifed`` process, ready when READY=1 arrived on our NOTIFY_SOCKET."""

    def __init__(self, base: Path, env: dict[str, str] | None = None) -> None:
        self.base = base
        self.env = env if env is not None else daemon_env(base)
        self.socket = self.env["CTXLIFED_SOCKET"]
        self.data_dir = Path(self.env["CTXLIFED_DATA_DIR"])
        self.db = str(self.data_dir / "ctxlifed.db")
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = base / "daemon.log"
        self.ready_s = 0.0

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float = 30.0) -> Daemon:
        try:
            self.proc, self.ready_s = start_daemon(self.base, self.env, self.log, timeout=timeout, python=PY)
        except AssertionError as exc:
            raise RuntimeError(str(exc)) from None
        return self

    def stop(self, timeout: float = 30.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def rss_kb(self) -> int:
        return rss_kb(self.pid)

    def fds(self) -> int:
        return n_fds(self.pid)

    def cpu_s(self) -> float:
        return cpu_s(self.pid)

    def __enter__(self) -> Daemon:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- a raw client (what the shim does, minus the process start) ----------------------------------
RpcError = _rpc.RemoteError  # an error reply; a transport fault is _rpc.DaemonUnavailable


def call(sock_path: str, method: str, params: Any, rid: str | None = None, timeout: float = 30.0) -> Any:
    """One connection, one request, one result: the CLI's client (``ctxlifed/rpc_client.py``), with the
    frame encoded by msgspec so the client's own cost stays small in every figure. ``params`` may be
    JSON already encoded (bytes)."""
    rid = rid or os.urandom(8).hex()
    with _rpc.Connection(sock_path, timeout) as conn:
        line = conn.exchange(_rpc.frame(method, params if isinstance(params, bytes) else _enc.encode(params), rid))
    return _rpc.result_of(_dec.decode(line), rid, sock_path)


def event_samples() -> dict[str, Any]:
    return json.loads((FIXTURES / "event_samples.json").read_text())


def sample(name: str) -> dict[str, Any]:
    return dict(event_samples()[name]["payload"])


def small_transcript() -> Path:
    """A real, small Claude Code transcript from the fixtures (api_error run, ~26 KB)."""
    hits = sorted((FIXTURES / "runs" / "api_error" / "transcripts").rglob("*.jsonl"))
    hits = [h for h in hits if "subagents" not in h.parts]
    return hits[0]


def tool_output(n_bytes: int, seed: int = 7) -> str:
    """Realistic tool output of about ``n_bytes``: pytest-style lines, log lines, a traceback."""
    import random

    rng = random.Random(seed)
    mods = ["store/db.py", "service/app.py", "core/transcript.py", "server/listener.py", "core/redact.py"]
    lines: list[str] = ["============================= test session starts ==============================",
                        "platform linux -- Python 3.11.7, pytest-8.3.2, pluggy-1.5.0",
                        "rootdir: /home/dev/project", "collected 412 items", ""]
    size = sum(len(x) + 1 for x in lines)
    i = 0
    while size < n_bytes:
        r = rng.random()
        if r < 0.6:
            ln = f"tests/test_{rng.choice(['store', 'service', 'shim', 'recall'])}_{i % 37}.py::test_case_{i} PASSED [{i % 100:3d}%]"
        elif r < 0.85:
            ln = (f"2024-05-{1 + i % 28:02d}T12:{i % 60:02d}:{(i * 7) % 60:02d}Z INFO {rng.choice(mods)}:{rng.randint(10, 400)}"
                  f" request method=hook ms={rng.random() * 3:.3f} outcome=ok")
        else:
            ln = f'  File "/home/dev/project/src/ctxlifed/{rng.choice(mods)}", line {rng.randint(10, 600)}, in handle_frame'
        lines.append(ln)
        size += len(ln) + 1
        i += 1
    out = "\n".join(lines)
    return out[:n_bytes]


def post_tool_use(session: str, cwd: str, transcript: str | None, n_bytes: int = 10 * 1024,
                  tool_use_id: str | None = None, seed: int = 7) -> dict[str, Any]:
    p = sample("PostToolUse:Bash")
    p.update(session_id=session, cwd=cwd, hook_event_name="PostToolUse", tool_name="Bash",
             tool_input={"command": "pytest -q tests", "description": "Run the tests"},
             tool_response={"stdout": tool_output(n_bytes, seed), "stderr": "", "interrupted": False,
                            "isImage": False},
             tool_use_id=tool_use_id or ("toolu_" + os.urandom(12).hex()))
    p.pop("transcript_path", None)
    if transcript:
        p["transcript_path"] = transcript
    return p


def adapt(payload: dict[str, Any], session: str, cwd: str, transcript: str | None) -> dict[str, Any]:
    p = dict(payload)
    p.update(session_id=session, cwd=cwd)
    p.pop("transcript_path", None)
    if transcript:
        p["transcript_path"] = transcript
    return p


def new_session() -> str:
    import uuid

    return str(uuid.uuid4())


# -- results ------------------------------------------------------------------------------------
def write_result(name: str, data: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    return path


def rmtree(p: Path) -> None:
    shutil.rmtree(p, ignore_errors=True)


# -- transcript lines (Claude Code's JSONL shape, spec §5) ---------------------------------------
def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts * 1000) % 1000:03d}Z"


def transcript_turn(i: int, *, session: str, cwd: str, ctx_tokens: int = 30_000, text: str | None = None,
                    tool_output: str | None = None, model: str = "claude-sonnet-4-5", ts: float | None = None,
                    tool_use_id: str | None = None, command: str | None = None) -> bytes:
    """One assistant turn as Claude Code writes it: a text record with usage, and optionally a Bash
    tool_use plus its tool_result. ``ctx_tokens`` sets the usage figures (the context size)."""
    ts = ts if ts is not None else 1_750_000_000.0 + i
    mid = f"msg_{i:024d}"
    usage = {"input_tokens": 6, "cache_creation_input_tokens": 120, "cache_read_input_tokens": max(0, ctx_tokens - 126),
             "output_tokens": 80, "service_tier": "standard", "iterations": []}
    common = {"isSidechain": False, "userType": "external", "entrypoint": "cli", "cwd": cwd, "sessionId": session,
              "version": "2.1.328", "gitBranch": "main"}
    out = []
    msg = {"id": mid, "type": "message", "role": "assistant", "model": model,
           "content": [{"type": "text", "text": text or f"Step {i}: I checked the store and the writer batches commits."}],
           "stop_reason": "tool_use" if tool_output is not None else "end_turn", "usage": usage}
    out.append(dict(common, parentUuid=None, type="assistant", uuid=f"a{i:035d}", timestamp=_iso(ts), message=msg,
                    requestId=f"req_{i:024d}"))
    if tool_output is not None:
        tid = tool_use_id or f"toolu_t{i:022d}"
        msg2 = dict(msg, content=[{"type": "tool_use", "id": tid, "name": "Bash",
                                   "input": {"command": command or f"grep -rn step{i} src", "description": "search"}}])
        out.append(dict(common, parentUuid=f"a{i:035d}", type="assistant", uuid=f"b{i:035d}", timestamp=_iso(ts),
                        message=msg2, requestId=f"req_{i:024d}"))
        out.append(dict(common, parentUuid=f"b{i:035d}", type="user", uuid=f"c{i:035d}", timestamp=_iso(ts + 0.5),
                        message={"role": "user", "content": [{"tool_use_id": tid, "type": "tool_result",
                                                               "content": tool_output, "is_error": False}]},
                        toolUseResult={"stdout": tool_output, "stderr": "", "interrupted": False, "isImage": False}))
    return b"".join(_enc.encode(r) + b"\n" for r in out)
