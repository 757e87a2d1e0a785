"""A fake Anthropic Messages API for driving the real Claude Code CLI offline (tests only).

Rules:
- Binds 127.0.0.1 only, on a free port chosen at bind time: the port is known as soon as the object
  is constructed, so nobody waits for readiness. Serves from a daemon thread of the test process
  (or standalone: ``python tests/fakeapi.py --script S.json --port-file F``; F appears atomically
  once listening).
- Replies follow a script of turns::

      {"turns": [{"text": "…", "tool_use": {"name": "Bash", "input": {…}}},
                 {"tool_uses": [{…}, {…}]}, {"text": "done", "usage": {…}}, {"error": {"status": 529}}],
       "default_text": "OK.", "compact_summary": "<summary>…</summary>",
       "subagent_turns": [...], "side_text": "…"}

  ``{{KEY}}`` in the script is replaced from ``vars``. ``{{LAST:<regex>}}`` in a turn is replaced, when
  the turn is served, by the first group of ``<regex>`` in the request's last user message (tool results
  included; '' when absent); a string that is only ``{{LAST_INT:<regex>}}`` becomes that number. Each ``/v1/messages`` request is classified:
  compaction (its last user message is the summarisation prompt) -> ``compact_summary``; no tools ->
  side request (``side_text``); ``x-claude-code-agent-id`` header -> next subagent turn; otherwise
  ``main`` -> next turn (then ``default_text``).
- Streams SSE (message_start, content_block_*, message_delta, message_stop) when asked, plain JSON
  otherwise. Usage looks like a cached conversation so Claude Code's token bookkeeping is realistic.
- Every request is recorded (kind, turn index, headers without secrets, body) for assertions.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

COMPACT_MARKERS = (
    "your task is to create a detailed summary",
    "critical: respond with text only",
    "create a detailed summary of the conversation",
)
SECRET_HEADERS = {"x-api-key", "authorization", "proxy-authorization", "cookie"}
_ids = itertools.count(1)


def text_of(content: Any) -> str:
    """All text in a message content (string or blocks, tool results included)."""
    if isinstance(content, str):
        return content
    out: list[str] = []
    if isinstance(content, list):
        for b in content:
            if not isinstance(b, dict):
                continue
            if b.get("type") == "text":
                out.append(str(b.get("text", "")))
            elif b.get("type") == "tool_result":
                out.append(text_of(b.get("content", "")))
            elif b.get("type") == "tool_use":
                out.append(json.dumps(b.get("input", {})))
    return "\n".join(out)


def _subst(obj: Any, vars_: dict[str, str]) -> Any:
    if isinstance(obj, str):
        for k, v in vars_.items():
            obj = obj.replace("{{" + k + "}}", v)
        return obj
    if isinstance(obj, list):
        return [_subst(x, vars_) for x in obj]
    if isinstance(obj, dict):
        return {k: _subst(v, vars_) for k, v in obj.items()}
    return obj


_LAST_RE = re.compile(r"\{\{LAST(_INT)?:(.+?)\}\}", re.S)


def _from_last(obj: Any, last: str) -> Any:
    """``{{LAST:<regex>}}`` / ``{{LAST_INT:<regex>}}`` filled from ``last`` (see the module rules)."""
    if isinstance(obj, str):
        def fill(m: re.Match[str]) -> str:
            found = re.search(m.group(2), last, re.M)
            return found.group(1) if found else ""
        whole = _LAST_RE.fullmatch(obj)
        if whole and whole.group(1):
            v = fill(whole)
            return int(v) if v.isdigit() else v
        return _LAST_RE.sub(fill, obj)
    if isinstance(obj, list):
        return [_from_last(x, last) for x in obj]
    if isinstance(obj, dict):
        return {k: _from_last(v, last) for k, v in obj.items()}
    return obj


def _last_user_text(body: dict[str, Any]) -> str:
    for m in reversed(body.get("messages") or []):
        if isinstance(m, dict) and m.get("role") == "user":
            return text_of(m.get("content"))
    return ""


def _tokens(obj: Any) -> int:
    return max(1, len(json.dumps(obj, ensure_ascii=False)) // 4)


@dataclass
class Request:
    seq: int
    path: str
    kind: str  # main | subagent | compact | side | count_tokens | other
    headers: dict[str, str]
    body: dict[str, Any] | None
    turn: int | None = None
    reply: dict[str, Any] = field(default_factory=dict)

    def text(self) -> str:
        """System prompt and every message's text: where hook context would show up."""
        if not self.body:
            return ""
        sys_ = self.body.get("system")
        parts = [text_of(sys_) if isinstance(sys_, list) else str(sys_ or "")]
        for m in self.body.get("messages") or []:
            if isinstance(m, dict):
                parts.append(text_of(m.get("content")))
        return "\n".join(parts)

    def last_user_text(self) -> str:
        for m in reversed((self.body or {}).get("messages") or []):
            if isinstance(m, dict) and m.get("role") == "user":
                return text_of(m.get("content"))
        return ""


class FakeAnthropic:
    def __init__(self, script: dict[str, Any] | None = None, vars: dict[str, str] | None = None) -> None:
        s = _subst(script or {}, vars or {})
        self.turns: list[dict[str, Any]] = list(s.get("turns", []))
        self.sub_turns: list[dict[str, Any]] = list(s.get("subagent_turns", []))
        self.default_text: str = s.get("default_text", "OK.")
        self.sub_default_text: str = s.get("subagent_default_text", "Subagent finished.")
        self.side_text: str = s.get("side_text", "Side answer.")
        self.compact_summary: str = s.get(
            "compact_summary",
            "<analysis>fake analysis</analysis>\n<summary>1. Primary Request and Intent: FAKE-COMPACT-SUMMARY.\n"
            "2. Pending Tasks: none.</summary>")
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._turn = 0
        self._sub = 0
        self._prev_total: dict[str, int] = {}
        self._seq = itertools.count(1)
        self.server = _Server(("127.0.0.1", 0), _Handler, self)
        self.port = self.server.server_address[1]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeAnthropic:
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"fakeapi:{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- views for assertions -------------------------------------------------------------------
    def of_kind(self, *kinds: str) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.kind in kinds]

    @property
    def turns_used(self) -> int:
        return self._turn

    # -- scripting ------------------------------------------------------------------------------
    def classify(self, body: dict[str, Any], headers: dict[str, str]) -> str:
        last = ""
        for m in reversed(body.get("messages") or []):
            if isinstance(m, dict) and m.get("role") == "user":
                last = text_of(m.get("content")).lower()
                break
        if any(mk in last for mk in COMPACT_MARKERS):
            return "compact"
        if not body.get("tools"):
            return "side"
        if headers.get("x-claude-code-agent-id"):
            return "subagent"
        return "main"

    def next_turn(self, kind: str) -> tuple[int | None, dict[str, Any]]:
        with self._lock:
            if kind == "main":
                if self._turn < len(self.turns):
                    self._turn += 1
                    return self._turn - 1, self.turns[self._turn - 1]
                return None, {"text": self.default_text}
            if self._sub < len(self.sub_turns):
                self._sub += 1
                return self._sub - 1, self.sub_turns[self._sub - 1]
            return None, {"text": self.sub_default_text}

    def usage(self, body: dict[str, Any], blocks: list[dict[str, Any]], kind: str,
              override: dict[str, Any] | None) -> dict[str, Any]:
        total = _tokens({"s": body.get("system"), "t": body.get("tools"), "m": body.get("messages")})
        out_tok = _tokens([b.get("text") or b.get("input") for b in blocks])
        if kind in ("main", "subagent"):
            with self._lock:
                prev = self._prev_total.get(kind, 0)
                self._prev_total[kind] = total
            cache_read = min(prev, total)
            new = total - cache_read
            inp = max(1, min(new, max(3, new // 10)))
            u = {"input_tokens": inp, "cache_creation_input_tokens": max(0, new - inp),
                 "cache_read_input_tokens": cache_read, "output_tokens": out_tok}
        else:
            u = {"input_tokens": total, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                 "output_tokens": out_tok}
        u["service_tier"] = "standard"
        u.update(override or {})
        return u


def build_blocks(turn: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    blocks: list[dict[str, Any]] = []
    if turn.get("text"):
        blocks.append({"type": "text", "text": turn["text"]})
    uses = ([turn["tool_use"]] if turn.get("tool_use") else []) + list(turn.get("tool_uses", []))
    for tu in uses:
        blocks.append({"type": "tool_use", "id": tu.get("id") or f"toolu_fake{next(_ids):08d}",
                       "name": tu["name"], "input": tu.get("input", {})})
    if not blocks:
        blocks.append({"type": "text", "text": "OK."})
    return blocks, turn.get("stop_reason") or ("tool_use" if uses else "end_turn")


def sse_events(msg_id: str, model: str, blocks: list[dict[str, Any]], stop: str, usage: dict[str, Any]) -> bytes:
    out: list[str] = []

    def ev(name: str, obj: dict[str, Any]) -> None:
        out.append(f"event: {name}\ndata: {json.dumps(obj)}\n\n")

    ev("message_start", {"type": "message_start", "message": {
        "id": msg_id, "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {**usage, "output_tokens": 1}}})
    ev("ping", {"type": "ping"})
    for i, b in enumerate(blocks):
        if b["type"] == "text":
            ev("content_block_start", {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}})
            t = b["text"]
            for j in range(0, len(t), 64):
                ev("content_block_delta", {"type": "content_block_delta", "index": i,
                                           "delta": {"type": "text_delta", "text": t[j:j + 64]}})
        else:
            ev("content_block_start", {"type": "content_block_start", "index": i, "content_block": {
                "type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}})
            js = json.dumps(b["input"])
            for j in range(0, len(js), 64):
                ev("content_block_delta", {"type": "content_block_delta", "index": i,
                                           "delta": {"type": "input_json_delta", "partial_json": js[j:j + 64]}})
        ev("content_block_stop", {"type": "content_block_stop", "index": i})
    ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                         "usage": {k: usage[k] for k in ("input_tokens", "cache_creation_input_tokens",
                                                         "cache_read_input_tokens", "output_tokens")}})
    ev("message_stop", {"type": "message_stop"})
    return "".join(out).encode()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], handler: type, api: FakeAnthropic) -> None:
        super().__init__(addr, handler)
        self.api = api


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, fmt: str, *args: Any) -> None:
        pass

    def _body(self) -> dict[str, Any] | None:
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            v = json.loads(raw) if raw else None
        except ValueError:
            return None
        return v if isinstance(v, dict) else None

    def _json(self, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", f"req_fake{next(_ids):08d}")
        self.end_headers()
        self.wfile.write(data)

    def _record(self, kind: str, body: dict[str, Any] | None, turn: int | None = None) -> Request:
        api = self.server.api
        hdrs = {k.lower(): ("<redacted>" if k.lower() in SECRET_HEADERS else v) for k, v in self.headers.items()}
        r = Request(seq=next(api._seq), path=urlsplit(self.path).path, kind=kind, headers=hdrs, body=body, turn=turn)
        with api._lock:
            api.requests.append(r)
        return r

    def do_POST(self) -> None:  # noqa: N802
        api = self.server.api
        path = urlsplit(self.path).path.rstrip("/")
        body = self._body()
        if path == "/v1/messages/count_tokens":
            self._record("count_tokens", body)
            self._json(200, {"input_tokens": _tokens(body)})
            return
        if path != "/v1/messages":
            self._record("other", body)
            self._json(200, {})
            return
        if body is None:
            self._record("bad_request", None)
            self._json(400, {"type": "error", "error": {"type": "invalid_request_error", "message": "bad body"}})
            return
        hdrs = {k.lower(): v for k, v in self.headers.items()}
        kind = api.classify(body, hdrs)
        idx: int | None = None
        if kind == "compact":
            turn: dict[str, Any] = {"text": api.compact_summary}
        elif kind == "side":
            turn = {"text": api.side_text}
        else:
            idx, turn = api.next_turn(kind)
            if "{{LAST" in json.dumps(turn):
                turn = _from_last(turn, _last_user_text(body))
        rec = self._record(kind, body, idx)
        if turn.get("error"):
            e = turn["error"]
            rec.reply = {"error": e}
            self._json(int(e.get("status", 500)), {"type": "error", "error": {
                "type": e.get("type", "api_error"), "message": e.get("message", "fake error")}})
            return
        blocks, stop = build_blocks(turn)
        usage = api.usage(body, blocks, kind, turn.get("usage"))
        rec.reply = {"content": blocks, "stop_reason": stop, "usage": usage}
        msg_id = f"msg_fake{next(_ids):08d}"
        model = str(body.get("model") or "claude-fake")
        if not body.get("stream"):
            self._json(200, {"id": msg_id, "type": "message", "role": "assistant", "model": model, "content": blocks,
                             "stop_reason": stop, "stop_sequence": None, "usage": usage})
            return
        data = sse_events(msg_id, model, blocks, stop, usage)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", f"req_fake{next(_ids):08d}")
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_GET(self) -> None:  # noqa: N802
        self._record("other", None)
        self._json(200, {})

    def do_HEAD(self) -> None:  # noqa: N802
        self._record("other", None)
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()


def main() -> None:
    ap = argparse.ArgumentParser(description="fake Anthropic Messages API (tests)")
    ap.add_argument("--script")
    ap.add_argument("--port-file")
    ap.add_argument("--var", action="append", default=[])
    a = ap.parse_args()
    script = json.load(open(a.script)) if a.script else {}
    api = FakeAnthropic(script, dict(v.split("=", 1) for v in a.var))
    if a.port_file:
        tmp = a.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(api.port))
        os.replace(tmp, a.port_file)
    print(f"fakeapi listening on {api.url}", file=sys.stderr, flush=True)
    try:
        api.server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
