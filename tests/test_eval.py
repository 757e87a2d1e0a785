"""The evaluation suite (eval/run.py) runs in CI: its corpus is well-formed, its matching rules hold, and no
score falls below the committed floors (eval/floors.json).

Rules:
- The floors are today's scores: a change that lowers one fails here; a change that raises one
  should raise its floor in the same commit (``python eval/run.py --json out.json`` prints them).
- The suite replays the corpus once per test run (module fixture) through the real shim and daemon.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("ctxlifed_eval_run", ROOT / "eval" / "run.py")
assert _spec is not None and _spec.loader is not None
ev = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = ev  # dataclasses look their module up
_spec.loader.exec_module(ev)

FLOORS = json.loads((ROOT / "eval" / "floors.json").read_text())


def test_corpus_is_complete_and_well_formed() -> None:
    specs = ev.load_corpus()
    assert len(specs) >= 12
    assert {s["lang"] for s in specs} >= {"en", "zh"}
    names = [s["name"] for s in specs]
    assert len(names) == len(set(names))
    kinds = {"decision", "constraint", "pending", "failing_test"}
    for s in specs:
        assert s["steps"][0]["do"] in ("start", "resume"), s["name"]
        assert all(st["do"] in ev.HOOK_STEPS | {"say"} for st in s["steps"]), s["name"]
        ids = {st["id"] for st in s["steps"] if "id" in st}
        for f in s.get("facts", []):
            assert f["kind"] in kinds and f["keys"], (s["name"], f)
            assert f.get("closes_at") is None or f["closes_at"] in ids, (s["name"], f)
        for st in s["steps"]:
            assert set(st.get("advise", [])) <= set(ev.ADVICE_KINDS), (s["name"], st)
        assert s.get("goals"), s["name"]
    # Every kind of truth is labelled somewhere, and every kind of advice is expected somewhere.
    labelled = {f["kind"] for s in specs for f in s.get("facts", [])}
    assert labelled == kinds
    advised = {k for s in specs for st in s["steps"] for k in st.get("advise", [])}
    assert advised == set(ev.ADVICE_KINDS)


def test_matching_rules() -> None:
    assert ev.matches(["redis", "counters"], "We'll use  Redis for the COUNTERS.")
    assert not ev.matches(["redis", "counters"], "We'll use Redis.")
    assert ev.matches([["test_x"], ["test_a.py"]], "FAILED tests/test_a.py")  # alternatives
    assert ev.matches(["ｃｓｖ 模块"], "我们决定使用标准库 csv 模块")  # NFKC: full-width letters
    assert not ev.matches([], "anything")
    assert ev.advice_kinds("ctxlifed: …\n/compact Keep the work; or /clear") == {"compact", "clear"}
    assert ev.advice_kinds("delegate such reads to a subagent") == {"subagent"}


@pytest.fixture(scope="module")
def totals() -> dict[str, Any]:
    _scores, t = ev.run()
    return t


@pytest.mark.parametrize("metric", sorted(FLOORS["at_least"]))
def test_score_does_not_fall(totals: dict[str, Any], metric: str) -> None:
    assert totals[metric] is not None and totals[metric] >= FLOORS["at_least"][metric], (metric, totals[metric])


@pytest.mark.parametrize("metric", sorted(FLOORS["at_most"]))
def test_count_does_not_rise(totals: dict[str, Any], metric: str) -> None:
    assert totals[metric] <= FLOORS["at_most"][metric], (metric, totals[metric])
