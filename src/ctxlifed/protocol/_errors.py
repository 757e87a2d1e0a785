"""JSON-RPC error taxonomy.

Rules:
- Every failure the daemon can report maps to exactly one code; the table below is pinned by a test.
- Standard codes come from the JSON-RPC 2.0 spec; application codes live in -32000..-32099 and each
  has a stable ``name`` that clients switch on (``error.data.name``).
- Messages are for humans and never contain a traceback.
"""

from __future__ import annotations

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

# Application errors (-32000..-32099).
STORAGE_FULL = -32000
BUSY = -32001
SHUTTING_DOWN = -32002
VERSION_MISMATCH = -32003
PERMISSION_DENIED = -32004
NOT_FOUND = -32005
BAD_QUERY = -32006
STORAGE_UNAVAILABLE = -32007
QUERY_TOO_BROAD = -32008

CODE_NAMES: dict[int, str] = {
    PARSE_ERROR: "parse_error",
    INVALID_REQUEST: "invalid_request",
    METHOD_NOT_FOUND: "method_not_found",
    INVALID_PARAMS: "invalid_params",
    INTERNAL_ERROR: "internal_error",
    STORAGE_FULL: "storage_full",
    BUSY: "busy",
    SHUTTING_DOWN: "shutting_down",
    VERSION_MISMATCH: "version_mismatch",
    PERMISSION_DENIED: "permission_denied",
    NOT_FOUND: "not_found",
    BAD_QUERY: "bad_query",
    STORAGE_UNAVAILABLE: "storage_unavailable",
    QUERY_TOO_BROAD: "query_too_broad",
}


class RpcError(Exception):
    """An error that becomes one JSON-RPC error object. Raise the subclasses, not this."""

    code: int = INTERNAL_ERROR

    def __init__(self, message: str, *, data: dict | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data

    @property
    def name(self) -> str:
        return CODE_NAMES[self.code]

    def to_obj(self) -> dict:
        data = {"name": self.name}
        if self.data:
            data.update(self.data)
        return {"code": self.code, "message": self.message, "data": data}


class ParseError(RpcError):
    code = PARSE_ERROR


class InvalidRequest(RpcError):
    code = INVALID_REQUEST


class MethodNotFound(RpcError):
    code = METHOD_NOT_FOUND


class InvalidParams(RpcError):
    code = INVALID_PARAMS


class InternalError(RpcError):
    code = INTERNAL_ERROR


class StorageFull(RpcError):
    code = STORAGE_FULL


class Busy(RpcError):
    code = BUSY


class ShuttingDown(RpcError):
    code = SHUTTING_DOWN


class VersionMismatch(RpcError):
    code = VERSION_MISMATCH


class PermissionDenied(RpcError):
    code = PERMISSION_DENIED


class NotFound(RpcError):
    code = NOT_FOUND


class BadQuery(RpcError):
    code = BAD_QUERY


class StorageUnavailable(RpcError):
    """The store cannot be written (EPERM, EROFS, EIO, a read-only or unopenable file): nothing was
    stored; retry later (the shim spools the event)."""

    code = STORAGE_UNAVAILABLE


class QueryTooBroad(RpcError):
    """A recall ran out of its budget (``data.reason``: ``terms`` or ``time``); narrow the query."""

    code = QUERY_TOO_BROAD


ERRORS_BY_CODE: dict[int, type[RpcError]] = {
    cls.code: cls
    for cls in (
        ParseError, InvalidRequest, MethodNotFound, InvalidParams, InternalError, StorageFull,
        Busy, ShuttingDown, VersionMismatch, PermissionDenied, NotFound, BadQuery, StorageUnavailable,
        QueryTooBroad,
    )
}
