"""Pending items through the real daemon: each closing route, `ctxlifectl pending`, staleness, and
closed or stale items left out of what is injected (SessionStart briefing, /compact focus line)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from test_engine import Session, eventually


def _pending(daemon: Any, s: Session, **kw: Any) -> dict[str, Any]:
    return daemon.call("pending", {"cwd": str(s.project), **kw})


def _open(daemon: Any, s: Session) -> dict[str, str]:
    """Open items: text -> '#N'."""
    return {i["text"]: i["id"] for i in _pending(daemon, s)["items"] if i["status"] == "open"}


def _closed(daemon: Any, s: Session) -> dict[str, str | None]:
    return {i["text"]: i["resolution"] for i in _pending(daemon, s, all=True)["items"] if i["status"] != "open"}


def test_each_route_closes_its_item_and_only_it(daemon: Any) -> None:
    s = Session(daemon, sid="9e000000-0000-0000-0000-000000000001")
    s.prompt("Add a rate limiter to the upload endpoint.\n"
             "- [ ] add the --json flag to the status command\n"
             "TODO: fix tests/test_limit.py::test_burst\n"
             "Open question: which store should hold the buckets?\n"
             "Next step: document the limiter settings in the README.\n"
             "TODO: handle retries in fetch_remote\n"
             "下一步：补充中文文档的限流说明\n"
             "Still need to benchmark the limiter under load.")
    assert len(_open(daemon, s)) == 7

    # TodoWrite marks a todo completed.
    s.tool("TodoWrite", {"todos": [{"content": "Add the --json flag to the status command", "status": "completed"}]})
    # A later decision settles the open choice.
    s.prompt("We decided to use SQLite as the store for the buckets.")
    # The failing test it names passes.
    s.fail("Bash", {"command": "pytest -q tests/test_limit.py::test_burst"},
           "Exit code 1\nFAILED tests/test_limit.py::test_burst - assert 3 == 2\n1 failed in 0.02s")
    s.tool("Bash", {"command": "pytest -q tests/test_limit.py::test_burst"}, {"stdout": "1 passed in 0.01s", "stderr": ""})
    # Its TODO line leaves the file.
    s.tool("Edit", {"file_path": str(s.project / "fetch.py"),
                    "old_string": "    # TODO: handle retries in fetch_remote\n    return get(url)",
                    "new_string": "    return retry(get, url)"})
    # The user says it is done (a question or "not yet" closes nothing).
    s.prompt("Is the benchmark done? The README section isn't done yet.")
    assert len(_open(daemon, s)) == 3
    s.prompt("The limiter settings are documented in the README now, that part is done. 中文文档的限流说明已完成。")

    closed = _closed(daemon, s)
    assert closed == {
        "add the --json flag to the status command": "todo",
        "Open question: which store should hold the buckets?": "decision",
        "TODO: fix tests/test_limit.py::test_burst": "test",
        "TODO: handle retries in fetch_remote": "todo_line",
        "Next step: document the limiter settings in the README.": "user",
        "下一步：补充中文文档的限流说明": "user",
    }
    left = _open(daemon, s)
    assert list(left) == ["Still need to benchmark the limiter under load."]

    # ctxlifectl pending lists it with the #N it is shown with; --resolve N closes it.
    ref = left["Still need to benchmark the limiter under load."]
    run = lambda *a: subprocess.run([sys.executable, "-m", "ctxlifed.cli.main", "pending", *a], env=daemon.env,
                                    capture_output=True, text=True, timeout=30, cwd=str(s.project))
    r = run()
    assert r.returncode == 0 and f"- #{ref} Still need to benchmark the limiter under load." in r.stdout
    assert f"pending --resolve N" in r.stdout
    r = run("--resolve", str(ref), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["resolved"] == ref
    assert _open(daemon, s) == {} and _closed(daemon, s)["Still need to benchmark the limiter under load."] == "ctl"
    assert run("--resolve", "999999").returncode == 1  # no such item: a clear error

    # The id shown is the one `recall --id` resolves too.
    assert "benchmark the limiter" in daemon.call("recall", {"id": ref})["text"]


def test_closed_and_stale_items_leave_the_briefing_and_the_focus_line(daemon_factory: Any) -> None:
    daemon = daemon_factory(CTXLIFED_PENDING_STALE_SESSIONS="2", CTXLIFED_PENDING_STALE_PHASES="0").start()
    s = Session(daemon, sid="9e000000-0000-0000-0000-000000000002")
    s.prompt("TODO: wire the watcher into the daemon\nTODO: write the upgrade notes")
    ref = _open(daemon, s)["TODO: write the upgrade notes"]
    daemon.call("pending", {"cwd": str(s.project), "resolve": ref})

    s2 = Session(daemon, sid="9e000000-0000-0000-0000-000000000003")
    ctx = s2.hook("SessionStart", source="startup")["hookSpecificOutput"]["additionalContext"]
    wire = _open(daemon, s2)["TODO: wire the watcher into the daemon"]
    assert f"TODO: wire the watcher into the daemon (L2 #{wire})" in ctx
    assert "upgrade notes" not in ctx  # closed: never injected again

    # Two later sessions without touching it: stale, listed apart, not injected as current.
    s2.prompt("Look at the logs.")
    s3 = Session(daemon, sid="9e000000-0000-0000-0000-000000000004")
    s3.prompt("Something else entirely.")
    items = _pending(daemon, s3)["items"]
    assert [(i["text"], i["stale"]) for i in items] == [("TODO: wire the watcher into the daemon", True)]
    assert "Stale, untouched for a while (1):" in _pending(daemon, s3)["markdown"]
    s4 = Session(daemon, sid="9e000000-0000-0000-0000-000000000005")
    start = s4.hook("SessionStart", source="startup")
    assert "wire the watcher" not in json.dumps(start)

    # Restating it makes it current again.
    s4.prompt("TODO: wire the watcher into the daemon")
    assert [i["stale"] for i in _pending(daemon, s4)["items"]] == [False]


def test_a_ticked_checkbox_in_the_ledger_page_closes_the_item(daemon: Any) -> None:
    s = Session(daemon, sid="9e000000-0000-0000-0000-000000000006")
    s.prompt("Plan the migration.\n- [ ] pick the schema version table name\n- [ ] write the rollback script")
    daemon.call("phase.set", {"session": s.sid, "phase": "implementation"})
    mem = s.project / "docs" / "memory" / "sessions" / s.sid
    eventually(lambda: any(mem.glob("phase-1-*.md")))
    page = next(mem.glob("phase-1-*.md"))
    text = page.read_text()
    assert "- [ ] write the rollback script" in text
    page.write_text(text.replace("- [ ] write the rollback script", "- [x] write the rollback script"))
    eventually(lambda: _closed(daemon, s).get("write the rollback script") == "ledger", timeout=30)
    assert list(_open(daemon, s)) == ["pick the schema version table name"]


def test_todowrite_todos_are_pending_items_until_completed(daemon: Any) -> None:
    s = Session(daemon, sid="9e000000-0000-0000-0000-000000000007")
    todos = [{"content": "Add the bucket store", "status": "in_progress", "activeForm": "Adding the bucket store"},
             {"content": "Wire the limiter into upload()", "status": "pending", "activeForm": "Wiring"}]
    s.tool("TodoWrite", {"todos": todos})
    assert set(_open(daemon, s)) == {"Add the bucket store", "Wire the limiter into upload()"}
    todos[0]["status"], todos[1]["status"] = "completed", "in_progress"
    s.tool("TodoWrite", {"todos": todos})
    assert list(_open(daemon, s)) == ["Wire the limiter into upload()"]
    assert _closed(daemon, s) == {"Add the bucket store": "todo"}


def test_what_settles_a_choice_closes_it_through_the_daemon(daemon: Any) -> None:
    """An assistant message saying "X settles Y" closes the item about Y (read from the transcript at the
    next event), a decision on a "where X lives" choice closes it, and the user's answer to an open
    choice closes it; the goal leaves the settled TODO to its own item."""
    s = Session(daemon, sid="9e000000-0000-0000-0000-000000000009")
    s.usage(20_000)
    s.prompt("Split PaymentService into a Gateway and a Ledger. Naming is not decided yet. "
             "TODO: decide where the counters live. TODO: where failed deliveries go (a dead letter queue?).")
    assert len(_open(daemon, s)) == 3
    s.usage(24_000, text="The names PaymentGateway and PaymentLedger settle the naming. We'll use Redis for the"
                         " counters.")
    s.hook("Stop", stop_hook_active=False)
    s.prompt("Let's implement it: failed deliveries go to a dead letter table.")
    assert _closed(daemon, s) == {
        "Naming is not decided yet.": "settled",
        "TODO: decide where the counters live.": "decision",
        "TODO: where failed deliveries go (a dead letter queue?).": "answer",
    }
    s.hook("PreCompact", trigger="manual", custom_instructions="")
    lost = daemon.call("hook", s.base("PostCompact", trigger="manual", compact_summary=""))["stdout"]
    assert "- Goal: Split PaymentService into a Gateway and a Ledger.\n" in lost
    assert "Pending" not in lost and "Naming" not in lost and "deliveries" not in lost  # closed: gone
