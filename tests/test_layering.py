"""Dependency direction: the pure cores import no I/O framework; the CLI never imports the server side."""

from __future__ import annotations

import subprocess
import sys

import pytest


def imported_after(stmt: str) -> set[str]:
    code = f"import sys; before=set(sys.modules); {stmt}; print(' '.join(sorted(set(sys.modules) - before)))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(r.stdout.split())


@pytest.mark.parametrize("module", ["ctxlifed.protocol", "ctxlifed.core.model", "ctxlifed.core.events",
                                    "ctxlifed.core.phase", "ctxlifed.core.budget", "ctxlifed.core.transcript",
                                    "ctxlifed.core.classify", "ctxlifed.core.render", "ctxlifed.core.redact",
                                    "ctxlifed.core.jsontext", "ctxlifed.core.matrix", "ctxlifed.core.advice"])
def test_pure_cores_do_no_io(module: str) -> None:
    """Importing a pure module pulls in neither anyio, sqlite3, socket nor structlog."""
    mods = imported_after(f"import {module}")
    assert not {"anyio", "sqlite3", "socket", "structlog", "sqlite_utils", "watchfiles"} & mods


def test_cli_never_imports_the_server_side() -> None:
    """ctxlifectl (and its integration commands) import neither server, service, store nor anyio."""
    mods = imported_after("import ctxlifed.cli.main as m; m.build_parser()")
    bad = {m for m in mods if m.startswith(("ctxlifed.server", "ctxlifed.service", "ctxlifed.store", "anyio", "sqlite_utils"))}
    assert not bad, bad
