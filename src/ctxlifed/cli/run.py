"""``ctxlifectl run --session S -- <command words>``: the wrapper the PreToolUse hook reroutes test and build
runs through (``service/wrap.py``, issue 17 item 4).

Rules:
- No shell: the words after ``--`` are the argv, run as they are. The hook wraps only a simple command
  of literal words (``core/wrap_policy.py``), so the shell that runs ``ctxlifectl run -- <original>``
  has already given this process exactly the argv the original would have had. (A shell alias or
  function of the same name is not applied: the program found on PATH runs.) A program that cannot be
  found or run: the shell's message and status (127, 126).
- Nothing is printed until the command is done: stdout and stderr are merged into one pipe (Claude Code
  merges them too) and kept in memory up to :data:`HEAD_BYTES` + :data:`TAIL_BYTES`, the middle of a
  longer output dropped and its size marked in the text.
- Then the output goes to the daemon (``wrap.store``, over ``rpc_client``, deadline
  :data:`STORE_TIMEOUT_S`), which archives it, writes the file the model can ``Read`` and answers the
  digest; the digest is printed. When the daemon keeps it (small, wanted verbatim) or is down, slow or
  untrusted, or answers an error: the output itself is printed unchanged (fail open).
- The exit status is the command's own (a signal N gives 128 + N, like the shell), so a failing run
  still fails (PostToolUseFailure) and the model sees the digest as its output. SIGINT, SIGTERM and
  SIGHUP received while it runs are passed on to the command.
- Standard library and the package's light modules only (``rpc_client`` via ``cli.client``); never the
  server side.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shlex
import signal
import subprocess
import sys
from typing import Any

from .client import DaemonUnavailable, RemoteError, call

HEAD_BYTES = 192 << 10
TAIL_BYTES = 576 << 10
MAX_PARAMS_BYTES = 960 << 10  # the request must fit the daemon's frame (max_frame, 1 MiB by default)
STORE_TIMEOUT_S = 10.0
CHUNK = 64 << 10


class Captured:
    """A bounded capture: the first ``head`` bytes, the last ``tail`` bytes, and how many were dropped."""

    def __init__(self, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> None:
        self.head_max, self.tail_max = head, tail
        self.head = bytearray()
        self.tail: collections.deque[bytes] = collections.deque()
        self.tail_len = 0
        self.dropped = 0

    def add(self, b: bytes) -> None:
        room = self.head_max - len(self.head)
        if room > 0:
            self.head += b[:room]
            b = b[room:]
        if not b:
            return
        self.tail.append(b)
        self.tail_len += len(b)
        while self.tail_len > self.tail_max:
            first = self.tail[0]
            extra = self.tail_len - self.tail_max
            if len(first) <= extra:
                self.tail.popleft()
                self.tail_len -= len(first)
                self.dropped += len(first)
            else:
                self.tail[0] = first[extra:]
                self.tail_len -= extra
                self.dropped += extra

    def data(self) -> bytes:
        mark = f"\n... [{self.dropped} bytes cut by ctxlifectl run] ...\n".encode() if self.dropped else b""
        return bytes(self.head) + mark + b"".join(self.tail)


def run_captured(argv: list[str]) -> tuple[int, Captured]:
    """Run ``argv`` (no shell), stdout and stderr merged and captured; (exit status, capture)."""
    cap = Captured()
    try:
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, close_fds=True)
    except FileNotFoundError:
        cap.add(f"ctxlifectl run: {argv[0]}: command not found\n".encode())
        return 127, cap
    except (PermissionError, OSError) as exc:
        cap.add(f"ctxlifectl run: {argv[0]}: {exc.strerror or exc}\n".encode())
        return 126, cap

    def forward(signum: int, _frame: Any) -> None:
        try:
            child.send_signal(signum)
        except OSError:
            pass

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        assert child.stdout is not None
        fd = child.stdout.fileno()
        while True:
            b = os.read(fd, CHUNK)
            if not b:
                break
            cap.add(b)
        rc = child.wait()
    finally:
        for sig, h in previous.items():
            signal.signal(sig, h)
    return (rc if rc >= 0 else 128 - rc), cap


def fit(text: str, limit: int = MAX_PARAMS_BYTES) -> str:
    """``text`` cut in the middle (marked) until its JSON encoding is at most ``limit`` bytes."""
    size = len(json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    while size > limit and len(text) > 64:
        keep = int(len(text) * limit / size * 0.95)
        head = keep // 4
        cut = len(text) - keep
        text = text[:head] + f"\n... [{cut} characters cut by ctxlifectl run] ...\n" + text[len(text) - (keep - head):]
        size = len(json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    return text


def store(sock: str, *, session: str, command: str, status: int, text: str) -> dict[str, Any] | None:
    """The daemon's ``wrap.store`` answer, or None (down, slow, untrusted, an error: fail open)."""
    try:
        r = call(sock, "wrap.store", {"session": session, "cwd": os.getcwd(), "command": command,
                                      "exit_code": status, "output": fit(text)}, timeout=STORE_TIMEOUT_S)
    except (DaemonUnavailable, RemoteError, OSError, ValueError):
        return None
    return r if isinstance(r, dict) else None


def cmd_run(ns: argparse.Namespace, sock: str) -> int:
    argv = list(ns.argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        print("ctxlifectl run: no command given (ctxlifectl run --session S -- <command> [args...])", file=sys.stderr)
        return 2
    status, cap = run_captured(argv)
    raw = cap.data()
    text = raw.decode("utf-8", "replace")
    answer = store(sock, session=ns.session, command=shlex.join(argv), status=status, text=text) if ns.session else None
    out = sys.stdout.buffer
    if answer is not None and answer.get("replace") and isinstance(answer.get("digest"), str) and answer["digest"]:
        digest = answer["digest"]
        out.write(digest.encode("utf-8", "replace") + (b"" if digest.endswith("\n") else b"\n"))
    else:
        out.write(raw)
    out.flush()
    return status


def register(sub: Any, add: Any) -> None:
    p = sub.add_parser("run", help="run a test or build command, print a digest of its output (the PreToolUse wrapper)")
    p.add_argument("--session", help="the Claude Code session the output belongs to")
    p.add_argument("argv", nargs=argparse.REMAINDER, help="-- then the command and its arguments")
    p.set_defaults(fn=cmd_run)
