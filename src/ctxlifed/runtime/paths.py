"""Where ctxlifed keeps its socket, data and config.

Rules:
- Precedence for every path: explicit flag > environment variable > XDG default.
  Socket: ``CTXLIFED_SOCKET`` > ``$XDG_RUNTIME_DIR/ctxlifed/ctxlifed.sock`` > ``<data>/run/ctxlifed.sock``,
          and only when that is longer than ``MAX_SOCKET_PATH`` bytes, ``/tmp/ctxlifed-<uid>/ctxlifed.sock``.
          Every default lies in a folder another user cannot pre-create (a shared ``/tmp`` name is
          the last resort, and ``runtime.dirs`` refuses it when it is not ours and private).
  Data:   ``CTXLIFED_DATA_DIR`` > ``$XDG_DATA_HOME/ctxlifed`` > ``~/.local/share/ctxlifed``.
  Config: ``CTXLIFED_CONFIG`` > ``$XDG_CONFIG_HOME/ctxlifed/config.toml`` > ``~/.config/ctxlifed/config.toml``.
- Stdlib only and import-cheap: the CLI and the shim's spawn path use it.
- Nothing here creates or checks anything: see ``runtime.dirs`` for that.
- Two locks: ``Paths.data_lock`` (``<data>/ctxlifed.lock``) makes the data folder single-daemon,
  whatever socket each would serve; ``Paths.lock`` (beside the socket) guards the socket path.
  Both hold one JSON line ``{"pid": N, "socket": "/abs/path"}`` naming the daemon that holds them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

SOCKET_NAME = "ctxlifed.sock"
LOCK_NAME = "ctxlifed.lock"
DB_NAME = "ctxlifed.db"
SPOOL_NAME = "spool.jsonl"
LOG_NAME = "ctxlifed.log"
# A Unix socket path must fit sun_path: 107 usable bytes on Linux, 103 on macOS.
MAX_SOCKET_PATH = 103


def _env(name: str, env: dict[str, str] | None) -> str | None:
    v = (env if env is not None else os.environ).get(name)
    return v if v else None


def default_runtime_dir(env: dict[str, str] | None = None, data: str | None = None) -> str:
    """The folder of the default socket (``data``: the --data-dir flag, if any)."""
    xdg = _env("XDG_RUNTIME_DIR", env)
    if xdg and os.path.isabs(xdg):
        return os.path.join(xdg, "ctxlifed")
    run = os.path.join(data_dir(data, env), "run")
    if len(os.fsencode(os.path.join(run, SOCKET_NAME))) <= MAX_SOCKET_PATH:
        return run
    return f"/tmp/ctxlifed-{os.getuid()}"


def socket_path(flag: str | None = None, env: dict[str, str] | None = None, *, data: str | None = None) -> str:
    """The socket: ``flag`` > ``CTXLIFED_SOCKET`` > the default (``data``: the --data-dir flag, if any)."""
    p = flag or _env("CTXLIFED_SOCKET", env) or os.path.join(default_runtime_dir(env, data), SOCKET_NAME)
    return os.path.abspath(os.path.expanduser(p))


def data_dir(flag: str | None = None, env: dict[str, str] | None = None) -> str:
    p = flag or _env("CTXLIFED_DATA_DIR", env)
    if not p:
        base = _env("XDG_DATA_HOME", env) or os.path.join(os.path.expanduser("~"), ".local", "share")
        p = os.path.join(base, "ctxlifed")
    return os.path.abspath(os.path.expanduser(p))


def config_path(flag: str | None = None, env: dict[str, str] | None = None) -> str:
    p = flag or _env("CTXLIFED_CONFIG", env)
    if not p:
        base = _env("XDG_CONFIG_HOME", env) or os.path.join(os.path.expanduser("~"), ".config")
        p = os.path.join(base, "ctxlifed", "config.toml")
    return os.path.abspath(os.path.expanduser(p))


@dataclass(frozen=True)
class Paths:
    socket: str
    data_dir: str
    config: str

    @property
    def runtime_dir(self) -> str:
        return os.path.dirname(self.socket)

    @property
    def lock(self) -> str:
        """Guards the socket path: beside the socket."""
        return os.path.join(self.runtime_dir, LOCK_NAME)

    @property
    def data_lock(self) -> str:
        """Guards the data folder: one daemon per data folder, whatever its socket."""
        return os.path.join(self.data_dir, LOCK_NAME)

    @property
    def log_file(self) -> str:
        """The daemon's log when it has no useful stderr (and ``ctxlifectl daemon start``'s)."""
        return os.path.join(self.data_dir, LOG_NAME)

    @property
    def db(self) -> str:
        return os.path.join(self.data_dir, DB_NAME)

    @property
    def spool(self) -> str:
        return os.path.join(self.data_dir, SPOOL_NAME)

    @property
    def runtime_spool(self) -> str:
        """Where the shim spools when the data dir cannot take it (full, read-only, I/O error)."""
        return os.path.join(self.runtime_dir, SPOOL_NAME)

    @property
    def log_dir(self) -> str:
        return os.path.join(self.data_dir, "log")


def resolve(
    socket: str | None = None,
    data: str | None = None,
    config: str | None = None,
    env: dict[str, str] | None = None,
) -> Paths:
    return Paths(socket_path(socket, env, data=data), data_dir(data, env), config_path(config, env))
