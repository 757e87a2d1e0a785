"""ctl_command: the ctxlifectl command named in every text for the model runs from Claude Code's shell."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from ctxlifed.runtime.ctl import ctl_command, resolve_ctl


def _script(folder: Path, mode: int = 0o755) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / "ctxlifectl"
    p.write_text("#!/bin/sh\n")
    p.chmod(mode)
    return p


def test_the_script_next_to_the_interpreter_wins(tmp_path: Path) -> None:
    """After `make run` the venv's bin is not on PATH: the script beside the interpreter is named."""
    beside = _script(tmp_path / "venv bin")
    other = _script(tmp_path / "elsewhere")
    assert shlex.split(resolve_ctl(str(tmp_path / "venv bin" / "python3"), str(other))) == [str(beside)]


def test_which_made_absolute_then_the_bare_name(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _script(tmp_path / "bin", mode=0o644)  # not executable: not used
    monkeypatch.chdir(tmp_path)
    assert resolve_ctl(str(tmp_path / "bin" / "python3"), "found/ctxlifectl") == str(tmp_path / "found" / "ctxlifectl")
    assert resolve_ctl(str(tmp_path / "bin" / "python3"), None) == "ctxlifectl"


def test_this_install_resolves_to_an_existing_absolute_script() -> None:
    cmd = shlex.split(ctl_command())
    assert len(cmd) == 1 and os.path.isabs(cmd[0]) and os.access(cmd[0], os.X_OK)
    assert os.path.dirname(cmd[0]) == os.path.dirname(sys.executable) or not os.path.exists(
        os.path.join(os.path.dirname(sys.executable), "ctxlifectl"))
    assert ctl_command() is ctl_command()  # cached
