"""Where ctxlifed keeps its socket, data and config.

Rules:
- Precedence for every path: explicit flag > environment variable > XDG default.
  Socket: ``CTXLIFED_SOCKET`` > ``$XDG_RUNTIME_DIR/ctxlifed/ctxlifed.sock`` > ``/tmp/ctxlifed-<uid>/ctxlifed.sock``.
  Data:   ``CTXLIFED_DATA_DIR`` > ``$XDG_DATA_HOME/ctxlifed`` > ``~/.local/share/ctxlifed``.
  Config: ``CTXLIFED_CONFIG`` > ``$XDG_CONFIG_HOME/ctxlifed/config.toml`` > ``~/.config/ctxlifed/config.toml``.
- Stdlib only and import-cheap: the CLI and the shim's spawn path use it.
- Nothing here creates or checks anything: see ``runtime.dirs`` for that.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

SOCKET_NAME = "ctxlifed.sock"
LOCK_NAME = "ctxlifed.lock"
DB_NAME = "ctxlifed.db"
SPOOL_NAME = "spool.jsonl"
# A Unix socket path must fit sun_path: 107 usable bytes on Linux, 103 on macOS.
MAX_SOCKET_PATH = 103


def _env(name: str, env: dict[str, str] | None) -> str | None:
    v = (env if env is not None else os.environ).get(name)
    return v if v else None


def default_runtime_dir(env: dict[str, str] | None = None) -> str:
    xdg = _env("XDG_RUNTIME_DIR", env)
    if xdg and os.path.isabs(xdg):
        return os.path.join(xdg, "ctxlifed")
    return f"/tmp/ctxlifed-{os.getuid()}"


def socket_path(flag: str | None = None, env: dict[str, str] | None = None) -> str:
    p = flag or _env("CTXLIFED_SOCKET", env) or os.path.join(default_runtime_dir(env), SOCKET_NAME)
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
        return os.path.join(self.runtime_dir, LOCK_NAME)

    @property
    def db(self) -> str:
        return os.path.join(self.data_dir, DB_NAME)

    @property
    def spool(self) -> str:
        return os.path.join(self.data_dir, SPOOL_NAME)

    @property
    def log_dir(self) -> str:
        return os.path.join(self.data_dir, "log")


def resolve(
    socket: str | None = None,
    data: str | None = None,
    config: str | None = None,
    env: dict[str, str] | None = None,
) -> Paths:
    return Paths(socket_path(socket, env), data_dir(data, env), config_path(config, env))
