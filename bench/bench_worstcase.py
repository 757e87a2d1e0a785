"""Worst-case inputs of the pure cores on the hook path: how long they take (the tests only check
what they compute on the same inputs).

    .venv/bin/python bench/run.py worstcase [--quick]

Rows: redacting the 10 MB text of tests/test_core_redact.py (``ten_megabytes``: ordinary code with
planted secrets, one non-ASCII character), CPU seconds; the error signature of each adversarial text of
bench/_adversarial.py (long words, many lines: where a regex would go quadratic), CPU ms per text; the digest
of each of those texts and of the digest's own shapes (``DIGEST_TEXTS``), as every kind, CPU ms per text.
CPU time (``time.process_time``) so a loaded machine does not inflate the figure with waiting.
Targets: 10 MB redacted in <= 1 s of CPU (pro rata with --quick's 1 MB); every adversarial signature and digest <= 100 ms of CPU.
"""

from __future__ import annotations

import runpy
import time
from pathlib import Path
from typing import Any

from _common import dist, target

ROOT = Path(__file__).resolve().parent.parent


def _cpu(fn: Any, *args: Any, **kw: Any) -> float:
    t0 = time.process_time()
    fn(*args, **kw)
    return time.process_time() - t0


def run(quick: bool, log: Any = print) -> dict[str, Any]:
    from ctxlifed.core.digest import KINDS, digest
    from ctxlifed.core.lessons import signature
    from ctxlifed.core.redact import redact

    adversarial = runpy.run_path(str(ROOT / "bench" / "_adversarial.py"))
    texts = adversarial["ERROR_TEXTS"]
    text, _, _ = runpy.run_path(str(ROOT / "tests" / "test_core_redact.py"))["ten_megabytes"]()
    if quick:
        text = text[:1_000_000]
    rounds = 2 if quick else 5
    log(f"  redact: {len(text) / 1e6:.0f} MB x {rounds}; signature: {len(texts)} adversarial texts x {rounds}")
    redact_s = [_cpu(redact, text) for _ in range(rounds)]
    found = redact(text)[1]
    worst_ms, worst_name = 0.0, ""
    per_text = []
    for t in texts:
        ms = min(_cpu(signature, t, tool="Bash", command="pytest") for _ in range(rounds)) * 1000
        per_text.append(ms)
        if ms > worst_ms:
            worst_ms, worst_name = ms, t[:24].replace("\n", "\\n")
    digest_ms, digest_worst = [], ("", "")
    for t in texts + adversarial["DIGEST_TEXTS"]:
        for kind in KINDS:
            ms = min(_cpu(digest, t, kind=kind, archive_id=1) for _ in range(rounds)) * 1000
            if not digest_ms or ms > max(digest_ms):
                digest_worst = (kind, t[:24].replace("\n", "\\n"))
            digest_ms.append(ms)
    size = f"{len(text) / 1e6:.0f} MB"
    rows = [
        [f"worstcase.redact {size}", dist(redact_s), "s CPU", f"{found} secrets redacted; N = rounds"],
        ["worstcase.signature adversarial", dist(per_text), "ms CPU", f"min of {rounds} per text; worst {worst_name!r}"],
        ["worstcase.digest adversarial", dist(digest_ms), "ms CPU",
         f"every kind; min of {rounds} per text; worst {digest_worst[0]} {digest_worst[1]!r}"],
    ]
    targets = [target(f"redact {size} (CPU, p50)", dist(redact_s)["p50"], round(len(text) / 10_000_000, 2), unit=" s"),
               target("adversarial signature, worst text (CPU)", worst_ms, 100, unit=" ms"),
               target("adversarial digest, worst text and kind (CPU)", max(digest_ms), 100, unit=" ms")]
    return {"rows": rows, "targets": targets,
            "data": {"redact_s": redact_s, "signature_ms": per_text, "digest_ms": digest_ms}}
