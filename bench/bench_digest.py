"""Digest benchmark on the corpus of real tool outputs (bench/digest_corpus/).

    .venv/bin/python bench/bench_digest.py [--n 300]

Reports, per kind of output: tokens before/after the digest (estimates, ``estimate_tokens``), the saving
on outputs over 2k tokens as the policy replaces them at Working-zone level 1 (``decide`` +
``worth_replacing``), and the share of labelled must-keep lines kept verbatim; then the digest time
(N, p50, p95, p99) of a 100 KB output made of corpus outputs of each kind. Targets: >= 70 % fewer
tokens on outputs over 2k tokens at level >= 1; 100 % of must-keep lines kept; 100 KB digested in
<= 2 ms p99. Writes bench/results/digest.json. Exit code 0 even when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from ctxlifed.core.compress_policy import CompressSettings, decide, worth_replacing  # noqa: E402
from ctxlifed.core.hook_events import PostToolUse  # noqa: E402
from ctxlifed.core.digest import digest, kept_verbatim  # noqa: E402

CORPUS = ROOT / "bench" / "digest_corpus"
BIG = 2000
SIZE_100K = 100 * 1024


def load() -> list[tuple[str, dict, str]]:
    out = []
    for meta in sorted(CORPUS.glob("*.json")):
        out.append((meta.stem, json.loads(meta.read_text()), meta.with_suffix(".txt").read_text()))
    return out


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def make_100k(texts: list[str]) -> str:
    buf = ""
    i = 0
    while len(buf) < SIZE_100K:
        buf += texts[i % len(texts)]
        i += 1
    return buf[: buf.rfind("\n", 0, SIZE_100K) + 1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300)
    ns = ap.parse_args()
    cases = load()
    settings = CompressSettings()
    per_kind: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    rows = []
    for name, meta, text in cases:
        d = digest(text, command=meta["command"], archive_id=1, full_path="/tmp/out.txt",
                   budget_tokens=settings.digest_budget_tokens, max_tokens=settings.digest_max_tokens)
        kept = len(kept_verbatim(meta["must_keep"], d.text))
        resp = {"stdout": text, "stderr": "", "interrupted": False, "isImage": False, "noOutputExpected": False}
        dec = decide(PostToolUse(tool_name="Bash", tool_input={"command": meta["command"]}, tool_response=resp), level=1, phase=None, settings=settings)
        replaced = dec is not None and worth_replacing(d.original_tokens, d.tokens, settings)
        k = per_kind[d.kind]
        k["outputs"] += 1
        k["must"] += len(meta["must_keep"])
        k["kept"] += kept
        k["tokens"] += d.original_tokens
        k["digest_tokens"] += d.tokens
        if d.original_tokens > BIG:
            k["big"] += 1
            k["big_tokens"] += d.original_tokens
            k["big_after"] += d.tokens if replaced else d.original_tokens
        rows.append({"name": name, "kind": d.kind, "tokens": d.original_tokens, "digest": d.tokens,
                     "replaced_at_level1": replaced, "must": len(meta["must_keep"]), "kept": kept})
    print(f"{'output':26} {'kind':8} {'tokens':>7} {'digest':>7} {'saved':>6} {'L1':>4} {'must kept':>10}")
    for r in rows:
        saved = 1 - r["digest"] / r["tokens"] if r["tokens"] else 0
        print(f"{r['name']:26} {r['kind']:8} {r['tokens']:7,} {r['digest']:7,} {saved:6.0%} "
              f"{'yes' if r['replaced_at_level1'] else 'no':>4} {r['kept']:>4}/{r['must']:<4}")
    print()
    print(f"{'kind':8} {'outputs':>7} {'tokens':>8} {'digest':>8} {'>2k: before':>12} {'after (L1)':>11} {'saved':>6} {'must kept':>10}")
    tot = defaultdict(int)
    for kind in sorted(per_kind):
        k = per_kind[kind]
        for key, v in k.items():
            tot[key] += v
        saved = 1 - k["big_after"] / k["big_tokens"] if k["big_tokens"] else float("nan")
        print(f"{kind:8} {k['outputs']:7} {k['tokens']:8,} {k['digest_tokens']:8,} {k['big_tokens']:12,} "
              f"{k['big_after']:11,} {saved:6.1%} {k['kept']:>5}/{k['must']:<4}")
    big_saved = 1 - tot["big_after"] / tot["big_tokens"] if tot["big_tokens"] else 0.0
    must_share = tot["kept"] / tot["must"] if tot["must"] else 1.0
    print(f"{'all':8} {tot['outputs']:7} {tot['tokens']:8,} {tot['digest_tokens']:8,} {tot['big_tokens']:12,} "
          f"{tot['big_after']:11,} {big_saved:6.1%} {tot['kept']:>5}/{tot['must']:<4}")

    timing: dict[str, dict[str, float]] = {}
    print(f"\ndigest time of a 100 KB output (each corpus output repeated to 100 KB, N={ns.n}): worst file per kind,"
          " min, p50, p95, p99 ms (min: the CPU cost without contention)")
    for name, meta, text in cases:
        big = make_100k([text])
        times = []
        for _ in range(ns.n):
            t0 = time.perf_counter()
            digest(big, command=meta["command"], archive_id=1, full_path="/tmp/out.txt")
            times.append((time.perf_counter() - t0) * 1000)
        row = {"file": name, "n": ns.n, "min": min(times), "p50": pct(times, 0.5), "p95": pct(times, 0.95),
               "p99": pct(times, 0.99)}
        if meta["kind"] not in timing or row["p99"] > timing[meta["kind"]]["p99"]:
            timing[meta["kind"]] = row
    for kind in sorted(timing):
        r = timing[kind]
        print(f"  {kind:8} {r['file']:26} {r['min']:.2f} {r['p50']:.2f} {r['p95']:.2f} {r['p99']:.2f}")
    worst = max(v["p99"] for v in timing.values())
    print(f"\ntargets: saving on >2k-token outputs at level 1 {big_saved:.1%} (>= 70 %): "
          f"{'met' if big_saved >= 0.7 else 'MISSED'}; must-keep kept {must_share:.1%} (100 %): "
          f"{'met' if must_share == 1.0 else 'MISSED'}; worst p99 per 100 KB {worst:.2f} ms (<= 2 ms): "
          f"{'met' if worst <= 2.0 else 'MISSED'}")
    res = ROOT / "bench" / "results"
    res.mkdir(exist_ok=True)
    (res / "digest.json").write_text(json.dumps({
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "rows": rows, "per_kind": {k: dict(v) for k, v in per_kind.items()}, "timing_ms": timing,
        "big_saving": big_saved, "must_share": must_share}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
