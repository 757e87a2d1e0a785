"""A tiny stdio MCP server for the e2e tests: one tool, ``tail``, answering N log lines (argv[1]) and one ERROR."""

import json
import sys

BIG = "\n".join(f"2026-11-29 10:00:{i % 60:02d} INFO worker {i} processed batch {i * 7}" for i in range(int(sys.argv[1]))) + \
    "\n2026-11-29 10:01:00 ERROR worker 7 failed: connection reset by peer\n"


def send(obj: object) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    mid, meth = m.get("id"), m.get("method")
    if meth == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": m.get("params", {}).get("protocolVersion", "2024-11-05"),
            "capabilities": {"tools": {}}, "serverInfo": {"name": "logs", "version": "1"}}})
    elif meth == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [{
            "name": "tail", "description": "tail the logs",
            "inputSchema": {"type": "object", "properties": {"n": {"type": "number"}}}}]}})
    elif meth == "tools/call":
        send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": BIG}], "isError": False}})
    elif mid is not None:
        send({"jsonrpc": "2.0", "id": mid, "result": {}})
