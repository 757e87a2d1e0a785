"""ctxlifed hook shim proper: ``ctxlifed_hook.py`` (the script Claude Code runs for every hook event,
``<absolute python> -I -S ctxlifed_hook.py`` with the hook JSON on stdin) loads this module from
its cached bytecode and calls :func:`main` with the script's start time.

Rules:
- Standard library only, and only what a socket client needs (``_socket``, the C socket type:
  ``socket.py`` would cost more than the rest of the start-up together; os, sys, time). json and
  subprocess are imported lazily on the rare paths that need them: the daemon's usual reply (an
  empty stdout, or a briefing whose JSON string escapes are decoded here) is recognised byte for
  byte; anything else goes to json. It must start fast.
- Fail open, always: daemon absent, hung (SIGSTOP), slow, untrusted or answering garbage -> exit 0
  with empty stdout before the deadline. The deadline counts from this process's start, spooling
  included: ``CTXLIFED_HOOK_DEADLINE`` seconds (default 1.5, capped at 4.0, under Claude Code's
  5 s hook timeout; SessionEnd gets at most 1.0 because Claude Code gives all SessionEnd hooks
  1.5 s together); the daemon gets that minus a reserve kept for spooling. A transport fault is
  never exit 2 and never prints.
- Stdout carries exactly what the daemon said to print, nothing else. Diagnostics never go to
  stdout; there are none on stderr either (Claude Code shows stderr of failing hooks).
- Trust before the first byte: the socket's folder must be ours and writable by nobody else, the
  socket ours, and the peer's uid ours (SO_PEERCRED on Linux, LOCAL_PEERCRED on macOS and the
  BSDs). Otherwise the event is spooled (in the data dir, never next to the untrusted socket),
  nothing is printed and no daemon is started; ``ctxlifectl doctor`` says why.
- Default socket (as ``runtime/paths.py``): ``CTXLIFED_SOCKET`` > ``$XDG_RUNTIME_DIR/ctxlifed/
  ctxlifed.sock`` > ``<data dir>/run/ctxlifed.sock``, and ``/tmp/ctxlifed-<uid>/ctxlifed.sock``
  only when that path does not fit a socket address (103 bytes). Socket absent (ENOENT /
  ECONNREFUSED): the running daemon's lock file (``<data dir>/ctxlifed.lock``: ours, not writable
  by others, one JSON line naming its socket) may name another socket; that one is tried, with the
  same checks, before a daemon is started.
- No event is lost for want of a daemon: unless the daemon acknowledged the event (a result for
  this request's id) or refused it for good (any other error for this id), the event is appended to
  a bounded per-user spool file that the daemon ingests later. So: absent, hung, slow, reset,
  untrusted, garbage or a reply for another id, and the "not now" errors (``storage_full``,
  ``busy``, ``shutting_down``, ``storage_unavailable``) all spool. Each request carries a random
  id, so an event both spooled and later processed is stored once.
- Where the spool lives: ``<data dir>/spool.jsonl``; when that cannot be written (disk full,
  read-only, I/O error, at its bound) ``spool.jsonl`` in the socket's folder (the runtime dir, a
  tmpfs under ``$XDG_RUNTIME_DIR``), if that folder is trusted. An event kept nowhere (or too large
  even when cut) is counted in a ``dropped`` file (a decimal count, 0600; data dir, else runtime
  dir) that ``ctxlifectl status`` and ``doctor`` show.
- A hung daemon costs one deadline, not one per hook: a missed deadline leaves a ``stalled`` mark
  in the socket's folder; while it is there each hook gives the daemon only a short probe
  (``PROBE_S``; a full listen backlog ends it at once) before spooling, preparing the spool line
  while it waits, and the first answer in time removes the mark. A mark next to an absent socket
  is stale and removed.
- The spool is a store too: before a payload is written to it, secrets are redacted with the
  daemon's own rules (``core/redact.py``, loaded from the installed package next to this file, only
  on this rare path), unless ``CTXLIFED_REDACT=0``. If the rules cannot be loaded (a copy of this
  file outside the package), the payload is spooled as is: the daemon redacts it on ingestion, and
  the spool file is 0600 in a 0700 folder.
- The daemon does not see Claude Code's environment: Claude Code's auto-compaction overrides
  (``ENV_VARS``), when set to a whole number, are added to the payload as ``"ctxlifed_env":{...}``
  (a byte splice, no json import), so ``status`` says where auto-compaction really is.
- Daemon absent (ENOENT / ECONNREFUSED): start it fully detached (new session, stdio on /dev/null,
  no inherited descriptors) so Claude Code's pipe closes as soon as this process exits.
"""

import os
import _socket as socket  # the C socket type: all a Unix-socket client needs, far cheaper to import (bench/RESULTS.md)
import sys
import time

STARTED = time.monotonic()  # run as a script: the deadline counts from here (main() is usually given an earlier start)
SHIM_VERSION = "1"
ENV_VARS = ("CLAUDE_CODE_AUTO_COMPACT_WINDOW", "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE")  # forwarded in the payload
MAX_PAYLOAD = 960 * 1024  # stays under the daemon's 1 MiB frame cap with the envelope
MAX_REPLY = 1 << 20
MAX_STDIN = 64 << 20
# Daemon errors meaning "not stored, try later" (protocol/_errors.py): storage_full, busy,
# shutting_down, storage_unavailable.
RETRY_LATER = (-32000, -32001, -32002, -32007)
DEFAULT_SPOOL_MAX = 64 << 20
_spool_max = os.environ.get("CTXLIFED_SPOOL_MAX", "").strip()
SPOOL_MAX = int(_spool_max) if _spool_max.isascii() and _spool_max.isdigit() else DEFAULT_SPOOL_MAX  # 0: unbounded
RUNTIME_SPOOL_MAX = 16 << 20  # the fallback spool lives in memory (tmpfs)
DEFAULT_DEADLINE = 1.5
MAX_DEADLINE = 4.0  # Claude Code kills a hook at its timeout (5 s for ours); exit before it
SPOOL_RESERVE = 0.1  # of the deadline, kept for spooling (redaction loads its rules)
PROBE_S = 0.01  # while the daemon is marked stalled: how long a hook waits for it before spooling
MAX_SOCKET_PATH = 103  # sun_path: 107 usable bytes on Linux, 103 on macOS
UID = os.geteuid()
LOCK_NAME = "ctxlifed.lock"
SPOOL_NAME = "spool.jsonl"
STALLED_NAME = "stalled"
DROPPED_NAME = "dropped"


class Untrusted(Exception):
    """The socket, its folder or the process listening on it is not ours: send nothing."""


def _data_dir():
    p = os.environ.get("CTXLIFED_DATA_DIR")
    if not p:
        base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
        p = os.path.join(base, "ctxlifed")
    return os.path.abspath(os.path.expanduser(p))


def _runtime_socket():
    p = os.environ.get("CTXLIFED_SOCKET")
    if p:
        return os.path.abspath(os.path.expanduser(p))
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isabs(xdg):
        return os.path.join(xdg, "ctxlifed", "ctxlifed.sock")
    p = os.path.join(_data_dir(), "run", "ctxlifed.sock")
    if len(os.fsencode(p)) > MAX_SOCKET_PATH:
        p = "/tmp/ctxlifed-%d/ctxlifed.sock" % os.getuid()
    return p


def _private_dir(d):
    """Raise Untrusted unless folder ``d`` is ours and writable by nobody else (FileNotFoundError: absent)."""
    st = os.stat(d)
    if st.st_uid != UID:
        raise Untrusted("%s belongs to uid %d" % (d, st.st_uid))
    if st.st_mode & 0o022:
        raise Untrusted("%s is writable by others (mode %o)" % (d, st.st_mode & 0o777))


def _peer_uid(s):
    """The uid of the process at the other end of connected socket ``s``; None if the OS cannot tell."""
    if hasattr(socket, "SO_PEERCRED"):  # Linux: struct ucred {pid, uid, gid}
        return int.from_bytes(s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)[4:8], sys.byteorder)
    if sys.platform == "darwin" or "bsd" in sys.platform:  # LOCAL_PEERCRED at SOL_LOCAL: struct xucred
        return int.from_bytes(s.getsockopt(0, getattr(socket, "LOCAL_PEERCRED", 1), 76)[4:8], sys.byteorder)
    return None


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
        import json
        from importlib.machinery import SourceFileLoader  # far cheaper to import than importlib.util

        here = os.path.dirname(os.path.realpath(__file__))  # through a link (clients/) to the package
        for rel in (("..", "core", "redact.py"), ("..", "..", "core", "redact.py")):
            path = os.path.normpath(os.path.join(here, *rel))
            if not os.path.isfile(path):
                continue
            mod = type(os)("_ctxlifed_redact")
            mod.__file__ = path
            SourceFileLoader(mod.__name__, path).exec_module(mod)  # uses its cached bytecode
            obj, n = mod.redact_obj(json.loads(payload))
            if not n:
                return payload
            return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
    except Exception:
        pass
    return payload


def _append(d, line, bound):
    """Append ``line`` to the spool in folder ``d``; False if it cannot be kept there."""
    try:
        os.makedirs(d, mode=0o700, exist_ok=True)
        fd = os.open(os.path.join(d, SPOOL_NAME), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if bound and size + len(line) > bound:
                return False
            try:
                if os.write(fd, line) == len(line):
                    return True
            except OSError:
                pass
            os.ftruncate(fd, size)  # a short write (disk full) leaves no half line behind
            return False
        finally:
            os.close(fd)
    except OSError:
        return False


def _trusted_dir(d):
    """``d`` if it is (or can be made) a folder of ours that nobody else can write, else None."""
    try:
        os.makedirs(d, mode=0o700, exist_ok=True)
        _private_dir(d)
        return d
    except (OSError, Untrusted):
        return None


def _count_dropped(runtime_dir):
    """One more event kept nowhere: bump the ``dropped`` count (data dir, else the runtime dir)."""
    for d in (_data_dir(), runtime_dir):
        if d is None:
            continue
        try:
            fd = os.open(os.path.join(d, DROPPED_NAME), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        except OSError:
            continue
        try:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX)
            raw = os.read(fd, 32).strip()
            n = int(raw) if raw.isdigit() else 0
            out = b"%d\n" % (n + 1)
            if os.pwrite(fd, out, 0) == len(out):
                os.ftruncate(fd, len(out))
                return
        except OSError:
            pass
        finally:
            os.close(fd)


def _keep(rid, payload, runtime_dir, redacted=None):
    """Spool the event (data dir, else the trusted runtime dir ``runtime_dir``); count it if kept nowhere.
    ``redacted``: the payload already redacted, when it was."""
    payload = _redacted(payload) if redacted is None else redacted
    line = b'{"rid":"' + rid + b'","ts":' + repr(time.time()).encode() + b',"payload":' + payload + b"}\n"
    data = _data_dir()
    if _append(data, line, SPOOL_MAX):
        return True
    if runtime_dir is not None and os.path.realpath(runtime_dir) != os.path.realpath(data):
        if _trusted_dir(runtime_dir) and _append(runtime_dir, line, min(SPOOL_MAX or RUNTIME_SPOOL_MAX, RUNTIME_SPOOL_MAX)):
            return True
    _count_dropped(_trusted_dir(runtime_dir) if runtime_dir is not None else None)
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


def _exchange(path, frame, deadline, meanwhile=None):
    """Send one frame and return the reply line, or raise on any fault or at the deadline.

    Nothing is sent unless the folder, the socket and the peer are ours (else Untrusted);
    FileNotFoundError / ConnectionRefusedError: no daemon there; TimeoutError: none in time.
    ``meanwhile()`` runs once the frame is sent, while the daemon works; the reply is then still
    looked for even if the deadline passed meanwhile."""
    _private_dir(os.path.dirname(path))
    st = os.stat(path)
    if st.st_uid != UID or st.st_mode & 0o170000 != 0o140000:
        raise Untrusted("%s is not a socket of ours (uid %d)" % (path, st.st_uid))
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        while True:
            s.settimeout(max(0.001, deadline - time.monotonic()))
            try:
                s.connect(path)
                break
            except (BlockingIOError, InterruptedError):
                # AF_UNIX: the daemon's listen backlog is full (a burst); retry until the deadline.
                # A probe of a stalled daemon does not: a full backlog is its answer.
                if meanwhile is not None or time.monotonic() + 0.005 >= deadline:
                    raise TimeoutError("backlog full") from None
                s.close()
                time.sleep(0.005)
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        peer = _peer_uid(s)
        if peer is not None and peer != UID:
            raise Untrusted("the process listening on %s runs as uid %d" % (path, peer))
        s.sendall(frame)
        if meanwhile is not None:
            meanwhile()
            deadline = max(deadline, time.monotonic() + 0.002)
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


def _locked_socket(path):
    """The socket the running daemon's lock file names, when it is not ``path``; else None."""
    try:
        fd = os.open(os.path.join(_data_dir(), LOCK_NAME), os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if st.st_uid != UID or st.st_mode & 0o022 or st.st_mode & 0o170000 != 0o100000:
            return None
        raw = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    import json

    try:
        obj = json.loads(raw.split(b"\n", 1)[0])
    except ValueError:
        return None
    sock = obj.get("socket") if isinstance(obj, dict) else None
    if not isinstance(sock, str) or not os.path.isabs(sock) or os.path.normpath(sock) == os.path.normpath(path):
        return None
    return sock


def _mark(folder, stalled):
    """Set or clear the ``stalled`` mark of the daemon whose socket is in ``folder`` (trusted)."""
    path = os.path.join(folder, STALLED_NAME)
    try:
        if stalled:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600))
        else:
            os.unlink(path)
    except OSError:
        pass


_CONTROL = bytes(range(32))
_ESCAPES = {ord('"'): '"', ord("\\"): "\\", ord("/"): "/", ord("b"): "\b", ord("f"): "\f", ord("n"): "\n",
            ord("r"): "\r", ord("t"): "\t"}
_HEX = frozenset(b"0123456789abcdefABCDEF")


def _json_string(raw):
    """The text of ``raw``, the body of a JSON string (between its quotes), decoded without importing
    json (whose import, through ``re``, costs more than the rest of the shim's start). None when it is
    not exactly a valid string body or holds a lone surrogate: json decides then."""
    if len(raw.translate(None, _CONTROL)) != len(raw):
        return None
    parts = []
    i, n = 0, len(raw)
    try:
        while i < n:
            j = raw.find(b"\\", i)
            seg = raw[i:] if j < 0 else raw[i:j]
            if b'"' in seg:
                return None
            parts.append(seg.decode("utf-8"))
            if j < 0:
                break
            c = raw[j + 1] if j + 1 < n else -1
            if c in _ESCAPES:
                parts.append(_ESCAPES[c])
                i = j + 2
                continue
            if c != ord("u"):
                return None
            cp = _hex4(raw, j + 2)
            i = j + 6
            if 0xD800 <= cp < 0xDC00 and raw[i:i + 2] == b"\\u":
                low = _hex4(raw, i + 2)
                if 0xDC00 <= low < 0xE000:
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)
                    i += 6
            if 0xD800 <= cp < 0xE000:
                return None  # a lone surrogate
            parts.append(chr(cp))
    except (ValueError, UnicodeDecodeError):
        return None
    return "".join(parts)


def _hex4(raw, i):
    h = raw[i:i + 4]
    if len(h) != 4 or not all(b in _HEX for b in h):
        raise ValueError("not a \\u escape")
    return int(h, 16)


def _plain_answer(line, rid):
    """The usual reply decoded without importing json: the daemon's exact encoding of a result (an
    empty stdout most of the time; a SessionStart briefing, escaped, at the start of a session).
    None for anything else (json decides)."""
    head = b'{"jsonrpc":"2.0","id":"' + rid + b'","result":{"stdout":"'
    if not line.startswith(head):
        return None
    rest = line[len(head):]
    for code, tail in ((0, b'","exit_code":0}}'), (2, b'","exit_code":2}}')):
        if rest.endswith(tail):
            text = _json_string(rest[: len(rest) - len(tail)])
            return None if text is None else (text, code)
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


def _with_env(payload):
    """``payload`` (a JSON object) with the set ``ENV_VARS`` (digits only) in ``ctxlifed_env``."""
    parts = []
    for k in ENV_VARS:
        v = os.environ.get(k, "").strip()
        if v and v.isascii() and v.isdigit() and len(v) <= 12:
            parts.append(b'"' + k.encode() + b'":"' + v.encode() + b'"')
    if not parts:
        return payload
    rest = payload[1:].lstrip()
    return b'{"ctxlifed_env":{' + b",".join(parts) + b"}" + (b"" if rest.startswith(b"}") else b",") + rest


def _budget(data):
    """Seconds this hook may take, from the shim's start, spooling included."""
    try:
        budget = float(os.environ.get("CTXLIFED_HOOK_DEADLINE", DEFAULT_DEADLINE))
    except ValueError:
        budget = DEFAULT_DEADLINE
    if not budget > 0:  # also NaN
        budget = DEFAULT_DEADLINE
    budget = min(budget, MAX_DEADLINE)
    if b'"SessionEnd"' in data[:4096] or b'"SessionEnd"' in data[-4096:]:
        budget = min(budget, 1.0)
    return max(0.05, budget)


def _probe(folder, deadline, meanwhile):
    """(stalled, how long to wait, work to do while waiting) for the daemon whose socket is in ``folder``:
    marked stalled, it gets a short probe and the spool line is prepared meanwhile."""
    if not os.path.exists(os.path.join(folder, STALLED_NAME)):
        return False, deadline, None
    return True, min(deadline, time.monotonic() + PROBE_S), meanwhile


def run(data, now=None):
    """Return (stdout text, exit code). Never raises for a transport fault."""
    start = STARTED if now is None else now
    budget = _budget(data)
    deadline = start + budget - min(SPOOL_RESERVE, budget / 4)  # for the daemon; the rest is for the spool
    payload = data.strip()
    if not payload.startswith(b"{"):
        return "", 0
    path = _runtime_socket()
    folder = os.path.dirname(path)
    # Raw newlines can only be whitespace between JSON tokens: replacing them keeps the value.
    payload = _with_env(payload.replace(b"\r", b" ").replace(b"\n", b" "))
    if len(payload) > MAX_PAYLOAD:
        payload = _shrink(payload)
        if payload is None:
            _count_dropped(_trusted_dir(folder))
            return "", 0
    rid = os.urandom(8).hex().encode()
    frame = b'{"jsonrpc":"2.0","id":"' + rid + b'","method":"hook","params":' + payload + b"}\n"
    ready = []  # while stalled: the payload redacted for the spool while the probe waits
    stalled, wait, meanwhile = _probe(folder, deadline, lambda: ready.append(_redacted(payload)))
    try:
        try:
            line = _exchange(path, frame, wait, meanwhile)
        except (FileNotFoundError, ConnectionRefusedError):
            if stalled:
                _mark(folder, False)  # no daemon there any more: the mark is stale
            other = _locked_socket(path)  # the running daemon may listen elsewhere (another runtime dir)
            if other is None:
                raise
            path, folder = other, os.path.dirname(other)
            stalled, wait, meanwhile = _probe(folder, deadline, lambda: ready.append(_redacted(payload)))
            line = _exchange(path, frame, wait, meanwhile)
    except (FileNotFoundError, ConnectionRefusedError):
        if stalled:
            _mark(folder, False)  # the stalled daemon is gone; the next one is waited for again
        _keep(rid, payload, folder)
        _spawn()
        return "", 0
    except TimeoutError:
        if not stalled:
            _mark(folder, True)  # trusted: the exchange got past its checks
        _keep(rid, payload, folder, ready[0] if ready else None)
        return "", 0
    except Untrusted:
        _keep(rid, payload, None)  # never next to a socket we do not trust
        return "", 0
    except Exception:
        # Reset or garbage mid-stream: not acknowledged, so keep it for later.
        _keep(rid, payload, folder)
        return "", 0
    if stalled:
        _mark(folder, False)  # it answered in time: hooks wait for it again
    try:
        got = _answer(line, rid)
    except Exception:
        got = False  # garbage: not acknowledged
    if got is False:  # not acknowledged, or the daemon could not store it now: keep it for later
        _keep(rid, payload, folder)
        return "", 0
    if got is None:
        return "", 0
    return got


def main(started=None):
    """Read the hook event, forward it, print what the daemon said; ``started``: when the deadline counts from."""
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
        out, code = run(b"".join(chunks), started)
        if out:
            view = memoryview(out.encode("utf-8", "replace"))
            while view:
                view = view[os.write(1, view):]
    except BaseException:
        os._exit(0)
    os._exit(code if code in (0, 2) else 0)


if __name__ == "__main__":
    main()
