"""Target 4: transcript work.

(a) Per-event cost is O(new bytes): for transcripts of 10 KB .. 20 MB the daemon first catches up
    (the first events of a session it has never seen read up to 1 MiB each: reported, not a
    target), then every measured event appends ONE assistant turn (~1 KB, with usage figures, so
    the budget is recomputed) and sends UserPromptSubmit, then status (the transcript is read when
    the event is derived, after its answer: status waits for that); hook + status round trip (in-
    process client) must stay flat from the smallest to the largest file.
(b) PreCompact on a 200k-token session: a session is fed through the daemon as Claude Code would
    (transcript turns with tool calls + the matching PostToolUse hooks, a prompt every 10 turns)
    until its archived text is >= 200k estimated tokens and the usage figures stand at ~160k
    (auto-compaction of a 200k window); the feed's derivation is let finish (as the gaps between
    real hooks do), then the PreCompact hook's round trip is timed: it ranks,
    summarises and re-files every element of the window before it answers.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import msgspec
from _common import (Daemon, adapt, call, dist, new_session, post_tool_use, project_daemon, sample, target,
                     tool_output, transcript_turn)
from _text import TextGen

from ctxlifed.service.transcript_reader import MAX_TRANSCRIPT_READ


def _grow_file(path: Path, size: int, session: str, cwd: str) -> int:
    """Write realistic turns until ``path`` holds ``size`` bytes. Returns the number of turns."""
    gen = TextGen(seed=size)
    turns = 0
    written = 0
    with open(path, "wb") as f:
        while written < size:
            turns += 1
            tool = tool_output(gen.size(3000, 200, 20000), seed=turns) if turns % 2 else None
            line = transcript_turn(turns, session=session, cwd=cwd, ctx_tokens=50_000, text=gen.prose(gen.size(400)),
                                   tool_output=tool)
            f.write(line)
            written += len(line)
    return turns


def flat(d: Daemon, base: Path, proj: Path, sizes: list[int], n: int, log: Any) -> dict[str, Any]:
    """One session per size; the measured events go round-robin over the sizes (noise hits all alike)."""
    out: dict[str, Any] = {}
    sess = []
    for size in sizes:
        sid = new_session()
        path = base / "tr" / f"{sid}.jsonl"
        path.parent.mkdir(exist_ok=True)
        turns = _grow_file(path, size, sid, str(proj))
        real = path.stat().st_size
        # Catch up: events until the daemon's cursor reached the end of the file (it reads at most
        # MAX_TRANSCRIPT_READ an event), then status, which waits for their derivations.
        catch = []
        for _ in range(64):
            p = adapt(sample("UserPromptSubmit"), sid, str(proj), str(path))
            p["prompt"] = "continue"
            t0 = time.perf_counter()
            call(d.socket, "hook", msgspec.json.encode(p), timeout=120)
            catch.append(round((time.perf_counter() - t0) * 1000, 1))
            if len(catch) * MAX_TRANSCRIPT_READ >= real:
                break
        call(d.socket, "status", {"session": sid, "limit": 1}, timeout=120)
        sess.append({"size": size, "sid": sid, "path": path, "turns": turns, "bytes": real, "catch": catch, "ts": [],
                     "full": [], "cpu": 0.0})
        log(f"    {real / 1e6:8.2f} MB: {len(catch)} catch-up events, first {catch[0]} ms, max {max(catch)} ms")
    for i in range(n):
        for s in sess:
            s["turns"] += 1
            with open(s["path"], "ab") as f:
                f.write(transcript_turn(s["turns"], session=s["sid"], cwd=str(proj), ctx_tokens=50_000 + i * 10,
                                        text=f"Step {i}: checked the cursor; only the new bytes are read."))
            p = adapt(sample("UserPromptSubmit"), s["sid"], str(proj), str(s["path"]))
            p["prompt"] = f"next step {i}"
            p["prompt_id"] = new_session()
            b = msgspec.json.encode(p)
            c0 = d.cpu_s()
            t0 = time.perf_counter()
            call(d.socket, "hook", b)
            t1 = time.perf_counter()
            # The transcript is read when the event is derived, after the answer (write-behind):
            # a status call waits for that, so hook + status is the whole per-event work.
            call(d.socket, "status", {"session": s["sid"], "limit": 1})
            s["ts"].append((t1 - t0) * 1000)
            s["full"].append((time.perf_counter() - t0) * 1000)
            s["cpu"] += d.cpu_s() - c0
    for s in sess:
        st = call(d.socket, "status", {"session": s["sid"]})
        ctx = (st.get("sessions") or [{}])[0].get("context_tokens")
        out[str(s["size"])] = {"bytes": s["bytes"], "catch_up_ms": s["catch"], "per_event": dist(s["full"]),
                               "answer": dist(s["ts"]), "cpu_ms_per_event": round(s["cpu"] / max(1, n) * 1000, 3),
                               "context_tokens_seen": ctx}
        log(f"    {s['bytes'] / 1e6:8.2f} MB: per event (hook + its derivation) p50 {dist(s['full'])['p50']} ms,"
            f" answer p50 {dist(s['ts'])['p50']} ms (context {ctx})")
    return out


def precompact(d: Daemon, base: Path, proj: Path, sessions: int, log: Any) -> dict[str, Any]:
    times, info = [], []
    for k in range(sessions):
        sid = new_session()
        path = base / "tr" / f"{sid}.jsonl"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"")
        gen = TextGen(seed=500 + k)
        cwd = str(proj)
        call(d.socket, "hook", msgspec.json.encode(adapt(sample("SessionStart:startup"), sid, cwd, str(path))))
        chars = 0
        turn = 0
        target_chars = 200_000 * 4  # estimate_tokens: ~4 characters a token for this text
        events = 0
        while chars < target_chars:
            turn += 1
            ctx = 20_000 + int(140_000 * min(1.0, chars / target_chars))
            if turn % 10 == 1:
                prompt = gen.prose(gen.size(300, 40, 2000))
                p = adapt(sample("UserPromptSubmit"), sid, cwd, str(path))
                p.update(prompt=prompt, prompt_id=new_session())
                call(d.socket, "hook", msgspec.json.encode(p))
                chars += len(prompt)
                events += 1
            text = gen.prose(gen.size(500))
            out = tool_output(gen.size(3000, 200, 30000), seed=k * 100_000 + turn)
            tid = "toolu_" + os.urandom(12).hex()
            with open(path, "ab") as f:
                f.write(transcript_turn(turn, session=sid, cwd=cwd, ctx_tokens=ctx, text=text, tool_output=out,
                                        tool_use_id=tid, command=f"grep -rn step{turn} src"))
            p = post_tool_use(sid, cwd, str(path), len(out), tool_use_id=tid, seed=k * 100_000 + turn)
            p["tool_input"] = {"command": f"grep -rn step{turn} src", "description": "search"}
            p["tool_response"]["stdout"] = out
            call(d.socket, "hook", msgspec.json.encode(p))
            chars += len(text) + len(out)
            events += 1
        # The feed went back to back; between real hooks each event is derived in the gap. Let that
        # happen first, so the PreCompact measured is its own work, not the feed's backlog.
        call(d.socket, "status", {"session": sid, "limit": 1}, timeout=120)
        pc = adapt(sample("PreCompact:auto"), sid, cwd, str(path))
        b = msgspec.json.encode(pc)
        t0 = time.perf_counter()
        call(d.socket, "hook", b, timeout=120)
        ms = (time.perf_counter() - t0) * 1000
        times.append(ms)
        st = call(d.socket, "status", {"session": sid})["sessions"][0]
        info.append({"events": events, "turns": turn, "archived_chars": chars, "precompact_ms": round(ms, 1),
                     "context_tokens": st.get("context_tokens"), "level": st.get("level")})
        log(f"    session {k}: {events} events, {chars / 4 / 1000:.0f}k tokens archived -> PreCompact {ms:.1f} ms")
    return {"precompact_ms": dist(times), "sessions": info}


def run(quick: bool, log: Any = print) -> dict[str, Any]:
    sizes = [10 << 10, 2 << 20] if quick else [10 << 10, 1 << 20, 5 << 20, 20 << 20]
    n = 30 if quick else 300
    sessions = 2 if quick else 7
    with project_daemon("clbt-") as (base, proj, d):
        log(f"  transcript: per-event cost at {', '.join(f'{s / 1e6:g} MB' for s in sizes)} ({n} events each)")
        fl = flat(d, base, proj, sizes, n, log)
        log(f"  transcript: PreCompact on {sessions} sessions of 200k tokens")
        pc = precompact(d, base, proj, sessions, log)
    rows = []
    for size, r in fl.items():
        rows.append([f"transcript.event with 1 new turn, file {int(size) / 1e6:g} MB", r["per_event"], "ms",
                     f"hook + its derivation (status); answer alone p50 {r['answer']['p50']} ms; daemon CPU"
                     f" {r['cpu_ms_per_event']} ms/event; first sight: {len(r['catch_up_ms'])} catch-up events,"
                     f" the first {r['catch_up_ms'][0]} ms (answered inline), max {max(r['catch_up_ms'])} ms"])
    rows.append(["transcript.PreCompact 200k-token session", pc["precompact_ms"], "ms",
                 f"{pc['sessions'][0]['events']} events/session"])
    small, large = fl[str(sizes[0])]["per_event"], fl[str(sizes[-1])]["per_event"]
    ratio = large["p50"] / small["p50"]
    targets = [
        target(f"4 per-event cost flat: p50 at {sizes[-1] / 1e6:g} MB / p50 at {sizes[0] / 1e3:g} KB", ratio, 1.2,
               unit="x", note="O(new bytes): the ratio stays ~1"),
        target("4 PreCompact 200k-token session p50", pc["precompact_ms"]["p50"], 300, unit="ms",
               note=f"max {pc['precompact_ms']['max']} ms of {pc['precompact_ms']['n']}"),
    ]
    return {"rows": rows, "targets": targets, "data": {"flat": fl, "precompact": pc}}
