"""JSON-RPC 2.0 conformance: every request shape of the spec, compared as whole decoded JSON.

The dispatcher below stands in for the daemon's service: ``subtract`` (by position or name),
``update``/``notify_*`` (notifications), ``get_data``; anything else is -32601. The table is the
spec's own examples (jsonrpc.org/specification §7) plus the edge cases of
anchors-style-reliability §2.4.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from ctxlifed import protocol as P
from ctxlifed.protocol import _errors as E
from ctxlifed.server.listener import Limits, Server


async def dispatch(method: str, params: bytes, rid: Any = None) -> Any:
    args = json.loads(params) if params else None
    if method == "subtract":
        if isinstance(args, list):
            return args[0] - args[1]
        if isinstance(args, dict) and {"minuend", "subtrahend"} <= args.keys():
            return args["minuend"] - args["subtrahend"]
        raise E.InvalidParams("Invalid params")
    if method in ("update", "foobar_notify", "notify_hello", "notify_sum"):
        return None
    if method == "sum":
        return sum(args)
    if method == "get_data":
        return ["hello", 5]
    if method == "boom":
        raise RuntimeError("secret traceback detail")
    raise E.MethodNotFound("Method not found")


def err(code: int, id_: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "error": {"code": code}}


def strip(obj: Any) -> Any:
    """Keep only code in error objects (messages and data are ours to word)."""
    if isinstance(obj, list):
        return [strip(o) for o in obj]
    if isinstance(obj, dict) and "error" in obj:
        return {"jsonrpc": obj["jsonrpc"], "id": obj["id"], "error": {"code": obj["error"]["code"]}}
    return obj


CASES: list[tuple[str, str, Any]] = [
    ("positional", '{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":1}', {"jsonrpc": "2.0", "id": 1, "result": 19}),
    ("positional reversed", '{"jsonrpc":"2.0","method":"subtract","params":[23,42],"id":2}', {"jsonrpc": "2.0", "id": 2, "result": -19}),
    ("named", '{"jsonrpc":"2.0","method":"subtract","params":{"subtrahend":23,"minuend":42},"id":3}', {"jsonrpc": "2.0", "id": 3, "result": 19}),
    ("notification", '{"jsonrpc":"2.0","method":"update","params":[1,2,3,4,5]}', None),
    ("notification no params", '{"jsonrpc":"2.0","method":"foobar"}', None),
    ("unknown method", '{"jsonrpc":"2.0","method":"foobar","id":"1"}', err(-32601, "1")),
    ("invalid json", '{"jsonrpc":"2.0","method":"foobar,"params":"bar","baz]', err(-32700)),
    ("invalid request object", '{"jsonrpc":"2.0","method":1,"params":"bar"}', err(-32600)),
    ("batch invalid json", '[{"jsonrpc":"2.0","method":"sum","params":[1,2,4],"id":"1"},{"jsonrpc":"2.0","method"]', err(-32700)),
    ("empty array", "[]", err(-32600)),
    ("invalid batch of one", "[1]", [err(-32600)]),
    ("invalid batch", "[1,2,3]", [err(-32600), err(-32600), err(-32600)]),
    ("mixed batch",
     '[{"jsonrpc":"2.0","method":"sum","params":[1,2,4],"id":"1"},{"jsonrpc":"2.0","method":"notify_hello","params":[7]},'
     '{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":"2"},{"foo":"boo"},'
     '{"jsonrpc":"2.0","method":"foo.get","params":{"name":"myself"},"id":"5"},{"jsonrpc":"2.0","method":"get_data","id":"9"}]',
     [{"jsonrpc": "2.0", "id": "1", "result": 7}, {"jsonrpc": "2.0", "id": "2", "result": 19}, err(-32600),
      err(-32601, "5"), {"jsonrpc": "2.0", "id": "9", "result": ["hello", 5]}]),
    ("all notifications batch", '[{"jsonrpc":"2.0","method":"notify_sum","params":[1,2,4]},{"jsonrpc":"2.0","method":"notify_hello","params":[7]}]', None),
    ("not an object", "1", err(-32600)),
    ("string value", '"x"', err(-32600)),
    ("null value", "null", err(-32600)),
    ("jsonrpc missing", '{"method":"get_data","id":1}', err(-32600, 1)),
    ("jsonrpc as number", '{"jsonrpc":2.0,"method":"get_data","id":1}', err(-32600, 1)),
    ("method not string, no id", '{"jsonrpc":"2.0","method":5}', err(-32600)),
    ("params scalar", '{"jsonrpc":"2.0","method":"get_data","params":7,"id":4}', err(-32600, 4)),
    ("id null is a request", '{"jsonrpc":"2.0","method":"get_data","id":null}', {"jsonrpc": "2.0", "id": None, "result": ["hello", 5]}),
    ("big integer id", '{"jsonrpc":"2.0","method":"get_data","id":123456789012345678901234567890}',
     {"jsonrpc": "2.0", "id": 123456789012345678901234567890, "result": ["hello", 5]}),
    ("fractional id", '{"jsonrpc":"2.0","method":"get_data","id":1.5}', err(-32600)),
    ("bool id", '{"jsonrpc":"2.0","method":"get_data","id":true}', err(-32600)),
    ("object id", '{"jsonrpc":"2.0","method":"get_data","id":{}}', err(-32600)),
    ("wrong params", '{"jsonrpc":"2.0","method":"subtract","params":{"x":1},"id":7}', err(-32602, 7)),
    ("handler raises", '{"jsonrpc":"2.0","method":"boom","id":8}', err(-32603, 8)),
    ("handler raises as notification", '{"jsonrpc":"2.0","method":"boom"}', None),
    ("invalid utf-8", b'{"jsonrpc":"2.0","method":"\xff","id":1}', err(-32700)),
    ("trailing garbage", '{"jsonrpc":"2.0","method":"get_data","id":1} x', err(-32700)),
    ("duplicate ids in a batch", '[{"jsonrpc":"2.0","method":"get_data","id":1},{"jsonrpc":"2.0","method":"get_data","id":1}]',
     [{"jsonrpc": "2.0", "id": 1, "result": ["hello", 5]}, {"jsonrpc": "2.0", "id": 1, "result": ["hello", 5]}]),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("name", "frame", "expected"), CASES, ids=[c[0] for c in CASES])
async def test_conformance(name: str, frame: str | bytes, expected: Any) -> None:
    """Each spec request shape gets exactly the spec's response (error codes and ids, whole JSON)."""
    server = Server(dispatch, Limits())
    raw = frame if isinstance(frame, bytes) else frame.encode()
    reply = await server.handle_frame(raw)
    if expected is None:
        assert reply is None
        return
    assert reply is not None
    decoded = json.loads(reply)
    assert expected == strip(decoded)
    for resp in decoded if isinstance(decoded, list) else [decoded]:
        assert ("result" in resp) != ("error" in resp)
        assert resp["jsonrpc"] == "2.0"
        if "error" in resp:
            assert "Traceback" not in json.dumps(resp) and "secret" not in json.dumps(resp)


def test_error_code_table_is_one_to_one() -> None:
    """Every error class maps to exactly one code and one name, all within the spec's ranges."""
    codes = [cls.code for cls in E.ERRORS_BY_CODE.values()]
    assert len(codes) == len(set(codes))
    assert set(E.CODE_NAMES) == set(codes)
    for code in codes:
        assert code in (-32700, -32600, -32601, -32602, -32603) or -32099 <= code <= -32000
    assert {"storage_full", "busy", "shutting_down", "version_mismatch", "permission_denied"} <= set(E.CODE_NAMES.values())


@pytest.mark.anyio
async def test_batch_cap() -> None:
    """A batch longer than the cap is one -32600 object; at the cap it is served."""
    server = Server(dispatch, Limits(max_batch=4))
    item = '{"jsonrpc":"2.0","method":"get_data","id":1}'
    ok = json.loads(await server.handle_frame(("[" + ",".join([item] * 4) + "]").encode()))
    assert len(ok) == 4
    over = json.loads(await server.handle_frame(("[" + ",".join([item] * 5) + "]").encode()))
    assert over["error"]["code"] == -32600 and over["id"] is None


@pytest.mark.anyio
@pytest.mark.parametrize("depth", [10**3, 10**4, 10**5])
async def test_deep_nesting_is_a_parse_error(depth: int) -> None:
    """Nesting past the decoder's limit is answered -32700, never a crash or RecursionError."""
    server = Server(dispatch, Limits())
    for frame in (b"[" * depth + b"]" * depth, b'{"jsonrpc":"2.0","method":"get_data","id":1,"params":' + b"[" * depth + b"]" * depth + b"}"):
        reply = json.loads(await server.handle_frame(frame))
        assert reply["error"]["code"] in (-32700, -32600)


def test_method_params_structs_forbid_unknown_fields() -> None:
    """A typo in a parameter is an InvalidParams error naming the field, not a silent default."""
    from ctxlifed.protocol._methods import decode_params

    with pytest.raises(E.InvalidParams) as ei:
        decode_params("recall", b'{"qurey":"x"}')
    assert "qurey" in ei.value.message
    with pytest.raises(E.MethodNotFound):
        decode_params("nope", b"{}")
    assert decode_params("hook", b'{"any":"thing","hook_event_name":"X"}') == {"any": "thing", "hook_event_name": "X"}
    with pytest.raises(E.InvalidParams):
        decode_params("hook", b"[1]")


def test_results_encode_compactly_without_newlines() -> None:
    """Responses are one compact line (NDJSON), even when strings hold newlines."""
    out = P.encode_result(1, {"stdout": "a\nb"})
    assert b"\n" not in out
    assert msgspec.json.decode(out) == {"jsonrpc": "2.0", "id": 1, "result": {"stdout": "a\nb"}}
