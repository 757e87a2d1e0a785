"""Tests for ctxlifed.core.paths, plus the purity guard of the core modules owned with it."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxlifed.core.paths import (
    encode_project_dir,
    is_within,
    l3_modes,
    ledger_relpath,
    project_dir_matches,
    untrusted_reason,
    validate_session_id,
)

CORE = Path(__file__).resolve().parents[1] / "src" / "ctxlifed" / "core"
PURE_MODULES = ("redact", "recall_query", "recall_rank", "render", "paths", "figures")


@pytest.mark.parametrize(
    "sid",
    ["5eb8d0b8-ca0e-4eb1-9879-48afaa04fb55", "a", "A_b-9", "x" * 128, "-", "agent-a1b2c3"],
)
def test_validate_session_id_accepts(sid: str) -> None:
    """Ids of 1-128 characters from [A-Za-z0-9_-] are returned unchanged."""
    assert sid == validate_session_id(sid)


@pytest.mark.parametrize(
    ("sid", "reason"),
    [
        ("", "empty"),
        ("x" * 129, "longer than 128"),
        ("../etc", "outside"),
        ("..", "outside"),
        (".", "outside"),
        ("a/b", "outside"),
        ("a\\b", "outside"),
        ("a\x00b", "outside"),
        ("a b", "outside"),
        ("abc\n", "outside"),
        ("séance", "outside"),
        (None, "must be a string"),
        (5, "must be a string"),
    ],
)
def test_validate_session_id_rejects(sid: object, reason: str) -> None:
    """Anything else raises ValueError saying why and what is allowed."""
    with pytest.raises(ValueError) as exc:
        validate_session_id(sid)  # type: ignore[arg-type]
    assert (True, True) == (reason in str(exc.value), "[A-Za-z0-9_-]" in str(exc.value))


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("5eb8d0b8-ca0e-4eb1-9879-48afaa04fb55", 1, "planning"), "sessions/5eb8d0b8-ca0e-4eb1-9879-48afaa04fb55/phase-1-planning.md"),
        (("s", 12, "review"), "sessions/s/phase-12-review.md"),
    ],
)
def test_ledger_relpath(args: tuple, expected: str) -> None:
    """The ledger path is sessions/<sid>/phase-<N>-<name>.md."""
    assert expected == ledger_relpath(*args)


@pytest.mark.parametrize(
    "args",
    [("../x", 1, "design"), ("s", 0, "design"), ("s", -1, "design"), ("s", True, "design"), ("s", 1.0, "design"),
     ("s", 1, "coding"), ("s", 1, "../design"), ("s", 1, "")],
)
def test_ledger_relpath_rejects(args: tuple) -> None:
    """Bad session ids, numbers or phase names raise ValueError."""
    with pytest.raises(ValueError):
        ledger_relpath(*args)


@pytest.mark.parametrize(
    ("root", "candidate", "expected"),
    [
        ("/p/docs/memory", "/p/docs/memory", True),
        ("/p/docs/memory", "/p/docs/memory/", True),
        ("/p/docs/memory", "/p/docs/memory/sessions/s/phase-1-design.md", True),
        ("/p/docs/memory/", "/p/docs/memory/x", True),
        ("/p/docs/memory", "/p/docs/memory/./a/../b", True),
        ("/p/docs/memory", "/p/docs/memory/../memory2/x", False),
        ("/p/docs/memory", "/p/docs/memory2", False),
        ("/p/docs/memory", "/p/docs/memory/../../etc/passwd", False),
        ("/p/docs/memory", "/p/docs", False),
        ("/p/docs/memory", "/", False),
        ("/p/docs/memory", "//p/docs/memory/x", True),
        ("/p/docs/memory", "sessions/x.md", False),
        ("/p/docs/memory", "", False),
        ("/p/docs/memory", "/p/docs/memory/\x00x", False),
        ("relative/root", "relative/root/x", False),
        ("/", "/anything/at/all", True),
        ("/", "/", True),
    ],
)
def test_is_within(root: str, candidate: str, expected: bool) -> None:
    """is_within is pure normpath math on absolute paths."""
    assert expected == is_within(root, candidate)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "..", ".", "", "memory", "x.md"]), max_size=8))
def test_is_within_agrees_with_normalised_prefix(parts: list[str]) -> None:
    """For any mix of components, within <=> the normalised path starts at the root."""
    import posixpath

    candidate = "/p/memory/" + "/".join(parts)
    norm = posixpath.normpath(candidate)
    assert (norm == "/p/memory" or norm.startswith("/p/memory/")) == is_within("/p/memory", candidate)


@pytest.mark.parametrize(
    ("cwd", "expected"),
    [
        ("/home/dev/proj", "-home-dev-proj"),
        ("/home/dev/exp/api_error project", "-home-dev-exp-api-error-project"),
        ("/Users/erio/.claude-code-router", "-Users-erio--claude-code-router"),
        ("C:\\Users\\dev\\proj", "C--Users-dev-proj"),
        ("/home/dév/项目", "-home-d-v---"),
        ("/tmp/🚀", "-tmp---"),  # one astral character is two UTF-16 code units
        ("", ""),
    ],
)
def test_encode_project_dir(cwd: str, expected: str) -> None:
    """Every non-alphanumeric character (per UTF-16 code unit) becomes '-'."""
    assert expected == encode_project_dir(cwd)


def test_encode_matches_real_fixture_folders() -> None:
    """The folder names in ../shared fixtures follow the same rule (checked when present)."""
    default = Path(__file__).resolve().parent / "fixtures" / "claude-code"
    root = Path(os.environ.get("CTXLIFED_FIXTURES", default)) / "runs"
    if not root.is_dir():
        pytest.skip("../shared fixtures not present")
    names = sorted({p.name for p in root.glob("*/transcripts/*") if p.is_dir()})
    assert names and all(n == encode_project_dir(n.replace("-", "/")) for n in names)


@pytest.mark.parametrize(
    ("name", "cwd", "expected"),
    [
        ("-home-dev-proj", "/home/dev/proj", True),
        ("-home-dev-proj2", "/home/dev/proj", False),
        ("-" + "a" * 199 + "-1x9k2", "/" + "a" * 250, True),
        ("-" + "a" * 199, "/" + "a" * 250, False),
        ("-" + "a" * 199 + "-", "/" + "a" * 250, False),
        ("-" + "a" * 199 + "-../x", "/" + "a" * 250, False),
    ],
)
def test_project_dir_matches(name: str, cwd: str, expected: bool) -> None:
    """Long encodings match by their 200-character prefix plus '-<hash>'."""
    assert expected == project_dir_matches(name, cwd)


# ---------------------------------------------------------------------------------------------
# purity guard for redact, recall_query, recall_rank, render, paths

ALLOWED_IMPORTS = {
    "__future__", "re", "functools", "typing", "collections.abc", "math", "datetime", "posixpath",
    "enum", "msgspec", "ctxlifed.core.model", "ctxlifed.core.recall_rank",
    "ctxlifed.core.figures",  # stdlib-only, pure: the one formatting path for figures
    "ctxlifed.core.matrix",  # pure: the category matrix decides the /compact focus line
    "binascii",  # a pure codec (redact decodes base64)
}


@pytest.mark.parametrize("module", PURE_MODULES)
def test_pure_module_imports_only_pure_libraries(module: str) -> None:
    """The module imports nothing that does I/O or reads a clock, and never calls open()."""
    tree = ast.parse((CORE / f"{module}.py").read_text(encoding="utf-8"))
    imported = set()
    calls = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module or "")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            calls.add(node.func.id)
    assert (set(), set()) == (imported - ALLOWED_IMPORTS, calls & {"open", "print", "input", "exec", "eval"})


@pytest.mark.parametrize("module", PURE_MODULES)
def test_pure_module_has_rules_docstring(module: str) -> None:
    """Each module opens with a docstring that states its rules."""
    doc = ast.get_docstring(ast.parse((CORE / f"{module}.py").read_text(encoding="utf-8"))) or ""
    assert "Rules:" in doc


def test_importing_pure_modules_loads_no_io_libraries() -> None:
    """In a fresh interpreter, importing the four modules does not import anyio, sqlite3, socket,
    logging or asyncio (msgspec itself loads the C module ``_socket``; ``socket`` stays unloaded)."""
    code = (
        "import sys\n"
        "import ctxlifed.core.redact, ctxlifed.core.recall_query, ctxlifed.core.render, ctxlifed.core.paths\n"
        "print(sorted(m for m in ('anyio', 'sqlite3', '_sqlite3', 'socket', 'logging', 'asyncio') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert "[]" == out.stdout.strip()


# -- L3 trust: whose folder is it ---------------------------------------------------------------
DIR, REG, LNK = 0o040000, 0o100000, 0o120000


@pytest.mark.parametrize(("uid", "gid", "mode", "want_dir", "why"), [
    (1000, 1000, DIR | 0o755, True, None),
    (1000, 1000, DIR | 0o700, True, None),
    (1000, 1000, DIR | 0o775, True, None),  # group-writable by the user's own group (user-private groups)
    (1000, 1000, REG | 0o644, False, None),
    (1000, 50, DIR | 0o775, True, "is writable by group 50"),
    (1000, 1000, DIR | 0o777, True, "is writable by other users"),
    (1000, 1000, DIR | 0o757, True, "is writable by other users"),
    (65534, 65534, DIR | 0o755, True, "is owned by uid 65534, not by uid 1000"),
    (1000, 1000, LNK | 0o777, True, "is a symlink"),
    (1000, 1000, LNK | 0o777, False, "is a symlink"),
    (1000, 1000, REG | 0o644, True, "is not a directory"),
])
def test_untrusted_reason(uid: int, gid: int, mode: int, want_dir: bool, why: str | None) -> None:
    assert why == untrusted_reason(uid, gid, mode, uid=1000, gid=1000, want_dir=want_dir)


@pytest.mark.parametrize(("root", "modes"), [
    (0o755, (0o644, 0o755)), (0o700, (0o600, 0o700)), (0o750, (0o640, 0o750)),
    (0o777, (0o644, 0o755)), (0o711, (0o600, 0o711)),
])
def test_l3_modes_follow_the_root_and_are_never_writable_by_others(root: int, modes: tuple[int, int]) -> None:
    assert modes == l3_modes(DIR | root)
    assert all(m & 0o022 == 0 for m in modes)
