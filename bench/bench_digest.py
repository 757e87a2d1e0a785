"""Digest benchmark on the corpus of real tool outputs (bench/digest_corpus/).

    .venv/bin/python bench/bench_digest.py [--n 300] [--against OLD_DIGEST_PY]

Reports, per kind of output: tokens before/after the digest (estimates, ``estimate_tokens``), the saving
on outputs over 2k tokens as the policy replaces them at Working-zone level 1 (``decide`` +
``worth_replacing``), and the share of labelled must-keep lines kept verbatim; then the digest time
of a 100 KB output made of each corpus output repeated, per kind the file with the worst CPU p99: CPU time
(``time.process_time``, min / p50 / p99: robust on a loaded machine, it does not count time spent
waiting for a core) and wall time (p50 / p99). ``--against`` loads another ``digest.py`` (say the old
code: ``git show main:src/ctxlifed/core/digest.py > /tmp/old_digest.py``) and times it in the same run,
the two interleaved in a shuffled order every round, and checks that both give the same digests.
Targets: >= 70 % fewer tokens on outputs over 2k tokens at level >= 1; 100 % of must-keep lines kept;
100 KB digested in <= 2 ms p99 (CPU time). Writes bench/results/digest.json. Exit code 0 even when a
target is missed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from ctxlifed.core.compress_policy import CompressSettings, decide, worth_replacing  # noqa: E402
from ctxlifed.core.hook_events import PostToolUse  # noqa: E402
from ctxlifed.core.digest import digest, kept_verbatim  # noqa: E402
from ctxlifed.core import digest as this_digest  # noqa: E402

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


def load_module(path: str):  # noqa: ANN201 - a digest module
    spec = importlib.util.spec_from_file_location("ctxlifed.core._digest_against", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


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
    ap.add_argument("--against", help="another digest.py to time in the same run (e.g. the old code)")
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

    variants = {"this": this_digest}
    if ns.against:
        variants["against"] = load_module(ns.against)
    timing: dict[str, dict[str, dict[str, float]]] = {v: {} for v in variants}
    same = True
    rng = random.Random(17)
    print(f"\ndigest time of a 100 KB output (each corpus output repeated to 100 KB, N={ns.n}, variants interleaved):"
          " per kind the file with the worst CPU p99; CPU min / p50 / p99, wall p50 / p99, ms")
    for name, meta, text in cases:
        big = make_100k([text])
        outs = {v: mod.digest(big, command=meta["command"], archive_id=1, full_path="/tmp/out.txt")
                for v, mod in variants.items()}
        same = same and len({o.text for o in outs.values()}) == 1
        cpu: dict[str, list[float]] = {v: [] for v in variants}
        wall: dict[str, list[float]] = {v: [] for v in variants}
        order = list(variants)
        for _ in range(ns.n):
            rng.shuffle(order)
            for v in order:
                fn = variants[v].digest
                c0 = time.process_time()
                t0 = time.perf_counter()
                fn(big, command=meta["command"], archive_id=1, full_path="/tmp/out.txt")
                wall[v].append((time.perf_counter() - t0) * 1000)
                cpu[v].append((time.process_time() - c0) * 1000)
        for v in variants:
            row = {"file": name, "n": ns.n, "cpu_min": min(cpu[v]), "cpu_p50": pct(cpu[v], 0.5),
                   "cpu_p99": pct(cpu[v], 0.99), "wall_p50": pct(wall[v], 0.5), "wall_p99": pct(wall[v], 0.99)}
            if meta["kind"] not in timing[v] or row["cpu_p99"] > timing[v][meta["kind"]]["cpu_p99"]:
                timing[v][meta["kind"]] = row
    for kind in sorted(timing["this"]):
        for v in variants:
            r = timing[v][kind]
            print(f"  {kind:8} {v:8} {r['file']:26} cpu {r['cpu_min']:.2f} {r['cpu_p50']:.2f} {r['cpu_p99']:.2f}"
                  f"  wall {r['wall_p50']:.2f} {r['wall_p99']:.2f}")
    if ns.against:
        print(f"  same digests as --against on every 100 KB output: {'yes' if same else 'NO'}")
    worst = max(r["cpu_p99"] for r in timing["this"].values())
    worst_wall = max(r["wall_p99"] for r in timing["this"].values())
    print(f"\ntargets: saving on >2k-token outputs at level 1 {big_saved:.1%} (>= 70 %): "
          f"{'met' if big_saved >= 0.7 else 'MISSED'}; must-keep kept {must_share:.1%} (100 %): "
          f"{'met' if must_share == 1.0 else 'MISSED'}; worst CPU p99 per 100 KB {worst:.2f} ms (<= 2 ms): "
          f"{'met' if worst <= 2.0 else 'MISSED'} (wall p99 {worst_wall:.2f} ms)")
    res = ROOT / "bench" / "results"
    res.mkdir(exist_ok=True)
    (res / "digest.json").write_text(json.dumps({
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "rows": rows, "per_kind": {k: dict(v) for k, v in per_kind.items()}, "timing_ms": timing, "same_digests": same,
        "big_saving": big_saved, "must_share": must_share}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
