"""Hook payload decoding on the hook path: the dict the protocol decodes today against the typed event
(``core.hook_events``), on every real payload of the Claude Code fixtures.

    .venv/bin/python bench/bench_hook_decode.py [--rounds 30]

Rows (microseconds per payload, mean over all fixture payloads; p50/p99 over single calls):
  json->dict            the protocol's decode of the params today (``Decoder(dict[str, Any])``)
  dict->event           ``decode_hook`` of that dict (what the pipeline adds: redaction needs the dict)
  json->event           ``decode_hook_json`` of the bytes (a stored payload read back)
  dict->event fallback  the same payloads with one field of the wrong type (field-by-field path)
  1 MB Write dict->event  a Write of a 1 MB file (the text is not copied)
Writes bench/results/hook_decode.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import runpy
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

import msgspec  # noqa: E402

from ctxlifed.core.hook_events import decode_hook, decode_hook_json  # noqa: E402

def payloads() -> list[dict[str, Any]]:
    """Every fixture payload: the same list the decoder's tests check (tests/test_core_hook_events.py)."""
    return runpy.run_path(str(ROOT / "tests" / "test_core_hook_events.py"))["fixture_payloads"]()


def measure(fn: Callable[[Any], Any], items: list[Any], rounds: int) -> dict[str, float]:
    singles: list[float] = []
    clock = time.perf_counter_ns
    t0 = clock()
    for _ in range(rounds):
        for x in items:
            a = clock()
            fn(x)
            singles.append(clock() - a)
    total = clock() - t0
    singles.sort()
    return {"mean_us": round(total / (rounds * len(items)) / 1000, 3),
            "p50_us": round(statistics.median(singles) / 1000, 3),
            "p99_us": round(singles[int(len(singles) * 0.99)] / 1000, 3)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=30)
    args = ap.parse_args()
    ps = payloads()
    blobs = [msgspec.json.encode(p) for p in ps]
    dict_decoder = msgspec.json.Decoder(dict[str, Any])
    wrong = [{**p, "cwd": 7} for p in ps]  # one field of the wrong type: the fallback path
    big = {"session_id": "s", "hook_event_name": "PostToolUse", "tool_name": "Write", "tool_use_id": "toolu_1",
           "tool_input": {"file_path": "/w/big.txt", "content": "x" * (1 << 20)},
           "tool_response": {"type": "create", "filePath": "/w/big.txt", "content": "x" * (1 << 20)}}
    rows = {
        "json->dict": measure(dict_decoder.decode, blobs, args.rounds),
        "dict->event": measure(decode_hook, ps, args.rounds),
        "json->event": measure(decode_hook_json, blobs, args.rounds),
        "dict->event fallback": measure(decode_hook, wrong, args.rounds),
        "1 MB Write dict->event": measure(decode_hook, [big], args.rounds * 10),
    }
    print(f"{len(ps)} fixture payloads, {args.rounds} rounds, python {platform.python_version()}, "
          f"msgspec {msgspec.__version__}")
    print(f"{'row':24} {'mean µs':>9} {'p50 µs':>9} {'p99 µs':>9}")
    for name, r in rows.items():
        print(f"{name:24} {r['mean_us']:9.2f} {r['p50_us']:9.2f} {r['p99_us']:9.2f}")
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "hook_decode.json").write_text(json.dumps({"payloads": len(ps), "rounds": args.rounds, "rows": rows},
                                                     indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
