"""Tests for ctxlifed.core.survival: the simulator of what a /compact keeps."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from ctxlifed.core import accounting as A
from ctxlifed.core.survival import (
    FILE_MAX_TOKENS,
    SKILL_BUDGET,
    Instruction,
    SurvivalReport,
    classify_instruction,
    display_path,
    reattach_skills,
    recent_files,
    simulate,
)
from ctxlifed.core.transcript import FileTouch, SkillUse, TranscriptCursor, feed

RUNS = Path(__file__).resolve().parent / "fixtures" / "claude-code" / "runs"
SRC = Path(__file__).resolve().parents[1] / "src" / "ctxlifed" / "core"
ROOT = "/home/u/proj"

pytestmark = pytest.mark.filterwarnings("error")


def _skills(n: int, tokens: int = 4000) -> list[SkillUse]:
    return [SkillUse(name=f"s{i}", tokens=tokens, ts=1000.0 + i) for i in range(n)]


def _read(path: str, tokens: int, ts: float, op: str = "read") -> FileTouch:
    return FileTouch(path=path, tokens=tokens, ts=ts, op=op)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- skills


def test_eight_skills_of_4k_two_oldest_dropped() -> None:
    """8 skills x 4,000 tokens: the 6 newest fit the 25,000 budget (24,000), the 2 oldest are dropped."""
    r = simulate(skills=_skills(8), now=2000.0)
    assert [f.name for f in r.kept if f.kind == "skill"] == ["s7", "s6", "s5", "s4", "s3", "s2"]
    assert r.dropped_skills() == ["s1", "s0"]
    assert [f.fate for f in r.lost] == ["dropped", "dropped"]
    assert sum(f.kept_tokens for f in r.kept) == 24_000
    assert r.lines[1:] == [
        "skill s1 (4,000 tokens) would be dropped: over the 25,000-token skill budget",
        "skill s0 (4,000 tokens) would be dropped: over the 25,000-token skill budget",
    ]
    assert r.at == 2000.0


def test_reinvoked_skill_counts_its_latest_invocation() -> None:
    """A skill invoked first and again last counts once, as the newest, with its latest size."""
    uses = [SkillUse("old", 4000, 1.0)] + [SkillUse(f"s{i}", 4000, 10.0 + i) for i in range(6)]
    uses.append(SkillUse("old", 3000, 100.0))
    fates = reattach_skills(uses)
    assert [(f.name, f.tokens, f.fate) for f in fates] == [
        ("old", 3000, "kept"),
        ("s5", 4000, "kept"),
        ("s4", 4000, "kept"),
        ("s3", 4000, "kept"),
        ("s2", 4000, "kept"),
        ("s1", 4000, "kept"),
        ("s0", 4000, "dropped"),
    ]


def test_big_skill_is_cut_to_5000_and_budget_counts_the_cut() -> None:
    """Each skill is cut to its first 5,000 tokens; 6 skills of 6,000 -> 5 kept at 5,000, the oldest dropped."""
    r = simulate(skills=_skills(6, 6000))
    assert [(f.name, f.fate, f.kept_tokens) for f in r.kept] == [
        (f"s{i}", "truncated", 5000) for i in (5, 4, 3, 2, 1)
    ]
    assert r.dropped_skills() == ["s0"]
    assert r.kept_tokens == SKILL_BUDGET
    assert "skill s5 (6,000 tokens) would be cut to its first 5,000 tokens" in r.lines


def test_skill_budget_is_filled_greedily_newest_first() -> None:
    """A skill that does not fit is dropped whole; an older, smaller one can still fit."""
    uses = [SkillUse("small", 1000, 1.0), SkillUse("mid", 2000, 2.0)] + [
        SkillUse(f"s{i}", 4000, 10.0 + i) for i in range(6)
    ]
    fates = {f.name: f.fate for f in reattach_skills(uses)}
    assert fates == {**{f"s{i}": "kept" for i in range(6)}, "mid": "dropped", "small": "kept"}


# --------------------------------------------------------------------------- files


def test_7k_file_comes_back_as_path_only() -> None:
    """A file over 5,000 tokens comes back as a path only (and still takes one of the 5 places)."""
    r = simulate(files=[_read(f"{ROOT}/src/big.py", 7000, 10.0), _read(f"{ROOT}/src/small.py", 300, 9.0)],
                 project_root=ROOT)  # fmt: skip
    assert [(f.name, f.fate) for f in r.kept] == [(f"{ROOT}/src/big.py", "path_only"), (f"{ROOT}/src/small.py", "kept")]
    assert r.lost == []
    assert r.lines[1:] == ["src/big.py (7,000 tokens) comes back as a path only"]
    assert r.kept[0].kept_tokens < 50 and r.lost_tokens == 7000 - r.kept[0].kept_tokens


def test_six_files_read_the_oldest_is_lost() -> None:
    """Six distinct files: the five most recent come back, the oldest is lost."""
    files = [_read(f"/p/f{i}.py", 100 * (i + 1), float(i)) for i in range(6)]
    r = simulate(files=files)
    assert r.files_back() == ["/p/f5.py", "/p/f4.py", "/p/f3.py", "/p/f2.py", "/p/f1.py"]
    assert [(f.name, f.fate) for f in r.lost] == [("/p/f0.py", "lost")]
    assert r.lines[1:] == ["/p/f0.py (100 tokens) would be lost: not among the 5 most recent files"]


def test_file_read_several_times_counts_once_at_its_latest_touch() -> None:
    """Re-reading moves a file to the front; an edit moves it too but keeps the size of its last read."""
    touches = [
        _read("/p/a.py", 6000, 1.0),
        *[_read(f"/p/f{i}.py", 100, 2.0 + i) for i in range(5)],
        _read("/p/a.py", 40, 20.0, op="edit"),
        _read("/p/f0.py", 200, 21.0),
    ]
    assert recent_files(touches)[:3] == [("/p/f0.py", 200, 21.0), ("/p/a.py", 6000, 20.0), ("/p/f4.py", 100, 6.0)]
    r = simulate(files=touches)
    assert [(f.name, f.fate) for f in r.kept][:2] == [("/p/f0.py", "kept"), ("/p/a.py", "path_only")]
    assert [f.name for f in r.lost] == ["/p/f1.py"]


def test_file_only_edited_uses_its_largest_edit() -> None:
    """A file never read or written whole uses its largest edit as the size estimate."""
    assert recent_files([_read("/p/x.py", 30, 1.0, "edit"), _read("/p/x.py", 80, 2.0, "edit")]) == [("/p/x.py", 80, 2.0)]


def test_exactly_5000_tokens_comes_back_whole() -> None:
    """The limit is inclusive: 5,000 tokens comes back whole, 5,001 as a path."""
    r = simulate(files=[_read("/a", FILE_MAX_TOKENS, 2.0), _read("/b", FILE_MAX_TOKENS + 1, 1.0)])
    assert [f.fate for f in r.kept] == ["kept", "path_only"]


# --------------------------------------------------------------------------- instructions


def test_path_scoped_rule_and_nested_claude_md_lost_root_kept() -> None:
    """Root CLAUDE.md, unscoped rules, auto memory and user files survive; path rules and nested are lost."""
    ins = [
        (f"{ROOT}/CLAUDE.md", "root", 1800),
        Instruction(f"{ROOT}/.claude/rules/style.md", "unscoped_rule", 200),
        (f"{ROOT}/.claude/rules/api.md", "path_rule", 380),
        (f"{ROOT}/sub/CLAUDE.md", "nested", 90),
        ("/home/u/.claude/projects/-home-u-proj/memory/MEMORY.md", "auto_memory", 700),
        ("/home/u/.claude/CLAUDE.md", "user", 320),
    ]
    r = simulate(instructions=ins, project_root=ROOT)
    assert [f.name for f in r.kept] == [
        f"{ROOT}/CLAUDE.md",
        f"{ROOT}/.claude/rules/style.md",
        "/home/u/.claude/projects/-home-u-proj/memory/MEMORY.md",
        "/home/u/.claude/CLAUDE.md",
    ]
    assert [(f.name, f.fate) for f in r.lost] == [(f"{ROOT}/.claude/rules/api.md", "lost"), (f"{ROOT}/sub/CLAUDE.md", "lost")]
    assert r.lines[1:] == [
        ".claude/rules/api.md (path-scoped) lost until a matching file is read",
        "sub/CLAUDE.md (nested) lost until a file in its directory is read",
    ]
    assert r.lines[0] == (
        "A /compact now keeps the system prompt and output style; 4 of 6 instruction files (re-read from disk), "
        "0 of 0 files, 0 of 0 skills (3,020 tokens re-attached, 470 not)."
    )


@pytest.mark.parametrize(
    ("path", "memory_type", "load_reason", "globs", "kind"),
    [
        (f"{ROOT}/CLAUDE.md", "Project", "session_start", None, "root"),
        (f"{ROOT}/CLAUDE.md", "Project", "compact", None, "root"),
        (f"{ROOT}/CLAUDE.local.md", "Local", "session_start", None, "root"),
        ("/home/u/CLAUDE.md", "Project", "session_start", None, "root"),  # an ancestor directory
        (f"{ROOT}/docs/extra.md", "Project", "include", None, "root"),
        (f"{ROOT}/.claude/rules/style.md", "Project", "session_start", None, "unscoped_rule"),
        (f"{ROOT}/.claude/rules/api.md", "Project", "path_glob_match", ["src/api/**"], "path_rule"),
        (f"{ROOT}/.claude/rules/api.md", "Project", None, ["src/api/**"], "path_rule"),
        (f"{ROOT}/src/CLAUDE.md", "Project", "nested_traversal", None, "nested"),
        (f"{ROOT}/src/CLAUDE.md", "Project", None, None, "nested"),  # transcript attachment, no reason
        ("/home/u/.claude/CLAUDE.md", "User", "session_start", None, "user"),
        ("/etc/claude-code/CLAUDE.md", "Managed", "session_start", None, "user"),
        ("/home/u/.claude/projects/-home-u-proj/memory/MEMORY.md", "User", "session_start", None, "auto_memory"),
        (f"{ROOT}/.claude/CLAUDE.md", "Project", None, None, "root"),
    ],
)
def test_classify_instruction(path: str, memory_type: str, load_reason: str | None, globs: list[str] | None,
                              kind: str) -> None:  # fmt: skip
    """InstructionsLoaded fields map to the survival kinds of the module rules."""
    assert classify_instruction(path, memory_type, load_reason, ROOT, globs=globs) == kind


def test_display_path() -> None:
    """Paths under the project root are shown relative to it; others unchanged."""
    assert (display_path(f"{ROOT}/a/b.py", ROOT), display_path("/etc/x", ROOT), display_path("/x/y", "")) == (
        "a/b.py",
        "/etc/x",
        "/x/y",
    )


def test_report_is_serialisable_and_deterministic() -> None:
    """Same input -> the same report; it round-trips through msgspec JSON."""
    kw = {"files": [_read("/p/a", 7000, 1.0)], "skills": _skills(8), "instructions": [("/p/r.md", "path_rule", 9)]}
    r1, r2 = simulate(**kw), simulate(**kw)  # type: ignore[arg-type]
    assert r1 == r2
    assert msgspec.json.decode(msgspec.json.encode(r1), type=SurvivalReport) == r1


def test_lines_are_bounded() -> None:
    """Hundreds of lost files give at most 40 lines, the last one counting the rest."""
    r = simulate(files=[_read(f"/p/{i}", 10, float(i)) for i in range(300)])
    assert len(r.lines) == 40 and r.lines[-1] == "… 257 more"


# --------------------------------------------------------------------------- real fixtures


@pytest.mark.parametrize("run", ["interactive", "chain_all"])
def test_fixture_files_claude_code_reattached_match_the_simulation(run: str) -> None:
    """Simulated on the state just before the recorded /compact, the files that come back are exactly
    the ones Claude Code re-attached after it (``file`` attachments)."""
    files = sorted(RUNS.glob(f"{run}/transcripts/*/*.jsonl"), key=lambda p: p.stat().st_size)
    if not files:
        pytest.skip("fixtures not available")
    lines = files[-1].read_bytes().splitlines(keepends=True)
    at = next(i for i, ln in enumerate(lines) if b'"compact_boundary"' in ln)
    _, before = feed(TranscriptCursor(), b"".join(lines[:at]))
    _, after = feed(TranscriptCursor(), b"".join(lines[at:]), final=True)
    acc = A.fold(A.Accounting(), before)
    r = simulate(**A.survival_inputs(acc))
    reattached = [f.path for f in after.file_reads]
    assert r.files_back() == reattached and len(reattached) == 1 and reattached[0].endswith("/auth.py")
    assert r.lost == []


# --------------------------------------------------------------------------- purity


def test_modules_import_no_io() -> None:
    """Importing the accounting, survival and must-survive modules pulls in no anyio, sqlite3 or socket."""
    code = (
        "import sys\n"
        "import ctxlifed.core.accounting, ctxlifed.core.survival, ctxlifed.core.mustsurvive\n"
        "mods = ('anyio', 'sqlite3', 'socket', 'asyncio', 'logging')\n"
        "print(','.join(sorted(m for m in mods if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


@pytest.mark.parametrize("module", ["accounting.py", "survival.py", "mustsurvive.py"])
def test_module_is_pure(module: str) -> None:
    """Only pure imports, no I/O builtins, and a module docstring that states its rules."""
    tree = ast.parse((SRC / module).read_text())
    imported = {
        (n.module or "") if isinstance(n, ast.ImportFrom) else a.name
        for n in ast.walk(tree)
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in n.names
    }
    allowed = {"__future__", "re", "math", "datetime", "typing", "collections.abc", "hashlib", "posixpath",
               "unicodedata", "functools", "msgspec", "ctxlifed.core.model", "ctxlifed.core.survival",
               "ctxlifed.core.transcript"}  # fmt: skip
    assert imported <= allowed
    calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert not calls & {"open", "print", "input", "exec", "eval", "__import__"}
    assert "Rules:" in (ast.get_docstring(tree) or "")
