"""The daemon's start-up work (core/warmup.py) is done before READY: the first hooks of a real
session compile none of the hot path's regular expressions any more."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import FIXTURES

# A fresh interpreter (patterns compiled by earlier tests would hide the first-use cost): the pure
# hot path of the daemon (redact, archive elements, facts, priority, summaries, lessons, phase signals)
# over every hook payload Claude Code sent in a recorded real session, counting the regular
# expressions compiled by ctxlifed's code while it runs.
_PROBE = r"""
import json, re, sys, traceback
from ctxlifed.core import classify, phase, summarize, lessons, warmup
from ctxlifed.core.events import elements_from_event
from ctxlifed.core.hook_events import decode_hook
from ctxlifed.core.redact import redact_obj
if sys.argv[2] == "warm":
    warmup.warm_up()
compiled = []
real = re._compile
def spy(pattern, flags):
    if type(pattern) is str or type(pattern) is bytes:
        key = (type(pattern), pattern, flags)
        if key not in re._cache and any("ctxlifed" in f.filename for f in traceback.extract_stack(limit=8)[:-1]):
            compiled.append(str(pattern)[:60])
    return real(pattern, flags)
re._compile = spy
for line in open(sys.argv[1]):
    rec = json.loads(line)
    payload, _ = redact_obj(rec.get("payload", rec))
    if not isinstance(payload, dict):
        continue
    event = decode_hook(payload)
    for el in elements_from_event(event, ts=0.0):
        classify.detect_facts(el.text); classify.priority(el, "implementation"); summarize.summarize(el)
    lessons.classify_hook(event, event_id=0, ts=0.0)
    ev = payload.get("hook_event_name", "")
    if ev == "UserPromptSubmit":
        phase.signals_from_prompt(payload.get("prompt") or "")
    elif ev.startswith("PostToolUse") and isinstance(payload.get("tool_input"), dict):
        phase.signals_from_tool(payload.get("tool_name") or "", payload["tool_input"])
print(json.dumps(compiled))
"""


def _compiled(mode: str) -> list[str]:
    hooks = FIXTURES / "runs" / "chain_all" / "hooks.jsonl"
    r = subprocess.run([sys.executable, "-c", _PROBE, str(hooks), mode], capture_output=True, text=True, check=True)
    return list(json.loads(r.stdout.strip().splitlines()[-1]))


def test_a_real_sessions_hooks_compile_no_pattern_after_the_warm_up() -> None:
    cold = _compiled("cold")
    assert len(cold) > 10, "the probe sees the first-use compiles (else it proves nothing)"
    # One pattern is built from the session's own folder (lessons: commands normalised per project):
    # it is compiled once per project, by design.
    assert [p for p in _compiled("warm") if not p.startswith("/home/dev/exp/chain_project")] == []


def test_the_daemon_warms_up_before_ready() -> None:
    """daemon.py calls it on the way to READY=1 (before the start-up objects are frozen)."""
    src = (Path(__file__).resolve().parent.parent / "src" / "ctxlifed" / "daemon.py").read_text()
    assert src.index("warm_up()") < src.index("gc.freeze()") < src.index('systemd.notify(f"READY=1')


def test_after_readers_warm_the_first_read_starts_no_thread(tmp_path: Path) -> None:
    """The first read of a fresh daemon (SessionStart's session lookup) started anyio's worker thread
    while the hook waited; ``Readers.warm`` (before READY) does that instead."""
    import threading

    import anyio

    from ctxlifed.store.db import Readers, Writer

    db = str(tmp_path / "c.db")
    writer = Writer(db)
    readers = Readers(db)

    async def main() -> tuple[int, int]:
        await readers.warm()
        before = threading.active_count()
        await readers.run(lambda c: c.execute("SELECT 1").fetchone())
        return before, threading.active_count()

    try:
        before, after = anyio.run(main)
    finally:
        readers.close()
        writer.close()
    assert after == before
