"""The protocol core: framing, envelope, errors, methods. Pure: msgspec (and the pure
``core.jsontext`` for the lenient second decode), no I/O.

Rules:
- Nothing in this package imports anyio, socket, sqlite3, time or logging (a test checks it).
- Every error maps to exactly one JSON-RPC code (``_errors``); nothing here raises anything else
  to the server: ``parse_message`` turns every bad input into an error reply value.
"""

from ._envelope import (
    DEFAULT_MAX_BATCH,
    Call,
    ErrorReply,
    Message,
    assemble,
    encode_error,
    encode_result,
    encode_rpc_error,
    parse_message,
)
from ._errors import *  # noqa: F403
from ._errors import ERRORS_BY_CODE, RpcError
from ._framing import DEFAULT_MAX_FRAME, NEED_DATA, FrameDecoder, FrameTooLarge, encode_frame
from ._methods import METHODS, decode_params

__all__ = [
    "DEFAULT_MAX_BATCH", "DEFAULT_MAX_FRAME", "ERRORS_BY_CODE", "METHODS", "NEED_DATA", "Call",
    "ErrorReply", "FrameDecoder", "FrameTooLarge", "Message", "RpcError", "assemble",
    "decode_params", "encode_error", "encode_frame", "encode_result", "encode_rpc_error",
    "parse_message",
]
