"""Reliability harness: tiers, the figures reporter, and the summary table.

Rules:
- Two tiers. Fast tests run in ``make test`` (the default pytest run collects ``tests/``). Long ones
  (soaks, many trials) are marked ``@pytest.mark.slow`` and are skipped unless
  ``CTXLIFED_RELIABILITY=long`` (``make reliability`` sets it and runs this whole folder).
- Every test reports what it measured through the ``figures`` fixture: one JSON line per figure
  (``test_id, metric, value, unit, n, tier, run, commit, platform, ts``) appended to
  ``.cache/reliability.jsonl`` in the checkout (git ignores it: a test run never writes into the
  source tree; override: ``CTXLIFED_RELIABILITY_RESULTS``). A figure is
  recorded before the test's assertions, so a failing run still reports its numbers.
- At the end of the session a summary table of this run's figures is printed.
- Seeds are printed with the figures (``seed``), so a failing random schedule can be replayed with
  ``CTXLIFED_RELIABILITY_SEED``.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
LONG = os.environ.get("CTXLIFED_RELIABILITY", "").strip().lower() == "long"
TIER = "long" if LONG else "fast"
RESULTS = Path(os.environ.get("CTXLIFED_RELIABILITY_RESULTS", "") or ROOT / ".cache" / "reliability.jsonl")
RUN_ID = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"
_HERE = Path(__file__).resolve().parent
_RECORDED: list[dict[str, Any]] = []


def _commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=5, check=False)
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5, check=False)
        return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


COMMIT = _commit()
PLATFORM = f"{platform.system()} {platform.release()} {platform.machine()} py{platform.python_version()} cpus={os.cpu_count()}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if LONG:
        return
    skip = pytest.mark.skip(reason="long reliability run: set CTXLIFED_RELIABILITY=long (make reliability)")
    for item in items:
        if item.get_closest_marker("slow") and _HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(skip)


class Figures:
    """``figures.record(metric, value, unit, n=..., **extra)`` appends one JSON line."""

    def __init__(self, test_id: str) -> None:
        self.test_id = test_id

    def record(self, metric: str, value: Any, unit: str = "", *, n: int | None = None, **extra: Any) -> Any:
        row = {"test_id": self.test_id, "metric": metric, "value": value, "unit": unit, "n": n, "tier": TIER,
               "run": RUN_ID, "commit": COMMIT, "platform": PLATFORM, "ts": round(time.time(), 3)}
        if extra:
            row["extra"] = extra
        _RECORDED.append(row)
        try:
            RESULTS.parent.mkdir(parents=True, exist_ok=True)
            with open(RESULTS, "a", encoding="utf-8") as f:
                f.write(json.dumps(row, default=str) + "\n")
        except OSError:
            pass
        return value

    __call__ = record


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Iterator[Figures]:
    name = request.node.nodeid.split("tests/reliability/", 1)[-1]
    yield Figures(name)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e6 else f"{v:.3e}"
    if isinstance(v, dict):
        return ",".join(f"{k}:{_fmt(x)}" for k, x in v.items())
    return str(v)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if not _RECORDED:
        return
    tr = terminalreporter
    tr.section(f"reliability figures ({TIER} tier, run {RUN_ID}, {COMMIT})")
    w_test = min(60, max(len(r["test_id"]) for r in _RECORDED))
    w_metric = max(len(r["metric"]) for r in _RECORDED)
    tr.write_line(f"{'test':<{w_test}}  {'metric':<{w_metric}}  value")
    last = None
    for r in _RECORDED:
        tid = r["test_id"] if r["test_id"] != last else ""
        last = r["test_id"]
        if len(tid) > w_test:
            tid = "…" + tid[-(w_test - 1):]
        n = f" (n={r['n']})" if r["n"] is not None else ""
        unit = f" {r['unit']}" if r["unit"] else ""
        tr.write_line(f"{tid:<{w_test}}  {r['metric']:<{w_metric}}  {_fmt(r['value'])}{unit}{n}")
    tr.write_line(f"(appended to {RESULTS})")


@pytest.fixture
def rdaemon(short_tmp: Path) -> Iterator[Any]:
    """Factory of :class:`RDaemon` in one private temp dir; every process is killed at the end."""
    from ._harness import make_daemon

    made: list[Any] = []

    def make(**env: str) -> Any:
        d = make_daemon(short_tmp, **env)
        made.append(d)
        return d

    yield make
    for d in made:
        if d.proc is not None and d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait()
