"""End-to-end fixtures: the pinned Claude Code CLI (or a skip with the reason), and a private world per test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .ccenv import ClaudeEnv, find_claude

_CLAUDE: tuple[str | None, str] | None = None


@pytest.fixture(scope="session")
def claude_bin() -> str:
    global _CLAUDE
    if _CLAUDE is None:
        _CLAUDE = find_claude()
    path, why = _CLAUDE
    if path is None:
        pytest.skip(why)
    return path


@pytest.fixture
def cc(claude_bin: str, short_tmp: Path, daemon_factory: Any) -> ClaudeEnv:
    """A private Claude Code world with ctxlifed's hooks installed and the daemon running."""
    d = daemon_factory()
    env = ClaudeEnv(claude_bin, short_tmp, d)
    env.install()
    d.start()
    return env


@pytest.fixture
def cc_bare(claude_bin: str, short_tmp: Path, daemon_factory: Any) -> ClaudeEnv:
    """Like ``cc`` but nothing installed and the daemon not started."""
    return ClaudeEnv(claude_bin, short_tmp, daemon_factory())
