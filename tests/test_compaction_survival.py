"""Compaction survival through the daemon: must-survive set at PreCompact, diff at PostCompact,
re-injection of exactly what the summary lost (once), the per-compaction report, --where, --survival."""

from __future__ import annotations

from typing import Any

from test_engine import Session

DECISION_KEPT = "We decided to use SQLite WAL mode for the cache."
DECISION_LOST = "We decided to shard the uploads bucket by tenant id."
CONSTRAINT_LOST = "The exporter must never write outside the reports folder."
# A long prompt: SessionStart(compact) lists it by a one-line summary that stops before the facts
# at its end, so those are the summary's to keep or the PostCompact re-injection's to deliver.
BACKGROUND = ("The service reads user uploads, resizes images and renders monthly reports; the cache sits between "
              "the image store and the renderer and is shared by the web workers and the nightly batch jobs, "
              "which run on the same host and currently re-read every original from object storage each time.")
SUMMARY = (
    "This session is being continued from a previous conversation. Summary: the user is building a "
    "cache layer; we decided to use SQLite WAL mode for the cache. Current work: the exporter."
)


def scripted(daemon: Any) -> Session:
    s = Session(daemon, sid="abcabcab-2222-3333-4444-555555555555")
    s.usage(40_000)
    s.hook("SessionStart", source="startup")
    s.prompt(f"Build the cache layer. {BACKGROUND} {DECISION_KEPT} {DECISION_LOST} {CONSTRAINT_LOST}")
    s.prompt("let's implement it")
    s.tool("Edit", {"file_path": str(s.project / "cache.py"), "old_string": "a", "new_string": "b"})
    s.fail("Bash", {"command": "pytest tests/test_cache.py::test_eviction"},
           "Exit code 1\nFAILED tests/test_cache.py::test_eviction - AssertionError\n1 failed")
    return s


def test_postcompact_reinjects_exactly_what_the_summary_lost(daemon: Any) -> None:
    """Kept items are not injected again; lost ones arrive once as PostCompact plain text; the report says so."""
    s = scripted(daemon)
    s.hook("PreCompact", trigger="manual", custom_instructions="keep the cache work")
    ctx = s.hook("SessionStart", source="compact")["hookSpecificOutput"]["additionalContext"]
    r = daemon.call("hook", s.base("PostCompact", trigger="manual", compact_summary=SUMMARY))
    text = r["stdout"]
    assert text.startswith("ctxlifed:") and not text.startswith("{")  # plain text route
    # Each must-survive fact the summary lost reaches the model once: in SessionStart(compact)'s
    # list of what the window held, or else in the PostCompact re-injection.
    for lost in ("shard the uploads bucket", "never write outside the reports folder", "test_eviction"):
        assert (lost in ctx) != (lost in text), lost
    assert "never write outside the reports folder" in text  # past the prompt's one-line summary
    assert "WAL mode" not in text  # carried by the summary: not injected again
    rep = daemon.call("compactions", {"session": s.sid})
    assert len(rep["reports"]) == 1
    one = rep["reports"][0]
    assert one["lost"] and set(one["reinjected"]) <= set(one["lost"])
    assert any("WAL" not in line for line in one["lost_lines"])
    assert "re-injected" in rep["markdown"]

    # A second compaction whose summary again omits them: never delivered twice.
    s.hook("PreCompact", trigger="auto", custom_instructions=None)
    s.hook("SessionStart", source="compact")
    again = daemon.call("hook", s.base("PostCompact", trigger="auto", compact_summary=SUMMARY))["stdout"]
    assert "shard the uploads bucket" not in again
    assert len(daemon.call("compactions", {"session": s.sid})["reports"]) == 2


def test_postcompact_without_precompact_still_diffs(daemon: Any) -> None:
    """Claude Code can skip PreCompact: the must-survive set is then recorded at PostCompact."""
    s = scripted(daemon)
    text = daemon.call("hook", s.base("PostCompact", trigger="auto", compact_summary="Summary: nothing much."))["stdout"]
    assert "shard the uploads bucket" in text


def test_status_where_and_survival(daemon: Any) -> None:
    """--where breaks the context down by kind and adds up; --survival lists what a /compact would lose."""
    s = scripted(daemon)
    s.usage(52_000, text="Working on it.")
    s.prompt("status?")
    st = daemon.call("status", {"session": s.sid, "where": True, "survival": True})["sessions"][0]
    assert st["where"]["rows"] and "table" in st["where"]
    assert isinstance(st["survival"]["lines"], list)
