"""Lessons through the daemon: error → fix pairs stored (L2 + lessons.md), hinted once when they return."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

from ctxlifed.core.model import estimate_tokens
from test_engine import Session, eventually

FAIL_OUT = ("Exit code 1\n============ FAILURES ============\n___ test_parse ___\n"
            "E   AssertionError: assert 'a,b' == 'a;b'\n"
            "FAILED tests/test_csv.py::test_parse - AssertionError: assert 'a,b' == 'a;b'\n1 failed in 0.05s")


def pytest_fixed_by_edit(s: Session, tmpdir: str) -> None:
    s.fail("Bash", {"command": f"cd {tmpdir} && pytest -q tests/test_csv.py"}, FAIL_OUT.replace("tests/", f"{tmpdir}/tests/"))
    s.tool("Edit", {"file_path": str(s.project / "csvparse.py"), "old_string": "','", "new_string": "';'"})
    s.tool("Bash", {"command": f"cd {tmpdir} && pytest -q tests/test_csv.py"}, {"stdout": "1 passed in 0.01s", "stderr": ""})


def test_lesson_learned_then_offered_once_in_a_new_session(daemon: Any) -> None:
    """A failing pytest fixed by an edit becomes a lesson; in a second session the same failure (other
    temp path) gets the earlier fix as additionalContext, once, under 150 tokens."""
    s = Session(daemon, sid="1e550000-0000-0000-0000-000000000001")
    s.hook("SessionStart", source="startup")
    pytest_fixed_by_edit(s, "/tmp/pytest-of-u/pytest-12")
    got = daemon.call("lessons", {"cwd": str(s.project)})
    assert len(got["lessons"]) == 1
    les = got["lessons"][0]
    assert "test_parse" in les["signature"] and any("csvparse.py" in f for f in les["fix"])
    eventually(lambda: (s.project / "docs/memory/lessons.md").exists())
    md = (s.project / "docs/memory/lessons.md").read_text()
    assert "- Fix: edit csvparse.py: `','` → `';'`\n" in md
    assert md.endswith("\n") and not md.endswith("\n\n")  # one final newline
    assert s.recall("type:lesson csvparse")["total"] == 1

    s2 = Session(daemon, sid="1e550000-0000-0000-0000-000000000002")
    start = s2.hook("SessionStart", source="startup")["hookSpecificOutput"]["additionalContext"]
    assert "Lessons" in start or "lesson" in start
    out = s2.fail("Bash", {"command": "pytest -q tests/test_csv.py"}, FAIL_OUT.replace("0.05s", "0.09s"))
    ctx = out["hookSpecificOutput"]["additionalContext"]
    assert out["hookSpecificOutput"]["hookEventName"] == "PostToolUseFailure"
    assert "csvparse.py" in ctx and estimate_tokens(ctx) <= 150
    again = s2.fail("Bash", {"command": "pytest -q tests/test_csv.py"}, FAIL_OUT)
    assert "hookSpecificOutput" not in again  # once per signature per session


def test_missing_module_fixed_by_install(daemon: Any) -> None:
    """ModuleNotFoundError fixed by `pip install` is a lesson whose fix names the install command."""
    s = Session(daemon, sid="1e550000-0000-0000-0000-000000000003")
    err = "Exit code 1\nTraceback (most recent call last):\n  File \"/tmp/x/app.py\", line 3, in <module>\n" \
          "    import yaml\nModuleNotFoundError: No module named 'yaml'"
    s.fail("Bash", {"command": "python app.py"}, err)
    s.tool("Bash", {"command": "pip install pyyaml"}, {"stdout": "Successfully installed pyyaml-6.0", "stderr": ""})
    s.tool("Bash", {"command": "python app.py"}, {"stdout": "ok", "stderr": ""})
    les = daemon.call("lessons", {"cwd": str(s.project)})["lessons"]
    assert len(les) == 1 and "yaml" in les[0]["signature"]
    assert any("pip install pyyaml" in f for f in les[0]["fix"])


def test_never_fixed_is_no_lesson(daemon: Any) -> None:
    """A failure that never turns into a success leaves no lesson."""
    s = Session(daemon, sid="1e550000-0000-0000-0000-000000000004")
    s.fail("Bash", {"command": "make deploy"}, "Exit code 2\nerror: permission denied on /srv/app")
    s.tool("Edit", {"file_path": str(s.project / "Makefile"), "old_string": "a", "new_string": "b"})
    assert daemon.call("lessons", {"cwd": str(s.project)})["lessons"] == []


def test_hand_edit_of_lessons_md_is_reconciled(daemon: Any) -> None:
    """Editing lessons.md by hand (here: deleting the entry) is taken back into the store."""
    s = Session(daemon, sid="1e550000-0000-0000-0000-000000000005")
    pytest_fixed_by_edit(s, "/tmp/a")
    path = s.project / "docs/memory/lessons.md"
    eventually(path.exists)
    r = subprocess.run([sys.executable, "-m", "ctxlifed.cli.main", "lessons", "--json"], env=daemon.env,
                       capture_output=True, text=True, timeout=30, cwd=str(s.project))
    assert r.returncode == 0 and len(json.loads(r.stdout)) == 1
    path.write_text("# Lessons\n")
    eventually(lambda: daemon.call("lessons", {"cwd": str(s.project)})["lessons"] == [], timeout=30)


def _resolve(daemon: Any, n: int) -> dict[str, Any]:
    """``recall --id n`` through the daemon: the item's kind, summary and text."""
    got = daemon.call("recall", {"id": n})
    return {"kind": got["hits"][0]["kind"], "summary": got["hits"][0]["summary"], "text": got["text"]}


def test_every_printed_id_resolves_to_the_item_it_describes(daemon: Any) -> None:
    """Each #N a lesson, its hint, a ledger page or decisions.md prints is an archive id: recall --id N
    (the daemon's read path, and once the CLI) gives the item described — the failing run, the edit
    that fixed it, the passing run, the lesson, a decision, a step of the phase."""
    s = Session(daemon, sid="1e550000-0000-0000-0000-000000000006")
    s.hook("SessionStart", source="startup")
    s.prompt("The csv parser breaks on our exports. We decided to use semicolons as the CSV delimiter.")
    s.tool("Read", {"file_path": str(s.project / "README.md")}, {"file": {"content": "readme"}})
    for i in range(3):  # events that archive nothing: event ids and archive ids part ways
        s.hook("PreToolUse", tool_name="Bash", tool_input={"command": "pytest -q"}, tool_use_id=f"toolu_p{i}")
    pytest_fixed_by_edit(s, "/tmp/a")
    les = daemon.call("lessons", {"cwd": str(s.project)})["lessons"][0]
    failed, fix, passed = (_resolve(daemon, n) for n in les["evidence"])
    assert failed["kind"] == "test_result" and "FAILED" in failed["text"] and "test_parse" in failed["text"]
    assert fix["kind"] == "code_change" and "csvparse.py" in fix["summary"]
    assert passed["kind"] == "test_result" and "1 passed" in passed["text"]
    assert les["fix"] == ["edit csvparse.py: `','` → `';'`"]  # the change itself, not just the file

    # The lesson's own archive item prints the same ids.
    item = s.recall("type:lesson csvparse")["hits"][0]
    text = _resolve(daemon, item["id"])["text"]
    assert f"Evidence: {' '.join(f'#{n}' for n in les['evidence'])} " in text

    # The hint in a later session points at the lesson's item; the CLI resolves it.
    s2 = Session(daemon, sid="1e550000-0000-0000-0000-000000000007")
    ctx = s2.fail("Bash", {"command": "pytest -q tests/test_csv.py"}, FAIL_OUT)["hookSpecificOutput"]["additionalContext"]
    m = re.search(r"ctxlifectl recall --id (\d+)$", ctx)
    assert m and int(m.group(1)) == item["id"]
    assert "> Fixed then by: edit csvparse.py: `','` → `';'`" in ctx.splitlines()
    r = subprocess.run([sys.executable, "-m", "ctxlifed.cli.main", "recall", "--id", m.group(1)], env=daemon.env,
                       capture_output=True, text=True, timeout=30, cwd=str(s.project))
    assert r.returncode == 0 and r.stdout.startswith(f"# #{item['id']} · lesson") and "csvparse.py" in r.stdout

    # Ledger page and decision log: every #N is an item of this session, as described.
    # Read -> failing run -> edit leaves planning for implementation (phase 1 -> 2: the prompt asks for no fix,
    # which would start implementation at once); testing closes phase 2.
    daemon.call("phase.set", {"session": s.sid, "phase": "testing"})
    mem = s.project / "docs" / "memory"
    eventually(lambda: (mem / "decisions.md").exists() and any((mem / "sessions" / s.sid).glob("phase-2-*.md")))
    pages = [next((mem / "sessions" / s.sid).glob(f"phase-{n}-*.md")).read_text() for n in (1, 2)]
    page = pages[0]
    done = [ln for pg in pages for ln in pg.split("## What was done\n\n", 1)[1].split("\n\n", 1)[0].splitlines()]
    shown = [(m.group(1), int(m.group(2))) for ln in done if (m := re.match(r"- (.*) \[L2 #(\d+)\]$", ln))]
    assert len(shown) == len(done) >= 4
    shown = list(dict.fromkeys(shown))  # the switching edit closes phase 1 and opens phase 2: on both pages
    items = [_resolve(daemon, n) for _s, n in shown]
    assert [summary for summary, _n in shown] == [" ".join(it["summary"].split()) for it in items]
    assert [it["kind"] for it in items] == ["tool", "test_result", "code_change", "test_result"]  # in time order
    tests = "".join(pg.split("## Test results\n\n", 1)[1].split("\n\n", 1)[0] for pg in pages)
    assert tests.index("FAILED") < tests.index("passed")  # in time order too
    refs = [int(x) for x in re.findall(r"#(\d+)", page.split("## L2 references", 1)[1])]
    assert refs and all(_resolve(daemon, n)["kind"] in ("code_change", "tool", "test_result", "error", "assistant")
                        for n in refs)
    dec = (mem / "decisions.md").read_text()
    ids = [int(x) for x in re.findall(r"L2 #(\d+)", dec)]
    assert ids and all("semicolons" in _resolve(daemon, n)["text"] for n in ids)
