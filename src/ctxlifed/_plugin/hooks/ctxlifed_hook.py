"""ctxlifed hook shim: Claude Code runs this for every hook event.

    <absolute python> -I -S ctxlifed_hook.py   (hook JSON on stdin)

Rules:
- Standard library only, and only what a socket client needs (``_socket``, the C socket type:
  ``socket.py`` would cost more than the rest of the start-up together; os, sys, time). json and
  subprocess are imported lazily on the rare paths that need them: the usual reply (an empty or
  plain stdout) is recognised byte for byte. It must start fast.
- Fail open, always: daemon absent, hung (SIGSTOP), slow, or answering garbage -> exit 0 with empty
  stdout before the deadline (``CTXLIFED_HOOK_DEADLINE`` seconds, default 1.5 in all; SessionEnd
  gets at most 1.0 because Claude Code gives all SessionEnd hooks 1.5 s together). A transport
  fault is never exit 2 and never prints.
- Stdout carries exactly what the daemon said to print, nothing else. Diagnostics never go to
  stdout; there are none on stderr either (Claude Code shows stderr of failing hooks).
- No event is lost for want of a daemon: unless the daemon acknowledged the event (a result for
  this request's id) or refused it for good (any other error for this id), the event is appended to
  a bounded per-user spool file that the daemon ingests later. So: absent, hung, slow, reset,
  garbage or a reply for another id, and the "not now" errors (``storage_full``, ``busy``,
  ``shutting_down``) all spool. Each request carries a random id, so an event both spooled and
  later processed is stored once.
- The spool is a store too: before a payload is written to it, secrets are redacted with the
  daemon's own rules (``core/redact.py``, loaded from the installed package next to this file, only
  on this rare path), unless ``CTXLIFED_REDACT=0``. If the rules cannot be loaded (a copy of this
  file outside the package), the payload is spooled as is: the daemon redacts it on ingestion, and
  the spool file is 0600 in a 0700 folder.
- Daemon absent (ENOENT / ECONNREFUSED): start it fully detached (new session, stdio on /dev/null,
  no inherited descriptors) so Claude Code's pipe closes as soon as this process exits.
"""

import os
import _socket as socket  # the C socket type: all a Unix-socket client needs, ~10x cheaper to import
import sys
import time

SHIM_VERSION = "1"
MAX_PAYLOAD = 960 * 1024  # stays under the daemon's 1 MiB frame cap with the envelope
MAX_REPLY = 1 << 20
MAX_STDIN = 64 << 20
# Daemon errors meaning "not stored, try later" (protocol/_errors.py): storage_full, busy, shutting_down.
RETRY_LATER = (-32000, -32001, -32002)
SPOOL_MAX = int(os.environ.get("CTXLIFED_SPOOL_MAX", str(64 << 20)) or 0)


def _runtime_socket():
    p = os.environ.get("CTXLIFED_SOCKET")
    if p:
        return os.path.abspath(os.path.expanduser(p))
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    base = os.path.join(xdg, "ctxlifed") if xdg and os.path.isabs(xdg) else "/tmp/ctxlifed-%d" % os.getuid()
    return os.path.join(base, "ctxlifed.sock")


def _data_dir():
    p = os.environ.get("CTXLIFED_DATA_DIR")
    if not p:
        base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
        p = os.path.join(base, "ctxlifed")
    return os.path.abspath(os.path.expanduser(p))


def _shrink(payload):
    """Cut long strings so the payload fits MAX_PAYLOAD; marks every cut. Rare path."""
    import json

    try:
        obj = json.loads(payload)
    except ValueError:
        return None
    limit = 64 * 1024
    while True:
        def cut(v):
            if isinstance(v, str) and len(v) > limit:
                return v[: limit // 2] + "\n[... %d characters cut by the ctxlifed shim ...]\n" % (len(v) - limit) + v[-limit // 2:]
            if isinstance(v, dict):
                return {k: cut(x) for k, x in v.items()}
            if isinstance(v, list):
                return [cut(x) for x in v]
            return v

        out = json.dumps(cut(obj), ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
        if len(out) <= MAX_PAYLOAD or limit < 256:
            return out if len(out) <= MAX_PAYLOAD else None
        limit //= 4


def _redacted(payload):
    """``payload`` with secrets redacted by core/redact.py, or unchanged if that is not possible."""
    if os.environ.get("CTXLIFED_REDACT", "1").strip().lower() in ("0", "false", "no", "off"):
        return payload
    try:
        import importlib.util
        import json

        here = os.path.dirname(os.path.realpath(__file__))  # through a link (clients/) to the package
        for rel in (("..", "core", "redact.py"), ("..", "..", "core", "redact.py")):
            path = os.path.normpath(os.path.join(here, *rel))
            if not os.path.isfile(path):
                continue
            spec = importlib.util.spec_from_file_location("_ctxlifed_redact", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            obj, n = mod.redact_obj(json.loads(payload))
            if not n:
                return payload
            return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
    except Exception:
        pass
    return payload


def _spool(rid, payload):
    payload = _redacted(payload)
    try:
        d = _data_dir()
        os.makedirs(d, mode=0o700, exist_ok=True)
        path = os.path.join(d, "spool.jsonl")
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX)
            if SPOOL_MAX and os.fstat(fd).st_size + len(payload) > SPOOL_MAX:
                return False
            line = b'{"rid":"' + rid + b'","ts":' + repr(time.time()).encode() + b',"payload":' + payload + b"}\n"
            os.write(fd, line)
            return True
        finally:
            os.close(fd)
    except OSError:
        return False


def _spawn():
    """Start the daemon detached, at most once every few seconds."""
    try:
        d = _data_dir()
        os.makedirs(d, mode=0o700, exist_ok=True)
        marker = os.path.join(d, "spawn.stamp")
        try:
            if time.time() - os.stat(marker).st_mtime < 5.0:
                return
        except OSError:
            pass
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        os.close(fd)
        os.utime(marker)
        cmd = os.environ.get("CTXLIFED_DAEMON_CMD")
        import subprocess

        argv = cmd.split() if cmd else [sys.executable, "-m", "ctxlifed", "--spawned"]
        subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            start_new_session=True,
            cwd="/",
        )
    except Exception:
        pass


def _exchange(path, frame, deadline):
    """Send one frame and return the reply line, or raise on any fault or at the deadline."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        while True:
            s.settimeout(max(0.001, deadline - time.monotonic()))
            try:
                s.connect(path)
                break
            except (BlockingIOError, InterruptedError):
                # AF_UNIX: the daemon's listen backlog is full (a burst); retry until the deadline.
                if time.monotonic() + 0.005 >= deadline:
                    raise TimeoutError("backlog full") from None
                s.close()
                time.sleep(0.005)
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.sendall(frame)
        buf = b""
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("deadline")
            s.settimeout(left)
            chunk = s.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
            if len(buf) > MAX_REPLY:
                raise ValueError("reply too large")
        return buf.split(b"\n", 1)[0]
    finally:
        s.close()


_NOT_PLAIN = bytes(range(32)) + b'"\\'


def _plain_answer(line, rid):
    """The usual reply decoded without importing json: the daemon's exact encoding of a result whose
    stdout needs no unescaping (empty, most of the time). None for anything else (json decides)."""
    head = b'{"jsonrpc":"2.0","id":"' + rid + b'","result":{"stdout":"'
    if not line.startswith(head):
        return None
    rest = line[len(head):]
    for code, tail in ((0, b'","exit_code":0}}'), (2, b'","exit_code":2}}')):
        if rest.endswith(tail):
            raw = rest[: len(rest) - len(tail)]
            if len(raw.translate(None, _NOT_PLAIN)) != len(raw):
                return None
            try:
                return raw.decode("utf-8"), code
            except UnicodeDecodeError:
                return None
    return None


def _answer(line, rid):
    """(stdout, exit code) from a reply; None: acknowledged or refused, print nothing; False: spool."""
    plain = _plain_answer(line, rid)
    if plain is not None:
        return plain
    import json

    msg = json.loads(line)
    if not isinstance(msg, dict):
        return False
    err = msg.get("error")
    if isinstance(err, dict) and err.get("code") in RETRY_LATER and msg.get("id") in (rid.decode(), None):
        return False
    if msg.get("id") != rid.decode():
        return False  # not an answer to this event: not acknowledged
    res = msg.get("result")
    if not isinstance(res, dict):
        return None
    out = res.get("stdout", "")
    code = res.get("exit_code", 0)
    if not isinstance(out, str) or not isinstance(code, int) or isinstance(code, bool) or code not in (0, 2):
        return None
    return out, code


def run(data, now=None):
    """Return (stdout text, exit code). Never raises for a transport fault."""
    start = time.monotonic() if now is None else now
    try:
        budget = float(os.environ.get("CTXLIFED_HOOK_DEADLINE", "1.5"))
    except ValueError:
        budget = 1.5
    if b'"SessionEnd"' in data[:4096] or b'"SessionEnd"' in data[-4096:]:
        budget = min(budget, 1.0)
    deadline = start + max(0.05, budget)
    payload = data.strip()
    if not payload.startswith(b"{"):
        return "", 0
    # Raw newlines can only be whitespace between JSON tokens: replacing them keeps the value.
    payload = payload.replace(b"\r", b" ").replace(b"\n", b" ")
    if len(payload) > MAX_PAYLOAD:
        payload = _shrink(payload)
        if payload is None:
            return "", 0
    rid = os.urandom(8).hex().encode()
    frame = b'{"jsonrpc":"2.0","id":"' + rid + b'","method":"hook","params":' + payload + b"}\n"
    path = _runtime_socket()
    try:
        line = _exchange(path, frame, deadline)
    except (FileNotFoundError, ConnectionRefusedError):
        _spool(rid, payload)
        _spawn()
        return "", 0
    except Exception:
        # Hung, slow, reset or garbage mid-stream: not acknowledged, so keep it for later.
        _spool(rid, payload)
        return "", 0
    try:
        got = _answer(line, rid)
    except Exception:
        got = False  # garbage: not acknowledged
    if got is False:  # not acknowledged, or the daemon could not store it now: keep it for later
        _spool(rid, payload)
        return "", 0
    if got is None:
        return "", 0
    return got


def main():
    code = 0
    try:
        chunks = []
        size = 0
        while True:
            b = os.read(0, 1 << 20)
            if not b:
                break
            size += len(b)
            if size > MAX_STDIN:
                os._exit(0)
            chunks.append(b)
        out, code = run(b"".join(chunks))
        if out:
            view = memoryview(out.encode("utf-8", "replace"))
            while view:
                view = view[os.write(1, view):]
    except BaseException:
        os._exit(0)
    os._exit(code if code in (0, 2) else 0)


if __name__ == "__main__":
    main()
