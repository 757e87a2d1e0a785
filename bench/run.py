"""ctxlifed benchmark suite: ``make bench`` (full) or ``bench/run.py [names] [--quick]``.

    bench/run.py                      every benchmark, full sizes (what `make bench` runs)
    bench/run.py hook recall --quick  selected ones, small sizes (a smoke run)

Benchmarks: hook (target 1), daemon (2), recall (3), transcript (4), memory (5), shim (6), cli_hooks
(hooks as the real Claude Code CLI times them; skipped with a message when the CLI is absent).
Each writes bench/results/<name>.json (git-ignored) with the machine it ran on; the run prints one
table (N, p50, p95, p99) and the targets that passed or missed. Figures are distributions and
same-run ratios, never single times: the machines are shared and noisy.
The exit code is 0 even when a target is missed (a benchmark reports; it does not gate).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _early_src(argv: list[str]) -> None:
    """``--src DIR``: measure another source tree (e.g. a snapshot of HEAD for before/after).
    Set before anything imports ctxlifed; child processes get it through PYTHONPATH."""
    for i, a in enumerate(argv):
        if a == "--src" and i + 1 < len(argv) or a.startswith("--src="):
            src = str(Path(a.split("=", 1)[1] if "=" in a else argv[i + 1]).resolve())
            os.environ["CTXLIFED_BENCH_SRC"] = src
            os.environ["PYTHONPATH"] = src + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")
            sys.path.insert(1, src)


_early_src(sys.argv[1:])

from _common import SRC, machine_info, write_result  # noqa: E402

ORDER = ["shim", "hook", "daemon", "compress", "recall", "burst", "transcript", "memory", "worstcase", "cli_hooks"]


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 100 else f"{v:.1f}"
    return str(v)


def _short(note: str, n: int = 110) -> str:
    return note if len(note) <= n else note[: n - 1] + "…"


def print_table(results: dict[str, dict[str, Any]]) -> None:
    head = ["metric", "N", "p50", "p95", "p99", "unit", "note"]
    lines = []
    for name in ORDER:
        res = results.get(name)
        if not res:
            continue
        for metric, d, unit, note in res.get("rows", []):
            if isinstance(d, dict):
                lines.append([metric, str(d.get("n", "")), _fmt(d.get("p50", "")), _fmt(d.get("p95", "")),
                              _fmt(d.get("p99", "")), unit, _short(note)])
            else:
                lines.append([metric, "", _fmt(d), "", "", unit, _short(note)])
    widths = [max(len(h), *(len(r[i]) for r in lines)) if lines else len(h) for i, h in enumerate(head)]
    print()
    print("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for r in lines:
        print("  ".join(c.ljust(w) if i in (0, 5, 6) else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))))
    print()
    print("targets:")
    for name in ORDER:
        for t in (results.get(name) or {}).get("targets", []):
            mark = "PASS" if t["pass"] else "MISS"
            note = f"  ({t['note']})" if t.get("note") else ""
            print(f"  [{mark}] {t['target']}: {t['value']}{t['unit']} (target {t['op']} {t['limit']}{t['unit']}){note}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", metavar="name", help=f"benchmarks to run (default: all): {' '.join(ORDER)}")
    ap.add_argument("--quick", action="store_true", help="small sizes: a smoke run, not a measurement")
    ap.add_argument("--src", help="source tree to measure (default: this checkout's src/)")
    ap.add_argument("--tag", default="", help="suffix for the result files (e.g. 'before')")
    args = ap.parse_args(argv)
    unknown = [n for n in args.names if n not in ORDER]
    if unknown:
        ap.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {' '.join(ORDER)}")
    names = [n for n in ORDER if n in (args.names or ORDER)]
    machine = machine_info()
    print(f"ctxlifed bench ({'quick' if args.quick else 'full'}): {', '.join(names)}")
    import ctxlifed

    machine["source"] = str(Path(ctxlifed.__file__).resolve().parent.parent)
    assert Path(machine["source"]) == SRC, (machine["source"], SRC)
    print(f"source: {machine['source']}")
    print(f"machine: {machine['nproc']} CPUs ({machine['cpu']}), {machine['ram_gib']} GiB, Python {machine['python']},"
          f" SQLite {machine['sqlite']}, load {machine['loadavg_at_start']}")
    results: dict[str, dict[str, Any]] = {}
    failed = []
    for name in names:
        print(f"\n== {name}", flush=True)
        t0 = time.perf_counter()
        try:
            mod = importlib.import_module(f"bench_{name}")
            res = mod.run(args.quick, log=lambda *a: print(*a, flush=True))
        except Exception:  # noqa: BLE001 - one broken benchmark must not hide the others
            traceback.print_exc()
            failed.append(name)
            continue
        res["seconds"] = round(time.perf_counter() - t0, 1)
        res["quick"] = args.quick
        res["machine"] = machine
        results[name] = res
        path = write_result(name + ("-quick" if args.quick else "") + (f"-{args.tag}" if args.tag else ""),
                            {"name": name, **res})
        print(f"   done in {res['seconds']}s -> {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}")
    print_table(results)
    if failed:
        print(f"\nbenchmarks that crashed: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
