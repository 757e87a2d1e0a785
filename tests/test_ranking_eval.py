"""Recall ranking quality on the ranking corpus (tests/ranking_corpus.py), through a real daemon.

The floor is what the ranking achieves minus a small margin; ``bench/eval_ranking.py`` prints the
figures and each query's rank."""

from __future__ import annotations

from typing import Any

import pytest

import ranking_corpus as RC

RECALL_AT_1_FLOOR = 0.85  # what the ranking achieves, minus one query's worth of margin
MRR_FLOOR = 0.90


@pytest.fixture
def corpus(daemon: Any) -> tuple[Any, Any, int]:
    proj, planted = RC.build(daemon.call, daemon.base)
    return daemon, proj, planted


def test_recall_at_1_and_mrr_floor(corpus) -> None:
    daemon, proj, planted = corpus
    res = RC.evaluate(daemon.call, proj, planted)
    assert res["recall_at_1"] >= RECALL_AT_1_FLOOR and res["mrr"] >= MRR_FLOOR, RC.report(res)


def _first(daemon: Any, proj: Any, query: str) -> dict[str, Any]:
    return daemon.call("recall", {"query": query, "cwd": str(proj)})["hits"][0]


def test_planted_decision_first_after_the_query_was_asked_three_times(corpus) -> None:
    """"Postgres" was recalled three times (prompts, ctxlifectl output, a command-not-found run,
    replies quoting the hits, a question): the decision still comes first."""
    daemon, proj, planted = corpus
    assert RC.ECHOED.count("Postgres") == 3
    hit = _first(daemon, proj, "Postgres")
    text = daemon.call("recall", {"query": "", "id": hit["id"]})["text"]
    assert hit["kind"] == "decision" and hit["id"] <= planted and text == RC.PG_DECISION


def test_the_decision_that_replaced_another_comes_first_and_the_old_one_is_marked(corpus) -> None:
    daemon, proj, _planted = corpus
    r = daemon.call("recall", {"query": "session store", "cwd": str(proj)})
    texts = {h["id"]: daemon.call("recall", {"query": "", "id": h["id"]})["text"] for h in r["hits"]}
    new = next(i for i, t in texts.items() if t == RC.PG_DECISION)
    olds = [h for h in r["hits"] if h["kind"] == "decision" and texts[h["id"]] in (RC.REDIS_DECISION, RC.REDIS_REMINDER)]
    assert r["hits"][0]["id"] == new and len(olds) == 2  # the first decision and its near-duplicate
    assert all(h["superseded_by"] == new for h in olds) and f"(superseded by #{new})" in r["markdown"]
