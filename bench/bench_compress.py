"""Live compression at the hook (issue 17): what a PostToolUse costs when its output is replaced by a digest.

One daemon, two projects in the same run: ``on`` (``compress_outputs = "auto"``) and ``off`` (a
``[projects."<root>"]`` table sets ``"off"``), requests interleaved in a shuffled order so both see the
same machine state. Each session is first brought to level 1 (a transcript turn whose usage puts the
Working zone past 60 % of a 200k window).
- ``100KB persisted``: what Claude Code sends for a 100 KB Bash output: ``stdout`` holds the first 30,000
  characters, the whole is in the ``persistedOutputPath`` file (read, redacted, archived, written to the
  Read-able file, digested: the full path).
- ``25KB``: an output under Claude Code's cut (~6k tokens): replaced at level 1, kept at level 0.
Requests come 10 ms apart (Claude Code's hooks are a shim start apart), one connection per request.
Every ``on`` reply must carry ``updatedToolOutput`` and every ``off`` reply none (checked).
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path
from typing import Any

import msgspec
from _common import Daemon, call, daemon_env, dist, new_session, rmtree, short_tmp, target, tool_output, transcript_turn

GAP_S = 0.010


class Sess:
    def __init__(self, base: Path, proj: Path) -> None:
        self.sid = new_session()
        self.proj = str(proj)
        tdir = base / "home" / ".claude" / "projects" / ("-" + proj.name)
        tdir.mkdir(parents=True, exist_ok=True)
        self.transcript = tdir / f"{self.sid}.jsonl"
        # Level 1: ~130k of a 200k window in use (the Working zone past 60 %).
        self.transcript.write_bytes(transcript_turn(1, session=self.sid, cwd=self.proj, ctx_tokens=20_000)
                                    + transcript_turn(2, session=self.sid, cwd=self.proj, ctx_tokens=125_000))
        self.results = tdir / self.sid / "tool-results"
        self.results.mkdir(parents=True, exist_ok=True)
        self.n = 0

    def payload(self, kind: str, seed: int) -> bytes:
        self.n += 1
        tid = f"toolu_{self.n:08d}{os.urandom(4).hex()}"
        if kind == "100KB persisted":
            text = tool_output(100 * 1024, seed)
            f = self.results / f"{tid}.txt"
            f.write_text(text)
            tr = {"stdout": text[:30_000], "stderr": "", "interrupted": False, "isImage": False,
                  "noOutputExpected": False, "persistedOutputPath": str(f), "persistedOutputSize": len(text)}
        else:
            tr = {"stdout": tool_output(25 * 1024, seed), "stderr": "", "interrupted": False, "isImage": False,
                  "noOutputExpected": False}
        return msgspec.json.encode({
            "session_id": self.sid, "transcript_path": str(self.transcript), "cwd": self.proj,
            "hook_event_name": "PostToolUse", "tool_name": "Bash",
            "tool_input": {"command": "pytest -q tests 2>&1 | tee test.log", "description": "Run the tests"},
            "tool_response": tr, "tool_use_id": tid})


def run(quick: bool, log: Any = print) -> dict[str, Any]:
    n = 60 if quick else 600
    base = short_tmp("clbc-")
    try:
        on_p, off_p = base / "on", base / "off"
        for p in (on_p, off_p):
            (p / ".git").mkdir(parents=True)
        env = daemon_env(base)
        cfg = Path(env["CTXLIFED_CONFIG"])
        cfg.parent.mkdir(parents=True, exist_ok=True)
        cfg.write_text(f'window = 200000\n[projects."{off_p.resolve()}"]\ncompress_outputs = "off"\n')
        d = Daemon(base, env).start()
        try:
            sess = {"on": Sess(base, on_p), "off": Sess(base, off_p)}
            for s in sess.values():
                call(d.socket, "hook", {"session_id": s.sid, "transcript_path": str(s.transcript), "cwd": s.proj,
                                        "hook_event_name": "SessionStart", "source": "startup"})
                call(d.socket, "hook", s.payload("25KB", 1))  # derives the transcript: level 1
                call(d.socket, "status", {"session": s.sid})  # waits for the derivation
            levels = {k: call(d.socket, "status", {"session": s.sid})["sessions"][0]["level"] for k, s in sess.items()}
            log(f"  compress: {n} x 2 sizes x on/off, levels {levels}")
            kinds = [(size, mode) for size in ("100KB persisted", "25KB") for mode in ("on", "off")]
            out: dict[tuple[str, str], list[float]] = {k: [] for k in kinds}
            wrong = 0
            rng = random.Random(5)
            for i in range(n):
                order = kinds[:]
                rng.shuffle(order)
                for size, mode in order:
                    b = sess[mode].payload(size, 100 + i)
                    t0 = time.perf_counter()
                    r = call(d.socket, "hook", b)
                    out[(size, mode)].append((time.perf_counter() - t0) * 1000)
                    hso = json.loads(r["stdout"]).get("hookSpecificOutput", {}) if r.get("stdout") else {}
                    if ("updatedToolOutput" in hso) != (mode == "on"):
                        wrong += 1
                    time.sleep(GAP_S)
            comp = call(d.socket, "status", {"session": sess["on"].sid})["sessions"][0]["compression"]
        finally:
            d.stop()
    finally:
        rmtree(base)
    rows = [[f"compress.PostToolUse {size}, compression {mode}", dist(v), "ms",
             f"level {levels[mode]}, 1 connection/request, {GAP_S * 1000:.0f} ms apart, same run"]
            for (size, mode), v in out.items()]
    rows.append(["compress.tokens kept out of the window (on)", comp["saved_tokens"], "tokens",
                 f"{comp['replaced']} outputs replaced; by kind {json.dumps({k: v['saved_tokens'] for k, v in comp['by_kind'].items()})}"])
    p99_on = dist(out[("100KB persisted", "on")])["p99"]
    p99_off = dist(out[("100KB persisted", "off")])["p99"]
    targets = [
        target("17 PostToolUse 100 KB (persisted) p99 with compression", p99_on, 100.0, unit="ms",
               note=f"off in the same run: p99 {p99_off} ms; the hook's deadline is 1,500 ms"),
        target("17 every reply replaced (on) / kept (off) as configured", float(wrong == 0), 1.0, op=">=",
               note=f"{wrong} wrong of {n * len(kinds)}"),
    ]
    return {"rows": rows, "targets": targets,
            "data": {"latency_ms": {f"{s} {m}": dist(v) for (s, m), v in out.items()}, "levels": levels,
                     "compression": comp}}
