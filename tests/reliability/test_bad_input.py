"""Bad input over the real socket: the JSON-RPC table, a malformed corpus, fuzzing, hook payloads, recall text.

Matrix rows B1-B8 of docs/reliability.md. tests/test_protocol_conformance.py and
tests/test_protocol_framing.py pin the pure core in process with a stand-in dispatcher; here the
same shapes (and worse) go through a running daemon with its real service, in whole frames, byte
by byte and in random splits, and the daemon must stay alive with bounded memory and answer with
no internal error.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ._harness import (
    ALLOWED_CODES,
    INTERNAL_ERROR,
    SEED,
    RDaemon,
    check_reply,
    connect,
    exchange_raw,
    hook,
    make_daemon,
    pct,
    proc_stats,
    query,
    recv_line,
    run_shim_timed,
)
from .conftest import LONG

MAX = 1 << 20  # the daemon's default frame cap (Config.max_frame)
SLOW = pytest.mark.slow


@pytest.fixture(scope="module")
def shared() -> Iterator[RDaemon]:
    """One daemon for the read-mostly abuse tests of this module (saves a start per test)."""
    base = Path(tempfile.mkdtemp(prefix="cl-", dir="/tmp"))
    os.chmod(base, 0o700)
    (base / "claude" / "projects" / "p").mkdir(parents=True)
    d = make_daemon(base, CTXLIFED_TRANSCRIPT_ROOTS=str(base / "claude" / "projects"))
    d.start()
    rng = random.Random(SEED)
    texts = ["refactor the token bucket limiter", "错误：连接超时 in 数据库", "emoji 🚀 deploy ✅ done",
             "def f(x):\n    return x ** 2  # AND OR NOT NEAR", 'quote "unbalanced and * stars ^caret',
             "timeout, retry; backoff!", "ünïcödé naïve café", "std::vector<int> v; v.push_back(1);"]
    with connect(d.socket) as s:
        buf = bytearray()
        for i in range(120):
            p = hook("UserPromptSubmit", f"seed{i % 6}", f"/tmp/seedproj{i % 3}", prompt=f"{rng.choice(texts)} #{i}")
            s.sendall(json.dumps({"jsonrpc": "2.0", "id": i, "method": "hook", "params": p}).encode() + b"\n")
            assert "result" in json.loads(recv_line(s, buf) or b"{}")
    try:
        yield d
    finally:
        if d.proc is not None and d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait()
        shutil.rmtree(base, ignore_errors=True)


def _shape(obj: Any) -> Any:
    """Keep what the spec fixes: jsonrpc, id, result present (value varies), error code."""
    if isinstance(obj, list):
        return [_shape(o) for o in obj]
    if isinstance(obj, dict) and "error" in obj:
        return {"jsonrpc": obj.get("jsonrpc"), "id": obj.get("id"), "error": obj["error"].get("code")}
    if isinstance(obj, dict):
        return {"jsonrpc": obj.get("jsonrpc"), "id": obj.get("id"), "result": "*"}
    return obj


def ok(id_: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "result": "*"}


def err(code: int, id_: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "error": code}


NONE = "no reply"
# The spec's request shapes (jsonrpc.org/specification §4-7) with ctxlifed's real methods.
CONFORMANCE: list[tuple[str, bytes, Any]] = [
    ("positional params", b'{"jsonrpc":"2.0","method":"ping","params":[],"id":1}', ok(1)),
    ("named params", b'{"jsonrpc":"2.0","method":"hello","params":{"client":"t","protocol":1},"id":3}', ok(3)),
    ("positional where named needed", b'{"jsonrpc":"2.0","method":"recall","params":["x"],"id":4}', err(-32602, 4)),
    ("notification", b'{"jsonrpc":"2.0","method":"ping","params":{}}', NONE),
    ("notification no params", b'{"jsonrpc":"2.0","method":"ping"}', NONE),
    ("notification unknown method", b'{"jsonrpc":"2.0","method":"foobar"}', NONE),
    ("notification with bad params", b'{"jsonrpc":"2.0","method":"recall","params":{"qurey":1}}', NONE),
    ("unknown method", b'{"jsonrpc":"2.0","method":"foobar","id":"1"}', err(-32601, "1")),
    ("reserved rpc. method", b'{"jsonrpc":"2.0","method":"rpc.discover","id":"r"}', err(-32601, "r")),
    ("invalid json", b'{"jsonrpc":"2.0","method":"foobar,"params":"bar","baz]', err(-32700)),
    ("invalid request object", b'{"jsonrpc":"2.0","method":1,"params":"bar"}', err(-32600)),
    ("batch invalid json", b'[{"jsonrpc":"2.0","method":"ping","params":[1,2,4],"id":"1"},{"jsonrpc":"2.0","method"]', err(-32700)),
    ("empty array", b"[]", err(-32600)),
    ("invalid batch of one", b"[1]", [err(-32600)]),
    ("invalid batch", b"[1,2,3]", [err(-32600), err(-32600), err(-32600)]),
    ("mixed batch",
     b'[{"jsonrpc":"2.0","method":"ping","id":"1"},{"jsonrpc":"2.0","method":"hello","params":{"client":"n"}},'
     b'{"jsonrpc":"2.0","method":"status","params":{"limit":1},"id":"2"},{"foo":"boo"},'
     b'{"jsonrpc":"2.0","method":"foo.get","params":{"name":"myself"},"id":"5"},{"jsonrpc":"2.0","method":"hello","id":"9"}]',
     [ok("1"), ok("2"), err(-32600), err(-32601, "5"), ok("9")]),
    ("all notifications batch", b'[{"jsonrpc":"2.0","method":"ping"},{"jsonrpc":"2.0","method":"hello","params":{}}]', NONE),
    ("not an object", b"1", err(-32600)),
    ("string value", b'"x"', err(-32600)),
    ("null value", b"null", err(-32600)),
    ("true value", b"true", err(-32600)),
    ("jsonrpc missing", b'{"method":"ping","id":1}', err(-32600, 1)),
    ("jsonrpc 1.0", b'{"jsonrpc":"1.0","method":"ping","id":1}', err(-32600, 1)),
    ("jsonrpc as number", b'{"jsonrpc":2.0,"method":"ping","id":1}', err(-32600, 1)),
    ("method not string, no id", b'{"jsonrpc":"2.0","method":5}', err(-32600)),
    ("params scalar", b'{"jsonrpc":"2.0","method":"ping","params":7,"id":4}', err(-32600, 4)),
    ("params string", b'{"jsonrpc":"2.0","method":"ping","params":"x","id":5}', err(-32600, 5)),
    ("id null is a request", b'{"jsonrpc":"2.0","method":"ping","id":null}', ok(None)),
    ("string id", b'{"jsonrpc":"2.0","method":"ping","id":"abc"}', ok("abc")),
    ("negative id", b'{"jsonrpc":"2.0","method":"ping","id":-7}', ok(-7)),
    ("big integer id", b'{"jsonrpc":"2.0","method":"ping","id":123456789012345678901234567890}',
     ok(123456789012345678901234567890)),
    ("fractional id", b'{"jsonrpc":"2.0","method":"ping","id":1.5}', err(-32600)),
    ("bool id", b'{"jsonrpc":"2.0","method":"ping","id":true}', err(-32600)),
    ("array id", b'{"jsonrpc":"2.0","method":"ping","id":[1]}', err(-32600)),
    ("object id", b'{"jsonrpc":"2.0","method":"ping","id":{}}', err(-32600)),
    ("wrong params type", b'{"jsonrpc":"2.0","method":"recall","params":{"query":7},"id":7}', err(-32602, 7)),
    ("unknown param", b'{"jsonrpc":"2.0","method":"ping","params":{"x":1},"id":8}', err(-32602, 8)),
    ("hook params not object", b'{"jsonrpc":"2.0","method":"hook","params":[1,2],"id":9}', err(-32602, 9)),
    ("hook params missing", b'{"jsonrpc":"2.0","method":"hook","id":10}', err(-32602, 10)),
    ("invalid utf-8", b'{"jsonrpc":"2.0","method":"\xff","id":1}', err(-32700)),
    ("trailing garbage", b'{"jsonrpc":"2.0","method":"ping","id":1} x', err(-32700)),
    ("two values on one line", b'{"jsonrpc":"2.0","method":"ping","id":1}{"jsonrpc":"2.0","method":"ping","id":2}', err(-32700)),
    ("duplicate ids in a batch", b'[{"jsonrpc":"2.0","method":"ping","id":1},{"jsonrpc":"2.0","method":"ping","id":1}]', [ok(1), ok(1)]),
    ("batch with notification only answering requests",
     b'[{"jsonrpc":"2.0","method":"ping"},{"jsonrpc":"2.0","method":"ping","id":"b"}]', [ok("b")]),
    ("recall id out of int64 range", b'{"jsonrpc":"2.0","method":"recall","params":{"id":99999999999999999999},"id":11}', err(-32602, 11)),
    ("forget id out of int64 range", b'{"jsonrpc":"2.0","method":"forget","params":{"id":-99999999999999999999},"id":12}', err(-32602, 12)),
]


def test_jsonrpc_conformance_over_the_socket(shared: RDaemon, figures: Any) -> None:
    """Every spec request shape, sent to the running daemon, gets exactly the spec's response (whole JSON);
    a notification gets nothing (the next request's answer comes first)."""
    failures = []
    with connect(shared.socket) as s:
        buf = bytearray()
        for i, (name, data, expected) in enumerate(CONFORMANCE):
            sentinel = f"sentinel-{i}"
            s.sendall(data + b"\n" + json.dumps({"jsonrpc": "2.0", "method": "ping", "id": sentinel}).encode() + b"\n")
            first = json.loads(recv_line(s, buf) or b"null")
            if expected == NONE:
                got: Any = NONE if first.get("id") == sentinel else first
            else:
                check_reply(first)
                got = _shape(first)
                second = json.loads(recv_line(s, buf) or b"null")
                if second.get("id") != sentinel:
                    failures.append((name, "extra reply", second))
            if got != expected:
                failures.append((name, expected, got))
    figures.record("cases_passed", len(CONFORMANCE) - len(failures), n=len(CONFORMANCE))
    assert [] == failures


def _sentinel_exchange(path: str, data: bytes) -> tuple[list[Any], bool]:
    """Send one corpus item as a frame, then a ping; return the replies before the ping's, and
    whether the connection survived (the ping was answered)."""
    sentinel = "corpus-sentinel"
    payload = data + b"\n" + json.dumps({"jsonrpc": "2.0", "method": "ping", "id": sentinel}).encode() + b"\n"
    out = []
    for line in exchange_raw(path, payload, timeout=20):
        obj = json.loads(line)
        if isinstance(obj, dict) and obj.get("id") == sentinel:
            return out, True
        out.append(obj)
    return out, False


def _corpus() -> list[tuple[str, bytes, bool]]:
    """(name, frame, connection must survive)."""
    valid = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "hook",
                        "params": hook("UserPromptSubmit", "corpus", "/tmp", prompt="truncate me ü 🚀")},
                       ensure_ascii=False).encode()
    items: list[tuple[str, bytes, bool]] = []
    for cut in range(1, len(valid), 9):
        items.append((f"truncated@{cut}", valid[:cut], True))
    for bad in (b"\xff", b"\xc3\x28", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80"):
        items.append((f"invalid-utf8-in-string {bad!r}", b'{"jsonrpc":"2.0","method":"ping","id":"' + bad + b'"}', True))
        items.append((f"invalid-utf8-in-key {bad!r}", b'{"' + bad + b'":1,"jsonrpc":"2.0","method":"ping","id":1}', True))
        items.append((f"invalid-utf8-bare {bad!r}", bad, True))
    items += [
        ("raw NUL in string", b'{"jsonrpc":"2.0","method":"pi\x00ng","id":1}', True),
        ("raw NUL between tokens", b'{"jsonrpc":"2.0",\x00"method":"ping","id":1}', True),
        ("only NULs", b"\x00" * 64, True),
        ("escaped NUL in method", b'{"jsonrpc":"2.0","method":"ping\\u0000","id":1}', True),
        ("escaped NUL in hook text", b'{"jsonrpc":"2.0","method":"hook","id":2,"params":{"session_id":"nul",'
                                     b'"cwd":"/tmp\\u0000x","hook_event_name":"UserPromptSubmit","prompt":"a\\u0000b"}}', True),
        ("lone surrogate escape", b'{"jsonrpc":"2.0","method":"hook","id":3,"params":{"prompt":"\\ud800"}}', True),
        ("control chars", b'{"jsonrpc":"2.0","method":"ping","id":"\x01\x02\x1f"}', True),
        ("BOM", b"\xef\xbb\xbf" + b'{"jsonrpc":"2.0","method":"ping","id":1}', True),
        ("huge number", b'{"jsonrpc":"2.0","method":"status","params":{"limit":1e999},"id":1}', True),
        ("huge int param", b'{"jsonrpc":"2.0","method":"status","params":{"limit":' + b"9" * 4000 + b'},"id":1}', True),
    ]
    for v in (b"1", b"-1", b"1e999", b'"x"', b"null", b"true", b"false", b"[]", b"{}", b"[[]]", b"[{}]", b'"\\u0000"', b"[null]"):
        items.append((f"non-object {v.decode()}", v, True))
    for depth in (10**3, 10**4, 10**5):
        items.append((f"nested arrays {depth}", b"[" * depth + b"]" * depth, True))
        items.append((f"nested objects {depth}", b'{"a":' * depth + b"1" + b"}" * depth, True))
        items.append((f"nested in params {depth}", b'{"jsonrpc":"2.0","method":"hook","id":1,"params":{"x":'
                      + b"[" * depth + b"]" * depth + b"}}", True))
        items.append((f"nested in id {depth}", b'{"jsonrpc":"2.0","method":"ping","id":' + b"[" * depth + b"]" * depth + b"}", True))
        items.append((f"nested in batch item {depth}", b"[" + b"[" * depth + b"]" * depth + b"]", True))
        items.append((f"unclosed nesting {depth}", b"[" * depth, True))
    return items


def _padded_ping(size: int) -> bytes:
    head = b'{"jsonrpc":"2.0","method":"ping","id":"big","pad":"'
    tail = b'"}'
    return head + b"x" * (size - len(head) - len(tail)) + tail


def test_malformed_corpus_leaves_the_daemon_alive_and_bounded(shared: RDaemon, figures: Any) -> None:
    """Truncations, invalid UTF-8, NULs, nesting 10^3-10^5, non-objects, and frames at MAX-1, MAX,
    MAX+1, 10xMAX: only allowed error codes, 0 internal errors, the daemon alive, memory bounded."""
    before = proc_stats(shared.pid)
    codes: Counter[int] = Counter()
    problems = []
    corpus = _corpus()
    for name, data, must_survive in corpus:
        replies, survived = _sentinel_exchange(shared.socket, data)
        if must_survive and not survived:
            problems.append((name, "connection dropped"))
        for r in replies:
            try:
                for item in check_reply(r):
                    if "error" in item:
                        codes[item["error"]["code"]] += 1
            except AssertionError as exc:
                problems.append((name, str(exc)[:200]))
    # Frame size boundaries (whole frames; the cap counts the bytes before the newline).
    boundary = {}
    for label, size in (("MAX-1", MAX - 1), ("MAX", MAX), ("MAX+1", MAX + 1), ("10xMAX", 10 * MAX)):
        data = _padded_ping(size)
        t0 = time.monotonic()
        replies = [json.loads(x) for x in exchange_raw(shared.socket, data + b"\n", timeout=30)]
        ms = (time.monotonic() - t0) * 1000
        boundary[label] = (replies[0].get("result", {}).get("pong") is True) if replies and "result" in replies[0] \
            else (replies[0]["error"]["data"]["name"] if replies else "closed")
        figures.record(f"frame_{label}_ms", round(ms, 1), "ms", outcome=boundary[label])
    after = proc_stats(shared.pid)
    internal = codes.get(INTERNAL_ERROR, 0)
    unexpected = {c: n for c, n in codes.items() if c not in ALLOWED_CODES}
    hwm_delta = (after["hwm_kb"] - before["hwm_kb"]) / 1024
    figures.record("corpus_items", len(corpus) + 4)
    figures.record("error_code_histogram", dict(sorted(codes.items())))
    figures.record("internal_errors", internal)
    figures.record("daemon_alive", shared.alive())
    figures.record("rss_hwm_delta_mib", round(hwm_delta, 1), "MiB")
    figures.record("rss_after_mib", round(after["rss_kb"] / 1024, 1), "MiB")
    figures.record("largest_accepted_bytes", MAX if boundary["MAX"] is True else None, "bytes")
    assert [] == problems
    assert 0 == internal and {} == unexpected
    assert {"MAX-1": True, "MAX": True, "MAX+1": "frame_too_large", "10xMAX": "frame_too_large"} == boundary
    assert shared.alive() and shared.rpc("ping")["result"]["pong"]
    assert hwm_delta < 64, hwm_delta  # a few copies of a 1 MiB frame, not 10 MiB ones


# -- B3/B4: hypothesis over the socket, whole / byte-at-a-time / random splits --------------------------
METHOD_NAMES = ["hello", "ping", "hook", "status", "recall", "phase.set", "forget", "nope", "rpc.x", ""]
PARAM_KEYS = ["query", "id", "session", "project", "cwd", "all_projects", "limit", "cap_tokens", "phase", "where",
              "survival", "client", "version", "protocol", "session_id", "hook_event_name", "prompt",
              "transcript_path", "tool_name", "tool_input", "tool_response", "context_tokens", "model", "source"]
json_leaf = (st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
             | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=24))
json_value = st.recursive(json_leaf, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4),
                          max_leaves=10)
params_st = st.dictionaries(st.sampled_from(PARAM_KEYS), json_value, max_size=6) | json_value
request_st = st.fixed_dictionaries(
    {"jsonrpc": st.sampled_from(["2.0", "2.0", "2.0", "1.0"]),
     "method": st.sampled_from(METHOD_NAMES) | st.text(max_size=8).filter(lambda m: m != "shutdown")},
    optional={"params": params_st,
              "id": st.integers(min_value=-(2**64), max_value=2**64) | st.text(max_size=6) | st.none() | st.floats() | st.booleans()})


def _encode(v: Any) -> bytes:
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False, allow_nan=True).encode("utf-8", "surrogatepass")


frame_st = st.one_of(
    request_st.map(_encode),
    st.lists(request_st, min_size=0, max_size=5).map(_encode),
    json_value.map(_encode),
    st.binary(max_size=64).map(lambda b: b.replace(b"\n", b" ")),
)
split_st = st.one_of(st.just("whole"), st.just("bytes"), st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=40))


def _send_split(s: socket.socket, data: bytes, split: Any) -> None:
    if split == "whole":
        s.sendall(data)
    elif split == "bytes":
        for i in range(len(data)):
            s.sendall(data[i : i + 1])
    else:
        i = 0
        k = 0
        while i < len(data):
            n = split[k % len(split)]
            s.sendall(data[i : i + n])
            i += n
            k += 1


_FUZZ_CODES: Counter[int] = Counter()
_FUZZ_N = [0]


@pytest.mark.parametrize("examples", [300, pytest.param(3000, marks=SLOW)], ids=["fast", "long"])
def test_fuzz_frames_through_decoder_and_dispatcher(shared: RDaemon, figures: Any, examples: int) -> None:
    """Random JSON-RPC traffic (valid, invalid, batches, garbage) split whole, byte by byte or randomly:
    every reply is valid JSON-RPC with an allowed code, 0 internal errors, the daemon alive."""
    _FUZZ_CODES.clear()
    _FUZZ_N[0] = 0
    before = proc_stats(shared.pid)

    @settings(max_examples=examples, deadline=None, derandomize=not LONG, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large])
    @given(frames=st.lists(frame_st, min_size=1, max_size=4), split=split_st)
    def run(frames: list[bytes], split: Any) -> None:
        _FUZZ_N[0] += 1
        data = b"\n".join(frames) + b"\n"
        with connect(shared.socket, timeout=20) as s:
            _send_split(s, data, split)
            s.shutdown(socket.SHUT_WR)
            buf = bytearray()
            while (line := recv_line(s, buf, timeout=20)) is not None:
                for item in check_reply(json.loads(line)):
                    if "error" in item:
                        _FUZZ_CODES[item["error"]["code"]] += 1
                        assert item["error"]["code"] in ALLOWED_CODES, item

    try:
        run()
    finally:
        after = proc_stats(shared.pid)
        figures.record("examples_run", _FUZZ_N[0])
        figures.record("error_code_histogram", dict(sorted(_FUZZ_CODES.items())))
        figures.record("internal_errors", _FUZZ_CODES.get(INTERNAL_ERROR, 0))
        figures.record("rss_delta_mib", round((after["rss_kb"] - before["rss_kb"]) / 1024, 1), "MiB")
        figures.record("daemon_alive", shared.alive())
    assert shared.alive() and shared.rpc("ping")["result"]["pong"]


# -- B8: recall with arbitrary text -----------------------------------------------------------------------
RECALL_TOKENS = list('"*^:()-+{}[]#\\\'“”') + ["NEAR", "NEAR(", "AND", "OR", "NOT", "phase:", "phase:design", "kind:",
                                               "type:error", "id:", "id:1", "#3", "session:", "session:seed1", "--all",
                                               "scope:all", "decisions", "timeline", "lessons", "错误", "🚀", "x*", "^a"]
recall_text = st.lists(st.text(alphabet=st.characters(codec="utf-8"), max_size=12) | st.sampled_from(RECALL_TOKENS),
                       max_size=8).flatmap(lambda parts: st.sampled_from([" ", "", "\t"]).map(lambda sep: sep.join(parts)))
recall_params = st.fixed_dictionaries(
    {"query": recall_text},
    optional={"limit": st.integers(min_value=-5, max_value=10**6), "cap_tokens": st.integers(min_value=-5, max_value=10**6),
              "all_projects": st.booleans(), "session": st.text(max_size=10), "project": st.text(max_size=10),
              "cwd": st.sampled_from(["/tmp/seedproj0", "/", "relative", "/tmp/../tmp/seedproj1", ""])})


@pytest.mark.parametrize("examples", [200, pytest.param(5000, marks=SLOW)], ids=["fast", "long"])
def test_recall_arbitrary_text_never_an_internal_error(shared: RDaemon, figures: Any, examples: int) -> None:
    """Any text (FTS5 syntax, quotes, CJK, emoji, filters) and any limits: an answer or a typed error."""
    codes: Counter[Any] = Counter()
    ms: list[float] = []
    s = connect(shared.socket, timeout=20)
    buf = bytearray()

    @settings(max_examples=examples, deadline=None, derandomize=not LONG, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(params=recall_params)
    def run(params: dict[str, Any]) -> None:
        t0 = time.perf_counter()
        s.sendall(json.dumps({"jsonrpc": "2.0", "method": "recall", "params": params, "id": 1}).encode() + b"\n")
        reply = json.loads(recall_line := recv_line(s, buf, timeout=20) or b"null")
        ms.append((time.perf_counter() - t0) * 1000)
        (item,) = check_reply(reply)
        code = item["error"]["code"] if "error" in item else "ok"
        codes[code] += 1
        assert code != INTERNAL_ERROR, (params, recall_line)
        assert code == "ok" or code in ALLOWED_CODES

    try:
        run()
    finally:
        s.close()
        figures.record("examples_run", sum(codes.values()))
        figures.record("outcomes", dict(codes))
        figures.record("internal_errors", codes.get(INTERNAL_ERROR, 0))
        figures.record("recall_p50_ms", round(pct(ms, 50), 2), "ms", n=len(ms))
        figures.record("recall_p99_ms", round(pct(ms, 99), 2), "ms", n=len(ms))


# -- hook payloads: a clear answer, nothing stored half -----------------------------------------------------
def _write_transcripts(root: Path) -> dict[str, Path]:
    rng = random.Random(SEED + 1)
    msg = {"type": "assistant", "uuid": "u1", "timestamp": "2026-11-29T10:00:00Z", "sessionId": "t",
           "message": {"role": "assistant", "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": "All tests pass now."}],
                       "usage": {"input_tokens": 1200, "output_tokens": 40, "cache_read_input_tokens": 30000,
                                 "cache_creation_input_tokens": 0}}}
    line = json.dumps(msg).encode() + b"\n"
    out = {}
    out["truncated"] = root / "truncated.jsonl"
    out["truncated"].write_bytes(line * 3 + line[: len(line) // 2])
    out["garbled"] = root / "garbled.jsonl"
    out["garbled"].write_bytes(bytes(rng.randrange(256) for _ in range(50_000)) + b"\n\x00\xff{]\n" + line)
    out["huge"] = root / "huge.jsonl"
    with open(out["huge"], "wb") as f:
        for _ in range((20 << 20) // len(line) + 1):
            f.write(line)
    out["empty"] = root / "empty.jsonl"
    out["empty"].write_bytes(b"")
    out["missing"] = root / "missing.jsonl"
    out["binary_lines"] = root / "binary.jsonl"
    out["binary_lines"].write_bytes(b'{"type":"assistant","message":"\x00\x01\xfe"}\n' * 100 + line)
    return out


def test_hook_payloads_get_a_clear_answer_and_nothing_is_stored_half(shared: RDaemon, figures: Any) -> None:
    """Missing fields, wrong types, unknown events, binary text, 10 MB responses (socket and shim), and
    truncated/garbled/huge/missing transcripts: each gets a result or a typed error within the shim's
    budget; the store holds each event whole or not at all."""
    root = Path(shared.env["CTXLIFED_TRANSCRIPT_ROOTS"]) / "p"
    tr = _write_transcripts(root)
    base = hook("UserPromptSubmit", "payload", "/tmp/payloadproj", prompt="hello")
    cases: list[tuple[str, Any]] = []
    for k in ("session_id", "cwd", "hook_event_name", "transcript_path", "prompt"):
        cases.append((f"missing {k}", {x: v for x, v in base.items() if x != k}))
    cases.append(("empty object", {}))
    for k, v in (("session_id", 123), ("session_id", None), ("session_id", "../../etc"), ("cwd", ["a"]), ("cwd", 5),
                 ("hook_event_name", {"x": 1}), ("prompt", 5), ("prompt", None), ("transcript_path", 7),
                 ("context_tokens", "many"), ("context_tokens", 10**30), ("model", 7), ("tool_input", "str"),
                 ("tool_response", 12), ("tool_name", []), ("agent_id", {"a": 1})):
        cases.append((f"wrong type {k}={json.dumps(v)[:20]}", dict(base, **{k: v})))
    for ev in ("FutureEvent", "", "../../etc/passwd", "x" * 5000, "SessionEnd", "PreCompact", "Notification"):
        cases.append((f"event {ev[:20]!r}", dict(base, hook_event_name=ev)))
    cases.append(("tool events, wrong shapes", hook("PostToolUse", "payload", "/tmp/payloadproj", tool_name="Bash",
                                                    tool_input={"command": ["ls"]}, tool_response={"stdout": {"x": 1}})))
    cases.append(("binary-ish text", dict(base, prompt="\u0000\u0001\u001f\u007f\u0080\u00ff\ufffe\uffff 🚀 \u202e")))
    big = "y" * (10 << 20)
    cases.append(("10 MB tool response (socket)", hook("PostToolUse", "payload", "/tmp/payloadproj", tool_name="Bash",
                                                       tool_input={"command": "cat big"}, tool_response={"stdout": big})))
    for name, path in tr.items():
        cases.append((f"transcript {name}", dict(base, hook_event_name="Stop", transcript_path=str(path), session_id=f"tr-{name}")))
    cases.append(("transcript relative", dict(base, transcript_path="p/huge.jsonl")))
    answers: Counter[str] = Counter()
    problems = []
    worst_ms = 0.0
    for i, (name, payload) in enumerate(cases):
        rid = f"payload-{i}"
        data = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "hook", "params": payload}).encode() + b"\n"
        t0 = time.monotonic()
        replies = exchange_raw(shared.socket, data, timeout=30)
        took = (time.monotonic() - t0) * 1000
        worst_ms = max(worst_ms, took) if "10 MB" not in name else worst_ms
        if not replies:
            problems.append((name, "no answer"))
            continue
        (r,) = check_reply(json.loads(replies[0]))
        kind = "result" if "result" in r else r["error"].get("data", {}).get("name", str(r["error"]["code"]))
        answers[kind] += 1
        if kind == "internal_error":
            problems.append((name, r))
        stored = query(shared.db, "SELECT count(*) FROM events WHERE rid = ?", (rid,))[0][0]
        if kind == "result" and stored != 1:
            problems.append((name, f"acknowledged but {stored} stored"))
        if kind != "result" and stored != 0:
            problems.append((name, f"refused ({kind}) but {stored} stored"))
        if took > 1500 and "10 MB" not in name:
            problems.append((name, f"took {took:.0f} ms, over the shim's 1.5 s budget"))
    # The same 10 MB response through the shim: cut to fit, stored, and the cut is marked.
    env = dict(shared.env, CTXLIFED_DAEMON_CMD="/bin/true")
    r, shim_ms = run_shim_timed(hook("PostToolUse", "payload-shim", "/tmp/payloadproj", tool_name="Bash",
                                     tool_input={"command": "cat big"}, tool_response={"stdout": big}), env)
    stored_big = query(shared.db, "SELECT a.chars, a.text LIKE '%cut by the ctxlifed shim%' FROM archive a "
                                  "JOIN events e ON e.id = a.event_id WHERE e.session = 'payload-shim'")
    # Whole or nothing: every archived item belongs to a stored event, every named event to a session.
    orphans = query(shared.db, "SELECT count(*) FROM archive WHERE event_id IS NOT NULL AND event_id NOT IN (SELECT id FROM events)")[0][0]
    sessionless = query(shared.db, "SELECT count(*) FROM events WHERE session != '_invalid' AND session NOT IN (SELECT session FROM sessions)")[0][0]
    figures.record("cases", len(cases) + 1)
    figures.record("answers", dict(answers))
    figures.record("internal_errors", answers.get("internal_error", 0))
    figures.record("half_stored", orphans + sessionless)
    figures.record("slowest_answer_ms", round(worst_ms, 1), "ms", note="10 MB socket case excluded (frame cap)")
    figures.record("shim_10mb_wall_ms", round(shim_ms, 1), "ms")
    assert [] == [name for name, _why in problems], problems
    assert (0, b"") == (r.returncode, r.stdout)
    assert stored_big and all(ok_ for _chars, ok_ in stored_big), stored_big
    assert (0, 0) == (orphans, sessionless)
    assert shared.alive()


@pytest.mark.parametrize("kind", ["directory", "nested_line"])
def test_transcript_that_breaks_the_reader_costs_no_event(rdaemon: Any, short_tmp: Path, figures: Any, kind: str) -> None:
    """A transcript path that is a directory, or a transcript line nested 5000 deep: the event is still
    answered and stored, and so is the session's next event."""
    d = rdaemon(CTXLIFED_TRANSCRIPT_ROOTS=str(short_tmp))
    d.start()
    path = short_tmp / f"{kind}.jsonl"
    if kind == "directory":
        path.mkdir()
    else:
        ok_line = b'{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"ok"}]}}\n'
        path.write_bytes(b'{"type":"assistant","message":' + b"[" * 5000 + b"]" * 5000 + b"}\n" + ok_line)
    outcomes = []
    for i in range(2):
        r = d.rpc("hook", hook("Stop", f"reader-{kind}", "/tmp", transcript_path=str(path)), id_=f"{kind}-{i}")
        outcomes.append("result" if "result" in r else r["error"]["data"]["name"])
    stored = query(d.db, "SELECT count(*) FROM events WHERE session = ?", (f"reader-{kind}",))[0][0]
    figures.record("outcomes", outcomes)
    figures.record("events_stored", stored, n=2)
    assert ["result", "result"] == outcomes
    assert 2 == stored


def test_fifo_transcript_does_not_wedge_the_session(rdaemon: Any, short_tmp: Path, figures: Any) -> None:
    """A transcript path that is a FIFO is refused at once; the session's next event is answered."""
    d = rdaemon(CTXLIFED_TRANSCRIPT_ROOTS=str(short_tmp))
    d.start()
    fifo = short_tmp / "wedge.jsonl"
    os.mkfifo(fifo)
    answered = 0
    try:
        for i in range(2):
            try:
                r = d.rpc("hook", hook("Stop", "fifo", "/tmp", transcript_path=str(fifo)), id_=i, timeout=0.5)
                answered += "result" in r
            except (TimeoutError, OSError):
                pass
    finally:
        figures.record("answered", answered, n=2)
        try:  # release the blocked open so the daemon can stop
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
    assert 2 == answered


# -- text that is not valid Unicode: stored with U+FFFD, over the socket and from the spool ---------------------
_NOT_UNICODE = {  # prompt bytes inside the JSON string -> what the stored prompt must read
    "lone high surrogate escape": (b"cut emoji \\ud83d", "cut emoji \ufffd"),
    "lone low surrogate escape": (b"\\ude00 tail", "\ufffd tail"),
    "surrogate as raw bytes": (b"cesu \xed\xa0\xbd!", "cesu \ufffd!"),  # the shim's surrogatepass
    "invalid utf-8 byte": (b"bad \xff byte", "bad \ufffd byte"),
}


def _hook_bytes(session: str, prompt: bytes) -> bytes:
    return (b'{"session_id":"' + session.encode() + b'","cwd":"/tmp/uniproj","hook_event_name":"UserPromptSubmit",'
            b'"transcript_path":"","prompt":"' + prompt + b'"}')


def test_text_that_is_not_valid_unicode_is_stored_with_replacement(rdaemon: Any, figures: Any) -> None:
    """A hook payload with a lone surrogate (Node's JSON.stringify cutting an emoji) or bytes that are not
    UTF-8 is answered and stored with U+FFFD in their place, over the socket and from the spool (they got
    -32700 / -32603 with a traceback, and a spooled copy was skipped). Other methods answer -32602."""
    d = rdaemon()
    d.data_dir.mkdir(parents=True, mode=0o700, exist_ok=True)
    spool = b""
    for i, (name, (raw, _want)) in enumerate(_NOT_UNICODE.items()):
        spool += b'{"rid":"spool-' + str(i).encode() + b'","ts":1796000000.5,"payload":' + _hook_bytes("uni-spool", raw) + b"}\n"
    spool += b"not json at all\n"  # still skipped, and the lines after it still read
    spool += b'{"rid":"spool-last","ts":1796000001.0,"payload":' + _hook_bytes("uni-spool", b"plain") + b"}\n"
    (d.data_dir / "spool.jsonl").write_bytes(spool)
    os.chmod(d.data_dir / "spool.jsonl", 0o600)
    d.start()
    socket_answers: Counter[str] = Counter()
    problems = []
    for i, (name, (raw, want)) in enumerate(_NOT_UNICODE.items()):
        rid = f"uni-{i}"
        data = b'{"jsonrpc":"2.0","id":"' + rid.encode() + b'","method":"hook","params":' + _hook_bytes("uni-sock", raw) + b"}\n"
        (r,) = check_reply(json.loads(exchange_raw(d.socket, data)[0]))
        socket_answers["result" if "result" in r else str(r["error"]["code"])] += 1
        for source, key in (("socket", rid), ("spool", f"spool-{i}")):
            rows = query(d.db, "SELECT payload FROM events WHERE rid = ?", (key,))
            got = json.loads(rows[0][0])["prompt"] if rows else None
            if got != want:
                problems.append((name, source, got))
    spool_last = query(d.db, "SELECT count(*) FROM events WHERE rid = 'spool-last'")[0][0]
    bad_status = json.loads(exchange_raw(d.socket, b'{"jsonrpc":"2.0","id":9,"method":"status","params":{"session":"\xff"}}\n')[0])
    figures.record("socket_answers", dict(socket_answers))
    figures.record("stored_with_replacement", 2 * len(_NOT_UNICODE) - len(problems), n=2 * len(_NOT_UNICODE))
    figures.record("status_bad_utf8_code", bad_status.get("error", {}).get("code"))
    assert [] == problems
    assert {"result": len(_NOT_UNICODE)} == dict(socket_answers)
    assert 1 == spool_last
    assert -32602 == bad_status["error"]["code"] and "traceback" not in json.dumps(bad_status).lower()
    assert not d.log_events("request_failed")
    assert d.alive()
