"""Tests for ctxlifed.core.commands as the one command parser: the family patterns and the token parser
agree on the wrappers they skip, and the lessons package keeps no command parser (nor private imports) of its own."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ctxlifed.core import commands as C

LESSONS_PKG = Path(C.__file__).resolve().parent / "lessons"


@pytest.mark.parametrize("wrapper", sorted(C._SIMPLE_WRAPPERS) + [f"{w} run" for w in sorted(C._RUN_WRAPPERS)])
def test_both_views_skip_the_same_wrappers(wrapper: str) -> None:
    cmd = f"{wrapper} pytest -q tests/x.py"
    assert C.is_test_command(cmd)
    assert C.strip_wrappers(C.shell_tokens(cmd)) == ["pytest", "-q", "tests/x.py"]
    assert C.command_family(f"cd sub && {cmd} | tail -5") == "pytest"


@pytest.mark.parametrize("wrapper", ["npx --no-install", "npx -y", "sudo -E", "env -i"])
def test_both_views_skip_a_wrapper_s_options(wrapper: str) -> None:
    cmd = f"{wrapper} tsc -p ."
    assert C.is_build_command(cmd)
    assert C.strip_wrappers(C.shell_tokens(cmd)) == ["tsc", "-p", "."]


@pytest.mark.parametrize(("cmd", "is_test"), [
    ("node --test", True), ("node --test tests/", True), ("node --experimental-test-coverage --test", True),
    ("node --test-only x.js", False), ("node app.js --test", False), ("node app.js", False),
])
def test_node_s_own_test_runner_is_a_test_command(cmd: str, is_test: bool) -> None:
    assert C.is_test_command(cmd) is is_test


def test_nohup_is_skipped_by_the_token_view_only() -> None:
    """The one documented difference between the two views (module rules)."""
    assert C.strip_wrappers(C.shell_tokens("nohup pytest -q")) == ["pytest", "-q"]
    assert not C.is_test_command("nohup pytest -q")


@pytest.mark.parametrize(("cmd", "segments", "main"), [
    ("cd a && pytest -q 2>&1 | tail -5", ["cd a", "pytest -q 2>&1"], ["pytest", "-q"]),
    ("export X=1; .venv/bin/python3.11 -m pytest tests", ["export X=1", ".venv/bin/python3.11 -m pytest tests"],
     ["pytest", "tests"]),
    ("pip install requests && echo done", ["pip install requests", "echo done"], ["pip", "install", "requests"]),
    ("cd a && echo hi", ["cd a", "echo hi"], None),
])
def test_segments_and_the_main_segment(cmd: str, segments: list[str], main: list[str] | None) -> None:
    assert C.split_segments(cmd) == segments
    got = C.main_segment(cmd)
    assert (got[1] if got else None) == main


def test_lessons_modules_import_no_private_names_and_parse_no_commands() -> None:
    """Names shared across the lessons modules are public; shlex (tokenising) is core.commands' alone."""
    bad = []
    for path in sorted(LESSONS_PKG.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                bad += [f"{path.name}: {node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
            if isinstance(node, ast.Import):
                bad += [f"{path.name}: import {a.name}" for a in node.names if a.name == "shlex"]
    assert bad == []
