"""JSON-RPC 2.0 envelope: frame bytes -> calls, responses -> frame bytes. Pure.

Rules (jsonrpc.org/specification, pinned by tests/test_protocol_conformance.py):
- Invalid JSON (truncated, bad UTF-8 in the envelope, trailing garbage, nesting past the decoder's
  limit) -> one -32700 object with ``id: null``, even inside what looked like a batch.
- A lone surrogate escape (``"\\ud83d"`` with no low half: Node's ``JSON.stringify`` writes one when
  it cuts an emoji) is JSON by the grammar: it is decoded as U+FFFD, never refused. Only after the
  strict decode failed (``core.jsontext``), so valid frames pay nothing. Bytes that are not UTF-8
  inside ``params`` are the method's business (``_methods.decode_params``).
- Valid JSON that is not an object/array, or an object that is not a valid Request -> -32600 with
  ``id: null`` unless a valid id could be read (then that id is echoed).
- ``[]`` -> one -32600 object (not an array). ``[1,2]`` -> an array of -32600 objects.
- A batch longer than ``max_batch`` -> one -32600 object.
- A notification (no ``id`` member) is never answered, even when it fails. ``"id": null`` is a
  request and is answered with ``id: null``.
- ``params`` must be an object or an array if present (-32600 otherwise).
- ``id`` must be a string, an integer or null; it is echoed exactly (big integers included).
- Nothing here raises: every failure becomes an error response value.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from ..core.jsontext import repair_surrogates
from ._errors import INVALID_REQUEST, PARSE_ERROR, RpcError

DEFAULT_MAX_BATCH = 64

Id = int | str | None


class Request(msgspec.Struct, frozen=True, omit_defaults=True):
    jsonrpc: Literal["2.0"]
    method: str
    params: msgspec.Raw = msgspec.Raw(b"")
    id: Id | msgspec.UnsetType = msgspec.UNSET


class _IdOnly(msgspec.Struct):
    id: Id | msgspec.UnsetType = msgspec.UNSET


class Call(msgspec.Struct, frozen=True):
    """A valid request. ``notification`` is True when it has no id (never answered)."""

    method: str
    params: bytes  # raw JSON of params, b"" when absent
    id: Id
    notification: bool


class ErrorReply(msgspec.Struct, frozen=True):
    """An item that could not become a Call; already holds its response (or None)."""

    response: bytes | None


class Message(msgspec.Struct, frozen=True):
    batch: bool
    items: list[Call | ErrorReply]


_encoder = msgspec.json.Encoder()
_raw_decoder = msgspec.json.Decoder(msgspec.Raw)
_list_decoder = msgspec.json.Decoder(list[msgspec.Raw])
_request_decoder = msgspec.json.Decoder(Request)
_id_decoder = msgspec.json.Decoder(_IdOnly)


def error_obj(code: int, message: str, data: dict | None = None) -> dict:
    obj: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        obj["data"] = data
    return obj


def encode_error(id_: Id, error: dict) -> bytes:
    return _encoder.encode({"jsonrpc": "2.0", "id": id_, "error": error})


def encode_rpc_error(id_: Id, exc: RpcError) -> bytes:
    return encode_error(id_, exc.to_obj())


def encode_result(id_: Id, result: Any) -> bytes:
    return _encoder.encode({"jsonrpc": "2.0", "id": id_, "result": result})


def _parse_error(detail: str) -> bytes:
    return encode_error(None, error_obj(PARSE_ERROR, "Parse error", {"name": "parse_error", "detail": detail}))


def _invalid(id_: Id, detail: str) -> bytes:
    return encode_error(id_, error_obj(INVALID_REQUEST, "Invalid Request", {"name": "invalid_request", "detail": detail}))


def _first_byte(raw: bytes) -> int:
    stripped = raw.lstrip(b" \t\r\n")
    return stripped[0] if stripped else 0


def _item(raw: bytes) -> Call | ErrorReply:
    if _first_byte(raw) != ord("{"):
        return ErrorReply(_invalid(None, "a request must be a JSON object"))
    try:
        req = _request_decoder.decode(raw)
    except (msgspec.ValidationError, RecursionError) as exc:
        # Echo the id when it alone is valid and present; otherwise null.
        id_: Id = None
        has_id = False
        try:
            got = _id_decoder.decode(raw)
            if got.id is not msgspec.UNSET:
                id_, has_id = got.id, True
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
            pass
        detail = str(exc) if isinstance(exc, msgspec.ValidationError) else "nesting too deep"
        # An invalid Request is always answered (the spec's own example has no id).
        return ErrorReply(_invalid(id_ if has_id else None, detail))
    except msgspec.DecodeError as exc:  # e.g. invalid UTF-8 inside a string: not JSON text
        return ErrorReply(_parse_error(str(exc)))
    params = bytes(req.params)
    if params and _first_byte(params) not in (ord("{"), ord("[")):
        id_ = None if req.id is msgspec.UNSET else req.id
        return ErrorReply(_invalid(id_, "params must be an object or an array"))
    if req.id is msgspec.UNSET:
        return Call(req.method, params, None, True)
    return Call(req.method, params, req.id, False)


def _lenient_raw(frame: bytes) -> bytes | None:
    """The frame with its lone surrogate escapes replaced, if that makes it JSON; else None."""
    fixed = repair_surrogates(frame)
    if fixed is None:
        return None
    try:
        return bytes(_raw_decoder.decode(fixed))
    except (msgspec.DecodeError, RecursionError):
        return None


def parse_message(frame: bytes, *, max_batch: int = DEFAULT_MAX_BATCH) -> Message:
    """Split one frame into calls and ready-made error replies."""
    try:
        raw = bytes(_raw_decoder.decode(frame))
    except msgspec.DecodeError as exc:
        lenient = _lenient_raw(frame)
        if lenient is None:
            return Message(False, [ErrorReply(_parse_error(str(exc)))])
        raw = lenient
    except RecursionError:
        return Message(False, [ErrorReply(_parse_error("nesting too deep"))])
    first = _first_byte(raw)
    if first == ord("["):
        try:
            elems = _list_decoder.decode(raw)
        except (msgspec.DecodeError, RecursionError):
            return Message(False, [ErrorReply(_parse_error("nesting too deep"))])
        if not elems:
            return Message(False, [ErrorReply(_invalid(None, "empty batch"))])
        if len(elems) > max_batch:
            return Message(False, [ErrorReply(_invalid(None, f"batch longer than {max_batch} items"))])
        return Message(True, [_item(bytes(e)) for e in elems])
    return Message(False, [_item(bytes(raw))])


def assemble(message: Message, responses: list[bytes | None]) -> bytes | None:
    """Join per-item responses into the reply frame payload (without the newline).

    ``responses`` is aligned with ``message.items``; None entries (notifications) are dropped.
    Returns None when nothing must be sent.
    """
    got = [r for r in responses if r is not None]
    if not got:
        return None
    if not message.batch:
        return got[0]
    return b"[" + b",".join(got) + b"]"
