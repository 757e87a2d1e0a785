"""Recall ranking quality: recall@1 and MRR over the ranking corpus (tests/ranking_corpus.py).

A real daemon is started in a private temp folder, the corpus is written through its ``hook``
method (several sessions, echoes of repeated recalls, near-duplicates, a reversed decision, English
and Chinese), and each query of the corpus runs through its ``recall`` method. Prints the figures
and each query's rank; ``--json`` prints them as JSON. ``tests/test_ranking_eval.py`` holds the floor.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from _common import Daemon, call, rmtree, short_tmp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import ranking_corpus  # noqa: E402


def run() -> dict:
    base = short_tmp("clrank-")
    try:
        with Daemon(base) as d:
            def rpc(method: str, params: dict) -> object:
                return call(d.socket, method, params)

            return ranking_corpus.evaluate(rpc, *ranking_corpus.build(rpc, base))
    finally:
        rmtree(base)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    res = run()
    print(json.dumps(res, indent=2, ensure_ascii=False) if ap.parse_args().json else ranking_corpus.report(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
