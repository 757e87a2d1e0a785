"""Where a test run writes its figures: never into the tracked source tree."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from .conftest import RESULTS, ROOT


@pytest.mark.skipif(bool(os.environ.get("CTXLIFED_RELIABILITY_RESULTS")), reason="the location was chosen by the caller")
def test_figures_go_to_a_file_git_ignores() -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    r = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", str(RESULTS)], check=False)
    assert r.returncode == 0, f"{RESULTS} is not ignored by git: a test run would change the source tree"
    # ... and it lies in no source folder (bench/results/ was ignored, but inside bench/).
    top = RESULTS.resolve().relative_to(ROOT.resolve()).parts[0]
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--", top], capture_output=True, text=True,
                             check=True).stdout
    assert tracked == "", f"{RESULTS} lies in {top}/, which holds source files"
