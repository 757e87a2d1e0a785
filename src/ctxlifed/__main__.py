"""``ctxlifed`` / ``python -m ctxlifed``: run the daemon in the foreground.

Rules:
- Foreground only (systemd, launchd and the shim's detached spawn all want that); no double fork.
- Exit codes: 0 clean stop; 1 unexpected failure; 2 unsafe runtime or data dir (the message names
  the fix); 3 another daemon already runs on this socket or this data dir (the message names its pid
  and socket; ``--spawned`` turns this into a silent 0: the race was lost to a sibling, which is fine);
  4 the store cannot be opened safely (the message names the file and the fix).
- The log goes where ``runtime.logs.choose_log_file`` says: stderr when it is useful, else (stderr
  is /dev/null, as when the hook shim starts us) the rotating ``<data>/ctxlifed.log``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from . import __version__
from .runtime import paths as P


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="ctxlifed", description="ctxlifed: the context-lifecycle daemon for Claude Code.")
    ap.add_argument("--socket", help="socket path (env CTXLIFED_SOCKET; default $XDG_RUNTIME_DIR/ctxlifed/ctxlifed.sock,"
                                     " else <data dir>/run/ctxlifed.sock)")
    ap.add_argument("--data-dir", help="data folder (env CTXLIFED_DATA_DIR; default $XDG_DATA_HOME/ctxlifed)")
    ap.add_argument("--config", help="config file (env CTXLIFED_CONFIG; default $XDG_CONFIG_HOME/ctxlifed/config.toml)")
    ap.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    ap.add_argument("--log-json", action="store_true", default=None, help="JSON log lines even on a tty")
    ap.add_argument("--log-file", help="log to this file, rotated at CTXLIFED_LOG_MAX_MB (default: stderr,"
                                       " or <data dir>/ctxlifed.log when stderr is /dev/null)")
    ap.add_argument("--spawned", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--version", action="version", version=f"ctxlifed {__version__}")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    paths = P.resolve(args.socket, args.data_dir, args.config)
    from .daemon import run_daemon
    from .runtime import logs
    from .runtime.dirs import UnsafeDir, ensure_data_dir
    from .runtime.lock import AlreadyRunning
    from .store.db import StoreUnusableError

    os.umask(0o077)  # before the first file (the log) is made
    log_file: str | None = None
    try:
        log_file = logs.choose_log_file(args.log_file, paths.log_file)
        if log_file == paths.log_file:
            ensure_data_dir(paths.data_dir)
        logs.configure(json=args.log_json, level=getattr(logging, args.log_level.upper()), log_file=log_file)
        if log_file is not None and sys.stderr is None:  # stderr was closed: now it is the log file
            sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        return run_daemon(paths)
    except AlreadyRunning as exc:
        if args.spawned:
            if log_file is not None:  # the shim's spawn: say in the log why this one did not start
                import structlog

                structlog.get_logger("ctxlifed").info("not_started", reason="already_running", pid=exc.pid,
                                                      socket=exc.socket)
            return 0
        print(f"ctxlifed: {exc}", file=sys.stderr)
        return 3
    except UnsafeDir as exc:
        print(f"ctxlifed: unsafe directory: {exc}", file=sys.stderr)
        return 2
    except StoreUnusableError as exc:
        print(f"ctxlifed: cannot open the store: {exc}", file=sys.stderr)
        return 4
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
