"""What the hook shim leaves on disk, as ``status`` and ``doctor`` read it (``cli.shimstate``)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from ctxlifed.cli import shimstate
from ctxlifed.cli.client import peer_uid, socket_problem
from ctxlifed.cli.main import render_shim


def test_dropped_counts_of_both_folders_add_up(short_tmp: Path) -> None:
    data, rt = short_tmp / "data", short_tmp / "rt"
    data.mkdir()
    rt.mkdir()
    (data / "dropped").write_text("2\n")
    (rt / "dropped").write_text("5\n")
    (rt / "spool.jsonl").write_bytes(b"x" * 300)
    (rt / "stalled").write_text("")
    st = shimstate.read(str(data), str(rt))
    assert (7, 300) == (st.dropped, st.runtime_spool_bytes)
    assert st.stalled_since is not None and st.dropped_at is not None
    lines = render_shim(st, st.stalled_since + 30)
    assert 3 == len(lines)
    assert lines[0].startswith("dropped 7 hook events could be kept nowhere")
    assert lines[1].startswith(f"spooled 300 B of events in {rt / 'spool.jsonl'}")
    assert lines[2].startswith("stalled the daemon missed a hook's deadline 30s ago")


def test_nothing_to_say_when_all_is_well_or_files_are_odd(short_tmp: Path) -> None:
    """Missing files, a count that is not a number, a counter that is a symlink: nothing is counted."""
    data = short_tmp / "data"
    data.mkdir()
    assert [] == render_shim(shimstate.read(str(data), str(data)), 0.0)
    (data / "dropped").write_text("lots\n")
    assert 0 == shimstate.read(str(data), str(short_tmp / "absent")).dropped
    (data / "dropped").unlink()
    (short_tmp / "elsewhere").write_text("9\n")
    (data / "dropped").symlink_to(short_tmp / "elsewhere")
    assert 0 == shimstate.read(str(data), str(short_tmp / "absent")).dropped
    (data / "spool.jsonl").write_bytes(b"x" * 10)  # the data dir's own spool is not the runtime one
    assert 0 == shimstate.read(str(data), str(data)).runtime_spool_bytes


def test_socket_problem_names_open_folders_and_is_quiet_for_private_ones(short_tmp: Path) -> None:
    private = short_tmp / "p"
    private.mkdir(mode=0o700)
    assert socket_problem(str(private / "s.sock")) is None  # absent socket: nothing to distrust yet
    assert socket_problem(str(short_tmp / "absent" / "s.sock")) is None
    (private / "s.sock").write_text("")
    assert "is not a socket" in (socket_problem(str(private / "s.sock")) or "")
    os.chmod(private, 0o770)
    assert "writable by others (mode 770)" in (socket_problem(str(private / "s.sock")) or "")


def test_peer_uid_of_our_own_socket_is_ours() -> None:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        assert os.geteuid() == peer_uid(a)
    finally:
        a.close()
        b.close()


def test_a_bytecode_folder_the_hook_script_would_not_use_is_named(short_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``<data dir>/pycache`` that is not a private folder of ours: doctor says why hooks compile the shim."""
    from ctxlifed.cli import doctor

    data = short_tmp / "data"
    data.mkdir(mode=0o700)
    cache = data / "pycache"
    assert shimstate.read(str(data), str(data)).cache_problem == ""  # absent: made on the next hook
    cache.mkdir(mode=0o700)
    assert shimstate.read(str(data), str(data)).cache_problem == ""
    os.chmod(cache, 0o770)
    assert shimstate.read(str(data), str(data)).cache_problem == "is open to others (mode 770)"
    cache.rmdir()
    (short_tmp / "elsewhere").mkdir(mode=0o700)
    cache.symlink_to(short_tmp / "elsewhere")
    assert shimstate.read(str(data), str(data)).cache_problem == "is a symbolic link"
    cache.unlink()
    cache.write_text("")
    assert shimstate.read(str(data), str(data)).cache_problem == "is not a folder"
    monkeypatch.setenv("CTXLIFED_DATA_DIR", str(data))
    found = [f for f in doctor.check_shim(str(short_tmp / "run" / "s.sock")) if "bytecode" in f.message]
    assert len(found) == 1 and f"{cache} is not a folder" in found[0].message


def test_a_bytecode_folder_of_another_uid_is_named(short_tmp: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a folder to another uid needs root")
    cache = short_tmp / "pycache"
    cache.mkdir(mode=0o700)
    os.chown(cache, 65534, 65534)
    assert shimstate.read(str(short_tmp), str(short_tmp)).cache_problem == "belongs to uid 65534"
