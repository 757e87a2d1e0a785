"""Newline framing: whole, byte-at-a-time and random splits agree; the frame cap holds exactly."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxlifed.protocol import FrameDecoder, FrameTooLarge, parse_message


def frames_of(decoder: FrameDecoder) -> list[bytes]:
    out = []
    while (f := decoder.next_frame()) is not None:
        out.append(f)
    return out


def test_split_invariance() -> None:
    """Whole, byte-at-a-time and random chunking yield the same frames."""
    data = b'{"a":1}\n{"b":"x\\ny"}\r\n\n  \n[1,2]\n{"partial":'
    whole = FrameDecoder()
    whole.receive_data(data)
    expected = frames_of(whole)
    assert expected == [b'{"a":1}', b'{"b":"x\\ny"}', b"[1,2]"]
    one = FrameDecoder()
    got = []
    for i in range(len(data)):
        one.receive_data(data[i : i + 1])
        got += frames_of(one)
    assert expected == got
    rng = random.Random(7)
    for _ in range(50):
        dec, got, i = FrameDecoder(), [], 0
        while i < len(data):
            n = rng.randint(1, 9)
            dec.receive_data(data[i : i + n])
            got += frames_of(dec)
            i += n
        assert expected == got


@pytest.mark.parametrize(("size", "ok"), [(1023, True), (1024, True), (1025, False), (10240, False)])
def test_frame_cap(size: int, ok: bool) -> None:
    """Frames at MAX-1 and MAX pass; MAX+1 and 10×MAX raise FrameTooLarge and poison the decoder."""
    dec = FrameDecoder(max_frame=1024)
    dec.receive_data(b"x" * size + b"\n")
    if ok:
        assert dec.next_frame() == b"x" * size
    else:
        with pytest.raises(FrameTooLarge):
            dec.next_frame()
        with pytest.raises(FrameTooLarge):
            dec.next_frame()


def test_cap_applies_before_the_newline_arrives() -> None:
    """A partial frame over the cap fails at once: memory stays bounded without a newline."""
    dec = FrameDecoder(max_frame=100)
    dec.receive_data(b"y" * 101)
    with pytest.raises(FrameTooLarge):
        dec.next_frame()


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.lists(st.integers(min_value=1, max_value=40), max_size=30))
def test_decoder_and_envelope_never_raise_unexpectedly(data: bytes, cuts: list[int]) -> None:
    """Arbitrary bytes in arbitrary splits: frames or FrameTooLarge, and every frame parses to replies."""
    dec = FrameDecoder(max_frame=256)
    i = 0
    for n in [*cuts, len(data)]:
        dec.receive_data(data[i : i + n])
        i += n
        try:
            while (f := dec.next_frame()) is not None:
                msg = parse_message(f)
                assert msg.items
        except FrameTooLarge:
            return
