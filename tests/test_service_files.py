"""service.files: project roots and L3 targets only in trees of the user's own (runs as any user)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ctxlifed.service import files


def _repo(path: Path, mode: int = 0o755) -> Path:
    (path / ".git").mkdir(parents=True)
    os.chmod(path, mode)
    return path


def test_project_root_is_the_git_top_level_of_our_own(short_tmp: Path) -> None:
    root = _repo(short_tmp / "mine")
    (root / "src" / "pkg").mkdir(parents=True)
    assert str(root) == files.project_root(str(root / "src" / "pkg"))


def test_a_repository_others_can_write_is_not_our_project(short_tmp: Path) -> None:
    """The first .git up the tree belongs to a folder others may write to: the project is the cwd."""
    shared = _repo(short_tmp / "shared", 0o777)
    work = shared / "work"
    work.mkdir()
    assert str(work) == files.project_root(str(work))
    assert "writable by other users" in (files.root_untrusted(str(shared)) or "")


def test_l3_target_refuses_a_memory_folder_others_can_write(short_tmp: Path) -> None:
    root = _repo(short_tmp / "repo")
    mem = root / "docs" / "memory"
    mem.mkdir(parents=True)
    os.chmod(mem, 0o757)
    with pytest.raises(files.Untrusted, match=r"memory: it is writable by other users"):
        files.l3_target(str(root), "docs/memory/lessons.md")
    (mem / "lessons.md").write_text("# Lessons\n")
    assert not files.l3_readable(str(root), str(mem / "lessons.md"))
    os.chmod(mem, 0o755)
    assert files.l3_readable(str(root), str(mem / "lessons.md"))


def test_l3_target_modes_follow_the_root(short_tmp: Path) -> None:
    """A 0700 repository gets 0600 pages in 0700 folders; a 0755 one 0644/0755."""
    for mode, want in ((0o700, (0o600, 0o700)), (0o755, (0o644, 0o755))):
        root = _repo(short_tmp / f"r{mode:o}", mode)
        target, fmode, dmode = files.l3_target(str(root), "docs/memory/sessions/s/phase-1-planning.md")
        files.atomic_write(target, "x\n", fmode, dmode)
        assert want == (stat.S_IMODE(os.stat(target).st_mode), stat.S_IMODE(os.stat(root / "docs").st_mode))


def test_a_project_reached_through_a_symlink_is_still_ours(short_tmp: Path) -> None:
    root = _repo(short_tmp / "real")
    link = short_tmp / "link"
    link.symlink_to(root)
    assert files.root_untrusted(str(link)) is None
    target, _f, _d = files.l3_target(str(link), "docs/memory/decisions.md")
    assert target == str(root / "docs/memory/decisions.md")
