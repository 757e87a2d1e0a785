"""runtime.bounded_read: regular files only, no symlink followed, a FIFO never blocks, never more than the bound."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ctxlifed.runtime.bounded_read import Refused, read_bounded


def test_a_small_regular_file_is_read_whole(tmp_path: Path) -> None:
    p = tmp_path / "f"
    p.write_bytes(b"abc")
    data, st = read_bounded(str(p), 3)
    assert data == b"abc" and st.st_size == 3


def test_a_file_over_the_bound_is_refused_or_cut(tmp_path: Path) -> None:
    p = tmp_path / "f"
    p.write_bytes(b"x" * 10)
    with pytest.raises(Refused, match="larger than 9 bytes"):
        read_bounded(str(p), 9)
    assert read_bounded(str(p), 4, cut=True)[0] == b"xxxx"


def test_a_missing_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(Refused) as info:
        read_bounded(str(tmp_path / "nope" / "f"), 10)
    assert info.value.missing


def test_a_symlink_is_refused(tmp_path: Path) -> None:
    (tmp_path / "target").write_bytes(b"secret")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    with pytest.raises(Refused, match="symlink") as info:
        read_bounded(str(tmp_path / "link"), 100)
    assert not info.value.missing


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    p = tmp_path / "fifo"
    os.mkfifo(p)
    with pytest.raises(Refused, match="not a regular file"):
        read_bounded(str(p), 100)  # a plain open() would wait for a writer forever


def test_a_file_others_can_write_is_refused_when_it_must_be_private(tmp_path: Path) -> None:
    p = tmp_path / "f"
    p.write_bytes(b"{}")
    p.chmod(0o666)
    with pytest.raises(Refused, match="writable by others"):
        read_bounded(str(p), 100, private=True)
    assert read_bounded(str(p), 100)[0] == b"{}"


def test_a_settings_fifo_does_not_block_the_cost_reader(tmp_path: Path) -> None:
    from ctxlifed.service.cost import _env_of

    os.mkfifo(tmp_path / "settings.json")
    assert _env_of(str(tmp_path / "settings.json")) is None
    (tmp_path / "real.json").write_text('{"env": {"A": "1"}}')
    (tmp_path / "link.json").symlink_to(tmp_path / "real.json")
    assert _env_of(str(tmp_path / "link.json")) == {"A": "1"}  # a symlinked settings file is still read
