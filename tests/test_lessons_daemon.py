"""Lessons through the daemon: error → fix pairs stored (L2 + lessons.md), hinted once when they return."""

from __future__ import annotations

import json
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
    assert "csvparse.py" in (s.project / "docs/memory/lessons.md").read_text()
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
