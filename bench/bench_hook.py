"""Target 1: hook round trip as the user pays it, shim -> daemon -> reply, per event type.

Per sample a real process is spawned, exactly as Claude Code does it:
  shim  ``<python> -I -S ctxlifed_hook.py`` (payload on stdin) against a warm daemon;
  cold  ``<python> bench/cold_hook.py``: the same hook handled in a fresh process that imports
        ctxlifed and opens the store (the per-hook-script design the daemon replaces);
  bare  ``<python> -I -S -c "import socket, json"``: the floor for any Python hook.
Variants are interleaved in a shuffled order every round, so drift and noise hit them alike;
ratios are taken between numbers of this same run. Both stores start as copies of the same
history; each variant has its own session and transcript, and before every UserPromptSubmit /
PostToolUse the transcript grows by one turn (the 10 KB output is also in the transcript, as in a
real session). SessionStart is a new session each time (``source: startup``).
Every shim answer is checked: the daemon must have stored the event (nothing spooled).
"""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import msgspec
from _common import (PY, SHIM, Daemon, adapt, call, daemon_env, dist, new_session, post_tool_use, rmtree, sample,
                     short_tmp, small_transcript, target, tool_output, transcript_turn)

COLD = Path(__file__).resolve().parent / "cold_hook.py"
EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse")
PROMPTS = [
    "Look at the writer in store/db.py and tell me why commits are slow under load.",
    "Add a --json flag to the status command and update its help text.",
    "Why does the recall query for 'timeout' return nothing from yesterday's session?",
    "Rename load_config to read_config everywhere and keep the old name as an alias.",
]


class Side:
    """One store + its sessions/transcripts: the warm daemon's or the cold scripts'."""

    def __init__(self, base: Path, env: dict[str, str], proj: Path) -> None:
        self.base, self.env, self.proj = base, env, proj
        self.tdir = base / "tr"
        self.tdir.mkdir(exist_ok=True)
        self.sid = new_session()
        self.transcript = self.tdir / f"{self.sid}.jsonl"
        shutil.copy(small_transcript(), self.transcript)
        self.startup = self.tdir / "startup.jsonl"
        self.startup.write_bytes(b"".join(small_transcript().read_bytes().splitlines(keepends=True)[:3]))
        self.turn = 0

    def payload(self, event: str, i: int) -> bytes:
        cwd = str(self.proj)
        if event == "SessionStart":
            p = adapt(sample("SessionStart:startup"), new_session(), cwd, str(self.startup))
        elif event == "UserPromptSubmit":
            self._append(text=f"Done with step {i}. The writer groups commits; next I will check the readers.")
            p = adapt(sample("UserPromptSubmit"), self.sid, cwd, str(self.transcript))
            p["prompt"] = PROMPTS[i % len(PROMPTS)] + f" (#{i})"
            p["prompt_id"] = new_session()
        else:
            tid = "toolu_" + os.urandom(12).hex()
            out = tool_output(10 * 1024, seed=i)
            self._append(tool=out, tid=tid)
            p = post_tool_use(self.sid, cwd, str(self.transcript), 10 * 1024, tool_use_id=tid, seed=i)
        return msgspec.json.encode(p)

    def _append(self, text: str | None = None, tool: str | None = None, tid: str | None = None) -> None:
        self.turn += 1
        line = transcript_turn(self.turn, session=self.sid, cwd=str(self.proj), ctx_tokens=30_000 + self.turn * 50,
                               text=text, tool_output=tool, tool_use_id=tid, command="pytest -q tests")
        with open(self.transcript, "ab") as f:
            f.write(line)


def _history(d: Daemon, proj: Path, n: int) -> None:
    """Some history in the store before measuring (earlier sessions of the same project)."""
    for s in range(max(1, n // 50)):
        sid = new_session()
        call(d.socket, "hook", msgspec.json.encode(adapt(sample("SessionStart:startup"), sid, str(proj), None)))
        for i in range(50):
            if i % 5 == 0:
                p = adapt(sample("UserPromptSubmit"), sid, str(proj), None)
                p["prompt"] = PROMPTS[i % len(PROMPTS)] + f" (history {s}.{i}) we decided to keep the single writer."
            else:
                p = post_tool_use(sid, str(proj), None, 2048, seed=10_000 + s * 100 + i)
            call(d.socket, "hook", msgspec.json.encode(p))


def _timed(argv: list[str], data: bytes | None, env: dict[str, str]) -> tuple[float, bytes, int]:
    t0 = time.perf_counter()
    r = subprocess.run(argv, input=data, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                       stdin=None if data is not None else subprocess.DEVNULL, check=False)
    return (time.perf_counter() - t0) * 1000, r.stdout, r.returncode


def run(quick: bool, log: Any = print) -> dict[str, Any]:
    rounds = 12 if quick else 150
    history = 100 if quick else 500
    base_w = short_tmp("clbw-")
    base_c = short_tmp("clbc-")
    try:
        env_w = daemon_env(base_w)
        env_c = daemon_env(base_c)
        proj_w = base_w / "proj"  # both sides work in the same project: the store copies hold its history
        (proj_w / ".git").mkdir(parents=True)
        log(f"  hook: history of {history} events, then {rounds} interleaved rounds")
        d = Daemon(base_w, env_w).start()
        _history(d, proj_w, history)
        d.stop()
        # The cold side starts from a copy of the same store.
        shutil.copytree(d.data_dir, Path(env_c["CTXLIFED_DATA_DIR"]), dirs_exist_ok=True)
        d = Daemon(base_w, env_w).start()
        warm, cold = Side(base_w, env_w, proj_w), Side(base_c, env_c, proj_w)
        # Create both measurement sessions (not counted), and warm the daemon's code paths.
        for side, cmd in ((warm, [PY, "-I", "-S", str(SHIM)]), (cold, [PY, str(COLD)])):
            p = msgspec.json.encode(adapt(sample("SessionStart:startup"), side.sid, str(side.proj), str(side.transcript)))
            _timed(cmd, p, side.env)
        for i in range(5):
            for ev in EVENTS:
                _timed([PY, "-I", "-S", str(SHIM)], warm.payload(ev, 100_000 + i), env_w)
        bare_argv = [PY, "-I", "-S", "-c", "import socket, json"]
        variants = [("shim", ev) for ev in EVENTS] + [("cold", ev) for ev in EVENTS] + [("bare", "-")]
        times: dict[tuple[str, str], list[float]] = {v: [] for v in variants}
        per_round: list[dict[tuple[str, str], float]] = []
        rng = random.Random(42)
        bad: dict[str, int] = {}
        shim_sent = 0
        for r in range(rounds):
            order = variants[:]
            rng.shuffle(order)
            row: dict[tuple[str, str], float] = {}
            for kind, ev in order:
                if kind == "bare":
                    ms, out, rc = _timed(bare_argv, None, env_w)
                elif kind == "shim":
                    ms, out, rc = _timed([PY, "-I", "-S", str(SHIM)], warm.payload(ev, r), env_w)
                    shim_sent += 1
                else:
                    ms, out, rc = _timed([PY, str(COLD)], cold.payload(ev, r), env_c)
                if rc != 0 or (ev == "SessionStart" and kind != "bare" and not out):
                    bad[f"{kind}.{ev}"] = bad.get(f"{kind}.{ev}", 0) + 1
                times[(kind, ev)].append(ms)
                row[(kind, ev)] = ms
            per_round.append(row)
        spool = Path(env_w["CTXLIFED_DATA_DIR"]) / "spool.jsonl"
        spooled = spool.exists() and spool.stat().st_size > 0
        daemon_events = call(d.socket, "status", {})["events"]
        d.stop()
        with sqlite3.connect(d.db) as c:
            stored_shim = c.execute("SELECT count(*) FROM events WHERE source = 'hook'").fetchone()[0]
    finally:
        rmtree(base_w)
        rmtree(base_c)

    rows, targets, data = [], [], {"rounds": rounds, "history_events": history, "variants": {}}
    bare = dist(times[("bare", "-")])
    data["variants"]["bare"] = bare
    rows.append(["hook.bare python -I -S -c 'import socket, json'", bare, "ms", ""])
    for ev in EVENTS:
        s, c = dist(times[("shim", ev)]), dist(times[("cold", ev)])
        paired_cold = sorted(x[("cold", ev)] / x[("shim", ev)] for x in per_round)
        paired_bare = sorted(x[("shim", ev)] / x[("bare", "-")] for x in per_round)
        ratio_cold = c["p50"] / s["p50"]
        ratio_bare = s["p50"] / bare["p50"]
        data["variants"][f"shim.{ev}"] = s
        data["variants"][f"cold.{ev}"] = c
        data[f"ratio.{ev}"] = {"cold_over_shim_p50": round(ratio_cold, 2),
                               "cold_over_shim_paired_median": round(paired_cold[len(paired_cold) // 2], 2),
                               "shim_over_bare_p50": round(ratio_bare, 3),
                               "shim_over_bare_paired_median": round(paired_bare[len(paired_bare) // 2], 3),
                               "shim_over_bare_p95": round(s["p95"] / bare["p95"], 3)}
        rows.append([f"hook.shim {ev} (warm daemon)", s, "ms", f"{ratio_bare:.2f}x bare, cold/shim {ratio_cold:.1f}x"])
        rows.append([f"hook.cold {ev} (fresh process)", c, "ms", ""])
        targets.append(target(f"1 {ev}: cold p50 / shim p50", ratio_cold, 8.0, op=">=", unit="x"))
        targets.append(target(f"1 {ev}: shim p50 / bare p50", ratio_bare, 1.3, unit="x"))
    data["checks"] = {"bad_answers": bad, "spooled": spooled, "shim_requests": shim_sent,
                      "hook_events_stored": stored_shim, "daemon_events_total": daemon_events}
    if bad or spooled:
        targets.append(target("1 every shim answer came from the daemon", 1.0, 0.0, note=f"bad={bad} spooled={spooled}"))
    return {"rows": rows, "targets": targets, "data": data}
