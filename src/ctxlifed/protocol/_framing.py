"""Newline-delimited framing, sans I/O (the h11 way).

Rules:
- One frame = one compact JSON value followed by ``\\n``. Compact JSON never holds a raw newline,
  so ``\\n`` is an unambiguous terminator and ``socat - UNIX-CONNECT:...`` can speak the protocol.
- ``receive_data`` buffers bytes; ``next_frame`` returns a frame, ``NEED_DATA``, or raises
  :class:`FrameTooLarge` once the buffered partial frame exceeds ``max_frame`` bytes. After that
  error the decoder is poisoned: the connection must be closed (we cannot resynchronise safely).
- Empty lines (and a trailing ``\\r``) are ignored, for humans typing into socat.
- Nothing here does I/O, imports anyio, or reads a clock.
"""

from __future__ import annotations

from typing import Final

NEED_DATA: Final = None
DEFAULT_MAX_FRAME: Final = 1 << 20  # 1 MiB


class FrameTooLarge(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(f"frame exceeds {limit} bytes")
        self.limit = limit


class FrameDecoder:
    __slots__ = ("_buf", "_max", "_scan", "_poisoned")

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self._buf = bytearray()
        self._max = max_frame
        self._scan = 0  # bytes of _buf already known to hold no newline
        self._poisoned = False

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def receive_data(self, data: bytes) -> None:
        self._buf += data

    def next_frame(self) -> bytes | None:
        if self._poisoned:
            raise FrameTooLarge(self._max)
        while True:
            i = self._buf.find(b"\n", self._scan)
            if i < 0:
                self._scan = len(self._buf)
                if len(self._buf) > self._max:
                    self._poisoned = True
                    raise FrameTooLarge(self._max)
                return NEED_DATA
            if i > self._max:
                self._poisoned = True
                raise FrameTooLarge(self._max)
            frame = bytes(self._buf[:i])
            del self._buf[: i + 1]
            self._scan = 0
            if frame.endswith(b"\r"):
                frame = frame[:-1]
            if frame.strip():
                return frame


def encode_frame(payload: bytes) -> bytes:
    """Append the terminator. ``payload`` must be compact JSON (msgspec output is)."""
    return payload + b"\n"
