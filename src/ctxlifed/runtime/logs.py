"""Where the daemon's log goes, and what a log line may hold.

Rules:
- Destination (``choose_log_file``): ``--log-file`` when given. Otherwise stderr when it is useful
  (a tty, a pipe or socket such as the journal, a file somebody chose), and the rotating file
  ``<data>/ctxlifed.log`` when it is not: stderr closed or ``/dev/null`` (the hook shim starts the
  daemon so), or stderr already being that very file (``ctxlifectl daemon start``, launchd).
- A log file is written through ``logging.handlers.RotatingFileHandler``: at ``CTXLIFED_LOG_MAX_MB``
  (default ``LOG_MAX_MB``) it rotates into ``.1`` … ``.<LOG_BACKUPS>``; files are 0600. The process's
  stdout and stderr are pointed at the current file (a crash's last words land there too), again
  after every rotation.
- Every field is redacted (``core.redact``) and capped: ``FIELD_MAX`` characters a string,
  ``ITEMS_MAX`` items a list or dict, ``DEPTH_MAX`` levels of nesting, and ``LINE_MAX`` characters a
  rendered line. A client chooses method names, ids and error texts: it must not choose the log.
- Repeated lines are rate-limited: at most ``BURST`` lines of one kind (level, event, outcome) per
  ``WINDOW_S``; the rest are dropped and counted, and ``flush_suppressed`` (the daemon calls it
  every second and at stop) reports each count once, as a ``log_suppressed`` line.
- JSON lines unless the destination is a tty; tracebacks carry no local variables (locals hold hook
  payloads, which may hold secrets).
- Configured once, by the daemon's main, before anything logs (module loggers bind once and keep it).
"""

from __future__ import annotations

import json as _json
import logging
import logging.handlers
import os
import stat
import sys
import time
from collections.abc import Callable
from typing import Any

import structlog

from ..core.redact import redact

LOG_MAX_MB = 10.0
LOG_BACKUPS = 3
MIN_LOG_BYTES = 4096
FIELD_MAX = 512  # characters of one string field
REDACT_SPAN = 8192  # characters of a long field redacted before the cut (a secret across the cut goes whole)
ITEMS_MAX = 64  # items of a list or dict (a list keeps its first and last halves)
DEPTH_MAX = 6  # nesting levels (an exception's frames sit at depth 5)
LINE_MAX = 16384  # characters of a rendered line
BURST = 20  # lines of one kind per window
WINDOW_S = 10.0
MAX_KINDS = 1024  # kinds tracked by the rate limiter (event and outcome names are code constants)
_OWN_KEYS = frozenset({"timestamp", "level"})

# -- where ---------------------------------------------------------------------------------------


def _stderr_stat() -> os.stat_result | None:
    try:
        return os.fstat(2)
    except OSError:
        return None


def stderr_is_useless() -> bool:
    """True when stderr is closed or ``/dev/null``: what is written there is lost."""
    st = _stderr_stat()
    if st is None:
        return True
    if not stat.S_ISCHR(st.st_mode):
        return False
    try:
        null = os.stat(os.devnull)
    except OSError:
        return False
    return st.st_rdev == null.st_rdev


def stderr_is_file(path: str) -> bool:
    """True when stderr is the regular file ``path`` (same device and inode)."""
    st = _stderr_stat()
    if st is None or not stat.S_ISREG(st.st_mode):
        return False
    try:
        other = os.stat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (other.st_dev, other.st_ino)


def choose_log_file(flag: str | None, default_file: str) -> str | None:
    """The file to log to, or None to log to stderr (see the module rules)."""
    if flag:
        return os.path.abspath(os.path.expanduser(flag))
    if stderr_is_useless() or stderr_is_file(default_file):
        return default_file
    return None


def log_max_bytes(env: dict[str, str] | None = None) -> int:
    """``CTXLIFED_LOG_MAX_MB`` (a number of MiB, fractions allowed) in bytes; a bad value -> the default."""
    raw = (os.environ if env is None else env).get("CTXLIFED_LOG_MAX_MB", "")
    try:
        mb = float(raw) if raw.strip() else LOG_MAX_MB
    except ValueError:
        mb = LOG_MAX_MB
    if not mb > 0:
        mb = LOG_MAX_MB
    return max(MIN_LOG_BYTES, int(mb * (1 << 20)))


class RotatingLog(logging.handlers.RotatingFileHandler):
    """A 0600 rotating file; with ``redirect_std`` the process's stdout/stderr follow the current file."""

    def __init__(self, path: str, max_bytes: int, backups: int, *, redirect_std: bool) -> None:
        self.redirect_std = redirect_std
        super().__init__(path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8")
        self.setFormatter(logging.Formatter("%(message)s"))
        self._adopt()

    def _adopt(self) -> None:
        if self.stream is None:
            return
        fd = self.stream.fileno()
        os.fchmod(fd, 0o600)
        if self.redirect_std:
            for std in (sys.stdout, sys.stderr):
                try:
                    if std is not None:
                        std.flush()
                except (OSError, ValueError):
                    pass
            for target in (1, 2):
                if fd != target:
                    os.dup2(fd, target)

    def doRollover(self) -> None:  # noqa: N802 - the stdlib's name
        super().doRollover()
        self._adopt()


class FileLogger:
    """The structlog logger writing rendered lines to a :class:`RotatingLog`."""

    def __init__(self, handler: logging.Handler) -> None:
        self._handler = handler

    def msg(self, message: str) -> None:
        self._handler.handle(logging.makeLogRecord({"msg": message, "levelno": logging.INFO, "levelname": "INFO"}))

    log = debug = info = warn = warning = error = err = critical = fatal = exception = failure = msg


class _FileLoggerFactory:
    def __init__(self, handler: logging.Handler) -> None:
        self._logger = FileLogger(handler)

    def __call__(self, *args: Any) -> FileLogger:
        return self._logger


# -- what ------------------------------------------------------------------------------------------


def clean_str(text: str) -> str:
    """``text`` redacted and cut to ``FIELD_MAX`` characters (the cut says how long it was)."""
    red, _n = redact(text[:REDACT_SPAN])
    if len(text) <= FIELD_MAX and len(red) <= FIELD_MAX:
        return red
    return f"{red[:FIELD_MAX]}…[cut: {len(text)} characters]"


def clean(value: Any, depth: int = 0) -> Any:
    """``value`` with every string redacted and capped, and its size and nesting bounded."""
    if value is None or isinstance(value, (bool, float)):
        return value
    if isinstance(value, int):
        return value if -(1 << 63) <= value < (1 << 64) else f"<an integer of {value.bit_length()} bits>"
    if isinstance(value, str):
        return clean_str(value)
    if depth >= DEPTH_MAX:
        return clean_str(f"<{type(value).__name__} nested too deep>")
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for i, (k, v) in enumerate(value.items()):
            if i >= ITEMS_MAX:
                out["…"] = f"{len(value) - ITEMS_MAX} more items"
                break
            out[clean_str(str(k))] = clean(v, depth + 1)
        return out
    if isinstance(value, (list, tuple, set, frozenset)):
        seq = list(value)
        if len(seq) > ITEMS_MAX:
            half = ITEMS_MAX // 2
            return ([clean(v, depth + 1) for v in seq[:half]] + [f"… {len(seq) - ITEMS_MAX} more items …"]
                    + [clean(v, depth + 1) for v in seq[-half:]])
        return [clean(v, depth + 1) for v in seq]
    try:
        text = str(value)
    except Exception:  # noqa: BLE001 - a value that cannot print itself still leaves a line
        text = f"<{type(value).__name__}>"
    return clean_str(text)


def sanitize(_logger: Any, _name: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    """structlog processor: every field but our own timestamp and level through :func:`clean`."""
    for k, v in event_dict.items():
        if k not in _OWN_KEYS and k != "exc_info":
            event_dict[k] = clean(v)
    return event_dict


class RateLimit:
    """structlog processor: at most ``burst`` lines of one kind per ``window_s``; counts the rest."""

    def __init__(self, burst: int = BURST, window_s: float = WINDOW_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.burst = burst
        self.window_s = window_s
        self.clock = clock
        # kind -> [window start, lines in the window, lines dropped in the window]
        self._windows: dict[tuple[str, str, str], list[float]] = {}

    @staticmethod
    def kind(name: str, event_dict: dict[str, Any]) -> tuple[str, str, str]:
        return (str(event_dict.get("level", name)), str(event_dict.get("event", ""))[:128],
                str(event_dict.get("outcome", ""))[:128])

    def __call__(self, _logger: Any, name: str, event_dict: dict[str, Any]) -> dict[str, Any]:
        now = self.clock()
        key = self.kind(name, event_dict)
        w = self._windows.get(key)
        if w is None or now - w[0] >= self.window_s:
            if w is not None and w[2]:
                event_dict["dropped_before"] = int(w[2])  # the previous window's, not flushed yet
            elif w is None and len(self._windows) >= MAX_KINDS:
                self._windows.clear()
            self._windows[key] = w = [now, 0, 0]
        w[1] += 1
        if w[1] > self.burst:
            w[2] += 1
            raise structlog.DropEvent
        return event_dict

    def take_suppressed(self, *, force: bool = False) -> list[tuple[tuple[str, str, str], int]]:
        """Kinds whose window ended (every kind, with ``force``) with lines dropped, and how many;
        each count is returned once."""
        now = self.clock()
        out = []
        for key, w in list(self._windows.items()):
            if w[2] and (force or now - w[0] >= self.window_s):
                out.append((key, int(w[2])))
                del self._windows[key]
        return out


_limiter = RateLimit()


def flush_suppressed(*, force: bool = False) -> None:
    """Log one ``log_suppressed`` line for each kind of line dropped by the rate limit."""
    lg = structlog.get_logger("ctxlifed.log")
    for (level, event, outcome), n in _limiter.take_suppressed(force=force):
        lg.warning("log_suppressed", kind=event, kind_level=level, outcome=outcome or None, dropped=n,
                   window_s=_limiter.window_s)


class CappedJSON:
    """structlog renderer: a JSON line of at most ``LINE_MAX`` characters (else a short line that
    says what was cut)."""

    def __call__(self, _logger: Any, _name: str, event_dict: dict[str, Any]) -> str:
        line = _json.dumps(event_dict, default=str)
        if len(line) <= LINE_MAX:
            return line
        short = {k: event_dict[k] for k in ("event", "level", "timestamp") if k in event_dict}
        short["line_cut"] = len(line)
        return _json.dumps(short, default=str)


# -- configure -------------------------------------------------------------------------------------


def configure(*, json: bool | None = None, level: int = logging.INFO, log_file: str | None = None,
              max_bytes: int | None = None, backups: int = LOG_BACKUPS, redirect_std: bool = True,
              limiter: RateLimit | None = None) -> None:
    """Configure structlog for the daemon: to ``log_file`` (rotating) or to stderr."""
    global _limiter
    _limiter = limiter if limiter is not None else RateLimit()
    factory: Any
    if log_file is not None:
        json = True
        handler = RotatingLog(log_file, log_max_bytes() if max_bytes is None else max_bytes, backups,
                              redirect_std=redirect_std)
        factory = _FileLoggerFactory(handler)
    else:
        if json is None:
            json = not (sys.stderr is not None and sys.stderr.isatty())
        factory = structlog.PrintLoggerFactory(file=sys.stderr)
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        _limiter,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if json:
        from structlog.tracebacks import ExceptionDictTransformer

        no_locals = structlog.processors.ExceptionRenderer(ExceptionDictTransformer(show_locals=False))
        processors += [no_locals, sanitize, CappedJSON()]
    else:
        processors += [sanitize, structlog.dev.ConsoleRenderer(colors=False,
                                                               exception_formatter=structlog.dev.plain_traceback)]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=factory,
        # Module loggers may bind once and keep it (a lazy proxy re-binds on every call, even a
        # filtered one).
        cache_logger_on_first_use=True,
    )
