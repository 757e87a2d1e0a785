"""Markdown tables from bench/results/*.json, for bench/RESULTS.md.

    bench/report.py after                 one run: every row and target
    bench/report.py before after          two runs side by side (p50 / p95 / p99 of each)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
ORDER = ["shim", "hook", "daemon", "recall", "transcript", "memory"]


def load(tag: str) -> dict[str, dict]:
    out = {}
    for name in ORDER:
        p = RESULTS / f"{name}-{tag}.json"
        if p.exists():
            out[name] = json.loads(p.read_text())
    return out


def cell(d: object) -> str:
    if isinstance(d, dict):
        return " / ".join(f"{d.get(k, '')}" for k in ("p50", "p95", "p99"))
    return str(d)


def n_of(d: object) -> str:
    return str(d.get("n", "")) if isinstance(d, dict) else ""


def one(tag: str) -> None:
    runs = load(tag)
    print("| metric | N | p50 / p95 / p99 (or value) | unit | note |")
    print("|---|---|---|---|---|")
    for name in ORDER:
        for metric, d, unit, note in runs.get(name, {}).get("rows", []):
            print(f"| {metric} | {n_of(d)} | {cell(d)} | {unit} | {note.replace('|', '/')} |")
    print()
    print("| target | value | limit | result |")
    print("|---|---|---|---|")
    for name in ORDER:
        for t in runs.get(name, {}).get("targets", []):
            print(f"| {t['target']} | {t['value']}{t['unit']} | {t['op']} {t['limit']}{t['unit']} |"
                  f" {'PASS' if t['pass'] else '**MISS**'} |")


def two(a: str, b: str) -> None:
    ra, rb = load(a), load(b)
    print(f"| metric | unit | {a}: p50 / p95 / p99 | {b}: p50 / p95 / p99 |")
    print("|---|---|---|---|")
    for name in ORDER:
        rows_b = {r[0]: r for r in rb.get(name, {}).get("rows", [])}
        seen = set()
        for metric, d, unit, _note in ra.get(name, {}).get("rows", []):
            seen.add(metric)
            other = rows_b.get(metric)
            print(f"| {metric} | {unit} | {cell(d)} | {cell(other[1]) if other else '-'} |")
        for metric, r in rows_b.items():
            if metric not in seen:
                print(f"| {metric} | {r[2]} | - | {cell(r[1])} |")
    print()
    print(f"| target | {a} | {b} | limit |")
    print("|---|---|---|---|")
    ta = {t["target"]: t for n in ORDER for t in ra.get(n, {}).get("targets", [])}
    tb = {t["target"]: t for n in ORDER for t in rb.get(n, {}).get("targets", [])}
    for k in list(ta) + [k for k in tb if k not in ta]:
        x, y = ta.get(k), tb.get(k)
        fx = f"{x['value']}{x['unit']} {'PASS' if x['pass'] else 'MISS'}" if x else "-"
        fy = f"{y['value']}{y['unit']} {'PASS' if y['pass'] else '**MISS**'}" if y else "-"
        lim = (x or y)
        print(f"| {k} | {fx} | {fy} | {lim['op']} {lim['limit']}{lim['unit']} |")


if __name__ == "__main__":
    if len(sys.argv) == 2:
        one(sys.argv[1])
    elif len(sys.argv) == 3:
        two(sys.argv[1], sys.argv[2])
    else:
        print(__doc__)
        sys.exit(2)
