"""The server shell (server/listener.py) in process, on real Unix sockets: fairness of the raw-socket
fast path. (Limits, eviction, slowloris, EMFILE and stop are covered end to end in tests/reliability.)"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from ctxlifed.server.listener import Limits, Server

pytestmark = pytest.mark.anyio
PING = b'{"jsonrpc":"2.0","method":"ping","id":1}\n'


async def _pong(method: str, params: bytes, rid: Any = None) -> Any:
    return {"pong": True}  # answers without awaiting anything: the worst case for fairness


def _listening(path: str) -> socket.socket:
    """A non-blocking listening Unix socket at ``path``, as the daemon hands the server one."""
    lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lsock.bind(path)
    lsock.listen(16)
    lsock.setblocking(False)
    return lsock


async def test_a_pipelining_client_does_not_starve_another(short_tmp: Path) -> None:
    """A client that always has the next request ready (it pipelines pings as fast as it can and
    reads the answers) never makes the server wait for data: without a yield every few frames its
    task would hold the event loop, and nobody else would be accepted or answered."""
    server = Server(_pong, Limits())
    path = str(short_tmp / "s.sock")
    lsock = _listening(path)
    stop = threading.Event()
    deadline = time.monotonic() + 5  # the flood ends by itself: a starved loop then shows as a failure
    answered: list[int] = []

    def flood() -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.settimeout(0.5)

        def drain() -> None:
            while not stop.is_set() and time.monotonic() < deadline:
                try:
                    answered.append(len(s.recv(1 << 16)))
                except OSError:
                    pass

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        chunk = PING * 512
        try:
            while not stop.is_set() and time.monotonic() < deadline:
                s.sendall(chunk)
        except OSError:
            pass
        reader.join(5)
        s.close()

    def ping_once() -> float | None:
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.settimeout(4)
        t0 = time.monotonic()
        try:
            c.connect(path)
            c.sendall(PING)
            buf = b""
            while b"\n" not in buf:
                got = c.recv(4096)
                if not got:
                    return None
                buf += got
            return time.monotonic() - t0 if b'"pong":true' in buf else None
        except OSError:
            return None
        finally:
            c.close()

    result: list[float | None] = []

    def prober() -> None:  # a plain thread: it does not need the event loop to get going
        while sum(answered) < 100_000 and time.monotonic() < deadline:  # the flood is being answered
            time.sleep(0.005)
        result.append(ping_once())
        stop.set()

    flooder = threading.Thread(target=flood, daemon=True)
    probe = threading.Thread(target=prober, daemon=True)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve_listener, lsock, tg)
        flooder.start()
        probe.start()
        await anyio.to_thread.run_sync(probe.join, 10)
        await anyio.to_thread.run_sync(flooder.join, 10)
        server.begin_stop()
        assert await server.wait_accept_stopped(5)
        tg.cancel_scope.cancel()
    lsock.close()
    took = result[0] if result else None
    assert took is not None and took < 1.0, took


async def test_a_frame_the_parser_cannot_handle_gets_a_parse_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception the parser did not type (msgspec < 0.23 raised UnicodeDecodeError on invalid UTF-8)
    is answered as a parse error instead of ending the connection task, and with it the daemon."""
    import json

    from ctxlifed import protocol as P

    def broken(frame: bytes, *, max_batch: int) -> Any:
        raise UnicodeDecodeError("utf-8", frame, 0, 1, "invalid start byte")

    async def dispatch(method: str, params: bytes, rid: Any = None) -> Any:
        raise AssertionError("never dispatched")

    monkeypatch.setattr(P, "parse_message", broken)
    reply = await Server(dispatch, Limits()).handle_frame(b'{"jsonrpc":"2.0","method":"\xff","id":1}')
    assert reply is not None
    obj = json.loads(reply)
    assert obj["id"] is None and obj["error"]["code"] == -32700 and obj["error"]["data"]["name"] == "parse_error"


def test_an_accepted_socket_is_used_only_through_the_connection_class() -> None:
    """Issue 18 item 5: the raw connection socket (its recv, send and close, and the ``sock`` that holds
    it) is touched only inside ``_Conn``, which holds the deadline and close rules."""
    import ast

    import ctxlifed.server.listener as L

    tree = ast.parse(Path(L.__file__).read_text(encoding="utf-8"))
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "_Conn":
            inside.update(id(n) for n in ast.walk(node))
    raw = {"recv", "recv_into", "send", "sendall", "sendmsg", "recvmsg", "shutdown", "sock"}
    # ``conn.send`` is the class's own method (with its deadline); anything else named so is raw.
    outside = [f"line {n.lineno}: .{n.attr}" for n in ast.walk(tree)
               if isinstance(n, ast.Attribute) and n.attr in raw and id(n) not in inside
               and not (n.attr == "send" and isinstance(n.value, ast.Name) and n.value.id == "conn")]
    assert outside == []
    assert any(isinstance(n, ast.ClassDef) and n.name == "_Conn" for n in ast.walk(tree))


async def test_the_server_tells_when_a_connection_waits_to_be_accepted(short_tmp: Path) -> None:
    """``connection_waiting`` (the deriver's probe, scheduler rule 3) is true from a client's connect
    until the accept loop has taken the connection, and false otherwise."""
    server = Server(_pong, Limits())
    path = str(short_tmp / "w.sock")
    lsock = _listening(path)
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve_listener, lsock, tg)
        await anyio.wait_all_tasks_blocked()
        assert not server.connection_waiting()
        client.connect(path)  # queued by the kernel; the event loop has not run since
        assert server.connection_waiting()
        assert server.scheduler._arrival_probe()  # the server's probe is the scheduler's
        with anyio.fail_after(10):  # the event loop runs: the accept loop takes it
            while server.connection_waiting():
                await anyio.sleep(0)
        server.begin_stop()
    client.close()
    lsock.close()
