"""Newline framing: whole, byte-at-a-time and random splits agree; the frame cap holds exactly."""

from __future__ import annotations

import json
import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxlifed.protocol import Call, ErrorReply, FrameDecoder, FrameTooLarge, decode_params, parse_message
from ctxlifed.protocol._errors import InvalidParams


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


# --------------------------------------------------------------------------- text that is not valid Unicode

def _hook_call(prompt: bytes) -> bytes:
    return b'{"jsonrpc":"2.0","method":"hook","id":1,"params":{"hook_event_name":"Stop","prompt":"' + prompt + b'"}}'


@pytest.mark.parametrize(("prompt", "want"), [
    (b"emoji cut \\ud83d", "emoji cut \ufffd"),  # JSON.stringify cutting an emoji
    (b"\\ude00 low half first", "\ufffd low half first"),
    (b"\\ude00\\ud83d reversed", "\ufffd\ufffd reversed"),
    (b"whole \\ud83d\\ude00 pair", "whole \U0001f600 pair"),  # a valid pair is untouched
    (b"escaped \\\\ud83d backslash", "escaped \\ud83d backslash"),  # text, not an escape
    (b"raw \xed\xa0\xbd surrogate", "raw \ufffd surrogate"),  # Python's surrogatepass: one U+FFFD
    (b"raw \xed\xa0\xbd\xed\xb8\x80 pair", "raw \U0001f600 pair"),  # a surrogatepass pair: its character
    (b"mixed \xed\xa0\xbd \xff", "mixed \ufffd\ufffd\ufffd \ufffd"),  # with other bad bytes: one per byte
    (b"bad \xff\xfe utf8", "bad \ufffd\ufffd utf8"),
])
def test_hook_text_that_is_not_valid_unicode_is_decoded_with_replacement(prompt: bytes, want: str) -> None:
    """A hook payload is never refused for its text: a lone surrogate escape (-32700 before) or bytes that
    are not UTF-8 (a msgspec.DecodeError out of decode_params, -32603 with a traceback before) become
    U+FFFD and the payload decodes."""
    (call,) = parse_message(_hook_call(prompt)).items
    assert isinstance(call, Call) and call.id == 1
    assert decode_params(call.method, call.params)["prompt"] == want


def test_lone_surrogates_in_a_batch_and_in_other_methods_are_replaced() -> None:
    """The frame-level repair applies to every method and to each batch item."""
    frame = (b'[{"jsonrpc":"2.0","method":"recall","id":"a","params":{"query":"x\\ud83d"}},'
             b'{"jsonrpc":"2.0","method":"ping","id":"b\\udfff"}]')
    msg = parse_message(frame)
    assert msg.batch and [type(i) for i in msg.items] == [Call, Call]
    assert decode_params("recall", msg.items[0].params).query == "x\ufffd"
    assert msg.items[1].id == "b\ufffd"


def test_other_methods_refuse_params_that_are_not_utf8_with_a_typed_error() -> None:
    """Outside hook payloads, params whose text is not UTF-8 get -32602 naming the fault (was -32603)."""
    (call,) = parse_message(b'{"jsonrpc":"2.0","method":"status","id":2,"params":{"session":"\xff"}}').items
    assert isinstance(call, Call)
    with pytest.raises(InvalidParams) as exc:
        decode_params(call.method, call.params)
    assert exc.value.code == -32602 and "not valid JSON text" in exc.value.message


@pytest.mark.parametrize("frame", [
    b'{"jsonrpc":"2.0","method":"\xff","id":1}',  # bad UTF-8 in the envelope: still not JSON text
    b'{"jsonrpc":"2.0","method":"hook","id":1,"params":{"prompt":"\\ud83d"}',  # a surrogate AND truncated
    b'{"jsonrpc":"2.0","method":"hook","id":1,"params":{"prompt":"\\uZZZZ"}}',  # a bad escape is not repaired
])
def test_what_is_not_json_for_another_reason_stays_a_parse_error(frame: bytes) -> None:
    (item,) = parse_message(frame).items
    assert isinstance(item, ErrorReply) and b'"code":-32700' in (item.response or b"")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40), st.lists(st.integers(min_value=0, max_value=60), max_size=4))
def test_replacement_changes_only_the_bad_characters(text: str, cuts: list[int]) -> None:
    """Valid text round-trips exactly; cutting its UTF-16 escapes anywhere loses only the cut characters."""
    body = json.dumps(text)  # ASCII, with \\uXXXX escapes (pairs for astral characters)
    assert decode_params("hook", b'{"p":' + body.encode() + b"}")["p"] == text
    lows = [m.start() for m in re.finditer(r"(?<=\\ud[89ab][0-9a-f]{2})\\ud[c-f]", body)]  # low halves
    for c in cuts:
        if not lows:
            break
        low = lows[c % len(lows)]
        cut = body[:low] + body[low + 6:]  # its high half is now alone
        got = decode_params("hook", b'{"p":' + cut.encode() + b"}")["p"]
        assert got.count("\ufffd") == text.count("\ufffd") + 1 and len(got) == len(text)
